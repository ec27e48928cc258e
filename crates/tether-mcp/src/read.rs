//! What `read` shows of a session's output, always within the per-result
//! budget: a page from an offset (rendered, or the exact bytes with
//! `raw`), the first or last lines. `grep` lives in [`grep`](crate::grep).

use tether::output::Gap;

use crate::excerpt::{ReadCall, Source, fit_prefix, fit_suffix, read_range};
use crate::screen::{complete_len, render};

/// Output shown by `read`, before the session's status and id are added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shown {
    /// The text (rendered, exact UTF-8, or base64).
    pub output: String,
    /// Offset of the first byte shown.
    pub offset: u64,
    /// Where the next read continues.
    pub next_offset: u64,
    /// Bytes in the stream so far.
    pub end_offset: u64,
    /// The stream ended and this reached its end.
    pub eof: bool,
    /// Bytes before `offset` that are gone.
    pub dropped: u64,
    /// Those bytes (or, for `tail_lines`, the gap the lines shown follow),
    /// with their cause.
    pub gap: Option<Gap>,
    /// With `raw`: `utf-8` or `base64`.
    pub encoding: Option<&'static str>,
    /// Lines shown (head/tail).
    pub lines: Option<u64>,
    /// Something to know about what was shown.
    pub note: Option<String>,
}

/// Where the held output starts (at or after `from`), where it ends, how
/// much from `from` on is gone, and the stream's gap.
fn bounds(source: &impl Source, from: u64) -> Result<(u64, u64, u64, Option<Gap>), tether::Error> {
    let first = source.read(from, 0)?;
    Ok((
        first.offset.max(from.min(first.end_offset)),
        first.end_offset,
        first.dropped,
        first.gap,
    ))
}

/// The part of the stream's gap that a read from `from` skipped.
pub fn skipped(gap: Option<Gap>, from: u64, dropped: u64) -> Option<Gap> {
    let gap = gap.filter(|_| dropped > 0)?;
    Some(Gap {
        start: from.max(gap.start),
        newlines: gap.newlines.filter(|_| from <= gap.start),
        ..gap
    })
}

/// Up to `max_bytes` (at most `budget`) from `from`: rendered, or with
/// `raw` the exact bytes, as UTF-8 text when they are, else base64.
pub fn page(
    source: &impl Source,
    from: u64,
    max_bytes: usize,
    budget: usize,
    raw: bool,
) -> Result<Shown, tether::Error> {
    let first = source.read(from, max_bytes.min(budget))?;
    let (start, end, dropped) = (first.offset, first.end_offset, first.dropped);
    let limit = max_bytes.min(budget);
    let (data, eof) = read_range(source, start, (start + limit as u64).min(end))?;
    let mut shown = Shown {
        offset: start,
        end_offset: end,
        dropped,
        gap: skipped(first.gap, from, dropped),
        ..Shown::default()
    };
    let used = if raw {
        match std::str::from_utf8(&data) {
            Ok(text) => {
                shown.output = text.to_owned();
                shown.encoding = Some("utf-8");
                data.len()
            }
            Err(e) if e.error_len().is_none() && !eof && e.valid_up_to() > 0 => {
                // A character cut by the page's end: leave it for the next.
                let text = std::str::from_utf8(&data[..e.valid_up_to()]).expect("valid prefix");
                shown.output = text.to_owned();
                shown.encoding = Some("utf-8");
                e.valid_up_to()
            }
            Err(_) => {
                // Base64 grows by 4/3: keep the text within the budget.
                let fits = (budget / 4 * 3).min(data.len());
                shown.output = base64(&data[..fits]);
                shown.encoding = Some("base64");
                fits
            }
        }
    } else {
        let whole = if eof { data.len() } else { complete_len(&data) };
        let text = render(&data[..whole]);
        if text.len() <= budget {
            shown.output = text;
            whole
        } else {
            let (text, len) = fit_prefix(&data[..whole], budget);
            shown.output = text;
            len
        }
    };
    shown.next_offset = start + used as u64;
    shown.eof = eof && used == data.len();
    if max_bytes > budget && shown.next_offset < end {
        shown.note = Some(format!(
            "a result shows at most the output budget ({budget} bytes); continue from \
             next_offset {}",
            shown.next_offset
        ));
    }
    Ok(shown)
}

/// The first `lines` lines from `from`, within the budget (up to a gap:
/// the next call, which the note names, says what is gone).
pub fn head(
    source: &impl Source,
    call: &ReadCall<'_>,
    from: u64,
    lines: usize,
    budget: usize,
) -> Result<Shown, tether::Error> {
    let (start, end, dropped, gap) = bounds(source, from)?;
    let (data, eof) = read_range(source, start, (start + budget as u64).min(end))?;
    let mut cut = 0;
    let mut counted = 0;
    for (at, _) in data.iter().enumerate().filter(|(_, b)| **b == b'\n') {
        cut = at + 1;
        counted += 1;
        if counted == lines {
            break;
        }
    }
    if counted < lines && eof && cut < data.len() {
        // The last line, without its newline: the stream ended there.
        cut = data.len();
        counted += 1;
    }
    if counted == 0 && !data.is_empty() {
        // One line longer than the budget: show its beginning.
        cut = complete_len(&data);
    }
    let text = render(&data[..cut]);
    let (output, used) = if text.len() <= budget {
        (text, cut)
    } else {
        fit_prefix(&data[..cut], budget)
    };
    let next_offset = start + used as u64;
    Ok(Shown {
        output,
        offset: start,
        next_offset,
        end_offset: end,
        eof: eof && next_offset == end,
        dropped,
        gap: skipped(gap, from, dropped),
        encoding: None,
        lines: Some(counted as u64),
        note: (counted < lines && next_offset < end).then(|| {
            format!(
                "{counted} of {lines} lines fit in the output budget ({budget} bytes) or end \
                 where bytes are gone; continue with {}",
                call.with(&format!(
                    "\"offset\": {next_offset}, \"head_lines\": {}",
                    lines - counted
                ))
            )
        }),
    })
}

/// The last `lines` lines of the stream, within the budget.
pub fn tail(source: &impl Source, lines: usize, budget: usize) -> Result<Shown, tether::Error> {
    let (_, end, _, gap) = bounds(source, 0)?;
    // The last lines come after the gap when it is in the window.
    let by_budget = end.saturating_sub(budget as u64);
    let gap = gap.filter(|g| g.end > by_budget);
    let window = by_budget.max(gap.as_ref().map_or(0, |g| g.end));
    let (start, _, dropped, _) = bounds(source, window)?;
    let (data, eof) = read_range(source, start, end)?;
    // A last line without a newline counts as a line.
    let body = data.strip_suffix(b"\n").unwrap_or(&data);
    let mut cut = None;
    let mut counted = 0;
    for (at, _) in body.iter().enumerate().rev().filter(|(_, b)| **b == b'\n') {
        counted += 1;
        if counted == lines {
            cut = Some(at + 1);
            break;
        }
    }
    let cut = match cut {
        Some(cut) => cut,
        // Fewer lines than asked: all of them if the window starts at the
        // stream's start, else from the first whole line.
        None if start == 0 => 0,
        None => body
            .iter()
            .position(|&b| b == b'\n')
            .map_or(data.len(), |nl| nl + 1),
    };
    let shown_lines = data[cut..].iter().filter(|&&b| b == b'\n').count()
        + usize::from(!data.ends_with(b"\n") && cut < data.len());
    let text = render(&data[cut..]);
    let (output, skip) = if text.len() <= budget {
        (text, 0)
    } else {
        fit_suffix(&data[cut..], budget)
    };
    let offset = start + (cut + skip) as u64;
    let gap_before = gap.as_ref().is_some_and(|g| g.end == start);
    Ok(Shown {
        output,
        offset,
        next_offset: end,
        end_offset: end,
        eof,
        dropped: if offset > start { 0 } else { dropped },
        // Fewer lines than asked because the ones before are gone.
        gap: gap.filter(|_| gap_before && shown_lines < lines),
        encoding: None,
        lines: Some(shown_lines as u64),
        note: (shown_lines < lines && offset > 0 && !gap_before).then(|| {
            format!(
                "{shown_lines} of {lines} lines fit in the output budget ({budget} bytes); the \
                 rest ends at offset {offset} (read with offset and max_bytes, or grep)"
            )
        }),
    })
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.len();
        let word = u32::from(chunk[0]) << 16
            | u32::from(*chunk.get(1).unwrap_or(&0)) << 8
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= n {
                out.push(ALPHABET[(word >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::excerpt::Memory;

    use super::*;

    const CALL: ReadCall<'static> = ReadCall {
        tool: "read",
        id: "abcd",
        stream: None,
    };

    /// `bytes`, served 700 bytes a read; `eof`: the stream has ended.
    fn memory(bytes: Vec<u8>, eof: bool) -> Memory {
        Memory {
            chunk: 700,
            ..Memory::new(bytes, eof)
        }
    }

    fn numbers(n: usize) -> Memory {
        let mut bytes = Vec::new();
        for i in 1..=n {
            bytes.extend_from_slice(format!("{i}\n").as_bytes());
        }
        memory(bytes, true)
    }

    #[test]
    fn base64_is_standard() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn pages_stay_within_the_budget() {
        let s = numbers(10_000);
        let p = page(&s, 0, 1 << 20, 1000, false).unwrap();
        assert!(p.output.len() <= 1000);
        assert_eq!(p.next_offset, p.output.len() as u64);
        assert!(p.note.unwrap().contains("output budget"));
        let raw = page(&memory(vec![0xff, 0xfe, b'a'], true), 0, 100, 1000, true).unwrap();
        assert_eq!(
            (raw.output.as_str(), raw.encoding),
            ("//5h", Some("base64"))
        );
        assert!(raw.eof);
    }

    #[test]
    fn head_and_tail_show_whole_lines() {
        let s = numbers(1000);
        let h = head(&s, &CALL, 0, 3, 1000).unwrap();
        assert_eq!(
            (h.output.as_str(), h.next_offset, h.lines),
            ("1\n2\n3\n", 6, Some(3))
        );
        let t = tail(&s, 2, 1000).unwrap();
        assert_eq!(
            (t.output.as_str(), t.lines, t.eof),
            ("999\n1000\n", Some(2), true)
        );
        let t = tail(&s, 5000, 100).unwrap();
        assert!(t.output.starts_with(|c: char| c.is_ascii_digit()));
        assert!(t.output.len() <= 100 && t.note.is_some());
        let t = tail(&memory(b"a\nb".to_vec(), true), 1, 100).unwrap();
        assert_eq!(t.output, "b");
        let t = tail(&memory(b"a\nb\n".to_vec(), true), 5, 100).unwrap();
        assert_eq!((t.output.as_str(), t.lines), ("a\nb\n", Some(2)));
    }
}
