//! `tether::sys::held_paths` on macOS: **a documented stub** until the
//! macOS backend fills it in — every call fails with `Unsupported`, so
//! `tether ps --holding` and `tether reap --holding` say they cannot see
//! holders instead of claiming a path is free.
//!
//! How to implement it (best effort, as the rest of `tether::sys` on
//! macOS): `proc_pidpath` for the executable; `proc_pidinfo(pid,
//! PROC_PIDVNODEPATHINFO)` for the working and root directories;
//! `proc_pidinfo(pid, PROC_PIDLISTFDS)` then `proc_pidfdinfo(…,
//! PROC_PIDFDVNODEPATHINFO)` for each vnode descriptor; and
//! `proc_pidinfo(pid, PROC_PIDREGIONPATHINFO)` walked region by region for
//! mapped files (what `lsof` does). Another user's process gives `EPERM`
//! (→ `PermissionDenied`) unless running as root.

use std::io;

use crate::contain::sys::Held;

pub(crate) fn held_paths(_pid: u32) -> io::Result<Vec<Held>> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "what a process holds is not read on macOS yet",
    ))
}
