//! Matching a session's output against a [`Registry::wait`] regex, across
//! the boundaries of the chunks it arrives in.
//!
//! [`Registry::wait`]: crate::registry::Registry::wait

use std::time::Instant;

use regex::bytes::{Regex, RegexBuilder};

use super::{Session, Stream};
use crate::error::{Error, Result};

/// Longest match [`WaitOptions::until`](crate::registry::WaitOptions::until) is
/// guaranteed to find wherever chunk boundaries fall: each search starts
/// this far before where the previous one ended.
pub const MAX_MATCH_LEN: u64 = 64 * 1024;
/// How much output one regex search looks at, at most.
const SCAN_CHUNK: usize = 1 << 20;

pub(crate) fn compile(pattern: &str) -> Result<Regex> {
    RegexBuilder::new(pattern)
        .multi_line(true)
        .size_limit(1 << 22)
        .build()
        .map_err(|e| Error::InvalidInput {
            what: "until pattern",
            reason: e.to_string(),
        })
}

/// Searches the stream from `*scanned` (less [`MAX_MATCH_LEN`] of overlap,
/// so a match split across chunks is found whole) to its end, or until
/// `deadline` (checked between chunks). Advances `*scanned` past what was
/// searched without a match.
pub(crate) fn scan(
    session: &Session,
    stream: Stream,
    regex: &Regex,
    from: u64,
    scanned: &mut u64,
    deadline: Option<Instant>,
) -> Result<Option<(u64, u64)>> {
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(None);
        }
        let chunk = {
            let shared = session.shared();
            let Some(buffer) = shared.buffer(stream) else {
                return Ok(None);
            };
            if *scanned >= buffer.end_offset() {
                return Ok(None);
            }
            let start = scanned.saturating_sub(MAX_MATCH_LEN).max(from);
            let chunk = buffer.read(start, SCAN_CHUNK)?;
            if chunk.next_offset > *scanned {
                chunk
            } else {
                // The overlap ends at a gap of dropped bytes: skip it.
                buffer.read(*scanned, SCAN_CHUNK)?
            }
        };
        if chunk.data.is_empty() {
            return Ok(None);
        }
        if let Some(m) = regex.find(&chunk.data) {
            let base = chunk.offset;
            return Ok(Some((base + m.start() as u64, base + m.end() as u64)));
        }
        *scanned = chunk.next_offset;
    }
}
