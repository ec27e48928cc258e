//! What callers see of a session: its state, why it was killed, which
//! stream to read, and the snapshot the registry's calls return.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::contain::Descendant;
use crate::containment::Containment;
use crate::exit::ExitStatus;
use crate::identity::ProcessIdentity;
use crate::limits::{LimitHit, LimitReport};
use crate::run_spec::CommandLine;
use crate::session_id::SessionId;
use crate::terminal::PtySize;

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

impl KillReason {
    /// Lower-case name used in reports: `requested`, `timeout`,
    /// `idle_timeout`, `shutdown`.
    pub fn name(self) -> &'static str {
        match self {
            KillReason::Requested => "requested",
            KillReason::Timeout => "timeout",
            KillReason::IdleTimeout => "idle_timeout",
            KillReason::Shutdown => "shutdown",
        }
    }
}

impl std::fmt::Display for KillReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
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
    /// The hard timeout it runs under ([`RunSpec::timeout`](crate::registry::RunSpec::timeout)), if any.
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
    /// The resource limits applied, each with how it is enforced (see
    /// [`Limits`](crate::Limits)); empty when none were asked for.
    pub limits: LimitReport,
    /// The limit the session ran into (the worst, if both), if any: a
    /// memory limit whose OOM kills ended some of its processes, or a
    /// process limit that refused forks.
    pub limit_hit: Option<LimitHit>,
    /// Processes of the session found outside its cgroups — out of its
    /// limits — and where each was (Linux; known once the tree is empty;
    /// see [`Child::limits_escaped`](crate::Child::limits_escaped)).
    pub limits_escaped: Vec<crate::limits::LimitEscape>,
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
    /// Bytes queued for stdin with [`Registry::queue_write`](crate::registry::Registry::queue_write)
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
    /// The terminal's size now, for a PTY session (`None`: pipes).
    pub pty: Option<PtySize>,
    /// Terminal queries of a PTY session's program (cursor position,
    /// device attributes, …) whose answers were dropped: more than
    /// [`ANSWERS_LIMIT`](crate::registry::ANSWERS_LIMIT) bytes of answers
    /// waited for a program not reading its input, as a terminal's input
    /// buffer overflows — or its input was closed. 0 for pipes.
    pub terminal_answers_dropped: u64,
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
