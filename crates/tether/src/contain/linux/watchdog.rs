//! The watchdog's owner handle on Linux: a pidfd, opened first and checked
//! against the expected identity after, so it names the owner or nothing.
//! It polls readable the moment the owner exits (zombie or reaped, by any
//! cause) — no timer, no `getppid()`.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use super::pidfd::Pidfd;
use super::sys::identity_with_pidfd;
use crate::identity::ProcessIdentity;

/// A held handle on the owner process.
#[derive(Debug)]
pub(crate) struct OwnerHandle {
    pidfd: Pidfd,
}

impl OwnerHandle {
    /// Pins the process `expected` names. `Ok(None)`: that process is gone
    /// — it exited, or its pid now names a process with another start time
    /// (or another pidfs inode, when `expected` carries one).
    ///
    /// The pidfd is opened *before* the identity is read: a pidfd names one
    /// process for good, so if the identity read through it matches, the
    /// descriptor is the owner's, however the pid is recycled later.
    pub(crate) fn open(expected: &ProcessIdentity) -> io::Result<Option<OwnerHandle>> {
        let pidfd = match Pidfd::open(expected.pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
            Err(e) => return Err(e),
        };
        match identity_with_pidfd(expected.pid, &pidfd) {
            Ok(now) if now.matches(expected) => Ok(Some(OwnerHandle { pidfd })),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits until the owner exits (`true`) or `timeout` passes (`false`);
    /// `None` waits for as long as it takes.
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let ms = match deadline {
                None => -1,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    // Round up: a 0.4 ms remainder must not become a busy 0.
                    left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
                }
            };
            let mut pfd = libc::pollfd {
                fd: self.pidfd.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd we own, for the call's duration.
            let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
            if rc > 0 {
                return Ok(true);
            }
            if rc == 0 {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(false);
                }
                continue;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    /// The descriptor an event loop waits on: readable once the owner
    /// exited.
    pub(crate) fn as_fd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }
}
