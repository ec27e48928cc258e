//! Pseudo-terminals: running a command on a PTY instead of pipes, and
//! making what it shows legible.
//!
//! Interactive programs behave differently without a terminal: `isatty()`
//! is false, output is block-buffered, REPLs print no prompt, `sudo` and
//! `ssh` refuse, pagers and TUIs do not start. A PTY session gives the
//! command a real terminal while keeping every guarantee of a pipe
//! session: it is held by its keeper like any other tree, its output goes
//! into the same lossless bounded stream, and a kill is verified empty.
//!
//! - [`PtySize`]: rows × columns, bounded (a bad size is an error).
//! - [`Command::pty`](crate::Command::pty) and
//!   [`RunSpec::pty`](crate::registry::RunSpec::pty) start a command on a
//!   PTY; [`Pty`] is the owner's end (the master).
//! - [`Key`]: named keys (`Enter`, `Ctrl-C`, `Up`, `F5`, …) encoded the way
//!   a terminal sends them, so a caller never writes escape sequences.
//! - [`Screen`]: the rendered screen of a registry PTY session — text rows,
//!   cursor, alternate screen — from a terminal emulator (`vt100`) fed with
//!   everything the command prints.
//! - [`Passthrough`]: a PTY command attached to this process's own
//!   terminal (what `tether run --pty` does).
//!
//! # How it works
//!
//! The owner opens the PTY pair (in `contain/unix`), keeps the master and
//! hands the slave to the keeper as the command's stdin, stdout and
//! stderr. The keeper starts the command as a session leader and makes the
//! slave its controlling terminal (`setsid` + `TIOCSCTTY` in the forked
//! child). So the command is contained exactly as a pipe command is
//! (subreaper or PID namespace on Linux, process group and spawn tag on
//! macOS), and the master reaches end of file (`EIO` on Linux) when the
//! last process holding the slave is gone — the moment the owner closes
//! the master, never at a timer. Kills of PTY sessions send `SIGHUP` and
//! `SIGTERM` together to the whole tree, then `SIGKILL` to whatever is
//! alive when the grace ends.

mod emulator;
mod keys;
mod passthrough;
mod pty;
pub(crate) mod queries;

use crate::error::{Error, Result};

pub use emulator::{Emulator, Screen};
pub use keys::{Key, encode_keys};
pub use passthrough::Passthrough;
pub use pty::Pty;

/// Environment a registry PTY session gets unless its spec sets the
/// variable: a terminal type every curses program knows, and pagers that
/// print instead of waiting for a key nobody will press.
pub const AGENT_ENV: [(&str, &str); 3] = [
    ("TERM", "xterm-256color"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
];

/// The size of a terminal, in character cells.
///
/// Rows are 1–[`MAX_ROWS`](PtySize::MAX_ROWS) and columns
/// 1–[`MAX_COLS`](PtySize::MAX_COLS): the screen a session keeps costs
/// memory per cell, and a size outside these is a caller's mistake (WSL2
/// has been seen reporting 131072×1), so it is refused, never clamped in
/// silence. The default is 30 rows × 120 columns: wide enough that
/// compiler errors and `ps` lines rarely wrap, short enough to read whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PtySize {
    rows: u16,
    cols: u16,
}

impl PtySize {
    /// Most rows accepted.
    pub const MAX_ROWS: u16 = 500;
    /// Most columns accepted.
    pub const MAX_COLS: u16 = 1000;
    /// 30 rows × 120 columns.
    pub const DEFAULT: PtySize = PtySize {
        rows: 30,
        cols: 120,
    };

    /// A size of `rows` × `cols`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] (`what: "terminal size"`) when either is 0
    /// or above its maximum.
    ///
    /// ```
    /// use tether::terminal::PtySize;
    ///
    /// let size = PtySize::new(24, 80)?;
    /// assert_eq!((size.rows(), size.cols()), (24, 80));
    /// assert_eq!(PtySize::default(), PtySize::new(30, 120)?);
    /// assert!(PtySize::new(131072, 1).is_err()); // refused, never clamped
    /// # Ok::<(), tether::Error>(())
    /// ```
    pub fn new(rows: u32, cols: u32) -> Result<PtySize> {
        let bad = |reason: String| Error::InvalidInput {
            what: "terminal size",
            reason,
        };
        if rows == 0 || rows > u32::from(Self::MAX_ROWS) {
            return Err(bad(format!("{rows} rows: must be 1 to {}", Self::MAX_ROWS)));
        }
        if cols == 0 || cols > u32::from(Self::MAX_COLS) {
            return Err(bad(format!(
                "{cols} columns: must be 1 to {}",
                Self::MAX_COLS
            )));
        }
        Ok(PtySize {
            rows: rows as u16,
            cols: cols as u16,
        })
    }

    /// Rows (lines).
    pub fn rows(self) -> u16 {
        self.rows
    }

    /// Columns (characters per line).
    pub fn cols(self) -> u16 {
        self.cols
    }

    /// A size read from a real terminal, bounded into range (a terminal
    /// reporting 0×0, as a detached one may, gets the default).
    pub(crate) fn clamped(rows: u16, cols: u16) -> PtySize {
        if rows == 0 || cols == 0 {
            return PtySize::DEFAULT;
        }
        PtySize {
            rows: rows.min(Self::MAX_ROWS),
            cols: cols.min(Self::MAX_COLS),
        }
    }
}

impl Default for PtySize {
    fn default() -> PtySize {
        PtySize::DEFAULT
    }
}

impl std::fmt::Display for PtySize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.rows, self.cols)
    }
}

#[cfg(test)]
mod tests {
    use super::PtySize;

    #[test]
    fn sizes_are_bounded() {
        assert_eq!(PtySize::new(30, 120).unwrap(), PtySize::default());
        assert!(PtySize::new(0, 80).is_err());
        assert!(PtySize::new(24, 0).is_err());
        assert!(PtySize::new(501, 80).is_err());
        assert!(PtySize::new(24, 1001).is_err());
        assert!(PtySize::new(u32::MAX, u32::MAX).is_err());
        assert_eq!(PtySize::new(500, 1000).unwrap().rows(), 500);
        assert_eq!(PtySize::clamped(0, 0), PtySize::default());
        assert_eq!(PtySize::clamped(65_535, 1).rows(), 500);
    }
}
