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
//! # How it works
//!
//! The owner never forks (a fork costs ~17 ms at 1 GiB of owner memory and
//! ~87 ms at 4 GiB). It starts a small single-threaded *keeper* with
//! `posix_spawn`, handing it one end of a Unix socket as stdin: the control
//! channel and the *lifeline*. The keeper is a child subreaper, so every
//! process of the command — `setsid`, double-fork and daemonizing escapes
//! included — stays its descendant. It forks the command into its own
//! process group, reaps everything, reports the exit, and kills the whole
//! tree when asked, at the timeout, or the moment the lifeline reads EOF
//! because the owner is gone, by whatever cause. With
//! [`ContainmentPolicy::PidNamespace`] the command runs under a pid-1 init
//! that the kernel kills together with the keeper, so even a `SIGKILL`ed
//! keeper takes the tree with it.
//!
//! Processes are named by [`ProcessIdentity`] (boot id, pid, start time,
//! pidfs inode) and signalled through pidfds, never by a bare pid. Every
//! process carries a [`SpawnTag`] in `TETHER_SPAWN`, naming its owner and
//! session, so leftovers can be proven to be tether's.
//!
//! # Finding the keeper
//!
//! `$TETHER_KEEPER`, else this program if it called
//! [`keeper::run_if_requested`], else `tether-keeper` beside this program or
//! on `PATH`. The `tether` CLI is its own keeper.

#![warn(missing_docs)]

mod child;
mod command;
mod contain;
mod error;
mod identity;
mod install;
pub mod output;
mod pool;
mod registry;
mod run_spec;
mod session;
mod session_id;
mod spawn_tag;
#[cfg(unix)]
pub mod unix;

pub use child::{Child, ChildHandle, ChildStderr, ChildStdin, ChildStdout, ExitStatus, Output};
pub use command::{Command, Containment, ContainmentPolicy, DEFAULT_GRACE, Stdio};
pub use error::{Error, Result, Survivor, TagError};
pub use identity::ProcessIdentity;
pub use install::Install;
pub use pool::set_warm_keepers;
pub use registry::{
    DEFAULT_FINISHED_TTL, DEFAULT_MAX_FINISHED, DEFAULT_MAX_LIVE, MIN_ID_PREFIX, ReadResult,
    Registry, RegistryConfig, RunOutcome, SessionObserver, WaitOptions, WaitOutcome, WaitResult,
    YIELD_OUTPUT_BYTES,
};
pub use run_spec::{CommandLine, OutputMode, RunSpec, SHELL, StdinMode};
pub use session::pattern::MAX_MATCH_LEN;
pub use session::{
    DEFAULT_STDIN_QUEUE_LIMIT, Descendant, KillOutcome, KillReason, QueuedWrite, SessionInfo,
    SessionState, Stream,
};
pub use session_id::SessionId;
pub use spawn_tag::{SPAWN_TAG_VAR, SpawnTag};

/// The keeper: run it, or let this program be one.
pub mod keeper {
    pub use crate::contain::keeper::{KEEPER_ARG, main, run_if_requested};
}

/// Becomes a child subreaper: orphans of this process's descendants (for
/// instance the tree of a keeper that was `SIGKILL`ed) reparent to it
/// instead of init, where [`Child`] finds and kills them. For programs that
/// own their process (the `tether` CLI does this); a library should not
/// change this for its host program unasked.
pub fn become_subreaper() -> std::io::Result<()> {
    contain::set_child_subreaper()
}

/// Process-table helpers shared by the front-ends (`ps`, `reap`, tests).
pub mod procs {
    pub use crate::contain::{
        PinnedProcess, Stat, all_pids, children_of, command_line, read_stat, signal_if_identity,
        spawn_tag_of,
    };
}
