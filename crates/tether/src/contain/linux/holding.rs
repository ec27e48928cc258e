//! What a process holds in the file system, from `/proc/<pid>/{exe, cwd,
//! root, fd, maps}`: the paths an updater must see released before it can
//! replace a directory.
//!
//! Every one of these files is guarded by the same ptrace access check as
//! `/proc/<pid>/environ`: readable for our own dumpable processes (and for
//! everything as root), `EACCES` otherwise. A process we cannot inspect is
//! reported as such, never as holding nothing.
//!
//! Path text is not enough to tell what lies under a directory: the kernel
//! names an object by the mount it was reached through (a bind mount of a
//! directory names none of the directory's paths), and `maps` escapes a
//! newline in a name as `\012` — a file mapped from under such a
//! directory, or a program run through a bind mount of it, was reported as
//! holding nothing under it (issue 16). So `maps` entries carry their
//! identity (its device and inode columns, free to read), and
//! [`under_by_identity`] compares the identities of a held object and of
//! its ancestor directories, looked up where the holder sees them, with
//! the target's. (A `stat` through each `exe`, `cwd`, `root` and `fd/N`
//! link instead cost +27% CPU for `ps --holding` over 10,000 processes;
//! looking paths up once per mount namespace and root costs what is in
//! `benches/ps_reap`.)

use std::collections::{BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::contain::sys::{FileId, Held, HeldAs};

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
        let link = format!("{base}/{name}");
        match fs::read_link(&link) {
            Ok(target) => {
                if let Some(held) = held(how, target.as_os_str().as_bytes()) {
                    // Everyone's root is `/`: only a chroot is worth listing.
                    if how != HeldAs::Root || held.path != Path::new("/") {
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
        if let Some(map) = parse_map(line)
            && let Some(mut held) = held(HeldAs::MappedFile, map.path)
        {
            held.id = Some(map.id);
            if map
                .path
                .windows(ESCAPED_NEWLINE.len())
                .any(|w| w == ESCAPED_NEWLINE)
            {
                held.path = unescaped_spelling(pid, &held.path, map.id);
            }
            out.insert(held);
        }
    }
    if !pid_exists(&base) {
        return Err(io::Error::from(io::ErrorKind::NotFound));
    }
    Ok(out.into_iter().collect())
}

/// How `maps` writes a newline in a path (`seq_file_path(…, "\n")`: the
/// only character it escapes, as octal).
const ESCAPED_NEWLINE: &[u8] = b"\\012";

/// The spelling of an escaped `maps` path: with `\012` read as a newline —
/// unless a file literally named with those four characters is the mapped
/// object (the escape is ambiguous; the identity decides, checked where the
/// holder sees its files, through `/proc/<pid>/root`).
fn unescaped_spelling(pid: u32, raw: &Path, id: FileId) -> PathBuf {
    let text = raw.as_os_str().as_bytes();
    let mut unescaped = Vec::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if rest.starts_with(ESCAPED_NEWLINE) {
            unescaped.push(b'\n');
            rest = &rest[ESCAPED_NEWLINE.len()..];
        } else {
            unescaped.push(rest[0]);
            rest = &rest[1..];
        }
    }
    let unescaped = PathBuf::from(OsString::from_vec(unescaped));
    let seen_as = |p: &Path| stat_id(&in_root(pid, p));
    if seen_as(&unescaped) != Some(id) && seen_as(raw) == Some(id) {
        raw.to_path_buf()
    } else {
        unescaped
    }
}

/// `path` as the process `pid` sees it: under its root directory, in its
/// mount namespace (`/proc/<pid>/root` + `path`).
fn in_root(pid: u32, path: &Path) -> PathBuf {
    let mut joined = OsString::from(format!("/proc/{pid}/root"));
    joined.push(path.as_os_str());
    PathBuf::from(joined)
}

/// The identity of what `path` names, links (and the magic links of
/// `/proc`) followed.
fn stat_id(path: &Path) -> Option<FileId> {
    fs::metadata(path).ok().map(|m| id_of(&m))
}

fn id_of(m: &fs::Metadata) -> FileId {
    FileId {
        device: m.dev(),
        inode: m.ino(),
    }
}

/// The identity of `path` ([`crate::sys::HeldUnder::new`]).
pub(crate) fn file_id(path: &Path) -> io::Result<Option<FileId>> {
    Ok(Some(id_of(&fs::metadata(path)?)))
}

/// Paths already looked up, per mount namespace and root directory
/// (processes that share both see the same files at the same paths): each
/// held path is judged once per scan, not once per process — a crowd of
/// processes maps the same few libraries.
#[derive(Debug, Default)]
pub(crate) struct Resolver {
    views: HashMap<(FileId, FileId), View>,
}

/// What one view (mount namespace, root) has shown so far.
#[derive(Debug, Default)]
struct View {
    /// Held path → whether it lies under the target.
    under: HashMap<PathBuf, bool>,
    /// Path → its identity (`lstat`), `None` if it cannot be looked up.
    ids: HashMap<PathBuf, Option<FileId>>,
}

/// For each of `held` (objects `pid` holds that are not under the target by
/// path text), whether it lies under the directory (or is the object)
/// identified by `target`: its identity is the target's (a `maps` entry
/// says), or its path or one of its ancestor directories *as `pid` sees
/// them* names the target. Paths are looked up with `lstat` through
/// `/proc/<pid>/root` — the holder's root in its own mount namespace — so
/// a symlink is never taken for what it points to; each once per mount
/// namespace and root directory.
pub(crate) fn under_by_identity(
    pid: u32,
    held: &[Held],
    target: FileId,
    resolver: &mut Resolver,
) -> Vec<bool> {
    let key = (
        stat_id(Path::new(&format!("/proc/{pid}/ns/mnt"))),
        stat_id(Path::new(&format!("/proc/{pid}/root"))),
    );
    // Gone or not inspectable meanwhile: nothing to look paths up in.
    let (Some(ns), Some(root)) = key else {
        return held.iter().map(|h| h.id == Some(target)).collect();
    };
    let view = resolver.views.entry((ns, root)).or_default();
    held.iter()
        .map(|h| {
            if h.id == Some(target) {
                return true;
            }
            if let Some(&under) = view.under.get(h.path.as_path()) {
                return under;
            }
            let under = h.path.ancestors().any(|dir| {
                if dir == Path::new("/") || dir.as_os_str().is_empty() {
                    return false;
                }
                let id = match view.ids.get(dir) {
                    Some(&id) => id,
                    None => {
                        let id = fs::symlink_metadata(in_root(pid, dir))
                            .ok()
                            .map(|m| id_of(&m));
                        view.ids.insert(dir.to_path_buf(), id);
                        id
                    }
                };
                id == Some(target)
            });
            view.under.insert(h.path.clone(), under);
            under
        })
        .collect()
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
        id: None,
    })
}

/// One `/proc/<pid>/maps` line's mapped object.
struct Map<'a> {
    /// The device and inode columns.
    id: FileId,
    /// The path column: everything after the fifth field, which may itself
    /// contain spaces (escapes not undone).
    path: &'a [u8],
}

/// The fields of one `/proc/<pid>/maps` line: address, perms, offset,
/// device (`major:minor`, hex), inode (decimal), then the path.
fn parse_map(line: &[u8]) -> Option<Map<'_>> {
    let mut rest = line;
    let mut fields = [&b""[..]; 5];
    for field in &mut fields {
        let start = rest.iter().position(|&b| b != b' ')?;
        rest = &rest[start..];
        let end = rest.iter().position(|&b| b == b' ')?;
        *field = &rest[..end];
        rest = &rest[end..];
    }
    let start = rest.iter().position(|&b| b != b' ')?;
    fn text(b: &[u8]) -> Option<&str> {
        std::str::from_utf8(b).ok()
    }
    let (major, minor) = text(fields[3])?.split_once(':')?;
    let major = u32::from_str_radix(major, 16).ok()?;
    let minor = u32::from_str_radix(minor, 16).ok()?;
    Some(Map {
        id: FileId {
            device: libc::makedev(major, minor),
            inode: text(fields[4])?.parse().ok()?,
        },
        path: &rest[start..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_lines_give_their_path_with_spaces_and_deletion() {
        let line = b"7f00-7f01 r-xp 00000000 fe:01 1234   /opt/my app/lib.so (deleted)";
        let map = parse_map(line).unwrap();
        assert_eq!(
            map.id,
            FileId {
                device: (0xfe << 8) | 1,
                inode: 1234
            }
        );
        let lib = held(HeldAs::MappedFile, map.path).unwrap();
        assert_eq!(lib.path, PathBuf::from("/opt/my app/lib.so"));
        assert!(lib.deleted);
        assert!(parse_map(b"7f00-7f01 rw-p 00000000 00:00 0 ").is_none());
        assert!(
            held(
                HeldAs::MappedFile,
                parse_map(b"7f-7f rw-p 0 00:00 0  [heap]").unwrap().path
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
