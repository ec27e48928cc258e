//! One session of a [`Registry`](crate::registry::Registry): what callers see of it
//! (the snapshot types) and the state its driver task shares with them.
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
pub(crate) mod pattern;
pub(crate) mod spawn;
mod stdin;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::child::Child;
use crate::contain::{AsyncWriter, Descendant};
use crate::containment::Containment;
use crate::error::{Error, Result};
use crate::exit::ExitStatus;
use crate::identity::ProcessIdentity;
use crate::output::OutputBuffer;
use crate::run_spec::CommandLine;
use crate::session_id::SessionId;

pub(crate) use driver::{Driver, Owner};
pub(crate) use stdin::StdinQueue;
pub use stdin::{DEFAULT_STDIN_QUEUE_LIMIT, QueuedWrite};

/// Where a session stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// The main process is running.
    Running,
    /// The main process exited on its own (any exit code or signal).
    Exited,
    /// The main process ended after a kill was asked for ([`Registry::kill`]
    /// or the registry's shutdown), whatever its exit status says.
    ///
    /// [`Registry::kill`]: crate::registry::Registry::kill
    Killed,
    /// The tree was killed because the hard or the idle-output timeout
    /// passed ([`SessionInfo::kill_reason`] says which).
    TimedOut,
    /// The keeper died without reporting how the command ended; the
    /// session's processes were found by spawn tag and killed.
    Lost,
}

impl SessionState {
    /// Lower-case name used in reports: `running`, `exited`, `killed`,
    /// `timed_out`, `lost`.
    pub fn name(self) -> &'static str {
        match self {
            SessionState::Running => "running",
            SessionState::Exited => "exited",
            SessionState::Killed => "killed",
            SessionState::TimedOut => "timed_out",
            SessionState::Lost => "lost",
        }
    }
}

impl std::fmt::Display for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a session's tree was killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KillReason {
    /// [`Registry::kill`](crate::registry::Registry::kill) was called.
    Requested,
    /// The hard timeout ([`RunSpec::timeout`](crate::registry::RunSpec::timeout)) passed.
    Timeout,
    /// No output for [`RunSpec::idle_timeout`](crate::registry::RunSpec::idle_timeout).
    IdleTimeout,
    /// The registry was shut down or dropped.
    Shutdown,
}

/// Which output stream to read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stream {
    /// The merged stream, or stdout when streams are separate (the default).
    #[default]
    Output,
    /// Stderr, when the session was started with
    /// [`OutputMode::Separate`](crate::registry::OutputMode::Separate).
    Stderr,
}

/// A snapshot of one session, as [`Registry::list`](crate::registry::Registry::list)
/// and the other calls report it.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    /// The session's id.
    pub id: SessionId,
    /// The command as one line of text.
    pub command: String,
    /// The command as it was given: an argv, or a script for `/bin/sh -c`
    /// (so a front-end can tell the shell's exit codes 126/127 apart).
    pub command_line: CommandLine,
    /// The hard timeout it runs under ([`RunSpec::timeout`](crate::RunSpec::timeout)), if any.
    pub timeout: Option<Duration>,
    /// Its working directory, if one was set.
    pub cwd: Option<PathBuf>,
    /// The purpose written into its spawn tags.
    pub purpose: String,
    /// Where it stands.
    pub state: SessionState,
    /// How the main process ended, once it has.
    pub exit: Option<ExitStatus>,
    /// Why the tree was killed, if it was.
    pub kill_reason: Option<KillReason>,
    /// When it started (wall clock).
    pub started_at: SystemTime,
    /// When the main process ended (wall clock).
    pub exited_at: Option<SystemTime>,
    /// Time from start to now, or to the main process's end.
    pub uptime: Duration,
    /// The main process's identity (its pid is `identity.pid`).
    pub identity: ProcessIdentity,
    /// What holds the tree.
    pub containment: Containment,
    /// Live processes of the session other than the main one (descendants
    /// left behind keep running, contained, until killed or the owner goes).
    pub descendants: Vec<Descendant>,
    /// Descendants a kill or timeout killed.
    pub descendants_killed: u32,
    /// Bytes captured on the output stream (merged or stdout).
    pub output_bytes: u64,
    /// Bytes captured on stderr, when streams are separate.
    pub stderr_bytes: Option<u64>,
    /// Newlines captured on the output stream (merged or stdout).
    pub output_lines: u64,
    /// Newlines captured on stderr, when streams are separate.
    pub stderr_lines: Option<u64>,
    /// Bytes queued for stdin with [`Registry::queue_write`](crate::Registry::queue_write)
    /// and not yet taken by the command.
    pub stdin_queued: usize,
    /// Whether every output pipe reached EOF (all writers gone; the read
    /// ends are closed).
    pub output_eof: bool,
    /// Whether stdin is piped and still open for [`Registry::write`](crate::registry::Registry::write).
    pub stdin_open: bool,
    /// Main process ended, tree empty, output at EOF: nothing of the
    /// session holds a process or a descriptor any more.
    pub settled: bool,
    /// Why bytes stopped going to the spill file, if they did (they are
    /// then counted as dropped).
    pub spill_error: Option<String>,
}

impl SessionInfo {
    /// The main process's pid.
    pub fn pid(&self) -> u32 {
        self.identity.pid
    }

    /// Whether the main process is still running.
    pub fn is_running(&self) -> bool {
        self.state == SessionState::Running
    }
}

/// What a successful [`Registry::kill`](crate::registry::Registry::kill) did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KillOutcome {
    /// The session's state afterwards (`killed`, or the earlier natural
    /// ending if the main process had already exited).
    pub state: SessionState,
    /// The main process had already ended before this kill; the kill only
    /// ended the descendants it left (if any).
    pub already_exited: bool,
    /// Descendants the kill ended (the main process not counted).
    pub descendants_killed: u32,
}

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
    pub stdin_piped: bool,
    /// Grace for kills the registry starts on its own (teardown).
    pub grace: Duration,
}

/// What the driver updates and callers read, under one lock.
#[derive(Debug)]
pub(crate) struct Shared {
    pub state: SessionState,
    pub exit: Option<ExitStatus>,
    pub kill_reason: Option<KillReason>,
    pub exited_at: Option<(SystemTime, Instant)>,
    pub output: OutputBuffer,
    pub stderr: Option<OutputBuffer>,
    pub output_eof: bool,
    pub stderr_eof: bool,
    /// Newlines seen on each stream (for progress reports).
    pub output_lines: u64,
    pub stderr_lines: u64,
    pub settled: bool,
    pub descendants_killed: u32,
    pub spill_error: Option<String>,
}

impl Shared {
    pub(crate) fn buffer(&self, stream: Stream) -> Option<&OutputBuffer> {
        match stream {
            Stream::Output => Some(&self.output),
            Stream::Stderr => self.stderr.as_ref(),
        }
    }

    pub(crate) fn eof(&self, stream: Stream) -> bool {
        match stream {
            Stream::Output => self.output_eof,
            Stream::Stderr => self.stderr_eof,
        }
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
    /// Writes queued for stdin (see [`Registry::queue_write`](crate::Registry::queue_write)).
    pub stdin_queue: StdinQueue,
    pub driver: Mutex<Option<JoinHandle<()>>>,
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
        output: OutputBuffer,
        stderr: Option<OutputBuffer>,
        child: Child,
        stdin: Option<AsyncWriter>,
    ) -> (Arc<Session>, mpsc::UnboundedReceiver<Control>) {
        let (control, requests) = mpsc::unbounded_channel();
        let session = Arc::new(Session {
            id,
            meta,
            shared: Mutex::new(Shared {
                state: SessionState::Running,
                exit: None,
                kill_reason: None,
                exited_at: None,
                output,
                stderr,
                output_eof: false,
                stderr_eof: false,
                output_lines: 0,
                stderr_lines: 0,
                settled: false,
                descendants_killed: 0,
                spill_error: None,
            }),
            changed: watch::Sender::new(0),
            control,
            child: Mutex::new(Some(child)),
            stdin: Mutex::new(stdin.map(Arc::new)),
            stdin_writer: tokio::sync::Mutex::new(()),
            stdin_queue: StdinQueue::default(),
            driver: Mutex::new(None),
        });
        (session, requests)
    }

    pub(crate) fn shared(&self) -> MutexGuard<'_, Shared> {
        lock(&self.shared)
    }

    pub(crate) fn notify(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
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
            descendants: Vec::new(),
            descendants_killed: s.descendants_killed,
            output_bytes: s.output.end_offset(),
            stderr_bytes: s.stderr.as_ref().map(OutputBuffer::end_offset),
            output_lines: s.output_lines,
            stderr_lines: s.stderr.as_ref().map(|_| s.stderr_lines),
            stdin_queued: self.stdin_queue.queued(),
            output_eof: s.output_eof && (s.stderr.is_none() || s.stderr_eof),
            stdin_open,
            settled,
            spill_error: s.spill_error.clone(),
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
}

/// Locks, ignoring poisoning: every critical section leaves the data
/// consistent, so a panic elsewhere must not wedge the registry.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
