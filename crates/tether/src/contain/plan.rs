//! What the platform-free part of the crate hands a backend to start: the
//! command, fully resolved, and how its stdio is connected.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::containment::{ContainmentPolicy, Leftovers};
use crate::limits::Limits;
use crate::spawn_tag::SpawnTag;
use crate::terminal::PtySize;

/// One command to start, contained.
#[derive(Debug)]
pub(crate) struct SpawnPlan {
    /// The executable, resolved (absolute).
    pub program: PathBuf,
    /// Arguments, `argv[0]` (the program as given) included.
    pub argv: Vec<OsString>,
    /// The complete environment (the spawn tag included).
    pub env: Vec<(OsString, OsString)>,
    /// Working directory (absolute).
    pub cwd: Option<PathBuf>,
    pub containment: ContainmentPolicy,
    pub leftovers: Leftovers,
    /// How long a kill waits after its gentle signals before the forced
    /// end (an upper bound: the kill ends when the tree is empty).
    pub grace: Duration,
    pub timeout: Option<Duration>,
    /// Unix: a new session (`setsid`), not only a new process group.
    #[cfg_attr(windows, allow(dead_code))]
    pub new_session: bool,
    /// How kills begin.
    pub ladder: Ladder,
    /// Run as the foreground job of this process's terminal (when it has
    /// one): the command gets the terminal, job-control stops pass through.
    #[cfg_attr(windows, allow(dead_code))]
    pub foreground: bool,
    /// The tag every process of the session carries.
    pub tag: SpawnTag,
    /// Run on a new PTY of this size instead of the stdio given: the
    /// command is a session leader with the slave as its controlling
    /// terminal and as stdin, stdout and stderr; the owner gets the master.
    pub pty: Option<PtySize>,
    /// Resource limits for the whole session (empty: none).
    pub limits: Limits,
    /// Unix: what the command's side of the spawn sets up besides the
    /// usual (descriptors passed on, umask, credentials, ignored signals).
    #[cfg_attr(windows, allow(dead_code))]
    pub setup: ChildSetup,
    /// Unix: code the keeper's process runs before it becomes the keeper
    /// (a fresh keeper of this command's own, never a warm one).
    #[cfg_attr(windows, allow(dead_code))]
    pub keeper_hook: Option<KeeperHook>,
}

/// Code a fresh keeper's process runs between its fork and its exec
/// (`tether::unix::CommandExt::pre_exec_keeper`): what it changes in that
/// process (its session, limits, umask, …) the keeper passes on to the
/// command.
#[derive(Clone)]
pub(crate) struct KeeperHook(
    #[cfg_attr(windows, allow(dead_code))]
    pub  std::sync::Arc<std::sync::Mutex<dyn FnMut() -> std::io::Result<()> + Send + 'static>>,
);

impl std::fmt::Debug for KeeperHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeeperHook")
    }
}

/// Unix: what the command's side of a spawn does besides the usual, as
/// `subprocess.Popen` offers it (`tether::unix::CommandExt`). Empty by
/// default: the command gets only its three streams, the keeper's umask
/// and credentials (the owner's), and no signal ignored.
#[derive(Clone, Debug, Default)]
#[cfg_attr(windows, allow(dead_code))]
pub(crate) struct ChildSetup {
    /// Descriptors the command gets besides its three streams: (its number
    /// in the command, 3 or above; the descriptor, duplicated per spawn).
    pub fds: Vec<(i32, std::sync::Arc<std::fs::File>)>,
    pub umask: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Supplementary groups (`setgroups`).
    pub groups: Option<Vec<u32>>,
    /// Signals the command starts with ignored (`SIG_IGN`).
    pub ignore_signals: Vec<i32>,
    /// The command inherits its keeper's environment (a hooked keeper's,
    /// when the command sets none of its own).
    pub keeper_env: bool,
}

/// How a kill of a tree begins, before the forced end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum Ladder {
    /// A polite request to end (Unix `SIGTERM`; Windows `CTRL_BREAK_EVENT`).
    #[default]
    Standard,
    /// What hanging up a terminal does, and a polite request (Unix
    /// `SIGHUP` and `SIGTERM` together, as systemd's `SendSIGHUP` does):
    /// the ladder of PTY sessions. Programs on a terminal treat a hang-up
    /// as "the user is gone" (shells pass it on to their jobs), which a
    /// plain `SIGTERM` to an interactive shell is not (`sh -i` ignores
    /// it); a `nohup` process ignores the hang-up and ends on `SIGTERM`.
    Terminal,
    /// Unix: these signals, all at once.
    #[cfg_attr(not(unix), allow(dead_code))]
    Signals(Vec<i32>),
}

/// What one of the command's standard streams is connected to.
#[derive(Debug)]
pub(crate) enum ChildIo {
    /// The owner's own stream.
    Inherit,
    /// The null device.
    Null,
    /// A new pipe; the owner gets the other end.
    Piped,
    /// This handle (the backend duplicates it).
    Os(super::OwnedIo),
}
