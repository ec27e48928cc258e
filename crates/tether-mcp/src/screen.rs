//! Output bytes as a model is shown them: what a terminal would leave on
//! the screen, as plain text.
//!
//! - invalid UTF-8 becomes U+FFFD (the raw bytes stay readable through the
//!   registry; only this view is lossy);
//! - ANSI escape sequences (colours, cursor moves, OSC titles and links)
//!   are removed: to a model they are noise that costs tokens;
//! - carriage-return progress (`50%\r75%\r100%\n`) collapses to the last
//!   state of each line, so a progress bar costs one line, not thousands;
//! - backspaces erase the character before them; other control characters
//!   except `\n` and `\t` are dropped.
//!
//! Rendering never grows text except by U+FFFD (3 bytes per invalid byte),
//! which is why [`excerpt`](crate::excerpt) measures rendered sizes.

/// Renders raw output bytes as text for the model.
pub fn render(bytes: &[u8]) -> String {
    let decoded = String::from_utf8_lossy(bytes);
    let stripped = strip_escapes(&decoded);
    collapse_lines(&stripped)
}

/// How many of `bytes` can be rendered now without cutting a character or
/// an escape sequence in two: everything but an incomplete UTF-8 sequence
/// or an unterminated escape sequence at the very end, whose rest has not
/// arrived yet. Rendering those now would show U+FFFD or a stray `[31`
/// where the next read would have shown the real thing.
pub fn complete_len(bytes: &[u8]) -> usize {
    let len = bytes.len() - incomplete_utf8_tail(bytes);
    // An escape sequence is short; one left open further back than this
    // is garbage, not a sequence in flight.
    const LONGEST_ESCAPE: usize = 64;
    let window = len.saturating_sub(LONGEST_ESCAPE);
    match bytes[window..len].iter().rposition(|&b| b == 0x1b) {
        Some(at) if !escape_is_complete(&bytes[window + at..len]) => window + at,
        _ => len,
    }
}

/// Bytes at the end of `bytes` that start a UTF-8 sequence but lack its
/// continuation bytes (0 to 3).
pub fn incomplete_utf8_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back for the lead
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

/// Leading continuation bytes (a character cut at its start), at most 3.
pub fn continuation_prefix(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|&&b| b & 0xC0 == 0x80)
        .count()
}

/// Whether `seq` (starting at ESC) is a whole escape sequence.
fn escape_is_complete(seq: &[u8]) -> bool {
    match seq.get(1) {
        None => false,
        // CSI: parameters and intermediates, then a final byte 0x40..=0x7E.
        Some(b'[') => seq[2..].iter().any(|b| (0x40..=0x7e).contains(b)),
        // OSC, DCS, SOS, PM, APC: until BEL or ESC \.
        Some(b']' | b'P' | b'X' | b'^' | b'_') => {
            seq[2..].contains(&0x07) || seq[2..].windows(2).any(|w| w == b"\x1b\\")
        }
        // Two-character sequences (ESC 7, ESC =, ESC ( B needs one more).
        Some(b'(' | b')' | b'*' | b'+' | b'#' | b'%') => seq.len() >= 3,
        Some(_) => true,
    }
}

/// Removes ANSI/VT escape sequences (7-bit and the 8-bit CSI/OSC forms).
fn strip_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                Some('(' | ')' | '*' | '+' | '#' | '%') => {
                    chars.next();
                }
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            _ => out.push(c),
        }
    }
    out
}

fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            return;
        }
    }
}

/// Skips an OSC/DCS-style string up to its terminator (BEL, ESC \ or ST).
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{07}' | '\u{9c}' => return,
            '\u{1b}' if chars.peek() == Some(&'\\') => {
                chars.next();
                return;
            }
            _ => {}
        }
    }
}

/// Collapses carriage-return rewrites and backspaces, line by line, and
/// drops control characters other than `\n` and `\t`.
fn collapse_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        // `\r\n` ends a line; it is not a rewrite.
        let line = line.strip_suffix('\r').unwrap_or(line);
        // The line's final state: the last non-empty rewrite (a trailing
        // `\r` means the next state has not arrived yet).
        let last = line.rsplit('\r').find(|s| !s.is_empty()).unwrap_or("");
        let start = out.len();
        for c in last.chars() {
            match c {
                '\u{8}' => {
                    if out.len() > start {
                        out.pop();
                    }
                }
                '\t' => out.push('\t'),
                c if c.is_control() => {}
                c => out.push(c),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_cursor_moves_and_titles_are_removed() {
        let raw = b"\x1b[1;31merror\x1b[0m: \x1b[2K\x1b[1Gdone\x1b]0;title\x07 ok \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\";
        assert_eq!(render(raw), "error: done ok link");
        assert_eq!(render("\u{9b}32mgreen\u{9b}0m".as_bytes()), "green");
        assert_eq!(render(b"\x1b(Bplain\x1b="), "plain");
    }

    #[test]
    fn carriage_return_progress_keeps_the_final_state() {
        assert_eq!(render(b"10%\r50%\r100%\ndone\n"), "100%\ndone\n");
        // CRLF line endings are line endings.
        assert_eq!(render(b"a\r\nb\r\n"), "a\nb\n");
        // A rewrite in flight shows the last state that arrived.
        assert_eq!(render(b"step 1\rstep 2\r"), "step 2");
        assert_eq!(render(b"abc\x08\x08d"), "ad");
        assert_eq!(render(b"bell\x07\x00\tend"), "bell\tend");
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        assert_eq!(render(b"ok \xff\xfe ok"), "ok \u{fffd}\u{fffd} ok");
        assert_eq!(render("héllo".as_bytes()), "héllo");
    }

    #[test]
    fn incomplete_tails_are_held_back() {
        let e_acute = "é".as_bytes(); // 2 bytes
        let euro = "€".as_bytes(); // 3 bytes
        assert_eq!(complete_len(b"abc"), 3);
        assert_eq!(complete_len(&[b'a', e_acute[0]]), 1);
        assert_eq!(complete_len(&[b'a', euro[0], euro[1]]), 1);
        assert_eq!(complete_len(&[b'a', euro[0], euro[1], euro[2]]), 4);
        assert_eq!(complete_len(b"ab\xff"), 3, "invalid, not incomplete");
        assert_eq!(complete_len(b"ok\x1b[31"), 2);
        assert_eq!(complete_len(b"ok\x1b[31m"), 7);
        assert_eq!(complete_len(b"ok\x1b]0;tit"), 2);
        assert_eq!(complete_len(b"ok\x1b"), 2);
        assert_eq!(complete_len(b""), 0);
        assert_eq!(continuation_prefix(&euro[1..]), 2);
        assert_eq!(continuation_prefix(b"abc"), 0);
    }
}
