//! The state-directory checks on Windows. The directory lives under the
//! user's profile (`%LOCALAPPDATA%`, or `TETHER_HOME`), whose ACLs already
//! keep other users out; tether does not read ACLs itself (yet), so on
//! Windows the trust rests on the profile's. What is checked: no file or
//! directory is a symbolic link or junction (a reparse point), and each is
//! of the right kind.

use std::fs::{self, File, OpenOptions};
use std::path::Path;

use crate::error::{Insecurity, LedgerError, Result};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> LedgerError + '_ {
    move |source| LedgerError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn insecure(path: &Path, problem: Insecurity) -> LedgerError {
    LedgerError::Insecure {
        path: path.to_path_buf(),
        problem,
    }
}

/// A link of any kind where a real file or directory must be.
fn refuse_link(path: &Path, meta: &fs::Metadata) -> Result<()> {
    if meta.file_type().is_symlink() {
        let target = fs::read_link(path).unwrap_or_default();
        return Err(insecure(path, Insecurity::Symlink { target }));
    }
    Ok(())
}

/// Creates `dir` if missing and checks it (see the module docs).
pub(crate) fn secure_dir(dir: &Path) -> Result<()> {
    if fs::symlink_metadata(dir).is_err() {
        fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let meta = fs::symlink_metadata(dir).map_err(io(dir))?;
    refuse_link(dir, &meta)?;
    if !meta.is_dir() {
        return Err(insecure(dir, Insecurity::NotADirectory));
    }
    Ok(())
}

/// Checks the file at `path` if there is one (see the module docs).
pub(crate) fn secure_file(path: &Path) -> Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(path)(e)),
    };
    refuse_link(path, &meta)?;
    if !meta.is_file() {
        return Err(insecure(path, Insecurity::NotAFile));
    }
    Ok(())
}

/// A new file (it must not exist), for the store to fill before it is
/// renamed into place.
pub(crate) fn create_new_private(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// What names the file at `path` on disk: (volume serial, file index),
/// Windows' (device, inode). Not the creation time: file-system tunneling
/// gives a file created within 15 s under the name of a deleted or renamed
/// one that one's creation time — exactly the replacement this must see.
pub(crate) fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    tether::windows::file_id(&File::open(path)?)
}

/// Opens (creating if missing) a file in a checked state directory.
pub(crate) fn open_private(path: &Path) -> Result<File> {
    secure_file(path)?;
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io(path))
}
