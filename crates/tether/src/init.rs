//! PID 1 for containers: run one program, reap every zombie, pass signals
//! on, and leave nothing behind — what `tether init` runs.
//!
//! ```standalone_crate
//! # #[cfg(unix)]
//! fn main() -> Result<(), tether::Error> {
//!     use std::time::Duration;
//!     use tether::init::{InitOptions, run};
//!
//!     // First thing, before any thread starts (signals are blocked here).
//!     // The program leaves a daemon behind and exits 3.
//!     let script = "setsid sleep 1000 & exit 3".into();
//!     let options = InitOptions { grace: Duration::from_millis(500) };
//!     let report = run("sh".as_ref(), &["-c".into(), script], options)?;
//!     assert_eq!(report.exit_code, 3);
//!     assert_eq!(report.terminated + report.killed, 1); // the daemon
//!     assert!(report.survivors.is_empty());
//!     Ok(()) // a real init: std::process::exit(report.exit_code)
//! }
//! # #[cfg(not(unix))]
//! # fn main() {}
//! ```
//!
//! # How it works
//!
//! The program starts in a process group of its own (given the terminal's
//! foreground when init holds one). Init blocks the signals it handles and
//! takes them one at a time with `sigwait`:
//!
//! - `SIGCHLD`: reap every exited child with `waitpid(-1, WNOHANG)` — the
//!   program's, and every orphan reparented to init, double-forked daemons'
//!   included. As PID 1 every orphan of the container comes to init; else
//!   init makes itself a child subreaper (Linux) so the program's orphans
//!   come to it instead of the host's init.
//! - `SIGTERM`, `SIGINT`, `SIGHUP`, `SIGQUIT`, `SIGUSR1`, `SIGUSR2`,
//!   `SIGWINCH`: forwarded to the program's process group (while its leader
//!   is unreaped, so the group id cannot have been reused). A blocked
//!   signal reaches PID 1 even though it has no handler: the kernel drops
//!   only signals PID 1 would take the default action on.
//!
//! When the program exits, whatever is left of its tree (everything still
//! a descendant of init) gets `SIGTERM` (+ `SIGCONT`), then after the grace
//! `SIGKILL` — each process pinned and verified to be a descendant before
//! it is signalled — in rounds until nothing is left or a 5 s verification
//! window passes; survivors are reported. Init then returns the program's
//! exit code (`128 + N` if signal N killed it).
//!
//! Unix only: on Windows [`run`] returns `Error::Unsupported` (a job
//! object, not an init, holds a tree there). On macOS there is no
//! subreaper: orphans of the program that leave its tree go to `launchd`,
//! so init can only reap and kill what stays its descendant (as PID 1 of a
//! Linux container, everything does).

use std::ffi::{OsStr, OsString};
use std::time::Duration;

use crate::contain::Descendant;
use crate::error::Result;

/// How `tether init` runs its program.
#[derive(Clone, Debug)]
pub struct InitOptions {
    /// Time between `SIGTERM` and `SIGKILL` for what the program left
    /// behind (default [`crate::DEFAULT_GRACE`]).
    pub grace: Duration,
}

impl Default for InitOptions {
    fn default() -> Self {
        InitOptions {
            grace: crate::DEFAULT_GRACE,
        }
    }
}

/// How the program ended, and what init did about the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitReport {
    /// The program's exit code, or `None` when a signal killed it.
    pub code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    /// What init exits with: the code, or `128 + signal`.
    pub exit_code: i32,
    /// Whether init ran as PID 1 (else it was a child subreaper, where the
    /// platform has them).
    pub pid1: bool,
    /// Whether orphans of the program came to init (PID 1, or a
    /// subreaper).
    pub adopts_orphans: bool,
    /// Signals forwarded to the program's group.
    pub forwarded: usize,
    /// Children reaped (the program, its orphans, zombies of daemons).
    pub reaped: usize,
    /// Processes left when the program exited that died on `SIGTERM`.
    pub terminated: usize,
    /// Processes that needed `SIGKILL`.
    pub killed: usize,
    /// Processes still alive at the end (uninterruptible sleep…).
    pub survivors: Vec<Descendant>,
}

/// Runs `program` with `args` as init (see the module docs) and returns
/// once it exited and its leftovers are dead. Call it before any thread
/// starts: the handled signals are blocked in the calling thread, and
/// threads started earlier would still take them.
///
/// # Errors
/// [`Error::ProgramNotFound`](crate::Error::ProgramNotFound) /
/// [`Error::NotExecutable`](crate::Error::NotExecutable) when the program
/// cannot be started; [`Error::Unsupported`](crate::Error::Unsupported) on
/// Windows; [`Error::Io`](crate::Error::Io) when signals cannot be set up.
/// The program's own failure is its exit code in the report, not an error.
pub fn run(program: &OsStr, args: &[OsString], options: InitOptions) -> Result<InitReport> {
    crate::contain::init::run(program, args, options.grace)
}
