//! tether runs commands so that every process they start is positively
//! identified and guaranteed dead when its owner is done with it — however
//! the owner ends: exit, panic, `SIGKILL`, OOM kill, crash.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! fn main() -> Result<(), tether::Error> {
//!     tether::keeper::run_if_requested(); // this program can be its own keeper
//!     let output = tether::Command::new("sh")
//!         .args(["-c", "setsid sleep 1000 & echo started"])
//!         .timeout(Duration::from_secs(10))
//!         .output()?;
//!     // `sh` exited; the setsid'd `sleep` it left behind is already dead.
//!     assert_eq!(output.stdout, b"started\n");
//!     Ok(())
//! }
//! ```
//!
//! Two levels of API: the one-shot level here ([`Command`], [`Child`],
//! [`ExitStatus`], …), mirroring `std::process`; and [`registry`], the async
//! multi-session API that `tether mcp` is built on. [`sys`] is the process
//! table; [`unix`] holds what only Unix has (signals, raw descriptors).
//!
//! # How it works
//!
//! On Linux and macOS the owner never forks (a fork costs ~17 ms at 1 GiB
//! of owner memory and ~87 ms at 4 GiB). It starts a small single-threaded
//! *keeper* with `posix_spawn`, handing it one end of a Unix socket as
//! stdin: the control channel and the *lifeline*. On Linux the keeper is a
//! child subreaper, so every process of the command — `setsid`,
//! double-fork and daemonizing escapes included — stays its descendant. It
//! starts the command in its own process group, reaps everything, reports
//! the exit, and kills the whole tree when asked, at the timeout, or the
//! moment the lifeline reads EOF because the owner is gone, by whatever
//! cause. With [`ContainmentPolicy::PidNamespace`] the command runs under a
//! pid-1 init that the kernel kills together with the keeper, so even a
//! `SIGKILL`ed keeper takes the tree with it. macOS has no subreaper: its
//! keeper holds the command's process group and session and finds escaped
//! descendants by their spawn tag ([`Containment::ProcessGroupAndTag`]).
//! On Windows there is no keeper: each session is a kill-on-close job
//! object that only the owner holds.
//!
//! Processes are named by [`ProcessIdentity`] (boot id, pid, start time,
//! pidfs inode) and signalled through pidfds, never by a bare pid. Every
//! process carries a [`SpawnTag`] in `TETHER_SPAWN`, naming its owner and
//! session, so leftovers can be proven to be tether's.
//!
//! # Finding the keeper
//!
//! `$TETHER_KEEPER`, else the program set with [`keeper::set_program`] (the
//! Python package sets the `tether` it bundles), else this program if it
//! called [`keeper::run_if_requested`], else `tether-keeper` beside this
//! program or on `PATH`. The `tether` CLI is its own keeper.
//!
//! # Fork
//!
//! An owner that forks without `exec` (Python's `multiprocessing`, a
//! pre-fork server) is safe: a `pthread_atfork` handler points the child's
//! copies of the keeper sockets at `/dev/null`, so the parent's trees still
//! die with the parent; handles the child inherited fail with
//! [`Error::InheritedAcrossFork`]; the child's own commands are its own.

#![warn(missing_docs)]

mod child;
mod command;
mod contain;
mod containment;
pub mod doctor;
mod error;
mod exit;
mod forward;
mod identity;
pub mod init;
mod install;
mod limits;
pub mod output;
pub mod registry;
mod resolve;
mod run_spec;
mod session;
mod session_id;
mod spawn;
mod spawn_tag;
mod stdio;
pub mod terminal;
pub mod watchdog;
mod withheld;

pub use child::{Child, ChildHandle};
pub use command::{Command, DEFAULT_GRACE};
pub use contain::Descendant;
pub use contain::ext::*;
pub use contain::sys;
pub use containment::{Containment, ContainmentPolicy};
pub use error::{Error, Result, Survivor, TagError, WithholdError};
pub use exit::{ExitStatus, Output};
pub use forward::SignalForwarder;
pub use identity::ProcessIdentity;
pub use install::Install;
pub use limits::{Enforcement, LimitHit, LimitReport, Limits, MIN_CPU, format_size, parse_size};
pub use session_id::SessionId;
pub use spawn_tag::{SPAWN_TAG_VAR, SpawnTag};
pub use stdio::{ChildStderr, ChildStdin, ChildStdout, OsStdio, Stdio};
pub use withheld::{NEEDED as NEEDED_ENVIRONMENT, Withheld, withhold_environment};

/// The keeper: run it, or let this program be one. (On Windows there is no
/// keeper: [`run_if_requested`](keeper::run_if_requested) returns at once.)
pub mod keeper {
    pub use crate::contain::keeper::{KEEPER_ARG, main, run_if_requested};

    /// Uses `program` — a `tether` or `tether-keeper` executable of this
    /// library's version — as the keeper from the next spawn on, ahead of
    /// discovery (`$TETHER_KEEPER` still wins); `None` goes back to
    /// discovery. For hosts that cannot be their own keeper and ship one
    /// beside them: the Python package sets its bundled `tether` so. A
    /// program that is not a file fails each spawn with
    /// [`Error::KeeperNotFound`](crate::Error::KeeperNotFound). Does
    /// nothing on Windows (no keeper).
    pub fn set_program(program: Option<std::path::PathBuf>) {
        crate::contain::set_keeper_program(program)
    }
}

/// Keeps up to `n` keepers of finished sessions waiting for the next
/// commands, which takes the keeper's own exec off the spawn path of every
/// command but the first (0, the default, turns the pool off and lets idle
/// keepers exit). Idle keepers are children of this process that die with
/// it; no thread of ours runs for them. Takes effect from the next spawn
/// on; a child forked without `exec` keeps the setting and starts with no
/// keepers. Does nothing on Windows (no keepers).
///
/// Each command gets the owner's environment, working directory and stdio
/// as of its own spawn. What it inherits from the keeper process itself —
/// credentials, resource limits, niceness and, on Linux, umask,
/// capabilities, `no_new_privs`, seccomp, CPU affinity, root directory,
/// namespaces and cgroup — must still be what the owner has at that spawn,
/// or the warm keeper is let go and a fresh one started (an owner that
/// dropped root never has its next command run as root). Not checked: a
/// Landlock domain or LSM label the owner entered since, and the umask on
/// macOS; an owner that changes those between commands should keep the
/// pool off.
pub fn set_warm_keepers(n: usize) {
    contain::set_warm_keepers(n)
}

/// Does now what the first session with limits would do, before any
/// session starts (Linux; elsewhere it does nothing). Where cgroup v2 has
/// the `memory`, `pids` or `cpu` controller available to this process's
/// cgroup but not enabled for its children, it enables them — first moving
/// this process into a leaf of its own (`tether-owner`) if it is the only
/// process in its cgroup, as v2 allows controllers only for cgroups without
/// processes. Nothing else is ever moved. Programs that serve many
/// sessions (`tether mcp`) call it at start, while no keeper of theirs
/// exists yet; a one-shot program needs nothing.
pub fn prepare_limits() {
    contain::prepare_limits()
}

/// Makes this process a child subreaper (Linux; elsewhere it does nothing):
/// orphans of this process's descendants — for instance the tree of a
/// keeper that was `SIGKILL`ed — reparent to it instead of init, where
/// tether finds and kills them.
///
/// For programs that own their process and start processes **only through
/// tether** (the `tether` CLI and `tether mcp` do this): once a keeper is
/// lost, every child of this process that is not a keeper is treated as an
/// orphan of its tree and killed, tagged or not (a process that cleared its
/// environment has no tag). A library should not change this for its host
/// program unasked.
pub fn become_subreaper() -> std::io::Result<()> {
    contain::become_subreaper()
}
