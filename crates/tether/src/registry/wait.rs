//! What [`Registry::wait`](crate::registry::Registry::wait) is asked and answers.

use std::time::Duration;

use crate::session::{SessionInfo, Stream};

/// What [`Registry::wait`](crate::registry::Registry::wait) waits for.
#[derive(Clone, Debug)]
pub struct WaitOptions {
    pub(crate) timeout: Duration,
    pub(crate) until: Option<String>,
    pub(crate) from: u64,
    pub(crate) stream: Stream,
    pub(crate) settled: bool,
}

impl WaitOptions {
    /// Wait at most `timeout` for the main process to exit.
    pub fn new(timeout: Duration) -> WaitOptions {
        WaitOptions {
            timeout,
            until: None,
            from: 0,
            stream: Stream::Output,
            settled: false,
        }
    }

    /// Wait past the main process's exit until the session is settled:
    /// every descendant gone and the output at EOF (default: return at
    /// the main process's exit, while descendants may still write).
    pub fn settled(mut self) -> WaitOptions {
        self.settled = true;
        self
    }

    /// Also return as soon as the output matches this regex (bytes regex,
    /// multi-line: `^`/`$` match at line boundaries). Matches up to
    /// [`MAX_MATCH_LEN`](crate::registry::MAX_MATCH_LEN) long are found wherever chunk boundaries fall.
    pub fn until(mut self, pattern: impl Into<String>) -> WaitOptions {
        self.until = Some(pattern.into());
        self
    }

    /// Match only output from this offset on (default 0: the whole
    /// stream; pass a previous `next_offset` or match end to look only at
    /// what came after it).
    pub fn from(mut self, offset: u64) -> WaitOptions {
        self.from = offset;
        self
    }

    /// Match on this stream (default [`Stream::Output`]).
    pub fn stream(mut self, stream: Stream) -> WaitOptions {
        self.stream = stream;
        self
    }
}

/// Why [`Registry::wait`](crate::registry::Registry::wait) returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The main process has ended (see the info's state and exit) —
    /// and, with [`WaitOptions::settled`], the whole session has.
    Exited,
    /// The `until` regex matched output at `[start, end)`.
    Matched {
        /// Offset of the match's first byte.
        start: u64,
        /// Offset just past the match.
        end: u64,
    },
    /// The timeout passed with the main process still running. Not an error.
    StillRunning,
}

/// What [`Registry::wait`](crate::registry::Registry::wait) found.
#[derive(Clone, Debug)]
pub struct WaitResult {
    /// Why it returned.
    pub outcome: WaitOutcome,
    /// The session as of returning.
    pub info: SessionInfo,
}
