//! `read {"grep": …}`: the lines of a session's output that match a regex,
//! searched over all of it (memory ring and spill file), shown like
//! `grep -n -C`: `12:` before a matching line, `11-` before a context line,
//! `--` between groups — within the budget, while every match is counted.
//!
//! A search is bounded: the caller runs it on a blocking thread (a regex
//! that needs the slow engine — Unicode word boundaries over non-ASCII
//! text — took 29–42 s over 250 MB and held up every other call, issue 16),
//! and it stops when [`grep`]'s `stop` says so (the call's time is up, or
//! the client cancelled it). It stops at a line boundary and says where
//! and at which line number ([`Stopped`]), so the next call continues
//! exactly there with the same numbering.
//!
//! Bytes that are gone (evicted beyond the spill cap, or never written to
//! a spill file that failed) are not searched; the search says so
//! ([`Found::gap`]: offsets, size, cause) and counts line numbers across
//! them from the newlines the buffer counted as it dropped them — or, where
//! that count is unknown, gives no line numbers after them.

use std::collections::VecDeque;

use std::time::Duration;

use regex::bytes::Regex;
use tether::output::Gap;

use crate::excerpt::{ReadCall, Source};
use crate::exit::seconds;
use crate::reply::{GapReport, GrepMatch, ReadReport};
use crate::screen::render;

/// Bytes read from the stream at a time (the session's buffer is locked
/// while they are copied).
const CHUNK: usize = 256 << 10;
/// A line longer than this is searched and shown in pieces of this size
/// (output of 1 GB without a newline must not be held whole).
const MAX_LINE: usize = 64 * 1024;
/// Bytes of a line shown in `matches`.
const SHOWN_LINE: usize = 300;
/// Lines, and bytes, searched between two looks at `stop`.
const CHECK_LINES: u32 = 64;
const CHECK_BYTES: usize = 256 << 10;

/// What to search for.
#[derive(Clone, Debug)]
pub struct Query<'a> {
    /// The pattern, matched against each line without its newline.
    pub regex: &'a Regex,
    /// Offset to start at (a line start).
    pub from: u64,
    /// Line number of the line at `from` (1 at offset 0; unknown
    /// elsewhere unless the caller knows it).
    pub first_line: Option<u64>,
    /// Lines shown before and after each match.
    pub context: usize,
    /// Most matches listed (all are counted).
    pub max_matches: usize,
    /// Bytes of rendered text at most.
    pub budget: usize,
}

/// Why a search stopped before the end of the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The call's time for searching ran out.
    TimeUp,
    /// The client cancelled the call.
    Cancelled,
}

/// Where a search stopped before the end of the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped {
    /// Why.
    pub why: Stop,
    /// Offset of the first byte not searched (a line start, or the next
    /// piece of a line longer than 64 KiB).
    pub at: u64,
    /// Line number at `at`, when known.
    pub line: Option<u64>,
}

/// What a search found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// The groups of lines, rendered, within the budget.
    pub text: String,
    /// The matches listed (at most `max_matches`).
    pub matches: Vec<GrepMatch>,
    /// Every matching line in what was searched.
    pub count: u64,
    /// Where the search started (after bytes that are gone).
    pub offset: u64,
    /// Where it ended: the stream's end when it began, or where it stopped.
    pub end: u64,
    /// The stream's end when the search began.
    pub stream_end: u64,
    /// Bytes before `offset` that are gone (the search began in a gap).
    pub dropped: u64,
    /// The bytes the search skipped because they are gone (at its start
    /// or on the way), with their cause; `newlines` is known when line
    /// numbers were counted across them.
    pub gap: Option<Gap>,
    /// Offset from which line numbers are unknown: the search crossed
    /// bytes that are gone without knowing their newlines.
    pub numbers_lost_at: Option<u64>,
    /// The text was cut at the budget (the count is still complete).
    pub cut: bool,
    /// The search stopped before the end (see [`Stopped`]).
    pub stopped: Option<Stopped>,
}

/// One line (or piece of a long line) of the stream.
struct Line {
    number: Option<u64>,
    offset: u64,
    bytes: Vec<u8>,
}

/// Searches the stream from `query.from` to its end as of now, asking
/// `stop` every few lines whether to stop there.
pub fn grep(
    source: &impl Source,
    query: &Query<'_>,
    stop: &dyn Fn() -> Option<Stop>,
) -> Result<Found, tether::Error> {
    let first = source.read(query.from, 0)?;
    let start = first.offset.max(query.from.min(first.end_offset));
    let end = first.end_offset;
    let mut found = Found {
        offset: start,
        end,
        stream_end: end,
        dropped: first.dropped,
        ..Found::default()
    };
    let mut number = if query.from == 0 {
        Some(1)
    } else {
        query.first_line
    };
    if first.dropped > 0 {
        number = found.skip(number, query.from, start, first.gap.as_ref());
    }
    let mut state = Search {
        query,
        before: VecDeque::new(),
        after: 0,
        last_shown: None,
        found: &mut found,
    };
    let mut line = Vec::new();
    let mut line_start = start;
    let mut at = start;
    let (mut lines_unchecked, mut bytes_unchecked) = (0u32, 0usize);
    while at < end {
        let chunk = source.read(at, CHUNK.min((end - at) as usize))?;
        if chunk.data.is_empty() {
            break;
        }
        if chunk.offset > at {
            // Bytes evicted beyond the spill while searching: the piece of
            // a line before them is searched as it is, and numbering goes
            // on across them when their newlines are known.
            if !line.is_empty() {
                let bytes = std::mem::take(&mut line);
                state.line(Line {
                    number,
                    offset: line_start,
                    bytes,
                });
            }
            state.before.clear();
            number = state
                .found
                .skip(number, at, chunk.offset, chunk.gap.as_ref());
            line_start = chunk.offset;
        }
        for piece in chunk.data.split_inclusive(|&b| b == b'\n') {
            let mut rest = piece;
            while !rest.is_empty() {
                let take = rest.len().min(MAX_LINE - line.len());
                line.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                let whole = line.ends_with(b"\n");
                if !whole && line.len() < MAX_LINE {
                    continue;
                }
                let bytes = std::mem::take(&mut line);
                let len = bytes.len();
                state.line(Line {
                    number,
                    offset: line_start,
                    bytes,
                });
                if whole {
                    number = number.map(|n| n + 1);
                }
                line_start += len as u64;
                lines_unchecked += 1;
                bytes_unchecked += len;
                if lines_unchecked >= CHECK_LINES || bytes_unchecked >= CHECK_BYTES {
                    (lines_unchecked, bytes_unchecked) = (0, 0);
                    if let Some(why) = stop() {
                        state.found.end = line_start;
                        state.found.stopped = Some(Stopped {
                            why,
                            at: line_start,
                            line: number,
                        });
                        return Ok(found);
                    }
                }
            }
        }
        at = chunk.next_offset;
    }
    if !line.is_empty() {
        state.line(Line {
            number,
            offset: line_start,
            bytes: line,
        });
    }
    Ok(found)
}

impl Found {
    /// The search jumps from `from` over bytes that are gone to `to`:
    /// records them, and returns the line number at `to` — known when the
    /// jump starts where the gap starts and the gap's newlines are counted.
    fn skip(&mut self, number: Option<u64>, from: u64, to: u64, gap: Option<&Gap>) -> Option<u64> {
        let exact = gap.filter(|g| g.start == from && g.end == to);
        let newlines = exact.and_then(|g| g.newlines);
        let skipped = Gap {
            start: from,
            end: to,
            newlines,
            cause: gap
                .map(|g| g.cause.clone())
                .unwrap_or(tether::output::GapCause::NoSpill),
        };
        self.gap = Some(match self.gap.take() {
            // At most one gap per stream; a search that began inside it
            // and meets its growing end again reports the whole run.
            Some(earlier) => Gap {
                start: earlier.start.min(skipped.start),
                end: earlier.end.max(skipped.end),
                newlines: None,
                cause: skipped.cause,
            },
            None => skipped,
        });
        let after = number.zip(newlines).map(|(n, k)| n + k);
        if number.is_some() && after.is_none() && self.numbers_lost_at.is_none() {
            self.numbers_lost_at = Some(to);
        }
        after
    }
}

struct Search<'a, 'q> {
    query: &'a Query<'q>,
    /// The last `context` lines, for a match's leading context.
    before: VecDeque<Line>,
    /// Lines still to show after the last match.
    after: usize,
    /// Offset of the last line shown (to know when a group ends).
    last_shown: Option<u64>,
    found: &'a mut Found,
}

impl Search<'_, '_> {
    fn line(&mut self, line: Line) {
        let body = line.bytes.strip_suffix(b"\n").unwrap_or(&line.bytes);
        if self.query.regex.is_match(body) {
            self.found.count += 1;
            if self.found.matches.len() < self.query.max_matches {
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
                self.after = self.query.context;
            }
            return;
        }
        if self.after > 0 {
            self.after -= 1;
            self.show(&line, '-');
            return;
        }
        if self.query.context > 0 {
            if self.before.len() == self.query.context {
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
        if self.last_shown.is_some_and(|last| last != line.offset) && !self.found.text.is_empty() {
            text.push_str("--\n");
        }
        text.push_str(&format!("{label}{mark}{}\n", render(body)));
        if self.found.text.len() + text.len() > self.query.budget {
            self.found.cut = true;
            return;
        }
        self.found.text.push_str(&text);
        self.last_shown = Some(line.offset + line.bytes.len() as u64);
    }
}

/// Fills `report` with a grep's result: what was found, the bytes
/// it could not search, and — when it stopped early — where, and the
/// exact call that goes on.
pub fn report(
    report: &mut ReadReport,
    found: &Found,
    query: &Query<'_>,
    call: &ReadCall<'_>,
    pattern: &str,
    limit: Duration,
) {
    report.match_count = Some(found.count);
    report.matches = Some(found.matches.clone());
    let mut notes = Vec::new();
    if let Some(gap) = &found.gap {
        let gap = GapReport::from(gap);
        report.dropped = gap.bytes;
        notes.push(format!(
            "{}; they were not searched{}",
            gap.sentence(),
            match (found.numbers_lost_at, gap.lines) {
                (Some(at), _) => format!(
                    "; their lines are not known, so lines from offset {at} on have no \
                     number (line: null; offsets are exact)"
                ),
                (None, Some(_)) if query.from == 0 || query.first_line.is_some() => {
                    "; line numbers after them count their lines".to_owned()
                }
                _ => String::new(),
            }
        ));
        report.gap = Some(gap);
    }
    let listed = found.matches.len() as u64;
    if found.cut || listed < found.count {
        notes.push(format!(
            "{} matching line(s); {} listed{} (narrow the pattern, or pass max_matches and \
             offset)",
            found.count,
            listed,
            if found.cut {
                ", and the text is cut at the output budget"
            } else {
                ""
            }
        ));
    }
    if let Some(stopped) = found.stopped {
        report.partial = true;
        let why = match stopped.why {
            Stop::TimeUp => format!("the search stopped after {} s", seconds(limit)),
            Stop::Cancelled => "the search was cancelled".to_owned(),
        };
        notes.push(format!(
            "partial: {why}, at offset {} of {}; the counts cover offsets {}..{} only",
            stopped.at, found.stream_end, found.offset, stopped.at
        ));
        let mut args = format!(
            "\"grep\": {}, \"offset\": {}",
            serde_json::Value::from(pattern),
            stopped.at
        );
        if let Some(line) = stopped.line {
            args.push_str(&format!(", \"first_line\": {line}"));
        }
        args.push_str(&format!(
            ", \"context\": {}, \"max_matches\": {}",
            query.context, query.max_matches
        ));
        report.hint = Some(format!(
            "to search the rest, call {} (each call searches for at most {} s)",
            call.with(&args),
            seconds(limit)
        ));
    }
    report.note = (!notes.is_empty()).then(|| notes.join(". "));
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use tether::output::GapCause;

    use super::*;
    use crate::excerpt::{Gapped, Memory};

    /// `bytes`, whole, served 1000 bytes a read.
    fn stream(bytes: Vec<u8>) -> Memory {
        Memory::new(bytes, true)
    }

    fn query(regex: &Regex, context: usize, max_matches: usize, budget: usize) -> Query<'_> {
        Query {
            regex,
            from: 0,
            first_line: None,
            context,
            max_matches,
            budget,
        }
    }

    fn never() -> Option<Stop> {
        None
    }

    #[test]
    fn matches_come_with_context_numbers_and_offsets() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let s = stream(text.into_bytes());
        let re = Regex::new("^line (50|52|90)$").unwrap();
        let found = grep(&s, &query(&re, 1, 10, 10_000), &never).unwrap();
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
        assert_eq!((found.stopped, found.gap), (None, None));
    }

    #[test]
    fn the_budget_cuts_the_text_but_not_the_count() {
        let text: String = (1..=10_000).map(|i| format!("{i}\n")).collect();
        let s = stream(text.into_bytes());
        let re = Regex::new("7").unwrap();
        let found = grep(&s, &query(&re, 0, 5, 200), &never).unwrap();
        assert_eq!(found.count, 3439);
        assert_eq!(found.matches.len(), 5);
        assert!(found.text.len() <= 200);
    }

    /// Regression (issue 16): a line longer than 64 KiB is searched in
    /// pieces, and each piece counted as a line, so every number after it
    /// was off by the number of extra pieces.
    #[test]
    fn a_long_line_is_one_line() {
        let mut bytes = vec![b'x'; 200_000];
        bytes.extend_from_slice(b"\nneedle\n");
        let re = Regex::new("^needle$").unwrap();
        let found = grep(&stream(bytes), &query(&re, 0, 5, 1000), &never).unwrap();
        assert_eq!(found.matches[0].line, Some(2));
    }

    #[test]
    fn a_stopped_search_says_where_and_the_next_one_goes_on_from_there() {
        let text: String = (1..=10_000).map(|i| format!("{i}\n")).collect();
        let s = stream(text.clone().into_bytes());
        let re = Regex::new("^[0-9]*5$").unwrap();
        let looks = Cell::new(0);
        let stop = || {
            looks.set(looks.get() + 1);
            (looks.get() == 20).then_some(Stop::TimeUp)
        };
        let first = grep(&s, &query(&re, 0, 10_000, 1 << 20), &stop).unwrap();
        let stopped = first.stopped.expect("stopped");
        assert_eq!(stopped.why, Stop::TimeUp);
        assert!(stopped.at > 0 && stopped.at < text.len() as u64);
        assert_eq!(first.end, stopped.at);
        // `at` is a line start, and `line` its number.
        let n = stopped.line.unwrap();
        assert!(text[..stopped.at as usize].ends_with('\n'));
        assert!(text[stopped.at as usize..].starts_with(&format!("{n}\n")));
        let rest = grep(
            &s,
            &Query {
                from: stopped.at,
                first_line: Some(n),
                ..query(&re, 0, 10_000, 1 << 20)
            },
            &never,
        )
        .unwrap();
        assert_eq!(first.count + rest.count, 1000);
        let lines: Vec<u64> = first
            .matches
            .iter()
            .chain(&rest.matches)
            .map(|m| m.line.unwrap())
            .collect();
        assert_eq!(lines, (1..=1000).map(|i| i * 10 - 5).collect::<Vec<_>>());
    }

    /// Regression (issue 16): past the ring plus the spill cap, grep went
    /// on counting lines as if the dropped ones had never been printed
    /// (`seq 1 40000000`: line 39999999 reported as line 31177236), and
    /// said nothing about the gap (`dropped: 0`, no note).
    #[test]
    fn lines_are_counted_across_bytes_that_are_gone() {
        let text: String = (1..=5000).map(|i| format!("{i}\n")).collect();
        // The gap cuts lines in half at both ends.
        let (start, end) = (
            text.find("1000\n").unwrap() + 2,
            text.find("4000\n").unwrap() + 1,
        );
        let newlines = text[start..end].matches('\n').count() as u64;
        let cause = GapCause::SpillFailed {
            error: "writing spill file in /x: No space left on device (os error 28)".into(),
        };
        let s = Gapped {
            bytes: text.clone().into_bytes(),
            gap: Gap {
                start: start as u64,
                end: end as u64,
                newlines: Some(newlines),
                cause: cause.clone(),
            },
        };
        let re = Regex::new("^(999|4999|000)$").unwrap();
        let found = grep(&s, &query(&re, 0, 10, 10_000), &never).unwrap();
        let lines: Vec<Option<u64>> = found.matches.iter().map(|m| m.line).collect();
        // "000" is the piece of line 4000 after the gap: line 4000.
        assert_eq!(lines, [Some(999), Some(4000), Some(4999)]);
        let gap = found.gap.unwrap();
        assert_eq!(
            (gap.start, gap.end, gap.newlines, gap.cause),
            (start as u64, end as u64, Some(newlines), cause.clone())
        );
        assert_eq!(found.numbers_lost_at, None);
        // From inside the gap the newlines before its end are unknown:
        // no numbers, and the search says from where.
        let inside = Query {
            from: start as u64 + 10,
            first_line: Some(1),
            ..query(&re, 0, 10, 10_000)
        };
        let found = grep(&s, &inside, &never).unwrap();
        assert_eq!(
            found.matches.iter().map(|m| m.line).collect::<Vec<_>>(),
            [None, None]
        );
        assert_eq!(found.numbers_lost_at, Some(end as u64));
        assert_eq!(found.dropped, (end - start - 10) as u64);
    }
}
