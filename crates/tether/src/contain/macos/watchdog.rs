//! The watchdog's owner handle on macOS: a kqueue with an `EVFILT_PROC`
//! `NOTE_EXIT` filter on the owner's pid, registered *before* the identity
//! is checked — so if the process at that pid turns out to be the expected
//! one (same start time), the filter is the owner's and fires when it
//! exits, whatever happens to the pid afterwards. There is no pidfd on
//! macOS; the registration plays its part.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::identity::ProcessIdentity;

/// A held kqueue watching the owner's exit.
#[derive(Debug)]
pub(crate) struct OwnerHandle {
    kq: OwnedFd,
    /// The exit event was read: the kernel delivers `NOTE_EXIT` once
    /// (it turns the filter one-shot), so later waits answer from here.
    exited: AtomicBool,
}

impl OwnerHandle {
    /// Watches the process `expected` names. `Ok(None)`: that process is
    /// gone (exited, or its pid now names a process started at another
    /// time). macOS start times have microsecond resolution, so a reused
    /// pid with the owner's start time is not a practical concern.
    pub(crate) fn open(expected: &ProcessIdentity) -> io::Result<Option<OwnerHandle>> {
        // SAFETY: kqueue() takes no arguments and returns a new fd or -1.
        let fd = unsafe { libc::kqueue() };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel just gave us this descriptor.
        let kq = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an all-zero kevent is a valid value to fill in.
        let mut change: libc::kevent = unsafe { std::mem::zeroed() };
        change.ident = expected.pid as libc::uintptr_t;
        change.filter = libc::EVFILT_PROC;
        change.flags = libc::EV_ADD | libc::EV_ONESHOT;
        change.fflags = libc::NOTE_EXIT;
        // SAFETY: one valid change record in, no event buffer out.
        let rc = unsafe {
            libc::kevent(
                kq.as_raw_fd(),
                &change,
                1,
                std::ptr::null_mut(),
                0,
                std::ptr::null(),
            )
        };
        if rc < 0 {
            let err = io::Error::last_os_error();
            return if err.raw_os_error() == Some(libc::ESRCH) {
                Ok(None)
            } else {
                Err(err)
            };
        }
        // Registered: now check that the pid is the owner's.
        match crate::contain::sys::process(expected.pid) {
            Ok(now) if now.start_time == expected.start_time && !now.has_exited() => {
                Ok(Some(OwnerHandle {
                    kq,
                    exited: AtomicBool::new(false),
                }))
            }
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits until the owner exits (`true`) or `timeout` passes (`false`);
    /// `None` waits for as long as it takes.
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        if self.exited.load(Ordering::Acquire) {
            return Ok(true);
        }
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        loop {
            // SAFETY: an all-zero kevent is a valid buffer to be filled.
            let mut event: libc::kevent = unsafe { std::mem::zeroed() };
            // SAFETY: no changes in; one event buffer we own out; the
            // timespec (if any) lives across the call.
            let rc = unsafe {
                libc::kevent(
                    self.kq.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    &mut event,
                    1,
                    ts_ptr,
                )
            };
            if rc > 0 {
                self.exited.store(true, Ordering::Release);
                return Ok(true);
            }
            if rc == 0 {
                return Ok(false);
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    /// The descriptor an event loop waits on: the kqueue, readable once
    /// the owner exited (until a `wait` has read the event).
    pub(crate) fn as_fd(&self) -> BorrowedFd<'_> {
        self.kq.as_fd()
    }
}
