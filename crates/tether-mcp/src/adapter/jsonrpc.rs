//! What one line of JSON-RPC holds before serde sees it, for the input
//! serde refuses but a client can send:
//!
//! - a lone UTF-16 surrogate escape (`"\ud800"`: what Python's
//!   `json.dumps` writes for a file name that is not UTF-8) — replaced by
//!   U+FFFD, as invalid UTF-8 bytes are;
//! - a number beyond `f64` (`1e309`) — capped to the largest finite one,
//!   so the argument check says it is out of range instead of the whole
//!   request failing to parse;
//! - nesting deeper than serde's limit of 128 — measured here, so the
//!   answer can be an error that names it;
//! - the request's `id`, found by a scan that tolerates a broken or
//!   oversized rest, so even those errors go to the right request;
//! - an `id` that is a JSON number but not a 64-bit integer (a 30-digit
//!   integer, `1.5`): JSON-RPC allows any number, rmcp's ids are `i64` or
//!   strings, so the transport swaps such an id for a placeholder string
//!   on the way in and writes the number back exactly as sent on the way
//!   out ([`member_span`] finds it, and a cancellation's `requestId`).

use std::borrow::Cow;
use std::ops::Range;

use rmcp::model::{NumberOrString, RequestId};

/// Deepest nesting serde_json parses (its recursion limit).
pub const MAX_DEPTH: usize = 127;

/// A line made parseable, and how deep it nests.
pub struct Sanitized<'a> {
    /// The line, with lone surrogates and overflowing numbers replaced.
    pub line: Cow<'a, [u8]>,
    /// The deepest nesting of objects and arrays.
    pub depth: usize,
}

/// The `id` member of the top-level object, as far as a scan can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FoundId {
    /// No `id` member (a notification, or it was cut off).
    Absent,
    /// A usable id.
    Valid(RequestId),
    /// A JSON number that is not a 64-bit integer (`123456789012345678901234567890`,
    /// `1.5`), as its text: answered with exactly that text.
    Number(String),
    /// An `id` that is not a string or a number (an object, an array, a
    /// boolean, null): JSON-RPC answers it with `"id": null`.
    Invalid,
}

/// Replaces what serde refuses but means something (see the module docs)
/// and measures the nesting depth. Leaves everything else as it is.
pub fn sanitize(line: &[u8]) -> Sanitized<'_> {
    let mut line: Cow<'_, [u8]> = match std::str::from_utf8(line) {
        Ok(_) => Cow::Borrowed(line),
        Err(_) => Cow::Owned(String::from_utf8_lossy(line).into_owned().into_bytes()),
    };
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut i = 0;
    // Replacements are collected, then applied (numbers change length).
    let mut surrogates = Vec::new();
    let mut numbers = Vec::new();
    let bytes = &*line;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        if bytes.get(i + 1) == Some(&b'u')
                            && let Some(unit) = hex4(bytes, i + 2)
                        {
                            if (0xD800..0xDC00).contains(&unit) {
                                let low = (bytes.get(i + 6) == Some(&b'\\')
                                    && bytes.get(i + 7) == Some(&b'u'))
                                .then(|| hex4(bytes, i + 8))
                                .flatten();
                                if low.is_some_and(|l| (0xDC00..0xE000).contains(&l)) {
                                    i += 12;
                                    continue;
                                }
                                surrogates.push(i);
                            } else if (0xDC00..0xE000).contains(&unit) {
                                surrogates.push(i);
                            }
                            i += 6;
                            continue;
                        }
                        i += 2;
                        continue;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    i += 1;
                }
                let text = std::str::from_utf8(&bytes[start..i]).unwrap_or("");
                if text.parse::<f64>().is_ok_and(f64::is_infinite) {
                    numbers.push((start, i, text.starts_with('-')));
                }
            }
            _ => i += 1,
        }
    }
    if !surrogates.is_empty() {
        let owned = line.to_mut();
        for at in &surrogates {
            owned[at + 2..at + 6].copy_from_slice(b"fffd");
        }
    }
    if !numbers.is_empty() {
        let mut out = Vec::with_capacity(line.len());
        let mut last = 0;
        for (start, end, negative) in &numbers {
            out.extend_from_slice(&line[last..*start]);
            out.extend_from_slice(if *negative {
                b"-1.7976931348623157e308"
            } else {
                b"1.7976931348623157e308"
            });
            last = *end;
        }
        out.extend_from_slice(&line[last..]);
        line = Cow::Owned(out);
    }
    Sanitized {
        line,
        depth: deepest,
    }
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// The `id` member of the top-level object, scanning only as far as it
/// needs: the rest of the line may be cut off or broken.
pub fn find_id(line: &[u8]) -> FoundId {
    let Some(span) = member_span(line, &["id"]) else {
        return FoundId::Absent;
    };
    let value = &line[span];
    if value.first() == Some(&b'"') {
        return match serde_json::from_slice::<NumberOrString>(value) {
            Ok(id) => FoundId::Valid(id),
            Err(_) => FoundId::Invalid,
        };
    }
    // An integer rmcp writes back as it came: digits, in i64, not `-0`
    // (`1E3`, `1.0` and `-0` would come back as `1000`, `1`, `0`).
    let digits = value.strip_prefix(b"-").unwrap_or(value);
    if !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && value != b"-0"
        && let Ok(n) = std::str::from_utf8(value).unwrap_or("").parse::<i64>()
    {
        return FoundId::Valid(NumberOrString::Number(n));
    }
    match serde_json::from_slice::<serde_json::Number>(value) {
        Ok(_) => FoundId::Number(String::from_utf8_lossy(value).into_owned()),
        Err(_) => FoundId::Invalid,
    }
}

/// Where the value of the member at `path` (keys of nested objects, from
/// the top-level one) lies in `line`, scanning only as far as it needs.
pub fn member_span(line: &[u8], path: &[&str]) -> Option<Range<usize>> {
    let mut at = skip_ws(line, 0);
    let mut span = None;
    for key in path {
        let found = member(line, at, key)?;
        at = found.start;
        span = Some(found);
    }
    span
}

/// The value of member `key` of the object starting at `i`.
fn member(line: &[u8], mut i: usize, key: &str) -> Option<Range<usize>> {
    if line.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(line, i);
        match line.get(i) {
            Some(b'"') => {}
            Some(b',') => {
                i += 1;
                continue;
            }
            _ => return None,
        }
        let key_end = string_end(line, i)?;
        let name = &line[i..key_end];
        i = skip_ws(line, key_end);
        if line.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(line, i + 1);
        let mut value_end = value_end(line, i)?;
        if name.len() == key.len() + 2 && &name[1..name.len() - 1] == key.as_bytes() {
            while value_end > i && line[value_end - 1].is_ascii_whitespace() {
                value_end -= 1;
            }
            return Some(i..value_end);
        }
        i = value_end;
    }
}

fn skip_ws(line: &[u8], mut i: usize) -> usize {
    while line.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// Just past the string starting at `i` (a `"`).
fn string_end(line: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    while i < line.len() {
        match line[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// Just past the JSON value starting at `i`.
fn value_end(line: &[u8], i: usize) -> Option<usize> {
    match line.get(i)? {
        b'"' => string_end(line, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < line.len() {
                match line[j] {
                    b'"' => {
                        j = string_end(line, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while j < line.len() && !matches!(line[j], b',' | b'}' | b']') {
                j += 1;
            }
            (j < line.len()).then_some(j)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let s = sanitize(br#"{"a":"x\ud800y","b":"\udc00","ok":"\ud83d\ude00"}"#);
        assert_eq!(
            &*s.line,
            br#"{"a":"x\ufffdy","b":"\ufffd","ok":"\ud83d\ude00"}"#.as_slice()
        );
        let v: serde_json::Value = serde_json::from_slice(&s.line).unwrap();
        assert_eq!(v["a"], "x\u{fffd}y");
        assert_eq!(v["ok"], "😀");
        // An escaped backslash before "u" is not an escape.
        let s = sanitize(br#"{"a":"\\ud800"}"#);
        assert!(matches!(s.line, Cow::Borrowed(_)));
    }

    #[test]
    fn huge_numbers_are_capped_and_depth_is_measured() {
        let s = sanitize(br#"{"t":1e309,"u":-2E400,"v":[1.5,[2]]}"#);
        let v: serde_json::Value = serde_json::from_slice(&s.line).unwrap();
        assert_eq!(v["t"].as_f64(), Some(f64::MAX));
        assert_eq!(v["u"].as_f64(), Some(-f64::MAX));
        assert_eq!(s.depth, 3);
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(sanitize(deep.as_bytes()).depth, 200);
    }

    #[test]
    fn ids_are_found_in_broken_lines_and_invalid_ones_are_told_apart() {
        let id = |line: &str| find_id(line.as_bytes());
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id": 42,"method":"tools/call","params":{"#),
            FoundId::Valid(NumberOrString::Number(42))
        );
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","params":{"id":1},"id":"x-1","method""#),
            FoundId::Valid(NumberOrString::String("x-1".into()))
        );
        assert_eq!(id(r#"{"jsonrpc":"2.0","method":"#), FoundId::Absent);
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#),
            FoundId::Invalid
        );
        assert_eq!(id(r#"{"id":[1],"method":"x"}"#), FoundId::Invalid);
        assert_eq!(id(r#"{"id":true}"#), FoundId::Invalid);
        assert_eq!(id(r#"{"id":null}"#), FoundId::Invalid);
        assert_eq!(id(r#"{"id":1.5}"#), FoundId::Number("1.5".into()));
        assert_eq!(
            id(r#"{"id": 123456789012345678901234567890 ,"method":"x"}"#),
            FoundId::Number("123456789012345678901234567890".into())
        );
        assert_eq!(id(r#"{"id":-1e3}"#), FoundId::Number("-1e3".into()));
        let line = br#"{"method":"notifications/cancelled","params":{"reason":"x","requestId":12345678901234567890123}}"#;
        let span = member_span(line, &["params", "requestId"]).unwrap();
        assert_eq!(&line[span], b"12345678901234567890123");
        let deep = format!(r#"{{"jsonrpc":"2.0","id":9,"params":{}"#, "[".repeat(300));
        assert_eq!(id(&deep), FoundId::Valid(NumberOrString::Number(9)));
    }
}
