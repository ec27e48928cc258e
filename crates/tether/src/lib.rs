//! Run commands so that every process they start is positively identified
//! and dead when its owner is done with it — however the owner ends: exit,
//! panic, `SIGKILL`, OOM kill, crash.
//!
//! Agent frameworks, test runners and dev servers leak processes: a shell
//! that `setsid`s a server, a daemon that double-forks, a grandchild that
//! holds the pipe open, a tool killed with `SIGKILL` before its cleanup
//! ran. tether makes "everything dies with its owner" a property of the one
//! place every process is born, enforced by the kernel, and proves every
//! process it signals to be the one it means.
//!
//! # Quick start
//!
//! ```standalone_crate
//! use std::time::Duration;
//!
//! # #[cfg(unix)]
//! fn main() -> Result<(), tether::Error> {
//!     // First thing in main: lets this program be its own keeper (below).
//!     tether::keeper::run_if_requested();
//!
//!     // `sh` starts a setsid'd escape and exits; `output` returns once the
//!     // escape is dead too (the main process's leftovers are killed).
//!     let output = tether::Command::new("sh")
//!         .args(["-c", "setsid sleep 1000 & echo started"])
//!         .timeout(Duration::from_secs(10))
//!         .output()?;
//!     assert_eq!(output.stdout, b"started\n");
//!     assert!(output.status.success());
//!     assert!(output.status.descendants_killed() >= 1);
//!
//!     // A long-running command: `kill` returns only once nothing of its
//!     // tree is left (or says which processes survived).
//!     let mut server = tether::Command::new("sleep")
//!         .arg("1000")
//!         .purpose("dev-server")
//!         .grace(Duration::from_millis(500))
//!         .spawn()?;
//!     println!("pid {} held by {}", server.id(), server.containment());
//!     server.kill()?;
//! #   #[cfg(target_os = "linux")]
//! #   tether_testkit::assert_nothing_left();
//!     Ok(())
//! }
//! # #[cfg(not(unix))]
//! # fn main() {}
//! ```
//!
//! Two levels of API:
//!
//! - **One command at a time**, mirroring `std::process`: [`Command`] (a
//!   builder with `spawn`, `status`, `output`, plus [`purpose`],
//!   [`grace`], [`timeout`], [`containment`], [`limits`], [`pty`]),
//!   [`Child`] (`wait`, `kill`, `descendants`, piped stdio), [`ExitStatus`],
//!   [`Output`]. Blocking; no runtime needed.
//! - **Many sessions in the background**: [`registry::Registry`] (tokio),
//!   what `tether mcp` is built on — output kept losslessly with absolute
//!   offsets ([`output`]), waits for a line or a prompt, stdin queues,
//!   terminal screens ([`terminal`]), retention limits.
//!
//! Around them: [`sys`], the process table tether itself reads (identity,
//! spawn tag, pins that signal one process or nobody); [`watchdog`], for
//! helpers started some other way that must still die with their owner;
//! [`init`], PID 1 for containers; [`doctor`], what this machine offers;
//! and per platform, [`unix`](crate#platform-modules) (signals, raw
//! descriptors) and `windows` (attaching a process to a job).
//!
//! # Vocabulary
//!
//! - **owner** — the process that asked for the spawn: your program. Its
//!   sessions die with it.
//! - **session** — one command and every process it ever creates, named by
//!   a [`SessionId`] (never a pid).
//! - **main process** — the command itself; [`Child::id`]. Its exit
//!   finishes the command; **descendants** ([`Descendant`]) it left are
//!   killed at once by default, or kept running, still contained, with
//!   [`Command::keep_descendants`].
//! - **tree** — the main process and all its descendants, including those
//!   that `setsid`, double-fork or daemonize.
//! - **containment** — what holds a tree ([`Containment`]): a keeper that
//!   is the tree's subreaper, a PID namespace, a process group plus spawn
//!   tags (macOS), or a job object (Windows). Asked for with a
//!   [`ContainmentPolicy`], always reported, never silently weaker.
//! - **keeper** — a small single-threaded process between owner and command
//!   on Unix ([`keeper`]). It does all per-child setup, reaps the tree, and
//!   kills it when told or when the owner is gone.
//! - **lifeline** — the socket between owner and keeper; only the owner
//!   holds its other end, so end of file on it means the owner died, by any
//!   cause.
//! - **kill ladder** and **grace** — how a tree is killed: a polite signal
//!   to every process, then after the grace ([`DEFAULT_GRACE`], 2 s) the
//!   forced end, repeated until nothing is left.
//! - **settled** — the main process exited, the tree is empty and the output
//!   reached end of file: nothing of the session holds a process or a
//!   descriptor.
//! - **identity** — [`ProcessIdentity`]: boot id, pid, start time and, where
//!   the kernel has pidfs, the pidfd's inode. Never a bare pid.
//! - **spawn tag** — [`SpawnTag`], the environment variable
//!   [`TETHER_SPAWN`](SPAWN_TAG_VAR) every process of a session inherits:
//!   install, purpose, owner pid and start time, session.
//! - **install** — [`Install`]: a state directory (`$TETHER_HOME`, …) and
//!   the id derived from it; tags of two installs never claim each other's
//!   processes.
//! - **ledger** — the machine-wide SQLite record of owners and sessions, in
//!   the install's state directory ([`process-tether-ledger`]); read by
//!   `tether ps` and `tether reap`.
//!
//! # How it works
//!
//! ## Contained from the first instruction
//!
//! **Linux.** The owner never forks (a fork costs ~17 ms at 1 GiB of owner
//! memory and ~87 ms at 4 GiB; measured). It starts a keeper with
//! `posix_spawn` — in a process group of its own, so a signal aimed at the
//! owner's group never takes both down — handing it one end of a Unix
//! socket as stdin: the control channel and the lifeline. The keeper makes
//! itself a child subreaper (`PR_SET_CHILD_SUBREAPER`) and non-dumpable,
//! then starts the command (`posix_spawn`; fork and exec where the command
//! must enter its cgroup leaves or take a controlling terminal first) in a
//! process group of its own with a clean signal state, its cgroup leaves
//! entered *before* its first instruction. From then on, everything it
//! forks is the keeper's descendant, and a process that `setsid`s or
//! double-forks reparents to the keeper, not to init. Every process
//! inherits the spawn tag. With [`ContainmentPolicy::PidNamespace`] (or
//! [`Auto`](ContainmentPolicy::Auto) where the kernel allows) the command
//! runs under a pid-1 init in a PID namespace of its own, which the kernel
//! kills whole when the keeper dies.
//!
//! **macOS.** The same keeper, without a subreaper: the tree is every
//! process whose parent chain leads to the keeper, every process in the
//! command's group or session, and every process whose spawn tag names the
//! session (read with `sysctl kern.procargs2`). Reported as
//! [`Containment::ProcessGroupAndTag`].
//!
//! **Windows.** No keeper: each session is a job object with
//! `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE` and no breakaway, and tether's own
//! `CreateProcessW` creates the command *inside* it
//! (`PROC_THREAD_ATTRIBUTE_JOB_LIST`, or created suspended, assigned, then
//! resumed). Only the owner holds the job's handle.
//!
//! ## The kill ladder
//!
//! [`Child::kill`], a timeout, the owner's death and the main process's
//! exit (for leftovers) all climb the same two-rung ladder. The gentle
//! rung — `SIGTERM` with `SIGCONT`, so stopped processes act on it; on a
//! PTY `SIGHUP` and `SIGTERM` together; on Windows `CTRL_BREAK_EVENT`, or a
//! pseudoconsole's close — goes to every process of the tree at once,
//! including processes forked during the grace. Whatever is still alive
//! when the grace ends (an upper bound, never a wait: the kill ends the
//! moment the tree is empty) gets the forced rung: `SIGKILL` rounds until
//! the keeper has no child left (`ECHILD`) — a process forked during the
//! kill is reparented to the keeper and killed in the next round (a
//! fork-looping tree empties in ~20 ms, measured). Where the session has a
//! cgroup v2 leaf of its own, `cgroup.kill` is the `SIGKILL` rung; on
//! Windows it is `TerminateJobObject`, verified by the job's accounting.
//! Every signal goes through a pidfd opened and verified as a tree member
//! first, so a recycled pid is never hit. `kill` reports success only once
//! the tree is verified empty; otherwise [`Error::KillIncomplete`] names the
//! survivors (a process in uninterruptible sleep, after a 5 s window) and
//! the child stays killable.
//!
//! ## When the owner dies
//!
//! No destructor, `atexit` handler or polling watchdog is on this path.
//! When the owner dies — however — the kernel closes its end of every
//! lifeline; each keeper sees end of file, kills its tree with the ladder
//! and exits (measured: a 103-process tree of setsid and double-fork escapes
//! all dead ~6–9 ms after the owner's `SIGKILL`). On Windows the kernel
//! closes the owner's job handles and kills every job's processes itself.
//! If a *keeper* is `SIGKILL`ed: under a PID namespace the kernel kills the
//! namespace; otherwise its orphans reparent to the nearest subreaper — an
//! owner that called [`become_subreaper`] (the `tether` CLI and `tether mcp`
//! do) kills them all, tagged or not; a library owner that is not a
//! subreaper kills them by spawn tag when it next talks to the child
//! ([`Error::KeeperLost`]). Every wait follows the keeper while it waits —
//! reading the output pipes ([`Child::wait_with_output`]) or a terminal
//! ([`Passthrough::attach_child`](terminal::Passthrough::attach_child)) —
//! so the loss is seen at once, also while orphans hold those open; a host
//! with an event loop of its own polls `tether::unix::ChildEventsExt`'s
//! descriptor beside its pipes. Dropping a [`Child`] cuts its lifeline the
//! same way.
//!
//! ## Identity, the ledger and reap's proofs
//!
//! A pid is recycled as soon as its process is reaped, and start time alone
//! does not fix that: it has 10 ms resolution and collided in 295 of 300
//! forced immediate pid reuses here, while the pidfs inode never did. So a
//! process is named by a held handle (pidfd, Windows process handle) while
//! tether holds one, and on disk by its full [`ProcessIdentity`]. Every
//! process carries a spawn tag naming its owner, so it can be proven to be
//! tether's — and proven orphaned — from the process table alone.
//!
//! That is what `tether ps` and `tether reap` ([`process-tether-ledger`])
//! rest on. The ledger records owners and sessions (SQLite in WAL mode;
//! crash-safe; a corrupt store is quarantined and rebuilt from live tags,
//! never treated as empty; trusted only when owned by this user and not
//! writable by others). `reap` signals a process only if it carries this
//! install's tag and this user's real uid, its owner is **provably dead**
//! (no process of this boot has the owner's pid and start time any more),
//! its purpose is not interactive — and then only through a pidfd opened
//! immediately before the signal, with identity and tag re-read through
//! it. Anything it cannot prove is listed, never signalled.
//!
//! # Guarantees and their limits
//!
//! Each guarantee has tests that try to break it with real process trees.
//! In short, per platform (the README's *Guarantees* table has the detail):
//!
//! | | Linux `subreaper` (default) | Linux `pidns` | macOS `pgroup+tag` | Windows `job` |
//! |---|---|---|---|---|
//! | every descendant contained from its first instruction | yes | yes | except an orphan that left the group *and* session *and* cleared its environment | yes |
//! | tree dies with the owner, any cause | yes | yes | yes | yes (kernel, no grace) |
//! | … and with the keeper `SIGKILL`ed | subreaper owner: yes; library owner: tagged processes | yes (kernel) | tagged processes | no keeper |
//! | verified kill, survivors reported | yes | yes | yes | yes |
//! | never signals a recycled pid | yes (pidfds) | yes | pid + start re-checked right before `kill(2)`: a window of µs | yes (handles) |
//! | pipes closed at EOF, every child reaped | yes | yes | yes | yes |
//! | memory / process / CPU [`Limits`] | cgroup v2 or v1 leaf, where delegated | yes | `none`, with the reason | job limits |
//! | tested | in CI | in CI | type-checked only | under Wine |
//!
//! What no containment stops: a command of the same uid that kills both its
//! keeper *and* its owner leaves a tree under init (still tagged: `tether
//! reap` proves and kills it, unless it also cleared its environment); a
//! command can ask something outside its tree to start processes for it
//! (`systemd-run`, `at`, an `ssh localhost`). A PID namespace closes the
//! first (the command cannot see keeper or owner), not the second.
//!
//! # Finding the keeper
//!
//! In order: `$TETHER_KEEPER`; the program set with [`keeper::set_program`]
//! (the Python package sets the keeper it bundles); a `tether-keeper`
//! binary beside this program (a small program starts several times faster
//! than a large one that is its own keeper); this program, if it called
//! [`keeper::run_if_requested`] first thing in `main`; `tether-keeper` one
//! directory up (where cargo puts test binaries); `tether-keeper` on
//! `PATH`. The `tether` CLI is its own keeper, and so can be any program's
//! (`TETHER_KEEPER=$(command -v tether)`). Keeper and library must be the
//! same build: a discovered keeper program of another build exits at once,
//! before reading anything, and the next one in the order is used instead;
//! one named by `$TETHER_KEEPER` or [`keeper::set_program`] fails the spawn
//! with [`Error::Keeper`], saying so. None found: every spawn fails with
//! [`Error::KeeperNotFound`], naming each place looked at.
//!
//! # Fork
//!
//! An owner that forks without `exec` (Python's `multiprocessing`, a
//! pre-fork server) is safe: a `pthread_atfork` handler points the child's
//! copies of the keeper sockets at `/dev/null`, so the parent's trees still
//! die with the parent; handles the child inherited fail with
//! [`Error::InheritedAcrossFork`]; the child's own commands are its own.
//!
//! # Errors
//!
//! Every fallible call returns [`Error`], whose variants say what a user
//! can act on: [`ProgramNotFound`](Error::ProgramNotFound) (with the `PATH`
//! searched), [`NotExecutable`](Error::NotExecutable),
//! [`BadCwd`](Error::BadCwd), [`InvalidInput`](Error::InvalidInput) (a
//! purpose, limit or size out of range) at spawn;
//! [`ContainmentUnavailable`](Error::ContainmentUnavailable) when a PID
//! namespace was demanded and cannot be had;
//! [`KeeperNotFound`](Error::KeeperNotFound) and [`Keeper`](Error::Keeper)
//! when no keeper can be started; [`KillIncomplete`](Error::KillIncomplete)
//! and [`KeeperLost`](Error::KeeperLost) afterwards; the registry's own
//! ([`UnknownSession`](Error::UnknownSession),
//! [`TooManySessions`](Error::TooManySessions), …).
//!
//! # Platform modules
//!
//! `tether::unix` exists on Unix only: [`ChildExt`] (signal the tree or the
//! group), [`CommandExt`] (`new_session`, the ladder's signals),
//! [`ExitStatusExt`] (the killing signal), `Stdio::from(OwnedFd)` and
//! `AsFd` on the stdio handles. `tether::windows` exists on Windows only:
//! attaching a long-lived process to a kill-on-close job of its own.
//!
//! [`purpose`]: Command::purpose
//! [`grace`]: Command::grace
//! [`timeout`]: Command::timeout
//! [`containment`]: Command::containment
//! [`limits`]: Command::limits
//! [`pty`]: Command::pty
//! [`process-tether-ledger`]: https://docs.rs/process-tether-ledger
#![cfg_attr(
    unix,
    doc = "[`ChildExt`]: crate::unix::ChildExt\n\n[`CommandExt`]: crate::unix::CommandExt\n\n[`ExitStatusExt`]: crate::unix::ExitStatusExt"
)]
#![cfg_attr(
    not(unix),
    doc = "[`ChildExt`]: https://docs.rs/process-tether/latest/tether/unix/trait.ChildExt.html\n\n[`CommandExt`]: https://docs.rs/process-tether/latest/tether/unix/trait.CommandExt.html\n\n[`ExitStatusExt`]: https://docs.rs/process-tether/latest/tether/unix/trait.ExitStatusExt.html"
)]
#![warn(missing_docs)]

/// The crate README's example, run as a doctest: what crates.io shows runs
/// as written, in a program that neither installed a keeper nor calls
/// `run_if_requested()` (the doctest binary is its own keeper; see
/// [`keeper`]).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

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
pub use contain::local_socket;
pub use contain::sys;
pub use containment::{Containment, ContainmentPolicy};
pub use error::{Error, Result, Survivor, TagError, WithholdError};
pub use exit::{Captured, ExitStatus, Output, ResourceUsage};
pub use forward::{SignalForwarder, absorb_parent_signals};
pub use identity::ProcessIdentity;
pub use install::Install;
pub use limits::{
    Enforcement, LimitEscape, LimitHit, LimitReport, Limits, MIN_CPU, format_size, parse_size,
};
pub use session_id::SessionId;
pub use spawn_tag::{SPAWN_TAG_VAR, SpawnTag};
pub use stdio::{ChildStderr, ChildStdin, ChildStdout, OsStdio, Stdio};
pub use withheld::{NEEDED as NEEDED_ENVIRONMENT, Withheld, withhold_environment};

/// Embedded entry points for tether's own crates ([`embedded_entry!`]);
/// not a stable API.
#[doc(hidden)]
pub mod __embedded {
    pub use crate::contain::entry::*;
}

/// The keeper: run it, or let this program be one. (On Windows there is no
/// keeper: [`run_if_requested`](keeper::run_if_requested) returns at once.)
pub mod keeper {
    pub use crate::contain::keeper::{KEEPER_ARG, main, run_if_requested};

    /// Uses `program` — a `tether` or `tether-keeper` executable of this
    /// library's build — as the keeper from the next spawn on, ahead of
    /// discovery (`$TETHER_KEEPER` still wins); `None` goes back to
    /// discovery. For hosts that cannot be their own keeper and ship one
    /// beside them: the Python package sets its bundled keeper so. A
    /// program that is not a file fails each spawn with
    /// [`Error::KeeperNotFound`](crate::Error::KeeperNotFound). Does
    /// nothing on Windows (no keeper). Never fails itself: the path is
    /// checked at each spawn.
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
///
/// ```standalone_crate
/// # #[cfg(unix)]
/// # fn main() -> tether::Result<()> {
/// # tether::keeper::run_if_requested();
/// tether::set_warm_keepers(2); // from the next spawn on
/// let first = tether::Command::new("echo").arg("hi").output()?; // a keeper started for it
/// let second = tether::Command::new("echo").arg("hi").output()?; // the first one's keeper, recycled
/// assert_eq!((first.stdout, second.stdout), (b"hi\n".to_vec(), b"hi\n".to_vec()));
/// tether::set_warm_keepers(0); // idle keepers exit
/// # #[cfg(target_os = "linux")]
/// # {
/// #     // Every command is gone (what is left, if anything, is keepers
/// #     // on their way out).
/// #     let left = tether_testkit::spawned_by_this_process();
/// #     let keeper = |pid: &u32| tether::sys::spawn_tag(*pid).is_some_and(|t| t.purpose == "keeper");
/// #     assert!(left.iter().all(keeper), "commands outlived the example: {left:?}");
/// # }
/// # Ok(())
/// # }
/// # #[cfg(not(unix))]
/// # fn main() {}
/// ```
pub fn set_warm_keepers(n: usize) {
    contain::set_warm_keepers(n)
}

/// Starts the keeper of this process's next spawn now, so that its start
/// (an exec: ~1–2 ms here) runs while the program does whatever comes
/// before that spawn — parsing arguments, opening files — instead of
/// after. `tether run` calls it first thing. The keeper waits, idle, and
/// the next spawn takes it whatever [`set_warm_keepers`] says (if the
/// credentials, limits and the rest it would pass on are still the owner's
/// — see [`set_warm_keepers`] — else it is let go and a fresh one
/// started). If no spawn comes, it exits with this process (its
/// lifeline's EOF), or at `set_warm_keepers(0)`. A program that sets
/// limits calls [`prepare_limits`] first: a keeper waiting in its cgroup
/// would keep it from moving into a leaf of its own. Does nothing on
/// Windows (no keepers).
///
/// Its spawn tag names the install of the environment
/// ([`Install::from_env`]) and `session`: give the next command the same
/// ([`Command::session_id`]), and keeper and command are one session in
/// `tether ps`, as when the spawn starts its keeper itself. A keeper
/// already waiting (started ahead, or warm from an earlier session) makes
/// this do nothing: that one serves, tagged as it was.
///
/// ```standalone_crate
/// # #[cfg(unix)]
/// # fn main() -> tether::Result<()> {
/// # tether::keeper::run_if_requested();
/// let session = tether::SessionId::generate();
/// tether::start_keeper_ahead(&session)?; // starts while the program goes on
/// let args: Vec<String> = std::env::args().collect(); // ...
/// let out = tether::Command::new("echo")
///     .arg("hi")
///     .session_id(session)
///     .output()?; // takes that keeper
/// assert_eq!(out.stdout, b"hi\n");
/// # Ok(())
/// # }
/// # #[cfg(not(unix))]
/// # fn main() {}
/// ```
pub fn start_keeper_ahead(session: &SessionId) -> Result<()> {
    contain::start_keeper_ahead(&Install::from_env(), session)
}

/// Does now what the first session with limits would do, before any
/// session starts (Linux; elsewhere it does nothing). Where cgroup v2 has
/// the `memory`, `pids` or `cpu` controller available to this process's
/// cgroup but not enabled for its children, it enables them — first moving
/// this process into a leaf of its own (`tether-owner`) if it is the only
/// process in its cgroup, as v2 allows controllers only for cgroups without
/// processes. Nothing else is ever moved. Programs that serve many
/// sessions (`tether mcp`) call it at start, while no keeper of theirs
/// exists yet; a one-shot program needs nothing, unless it starts a keeper
/// ahead ([`start_keeper_ahead`]): then it calls this first. Never fails: what cannot
/// be prepared is what each session's
/// [`LimitReport`] later reports as `none`, with the reason.
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
///
/// # Errors
/// What `prctl(PR_SET_CHILD_SUBREAPER)` says (it does not fail on Linux
/// 3.4 and later). Elsewhere `Ok(())`.
pub fn become_subreaper() -> std::io::Result<()> {
    contain::become_subreaper()
}
