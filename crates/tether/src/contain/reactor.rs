//! Handing descriptors to the tokio reactor, so a session's pipes and
//! keeper socket are waited on by one event loop instead of a thread each.

use std::io;
use std::os::fd::OwnedFd;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Registers `fd` with the current tokio reactor for `interest`.
///
/// Panics outside a tokio runtime (like every tokio registration).
pub(crate) fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the `AsyncFd` owns the `OwnedFd`, so the descriptor stays open
    // and names the same file description until the `AsyncFd` is dropped,
    // and `OwnedFd::as_raw_fd` always returns that one descriptor.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(io::Error::from)
}
