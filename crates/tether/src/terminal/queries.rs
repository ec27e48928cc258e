//! Finding terminal queries in a PTY's output without parsing it: the
//! cheap scan that runs on the read path, so the full emulator (which
//! costs ~10 ms per MiB of TUI output here) need not.
//!
//! Every query the emulator answers is a control sequence (`CSI`) whose
//! final byte is `n`, `c` or `t` (see `emulator.rs`). The scan follows
//! exactly the part of `vte`'s state machine (the parser under `vt100`)
//! that leads to a control sequence: from the ground state only `ESC`
//! starts one; in the escape state `[` enters it, `CAN`/`SUB` abort, and
//! C0 controls, `DEL`, `ESC` and bytes from `0x80` leave it where it is;
//! inside it, a byte from `0x40` to `0x7E` ends it, `CAN`/`SUB` abort,
//! `ESC` starts over, and everything else stays in it. Everything else
//! `vte` does (escape dispatches, OSC, DCS and SOS/PM/APC strings) goes
//! back to the ground state or lasts until an `ESC`, which the scan meets
//! anyway. So the scan flags every sequence `vte` could dispatch as a
//! query (and some it would not: a flagged sequence is only parsed
//! earlier, never answered wrongly). A sequence split across reads is
//! carried in the scan's state.

/// Where the scan stands between two calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum ScanState {
    /// Outside any escape sequence.
    #[default]
    Ground,
    /// After `ESC`.
    Escape,
    /// Inside a control sequence (`ESC [` …).
    Csi,
}

/// Finds the ends of possible queries in a stream fed in pieces.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QueryScan {
    state: ScanState,
}

impl QueryScan {
    /// The index just past the final byte of the first possible query in
    /// `bytes`, given what came before; the scan's state is then at that
    /// point. `None`: no query ends in `bytes`, and the state is at its
    /// end.
    pub(crate) fn next_query_end(&mut self, bytes: &[u8]) -> Option<usize> {
        let mut i = 0;
        while i < bytes.len() {
            match self.state {
                ScanState::Ground => match memchr_esc(&bytes[i..]) {
                    Some(at) => {
                        self.state = ScanState::Escape;
                        i += at + 1;
                    }
                    None => return None,
                },
                ScanState::Escape => {
                    self.state = match bytes[i] {
                        b'[' => ScanState::Csi,
                        0x18 | 0x1a => ScanState::Ground,
                        0x00..=0x1f | 0x7f..=0xff => ScanState::Escape,
                        _ => ScanState::Ground,
                    };
                    i += 1;
                }
                ScanState::Csi => {
                    let byte = bytes[i];
                    i += 1;
                    match byte {
                        0x40..=0x7e => {
                            self.state = ScanState::Ground;
                            if matches!(byte, b'n' | b'c' | b't') {
                                return Some(i);
                            }
                        }
                        0x18 | 0x1a => self.state = ScanState::Ground,
                        0x1b => self.state = ScanState::Escape,
                        _ => {}
                    }
                }
            }
        }
        None
    }
}

/// The first `ESC` in `bytes`.
fn memchr_esc(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == 0x1b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::{Emulator, PtySize};

    /// Every query end in `stream`, fed in pieces of `piece` bytes.
    fn ends(stream: &[u8], piece: usize) -> Vec<usize> {
        let mut scan = QueryScan::default();
        let mut found = Vec::new();
        let mut base = 0;
        for chunk in stream.chunks(piece) {
            let mut at = 0;
            while let Some(end) = scan.next_query_end(&chunk[at..]) {
                at += end;
                found.push(base + at);
            }
            base += chunk.len();
        }
        found
    }

    #[test]
    fn queries_are_found_whole_and_split() {
        let stream = b"ab\x1b[6n cd \x1b[?6n\x1b[0m\x1b[>c\x1b[18t x";
        let want = vec![6, 15, 23, 28];
        for piece in 1..stream.len() {
            assert_eq!(ends(stream, piece), want, "pieces of {piece}");
        }
    }

    #[test]
    fn what_vte_reads_as_a_sequence_is_followed() {
        // C0 controls and DEL inside a sequence, and bytes from 0x80 after
        // ESC, do not end it; CAN aborts it; ESC starts over.
        assert_eq!(ends(b"\x1b[6\n\x7fn", 64), vec![6]);
        assert_eq!(ends(b"\x1b\x80\xc2[5n", 64), vec![6]);
        assert_eq!(ends(b"\x1b[6\x18n", 64), Vec::<usize>::new());
        assert_eq!(ends(b"\x1b[6\x1b[c", 64), vec![6]);
        // Not a control sequence: an escape with an intermediate, an OSC.
        assert_eq!(ends(b"\x1b ([6n", 64), Vec::<usize>::new());
        assert_eq!(ends(b"\x1b]0;a[6n\x07", 64), Vec::<usize>::new());
    }

    /// A stream with bytes of every value, escapes among them: every query
    /// the emulator answers ends where the scan says one may.
    #[test]
    fn the_scan_never_misses_a_query_the_emulator_answers() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut stream = Vec::new();
        let pieces: [&[u8]; 9] = [
            b"\x1b[", b"6n", b"\x1b[c", b"\x1b", b"[", b"?", b"18t", b"\x18", b"\x1b[5n",
        ];
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if state.is_multiple_of(3) {
                stream.extend_from_slice(pieces[(state >> 8) as usize % pieces.len()]);
            } else {
                stream.push((state >> 16) as u8);
            }
        }
        let scanned = ends(&stream, 4096);
        // The emulator, fed byte by byte: after which bytes it answered.
        let mut emulator = Emulator::new(PtySize::default());
        let mut answered = Vec::new();
        for (i, byte) in stream.iter().enumerate() {
            emulator.feed(std::slice::from_ref(byte));
            if emulator.take_answers().1 > 0 {
                answered.push(i + 1);
            }
        }
        assert!(!answered.is_empty());
        let missed: Vec<usize> = answered
            .iter()
            .filter(|end| !scanned.contains(end))
            .copied()
            .collect();
        assert_eq!(missed, Vec::<usize>::new(), "answered but not flagged");
    }
}
