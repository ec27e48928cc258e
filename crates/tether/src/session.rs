//! One session of a [`Registry`](crate::registry::Registry): the state its
//! driver task shares with the registry's callers (what they see of it is in
//! `info.rs`).
//!
//! A session's life, as the registry reports it:
//!
//! ```text
//! running ──main exits──▶ exited | killed | timed_out | lost   (completion)
//!                              │
//!          descendants gone, output at EOF ──▶ settled (no process, no fd)
//! ```
//!
//! The *completion* is published exactly once, by the driver task (see
//! `driver.rs`), which is the only writer of the state: kill requests,
//! keeper events and output all reach it as events, so no race between a
//! kill, the reader and the exit can publish twice or overwrite a kill's
//! reason with a late natural exit.

mod driver;
mod info;
pub(crate) mod pattern;
mod screen;
pub(crate) mod spawn;
mod stdin;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::child::Child;
use crate::contain::{AsyncWriter, Descendant, Pty};
use crate::containment::Containment;
use crate::error::{Error, Result};
use crate::exit::ExitStatus;
use crate::identity::ProcessIdentity;
use crate::limits::{LimitHit, LimitReport};
use crate::output::OutputBuffer;
use crate::run_spec::CommandLine;
use crate::session_id::SessionId;
use crate::terminal::queries::QueryScan;
use crate::terminal::{PtySize, Screen, encode_keys};
use screen::ScreenState;

pub(crate) use driver::{Driver, Owner};
pub use info::{KillOutcome, KillReason, SessionInfo, SessionState, Stream};
pub(crate) use stdin::StdinQueue;
pub use stdin::{ANSWERS_LIMIT, DEFAULT_STDIN_QUEUE_LIMIT, QueuedWrite};

/// A request to a session's driver.
pub(crate) enum Control {
    Kill {
        grace: Duration,
        reason: KillReason,
        reply: Option<oneshot::Sender<Result<KillOutcome>>>,
    },
}

/// What never changes after the start.
#[derive(Debug)]
pub(crate) struct Meta {
    pub command: String,
    pub command_line: CommandLine,
    pub timeout: Option<Duration>,
    pub cwd: Option<PathBuf>,
    pub purpose: String,
    pub started_at: SystemTime,
    pub started: Instant,
    pub identity: ProcessIdentity,
    pub containment: Containment,
    /// The limits applied, each with its enforcement.
    pub limits: LimitReport,
    pub stdin_piped: bool,
    /// Grace for kills the registry starts on its own (teardown).
    pub grace: Duration,
    /// The size the session's PTY started with (`None`: pipes).
    pub pty: Option<PtySize>,
}

/// What the driver updates and callers read, under one lock.
#[derive(Debug)]
pub(crate) struct Shared {
    pub state: SessionState,
    pub exit: Option<ExitStatus>,
    pub kill_reason: Option<KillReason>,
    pub exited_at: Option<(SystemTime, Instant)>,
    /// The output stream (merged, or stdout when separate).
    pub output: Captured,
    /// Stderr, when the streams are separate.
    pub stderr: Option<Captured>,
    pub settled: bool,
    pub descendants_killed: u32,
    /// The worst limit the session ran into so far.
    pub limit_hit: Option<LimitHit>,
    /// Processes found outside the session's cgroups (out of its limits).
    pub limits_escaped: Vec<crate::limits::LimitEscape>,
    pub spill_error: Option<String>,
    /// A PTY session's terminal size now (`None`: pipes).
    pub pty_size: Option<PtySize>,
    /// Where the read path's scan for terminal queries stands in the
    /// output (see `screen.rs`).
    pub query_scan: QueryScan,
}

/// One captured stream: its bytes, whether it ended, its newlines.
#[derive(Debug)]
pub(crate) struct Captured {
    pub buffer: OutputBuffer,
    /// Every writer is gone and the read end is closed.
    pub eof: bool,
    /// Newlines seen (for progress reports).
    pub lines: u64,
}

impl Captured {
    fn new(buffer: OutputBuffer) -> Captured {
        Captured {
            buffer,
            eof: false,
            lines: 0,
        }
    }
}

impl Shared {
    pub(crate) fn stream(&self, stream: Stream) -> Option<&Captured> {
        match stream {
            Stream::Output => Some(&self.output),
            Stream::Stderr => self.stderr.as_ref(),
        }
    }

    pub(crate) fn stream_mut(&mut self, stream: Stream) -> Option<&mut Captured> {
        match stream {
            Stream::Output => Some(&mut self.output),
            Stream::Stderr => self.stderr.as_mut(),
        }
    }

    pub(crate) fn buffer(&self, stream: Stream) -> Option<&OutputBuffer> {
        self.stream(stream).map(|c| &c.buffer)
    }

    pub(crate) fn eof(&self, stream: Stream) -> bool {
        self.stream(stream).is_some_and(|c| c.eof)
    }
}

/// One session: immutable facts, shared state, the handles its driver
/// needs to be reached.
pub(crate) struct Session {
    pub id: SessionId,
    pub meta: Meta,
    shared: Mutex<Shared>,
    /// Bumped on every change (output, state, stdin): waiters subscribe.
    pub changed: watch::Sender<u64>,
    pub control: mpsc::UnboundedSender<Control>,
    /// The contained child, until the session settles. The driver polls it
    /// for keeper events; the registry's `Drop` kills through it directly.
    pub child: Mutex<Option<Child>>,
    /// Our end of the stdin pipe, while open. Writers clone the `Arc`, so
    /// closing here (by `close_stdin` or at main exit) releases the fd as
    /// soon as no write is in flight.
    pub stdin: Mutex<Option<Arc<AsyncWriter>>>,
    /// Serialises writers, so two writes never interleave their bytes.
    pub stdin_writer: tokio::sync::Mutex<()>,
    /// Writes queued for stdin (see [`Registry::queue_write`](crate::registry::Registry::queue_write)).
    pub stdin_queue: StdinQueue,
    /// A PTY session's master, for resizes and its termios, until the
    /// output reaches EOF (the driver drops it there with the reader).
    pub terminal: Mutex<Option<Pty>>,
    /// A PTY session's screen: the emulator and how far it has parsed
    /// the output (see `screen.rs`). `None` for pipes.
    pub screen: Mutex<Option<ScreenState>>,
    /// The screen's parsed offset, readable without its lock.
    pub screen_parsed: AtomicU64,
    /// A background task is parsing the screen.
    pub screen_worker: AtomicBool,
    /// Most output the screen may lag behind before the reader parses
    /// ([`RegistryConfig::screen_lag`](crate::registry::RegistryConfig::screen_lag)).
    pub screen_lag: u64,
    /// The runtime the session was started on: its writer and screen
    /// tasks go there, whichever thread (in a runtime or not) asks. Let go
    /// once that runtime shut down (`release_ended_driver`): a handle
    /// keeps its I/O driver's epoll and eventfd open.
    pub runtime: Mutex<Option<tokio::runtime::Handle>>,
    pub driver: Mutex<Option<JoinHandle<()>>>,
    /// A descriptor readable when new output came (made on first ask,
    /// [`Registry::output_doorbell`](crate::registry::Registry)): rung by
    /// the driver as output arrives and at its end.
    pub doorbell: Mutex<Option<crate::contain::Doorbell>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(
        id: SessionId,
        meta: Meta,
        (output, stderr): (OutputBuffer, Option<OutputBuffer>),
        child: Child,
        stdin: Option<AsyncWriter>,
        terminal: Option<Pty>,
        screen_lag: u64,
    ) -> (Arc<Session>, mpsc::UnboundedReceiver<Control>) {
        let screen = meta.pty.map(ScreenState::new);
        let pty_size = meta.pty;
        let (control, requests) = mpsc::unbounded_channel();
        let session = Arc::new(Session {
            id,
            meta,
            shared: Mutex::new(Shared {
                state: SessionState::Running,
                exit: None,
                kill_reason: None,
                exited_at: None,
                output: Captured::new(output),
                stderr: stderr.map(Captured::new),
                settled: false,
                descendants_killed: 0,
                limit_hit: None,
                limits_escaped: Vec::new(),
                spill_error: None,
                pty_size,
                query_scan: QueryScan::default(),
            }),
            changed: watch::Sender::new(0),
            control,
            child: Mutex::new(Some(child)),
            stdin: Mutex::new(stdin.map(Arc::new)),
            stdin_writer: tokio::sync::Mutex::new(()),
            stdin_queue: StdinQueue::default(),
            terminal: Mutex::new(terminal),
            screen: Mutex::new(screen),
            screen_parsed: AtomicU64::new(0),
            screen_worker: AtomicBool::new(false),
            screen_lag,
            runtime: Mutex::new(Some(tokio::runtime::Handle::current())),
            driver: Mutex::new(None),
            doorbell: Mutex::new(None),
        });
        (session, requests)
    }

    pub(crate) fn shared(&self) -> MutexGuard<'_, Shared> {
        lock(&self.shared)
    }

    pub(crate) fn notify(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Rings the output doorbell, if anyone asked for one.
    pub(crate) fn ring(&self) {
        if let Some(doorbell) = lock(&self.doorbell).as_ref() {
            doorbell.ring();
        }
    }

    /// The snapshot callers see.
    pub(crate) fn info(&self) -> SessionInfo {
        let stdin_open = lock(&self.stdin).is_some();
        let s = self.shared();
        let now = Instant::now();
        let uptime = s
            .exited_at
            .map_or(now, |(_, at)| at)
            .saturating_duration_since(self.meta.started);
        let settled = s.settled;
        let mut info = SessionInfo {
            id: self.id.clone(),
            command: self.meta.command.clone(),
            command_line: self.meta.command_line.clone(),
            timeout: self.meta.timeout,
            cwd: self.meta.cwd.clone(),
            purpose: self.meta.purpose.clone(),
            state: s.state,
            exit: s.exit,
            kill_reason: s.kill_reason,
            started_at: self.meta.started_at,
            exited_at: s.exited_at.map(|(wall, _)| wall),
            uptime,
            identity: self.meta.identity.clone(),
            containment: self.meta.containment,
            limits: self.meta.limits.clone(),
            limit_hit: s.limit_hit,
            limits_escaped: s.limits_escaped.clone(),
            descendants: Vec::new(),
            descendants_killed: s.descendants_killed,
            output_bytes: s.output.buffer.end_offset(),
            stderr_bytes: s.stderr.as_ref().map(|c| c.buffer.end_offset()),
            output_lines: s.output.lines,
            stderr_lines: s.stderr.as_ref().map(|c| c.lines),
            stdin_queued: self.stdin_queue.queued(),
            output_eof: s.output.eof && s.stderr.as_ref().is_none_or(|c| c.eof),
            stdin_open,
            settled,
            spill_error: s.spill_error.clone(),
            pty: s.pty_size,
            terminal_answers_dropped: self.stdin_queue.answers_dropped(),
        };
        drop(s);
        if !settled {
            info.descendants = self.descendants();
        }
        info
    }

    /// Live processes of the tree other than the main process (and the
    /// PID-namespace init, which is tether's, not the command's).
    pub(crate) fn descendants(&self) -> Vec<Descendant> {
        lock(&self.child)
            .as_ref()
            .map(Child::descendants)
            .unwrap_or_default()
    }

    /// Whether the session runs on a PTY.
    pub(crate) fn is_terminal(&self) -> bool {
        self.meta.pty.is_some()
    }

    pub(crate) fn not_a_terminal(&self) -> Error {
        Error::NotATerminal {
            id: self.id.to_string(),
        }
    }

    /// The PTY session's screen now (all output read so far parsed).
    pub(crate) fn screen(self: &Arc<Self>) -> Result<Screen> {
        self.current_screen().ok_or_else(|| self.not_a_terminal())
    }

    /// Resizes the PTY (the foreground group gets `SIGWINCH`) and its
    /// screen.
    pub(crate) fn resize(self: &Arc<Self>, size: PtySize) -> Result<()> {
        if !self.is_terminal() {
            return Err(self.not_a_terminal());
        }
        let terminal = lock(&self.terminal);
        let Some(pty) = terminal.as_ref() else {
            return Err(Error::StdinClosed {
                id: self.id.to_string(),
                why: "nobody holds its terminal any more",
            });
        };
        pty.resize(size)?;
        // What was printed before is laid out at the old size.
        let end = self.shared().output.buffer.end_offset();
        self.with_screen(end, |e| e.resize(size));
        self.shared().pty_size = Some(size);
        Ok(())
    }

    /// The bytes of named keys for this PTY session, in the cursor-key
    /// mode its screen is in now.
    pub(crate) fn keys<S: AsRef<str>>(self: &Arc<Self>, keys: &[S]) -> Result<Vec<u8>> {
        let end = self.shared().output.buffer.end_offset();
        let Some(application) = self.with_screen(end, |e| e.application_cursor()) else {
            return Err(self.not_a_terminal());
        };
        encode_keys(keys, application)
    }

    /// What a program reading the PTY sees as end of file (Unix: its
    /// `VEOF` character; Windows: Ctrl-Z and Enter), while the terminal is
    /// held.
    pub(crate) fn eof_input(&self) -> Option<Vec<u8>> {
        lock(&self.terminal).as_ref().map(Pty::eof_input)
    }

    /// Closes our end of stdin (a real EOF for the command once no write is
    /// in flight). `false` if it was not open.
    pub(crate) fn close_stdin(&self) -> bool {
        let closed = lock(&self.stdin).take().is_some();
        // Writes still queued fail (stdin is closed); later ones at once.
        self.stdin_queue.close();
        if closed {
            self.notify();
        }
        closed
    }

    /// Writes all of `bytes` to stdin, waiting while the pipe is full.
    /// Fails if stdin is not piped, was closed (by the caller, or because
    /// the main process exited), or the command closed its end.
    pub(crate) async fn write_stdin(&self, bytes: &[u8]) -> Result<()> {
        let _serial = self.stdin_writer.lock().await;
        let mut changes = self.changed.subscribe();
        let mut written = 0;
        while written < bytes.len() {
            let Some(fd) = lock(&self.stdin).clone() else {
                return Err(self.stdin_error());
            };
            tokio::select! {
                wrote = fd.write_some(&bytes[written..]) => match wrote {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                        return Err(Error::StdinClosed {
                            id: self.id.to_string(),
                            why: "the command closed its end of stdin",
                        });
                    }
                    Err(e) => return Err(e.into()),
                },
                // Stdin closed meanwhile (main exit, close_stdin): the loop
                // head reports it.
                _ = changes.changed() => {}
            }
        }
        Ok(())
    }

    pub(crate) fn stdin_error(&self) -> Error {
        let id = self.id.to_string();
        if !self.meta.stdin_piped {
            return Error::NoStdin { id };
        }
        let why = if self.shared().state == SessionState::Running {
            "stdin was closed with close_stdin"
        } else {
            "the main process has exited"
        };
        Error::StdinClosed { id, why }
    }

    /// Stops the driver task (registry teardown or eviction).
    pub(crate) fn abort_driver(&self) {
        if let Some(task) = lock(&self.driver).take() {
            task.abort();
        }
    }

    /// Lets go of the runtime the session ran on once its driver's task
    /// ended — as every task does when its runtime shuts down, and only
    /// then (a live runtime's driver sleeps out the retention). The task's
    /// handle and the runtime's keep that runtime's I/O driver (an epoll
    /// and an eventfd) open.
    pub(crate) fn release_ended_driver(&self) {
        let mut driver = lock(&self.driver);
        if driver.as_ref().is_some_and(JoinHandle::is_finished) {
            driver.take();
            lock(&self.runtime).take();
        }
    }

    /// The runtime the session ran on, unless it was let go (it had shut
    /// down: nothing spawned there would run).
    pub(crate) fn runtime(&self) -> Option<tokio::runtime::Handle> {
        lock(&self.runtime).clone()
    }
}

/// Locks, ignoring poisoning: every critical section leaves the data
/// consistent, so a panic elsewhere must not wedge the registry.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
