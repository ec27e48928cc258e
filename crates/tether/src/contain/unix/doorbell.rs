//! A descriptor that turns readable when a session has new output — what
//! `select`/`poll`/`selectors` (and `asyncio`'s `add_reader`) can wait on,
//! where the output itself lives in the registry's buffers and is read by
//! offset.
//!
//! Linux: one `eventfd` (the same descriptor is rung and waited on); other
//! Unix systems: a pipe (its read end waited on, its write end rung). The
//! session's driver rings it as it takes in output (one 8-byte `write` per
//! read of the output pipe, ≤ 256 KiB each, so a flood costs one syscall
//! per 256 KiB) and at the end of the stream; the reader clears it before
//! reading, so a wake-up is never lost (at worst one is spurious).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Doorbell {
    /// What waiters poll (and what `clear` drains).
    read: OwnedFd,
    /// What `ring` writes to: a pipe's write end; `None` for an eventfd.
    write: Option<OwnedFd>,
}

impl Doorbell {
    /// A doorbell not rung. Non-blocking and close-on-exec.
    pub(crate) fn new() -> io::Result<Doorbell> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: eventfd(2) with flags only; a valid fd is owned below.
            let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` was just opened and nothing else owns it.
            let read = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
            Ok(Doorbell { read, write: None })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let (read, write) = nix::unistd::pipe()?;
            for fd in [&read, &write] {
                nix::fcntl::fcntl(
                    fd,
                    nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
                )?;
                nix::fcntl::fcntl(
                    fd,
                    nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
                )?;
            }
            Ok(Doorbell {
                read,
                write: Some(write),
            })
        }
    }

    /// Makes the descriptor readable (if it was not already). A full pipe
    /// or a saturated counter is readable already: nothing to do then.
    pub(crate) fn ring(&self) {
        let fd = self.write.as_ref().unwrap_or(&self.read).as_raw_fd();
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a local buffer to a descriptor we own.
        unsafe { libc::write(fd, one.as_ptr().cast(), one.len()) };
    }

    /// Makes the descriptor unreadable until the next `ring`.
    pub(crate) fn clear(&self) {
        let mut buffer = [0u8; 64];
        loop {
            // SAFETY: reads into a local buffer from a descriptor we own.
            let n = unsafe {
                libc::read(
                    self.read.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                )
            };
            // An eventfd is emptied by one read; a pipe may need more.
            if n <= 0 || self.write.is_none() {
                return;
            }
        }
    }

    /// The descriptor to wait on (owned by the doorbell).
    pub(crate) fn raw(&self) -> RawFd {
        self.read.as_raw_fd()
    }
}
