//! Handing descriptors to the tokio reactor, so a session's pipes and
//! keeper socket are waited on by one event loop instead of a thread each.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::fork::Lifeline;
use super::stdio::PipeEnd;

/// Registers `fd` with the current tokio reactor for `interest`.
///
/// Panics outside a tokio runtime (like every tokio registration).
fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the `AsyncFd` owns the `OwnedFd`, so the descriptor stays open
    // and names the same file description until the `AsyncFd` is dropped,
    // and `OwnedFd::as_raw_fd` always returns that one descriptor.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(io::Error::from)
}

/// Readiness of a tree's events (the keeper socket).
#[derive(Debug)]
pub(crate) struct TreeWatcher(AsyncFd<Lifeline>);

impl TreeWatcher {
    pub(crate) fn new(fd: Lifeline) -> io::Result<TreeWatcher> {
        // SAFETY: as in `register`: the `AsyncFd` owns the lifeline, whose
        // descriptor stays open and the same until it is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(TreeWatcher(fd))
    }

    /// Waits until events may be ready, then runs `drain`, which takes
    /// every event available and says whether the source is empty now (so
    /// the next wait sleeps until new data).
    pub(crate) async fn wait(&self, drain: impl FnOnce() -> bool) -> io::Result<()> {
        let mut guard = self.0.readable().await?;
        if drain() {
            guard.clear_ready();
        }
        Ok(())
    }
}

/// What an [`AsyncReader`] reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Pipe,
    /// A PTY master: `EIO` is end of file (Linux reports the last slave
    /// holder's close so).
    Terminal,
}

/// The owner's read end of an output pipe (or a PTY master), registered
/// with the reactor.
#[derive(Debug)]
pub(crate) struct AsyncReader(AsyncFd<OwnedFd>, Source);

/// Bytes a PTY can hold between a writer and our read, bounded above:
/// Linux's line discipline buffer (4 KiB) plus its flip buffers (at most
/// 64 KiB), macOS's clists (a few KiB). Reading this much after the main
/// process's exit takes everything it wrote.
const TERMINAL_CAPACITY: usize = 128 << 10;

impl AsyncReader {
    /// Registers the read end (must be called inside a tokio runtime).
    pub(crate) fn new(end: PipeEnd) -> io::Result<AsyncReader> {
        Ok(AsyncReader(
            register(end, Interest::READABLE)?,
            Source::Pipe,
        ))
    }

    /// Registers a PTY master for reading (made non-blocking).
    pub(crate) fn terminal(pty: super::pty::Pty) -> io::Result<AsyncReader> {
        let fd = pty.into_fd();
        super::stdio::set_nonblocking(&fd)?;
        Ok(AsyncReader(
            register(fd, Interest::READABLE)?,
            Source::Terminal,
        ))
    }

    /// Waits until the pipe may be readable, then runs `drain`, which reads
    /// with [`read_now`](Self::read_now) and says whether it found the pipe
    /// empty (so the next wait sleeps until new data).
    pub(crate) async fn wait(&self, drain: impl FnOnce() -> bool) -> io::Result<()> {
        let mut guard = self.0.readable().await?;
        if drain() {
            guard.clear_ready();
        }
        Ok(())
    }

    /// One read, now, whatever the reactor last saw: `Ok(None)` if the pipe
    /// is empty for now, `Ok(Some(0))` at EOF. (Reading past the reactor's
    /// readiness is what lets the driver take every byte the main process
    /// wrote the moment it exits.)
    pub(crate) fn read_now(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            match nix::unistd::read(self.0.get_ref().as_fd(), buf) {
                Ok(n) => return Ok(Some(n)),
                Err(nix::errno::Errno::EAGAIN) => return Ok(None),
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EIO) if self.1 == Source::Terminal => return Ok(Some(0)),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// How many bytes the pipe holds at most: everything a writer wrote
    /// before exiting fits in it.
    pub(crate) fn capacity(&self) -> usize {
        match self.1 {
            Source::Pipe => crate::contain::os::pipe_capacity(self.0.get_ref()),
            Source::Terminal => TERMINAL_CAPACITY,
        }
    }

    /// The most one read returns: a PTY hands out its line discipline's
    /// buffer (4 KiB on Linux) per read, a pipe everything it holds.
    pub(crate) fn read_size(&self) -> usize {
        match self.1 {
            Source::Pipe => usize::MAX,
            Source::Terminal => 4096,
        }
    }
}

/// The owner's write end of a stdin pipe, registered with the reactor.
#[derive(Debug)]
pub(crate) struct AsyncWriter(AsyncFd<OwnedFd>);

impl AsyncWriter {
    /// Registers a pipe end made by [`input_pipe`](super::input_pipe).
    pub(crate) fn new(end: PipeEnd) -> io::Result<AsyncWriter> {
        Ok(AsyncWriter(register(end, Interest::WRITABLE)?))
    }

    /// Registers a piped stdin handed out by a spawn (made non-blocking).
    pub(crate) fn from_file(file: File) -> io::Result<AsyncWriter> {
        let fd = OwnedFd::from(file);
        super::stdio::set_nonblocking(&fd)?;
        AsyncWriter::new(fd)
    }

    /// Registers a PTY master for writing (made non-blocking; the reading
    /// copy shares its file status flags anyway).
    pub(crate) fn terminal(pty: super::pty::Pty) -> io::Result<AsyncWriter> {
        let fd = pty.into_fd();
        super::stdio::set_nonblocking(&fd)?;
        AsyncWriter::new(fd)
    }

    /// Writes some of `bytes`, waiting while the pipe is full. A reader
    /// that is gone is `BrokenPipe` (never `SIGPIPE`: Rust programs ignore
    /// it by default).
    pub(crate) async fn write_some(&self, bytes: &[u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.0.writable().await?;
            match guard
                .try_io(|fd| nix::unistd::write(fd.get_ref(), bytes).map_err(io::Error::from))
            {
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                // A PTY master whose slave nobody holds any more.
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => {
                    return Err(io::ErrorKind::BrokenPipe.into());
                }
                Ok(result) => return result,
                Err(_would_block) => {}
            }
        }
    }
}
