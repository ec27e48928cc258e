//! `tether::sys::held_paths` on macOS, best effort, from `libproc` (what
//! `lsof` uses): the executable (`proc_pidpath`), the working and root
//! directories (`proc_pidinfo(PROC_PIDVNODEPATHINFO)`), and every open
//! file (`proc_pidinfo(PROC_PIDLISTFDS)`, then
//! `proc_pidfdinfo(PROC_PIDFDVNODEPATHINFO)` for each vnode descriptor).
//!
//! Not read: memory-mapped files (`PROC_PIDREGIONPATHINFO` walked region
//! by region) — a process that only maps a file under the path (a shared
//! library it loaded, then closed) is not seen as a holder. Deleted files
//! are not told apart (`deleted` is always false). Another user's process
//! gives `EPERM` (→ `PermissionDenied`) unless running as root. Objects
//! carry no identity (`id` is `None`); the ancestor directories of what a
//! process holds are compared with the target's identity by `lstat` (one
//! mount namespace: the holder sees paths as we do). Only type-checked here
//! (no macOS machine).

use std::ffi::{CStr, c_int, c_void};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::contain::sys::{FileId, Held, HeldAs};

/// `PROC_PIDFDVNODEPATHINFO` of `<sys/proc_info.h>` (not in libc).
const PROC_PIDFDVNODEPATHINFO: c_int = 2;

/// `struct proc_fileinfo` of `<sys/proc_info.h>`.
#[repr(C)]
struct ProcFileInfo {
    fi_openflags: u32,
    fi_status: u32,
    fi_offset: i64,
    fi_type: i32,
    fi_guardflags: u32,
}

/// `struct vnode_fdinfowithpath` of `<sys/proc_info.h>`.
#[repr(C)]
struct VnodeFdInfoWithPath {
    pfi: ProcFileInfo,
    pvip: libc::vnode_info_path,
}

/// The NUL-terminated path in a `vnode_info_path`, if any.
fn vnode_path(info: &libc::vnode_info_path) -> Option<PathBuf> {
    // SAFETY: `vip_path` is MAXPATHLEN bytes the kernel NUL-terminates;
    // viewing the array of arrays as one byte run is what C does.
    let bytes: &[u8] = unsafe {
        std::slice::from_raw_parts(
            info.vip_path.as_ptr().cast::<u8>(),
            std::mem::size_of_val(&info.vip_path),
        )
    };
    let path = CStr::from_bytes_until_nul(bytes).ok()?;
    use std::os::unix::ffi::OsStrExt;
    (!path.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(path.to_bytes())))
}

/// The failed call's error; a process that is gone is `NotFound`.
fn last_error() -> io::Error {
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        io::Error::new(io::ErrorKind::NotFound, e)
    } else {
        e
    }
}

pub(crate) fn held_paths(pid: u32) -> io::Result<Vec<Held>> {
    let pid = pid as c_int;
    let mut out = Vec::new();
    let mut push = |how, path: Option<PathBuf>| {
        if let Some(path) = path {
            out.push(Held {
                how,
                path,
                deleted: false,
                id: None,
            });
        }
    };

    let mut exe = vec![0u8; libc::PROC_PIDPATHINFO_MAXSIZE as usize];
    // SAFETY: a buffer of the size given.
    let n = unsafe { libc::proc_pidpath(pid, exe.as_mut_ptr().cast(), exe.len() as u32) };
    if n <= 0 {
        return Err(last_error());
    }
    exe.truncate(n as usize);
    use std::os::unix::ffi::OsStringExt;
    push(
        HeldAs::Executable,
        Some(PathBuf::from(std::ffi::OsString::from_vec(exe))),
    );

    // SAFETY: zeroed plain-old-data the kernel fills.
    let mut dirs: libc::proc_vnodepathinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_vnodepathinfo>() as c_int;
    // SAFETY: a buffer of the size given.
    let got = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDVNODEPATHINFO,
            0,
            (&mut dirs as *mut libc::proc_vnodepathinfo).cast::<c_void>(),
            size,
        )
    };
    if got == size {
        push(HeldAs::WorkingDirectory, vnode_path(&dirs.pvi_cdir));
        push(HeldAs::Root, vnode_path(&dirs.pvi_rdir));
    }

    // The descriptor table: its size first, then the entries (it may grow
    // in between; what does not fit is read next time).
    // SAFETY: a null buffer asks for the size.
    let bytes =
        unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDLISTFDS, 0, std::ptr::null_mut(), 0) };
    if bytes > 0 {
        let each = std::mem::size_of::<libc::proc_fdinfo>();
        let mut fds: Vec<libc::proc_fdinfo> = Vec::with_capacity(bytes as usize / each + 16);
        // SAFETY: a buffer of the capacity given; the kernel says how many
        // bytes it wrote.
        let got = unsafe {
            libc::proc_pidinfo(
                pid,
                libc::PROC_PIDLISTFDS,
                0,
                fds.as_mut_ptr().cast::<c_void>(),
                (fds.capacity() * each) as c_int,
            )
        };
        if got > 0 {
            // SAFETY: the kernel wrote `got` bytes of whole records.
            unsafe { fds.set_len(got as usize / each) };
        }
        for fd in fds
            .iter()
            .filter(|f| f.proc_fdtype == libc::PROX_FDTYPE_VNODE as u32)
        {
            // SAFETY: zeroed plain-old-data the kernel fills.
            let mut info: VnodeFdInfoWithPath = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<VnodeFdInfoWithPath>() as c_int;
            // SAFETY: a buffer of the size given.
            let got = unsafe {
                libc::proc_pidfdinfo(
                    pid,
                    fd.proc_fd,
                    PROC_PIDFDVNODEPATHINFO,
                    (&mut info as *mut VnodeFdInfoWithPath).cast::<c_void>(),
                    size,
                )
            };
            if got == size {
                push(HeldAs::OpenFile, vnode_path(&info.pvip));
            }
        }
    }
    Ok(out)
}

fn id_of(m: &std::fs::Metadata) -> FileId {
    FileId {
        device: m.dev(),
        inode: m.ino(),
    }
}

/// The identity of `path` (`tether::sys::HeldUnder::new`).
pub(crate) fn file_id(path: &Path) -> io::Result<Option<FileId>> {
    Ok(Some(id_of(&std::fs::metadata(path)?)))
}

/// Ancestor directories already resolved, for one scan.
#[derive(Debug, Default)]
pub(crate) struct Resolver {
    seen: std::collections::HashMap<PathBuf, Option<FileId>>,
}

/// For each of `held`, whether one of its ancestor directories is the
/// directory identified by `target` (`lstat`, so a symlink is never taken
/// for the directory it points to).
pub(crate) fn under_by_identity(
    _pid: u32,
    held: &[Held],
    target: FileId,
    resolver: &mut Resolver,
) -> Vec<bool> {
    held.iter()
        .map(|h| {
            h.path.ancestors().skip(1).any(|dir| {
                let id = *resolver
                    .seen
                    .entry(dir.to_path_buf())
                    .or_insert_with(|| std::fs::symlink_metadata(dir).ok().map(|m| id_of(&m)));
                id == Some(target)
            })
        })
        .collect()
}
