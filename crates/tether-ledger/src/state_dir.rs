//! Trusting the state directory the way `ssh` trusts `~/.ssh`.
//!
//! What the ledger says decides what `tether reap` may kill, so the files
//! it is read from must be this user's alone. Before the store is opened:
//!
//! - the state directory is created 0700 if missing; an existing one must
//!   be a real directory (not a symbolic link) owned by the effective uid
//!   and not writable by group or others — otherwise tether refuses it,
//!   saying what to do. Read or search bits for group or others are taken
//!   away (0700, as the README promises).
//! - `ledger.db`, its `-wal` and `-shm` and `ledger.lock`, where they
//!   exist, must be regular files (not links) owned by the effective uid
//!   and not writable by group or others; bits for group or others are
//!   taken away (0600).
//!
//! Once the directory passes, nobody else can add, rename or replace
//! anything in it, so checking by path and then letting SQLite open by
//! path leaves no window. The directory's ancestors are trusted, as `ssh`
//! trusts `/home`; `/tmp/tether-<uid>` — the one predictable path tether
//! falls back to — sits in the sticky `/tmp`, where only its owner can
//! rename it.
//!
//! On Windows there are no mode bits and no uids: the state directory must
//! be a real directory (not a symbolic link or junction) and the ledger's
//! files regular files (not links); who may write them is the directory's
//! ACL, which for `%LOCALAPPDATA%\tether` is inherited from the user's
//! profile (the user, SYSTEM, Administrators). tether does not inspect ACLs
//! yet — a state directory placed where others may write is trusted there.

#[cfg(unix)]
pub(crate) use unix::{open_private, secure_dir, secure_file};
#[cfg(windows)]
pub(crate) use windows::{open_private, secure_dir, secure_file};

use std::fs;
use std::path::Path;

use crate::error::{Insecurity, LedgerError};

#[cfg(unix)]
mod unix {
    use std::fs::{self, File, OpenOptions};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
    use std::path::Path;

    use super::{insecure, kind_problem};
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
}

#[cfg(windows)]
mod windows {
    use std::fs::{self, File, OpenOptions};
    use std::path::Path;

    use super::{insecure, kind_problem};
    use crate::error::{Insecurity, LedgerError, Result};

    /// Creates `dir` if missing; refuses a link or a non-directory.
    pub(crate) fn secure_dir(dir: &Path) -> Result<()> {
        let io = |source| LedgerError::Io {
            path: dir.to_path_buf(),
            source,
        };
        if fs::symlink_metadata(dir).is_err() {
            match fs::create_dir_all(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(e)),
            }
        }
        let meta = fs::symlink_metadata(dir).map_err(io)?;
        if meta.file_type().is_symlink() || !meta.is_dir() {
            return Err(insecure(dir, kind_problem(dir, Insecurity::NotADirectory)));
        }
        Ok(())
    }

    /// Refuses a ledger file that is a link or not a regular file.
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
        if meta.file_type().is_symlink() || !meta.file_type().is_file() {
            return Err(insecure(path, kind_problem(path, Insecurity::NotAFile)));
        }
        Ok(())
    }

    /// Opens (creating if missing) a file in a checked state directory.
    pub(crate) fn open_private(path: &Path) -> Result<File> {
        secure_file(path)?;
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|source| LedgerError::Io {
                path: path.to_path_buf(),
                source,
            })
    }
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
