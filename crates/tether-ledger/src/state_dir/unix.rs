//! The state-directory checks on Unix: owners and mode bits, opened
//! without following links.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::error::{Insecurity, LedgerError, Result};

/// Creates `dir` (0700) if missing and checks it (see the module docs).
pub(crate) fn secure_dir(dir: &Path) -> Result<()> {
    let io = |source| LedgerError::Io {
        path: dir.to_path_buf(),
        source,
    };
    if fs::symlink_metadata(dir).is_err() {
        // Missing (or unreadable: then the open below says why). The
        // recursive create follows links in the ancestors, which are
        // trusted, and makes missing ones 0700 too.
        match fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
        {
            Ok(()) => {}
            // Someone else made something there meanwhile: judged below.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
    }
    // Judged through a descriptor opened without following a link, so the
    // directory checked is the one whose mode is fixed.
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir);
    let file = match opened {
        Ok(file) => file,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
            return Err(insecure(dir, kind_problem(dir, Insecurity::NotADirectory)));
        }
        Err(e) => return Err(io(e)),
    };
    let meta = file.metadata().map_err(io)?;
    judge(dir, &meta)?;
    if meta.mode() & 0o077 != 0 {
        file.set_permissions(fs::Permissions::from_mode(0o700))
            .map_err(io)?;
    }
    Ok(())
}

/// Checks the file at `path` if there is one (see the module docs).
pub(crate) fn secure_file(path: &Path) -> Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(LedgerError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    if !meta.file_type().is_file() {
        return Err(insecure(path, kind_problem(path, Insecurity::NotAFile)));
    }
    judge(path, &meta)?;
    if meta.mode() & 0o077 != 0 {
        // The directory passed: nobody else can swap the file meanwhile.
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(|source| {
            LedgerError::Io {
                path: path.to_path_buf(),
                source,
            }
        })?;
    }
    Ok(())
}

/// A new file (it must not exist), 0600, for the store to fill before it
/// is renamed into place.
pub(crate) fn create_new_private(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// What names the file at `path` on disk: (device, inode).
pub(crate) fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    let meta = fs::metadata(path)?;
    Ok((meta.dev(), meta.ino()))
}

/// Opens (creating 0600 if missing) a file in a checked state directory
/// without following a link at its name.
pub(crate) fn open_private(path: &Path) -> Result<File> {
    secure_file(path)?;
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| LedgerError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Ownership and writability: the part of the check shared by both kinds.
fn judge(path: &Path, meta: &fs::Metadata) -> Result<()> {
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid {
        return Err(insecure(
            path,
            Insecurity::OwnedBy {
                uid: meta.uid(),
                euid,
            },
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(insecure(
            path,
            Insecurity::Writable {
                mode: meta.mode() & 0o7777,
            },
        ));
    }
    Ok(())
}

/// `wrong_kind`, unless `path` is a symbolic link: then that.
fn kind_problem(path: &Path, wrong_kind: Insecurity) -> Insecurity {
    match fs::read_link(path) {
        Ok(target) => Insecurity::Symlink { target },
        Err(_) => wrong_kind,
    }
}

fn insecure(path: &Path, problem: Insecurity) -> LedgerError {
    LedgerError::Insecure {
        path: path.to_path_buf(),
        problem,
    }
}
