//! Errors of the tether library. Each variant says what went wrong in terms
//! a user can act on; front-ends render them.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong starting, watching or killing a command.
/// Each variant carries what a caller needs to act on it; its `Display` is
/// one line for people. Non-exhaustive: match the variants you handle and
/// report the rest.
///
/// ```standalone_crate
/// # #[cfg(unix)]
/// # fn main() -> tether::Result<()> {
/// # tether::keeper::run_if_requested();
/// use tether::{Command, Error};
///
/// match Command::new("sh").current_dir("/no/such/dir").spawn() {
///     Err(Error::BadCwd { cwd, reason }) => {
///         assert_eq!(cwd, std::path::Path::new("/no/such/dir"));
///         assert_eq!(reason, "does not exist");
///     }
///     other => panic!("expected BadCwd, got {other:?}"),
/// }
/// let err = Command::new("sh").purpose("not a purpose!").spawn().unwrap_err();
/// assert!(matches!(err, Error::InvalidInput { what: "purpose", .. }));
/// # #[cfg(target_os = "linux")]
/// # tether_testkit::assert_nothing_left();
/// # Ok(())
/// # }
/// # #[cfg(not(unix))]
/// # fn main() {}
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No executable named `program` was found on the search path.
    #[error("program not found: {program:?} ({})", where_searched(path_searched))]
    ProgramNotFound {
        /// The program as given.
        program: String,
        /// The search path that was tried, as one `:`-separated string
        /// (empty when the program was given as a path).
        path_searched: String,
    },
    /// The program exists but cannot be executed (permissions, a directory, …).
    #[error("not executable: {path} ({reason})")]
    NotExecutable {
        /// The resolved path.
        path: PathBuf,
        /// Why it cannot be executed.
        reason: String,
    },
    /// The working directory does not exist or is not a directory.
    #[error("bad working directory {cwd}: {reason}")]
    BadCwd {
        /// The directory as given.
        cwd: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An argument, environment entry or option is not usable.
    #[error("invalid {what}: {reason}")]
    InvalidInput {
        /// What was invalid (`argument`, `environment`, `purpose`, …).
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// A limit of the session could not be applied as asked, and the
    /// command was not started: the kernel refused its value, or
    /// [`Limits::require`](crate::Limits::require) demanded enforcement
    /// and it would have been `none`.
    #[error("{limit} limit not applied, the command was not started: {reason}")]
    LimitNotApplied {
        /// `memory`, `pids` or `cpu`.
        limit: &'static str,
        /// Why.
        reason: String,
    },
    /// The requested containment cannot be had on this system.
    #[error("containment {requested} is not available here: {reason}")]
    ContainmentUnavailable {
        /// The containment that was asked for.
        requested: &'static str,
        /// What the kernel said.
        reason: String,
    },
    /// The keeper program could not be found.
    #[error(
        "tether keeper not found (set TETHER_KEEPER, call tether::keeper::run_if_requested() \
         at the top of main, or install tether-keeper next to this program); searched: {searched:?}"
    )]
    KeeperNotFound {
        /// Every place that was looked at.
        searched: Vec<PathBuf>,
    },
    /// The keeper could not be started or talked to.
    #[error("tether keeper failed: {0}")]
    Keeper(#[source] io::Error),
    /// The keeper died without finishing its work. If this process is a
    /// subreaper, the orphaned processes were killed (see `orphans_killed`).
    #[error("tether keeper died unexpectedly; {orphans_killed} orphaned process(es) killed")]
    KeeperLost {
        /// How many orphaned processes of the session this process killed.
        orphans_killed: usize,
    },
    /// The keeper sent something this library does not understand.
    #[error("keeper protocol error: {0}")]
    Protocol(String),
    /// The command could not be started in the keeper.
    #[error("cannot start {program:?}: {stage}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Which step failed (`exec`, `chdir`, `fork`, …).
        stage: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The tree could not be killed entirely: these processes survived.
    /// The session stays tracked and killable.
    #[error("kill incomplete: {} process(es) survived: {}", survivors.len(), survivor_list(survivors))]
    KillIncomplete {
        /// What is still alive.
        survivors: Vec<Survivor>,
    },
    /// No session has this id (or it was evicted after its retention time).
    #[error("no session {id:?}")]
    UnknownSession {
        /// The id or prefix as given.
        id: String,
    },
    /// A session-id prefix names more than one session: give more characters.
    #[error("session id prefix {prefix:?} is ambiguous; it matches: {}", matches.join(", "))]
    AmbiguousSession {
        /// The prefix as given.
        prefix: String,
        /// Every id it matches.
        matches: Vec<String>,
    },
    /// A session-id prefix shorter than the minimum (4 characters), which
    /// would name sessions by accident.
    #[error("session id prefix {prefix:?} is too short: give at least {min} characters")]
    SessionIdTooShort {
        /// The prefix as given.
        prefix: String,
        /// The minimum length.
        min: usize,
    },
    /// The registry already runs its maximum of live sessions; nothing was
    /// started and nothing running was touched. Kill or wait for one, or
    /// raise the limit.
    #[error(
        "{limit} sessions are live, the registry's limit; kill or wait for one before starting another"
    )]
    TooManySessions {
        /// The configured limit.
        limit: usize,
    },
    /// The session was started without a stdin pipe
    /// ([`StdinMode::Piped`](crate::registry::StdinMode::Piped)).
    #[error("session {id} has no stdin pipe: start it with StdinMode::Piped to write to it")]
    NoStdin {
        /// The session.
        id: String,
    },
    /// The session's stdin is closed: nothing can be written to it any more.
    #[error("stdin of session {id} is closed: {why}")]
    StdinClosed {
        /// The session.
        id: String,
        /// Why (`close_stdin` was called, the main process exited, …).
        why: &'static str,
    },
    /// A queued stdin write would hold more than the session's stdin queue
    /// takes ([`RegistryConfig::stdin_queue_limit`](crate::registry::RegistryConfig::stdin_queue_limit)):
    /// nothing was queued. Wait until the command has read what is queued,
    /// or send less at once.
    #[error(
        "stdin of session {id} cannot take {bytes} more bytes now: {queued} bytes are queued, \
         not yet read by the command, and the queue holds at most {limit}; wait until it \
         reads them or send less"
    )]
    StdinQueueFull {
        /// The session.
        id: String,
        /// Bytes of the refused write.
        bytes: usize,
        /// Bytes already queued.
        queued: usize,
        /// The queue's limit in bytes.
        limit: usize,
    },
    /// Stderr was asked for, but the session merges it into one stream.
    #[error(
        "session {id} merges stderr into its output stream; start it with OutputMode::Separate to read stderr apart"
    )]
    NoSeparateStderr {
        /// The session.
        id: String,
    },
    /// The session runs on pipes, not a terminal: it has no screen and
    /// cannot be resized or sent keys.
    #[error(
        "session {id} has no terminal: start it with RunSpec::pty to use screens, sizes and keys"
    )]
    NotATerminal {
        /// The session.
        id: String,
    },
    /// This platform cannot do what was asked (yet): nothing was started.
    #[error("{what} is not supported on {os}")]
    Unsupported {
        /// What was asked for.
        what: &'static str,
        /// The operating system.
        os: &'static str,
    },
    /// The handle was inherited across `fork()` (without `exec`): its tree
    /// belongs to process `owner`, which still holds it (and whose death
    /// still kills it). A forked child cannot wait for, signal or kill it;
    /// it can start commands of its own.
    #[error(
        "this handle belongs to process {owner}: it was inherited across fork(), and only its \
         owner can use it (start the child's own commands in the child)"
    )]
    InheritedAcrossFork {
        /// The pid of the process that started the tree.
        owner: u32,
    },
    /// The registry has been shut down and starts nothing new.
    #[error("the session registry is shut down")]
    RegistryShutDown,
    /// A malformed spawn tag.
    #[error(transparent)]
    Tag(#[from] TagError),
    /// Any other operating-system error.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// A process that outlived a kill ([`Error::KillIncomplete`]): still
/// alive after the `SIGKILL` rounds and a 5 s verification window — in
/// uninterruptible sleep (`D`), frozen by a cgroup freezer, or (macOS, no
/// subreaper) beyond the keeper's reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Survivor {
    /// Its pid.
    pub pid: u32,
    /// Its command line, for the report (empty if unreadable).
    pub command: String,
}

/// `PATH` as searched, or, for a program given as a path, that it does
/// not exist.
fn where_searched(path_searched: &str) -> String {
    if path_searched.is_empty() {
        "no such file".to_owned()
    } else {
        format!("searched PATH={path_searched:?}")
    }
}

fn survivor_list(survivors: &[Survivor]) -> String {
    let names: Vec<String> = survivors
        .iter()
        .map(|s| format!("{} {}", s.pid, s.command))
        .collect();
    names.join(", ")
}

/// Why a spawn tag was rejected ([`SpawnTag::new`](crate::SpawnTag::new),
/// parsing a [`SpawnTag`](crate::SpawnTag)). A rejected tag is never
/// guessed at: the process carrying it is not tether's as far as `ps` and
/// `reap` are concerned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    /// The tag does not have the six `:`-separated fields of version 1.
    #[error("spawn tag has {0} fields, expected 6")]
    FieldCount(usize),
    /// An unknown tag version.
    #[error("unknown spawn tag version {0:?}")]
    Version(String),
    /// A field is out of its allowed alphabet or range.
    #[error("invalid spawn tag field {field}: {value:?}")]
    Field {
        /// The field's name.
        field: &'static str,
        /// The offending text.
        value: String,
    },
}

/// `Result` with [`Error`] as the default error: what every fallible call
/// of this crate returns.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a watchdog could not start watching its owner
/// ([`crate::watchdog`]).
#[derive(Debug, thiserror::Error)]
pub enum WatchdogError {
    /// No owner was given and `TETHER_SPAWN` is not set: this helper was
    /// not started by tether, nor by a launcher that stamped a tag.
    #[error(
        "no owner to watch: TETHER_SPAWN is not set (start the helper through tether, \
         have its launcher stamp a tag with `tether spawn-tag`, or name the owner explicitly)"
    )]
    NoOwner,
    /// `TETHER_SPAWN` is malformed: nothing can be trusted from it.
    #[error("TETHER_SPAWN={value:?} is not a valid spawn tag: {reason}")]
    BadTag {
        /// The value found.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The tag names its owner without a start time (`0`), so the owner
    /// cannot be told apart from a process that took over its pid.
    #[error("the spawn tag names owner {pid} without a start time: it cannot be identified")]
    Unverifiable {
        /// The owner's pid.
        pid: u32,
    },
    /// The owner named is this very process (it would never be seen dead).
    #[error("the owner named is this process itself")]
    OwnerIsSelf,
    /// The owner has already exited, or its pid now names another process.
    #[error("owner {owner} is gone")]
    OwnerGone {
        /// The owner as named.
        owner: crate::identity::ProcessIdentity,
    },
    /// The owner could not be watched (descriptor limit, a kernel without
    /// pidfds — Linux before 5.3 —, permissions), or the watchdog's thread
    /// could not start.
    #[error("cannot watch the owner: {0}")]
    Io(#[source] io::Error),
}

/// Why [`withhold_environment`](crate::withhold_environment) changed
/// nothing.
#[derive(Debug, thiserror::Error)]
pub enum WithholdError {
    /// Other threads run in this process: the environment cannot be
    /// changed soundly while one of them may read it. Call it first thing
    /// in `main`, before anything starts a thread (a tokio runtime, a
    /// logger, a thread pool).
    #[error(
        "{threads} threads run in this process: withhold the environment before any other \
         thread starts (nothing was changed)"
    )]
    OtherThreads {
        /// How many threads run.
        threads: u32,
    },
    /// Reading this process's own state failed (`/proc/self`, the PEB).
    #[error("cannot read this process's environment: {0}")]
    Io(#[source] io::Error),
}
