//! `kqueue(2)`: one descriptor that waits for readable descriptors
//! (`EVFILT_READ`), signals (`EVFILT_SIGNAL`) and process exits
//! (`EVFILT_PROC` + `NOTE_EXIT`, for any process, not only children).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// A kqueue.
#[derive(Debug)]
pub(crate) struct Kqueue(OwnedFd);

/// One change or event. (libc declares `struct kevent` packed: copy a
/// field out — `{ ev.ident }` — before comparing it.)
pub(crate) type Kevent = libc::kevent;

/// A change to apply: `flags` (`EV_ADD`, `EV_DELETE`) on the filter
/// `filter` of `ident` (a descriptor, signal number or pid).
pub(crate) fn change(ident: usize, filter: i16, flags: u16, fflags: u32) -> Kevent {
    libc::kevent {
        ident,
        filter,
        flags,
        fflags,
        data: 0,
        udata: std::ptr::null_mut(),
    }
}

/// An empty slot for [`Kqueue::wait`] to fill.
pub(crate) fn slot() -> Kevent {
    change(0, 0, 0, 0)
}

impl Kqueue {
    pub(crate) fn new() -> io::Result<Kqueue> {
        // SAFETY: kqueue() takes nothing and returns a new descriptor or -1.
        let fd = unsafe { libc::kqueue() };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel just returned this descriptor; it is ours.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // A kqueue is not inherited across fork anyway; close-on-exec keeps
        // every descriptor of the keeper alike.
        nix::fcntl::fcntl(
            &fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )?;
        Ok(Kqueue(fd))
    }

    /// Applies one change and reports its own error (`ESRCH` for a process
    /// that is already gone, `EBADF` for a closed descriptor).
    pub(crate) fn apply(&self, change: Kevent) -> io::Result<()> {
        // SAFETY: one valid change, no event list (so an error comes back
        // as the return value), and a zero timeout that is never used.
        let rc = unsafe {
            libc::kevent(
                self.0.as_raw_fd(),
                &change,
                1,
                std::ptr::null_mut(),
                0,
                &libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Applies `changes`, then waits up to `timeout` (`None`: without
    /// limit) for events, which fill the front of `events`; returns how
    /// many. A change that fails comes back as an event with `EV_ERROR` in
    /// its flags and the errno in `data` — `events` must have room for one
    /// per change on top of the events wanted.
    pub(crate) fn wait(
        &self,
        changes: &[Kevent],
        events: &mut [Kevent],
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: both lists are valid for their lengths, `ts_ptr` is null
        // or points at a timespec that outlives the call.
        let rc = unsafe {
            libc::kevent(
                self.0.as_raw_fd(),
                changes.as_ptr(),
                libc::c_int::try_from(changes.len()).unwrap_or(libc::c_int::MAX),
                events.as_mut_ptr(),
                libc::c_int::try_from(events.len()).unwrap_or(libc::c_int::MAX),
                ts_ptr,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc as usize)
        }
    }
}
