//! Who spawned what: tether's machine-wide ledger, the spawn-tag scan, and
//! the proof-based reaper behind `tether ps` and `tether reap`.
//!
//! Every process [`tether`] starts carries a spawn tag naming its install,
//! purpose, owner and session. This crate turns those tags — and a small
//! SQLite record of owners and sessions — into answers: *whose is this
//! process?* ([`Census`], `tether ps`), *is its owner provably dead?*
//! ([`proof`]), and *kill what is provably orphaned, and nothing else*
//! ([`reap_install`], `tether reap`). Linux is where all of it is tested;
//! the same code builds on macOS and Windows.
//!
//! # Quick start
//!
//! Record an owner and its session (what `tether run` writes, on Unix, to
//! a [`RunJournal`] that the next open of the store folds in):
//!
//! ```standalone_crate
//! # #[cfg(unix)]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tether::keeper::run_if_requested();
//! use tether_ledger::{Ledger, Outcome, OwnerRecord, SessionStart};
//!
//! # let dir = tempfile::tempdir()?;
//! // `Install::from_env()` in a real program ($TETHER_HOME, …).
//! let install = tether::Install::at(dir.path());
//! let mut ledger = Ledger::open(&install)?; // created 0700/0600; a corrupt one is quarantined
//! let owner = ledger.register_owner(&OwnerRecord::current(&install, "run")?)?;
//!
//! let mut child = tether::Command::new("echo").arg("built").install(install.clone()).spawn()?;
//! ledger.record_session_start(owner, &SessionStart::of_child(&child, "run", &["echo".into()]))?;
//! let status = child.wait()?;
//! ledger.record_session_end(child.session_id(), Outcome::of_status(&status))?;
//! ledger.record_owner_end(owner)?;
//!
//! let sessions = ledger.sessions()?;
//! assert_eq!(sessions.len(), 1);
//! assert_eq!(sessions[0].id, child.session_id().as_str());
//! # #[cfg(target_os = "linux")]
//! # tether_testkit::assert_nothing_left();
//! # Ok(())
//! # }
//! # #[cfg(not(unix))]
//! # fn main() {}
//! ```
//!
//! Reap the orphans of an owner that died — and leave alone what is not
//! provably orphaned:
//!
//! ```
//! # #[cfg(target_os = "linux")] {
//! use std::process::Command;
//! use tether::{Install, ProcessIdentity, SPAWN_TAG_VAR, SpawnTag};
//! use tether_ledger::{ReapOptions, SkipReason, TargetOutcome, reap_install};
//!
//! # let dir = tempfile::tempdir()?;
//! let install = Install::at(dir.path());
//! // Stands in for an owner that is about to die…
//! let mut owner = Command::new("sleep").arg("1000").spawn()?;
//! let dead = ProcessIdentity::of_pid(owner.id())?;
//! // …leaving a process behind that names it in its tag.
//! let tag = SpawnTag::new(install.id(), "worker", dead.pid, dead.start_time, "s1")?;
//! let mut orphan = Command::new("sleep").arg("1000").env(SPAWN_TAG_VAR, tag.to_string()).spawn()?;
//! // Another tagged process, whose owner (this process) is alive.
//! let me = ProcessIdentity::current()?;
//! let tag = SpawnTag::new(install.id(), "worker", me.pid, me.start_time, "s2")?;
//! let mut kept = Command::new("sleep").arg("1000").env(SPAWN_TAG_VAR, tag.to_string()).spawn()?;
//! owner.kill()?;
//! owner.wait()?;
//!
//! let reaped = reap_install(&install, &ReapOptions::default());
//! let report = reaped.report;
//! assert_eq!(report.targets.len(), 1);
//! assert_eq!(report.targets[0].pid, orphan.id());
//! assert_eq!(report.targets[0].outcome, TargetOutcome::Terminated);
//! assert!(report.skipped.iter().any(|s| s.pid == kept.id() && s.reason == SkipReason::OwnerAlive));
//! orphan.wait()?; // our child: its zombie is ours to collect
//! # kept.kill()?;
//! # kept.wait()?;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How it works
//!
//! Every process tether starts carries a spawn tag (`TETHER_SPAWN`) naming
//! its install, purpose, owner (pid and start time) and session; every
//! descendant inherits it. Two sources of truth follow:
//!
//! - **The ledger** ([`Ledger`]): one SQLite file per install
//!   (`<state dir>/ledger.db`, directory 0700, file 0600), in WAL mode, that
//!   owners write when they start and sessions write when they start and
//!   end. It holds what the process table cannot: full owner identities
//!   (with pidfs inodes), commands, working directories, exit statuses.
//!   Many processes write it at once; a process killed at any point
//!   leaves it consistent; a damaged store (a power loss) is quarantined,
//!   never treated as empty;
//!   a state directory another user could write is refused (see [`Ledger`]
//!   for the details).
//! - **The tag scan** ([`Scan`]): the tagged processes alive now, read from
//!   `/proc/<pid>/environ`. It finds what the ledger never saw and is what a
//!   quarantined ledger is rebuilt from.
//!
//! [`Census`] joins the two for `tether ps`. The ledger is attacker-shaped
//! input: it adds detail (recorded pidfs inodes, purposes, commands), but
//! never outweighs the live process table, and the tags alone are enough to
//! prove an orphan.
//!
//! # Reap's proofs
//!
//! [`reap`] (and [`reap_install`], what `tether reap` runs) signals a
//! process only if all of these hold:
//!
//! 1. it carries a valid spawn tag of this install, and it belongs to this
//!    user by real uid (never by the owner of a `/proc` file: a
//!    non-dumpable process's files are root's);
//! 2. the owner its tag names is a process of our pid namespace, and is
//!    **provably dead** ([`proof`]): no process of this boot has its pid
//!    any more, or it is a zombie, or its pid now names a process that
//!    started at another time. Anything else — a tag without a start time,
//!    `/proc` mounted with `hidepid`, a nested pid namespace whose tags
//!    cannot be read in ours, a live process whose pidfs inode disagrees
//!    with the ledger — is *unknown*, and unknown is never reaped;
//! 3. its purpose is not interactive ([`proof::INTERACTIVE_PURPOSES`]) and,
//!    when purposes were asked for, one of them;
//! 4. it is not the reaper or one of its ancestors.
//!
//! Then, immediately before each signal, the process is **re-pinned**: a
//! pidfd is opened for its pid, its full identity is verified through it,
//! its tag re-read through it must be the one planned, and the signal goes
//! through that pidfd — so it reaches that process or nobody. Trees go
//! down together (`SIGTERM` and `SIGCONT` to every target, the grace, then
//! `SIGKILL`), and the reaper then **chases**: it walks the process table
//! again, killing each process of a proven-dead owner the moment it meets
//! it, until a round proves none is left or [`CHASE_BUDGET`] (5 s) runs out
//! — a process forked during the kill, or a fork-and-exit "pid hopper", is
//! met by the same walk, or by the watch on each new pid that follows a
//! walk that met something. What cannot be proven is listed
//! ([`ReapReport::skipped`], [`ReapReport::unattributable`]), what
//! survived is counted ([`ReapReport::survivors`]); nothing is claimed that
//! was not verified ([`ReapReport::verified`]).
//!
//! Mistakes this allows are all on the safe side: an owner that died and
//! whose pid was taken again within one clock tick (10 ms) looks alive or
//! unknown, and its orphans are kept until that process exits.
//!
//! # Errors
//!
//! Opening and writing the ledger fail with [`LedgerError`], each variant
//! saying what to do ([`Insecure`](LedgerError::Insecure) names the fix,
//! [`NewerSchema`](LedgerError::NewerSchema) asks for an upgrade). The scan,
//! the census and the reaper never fail: what they cannot read or prove is
//! part of their report, and a ledger that cannot be opened only means the
//! tags alone decide ([`InstallReap::ledger_error`]).

#![warn(missing_docs)]

mod census;
mod clock;
mod error;
pub mod holding;
mod journal;
mod limits;
pub mod proof;
mod reaper;
mod rebuild;
mod recorder;
mod records;
mod registration;
mod scan;
mod schema;
mod state_dir;
mod store;

pub use census::{Census, LedgerState, OwnerEntry, ProcessEntry, Role, SessionEntry, SessionState};
pub use clock::Clock;
pub use error::{Insecurity, LedgerError, Result};
pub use journal::{ABANDONED_AFTER, FOLD_ONE_IN, PendingRun, RUNS_DIR, RunJournal};
pub use limits::{LimitRecord, LimitsRecord};
pub use proof::{DeathProof, OwnerKey, OwnerStatus, Standing};
pub use reaper::{
    CHASE_BUDGET, CgroupKept, DURABLE_SLACK, InstallReap, LedgerView, ReapOptions, ReapReport,
    SkipReason, Skipped, StillAppearing, Target, TargetOutcome, execute, plan, reap, reap_install,
};
pub use recorder::{PendingOwner, Recorder, RunRecording};
pub use records::{
    DurableRow, Outcome, OwnerId, OwnerRecord, OwnerRow, Quarantine, SessionRow, SessionStart,
    Source,
};
pub use registration::{
    RegisteredEntry, RegisteredReap, Registration, RegistrationRecord, RegistrationRow, Spawner,
    SpawnerEntry, SpawnerSource, register_self,
};
pub use scan::{Descent, DescentKind, KEEPER_PURPOSE, Scan, TaggedProcess, UnreadableProcess};
pub use schema::CURRENT_VERSION as SCHEMA_VERSION;
pub use store::{BUSY_TIMEOUT, LEDGER_FILE, Ledger, PRUNE_EVERY, RETENTION};

/// Creates a state directory (0700) if it is missing and checks that it
/// can be trusted, as [`Ledger::open`] does before opening the store:
/// owned by the effective uid, not a symbolic link, not writable by
/// group or others. For other files kept there (the durable-session
/// holder's socket).
///
/// # Errors
/// [`LedgerError::Insecure`] naming the fix; [`LedgerError::Io`].
pub fn secure_state_dir(dir: &std::path::Path) -> Result<()> {
    state_dir::secure_dir(dir)
}
