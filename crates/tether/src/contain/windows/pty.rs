//! PTYs on Windows (ConPTY): not yet — `conpty.rs` has the primitive; this
//! is the seam's PTY surface with the Unix backend's signatures, so the
//! crate builds. Spawning with a PTY is refused with `Unsupported`
//! (`launch.rs`), so none of these values can exist.

use std::io;

use super::{AsyncReader, AsyncWriter};
use crate::terminal::PtySize;

/// No value: nothing here can be made until ConPTY sessions land.
#[derive(Debug)]
enum Never {}

fn unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "PTY sessions are not supported on Windows yet",
    )
}

/// The owner's end of a pseudo console (none can exist yet).
#[derive(Debug)]
pub(crate) struct Pty(Never);

impl Pty {
    pub(crate) fn resize(&self, _size: PtySize) -> io::Result<()> {
        match self.0 {}
    }
    pub(crate) fn size(&self) -> io::Result<PtySize> {
        match self.0 {}
    }
    pub(crate) fn eof_char(&self) -> u8 {
        match self.0 {}
    }
    pub(crate) fn try_clone(&self) -> io::Result<Pty> {
        match self.0 {}
    }
    pub(crate) fn read(&self, _buf: &mut [u8]) -> io::Result<usize> {
        match self.0 {}
    }
    pub(crate) fn write(&self, _buf: &[u8]) -> io::Result<usize> {
        match self.0 {}
    }
}

/// This process's console in raw mode: not yet.
#[derive(Debug)]
pub(crate) struct Console(Never);

impl Console {
    pub(crate) fn raw() -> io::Result<Console> {
        Err(unsupported())
    }
    pub(crate) fn size() -> Option<PtySize> {
        None
    }
    pub(crate) fn pass_through(&self, _pty: &Pty, _winch: &WinchWatcher) -> io::Result<()> {
        match self.0 {}
    }
}

/// Console size changes: not yet.
#[derive(Debug)]
pub(crate) struct WinchWatcher(Never);

impl WinchWatcher {
    pub(crate) fn install() -> io::Result<WinchWatcher> {
        Err(unsupported())
    }
}

impl AsyncReader {
    pub(crate) fn terminal(pty: Pty) -> io::Result<AsyncReader> {
        match pty.0 {}
    }
    /// The most one read returns: a pipe hands out everything it holds.
    pub(crate) fn read_size(&self) -> usize {
        usize::MAX
    }
}

impl AsyncWriter {
    pub(crate) fn terminal(pty: Pty) -> io::Result<AsyncWriter> {
        match pty.0 {}
    }
}
