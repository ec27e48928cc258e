//! `read {"grep": …}`: the lines of a session's output that match a regex,
//! searched over all of it (memory ring and spill file), shown like
//! `grep -n -C`: `12:` before a matching line, `11-` before a context line,
//! `--` between groups — within the budget, while every match is counted.

use std::collections::VecDeque;

use regex::bytes::Regex;

use crate::excerpt::Source;
use crate::reply::GrepMatch;
use crate::screen::render;

/// Bytes read from the stream at a time.
const CHUNK: usize = 1 << 20;
/// A line longer than this is searched and shown in pieces of this size
/// (output of 1 GB without a newline must not be held whole).
const MAX_LINE: usize = 64 * 1024;
/// Bytes of a line shown in `matches`.
const SHOWN_LINE: usize = 300;

/// What a search found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// The groups of lines, rendered, within the budget.
    pub text: String,
    /// The matches listed (at most `max_matches`).
    pub matches: Vec<GrepMatch>,
    /// Every matching line.
    pub count: u64,
    /// Where the search started (after bytes that are gone).
    pub offset: u64,
    /// Where it ended (the stream's end when it began).
    pub end: u64,
    /// Bytes before `offset` that are gone.
    pub dropped: u64,
    /// The text was cut at the budget (the count is still complete).
    pub cut: bool,
}

/// One line of the stream.
struct Line {
    number: Option<u64>,
    offset: u64,
    bytes: Vec<u8>,
}

/// Searches the stream from `from` to its current end.
pub fn grep(
    source: &impl Source,
    regex: &Regex,
    from: u64,
    context: usize,
    max_matches: usize,
    budget: usize,
) -> Result<Found, tether::Error> {
    let first = source.read(from, 0)?;
    let mut found = Found {
        offset: first.offset.max(from.min(first.end_offset)),
        end: first.end_offset,
        dropped: first.dropped,
        ..Found::default()
    };
    // True line numbers only when the search starts at the first byte.
    let numbered = from == 0 && first.dropped == 0;
    let mut state = Search {
        regex,
        context,
        max_matches,
        budget,
        before: VecDeque::new(),
        after: 0,
        last_shown: None,
        found: &mut found,
    };
    let mut line = Vec::new();
    let mut line_start = state.found.offset;
    let mut number = 1u64;
    let mut at = state.found.offset;
    let end = state.found.end;
    while at < end {
        let chunk = source.read(at, CHUNK.min((end - at) as usize))?;
        if chunk.data.is_empty() {
            break;
        }
        if chunk.offset > at {
            // Bytes evicted while searching: numbers no longer hold.
            line.clear();
            line_start = chunk.offset;
        }
        for piece in chunk.data.split_inclusive(|&b| b == b'\n') {
            let mut rest = piece;
            while !rest.is_empty() {
                let take = rest.len().min(MAX_LINE - line.len());
                line.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if line.ends_with(b"\n") || line.len() >= MAX_LINE {
                    let bytes = std::mem::take(&mut line);
                    let len = bytes.len() as u64;
                    state.line(Line {
                        number: numbered.then_some(number),
                        offset: line_start,
                        bytes,
                    });
                    number += 1;
                    line_start += len;
                }
            }
        }
        at = chunk.next_offset;
    }
    if !line.is_empty() {
        state.line(Line {
            number: numbered.then_some(number),
            offset: line_start,
            bytes: line,
        });
    }
    Ok(found)
}

struct Search<'a> {
    regex: &'a Regex,
    context: usize,
    max_matches: usize,
    budget: usize,
    /// The last `context` lines, for a match's leading context.
    before: VecDeque<Line>,
    /// Lines still to show after the last match.
    after: usize,
    /// Offset of the last line shown (to know when a group ends).
    last_shown: Option<u64>,
    found: &'a mut Found,
}

impl Search<'_> {
    fn line(&mut self, line: Line) {
        let body = line.bytes.strip_suffix(b"\n").unwrap_or(&line.bytes);
        if self.regex.is_match(body) {
            self.found.count += 1;
            if self.found.matches.len() < self.max_matches {
                let mut text = render(body);
                if text.len() > SHOWN_LINE {
                    let mut cut = SHOWN_LINE;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    text.truncate(cut);
                    text.push('…');
                }
                self.found.matches.push(GrepMatch {
                    line: line.number,
                    offset: line.offset,
                    text,
                });
                for before in std::mem::take(&mut self.before) {
                    self.show(&before, '-');
                }
                self.show(&line, ':');
                self.after = self.context;
            }
            return;
        }
        if self.after > 0 {
            self.after -= 1;
            self.show(&line, '-');
            return;
        }
        if self.context > 0 {
            if self.before.len() == self.context {
                self.before.pop_front();
            }
            self.before.push_back(line);
        }
    }

    fn show(&mut self, line: &Line, mark: char) {
        if self.found.cut {
            return;
        }
        let body = line.bytes.strip_suffix(b"\n").unwrap_or(&line.bytes);
        let label = line
            .number
            .map_or_else(|| format!("@{}", line.offset), |n| n.to_string());
        let mut text = String::new();
        if self.last_shown.is_some_and(|last| last < line.offset)
            && !self.found.text.is_empty()
            && self.gap_before(line)
        {
            text.push_str("--\n");
        }
        text.push_str(&format!("{label}{mark}{}\n", render(body)));
        if self.found.text.len() + text.len() > self.budget {
            self.found.cut = true;
            return;
        }
        self.found.text.push_str(&text);
        self.last_shown = Some(line.offset + line.bytes.len() as u64);
    }

    /// Whether lines were skipped between the last one shown and `line`.
    fn gap_before(&self, line: &Line) -> bool {
        self.last_shown != Some(line.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::excerpt::Memory;

    /// `bytes`, whole, served 1000 bytes a read.
    fn stream(bytes: Vec<u8>) -> Memory {
        Memory::new(bytes, true)
    }

    #[test]
    fn matches_come_with_context_numbers_and_offsets() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let s = stream(text.into_bytes());
        let re = Regex::new("^line (50|52|90)$").unwrap();
        let found = grep(&s, &re, 0, 1, 10, 10_000).unwrap();
        assert_eq!(found.count, 3);
        assert_eq!(
            found.text,
            "49-line 49\n50:line 50\n51-line 51\n52:line 52\n53-line 53\n--\n89-line 89\n90:line 90\n91-line 91\n"
        );
        let offsets: Vec<u64> = found.matches.iter().map(|m| m.offset).collect();
        let expected = |n: usize| {
            (1..n)
                .map(|i| format!("line {i}\n").len() as u64)
                .sum::<u64>()
        };
        assert_eq!(offsets, [expected(50), expected(52), expected(90)]);
        assert_eq!(found.matches[0].line, Some(50));
    }

    #[test]
    fn the_budget_cuts_the_text_but_not_the_count() {
        let text: String = (1..=10_000).map(|i| format!("{i}\n")).collect();
        let s = stream(text.into_bytes());
        let re = Regex::new("7").unwrap();
        let found = grep(&s, &re, 0, 0, 5, 200).unwrap();
        assert_eq!(found.count, 3439);
        assert_eq!(found.matches.len(), 5);
        assert!(found.text.len() <= 200);
    }
}
