//! What a process holds in the file system, from `/proc/<pid>/{exe, cwd,
//! root, fd, maps}`: the paths an updater must see released before it can
//! replace a directory.
//!
//! Every one of these files is guarded by the same ptrace access check as
//! `/proc/<pid>/environ`: readable for our own dumpable processes (and for
//! everything as root), `EACCES` otherwise. A process we cannot inspect is
//! reported as such, never as holding nothing.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::contain::sys::{Held, HeldAs};

/// What the kernel appends to the path of an object unlinked (or replaced
/// by a rename) since it was opened.
const DELETED: &[u8] = b" (deleted)";

pub(crate) fn held_paths(pid: u32) -> io::Result<Vec<Held>> {
    let base = format!("/proc/{pid}");
    let mut out: BTreeSet<Held> = BTreeSet::new();
    for (name, how) in [
        ("exe", HeldAs::Executable),
        ("cwd", HeldAs::WorkingDirectory),
        ("root", HeldAs::Root),
    ] {
        match fs::read_link(format!("{base}/{name}")) {
            Ok(target) => {
                if let Some(held) = held(how, target.as_os_str().as_bytes()) {
                    // Everyone's root is `/`: only a chroot is worth listing.
                    if how != HeldAs::Root || held.path != std::path::Path::new("/") {
                        out.insert(held);
                    }
                }
            }
            // A kernel thread has no exe; a zombie none of these.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && pid_exists(&base) => {}
            Err(e) => return Err(classify(e)),
        }
    }
    let fds = fs::read_dir(format!("{base}/fd")).map_err(classify)?;
    for entry in fds.flatten() {
        // A descriptor closed between the listing and the readlink is gone.
        if let Ok(target) = fs::read_link(entry.path())
            && let Some(held) = held(HeldAs::OpenFile, target.as_os_str().as_bytes())
        {
            out.insert(held);
        }
    }
    let maps = fs::read(format!("{base}/maps")).map_err(classify)?;
    for line in maps.split(|&b| b == b'\n') {
        if let Some(path) = map_path(line)
            && let Some(held) = held(HeldAs::MappedFile, path)
        {
            out.insert(held);
        }
    }
    if !pid_exists(&base) {
        return Err(io::Error::from(io::ErrorKind::NotFound));
    }
    Ok(out.into_iter().collect())
}

fn pid_exists(base: &str) -> bool {
    fs::symlink_metadata(base).is_ok()
}

/// `EACCES`/`EPERM` → `PermissionDenied`, `ENOENT`/`ESRCH` → `NotFound`.
fn classify(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => io::Error::new(
            io::ErrorKind::PermissionDenied,
            "cannot inspect it (another user's, or non-dumpable)",
        ),
        Some(libc::ENOENT | libc::ESRCH) => io::Error::from(io::ErrorKind::NotFound),
        _ => e,
    }
}

/// A path the kernel printed, if it is one: absolute, not a `memfd:` (its
/// name only looks like a path), with the ` (deleted)` mark taken off.
fn held(how: HeldAs, text: &[u8]) -> Option<Held> {
    if !text.starts_with(b"/") || text.starts_with(b"/memfd:") {
        return None; // socket:[…], pipe:[…], anon_inode:…, [heap], …
    }
    let (path, deleted) = match text.strip_suffix(DELETED) {
        Some(rest) => (rest, true),
        None => (text, false),
    };
    Some(Held {
        how,
        path: PathBuf::from(OsStr::from_bytes(path)),
        deleted,
    })
}

/// The path column of one `/proc/<pid>/maps` line: everything after the
/// fifth field (address, perms, offset, device, inode), which may itself
/// contain spaces.
fn map_path(line: &[u8]) -> Option<&[u8]> {
    let mut rest = line;
    for _ in 0..5 {
        let start = rest.iter().position(|&b| b != b' ')?;
        rest = &rest[start..];
        let end = rest.iter().position(|&b| b == b' ')?;
        rest = &rest[end..];
    }
    let start = rest.iter().position(|&b| b != b' ')?;
    Some(&rest[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_lines_give_their_path_with_spaces_and_deletion() {
        let line = b"7f00-7f01 r-xp 00000000 08:01 1234   /opt/my app/lib.so (deleted)";
        let lib = held(HeldAs::MappedFile, map_path(line).unwrap()).unwrap();
        assert_eq!(lib.path, PathBuf::from("/opt/my app/lib.so"));
        assert!(lib.deleted);
        assert!(map_path(b"7f00-7f01 rw-p 00000000 00:00 0 ").is_none());
        assert!(
            held(
                HeldAs::MappedFile,
                map_path(b"7f-7f rw-p 0 00:00 0  [heap]").unwrap()
            )
            .is_none()
        );
        assert!(held(HeldAs::OpenFile, b"socket:[42]").is_none());
        assert!(held(HeldAs::OpenFile, b"/memfd:x (deleted)").is_none());
    }

    #[test]
    fn this_process_holds_its_executable_cwd_and_an_open_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("held");
        let _open = fs::File::create(&file).unwrap();
        let held = held_paths(std::process::id()).unwrap();
        let exe = fs::read_link("/proc/self/exe").unwrap();
        assert!(
            held.iter()
                .any(|h| h.how == HeldAs::Executable && h.path == exe)
        );
        let cwd = std::env::current_dir().unwrap();
        assert!(
            held.iter()
                .any(|h| h.how == HeldAs::WorkingDirectory && h.path == cwd)
        );
        let file = fs::canonicalize(&file).unwrap();
        assert!(
            held.iter()
                .any(|h| h.how == HeldAs::OpenFile && h.path == file)
        );
        assert!(held.iter().any(|h| h.how == HeldAs::MappedFile));
    }
}
