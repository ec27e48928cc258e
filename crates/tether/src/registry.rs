//! Many sessions at once: [`Registry`] starts contained commands in the
//! background and lets a caller come back to them — read their output from
//! where it left off, type into them, wait for a line, kill them, list them.
//!
//! ```standalone_crate
//! # #[cfg(unix)]
//! # fn main() -> tether::Result<()> {
//! # tether::keeper::run_if_requested();
//! # let runtime = tokio::runtime::Runtime::new()?;
//! # runtime.block_on(async {
//! use std::time::Duration;
//! use tether::registry::{Registry, RegistryConfig, RunSpec, SessionState, WaitOptions, WaitOutcome};
//!
//! let registry = Registry::new(RegistryConfig::default());
//! let id = registry
//!     .run(RunSpec::shell("echo preparing; sleep 0.1; echo serving on 8000; exec sleep 1000"))
//!     .await?;
//! // Readiness: wait for a line, not a sleep.
//! let ready = registry
//!     .wait(id.as_str(), WaitOptions::new(Duration::from_secs(10)).until(r"serving on \d+"))
//!     .await?;
//! assert!(matches!(ready.outcome, WaitOutcome::Matched { .. }));
//! // Offsets are absolute: read from 0, then on from `next_offset`.
//! let chunk = registry.read(id.as_str(), 0, 64 * 1024)?;
//! assert_eq!(chunk.data, b"preparing\nserving on 8000\n");
//! // A verified kill of the whole tree; the output is drained first.
//! let killed = registry.kill(id.as_str(), Duration::from_secs(2)).await?;
//! assert_eq!(killed.state, SessionState::Killed);
//! assert_eq!(registry.info(id.as_str())?.state, SessionState::Killed);
//! # #[cfg(target_os = "linux")]
//! # tether_testkit::assert_nothing_left();
//! # Ok(())
//! # })
//! # }
//! # #[cfg(not(unix))]
//! # fn main() {}
//! ```
//!
//! # How it works
//!
//! Each session is a [`Command`](crate::Command) spawned with its
//! descendants kept (they keep running, contained, after the main process
//! exits), and one tokio task (`session/driver.rs`) that owns everything
//! that happens to it. Output goes through one pipe given to the command
//! as both stdout and stderr (so arrival order is exact) into an
//! [`OutputBuffer`](crate::output::OutputBuffer): a bounded ring with a
//! spill file behind it and absolute offsets that never shift.
//!
//! Limits are explicit: at most `max_live` sessions hold processes (a
//! `run` beyond that is refused — nothing running is ever killed to make
//! room); finished sessions are kept `finished_ttl` from their exit and at
//! most `max_finished` of them, oldest evicted first. Dropping or shutting
//! down the registry kills every tree and verifies it empty; if the owning
//! process dies instead, the keepers do it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::contain::{AsyncReader, AsyncWriter};
use crate::error::{Error, Result};
use crate::session::pattern::{compile, scan};
use crate::session::spawn::{Ends, Started, start};
use crate::session::{Control, Driver, Owner, Session, lock};
use crate::session_id::SessionId;
use crate::terminal::{PtySize, Screen};

mod wait;
pub use crate::contain::Descendant;
pub use crate::run_spec::{CommandLine, OutputMode, RunSpec, SHELL, StdinMode};
pub use crate::session::pattern::MAX_MATCH_LEN;
pub use crate::session::{
    ANSWERS_LIMIT, DEFAULT_STDIN_QUEUE_LIMIT, KillOutcome, KillReason, QueuedWrite, SessionInfo,
    SessionState, Stream,
};
pub use wait::{WaitOptions, WaitOutcome, WaitResult};

/// Default [`RegistryConfig::max_live`].
pub const DEFAULT_MAX_LIVE: usize = 64;
/// Default [`RegistryConfig::max_finished`].
pub const DEFAULT_MAX_FINISHED: usize = 64;
/// Default [`RegistryConfig::finished_ttl`]: 30 minutes from the exit.
pub const DEFAULT_FINISHED_TTL: Duration = Duration::from_secs(30 * 60);
/// Default [`RegistryConfig::screen_lag`]: 64 MiB, ~0.6 s of parsing on
/// an idle core here (~10 ms per MiB of TUI output).
pub const DEFAULT_SCREEN_LAG: u64 = 64 << 20;
/// Shortest id prefix accepted in place of a full session id.
pub const MIN_ID_PREFIX: usize = 4;
/// Bytes of output [`Registry::run_and_wait`] returns.
pub const YIELD_OUTPUT_BYTES: usize = 256 * 1024;

/// Runs `work`, which may hold its thread for long — a look at a PTY
/// session's screen ([`Registry::screen`], [`keys`](Registry::keys),
/// [`resize`](Registry::resize)) after a flood parses up to
/// [`RegistryConfig::screen_lag`], ~0.6 s at the default. On a thread of
/// a multi-threaded tokio runtime it runs in `block_in_place`, so the
/// worker's other tasks move to another thread meanwhile instead of
/// waiting; elsewhere (no runtime, a single-threaded one) it is a plain
/// call. Not for use inside a `LocalSet`, where `block_in_place` panics.
pub fn may_wait_long<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// Limits and retention of a [`Registry`].
#[derive(Clone, Debug)]
pub struct RegistryConfig {
    /// Most sessions holding processes at once (default 64). A session is
    /// live from `run` until its tree is empty and its output at EOF.
    pub max_live: usize,
    /// Most finished sessions kept for reading (default 64); the oldest
    /// finished is evicted first. Live sessions are never evicted.
    pub max_finished: usize,
    /// How long a finished session is kept, counted from its main
    /// process's exit (default 30 min).
    pub finished_ttl: Duration,
    /// Directory spill files are made in (default: `$XDG_RUNTIME_DIR`,
    /// else the temp dir). A spill file never has a name there — it is
    /// made nameless (`O_TMPFILE`, or unlinked right after it is opened;
    /// see [`OutputConfig::spill_dir`](crate::output::OutputConfig::spill_dir))
    /// — so a crash or `SIGKILL` of the owner leaves nothing on disk, and
    /// no directory is created that another user could predict or plant.
    pub spill_dir: Option<PathBuf>,
    /// Told when each session starts and when it has settled — how a
    /// front-end records sessions in the ledger without this crate
    /// depending on it. Default: none.
    pub observer: Option<Arc<dyn SessionObserver>>,
    /// Most bytes queued for one session's stdin with
    /// [`Registry::queue_write`] and not yet read by the command (default
    /// [`DEFAULT_STDIN_QUEUE_LIMIT`], 16 MiB); a write beyond it is refused
    /// with [`Error::StdinQueueFull`].
    pub stdin_queue_limit: usize,
    /// Most output a PTY session's [screen](Registry::screen) may lag
    /// behind what was read (default [`DEFAULT_SCREEN_LAG`], 64 MiB).
    /// The screen is built off the read path, by a background parse; a
    /// program printing faster than that is read at the kernel's pace
    /// until this many bytes wait, then at the parse's pace (the reader
    /// parses before reading on, as a terminal reads no faster than it
    /// draws). The cost is the first look after a flood: it parses what
    /// waits (~10 ms per MiB here, more under load). A smaller value makes
    /// every look cheap and a flood slower; no value changes what a look
    /// shows or how queries are answered (the reader parses up to every
    /// query it meets, whatever the lag). The lag is also bounded by what
    /// the session keeps: bytes about to leave its ring with no spill file
    /// to hold them are parsed first.
    pub screen_lag: u64,
}

/// Hears about every session of a [`Registry`]. Called from the registry's
/// tasks: keep it short and never block for long.
pub trait SessionObserver: Send + Sync + std::fmt::Debug {
    /// The session's command is running.
    fn started(&self, info: &SessionInfo);
    /// Nothing of the session is left: main process exited, tree empty,
    /// output at EOF (or the session was lost).
    fn settled(&self, info: &SessionInfo);
}

impl Default for RegistryConfig {
    fn default() -> RegistryConfig {
        RegistryConfig {
            max_live: DEFAULT_MAX_LIVE,
            max_finished: DEFAULT_MAX_FINISHED,
            finished_ttl: DEFAULT_FINISHED_TTL,
            spill_dir: None,
            observer: None,
            stdin_queue_limit: DEFAULT_STDIN_QUEUE_LIMIT,
            screen_lag: DEFAULT_SCREEN_LAG,
        }
    }
}

/// Bytes read from a session's output.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReadResult {
    /// The bytes, exactly as the command wrote them (not necessarily UTF-8).
    pub data: Vec<u8>,
    /// Offset of `data[0]`: later than the requested offset when bytes in
    /// between are gone (see `dropped`).
    pub offset: u64,
    /// Where the next read should start.
    pub next_offset: u64,
    /// Bytes between the requested offset and `offset` that were evicted
    /// beyond the spill cap and are gone.
    pub dropped: u64,
    /// Total bytes the stream has received so far.
    pub end_offset: u64,
    /// The stream is finished (every writer gone) and this read reached
    /// its end: nothing more will ever come.
    pub eof: bool,
    /// The stream's bytes that are gone, as of this read, whether or not
    /// this read reached them: where, their newline count, and why (the
    /// spill cap, or the error that stopped the spill file — e.g. a full
    /// disk). `None` while every byte is readable.
    pub gap: Option<crate::output::Gap>,
}

/// What [`Registry::run_and_wait`] found.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// The session's id (still readable, killable, waitable).
    pub id: SessionId,
    /// The main process ended within the yield time.
    pub finished: bool,
    /// The session as of returning.
    pub info: SessionInfo,
    /// Output from offset 0, at most [`YIELD_OUTPUT_BYTES`]; read on from
    /// `output.next_offset`.
    pub output: ReadResult,
}

/// Runs many contained commands in the background (see the module docs).
///
/// Must be used from within a tokio runtime (`run` spawns a task per
/// session). Dropping it kills every session's tree and blocks until each
/// is verified empty (at most the longest grace plus a few ms); in async
/// code prefer [`shutdown`](Registry::shutdown).
pub struct Registry {
    inner: Arc<Inner>,
}

struct Inner {
    config: RegistryConfig,
    /// `config.max_live`, changeable while sessions run
    /// ([`Registry::set_max_live`]).
    max_live: AtomicUsize,
    spill_dir: PathBuf,
    table: Mutex<Table>,
    shut: AtomicBool,
}

#[derive(Default)]
struct Table {
    sessions: BTreeMap<String, Arc<Session>>,
    /// Sessions holding processes, plus starts in flight.
    live: usize,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let table = lock(&self.inner.table);
        f.debug_struct("Registry")
            .field("config", &self.inner.config)
            .field("sessions", &table.sessions.len())
            .field("live", &table.live)
            .finish()
    }
}

impl Registry {
    /// The most sessions that may hold processes at once now
    /// ([`RegistryConfig::max_live`], unless changed since).
    pub fn max_live(&self) -> usize {
        self.inner.max_live.load(Ordering::SeqCst)
    }

    /// Changes [`max_live`](Registry::max_live) for the starts to come.
    /// Sessions already live are not touched: lowering it below their
    /// number only refuses new starts until enough of them end.
    pub fn set_max_live(&self, max_live: usize) {
        self.inner.max_live.store(max_live, Ordering::SeqCst);
    }

    /// An empty registry. Touches no file until a session spills.
    pub fn new(config: RegistryConfig) -> Registry {
        // No directory of our own: a named one outlived every SIGKILLed
        // owner (805 MB after three 400 MB commands, issue 8), and its
        // name was predictable. Nameless files need none.
        let spill_dir = config.spill_dir.clone().unwrap_or_else(|| {
            std::env::var_os("XDG_RUNTIME_DIR")
                .map(PathBuf::from)
                .filter(|d| d.is_absolute() && d.is_dir())
                .unwrap_or_else(std::env::temp_dir)
        });
        Registry {
            inner: Arc::new(Inner {
                max_live: AtomicUsize::new(config.max_live),
                config,
                spill_dir,
                table: Mutex::new(Table::default()),
                shut: AtomicBool::new(false),
            }),
        }
    }

    /// Starts `spec` in the background and returns its id as soon as the
    /// command is running.
    ///
    /// # Errors
    /// [`Error::TooManySessions`] at the live limit (nothing is started or
    /// killed); the spawn errors of [`Command::spawn`](crate::Command::spawn) (program not found,
    /// not executable, bad cwd, …); [`Error::RegistryShutDown`].
    pub async fn run(&self, spec: RunSpec) -> Result<SessionId> {
        let reservation = self.inner.reserve()?;
        let id = self.inner.fresh_id();
        let spill_dir = self.inner.spill_dir.clone();
        let start_id = id.clone();
        // Spawning blocks (posix_spawn of a keeper, a round trip to it), so
        // it runs off the reactor threads.
        let started = tokio::task::spawn_blocking(move || start(spec, start_id, spill_dir))
            .await
            .map_err(|e| Error::Io(std::io::Error::other(e)))??;
        let Started {
            child,
            meta,
            ends,
            buffers,
            idle,
            grace,
        } = started;
        let keeper = child.watcher()?;
        let (output, stderr, stdin, terminal) = match ends {
            Ends::Pipes {
                output,
                stderr,
                stdin,
            } => (
                AsyncReader::new(output)?,
                stderr.map(AsyncReader::new).transpose()?,
                stdin.map(AsyncWriter::from_file).transpose()?,
                None,
            ),
            // Three copies of the master: the reader, the writer, and the
            // one that resizes; all go at the output's EOF.
            Ends::Terminal(pty) => (
                AsyncReader::terminal(pty.try_clone()?)?,
                None,
                Some(AsyncWriter::terminal(pty.try_clone()?)?),
                Some(pty),
            ),
        };
        let (session, control) = Session::new(
            id.clone(),
            meta,
            buffers,
            child,
            stdin,
            terminal,
            self.inner.config.screen_lag,
        );
        let owner: Weak<dyn Owner> = Arc::downgrade(&self.inner) as Weak<dyn Owner>;
        let driver = Driver::new(
            Arc::clone(&session),
            owner,
            control,
            keeper,
            output,
            stderr,
            idle,
            grace,
            self.inner.config.finished_ttl,
        );
        {
            let mut table = lock(&self.inner.table);
            table
                .sessions
                .insert(id.as_str().to_owned(), Arc::clone(&session));
            reservation.commit();
            // Before the driver runs, so `started` always precedes `settled`.
            if let Some(observer) = &self.inner.config.observer {
                observer.started(&session.info());
            }
            *lock(&session.driver) = Some(tokio::spawn(driver.run()));
        }
        Ok(id)
    }

    /// Starts `spec` and waits up to `yield_for` for it to finish. Returns
    /// the finished result, or (still running) the id and the output so
    /// far; either way the session stays in the registry. At most
    /// [`YIELD_OUTPUT_BYTES`] of output come back; read on from
    /// `output.next_offset`.
    ///
    /// # Errors
    /// As [`run`](Registry::run).
    ///
    /// ```standalone_crate
    /// # #[cfg(unix)]
    /// # fn main() -> tether::Result<()> {
    /// # tether::keeper::run_if_requested();
    /// # let runtime = tokio::runtime::Runtime::new()?;
    /// # runtime.block_on(async {
    /// use std::time::Duration;
    /// use tether::registry::{Registry, RegistryConfig, RunSpec};
    ///
    /// let registry = Registry::new(RegistryConfig::default());
    /// let quick = registry.run_and_wait(RunSpec::argv(["echo", "hi"]), Duration::from_secs(10)).await?;
    /// assert!(quick.finished);
    /// assert_eq!(quick.output.data, b"hi\n");
    ///
    /// let slow = registry.run_and_wait(RunSpec::shell("sleep 1000"), Duration::from_millis(50)).await?;
    /// assert!(!slow.finished); // still running: come back with its id
    /// registry.kill(slow.id.as_str(), Duration::ZERO).await?;
    /// # #[cfg(target_os = "linux")]
    /// # tether_testkit::assert_nothing_left();
    /// # Ok(())
    /// # })
    /// # }
    /// # #[cfg(not(unix))]
    /// # fn main() {}
    /// ```
    pub async fn run_and_wait(&self, spec: RunSpec, yield_for: Duration) -> Result<RunOutcome> {
        let id = self.run(spec).await?;
        let waited = self.wait(id.as_str(), WaitOptions::new(yield_for)).await?;
        let output = self.read(id.as_str(), 0, YIELD_OUTPUT_BYTES)?;
        Ok(RunOutcome {
            finished: waited.outcome == WaitOutcome::Exited,
            id,
            info: waited.info,
            output,
        })
    }

    /// Reads up to `max_bytes` of the output stream (merged, or stdout
    /// when separate) from `offset`. Offsets are absolute and never shift;
    /// evicted bytes come from the spill file; bytes beyond the spill cap
    /// are reported as `dropped`, never silently skipped.
    ///
    /// # Errors
    /// [`Error::UnknownSession`], [`Error::AmbiguousSession`] or
    /// [`Error::SessionIdTooShort`] for an `id` that names no one session;
    /// [`Error::Io`] for a spill file that cannot be read.
    pub fn read(&self, id: &str, offset: u64, max_bytes: usize) -> Result<ReadResult> {
        self.read_stream(id, Stream::Output, offset, max_bytes)
    }

    /// [`read`](Registry::read) from a chosen stream.
    ///
    /// # Errors
    /// As `read`, and [`Error::NoSeparateStderr`] for stderr of a merged
    /// session.
    pub fn read_stream(
        &self,
        id: &str,
        stream: Stream,
        offset: u64,
        max_bytes: usize,
    ) -> Result<ReadResult> {
        let session = self.inner.find(id)?;
        let shared = session.shared();
        let buffer = shared
            .buffer(stream)
            .ok_or_else(|| Error::NoSeparateStderr {
                id: session.id.to_string(),
            })?;
        let chunk = buffer.read(offset, max_bytes)?;
        let end_offset = buffer.end_offset();
        Ok(ReadResult {
            eof: shared.eof(stream) && chunk.next_offset == end_offset,
            data: chunk.data,
            offset: chunk.offset,
            next_offset: chunk.next_offset,
            dropped: chunk.dropped,
            end_offset,
            gap: chunk.gap,
        })
    }

    /// Writes all of `bytes` to the session's stdin, waiting while the
    /// pipe is full (wrap in a timeout to bound that).
    ///
    /// Writing to a pipe whose reader is gone raises `SIGPIPE` in the
    /// writing process; Rust programs ignore it by default and get
    /// [`Error::StdinClosed`] instead — hosts that restore it must not.
    ///
    /// # Errors
    /// [`Error::NoStdin`] without [`StdinMode::Piped`];
    /// [`Error::StdinClosed`] after `close_stdin` or the main process's exit;
    /// [`Error::UnknownSession`], [`Error::AmbiguousSession`] or
    /// [`Error::SessionIdTooShort`] for an `id` that names no one session.
    ///
    /// ```standalone_crate
    /// # #[cfg(unix)]
    /// # fn main() -> tether::Result<()> {
    /// # tether::keeper::run_if_requested();
    /// # let runtime = tokio::runtime::Runtime::new()?;
    /// # runtime.block_on(async {
    /// use std::time::Duration;
    /// use tether::registry::{Registry, RegistryConfig, RunSpec, StdinMode, WaitOptions};
    ///
    /// let registry = Registry::new(RegistryConfig::default());
    /// let id = registry.run(RunSpec::argv(["tr", "a-z", "A-Z"]).stdin(StdinMode::Piped)).await?;
    /// registry.write(id.as_str(), b"shout\n").await?;
    /// registry.close_stdin(id.as_str())?; // `tr` reads EOF and exits
    /// registry.wait(id.as_str(), WaitOptions::new(Duration::from_secs(10)).settled()).await?;
    /// assert_eq!(registry.read(id.as_str(), 0, 1024)?.data, b"SHOUT\n");
    /// # #[cfg(target_os = "linux")]
    /// # tether_testkit::assert_nothing_left();
    /// # Ok(())
    /// # })
    /// # }
    /// # #[cfg(not(unix))]
    /// # fn main() {}
    /// ```
    pub async fn write(&self, id: &str, bytes: &[u8]) -> Result<()> {
        let session = self.inner.find(id)?;
        session.write_stdin(bytes).await
    }

    /// Queues `bytes` for the session's stdin and returns at once, never
    /// waiting for the command to read: one background task per session
    /// writes queued writes in order, each whole (interleaving with nothing
    /// else). With `close`, stdin is closed after these bytes (the command
    /// then reads EOF; on a PTY session the terminal's EOF character follows
    /// them instead, as with [`close_stdin`](Registry::close_stdin)). Await
    /// the returned [`QueuedWrite`] to learn when
    /// the bytes are in the pipe; dropping it does not cancel the write.
    ///
    /// # Errors
    /// [`Error::NoStdin`], [`Error::StdinClosed`] (closed, or a queued close
    /// is pending), [`Error::StdinQueueFull`] when the bytes queued and not
    /// yet read would exceed [`RegistryConfig::stdin_queue_limit`] — nothing
    /// is queued then.
    pub fn queue_write(&self, id: &str, mut bytes: Vec<u8>, close: bool) -> Result<QueuedWrite> {
        let session = self.inner.find(id)?;
        if !session.meta.stdin_piped {
            return Err(Error::NoStdin {
                id: session.id.to_string(),
            });
        }
        // A terminal is not closed (see `close_stdin`): its EOF character
        // follows the bytes instead.
        let close = if close && session.is_terminal() {
            bytes.extend(session.eof_input().ok_or_else(|| session.stdin_error())?);
            false
        } else {
            close
        };
        session
            .stdin_queue
            .push(&session, bytes, close, self.inner.config.stdin_queue_limit)
    }

    /// Closes the session's stdin: the command reads EOF once the bytes
    /// already written are consumed.
    ///
    /// A PTY session's terminal cannot be closed without hanging it up, so
    /// there this queues the terminal's end-of-file character (`VEOF`,
    /// normally Ctrl-D) after the writes already queued: a program reading
    /// the terminal in canonical mode at the start of a line reads end of
    /// file, as at a closed pipe; stdin stays open for later writes. On
    /// Windows it is Ctrl-Z and Enter, which end a console read the same
    /// way.
    ///
    /// # Errors
    /// As [`write`](Registry::write) when stdin is not open.
    pub fn close_stdin(&self, id: &str) -> Result<()> {
        let session = self.inner.find(id)?;
        if session.is_terminal() {
            let Some(eof) = session.eof_input() else {
                return Err(session.stdin_error());
            };
            // Accepted now; written in order. The queue's own answer is
            // not awaited: a failure shows as a closed stdin on next use.
            drop(session.stdin_queue.push(
                &session,
                eof,
                false,
                self.inner.config.stdin_queue_limit,
            )?);
            return Ok(());
        }
        if session.close_stdin() {
            return Ok(());
        }
        let id = session.id.to_string();
        Err(if session.meta.stdin_piped {
            Error::StdinClosed {
                id,
                why: "it is already closed",
            }
        } else {
            Error::NoStdin { id }
        })
    }

    /// The rendered screen of a PTY session: its text rows, cursor,
    /// whether the alternate screen (a full-screen program) is active.
    /// Kept after the session ends, as it was last drawn.
    ///
    /// The screen is as of all output read so far: a look first parses
    /// what the screen lags behind, in the calling thread — after a flood
    /// up to [`RegistryConfig::screen_lag`] (~10 ms per MiB here); so do
    /// [`keys`](Registry::keys) and [`resize`](Registry::resize). In async
    /// code that cannot wait that long on a runtime thread, call them in
    /// [`may_wait_long`] or from `spawn_blocking`.
    ///
    /// # Errors
    /// [`Error::UnknownSession`], [`Error::AmbiguousSession`] or
    /// [`Error::SessionIdTooShort`] for an `id` that names no one session;
    /// [`Error::NotATerminal`] for a pipe session.
    pub fn screen(&self, id: &str) -> Result<Screen> {
        self.inner.find(id)?.screen()
    }

    /// Resizes a PTY session's terminal: its foreground process group gets
    /// `SIGWINCH` and redraws; the screen takes the new size.
    ///
    /// # Errors
    /// [`Error::UnknownSession`], [`Error::AmbiguousSession`] or
    /// [`Error::SessionIdTooShort`] for an `id` that names no one session;
    /// [`Error::NotATerminal`] for a pipe session; [`Error::StdinClosed`]
    /// once nobody holds the terminal.
    /// (A [`PtySize`] is valid by construction: bad sizes fail at
    /// [`PtySize::new`].)
    pub fn resize(&self, id: &str, size: PtySize) -> Result<()> {
        self.inner.find(id)?.resize(size)
    }

    /// The bytes named keys (`Enter`, `Ctrl-C`, `Up`, `F5`, …; see
    /// [`Key`](crate::terminal::Key)) send to this PTY session now — arrows
    /// follow the cursor-key mode its program set. Write them with
    /// [`write`](Registry::write) or [`queue_write`](Registry::queue_write).
    ///
    /// # Errors
    /// [`Error::UnknownSession`], [`Error::AmbiguousSession`] or
    /// [`Error::SessionIdTooShort`] for an `id` that names no one session;
    /// [`Error::NotATerminal`] for a pipe session; [`Error::InvalidInput`]
    /// naming an unknown key.
    pub fn keys<S: AsRef<str>>(&self, id: &str, keys: &[S]) -> Result<Vec<u8>> {
        self.inner.find(id)?.keys(keys)
    }

    /// Waits until the main process exits, the output matches
    /// [`WaitOptions::until`], or the timeout passes — whichever is first.
    /// A timeout is not an error: the outcome is
    /// [`WaitOutcome::StillRunning`].
    ///
    /// # Errors
    /// [`Error::UnknownSession`], [`Error::AmbiguousSession`] or
    /// [`Error::SessionIdTooShort`] for an `id` that names no one session;
    /// [`Error::InvalidInput`] for an invalid regex;
    /// [`Error::NoSeparateStderr`] for stderr of a merged session.
    pub async fn wait(&self, id: &str, options: WaitOptions) -> Result<WaitResult> {
        let session = self.inner.find(id)?;
        let regex = options.until.as_deref().map(compile).transpose()?;
        let prompt = options
            .prompt
            .as_deref()
            .map(|p| compile(&format!(r"\A(?:{p})\z")))
            .transpose()?;
        if session.shared().buffer(options.stream).is_none() {
            return Err(Error::NoSeparateStderr {
                id: session.id.to_string(),
            });
        }
        let deadline = Instant::now() + options.timeout;
        let mut changes = session.changed.subscribe();
        let mut scanned = options.from;
        // The quiet window: output past `from` seen so far, and when it
        // last grew (output already there counts as arriving now).
        let mut seen_end = options.from;
        let mut grew_at: Option<Instant> = None;
        let result = |outcome| WaitResult {
            outcome,
            info: session.info(),
        };
        loop {
            changes.borrow_and_update();
            if let Some(regex) = &regex
                && let Some((start, end)) = scan_off_loop(
                    &session,
                    options.stream,
                    regex,
                    options.from,
                    &mut scanned,
                    deadline,
                )
                .await?
            {
                return Ok(result(WaitOutcome::Matched { start, end }));
            }
            let (done, end, at_prompt) = {
                let shared = session.shared();
                let done = if options.settled {
                    shared.settled
                } else if options.through_exit {
                    shared.state != SessionState::Running && shared.eof(options.stream)
                } else {
                    shared.state != SessionState::Running
                };
                let end = shared.buffer(options.stream).map_or(0, |b| b.end_offset());
                let at_prompt = match (&prompt, shared.buffer(options.stream)) {
                    (Some(prompt), Some(buffer)) if end > options.from => {
                        ends_in_prompt(buffer, options.from, prompt)
                    }
                    _ => false,
                };
                (done, end, at_prompt)
            };
            if done {
                return Ok(result(WaitOutcome::Exited));
            }
            if end > seen_end {
                seen_end = end;
                grew_at = Some(Instant::now());
            }
            if at_prompt && grew_at.is_some() {
                return Ok(result(WaitOutcome::Quiet { end }));
            }
            let quiet_at = options.quiet.zip(grew_at).map(|(window, at)| at + window);
            tokio::select! {
                _ = changes.changed() => {}
                _ = sleep_until(quiet_at), if quiet_at.is_some() => {
                    // Nothing changed during the window (a change would
                    // have won the select and moved `grew_at`).
                    return Ok(result(WaitOutcome::Quiet { end: seen_end }));
                }
                _ = tokio::time::sleep_until(deadline.into()) => {
                    return Ok(result(WaitOutcome::StillRunning));
                }
            }
        }
    }

    /// Kills the session's whole tree: SIGTERM, `grace`, SIGKILL, repeated
    /// until nothing is left. Returns once the keeper verified the tree
    /// empty *and* the output was read to EOF, so nothing written before
    /// the kill is lost. Also after the main process exited (kills the
    /// descendants it left). On an already settled session it does nothing
    /// and says so.
    ///
    /// # Errors
    /// [`Error::KillIncomplete`] lists survivors (the session stays
    /// tracked and killable); [`Error::UnknownSession`], [`Error::AmbiguousSession`] or
    /// [`Error::SessionIdTooShort`] for an `id` that names no one session.
    pub async fn kill(&self, id: &str, grace: Duration) -> Result<KillOutcome> {
        let session = self.inner.find(id)?;
        let (reply, answer) = oneshot::channel();
        let request = Control::Kill {
            grace,
            reason: KillReason::Requested,
            reply: Some(reply),
        };
        if session.control.send(request).is_ok()
            && let Ok(result) = answer.await
        {
            return result;
        }
        // The driver is gone: the session had settled.
        let info = session.info();
        Ok(KillOutcome {
            state: info.state,
            already_exited: true,
            descendants_killed: info.descendants_killed,
        })
    }

    /// Kills the session's tree if anything of it is left (as
    /// [`kill`](Registry::kill): verified, with `grace`), then forgets the
    /// session: its output buffers, spill file, terminal and every
    /// descriptor it held are released now, not at its retention's end.
    /// Returns its last snapshot; afterwards its id names nothing.
    ///
    /// # Errors
    /// As `kill` (a tree that survived stays tracked and killable: nothing
    /// is forgotten then).
    pub async fn close(&self, id: &str, grace: Duration) -> Result<SessionInfo> {
        let session = self.inner.find(id)?;
        let id = session.id.as_str();
        self.kill(id, grace).await?;
        // The kill is answered once the session settled (or it had): wait
        // for that to be visible, so its live slot is given back first.
        while !session.shared().settled {
            self.wait(id, WaitOptions::new(Duration::from_secs(60)).settled())
                .await?;
        }
        let info = session.info();
        let removed = lock(&self.inner.table).sessions.remove(id);
        if let Some(removed) = removed {
            removed.abort_driver();
            lock(&removed.doorbell).take();
        }
        Ok(info)
    }

    /// Waits until `stream` has bytes at `offset` or after it, or has
    /// ended (every writer gone), or `timeout` passes; then reads as
    /// [`read_stream`](Registry::read_stream) — nothing, and `eof` false,
    /// if the timeout passed first. A blocking, incremental read: start at
    /// 0 and go on from each result's `next_offset` until `eof`.
    ///
    /// # Errors
    /// As `read_stream`.
    pub async fn read_wait(
        &self,
        id: &str,
        stream: Stream,
        offset: u64,
        max_bytes: usize,
        timeout: Duration,
    ) -> Result<ReadResult> {
        let session = self.inner.find(id)?;
        let deadline = Instant::now() + timeout;
        let mut changes = session.changed.subscribe();
        loop {
            changes.borrow_and_update();
            let ready = {
                let shared = session.shared();
                let buffer = shared
                    .buffer(stream)
                    .ok_or_else(|| Error::NoSeparateStderr {
                        id: session.id.to_string(),
                    })?;
                buffer.end_offset() > offset || shared.eof(stream)
            };
            if ready {
                return self.read_stream(session.id.as_str(), stream, offset, max_bytes);
            }
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep_until(deadline.into()) => {
                    return self.read_stream(session.id.as_str(), stream, offset, 0);
                }
            }
        }
    }

    /// The session's output doorbell (made on the first call; one per
    /// session): readable once output arrived or the output ended, until
    /// [`output_seen`](Registry::output_seen) clears it. (Used by
    /// `tether::unix::RegistryOutputExt`: not on Windows.)
    #[allow(dead_code)]
    pub(crate) fn output_doorbell<T>(
        &self,
        id: &str,
        with: impl FnOnce(&crate::contain::Doorbell) -> T,
    ) -> Result<T> {
        let session = self.inner.find(id)?;
        let mut doorbell = lock(&session.doorbell);
        if doorbell.is_none() {
            let made = crate::contain::Doorbell::new()?;
            // Output may be waiting already.
            let shared = session.shared();
            if shared
                .buffer(Stream::Output)
                .is_some_and(|b| b.end_offset() > 0)
                || shared.eof(Stream::Output)
            {
                made.ring();
            }
            *doorbell = Some(made);
        }
        Ok(with(doorbell.as_ref().expect("made above")))
    }

    /// Says the caller has read the output up to `offset`: the doorbell is
    /// cleared, and rung again at once if there is more past `offset` or
    /// the output ended (so it stays readable, as a pipe at EOF is).
    /// Nothing if the session has no doorbell.
    ///
    /// # Errors
    /// [`Error::UnknownSession`], [`Error::AmbiguousSession`] or
    /// [`Error::SessionIdTooShort`] for an `id` that names no one session.
    pub fn output_seen(&self, id: &str, offset: u64) -> Result<()> {
        let session = self.inner.find(id)?;
        let doorbell = lock(&session.doorbell);
        let Some(doorbell) = doorbell.as_ref() else {
            return Ok(());
        };
        // Cleared before looking: output that lands after the look rings
        // it again, so no arrival is missed.
        doorbell.clear();
        let shared = session.shared();
        let more = shared
            .buffer(Stream::Output)
            .is_some_and(|b| b.end_offset() > offset);
        if more || shared.eof(Stream::Output) {
            doorbell.ring();
        }
        Ok(())
    }

    /// Every session, oldest first.
    pub fn list(&self) -> Vec<SessionInfo> {
        let sessions: Vec<Arc<Session>> =
            lock(&self.inner.table).sessions.values().cloned().collect();
        let mut infos: Vec<SessionInfo> = sessions.iter().map(|s| s.info()).collect();
        infos.sort_by_key(|i| i.started_at);
        infos
    }

    /// One session's snapshot.
    ///
    /// # Errors
    /// [`Error::UnknownSession`], [`Error::AmbiguousSession`] or
    /// [`Error::SessionIdTooShort`] for an `id` that names no one session.
    pub fn info(&self, id: &str) -> Result<SessionInfo> {
        Ok(self.inner.find(id)?.info())
    }

    /// The full id of the session that `id` names: a full id, or a unique
    /// prefix of at least [`MIN_ID_PREFIX`] characters.
    ///
    /// # Errors
    /// [`Error::UnknownSession`], [`Error::AmbiguousSession`] (listing the
    /// matches), [`Error::SessionIdTooShort`].
    pub fn resolve(&self, id: &str) -> Result<SessionId> {
        Ok(self.inner.find(id)?.id.clone())
    }

    /// Lets go of what finished sessions still hold of a runtime that shut
    /// down since (their ended tasks, each keeping that runtime's epoll and
    /// eventfd open): for a caller that stops its runtime between sessions,
    /// as the Python package does, so a finished session holds no
    /// descriptor — before, 2 each until evicted (64 kept: 128).
    pub fn release_ended_tasks(&self) {
        let sessions: Vec<Arc<Session>> =
            lock(&self.inner.table).sessions.values().cloned().collect();
        for session in sessions {
            session.release_ended_driver();
        }
    }

    /// Sessions holding processes right now (plus starts in flight).
    pub fn live_count(&self) -> usize {
        lock(&self.inner.table).live
    }

    /// Kills every session's tree (each with its own grace) and waits until
    /// each is verified empty and its output drained. Refuses new runs from
    /// the first moment. Sessions stay readable.
    ///
    /// # Errors
    /// [`Error::KillIncomplete`] with every survivor, if any tree could not
    /// be emptied.
    pub async fn shutdown(&self) -> Result<()> {
        self.inner.shut.store(true, Ordering::SeqCst);
        let sessions: Vec<Arc<Session>> =
            lock(&self.inner.table).sessions.values().cloned().collect();
        let mut answers = Vec::new();
        for session in &sessions {
            let (reply, answer) = oneshot::channel();
            let request = Control::Kill {
                grace: session.meta.grace,
                reason: KillReason::Shutdown,
                reply: Some(reply),
            };
            if session.control.send(request).is_ok() {
                answers.push(answer);
            }
        }
        let mut survivors = Vec::new();
        let mut other = None;
        for answer in answers {
            match answer.await {
                Ok(Err(Error::KillIncomplete { survivors: s })) => survivors.extend(s),
                Ok(Err(e)) => other = Some(e),
                Ok(Ok(_)) | Err(_) => {}
            }
        }
        if !survivors.is_empty() {
            return Err(Error::KillIncomplete { survivors });
        }
        other.map_or(Ok(()), Err)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.inner.shut.store(true, Ordering::SeqCst);
        let sessions: Vec<Arc<Session>> = std::mem::take(&mut lock(&self.inner.table).sessions)
            .into_values()
            .collect();
        for session in &sessions {
            session.abort_driver();
        }
        // Every keeper starts its ladder first, so the graces overlap;
        // then each kill is awaited (verified: the keeper reports the tree
        // empty only when it has no child left).
        for session in &sessions {
            if let Some(child) = lock(&session.child).as_ref() {
                child.start_kill_with_grace(session.meta.grace);
            }
        }
        for session in &sessions {
            if let Some(child) = lock(&session.child).as_mut() {
                let _ = child.finish_kill();
            }
        }
        drop(sessions);
    }
}

/// A live slot taken before spawning; given back unless committed.
struct Reservation<'a> {
    inner: &'a Inner,
    committed: bool,
}

impl Reservation<'_> {
    fn commit(mut self) {
        self.committed = true;
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.committed {
            lock(&self.inner.table).live -= 1;
        }
    }
}

/// Output a `wait` searches inline, on the runtime's thread; more is
/// searched on a blocking thread. A regex that needs the slow engine (a
/// Unicode `\b` over non-ASCII text) searched 4 MB of output in 4.1 s on
/// the caller's worker, and every other call of `tether mcp` on that worker
/// waited (issue 16); 64 KiB of it takes a few ms.
const INLINE_SCAN: u64 = 64 << 10;

/// [`scan`], on a blocking thread when more than [`INLINE_SCAN`] bytes are
/// left to search, stopping at `deadline`.
async fn scan_off_loop(
    session: &Arc<Session>,
    stream: Stream,
    regex: &regex::bytes::Regex,
    from: u64,
    scanned: &mut u64,
    deadline: Instant,
) -> Result<Option<(u64, u64)>> {
    let behind = {
        let shared = session.shared();
        shared
            .buffer(stream)
            .map_or(0, |b| b.end_offset())
            .saturating_sub(*scanned)
    };
    if behind <= INLINE_SCAN {
        return scan(session, stream, regex, from, scanned, None);
    }
    let (session, regex, mut at) = (Arc::clone(session), regex.clone(), *scanned);
    let searched = tokio::task::spawn_blocking(move || {
        let found = scan(&session, stream, &regex, from, &mut at, Some(deadline));
        (found, at)
    })
    .await;
    match searched {
        Ok((found, at)) => {
            *scanned = at;
            found
        }
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

impl Inner {
    fn reserve(&self) -> Result<Reservation<'_>> {
        if self.shut.load(Ordering::SeqCst) {
            return Err(Error::RegistryShutDown);
        }
        let mut table = lock(&self.table);
        let max_live = self.max_live.load(Ordering::SeqCst);
        if table.live >= max_live {
            return Err(Error::TooManySessions { limit: max_live });
        }
        table.live += 1;
        Ok(Reservation {
            inner: self,
            committed: false,
        })
    }

    fn fresh_id(&self) -> SessionId {
        let table = lock(&self.table);
        loop {
            let id = SessionId::generate();
            if !table.sessions.contains_key(id.as_str()) {
                return id;
            }
        }
    }

    fn find(&self, id: &str) -> Result<Arc<Session>> {
        let table = lock(&self.table);
        let key = resolve(&table.sessions, id)?;
        Ok(Arc::clone(&table.sessions[key]))
    }

    /// Evicts finished sessions beyond `max_finished`, oldest exit first;
    /// `settling` counts as finished already.
    fn enforce_retention(&self, settling: &SessionId) {
        let evicted = {
            let mut table = lock(&self.table);
            let mut finished: Vec<(Instant, String)> = table
                .sessions
                .iter()
                .filter_map(|(key, session)| {
                    let shared = session.shared();
                    let exited = shared.exited_at.map_or(session.meta.started, |(_, at)| at);
                    (shared.settled || key == settling.as_str()).then(|| (exited, key.clone()))
                })
                .collect();
            let excess = finished.len().saturating_sub(self.config.max_finished);
            finished.sort();
            finished
                .into_iter()
                .take(excess)
                .filter_map(|(_, key)| table.sessions.remove(&key))
                .collect::<Vec<_>>()
        };
        // Outside the table lock: dropping a session removes its spill file.
        for session in evicted {
            session.abort_driver();
        }
    }
}

impl Owner for Inner {
    fn settled(&self, id: &SessionId) {
        if let Some(observer) = &self.config.observer {
            let session = lock(&self.table).sessions.get(id.as_str()).cloned();
            if let Some(session) = session {
                observer.settled(&session.info());
            }
        }
        {
            let mut table = lock(&self.table);
            table.live = table.live.saturating_sub(1);
        }
        self.enforce_retention(id);
    }

    fn expired(&self, id: &SessionId) {
        let removed = lock(&self.table).sessions.remove(id.as_str());
        drop(removed);
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Whether the stream's last line (after `from`, at most 512 bytes, no
/// newline after it) is one `prompt` matches whole.
fn ends_in_prompt(
    buffer: &crate::output::OutputBuffer,
    from: u64,
    prompt: &regex::bytes::Regex,
) -> bool {
    let Ok(tail) = buffer.tail(512) else {
        return false;
    };
    let start = tail.offset.max(from).saturating_sub(tail.offset) as usize;
    let Some(data) = tail.data.get(start..) else {
        return false;
    };
    let line = match data.iter().rposition(|&b| b == b'\n') {
        Some(nl) => &data[nl + 1..],
        None if tail.offset <= from || start > 0 => data,
        // The last line began before the tail we read: too long for a prompt.
        None => return false,
    };
    !line.is_empty() && prompt.is_match(line)
}

/// The key of `map` that `id` names: itself, or the one key it is a prefix
/// of (at least [`MIN_ID_PREFIX`] characters).
fn resolve<'a, V>(map: &'a BTreeMap<String, V>, id: &str) -> Result<&'a String> {
    if let Some((key, _)) = map.get_key_value(id) {
        return Ok(key);
    }
    if id.chars().count() < MIN_ID_PREFIX {
        return Err(Error::SessionIdTooShort {
            prefix: id.to_owned(),
            min: MIN_ID_PREFIX,
        });
    }
    let mut matches = map
        .range::<str, _>((std::ops::Bound::Included(id), std::ops::Bound::Unbounded))
        .map(|(key, _)| key)
        .take_while(|key| key.starts_with(id));
    match (matches.next(), matches.next()) {
        (None, _) => Err(Error::UnknownSession { id: id.to_owned() }),
        (Some(key), None) => Ok(key),
        (Some(first), Some(second)) => Err(Error::AmbiguousSession {
            prefix: id.to_owned(),
            matches: [first, second]
                .into_iter()
                .chain(matches)
                .cloned()
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(keys: &[&str]) -> BTreeMap<String, ()> {
        keys.iter().map(|k| (k.to_string(), ())).collect()
    }

    #[test]
    fn ids_resolve_exactly_or_by_unique_prefix() {
        let m = map(&["abcd1234", "abcd5678", "abce0000", "zz"]);
        assert_eq!(resolve(&m, "abcd1234").unwrap(), "abcd1234");
        assert_eq!(resolve(&m, "abce").unwrap(), "abce0000");
        assert_eq!(resolve(&m, "abcd1").unwrap(), "abcd1234");
        // A full id shorter than the prefix minimum still names itself.
        assert_eq!(resolve(&m, "zz").unwrap(), "zz");
        match resolve(&m, "abcd") {
            Err(Error::AmbiguousSession { prefix, matches }) => {
                assert_eq!(prefix, "abcd");
                assert_eq!(matches, ["abcd1234", "abcd5678"]);
            }
            other => panic!("expected ambiguity, got {other:?}"),
        }
        assert!(matches!(
            resolve(&m, "abc"),
            Err(Error::SessionIdTooShort { min: 4, .. })
        ));
        assert!(matches!(
            resolve(&m, "abcf"),
            Err(Error::UnknownSession { .. })
        ));
        let message = resolve(&m, "abcd").unwrap_err().to_string();
        assert!(
            message.contains("abcd1234") && message.contains("abcd5678"),
            "{message}"
        );
    }
}
