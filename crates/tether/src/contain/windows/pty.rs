//! PTYs on Windows (ConPTY): not yet. The same signatures as the Unix
//! backend's `pty.rs` and `console.rs`, so the crate builds; opening a PTY
//! fails with `Unsupported` (spawning does anyway, for now).

use std::io;

use super::{AsyncReader, AsyncWriter, Never, io_unsupported, never};
use crate::terminal::PtySize;

/// The owner's end of a pseudo console (none can exist yet).
#[derive(Debug)]
pub(crate) struct Pty(Never);

impl Pty {
    pub(crate) fn resize(&self, _size: PtySize) -> io::Result<()> {
        never()
    }
    pub(crate) fn size(&self) -> io::Result<PtySize> {
        never()
    }
    pub(crate) fn eof_char(&self) -> u8 {
        never()
    }
    pub(crate) fn try_clone(&self) -> io::Result<Pty> {
        never()
    }
    pub(crate) fn read(&self, _buf: &mut [u8]) -> io::Result<usize> {
        never()
    }
    pub(crate) fn write(&self, _buf: &[u8]) -> io::Result<usize> {
        never()
    }
}

/// This process's console in raw mode: not yet.
#[derive(Debug)]
pub(crate) struct Console(Never);

impl Console {
    pub(crate) fn raw() -> io::Result<Console> {
        Err(io_unsupported())
    }
    pub(crate) fn size() -> Option<PtySize> {
        None
    }
    pub(crate) fn pass_through(&self, _pty: &Pty, _winch: &WinchWatcher) -> io::Result<()> {
        never()
    }
}

/// Console size changes: not yet.
#[derive(Debug)]
pub(crate) struct WinchWatcher(Never);

impl WinchWatcher {
    pub(crate) fn install() -> io::Result<WinchWatcher> {
        Err(io_unsupported())
    }
}

impl AsyncReader {
    pub(crate) fn terminal(_pty: Pty) -> io::Result<AsyncReader> {
        Err(io_unsupported())
    }
    pub(crate) fn read_size(&self) -> usize {
        never()
    }
}

impl AsyncWriter {
    pub(crate) fn terminal(_pty: Pty) -> io::Result<AsyncWriter> {
        Err(io_unsupported())
    }
}
