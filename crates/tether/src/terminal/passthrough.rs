//! A PTY command attached to this process's own terminal, for a human at
//! it: what `tether run --pty` does.

use super::{Pty, PtySize};
use crate::contain::{Console, WinchWatcher};
use crate::error::Result;

/// Connects this process's terminal to a command's [`Pty`]: keys go to the
/// command raw (Ctrl-C, Ctrl-Z and the rest are the command's terminal's to
/// act on), its output comes back unchanged, and window-size changes are
/// passed on as resizes. On Windows the console is put in VT mode
/// (`ENABLE_VIRTUAL_TERMINAL_INPUT` on stdin, `ENABLE_VIRTUAL_TERMINAL_PROCESSING`
/// and `DISABLE_NEWLINE_AUTO_RETURN` on stdout) and its modes are restored
/// the same way.
///
/// Not run as a test (`no_run`): it puts the terminal of whoever runs it in
/// raw mode and hands it to `vim`.
///
/// ```no_run
/// # fn main() -> tether::Result<()> {
/// use tether::terminal::Passthrough;
/// let forwarder = tether::SignalForwarder::install()?; // first: blocks INT/TERM/HUP
/// let passthrough = Passthrough::install()?; // before any other thread
/// let size = Passthrough::size().unwrap_or_default();
/// let mut child = tether::Command::new("vim").pty(size).spawn()?;
/// forwarder.forward_to(&child)?;
/// let pty = child.pty.take().expect("a PTY child has one");
/// passthrough.attach(&pty)?; // until the terminal's last holder is gone
/// let status = child.wait()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Passthrough {
    winch: WinchWatcher,
}

impl Passthrough {
    /// Starts watching this process's window-size changes (Unix: blocks
    /// `SIGWINCH` and takes it on a thread of its own; Windows: nothing to
    /// do, the changes come with the console's input). Call it before any
    /// other thread exists — they inherit the signal mask — and after
    /// [`SignalForwarder::install`](crate::SignalForwarder::install).
    ///
    /// # Errors
    /// [`Error::Io`](crate::Error::Io) if the signal cannot be blocked or
    /// the thread not started; [`Error::Unsupported`](crate::Error::Unsupported)
    /// where PTYs are not available.
    pub fn install() -> Result<Passthrough> {
        Ok(Passthrough {
            winch: WinchWatcher::install()?,
        })
    }

    /// The size of this process's terminal, or `None` if stdin and stdout
    /// are not terminals.
    pub fn size() -> Option<PtySize> {
        Console::size()
    }

    /// Puts this process's terminal in raw mode (if stdin is one), copies
    /// between it and `pty` until the PTY reaches end of file — every
    /// process holding it is gone: exited, killed by a timeout or a
    /// forwarded signal — and restores the terminal's mode, whichever way
    /// this returns. At the end of stdin (not a terminal, say a pipe) the
    /// command gets its terminal's end-of-file character.
    ///
    /// # Errors
    /// [`Error::Io`](crate::Error::Io) from the terminal or the PTY (the
    /// mode is restored first).
    pub fn attach(&self, pty: &Pty) -> Result<()> {
        // The console's mode is restored at the end of this block, before
        // an error of the copy is returned.
        let copied = {
            let console = Console::raw()?;
            console.pass_through(&pty.0, &self.winch, None, || false)
        };
        Ok(copied?)
    }

    /// [`attach`](Self::attach), following `child`'s events meanwhile —
    /// `pty` is its terminal: a keeper that dies while processes of its
    /// tree hold the terminal open is noticed at once, not when they end
    /// by themselves; they are killed then (which ends the terminal), and
    /// the keeper's loss is returned ([`Error::KeeperLost`](crate::Error::KeeperLost)
    /// with the count) once the terminal's mode is restored.
    ///
    /// # Errors
    /// As [`attach`](Self::attach); and as [`Child::wait`](crate::Child::wait)
    /// for what ended the child's events.
    pub fn attach_child(&self, pty: &Pty, child: &mut crate::Child) -> Result<()> {
        let events = child.event_source();
        let mut ended = None;
        let copied = {
            let console = Console::raw()?;
            console.pass_through(&pty.0, &self.winch, events, || {
                child.take_events(&mut ended)
            })
        };
        copied?;
        ended.map_or(Ok(()), Err)
    }
}
