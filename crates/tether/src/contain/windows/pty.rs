//! The owner's end of a ConPTY session: the pseudoconsole's two pipes and
//! the pseudoconsole itself, with the Unix backend's signatures.
//!
//! Where Unix has one descriptor (the master) for reading, writing and
//! resizing, ConPTY has three objects: the input pipe we write, the output
//! pipe we read, and the `HPCON` that resizes and closes. Every copy of a
//! [`Pty`] holds its own handles to both pipes and a share of the
//! [`PseudoConsole`]; the job monitor holds another share and closes the
//! pseudoconsole once the job is empty (see `conpty.rs` for the order), so
//! the output reaches EOF exactly when conhost — its only writer — is gone.
//!
//! For the session driver the output is an ordinary [`AsyncReader`] (the
//! zero-byte-read waiter of `async_pipe.rs`) and the input an ordinary
//! [`AsyncWriter`]: the driver does not know it is reading a console.

use std::fs::File;
use std::io::{self, Write};
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use std::sync::Arc;

use super::async_pipe::{event, is_eof, read_overlapped};
use super::conpty::{Opened, PseudoConsole};
use super::{AsyncReader, AsyncWriter};
use crate::terminal::PtySize;

/// `^Z`: at the start of a line, followed by Enter, a console read
/// (`ReadFile` on console input, which the C runtime, Python and most
/// programs use) returns 0 bytes — end of file. It is what Windows users
/// type (Python's REPL: "Ctrl-Z plus Return to exit"); alone, without the
/// Enter, it is just a character in the line being edited.
const EOF_CHAR: u8 = 0x1A;

/// The owner's end of a pseudoconsole.
#[derive(Debug)]
pub(crate) struct Pty {
    /// Field order matters: the read end goes before the share of the
    /// pseudoconsole, so that dropping the last holder never closes it
    /// while a read end is left that nobody reads.
    output: OwnedHandle,
    input: File,
    console: Arc<PseudoConsole>,
}

impl Pty {
    /// Opens a pseudoconsole of `size`: the owner's end, and the shared
    /// pseudoconsole for the spawn and the job monitor.
    pub(super) fn open(size: PtySize) -> io::Result<(Pty, Arc<PseudoConsole>)> {
        let Opened {
            console,
            input,
            output,
        } = PseudoConsole::open(size)?;
        let console = Arc::new(console);
        let pty = Pty {
            output,
            input,
            console: Arc::clone(&console),
        };
        Ok((pty, console))
    }

    /// Resizes the pseudoconsole (`ResizePseudoConsole`): conhost reflows
    /// and repaints, and console programs see a `WINDOW_BUFFER_SIZE_EVENT`.
    pub(crate) fn resize(&self, size: PtySize) -> io::Result<()> {
        self.console.resize(size)
    }

    /// The size last set.
    pub(crate) fn size(&self) -> io::Result<PtySize> {
        Ok(self.console.size())
    }

    /// `^Z` (see [`eof_input`](Self::eof_input) for what ends a read).
    pub(crate) fn eof_char(&self) -> u8 {
        EOF_CHAR
    }

    /// What to type so that the program reading the console sees end of
    /// file: `^Z` and Enter.
    pub(crate) fn eof_input(&self) -> Vec<u8> {
        vec![EOF_CHAR, b'\r']
    }

    pub(crate) fn try_clone(&self) -> io::Result<Pty> {
        Ok(Pty {
            output: self.output.try_clone()?,
            input: self.input.try_clone()?,
            console: Arc::clone(&self.console),
        })
    }

    /// Blocking read of the rendered output; end of file (conhost gone,
    /// after the pseudoconsole was closed) is `Ok(0)`.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        read_blocking(&self.output, buf)
    }

    /// Blocking write of keyboard input. Once conhost is gone,
    /// `BrokenPipe`.
    pub(crate) fn write(&self, buf: &[u8]) -> io::Result<usize> {
        (&self.input).write(buf).map_err(|e| {
            if is_eof(&e) {
                io::Error::new(io::ErrorKind::BrokenPipe, e)
            } else {
                e
            }
        })
    }

    /// The input pipe's write end, for the console pass-through.
    pub(super) fn input(&self) -> &File {
        &self.input
    }
}

/// One blocking read of the overlapped output pipe `output` (std's `File`
/// must not read an overlapped handle): `Ok(0)` at EOF.
pub(super) fn read_blocking(output: &OwnedHandle, buf: &mut [u8]) -> io::Result<usize> {
    if buf.is_empty() {
        return Ok(0);
    }
    // An event per read: a `Pty` is shared by reference, so two threads may
    // read at once, and each overlapped read needs an event of its own.
    let done = event()?;
    let len = buf.len().min(u32::MAX as usize) as u32;
    match read_overlapped(output.as_raw_handle(), buf.as_mut_ptr(), len, &done, None) {
        Ok(n) => Ok(n.unwrap_or(0)),
        Err(e) if is_eof(&e) => Ok(0),
        Err(e) => Err(e),
    }
}

impl AsyncReader {
    /// The output of a pseudoconsole, read like any session pipe.
    pub(crate) fn terminal(pty: Pty) -> io::Result<AsyncReader> {
        AsyncReader::new(pty.output)
    }

    /// The most one read returns: a pipe hands out everything it holds.
    pub(crate) fn read_size(&self) -> usize {
        usize::MAX
    }
}

impl AsyncWriter {
    /// The input of a pseudoconsole, written like a session's stdin pipe.
    pub(crate) fn terminal(pty: Pty) -> io::Result<AsyncWriter> {
        AsyncWriter::from_file(pty.input)
    }
}

/// A session's output descriptor for `select` (Unix only): Windows has no
/// descriptor `select` could wait on, so there is none to make.
#[derive(Debug)]
pub(crate) struct Doorbell(());

impl Doorbell {
    /// Always `Unsupported` on Windows.
    pub(crate) fn new() -> std::io::Result<Doorbell> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "no selectable output descriptor on Windows",
        ))
    }
    pub(crate) fn ring(&self) {}
    pub(crate) fn clear(&self) {}
}
