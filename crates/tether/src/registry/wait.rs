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
    pub(crate) through_exit: bool,
    pub(crate) quiet: Option<Duration>,
    pub(crate) prompt: Option<String>,
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
            through_exit: false,
            quiet: None,
            prompt: None,
        }
    }

    /// With [`quiet`](Self::quiet): return at once, without waiting out
    /// the window, when new output past [`from`](Self::from) ends in a line
    /// this regex matches whole — a REPL's or shell's prompt (`>>> `,
    /// `In [3]: `, `$ `), which a program prints when it has answered and
    /// waits for input. The outcome is [`WaitOutcome::Quiet`]. Default:
    /// none.
    pub fn prompt(mut self, pattern: impl Into<String>) -> WaitOptions {
        self.prompt = Some(pattern.into());
        self
    }

    /// Keep waiting after the main process exited while the stream is
    /// still open — descendants it left (`server &`) may yet print the
    /// line [`until`](Self::until) waits for. Returns
    /// [`WaitOutcome::Exited`] once the main process has exited *and* the
    /// stream reached EOF (every writer gone). Default: return at the main
    /// process's exit.
    pub fn through_exit(mut self) -> WaitOptions {
        self.through_exit = true;
        self
    }

    /// Also return ([`WaitOutcome::Quiet`]) once the stream holds output
    /// past [`from`](Self::from) and none more arrived for `window`: the
    /// program answered and went quiet, as a REPL does after its prompt.
    /// To wait for the answer to input, pass `from` = the stream's end
    /// before writing it (an answer that arrived before the wait began
    /// still counts). No output past `from` never counts as quiet.
    /// Default: off.
    pub fn quiet(mut self, window: Duration) -> WaitOptions {
        self.quiet = Some(window);
        self
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
    /// Output past [`WaitOptions::from`] arrived and then stopped for the
    /// [`WaitOptions::quiet`] window; the stream ended at `end` then.
    Quiet {
        /// End of the output when the quiet window passed.
        end: u64,
    },
    /// The timeout passed with the main process still running (or, with
    /// [`WaitOptions::through_exit`], the stream still open). Not an error.
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
