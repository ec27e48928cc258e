//! Durable sessions' holder doorway on Windows: not there yet. Every
//! constructor fails with `Unsupported`; the types exist so that code
//! above `contain/` builds unchanged (it then reports the error).

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The error every entry point returns here.
fn unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "durable sessions are not supported on Windows yet",
    )
}

#[derive(Debug)]
enum Never {}

/// Who is at the other end of a connection, as the kernel says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Effective uid of the process that connected.
    pub uid: u32,
    /// Its pid where the platform tells.
    pub pid: Option<u32>,
}

/// A connected, blocking client stream (never made on Windows).
#[derive(Debug)]
pub struct LocalStream(Never);

impl LocalStream {
    /// Always [`io::ErrorKind::Unsupported`] on Windows.
    pub fn connect(_path: &Path) -> io::Result<LocalStream> {
        Err(unsupported())
    }
    /// Unreachable on Windows.
    pub fn try_clone(&self) -> io::Result<LocalStream> {
        match self.0 {}
    }
    /// Unreachable on Windows.
    pub fn set_read_timeout(&self, _timeout: Option<Duration>) -> io::Result<()> {
        match self.0 {}
    }
}

impl Read for LocalStream {
    fn read(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        match self.0 {}
    }
}

impl Write for LocalStream {
    fn write(&mut self, _buf: &[u8]) -> io::Result<usize> {
        match self.0 {}
    }
    fn flush(&mut self) -> io::Result<()> {
        match self.0 {}
    }
}

/// A listening socket (never made on Windows).
#[derive(Debug)]
pub struct LocalListener(Never);

impl LocalListener {
    /// Always [`io::ErrorKind::Unsupported`] on Windows.
    pub fn bind_private(_path: &Path) -> io::Result<LocalListener> {
        Err(unsupported())
    }
    /// Unreachable on Windows.
    pub async fn accept(&self) -> io::Result<(AsyncLocalStream, Peer)> {
        match self.0 {}
    }
}

/// An accepted connection (never made on Windows).
#[derive(Debug)]
pub struct AsyncLocalStream(Never);

impl AsyncRead for AsyncLocalStream {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        _buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.0 {}
    }
}

impl AsyncWrite for AsyncLocalStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        _buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.0 {}
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.0 {}
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.0 {}
    }
}

/// At most one holder per state directory (never taken on Windows).
#[derive(Debug)]
pub struct HolderLock(Never);

impl HolderLock {
    /// Always [`io::ErrorKind::Unsupported`] on Windows.
    pub fn try_take(_path: &Path) -> io::Result<Option<HolderLock>> {
        Err(unsupported())
    }
}

/// Which side of [`detach`] this is.
#[derive(Debug)]
pub enum Detached {
    /// The process that called `detach`.
    Parent {
        /// Read end of the readiness pipe.
        ready: File,
    },
    /// The detached process.
    Holder {
        /// Write end of the readiness pipe.
        ready: File,
    },
}

/// Always [`io::ErrorKind::Unsupported`] on Windows.
pub fn detach() -> io::Result<Detached> {
    Err(unsupported())
}

/// No uid on Windows: 0.
pub fn effective_uid() -> u32 {
    0
}

/// Always [`io::ErrorKind::Unsupported`] on Windows.
pub fn redirect_stdio(_log: Option<&Path>) -> io::Result<()> {
    Err(unsupported())
}

/// Nothing to do on Windows.
pub fn holder_started(_pid: u32) {}
