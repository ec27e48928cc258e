//! The screen of a PTY session: a terminal emulator fed with everything the
//! command prints, which also answers the queries a real terminal would.
//!
//! # Why `vt100`
//!
//! The emulator is the `vt100` crate (maintained, MIT, five small
//! dependencies, no threads and no I/O of its own): it keeps exactly the
//! state we report — the visible grid, cursor, alternate screen, cursor-key
//! mode — and hands every sequence it does not implement to a callback,
//! which is where the queries below are answered with its own cursor.
//! `alacritty_terminal` was the other candidate; it is a whole terminal's
//! core with its own PTY and event loop (about 50 crates here, `polling`,
//! `signal-hook`, `rustix-openpty`, `parking_lot`), most of which would
//! duplicate what `contain/` already does.
//!
//! # Queries answered
//!
//! Programs that ask the terminal something and wait for the answer hang
//! when nobody is attached (a shell's prompt code, `vim`, test runners
//! that probe the cursor). The emulator answers, through the master, as
//! xterm would:
//!
//! | query | sequence | answer |
//! |---|---|---|
//! | cursor position report (DSR 6) | `ESC [ 6 n` | `ESC [ row ; col R` (the emulator's cursor, 1-based) |
//! | extended cursor position (DECXCPR) | `ESC [ ? 6 n` | `ESC [ ? row ; col ; 1 R` |
//! | device status (DSR 5) | `ESC [ 5 n` | `ESC [ 0 n` (OK) |
//! | primary device attributes (DA1) | `ESC [ c`, `ESC [ 0 c` | `ESC [ ? 6 2 ; 2 2 c` (VT220 class, ANSI colour) |
//! | secondary device attributes (DA2) | `ESC [ > c` | `ESC [ > 0 ; 1 0 ; 0 c` |
//! | text area size in characters | `ESC [ 1 8 t` | `ESC [ 8 ; rows ; cols t` |
//!
//! Nothing else is answered (colour queries, title reports, DECRQM): a
//! program asking those gets no reply, as from a terminal that lacks them.

use std::num::NonZeroU16;

use super::PtySize;

/// What a PTY session's screen shows now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Screen {
    /// The terminal's size.
    pub size: PtySize,
    /// The visible text, one string per row (`size.rows()` of them),
    /// trailing blanks trimmed; wide characters take one `char`.
    pub lines: Vec<String>,
    /// Cursor row, 0-based (row 0 is the top line).
    pub cursor_row: u16,
    /// Cursor column, 0-based.
    pub cursor_col: u16,
    /// Whether the cursor is hidden (DECTCEM off), as TUIs do while drawing.
    pub cursor_hidden: bool,
    /// Whether the alternate screen is active: a full-screen program
    /// (`vim`, `less`, `htop`) is drawing; the normal screen returns when
    /// it exits.
    pub alternate_screen: bool,
    /// Whether cursor keys are in application mode (DECCKM): arrows are
    /// sent as `ESC O x`. [`Registry::keys`](crate::registry::Registry::keys)
    /// follows it.
    pub application_cursor: bool,
}

impl Screen {
    /// The rows joined by newlines, trailing blank rows dropped.
    pub fn text(&self) -> String {
        let last = self
            .lines
            .iter()
            .rposition(|l| !l.is_empty())
            .map_or(0, |i| i + 1);
        self.lines[..last].join("\n")
    }
}

/// Collects the answers to queries met while parsing.
#[derive(Default)]
struct Answers {
    replies: Vec<u8>,
    /// Queries answered in `replies`.
    count: u64,
}

impl vt100::Callbacks for Answers {
    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        let first = params.first().and_then(|p| p.first()).copied();
        let (row, col) = screen.cursor_position();
        let reply = match (i1, c, first) {
            (None, 'n', Some(6)) => format!("\x1b[{};{}R", row + 1, col + 1),
            (Some(b'?'), 'n', Some(6)) => format!("\x1b[?{};{};1R", row + 1, col + 1),
            (None, 'n', Some(5)) => "\x1b[0n".to_owned(),
            (None, 'c', None | Some(0)) => "\x1b[?62;22c".to_owned(),
            (Some(b'>'), 'c', None | Some(0)) => "\x1b[>0;10;0c".to_owned(),
            (None, 't', Some(18)) => {
                let (rows, cols) = screen.size();
                format!("\x1b[8;{rows};{cols}t")
            }
            _ => return,
        };
        self.replies.extend_from_slice(reply.as_bytes());
        self.count += 1;
    }
}

/// A terminal emulator: what a registry PTY session keeps to render its
/// [`Screen`] and answer the program's queries (see the module docs for
/// which). Feed it every byte the program prints, in order. Its memory is
/// one grid of `rows × cols` cells (no scrollback: the byte stream is the
/// history).
///
/// ```
/// use tether::terminal::{Emulator, PtySize};
/// let mut e = Emulator::new(PtySize::default());
/// e.feed(b"\x1b[2J\x1b[5;10Hhello\x1b[6n");
/// assert_eq!(e.screen().lines[4], "         hello");
/// assert_eq!(e.take_replies(), b"\x1b[5;15R"); // what to write back to it
/// ```
pub struct Emulator {
    parser: vt100::Parser<Answers>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("size", &self.parser.screen().size())
            .finish_non_exhaustive()
    }
}

fn nonzero(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN)
}

impl Emulator {
    /// An empty screen of `size`.
    pub fn new(size: PtySize) -> Emulator {
        Emulator {
            parser: vt100::Parser::new_with_callbacks(
                nonzero(size.rows()),
                nonzero(size.cols()),
                0,
                Answers::default(),
            ),
        }
    }

    /// Parses output; answers to queries in it wait in
    /// [`take_replies`](Self::take_replies).
    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
    }

    /// The answers owed to the program, in the order it asked.
    pub fn take_replies(&mut self) -> Vec<u8> {
        self.take_answers().0
    }

    /// The answers owed to the program, and how many queries they answer.
    pub(crate) fn take_answers(&mut self) -> (Vec<u8>, u64) {
        let answers = self.parser.callbacks_mut();
        let count = std::mem::take(&mut answers.count);
        (std::mem::take(&mut answers.replies), count)
    }

    /// Changes the size (as the terminal's window did).
    pub fn resize(&mut self, size: PtySize) {
        self.parser
            .set_size(nonzero(size.rows()), nonzero(size.cols()));
    }

    /// The terminal's size.
    pub fn size(&self) -> PtySize {
        let (rows, cols) = self.parser.screen().size();
        PtySize::clamped(rows.get(), cols.get())
    }

    /// Whether cursor keys are in application mode (DECCKM).
    pub fn application_cursor(&self) -> bool {
        self.parser.screen().application_cursor()
    }

    /// What the screen shows now.
    pub fn screen(&self) -> Screen {
        let s = self.parser.screen();
        let (rows, cols) = s.size();
        let (cursor_row, cursor_col) = s.cursor_position();
        Screen {
            size: PtySize::clamped(rows.get(), cols.get()),
            lines: s.rows(0, cols.get()).collect(),
            cursor_row,
            cursor_col,
            cursor_hidden: s.hide_cursor(),
            alternate_screen: s.alternate_screen(),
            application_cursor: s.application_cursor(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_addressing_lands_where_asked() {
        let mut e = Emulator::new(PtySize::new(24, 80).unwrap());
        e.feed(b"\x1b[2J\x1b[5;10Hhello");
        let s = e.screen();
        assert_eq!(s.lines[4], format!("{}hello", " ".repeat(9)));
        assert_eq!((s.cursor_row, s.cursor_col), (4, 14));
        assert!(!s.alternate_screen);
        e.feed(b"\x1b[?1049h\x1b[?1h");
        assert!(e.screen().alternate_screen);
        assert!(e.application_cursor());
    }

    #[test]
    fn queries_are_answered_with_the_real_cursor() {
        let mut e = Emulator::new(PtySize::new(30, 120).unwrap());
        e.feed(b"ab\r\ncd\x1b[6n\x1b[c\x1b[>c\x1b[5n\x1b[18t\x1b[?6n\x1b[1m");
        assert_eq!(
            e.take_replies(),
            b"\x1b[2;3R\x1b[?62;22c\x1b[>0;10;0c\x1b[0n\x1b[8;30;120t\x1b[?2;3;1R"
        );
        assert!(e.take_replies().is_empty());
        // A query split across two reads is still answered once.
        e.feed(b"\x1b[");
        e.feed(b"6n");
        assert_eq!(e.take_replies(), b"\x1b[2;3R");
    }
}
