//! Named keys and the bytes a terminal (xterm, and what `TERM=xterm-256color`
//! promises) sends for them, so a caller types `Enter` or `Ctrl-C` instead of
//! writing escape sequences.

use std::str::FromStr;

use crate::error::{Error, Result};

/// A key as a terminal sends it.
///
/// Names (case-insensitive, `-`, `+` or `_` between a modifier and its
/// key): `Enter` (`Return`), `Tab`, `Shift-Tab` (`BackTab`), `Esc`
/// (`Escape`), `Backspace`, `Space`, `Up`, `Down`, `Left`, `Right`, `Home`,
/// `End`, `PageUp` (`PgUp`), `PageDown` (`PgDn`), `Insert`, `Delete`
/// (`Del`), `F1`–`F12`, `Ctrl-A`…`Ctrl-Z` and `Ctrl-@ [ \ ] ^ _` (plus
/// `Ctrl-Space`), `Alt-<char>` (Escape, then the character), and any single
/// character as itself (`q`, `y`, `:`, `/`). Parsing anything else is
/// [`Error::InvalidInput`] naming it.
///
/// ```
/// use tether::terminal::{Key, encode_keys};
///
/// assert_eq!("Ctrl-C".parse::<Key>()?, Key::Ctrl(3));
/// assert_eq!(Key::Up.bytes(false), b"\x1b[A");
/// assert_eq!(Key::Up.bytes(true), b"\x1bOA"); // what vim and less expect
/// assert_eq!(encode_keys(&["i", "Esc", ":", "w", "q", "Enter"], false)?, b"i\x1b:wq\r");
/// assert!(encode_keys(&["Hyper-Q"], false).is_err());
/// # Ok::<(), tether::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    /// Carriage return, what the Enter key sends (the terminal's `ICRNL`
    /// turns it into a newline for the program).
    Enter,
    /// Horizontal tab.
    Tab,
    /// Shift+Tab (`ESC [ Z`).
    BackTab,
    /// Escape.
    Esc,
    /// DEL (0x7f), what xterm's Backspace sends and the terminal's default
    /// erase character.
    Backspace,
    /// A space.
    Space,
    /// Cursor up.
    Up,
    /// Cursor down.
    Down,
    /// Cursor left.
    Left,
    /// Cursor right.
    Right,
    /// Home.
    Home,
    /// End.
    End,
    /// Page up.
    PageUp,
    /// Page down.
    PageDown,
    /// Insert.
    Insert,
    /// Delete (forward).
    Delete,
    /// Function key 1–12.
    F(u8),
    /// A control character (the byte itself: `Ctrl-C` is 0x03).
    Ctrl(u8),
    /// Alt (Meta) with a character: Escape, then the character.
    Alt(char),
    /// A character typed as itself (UTF-8).
    Char(char),
}

impl Key {
    /// The bytes this key sends. `application_cursor` is the terminal's
    /// cursor-key mode (DECCKM, which full-screen programs such as `vim`
    /// and `less` turn on): arrows, Home and End then send `ESC O x`
    /// instead of `ESC [ x`.
    pub fn bytes(self, application_cursor: bool) -> Vec<u8> {
        let cursor = |c: u8| {
            if application_cursor {
                vec![0x1b, b'O', c]
            } else {
                vec![0x1b, b'[', c]
            }
        };
        let tilde = |n: &str| {
            let mut b = vec![0x1b, b'['];
            b.extend_from_slice(n.as_bytes());
            b.push(b'~');
            b
        };
        match self {
            Key::Enter => vec![b'\r'],
            Key::Tab => vec![b'\t'],
            Key::BackTab => b"\x1b[Z".to_vec(),
            Key::Esc => vec![0x1b],
            Key::Backspace => vec![0x7f],
            Key::Space => vec![b' '],
            Key::Up => cursor(b'A'),
            Key::Down => cursor(b'B'),
            Key::Right => cursor(b'C'),
            Key::Left => cursor(b'D'),
            Key::Home => cursor(b'H'),
            Key::End => cursor(b'F'),
            Key::Insert => tilde("2"),
            Key::Delete => tilde("3"),
            Key::PageUp => tilde("5"),
            Key::PageDown => tilde("6"),
            Key::F(n @ 1..=4) => vec![0x1b, b'O', b'P' + (n - 1)],
            Key::F(n) => tilde(match n {
                5 => "15",
                6 => "17",
                7 => "18",
                8 => "19",
                9 => "20",
                10 => "21",
                11 => "23",
                _ => "24",
            }),
            Key::Ctrl(byte) => vec![byte],
            Key::Alt(c) => {
                let mut b = vec![0x1b];
                let mut utf8 = [0u8; 4];
                b.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
                b
            }
            Key::Char(c) => {
                let mut utf8 = [0u8; 4];
                c.encode_utf8(&mut utf8).as_bytes().to_vec()
            }
        }
    }
}

impl FromStr for Key {
    type Err = Error;

    fn from_str(name: &str) -> Result<Key> {
        let bad = || Error::InvalidInput {
            what: "key",
            reason: format!(
                "unknown key {name:?}: use Enter, Tab, Shift-Tab, Esc, Backspace, Space, \
                 Up, Down, Left, Right, Home, End, PageUp, PageDown, Insert, Delete, \
                 F1-F12, Ctrl-<letter>, Alt-<char> or one character"
            ),
        };
        let mut chars = name.chars();
        if let (Some(c), None) = (chars.next(), chars.next())
            && !c.is_control()
        {
            return Ok(Key::Char(c));
        }
        let trimmed = name.trim();
        if let Some((modifier, rest)) = split_modifier(trimmed) {
            return match modifier.as_str() {
                "ctrl" | "control" | "c" => ctrl(rest).ok_or_else(bad),
                "alt" | "meta" | "m" => {
                    let mut chars = rest.chars();
                    match (chars.next(), chars.next()) {
                        (Some(c), None) => Ok(Key::Alt(c)),
                        _ => Err(bad()),
                    }
                }
                "shift" if rest.eq_ignore_ascii_case("tab") => Ok(Key::BackTab),
                _ => Err(bad()),
            };
        }
        let lower = trimmed.to_ascii_lowercase();
        Ok(match lower.as_str() {
            "enter" | "return" | "cr" => Key::Enter,
            "tab" => Key::Tab,
            "backtab" => Key::BackTab,
            "esc" | "escape" => Key::Esc,
            "backspace" | "bs" => Key::Backspace,
            "space" => Key::Space,
            "up" => Key::Up,
            "down" => Key::Down,
            "left" => Key::Left,
            "right" => Key::Right,
            "home" => Key::Home,
            "end" => Key::End,
            "pageup" | "pgup" => Key::PageUp,
            "pagedown" | "pgdn" | "pgdown" => Key::PageDown,
            "insert" | "ins" => Key::Insert,
            "delete" | "del" => Key::Delete,
            f if f.starts_with('f') => match f[1..].parse::<u8>() {
                Ok(n @ 1..=12) => Key::F(n),
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        })
    }
}

/// `Ctrl-C` → `("ctrl", "C")`; `None` for a name without a modifier
/// (`-` alone, as in `Ctrl--`, is not a separator for the second dash).
fn split_modifier(name: &str) -> Option<(String, &str)> {
    let at = name.find(['-', '+', '_'])?;
    if at == 0 || at + 1 >= name.len() {
        return None;
    }
    Some((name[..at].to_ascii_lowercase(), &name[at + 1..]))
}

/// The control character `Ctrl-<rest>`.
fn ctrl(rest: &str) -> Option<Key> {
    if rest.eq_ignore_ascii_case("space") {
        return Some(Key::Ctrl(0));
    }
    let mut chars = rest.chars();
    let (Some(c), None) = (chars.next(), chars.next()) else {
        return None;
    };
    let c = c.to_ascii_uppercase();
    match c {
        'A'..='Z' | '@' | '[' | '\\' | ']' | '^' | '_' => Some(Key::Ctrl(c as u8 & 0x1f)),
        '?' => Some(Key::Ctrl(0x7f)),
        _ => None,
    }
}

/// The bytes of `keys`, in order, for a terminal in cursor-key mode
/// `application_cursor` (see [`Key::bytes`]).
///
/// # Errors
/// [`Error::InvalidInput`] naming the first unknown key; nothing is
/// encoded then.
pub fn encode_keys<S: AsRef<str>>(keys: &[S], application_cursor: bool) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    for name in keys {
        bytes.extend(name.as_ref().parse::<Key>()?.bytes(application_cursor));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(name: &str) -> Vec<u8> {
        name.parse::<Key>().unwrap().bytes(false)
    }

    #[test]
    fn names_encode_as_xterm_sends_them() {
        assert_eq!(b("Enter"), b"\r");
        assert_eq!(b("ctrl-c"), [3]);
        assert_eq!(b("Ctrl+D"), [4]);
        assert_eq!(b("CTRL_z"), [0x1a]);
        assert_eq!(b("Ctrl-\\"), [0x1c]);
        assert_eq!(b("Ctrl-Space"), [0]);
        assert_eq!(b("Esc"), [0x1b]);
        assert_eq!(b("Backspace"), [0x7f]);
        assert_eq!(b("Up"), b"\x1b[A");
        assert_eq!(b("Shift-Tab"), b"\x1b[Z");
        assert_eq!(b("PageDown"), b"\x1b[6~");
        assert_eq!(b("F1"), b"\x1bOP");
        assert_eq!(b("F4"), b"\x1bOS");
        assert_eq!(b("F5"), b"\x1b[15~");
        assert_eq!(b("F12"), b"\x1b[24~");
        assert_eq!(b("Alt-x"), b"\x1bx");
        assert_eq!(b("q"), b"q");
        assert_eq!(b("é"), "é".as_bytes());
        assert_eq!(b("-"), b"-");
        assert_eq!("Up".parse::<Key>().unwrap().bytes(true), b"\x1bOA");
    }

    #[test]
    fn unknown_keys_are_errors() {
        for name in [
            "", "F0", "F13", "Ctrl-", "Ctrl-AB", "Hyper-x", "Enterr", "Ctrl-1",
        ] {
            assert!(name.parse::<Key>().is_err(), "{name:?} parsed");
        }
        assert!(encode_keys(&["Enter", "nope"], false).is_err());
        assert_eq!(encode_keys(&["Up", "Enter"], false).unwrap(), b"\x1b[A\r");
    }
}
