//! How a process tree is held: the platform seam.
//!
//! Everything that knows the operating system lives below this module; the
//! rest of the crate calls what is re-exported here, whose signatures are
//! the same on every platform (the pattern of nextest's
//! `runner/{unix,windows}.rs` and ripgrep's `imp` modules):
//!
//! - [`spawn`] starts a [`SpawnPlan`] and returns a [`Tree`]: the running,
//!   contained command. A `Tree` reports [`TreeEvent`]s (main exited,
//!   settled, kill failed), starts kills, lists descendants, and hands the
//!   async runtime a [`TreeWatcher`]. A [`TreeHandle`] starts kills from
//!   other threads.
//! - [`sys`] is the process table (public as `tether::sys`).
//! - Pipes for the registry: [`output_pipe`], [`input_pipe`], and their
//!   reactor-registered ends [`AsyncReader`] / [`AsyncWriter`].
//! - Terminals: [`Pty`] (the owner's end of a session's PTY, which
//!   [`spawn`] opens when the plan asks for one), [`Console`] (this
//!   process's own terminal: raw mode, size, pass-through) and
//!   [`WinchWatcher`] (its window-size changes).
//!
//! Backends: `unix/` — the keeper (client and program), shared by Linux and
//! macOS; `linux/` — pidfds, `/proc`, subreaper, PID namespaces, signalfd;
//! `macos/` — `sysctl`, kqueue, process group + tag; `windows/` — job
//! objects (no keeper).

pub mod entry;
mod event;
pub(crate) mod ext;
mod plan;
pub(crate) mod shell;
pub mod sys;

#[cfg(target_os = "linux")]
#[path = "linux/mod.rs"]
mod os;
#[cfg(target_os = "macos")]
#[path = "macos/mod.rs"]
mod os;
#[cfg(windows)]
#[path = "windows/mod.rs"]
mod os;

#[cfg(unix)]
mod unix;

// The platform-free parts of the macOS backend — decoding the kernel's
// sysctl records, and who belongs to a tree — are compiled everywhere for
// tests, so that their tests run on Linux too.
#[cfg(any(target_os = "macos", test))]
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
#[path = "macos/records.rs"]
mod macos_records;
#[cfg(any(target_os = "macos", test))]
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
#[path = "macos/tree.rs"]
mod macos_tree;
#[cfg(windows)]
use os as imp;
#[cfg(unix)]
use unix as imp;

pub use event::Descendant;
pub(crate) use event::{Termination, TreeEvent};
pub(crate) use imp::init;
pub(crate) use imp::spill;
pub(crate) use imp::{
    AsyncReader, AsyncWriter, EventSource, Forwarder, OwnedIo, PipeEnd, Tree, TreeHandle,
    TreeWatcher, become_subreaper, duplicate_descriptor, output_pipe, owner_identity,
    platform_state_dir, read_both, set_keeper_program, set_warm_keepers, spawn, start_keeper_ahead,
};
pub(crate) use imp::{Console, Doorbell, Pty, WinchWatcher};
pub(crate) use plan::{ChildIo, ChildSetup, KeeperHook, Ladder, SpawnPlan};

/// Runs a spawn whose child the calling thread waits for at once and never
/// hands out, so that no thread of ours need guard its keeper meanwhile
/// (Unix; elsewhere there is no keeper to guard).
#[cfg(unix)]
pub(crate) use unix::attended;
#[cfg(windows)]
pub(crate) fn attended<T>(spawn: impl FnOnce() -> T) -> T {
    spawn()
}

/// `tether doctor`'s probes of this platform (see [`crate::doctor`]).
pub(crate) use os::doctor;
pub(crate) use os::random_bytes;

/// Readies the cgroup controllers for sessions' limits (Linux; see
/// [`crate::prepare_limits`]).
pub(crate) fn prepare_limits() {
    #[cfg(target_os = "linux")]
    {
        let all = crate::limits::Limits::new().memory(1).pids(1).cpu(1.0);
        let _ = os::limit_spec(&all);
    }
}

/// The holder's doorway for durable sessions: a private local socket
/// whose connections are judged by the uid the kernel reports, a lock so
/// one holder runs per state directory, and detaching from the requester
/// (Unix; on Windows every entry point fails with `Unsupported`).
pub mod local_socket {
    pub use super::imp::local_socket::*;
}

/// The keeper program (Unix); on Windows there is none and these do nothing.
pub mod keeper {
    pub use super::imp::keeper_entry::{KEEPER_ARG, main, run_if_requested};
}

/// What a spawn gives back: the tree, and the owner's ends of piped stdio.
#[derive(Debug)]
pub(crate) struct Spawned {
    pub tree: Tree,
    pub stdin: Option<std::fs::File>,
    pub stdout: Option<std::fs::File>,
    pub stderr: Option<std::fs::File>,
    /// The master of the command's PTY, when the plan asked for one.
    pub pty: Option<Pty>,
}

/// `tether::withhold_environment` (see `withheld.rs`): Unix overwrites
/// through libc's `environ`, Windows through the PEB.
pub(crate) use imp::environment::withhold as withhold_environment;

/// How a program is searched for and checked before spawning.
pub(crate) use imp::resolve;

/// A held handle on a watchdog's owner: a pidfd (Linux), a kqueue
/// `NOTE_EXIT` filter (macOS), a process handle (Windows).
pub(crate) use os::watchdog::OwnerHandle;

/// Pins the process `expected` names for a watchdog: `Ok(None)` if it is
/// gone (exited, or its pid names another process now).
pub(crate) fn watch_owner(
    expected: &crate::identity::ProcessIdentity,
) -> std::io::Result<Option<OwnerHandle>> {
    OwnerHandle::open(expected)
}
