//! A PTY session's screen, built off the read path.
//!
//! The terminal emulator costs ~10 ms per MiB of TUI output here — more
//! than reading the PTY itself — and used to parse every byte as it was
//! read, so that queries (`ESC [ 6 n`: where is the cursor?) got the
//! exact answer. Now the read path only *scans* for queries
//! (`terminal/queries.rs`, a few instructions per escape sequence) and
//! parses the output up to the end of a query when it meets one, so the
//! answer is still exact. Everything else is parsed later, from the
//! session's output buffer (its ring, or its spill file), in order:
//!
//! * when someone looks — the screen, the cursor-key mode for named keys,
//!   a resize (bytes printed before it were laid out at the old size);
//! * by a background task on the blocking pool once [`START`] bytes wait;
//! * on the read path, a piece per read, while more than the session's
//!   `screen_lag`
//!   ([`RegistryConfig::screen_lag`](crate::registry::RegistryConfig::screen_lag),
//!   64 MiB by default) waits all the same — the background task fell
//!   behind a flood — so a look never has more than that (plus one read)
//!   to catch up on;
//!   and at once before bytes not parsed yet would become unreadable
//!   (leave the ring with no spill file to keep them).
//!
//! The lag is what lets a flood be read at the kernel's pace: with the
//! 4 MiB it was bounded by before, 64 MiB written to the terminal were
//! read at the parse's pace, 0.70–1.45× a blocking read loop on the
//! master in the same runs; with 64 MiB, 1.04–3.71× (1.7–3.7× idle: the
//! reader takes what the terminal holds per wake-up, where the loop
//! wakes per push), and the first look after it parses what waits,
//! 0.4–0.8 s (`benches/pty.rs`). Parsing at a lower CPU priority was
//! tried and dropped: a look or a query waits for the screen's lock,
//! which the starved parse held for seconds on a loaded machine.
//!
//! The parse state is in its own lock: a long catch-up never holds the
//! lock the reader appends under, only the screen's.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Session, lock};
use crate::terminal::{Emulator, PtySize, Screen};

/// Output a screen lags behind when a background task starts parsing it.
const START: u64 = 512 << 10;
/// Largest piece the background task parses per hold of the screen's
/// lock (it lets go in between, so a reader with a query to answer waits
/// for at most one of its pieces; a look holds the lock through its whole
/// catch-up, see [`Session::parse_for_reader`]); what the reader parses
/// per read beyond the screen's lag.
pub(crate) const PIECE: usize = 256 << 10;

/// The emulator and how far into the output stream it has parsed.
#[derive(Debug)]
pub(crate) struct ScreenState {
    emulator: Emulator,
    /// Stream offset of the first byte not parsed yet.
    parsed: u64,
}

impl ScreenState {
    pub(crate) fn new(size: PtySize) -> ScreenState {
        ScreenState {
            emulator: Emulator::new(size),
            parsed: 0,
        }
    }
}

impl Session {
    /// Parses the output up to offset `upto` (or its end, if sooner) and
    /// writes the program the answers to the queries met; then `look` at
    /// the screen. `None`: not a PTY session.
    pub(crate) fn with_screen<T>(
        self: &Arc<Self>,
        upto: u64,
        look: impl FnOnce(&mut Emulator) -> T,
    ) -> Option<T> {
        let mut guard = lock(&self.screen);
        let state = guard.as_mut()?;
        let mut answers = (Vec::new(), 0);
        while state.parsed < upto {
            let chunk = {
                let shared = self.shared();
                let want = (upto - state.parsed).min(PIECE as u64) as usize;
                shared.output.buffer.read(state.parsed, want)
            };
            let Ok(chunk) = chunk else {
                // The spill file failed under us: nothing more can be read.
                break;
            };
            if chunk.data.is_empty() {
                break;
            }
            // Bytes lost before the screen saw them (the spill file failed
            // while the screen lagged): the screen goes on after the gap.
            state.emulator.feed(&chunk.data);
            state.parsed = chunk.next_offset;
            let (bytes, count) = state.emulator.take_answers();
            answers.0.extend_from_slice(&bytes);
            answers.1 += count;
        }
        self.screen_parsed.store(state.parsed, Ordering::SeqCst);
        let seen = look(&mut state.emulator);
        drop(guard);
        if answers.1 > 0 {
            self.stdin_queue.push_answers(self, answers.0, answers.1);
        }
        Some(seen)
    }

    /// Parses up to `upto` for the reader, which runs on the async runtime
    /// and must parse before reading on (a query to answer, the screen's
    /// lag reached, bytes about to leave the buffer). More than a piece to
    /// parse, or the screen's lock held by a look catching up, could hold
    /// the worker thread for up to the whole lag (~0.6 s after a 64 MiB
    /// flood): on a multi-threaded runtime that runs in `block_in_place`,
    /// so the worker's other tasks (other sessions) move on meanwhile and
    /// only this session waits, as a terminal draws before it reads on.
    pub(crate) fn parse_for_reader(self: &Arc<Self>, upto: u64) {
        let behind = upto.saturating_sub(self.screen_parsed.load(Ordering::SeqCst));
        if behind <= PIECE as u64 && self.screen.try_lock().is_ok() {
            self.with_screen(upto, |_| ());
        } else {
            crate::registry::may_wait_long(|| self.with_screen(upto, |_| ()));
        }
    }

    /// The screen as of all output read so far.
    pub(crate) fn current_screen(self: &Arc<Self>) -> Option<Screen> {
        let end = self.shared().output.buffer.end_offset();
        self.with_screen(end, |e| e.screen())
    }

    /// Starts a background parse if the screen lags [`START`] bytes behind
    /// `end` and none runs.
    pub(crate) fn parse_behind(self: &Arc<Self>, end: u64) {
        // A ring smaller than twice that (no spill file to fall back on)
        // would make the read path parse first: start before that.
        let batch = START.min(self.shared().output.buffer.memory_cap() as u64 / 2);
        if end.saturating_sub(self.screen_parsed.load(Ordering::SeqCst)) < batch
            || self.screen_worker.swap(true, Ordering::SeqCst)
        {
            return;
        }
        let Some(runtime) = self.runtime() else {
            // Its runtime shut down (the session finished): readers parse.
            self.screen_worker.store(false, Ordering::SeqCst);
            return;
        };
        let session = Arc::clone(self);
        runtime.spawn_blocking(move || {
            loop {
                let end = session.shared().output.buffer.end_offset();
                let parsed = session.screen_parsed.load(Ordering::SeqCst);
                if parsed < end {
                    // In pieces, letting go of the lock in between: a
                    // reader with a query to answer gets in.
                    session.with_screen((parsed + PIECE as u64).min(end), |_| ());
                    if session.screen_parsed.load(Ordering::SeqCst) > parsed {
                        continue;
                    }
                    // No progress (the bytes cannot be read): give up.
                }
                session.screen_worker.store(false, Ordering::SeqCst);
                // Output that came as we stopped is the next round's.
                let end = session.shared().output.buffer.end_offset();
                let behind = end.saturating_sub(session.screen_parsed.load(Ordering::SeqCst));
                if parsed >= end
                    && behind >= START.min(session.shared().output.buffer.memory_cap() as u64 / 2)
                    && !session.screen_worker.swap(true, Ordering::SeqCst)
                {
                    continue;
                }
                return;
            }
        });
    }
}
