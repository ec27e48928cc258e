//! The owner's end of a command's PTY.

use std::io::{self, Read, Write};

use super::PtySize;
use crate::error::Result;

/// The master of a PTY a [`Child`](crate::Child) runs on (see
/// [`Command::pty`](crate::Command::pty)): read it for everything the
/// command shows (its output and the terminal's echo), write it to type.
///
/// A read returns `Ok(0)` once no process holds the terminal any more —
/// the command and every descendant that kept it are gone. Dropping the
/// `Pty` closes the master; the kernel then hangs the terminal up
/// (`SIGHUP` to its foreground group).
///
/// Windows: the owner's ends of a pseudoconsole (ConPTY). A read returns
/// `Ok(0)` once the job is empty and the pseudoconsole closed (tether
/// closes it then; conhost paints its last frame first). Dropping every
/// copy closes the input pipe, and conhost ends the console: its
/// processes get `CTRL_CLOSE_EVENT`. The size is the one last set
/// (Windows cannot read it back).
#[derive(Debug)]
pub struct Pty(pub(crate) crate::contain::Pty);

impl Pty {
    /// Sets the window size. The command's foreground process group gets
    /// `SIGWINCH` when it changes (Windows: `ResizePseudoConsole`; console
    /// programs see a buffer-size event).
    ///
    /// # Errors
    /// [`Error::Io`](crate::Error::Io) if the terminal cannot be resized.
    pub fn resize(&self, size: PtySize) -> Result<()> {
        Ok(self.0.resize(size)?)
    }

    /// The window size now.
    ///
    /// # Errors
    /// [`Error::Io`](crate::Error::Io) if it cannot be read.
    pub fn size(&self) -> Result<PtySize> {
        Ok(self.0.size()?)
    }

    /// The terminal's end-of-file character (`VEOF`, normally Ctrl-D).
    /// Written at the start of a line, it ends a canonical-mode read with
    /// 0 bytes — the program sees end of file, as at a closed pipe.
    /// Windows: Ctrl-Z (0x1A), which ends a console read only when it
    /// starts the line and Enter follows (`\x1a\r`).
    pub fn eof_char(&self) -> u8 {
        self.0.eof_char()
    }

    /// A second handle to the same master (say, one thread reads while
    /// another writes).
    ///
    /// # Errors
    /// [`Error::Io`](crate::Error::Io) when out of descriptors.
    pub fn try_clone(&self) -> Result<Pty> {
        Ok(Pty(self.0.try_clone()?))
    }
}

impl Read for Pty {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Pty {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
