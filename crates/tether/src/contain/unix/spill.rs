//! Spill files on Unix: positional I/O, and files that never have a name
//! (`O_TMPFILE` on Linux; elsewhere a random name unlinked before the first
//! byte), so a crash leaves nothing on disk.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Creates `dir` (0700) if missing; refuses one that belongs to
/// another user (but root), or that others may write without the
/// sticky bit (they could rename the file in the instant it has a name
/// on the fallback path).
pub(crate) fn ensure_spill_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let meta = std::fs::metadata(dir)?;
    let owner_ok = meta.uid() == nix::unistd::geteuid().as_raw() || meta.uid() == 0;
    let sticky = meta.mode() & 0o1000 != 0; // S_ISVTX
    if !owner_ok || (meta.mode() & 0o022 != 0 && !sticky) {
        let msg = format!(
            "directory is not safe for spill files (mode {:o}, uid {})",
            meta.mode() & 0o7777,
            meta.uid()
        );
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, msg));
    }
    Ok(())
}

/// A read-write file in `dir` with no name, mode 0600, close-on-exec.
pub(crate) fn create_nameless_file(dir: &Path) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        // O_EXCL: the inode can never be linked into a directory.
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE | libc::O_EXCL | libc::O_CLOEXEC)
            .open(dir);
        match opened {
            Ok(file) => return Ok(file),
            // The file system has no O_TMPFILE (EOPNOTSUPP; EISDIR from
            // kernels before 3.11, which read it as O_DIRECTORY).
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) => {}
            Err(e) => return Err(e),
        }
    }
    unlink_after_open(dir)
}

/// Exclusive create under a random name, then unlink before any byte
/// is written: a crash in between leaves an empty file, never data.
fn unlink_after_open(dir: &Path) -> io::Result<File> {
    for _ in 0..64 {
        let name = format!(".tether-spill-{}", crate::session_id::SessionId::generate());
        let path = dir.join(name);
        let created = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path);
        match created {
            Ok(file) => {
                std::fs::remove_file(&path)?;
                return Ok(file);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "64 random spill file names were all taken",
    ))
}

pub(crate) fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    file.write_all_at(buf, offset)
}

pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    file.read_exact_at(buf, offset)
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::Path;

    use crate::output::{OutputBuffer, OutputConfig};

    fn buffer(max_memory: usize, spill_cap: u64, dir: Option<&Path>) -> OutputBuffer {
        OutputBuffer::new(OutputConfig {
            max_memory,
            spill_cap,
            spill_dir: dir.map(|d| d.join("spill")),
        })
    }

    /// Files this process holds open under `dir`: (fd path, size, mode).
    #[cfg(target_os = "linux")]
    fn open_files_under(dir: &Path) -> Vec<(std::path::PathBuf, u64, u32)> {
        use std::os::unix::fs::PermissionsExt;
        let dir = dir.canonicalize().unwrap();
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.starts_with(&dir)))
            // metadata follows the magic link to the open file itself.
            .filter_map(|fd| {
                let meta = std::fs::metadata(fd.path()).ok()?;
                Some((fd.path(), meta.len(), meta.permissions().mode() & 0o777))
            })
            .collect()
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn spill_file_is_nameless_private_and_freed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("spill");
        let mut buf = buffer(16, 1 << 20, Some(dir.path()));
        buf.append(&[1; 16]).unwrap();
        assert!(
            buf.spill_dir().is_none(),
            "no file before the first eviction"
        );
        buf.append(&[2; 16]).unwrap();
        assert_eq!(buf.spill_dir(), Some(spill.as_path()));
        let mode = std::fs::metadata(&spill).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "a spill directory it creates is private");
        assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 0, "no name");
        let open = open_files_under(&spill);
        assert_eq!(open.len(), 1, "{open:?}");
        assert_eq!((open[0].1, open[0].2), (16, 0o600));
        drop(buf);
        assert_eq!(open_files_under(&spill), vec![], "closed on drop");

        let mut buf = buffer(16, 1 << 20, Some(dir.path()));
        buf.append(&[3; 40]).unwrap();
        assert_eq!(open_files_under(&spill).len(), 1);
        buf.remove_spill().unwrap();
        assert_eq!(open_files_under(&spill), vec![], "closed by remove_spill");
        assert_eq!(
            (buf.start_offset(), buf.read(0, 100).unwrap().dropped),
            (24, 24)
        );
        buf.append(&[4; 40]).unwrap();
        assert!(
            buf.spill_dir().is_none(),
            "spilling stays off after remove_spill"
        );
    }

    #[test]
    #[cfg(unix)]
    fn a_spill_dir_others_can_write_needs_the_sticky_bit() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("spill");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut buf = buffer(8, 1 << 20, Some(dir.path()));
        let err = buf.append(&[5; 20]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        buf.append(&[6; 20]).unwrap();
        assert_eq!((buf.end_offset(), buf.dropped_total()), (40, 32));
        assert_eq!(buf.tail(8).unwrap().data, [6; 8]);

        // Sticky, as /tmp is: only the owner of a name can rename it.
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let mut buf = buffer(8, 1 << 20, Some(dir.path()));
        buf.append(&[7; 20]).unwrap();
        assert_eq!((buf.spill_bytes(), buf.dropped_total()), (12, 0));
        assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0, "no name");
    }
}
