//! What a tool result shows of a session's output: the bytes from a cursor
//! to the end, rendered (see [`screen`](crate::screen)), and — when they
//! do not fit the per-result budget — their head and tail with a marker in
//! between that gives the omitted byte count and the exact `read` call
//! that shows them. Offsets are the registry's absolute byte offsets, so
//! the marker's call stays right however much output follows.

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

/// Output as a result shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Excerpt {
    /// The rendered text (with the omission marker, if any).
    pub text: String,
    /// Where the next read should start: the end of what was shown.
    pub next_offset: u64,
    /// Bytes between head and tail that were not shown.
    pub omitted: u64,
    /// Bytes that were gone (evicted beyond the spill cap) before they
    /// could be shown.
    pub dropped: u64,
    /// The stream has ended and all of it was shown or skipped.
    pub eof: bool,
}

/// Shows the output of session `id` from `from` to its current end within
/// `budget` rendered bytes. `stream` is named in the omission marker's
/// `read` call when it is not the main one.
pub fn excerpt(
    source: &impl Source,
    id: &str,
    stream: Option<&str>,
    from: u64,
    budget: usize,
) -> Result<Excerpt, tether::Error> {
    let first = source.read(from, budget)?;
    let start = first.offset;
    let end = first.end_offset;
    let dropped = first.dropped;
    if end - start <= budget as u64 {
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
                eof: eof && shown == data.len(),
            });
        }
    }
    let head_budget = (budget as f64 * HEAD_SHARE) as usize;
    let tail_budget = budget - head_budget;
    let mut head_raw = read_range(source, start, start + head_budget as u64)?.0;
    // Cut at a line end when one is near, so no line is shown in half.
    if let Some(nl) = head_raw.iter().rposition(|&b| b == b'\n')
        && nl + 1 >= head_raw.len() / 2
    {
        head_raw.truncate(nl + 1);
    }
    let mut tail_from = (end - tail_budget as u64).max(start + head_raw.len() as u64);
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
    text.push_str(&omission_marker(id, stream, omitted_from, omitted, budget));
    text.push_str(&tail_text);
    Ok(Excerpt {
        text,
        next_offset: tail_from + tail_len as u64,
        omitted,
        dropped,
        eof: eof && tail_len == tail_raw.len(),
    })
}

/// The marker put where bytes were left out, naming the call that shows
/// them in pages of `page` bytes (a `read` shows at most the budget), and
/// the other ways to look.
pub fn omission_marker(
    id: &str,
    stream: Option<&str>,
    offset: u64,
    omitted: u64,
    page: usize,
) -> String {
    let max = omitted.min(page as u64);
    let more = if omitted > page as u64 {
        ", then again from its next_offset; or grep/tail_lines to search"
    } else {
        ""
    };
    let stream = stream
        .map(|s| format!(", \"stream\": \"{s}\""))
        .unwrap_or_default();
    format!(
        "[… {omitted} bytes omitted here; to see them call read {{\"id\": \"{id}\"{stream}, \"offset\": {offset}, \"max_bytes\": {max}}}{more} …]\n"
    )
}

/// Bytes `[from, to)` (fewer if the stream holds fewer), and whether
/// they reach the stream's EOF. `from` is at or after the first byte
/// still held (the caller's first read found it).
pub fn read_range(
    source: &impl Source,
    from: u64,
    to: u64,
) -> Result<(Vec<u8>, bool), tether::Error> {
    let mut data = Vec::with_capacity((to - from) as usize);
    let mut at = from;
    let mut eof = false;
    while at < to {
        let chunk = source.read(at, (to - at) as usize)?;
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(bytes: &[u8], eof: bool) -> Memory {
        Memory::new(bytes.to_vec(), eof)
    }

    #[test]
    fn small_output_is_shown_whole() {
        let s = stream(b"hello\nworld\n", true);
        let e = excerpt(&s, "abcd", None, 0, 100).unwrap();
        assert_eq!(e.text, "hello\nworld\n");
        assert_eq!(
            (e.next_offset, e.omitted, e.dropped, e.eof),
            (12, 0, 0, true)
        );
        let e = excerpt(&s, "abcd", None, 6, 100).unwrap();
        assert_eq!(e.text, "world\n");
        let e = excerpt(&s, "abcd", None, 12, 100).unwrap();
        assert_eq!((e.text.as_str(), e.next_offset, e.eof), ("", 12, true));
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_names_the_read_call() {
        let mut bytes = Vec::new();
        for i in 0..2000 {
            bytes.extend_from_slice(format!("line {i:05}\n").as_bytes());
        }
        let s = stream(&bytes, true);
        let e = excerpt(&s, "abcdef", None, 0, 1000).unwrap();
        assert!(e.text.starts_with("line 00000\n"), "{}", &e.text[..40]);
        assert!(e.text.ends_with("line 01999\n"));
        assert_eq!(e.next_offset, bytes.len() as u64);
        assert!(e.eof);
        // Cut at line ends: 36 whole lines of head (396 bytes), the tail
        // from the first whole line in the last 600 bytes.
        let offset = 396;
        assert_eq!(e.omitted, 1946 * 11 - offset);
        let marker = omission_marker("abcdef", None, offset, e.omitted, 1000);
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
        let m = omission_marker("x1y2", Some("stderr"), 10, 5 << 20, 16384);
        assert!(m.contains("\"max_bytes\": 16384"), "{m}");
        assert!(m.contains("\"stream\": \"stderr\""), "{m}");
        assert!(m.contains("next_offset"), "{m}");
    }

    #[test]
    fn binary_output_stays_within_budget() {
        // Every byte invalid: rendering triples it.
        let s = stream(&[0xff; 900], true);
        let e = excerpt(&s, "abcd", None, 0, 1000).unwrap();
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
        let e = excerpt(&s, "abcd", None, 0, 100).unwrap();
        assert_eq!((e.text.as_str(), e.next_offset, e.eof), ("a", 1, false));
        // At EOF nothing more will come: show what there is.
        let s = stream(&[b'a', euro[0], euro[1]], true);
        let e = excerpt(&s, "abcd", None, 0, 100).unwrap();
        assert_eq!((e.text.as_str(), e.next_offset), ("a\u{fffd}", 3));
    }

    #[test]
    fn cuts_never_split_a_character() {
        let text = "é".repeat(3000); // 6000 bytes
        let s = stream(text.as_bytes(), true);
        let e = excerpt(&s, "abcd", None, 0, 1001).unwrap();
        assert!(!e.text.contains('\u{fffd}'), "a character was split");
        assert_eq!(e.omitted % 2, 0);
    }

    #[test]
    fn dropped_bytes_are_counted() {
        let s = Memory {
            gone: 100,
            ..Memory::new(b"tail\n".to_vec(), true)
        };
        let e = excerpt(&s, "abcd", None, 0, 100).unwrap();
        assert_eq!(
            (e.text.as_str(), e.dropped, e.next_offset),
            ("tail\n", 100, 105)
        );
    }
}
