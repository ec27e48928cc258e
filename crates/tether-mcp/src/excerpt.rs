//! What a tool result shows of a session's output: the bytes from a cursor
//! to the end, rendered (see [`screen`](crate::screen)), and — when they
//! do not fit the per-result budget — their head and tail with a marker in
//! between that gives the omitted byte count and the exact `read` call
//! that shows them. Offsets are the registry's absolute byte offsets, so
//! the marker's call stays right however much output follows.
//!
//! Bytes that are gone (a [`Gap`]: evicted beyond the spill cap, or never
//! written to a spill file that failed) are never passed off as omitted:
//! reads stop at a gap, and the marker over it says which bytes are gone,
//! why, and which of the rest a `read` still shows.

use tether::output::Gap;
use tether::registry::ReadResult;

use crate::screen::{complete_len, continuation_prefix, incomplete_utf8_tail, render};

/// Default per-result budget for rendered output: 16 KiB.
pub const DEFAULT_BUDGET: usize = 16 * 1024;

/// Share of the budget given to the head when output is cut; the tail
/// (where errors and final results are) gets the rest.
const HEAD_SHARE: f64 = 0.4;

/// Where output bytes come from (the registry, or a buffer in tests).
pub trait Source {
    /// Up to `max` bytes from `offset`, as [`tether::registry::Registry::read`].
    fn read(&self, offset: u64, max: usize) -> Result<ReadResult, tether::Error>;
}

/// How texts name the `read` call that shows more of a session's output:
/// the tool's name (with the server's `--tool-prefix`), the session, and
/// the stream when it is not the main one.
#[derive(Clone, Copy, Debug)]
pub struct ReadCall<'a> {
    /// The `read` tool's name.
    pub tool: &'a str,
    /// The session id.
    pub id: &'a str,
    /// `Some("stderr")` for stderr apart.
    pub stream: Option<&'a str>,
}

impl ReadCall<'_> {
    /// `read {"id": "…", <args>}` (and the stream).
    pub fn with(&self, args: &str) -> String {
        let stream = self
            .stream
            .map(|s| format!(", \"stream\": \"{s}\""))
            .unwrap_or_default();
        let args = if args.is_empty() {
            String::new()
        } else {
            format!(", {args}")
        };
        format!("{} {{\"id\": \"{}\"{stream}{args}}}", self.tool, self.id)
    }
}

/// Output as a result shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Excerpt {
    /// The rendered text (with the omission marker, if any).
    pub text: String,
    /// Where the next read should start: the end of what was shown.
    pub next_offset: u64,
    /// Bytes between head and tail that were not shown.
    pub omitted: u64,
    /// Bytes in the range shown that were gone (evicted beyond the spill
    /// cap, or lost to a spill file that failed) before they could be
    /// shown.
    pub dropped: u64,
    /// Those bytes (the part of the stream's gap from `from` on) and why.
    pub gap: Option<Gap>,
    /// The stream has ended and all of it was shown or skipped.
    pub eof: bool,
}

/// The part of `gap` at or after `from` and before `to`, if any.
fn gap_within(gap: Option<&Gap>, from: u64, to: u64) -> Option<Gap> {
    let gap = gap?;
    let (start, end) = (gap.start.max(from), gap.end.min(to));
    (start < end).then(|| Gap {
        start,
        end,
        newlines: gap
            .newlines
            .filter(|_| start == gap.start && end == gap.end),
        cause: gap.cause.clone(),
    })
}

/// Shows the output of a session from `from` to its current end within
/// `budget` rendered bytes; the omission marker names `call`.
pub fn excerpt(
    source: &impl Source,
    call: &ReadCall<'_>,
    from: u64,
    budget: usize,
) -> Result<Excerpt, tether::Error> {
    let first = source.read(from, budget)?;
    let start = first.offset;
    let end = first.end_offset;
    let gap = gap_within(first.gap.as_ref(), from, end);
    let dropped = gap.as_ref().map_or(0, Gap::len);
    // A gap after `start` splits the range: head before it, tail after.
    let inner = gap.as_ref().filter(|g| g.start >= start);
    if end - start <= budget as u64 && inner.is_none() {
        let (data, eof) = read_range(source, start, end)?;
        let shown = if eof { data.len() } else { complete_len(&data) };
        let text = render(&data[..shown]);
        // Rendering only grows by U+FFFD; a window this small that grew
        // past the budget is binary, and is cut like a long one.
        if text.len() <= budget {
            return Ok(Excerpt {
                text,
                next_offset: start + shown as u64,
                omitted: 0,
                dropped,
                gap,
                eof: eof && shown == data.len(),
            });
        }
    }
    let head_budget = (budget as f64 * HEAD_SHARE) as usize;
    let tail_budget = budget - head_budget;
    let head_to = inner.map_or(end, |g| g.start);
    let mut head_raw = read_range(source, start, head_to.min(start + head_budget as u64))?.0;
    // Cut at a line end when one is near, so no line is shown in half.
    if let Some(nl) = head_raw.iter().rposition(|&b| b == b'\n')
        && nl + 1 >= head_raw.len() / 2
    {
        head_raw.truncate(nl + 1);
    }
    let mut tail_from = (end - tail_budget as u64)
        .max(start + head_raw.len() as u64)
        .max(inner.map_or(0, |g| g.end));
    let (mut tail_raw, eof) = read_range(source, tail_from, end)?;
    if let Some(nl) = tail_raw.iter().position(|&b| b == b'\n')
        && nl < tail_raw.len() / 2
        && tail_from > start + head_raw.len() as u64
    {
        tail_raw.drain(..=nl);
        tail_from += nl as u64 + 1;
    }
    let tail_len = if eof {
        tail_raw.len()
    } else {
        complete_len(&tail_raw)
    };
    let tail_raw = &tail_raw[..tail_len];

    let (head_text, head_len) = fit_prefix(&head_raw, head_budget);
    let (tail_text, tail_skip) = fit_suffix(tail_raw, tail_budget);
    let omitted_from = start + head_len as u64;
    let omitted_to = tail_from + tail_skip as u64;
    let omitted = omitted_to - omitted_from;
    let mut text = head_text;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let gone = inner.filter(|g| g.start >= omitted_from && g.end <= omitted_to);
    text.push_str(&omission_marker(call, omitted_from, omitted, gone, budget));
    text.push_str(&tail_text);
    Ok(Excerpt {
        text,
        next_offset: tail_from + tail_len as u64,
        omitted,
        dropped,
        gap,
        eof: eof && tail_len == tail_raw.len(),
    })
}

/// The marker put where `omitted` bytes from `offset` were left out,
/// naming the call that shows them in pages of `page` bytes (a `read`
/// shows at most the budget), and the other ways to look. When `gone`
/// lies among them, it says which bytes no call can show, and why.
pub fn omission_marker(
    call: &ReadCall<'_>,
    offset: u64,
    omitted: u64,
    gone: Option<&Gap>,
    page: usize,
) -> String {
    let lost = gone.map_or(0, Gap::len);
    let readable = omitted - lost;
    let max = readable.min(page as u64);
    let more = if readable > page as u64 {
        ", then again from its next_offset; or grep/tail_lines to search"
    } else {
        ""
    };
    let read = call.with(&format!("\"offset\": {offset}, \"max_bytes\": {max}"));
    match gone {
        None => format!("[… {omitted} bytes omitted here; to see them call {read}{more} …]\n"),
        Some(gap) if readable == 0 => format!(
            "[… {lost} bytes are gone here (offsets {}..{}): {} …]\n",
            gap.start, gap.end, gap.cause
        ),
        Some(gap) => format!(
            "[… {omitted} bytes omitted here; {lost} of them are gone (offsets {}..{}: {}); to \
             see the other {readable} call {read}{more} …]\n",
            gap.start, gap.end, gap.cause
        ),
    }
}

/// Bytes `[from, to)` (fewer if the stream holds fewer, or if bytes in
/// between are gone: then up to where they start), and whether they reach
/// the stream's EOF. `from` is at or after the first byte still held (the
/// caller's first read found it).
pub fn read_range(
    source: &impl Source,
    from: u64,
    to: u64,
) -> Result<(Vec<u8>, bool), tether::Error> {
    let mut data = Vec::with_capacity(to.saturating_sub(from) as usize);
    let mut at = from;
    let mut eof = false;
    while at < to {
        let chunk = source.read(at, (to - at) as usize)?;
        if chunk.offset > at {
            // A gap: what follows it is not contiguous with what we have.
            return Ok((data, false));
        }
        if chunk.data.is_empty() {
            eof = chunk.eof;
            break;
        }
        data.extend_from_slice(&chunk.data);
        at = chunk.next_offset;
        eof = chunk.eof;
    }
    if at == to && !eof {
        // The range ends where the stream ends: ask whether it is over.
        let probe = source.read(to, 1)?;
        eof = probe.eof && probe.data.is_empty();
    }
    let wanted = (to - from) as usize;
    if data.len() > wanted {
        data.truncate(wanted);
        eof = false;
    }
    Ok((data, eof))
}

/// The longest prefix of `raw` (ending on a character boundary) whose
/// rendering fits `budget`: its text and raw length.
pub fn fit_prefix(raw: &[u8], budget: usize) -> (String, usize) {
    let whole = raw.len() - incomplete_utf8_tail(raw);
    let text = render(&raw[..whole]);
    if text.len() <= budget {
        return (text, whole);
    }
    // fits(0) holds; find a long prefix that fits.
    let (mut good, mut bad) = (0, whole);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if render(&raw[..mid]).len() <= budget {
            good = mid;
        } else {
            bad = mid;
        }
    }
    let good = good - incomplete_utf8_tail(&raw[..good]);
    (render(&raw[..good]), good)
}

/// The longest suffix of `raw` (starting on a character boundary) whose
/// rendering fits `budget`: its text and how many raw bytes were skipped.
pub fn fit_suffix(raw: &[u8], budget: usize) -> (String, usize) {
    let skip = continuation_prefix(raw);
    let text = render(&raw[skip..]);
    if text.len() <= budget {
        return (text, skip);
    }
    // fits(raw.len()) holds (nothing left); find a small skip that fits.
    let (mut bad, mut good) = (skip, raw.len());
    while good - bad > 1 {
        let mid = bad + (good - bad) / 2;
        if render(&raw[mid..]).len() <= budget {
            good = mid;
        } else {
            bad = mid;
        }
    }
    let good = good + continuation_prefix(&raw[good..]);
    (render(&raw[good..]), good)
}

/// An output stream held in memory, for the tests of this crate's
/// readers: `gone` bytes at its start were dropped, and a read serves at
/// most `chunk` bytes, like a ring split in parts.
#[cfg(test)]
pub(crate) struct Memory {
    pub bytes: Vec<u8>,
    pub gone: u64,
    pub eof: bool,
    pub chunk: usize,
}

#[cfg(test)]
impl Memory {
    /// `bytes`, nothing dropped, 1000 bytes a read.
    pub fn new(bytes: Vec<u8>, eof: bool) -> Memory {
        Memory {
            bytes,
            gone: 0,
            eof,
            chunk: 1000,
        }
    }
}

#[cfg(test)]
impl Source for Memory {
    fn read(&self, offset: u64, max: usize) -> Result<ReadResult, tether::Error> {
        let end = self.gone + self.bytes.len() as u64;
        let from = offset.max(self.gone).min(end);
        let to = (from + max.min(self.chunk) as u64).min(end);
        let data = self.bytes[(from - self.gone) as usize..(to - self.gone) as usize].to_vec();
        Ok(ReadResult {
            data,
            offset: from,
            next_offset: to,
            dropped: from.saturating_sub(offset),
            end_offset: end,
            eof: self.eof && to == end,
            gap: (self.gone > 0).then_some(Gap {
                start: 0,
                end: self.gone,
                newlines: None,
                cause: tether::output::GapCause::NoSpill,
            }),
        })
    }
}

#[cfg(test)]
/// A stream whose bytes `[gap.start, gap.end)` are gone, as the
/// registry serves it: a read stops before the gap, the next skips it.
pub(crate) struct Gapped {
    pub bytes: Vec<u8>,
    pub gap: Gap,
}

#[cfg(test)]
impl Source for Gapped {
    fn read(&self, offset: u64, max: usize) -> Result<ReadResult, tether::Error> {
        let end = self.bytes.len() as u64;
        let from = if (self.gap.start..self.gap.end).contains(&offset) {
            self.gap.end
        } else {
            offset.min(end)
        };
        let stop = if from < self.gap.start {
            self.gap.start
        } else {
            end
        };
        let to = (from + max.min(1000) as u64).min(stop);
        Ok(ReadResult {
            data: self.bytes[from as usize..to as usize].to_vec(),
            offset: from,
            next_offset: to,
            dropped: from - offset.min(from),
            end_offset: end,
            eof: to == end,
            gap: Some(self.gap.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ReadCall<'_> {
        ReadCall {
            tool: "read",
            id,
            stream: None,
        }
    }

    fn stream(bytes: &[u8], eof: bool) -> Memory {
        Memory::new(bytes.to_vec(), eof)
    }

    #[test]
    fn small_output_is_shown_whole() {
        let s = stream(b"hello\nworld\n", true);
        let e = excerpt(&s, &call("abcd"), 0, 100).unwrap();
        assert_eq!(e.text, "hello\nworld\n");
        assert_eq!(
            (e.next_offset, e.omitted, e.dropped, e.eof),
            (12, 0, 0, true)
        );
        let e = excerpt(&s, &call("abcd"), 6, 100).unwrap();
        assert_eq!(e.text, "world\n");
        let e = excerpt(&s, &call("abcd"), 12, 100).unwrap();
        assert_eq!((e.text.as_str(), e.next_offset, e.eof), ("", 12, true));
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_names_the_read_call() {
        let mut bytes = Vec::new();
        for i in 0..2000 {
            bytes.extend_from_slice(format!("line {i:05}\n").as_bytes());
        }
        let s = stream(&bytes, true);
        let e = excerpt(&s, &call("abcdef"), 0, 1000).unwrap();
        assert!(e.text.starts_with("line 00000\n"), "{}", &e.text[..40]);
        assert!(e.text.ends_with("line 01999\n"));
        assert_eq!(e.next_offset, bytes.len() as u64);
        assert!(e.eof);
        // Cut at line ends: 36 whole lines of head (396 bytes), the tail
        // from the first whole line in the last 600 bytes.
        let offset = 396;
        assert_eq!(e.omitted, 1946 * 11 - offset);
        let marker = omission_marker(&call("abcdef"), offset, e.omitted, None, 1000);
        // Pages of the budget: a read shows at most that much.
        assert!(marker.contains(r#"read {"id": "abcdef", "offset": 396, "max_bytes": 1000}"#));
        // What the marker names is exactly what is missing.
        let shown_head = &bytes[..offset as usize];
        let shown_tail = &bytes[(offset + e.omitted) as usize..];
        assert_eq!(
            e.text,
            format!(
                "{}{}{}",
                String::from_utf8_lossy(shown_head),
                marker,
                String::from_utf8_lossy(shown_tail)
            )
        );
    }

    #[test]
    fn huge_omissions_name_a_paged_read() {
        let stderr = ReadCall {
            stream: Some("stderr"),
            ..call("x1y2")
        };
        let m = omission_marker(&stderr, 10, 5 << 20, None, 16384);
        assert!(m.contains("\"max_bytes\": 16384"), "{m}");
        assert!(m.contains("\"stream\": \"stderr\""), "{m}");
        assert!(m.contains("next_offset"), "{m}");
    }

    #[test]
    fn binary_output_stays_within_budget() {
        // Every byte invalid: rendering triples it.
        let s = stream(&[0xff; 900], true);
        let e = excerpt(&s, &call("abcd"), 0, 1000).unwrap();
        let marker_len = e
            .text
            .find('[')
            .map(|at| e.text[at..].find('\n').unwrap() + 1);
        assert!(e.omitted > 0);
        assert!(
            e.text.len() - marker_len.unwrap() <= 1000,
            "{}",
            e.text.len()
        );
        assert_eq!(e.next_offset, 900);
    }

    #[test]
    fn a_character_in_flight_is_left_for_the_next_read() {
        let euro = "€".as_bytes();
        let s = stream(&[b'a', euro[0], euro[1]], false);
        let e = excerpt(&s, &call("abcd"), 0, 100).unwrap();
        assert_eq!((e.text.as_str(), e.next_offset, e.eof), ("a", 1, false));
        // At EOF nothing more will come: show what there is.
        let s = stream(&[b'a', euro[0], euro[1]], true);
        let e = excerpt(&s, &call("abcd"), 0, 100).unwrap();
        assert_eq!((e.text.as_str(), e.next_offset), ("a\u{fffd}", 3));
    }

    #[test]
    fn cuts_never_split_a_character() {
        let text = "é".repeat(3000); // 6000 bytes
        let s = stream(text.as_bytes(), true);
        let e = excerpt(&s, &call("abcd"), 0, 1001).unwrap();
        assert!(!e.text.contains('\u{fffd}'), "a character was split");
        assert_eq!(e.omitted % 2, 0);
    }

    #[test]
    fn dropped_bytes_are_counted() {
        let s = Memory {
            gone: 100,
            ..Memory::new(b"tail\n".to_vec(), true)
        };
        let e = excerpt(&s, &call("abcd"), 0, 100).unwrap();
        assert_eq!(
            (e.text.as_str(), e.dropped, e.next_offset),
            ("tail\n", 100, 105)
        );
    }

    /// Regression (issue 16): with the spill file's disk full, a 15 MB
    /// result said "14872519 bytes omitted here; to see them call read"
    /// though 13 MB of them were gone, and never said why.
    #[test]
    fn a_gap_among_the_omitted_bytes_is_named_with_its_cause() {
        let text: String = (0..20_000).map(|i| format!("line {i:05}\n")).collect();
        let error = "writing spill file in /x: No space left on device (os error 28)";
        let s = Gapped {
            bytes: text.into_bytes(),
            gap: Gap {
                start: 50_000,
                end: 200_000,
                newlines: Some(13_637),
                cause: tether::output::GapCause::SpillFailed {
                    error: error.into(),
                },
            },
        };
        let e = excerpt(&s, &call("abcd"), 0, 1000).unwrap();
        assert_eq!(
            (e.dropped, e.gap.as_ref().unwrap().start),
            (150_000, 50_000)
        );
        assert!(e.text.starts_with("line 00000\n") && e.text.ends_with("line 19999\n"));
        let marker = e.text.lines().find(|l| l.starts_with("[…")).unwrap();
        assert!(
            marker.contains(
                "150000 of them are gone (offsets 50000..200000: the spill file could \
                             not be written: writing spill file in /x: No space left on device"
            ),
            "{marker}"
        );
        // The call it names shows the readable part: it starts after the
        // head and the read stops where the gap starts.
        let omitted_from = e.text.find('[').unwrap() as u64;
        assert!(
            marker.contains(&format!("\"offset\": {omitted_from}, \"max_bytes\": 1000")),
            "{marker}"
        );
        let other = e.omitted - 150_000;
        assert!(
            marker.contains(&format!("to see the other {other} call read")),
            "{marker}"
        );
        // A head that reaches the gap stops there; the rest is after it.
        let e = excerpt(&s, &call("abcd"), 49_896, 1000).unwrap();
        assert!(e.text.starts_with("line 04536\nline 04537\n"), "{}", e.text);
        // The head stops at the gap (at a line end); the tail is after it.
        assert!(
            e.text
                .contains("\nline 04544\n[… 169411 bytes omitted here; 150000 of them are gone"),
            "{}",
            e.text
        );
        assert!(e.text.contains(r#""offset": 49995,"#), "{}", e.text);
        // Little beyond the gap: head to it, tail from just after it.
        let s = Gapped {
            bytes: s.bytes[..200_100].to_vec(),
            gap: s.gap.clone(),
        };
        let e = excerpt(&s, &call("abcd"), 49_896, 1000).unwrap();
        assert!(
            e.text.contains(
                "line 04544\n[… 150007 bytes omitted here; 150000 of them are gone (offsets \
                 50000..200000: the spill file"
            ),
            "{}",
            e.text
        );
        assert!(e.text.contains(
            r#"to see the other 7 call read {"id": "abcd", "offset": 49995, "max_bytes": 7} …]"#
        ));
        // A cursor inside the gap: the part after it is dropped.
        let e = excerpt(&s, &call("abcd"), 100_000, 1000).unwrap();
        assert_eq!((e.dropped, e.gap.unwrap().start), (100_000, 100_000));
    }
}
