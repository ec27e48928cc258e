//! Who spawned what: tether's machine-wide ledger, the spawn-tag scan, and
//! the proof-based reaper behind `tether ps` and `tether reap`.
//!
//! ```no_run
//! use tether_ledger::{Ledger, OwnerRecord, Outcome, SessionStart};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let install = tether::Install::from_env();
//! let mut ledger = Ledger::open(&install)?; // quarantines a corrupt store
//! let owner = ledger.register_owner(&OwnerRecord::current(&install, "run")?)?;
//! let mut child = tether::Command::new("make").spawn()?;
//! ledger.record_session_start(owner, &SessionStart::of_child(&child, "run", &["make".into()]))?;
//! let status = child.wait()?;
//! ledger.record_session_end(child.session_id(), Outcome::of_status(&status))?;
//! ledger.record_owner_end(owner)?;
//! # Ok(()) }
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
//!   Many processes write it at once; a crash at any point leaves it
//!   consistent; a corrupt store is quarantined, never treated as empty
//!   (see [`store`](Ledger) for the details).
//! - **The tag scan** ([`Scan`]): the tagged processes alive now, read from
//!   `/proc/<pid>/environ`. It finds what the ledger never saw and is what a
//!   quarantined ledger is rebuilt from.
//!
//! [`Census`] joins the two for `tether ps`. [`proof`] decides whether an
//! owner is alive, provably dead, or unknown — and only a provably dead
//! owner's processes are orphans. [`reap`] kills proven orphans and nothing
//! else, re-pinning every process by pidfd and re-checking its identity and
//! tag immediately before each signal.
//!
//! Linux only, like the rest of tether's process-table code.

#![warn(missing_docs)]

mod census;
mod clock;
mod error;
pub mod holding;
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
pub use limits::{LimitRecord, LimitsRecord};
pub use proof::{DeathProof, OwnerKey, OwnerStatus, Standing};
pub use reaper::{
    CHASE_BUDGET, CgroupKept, InstallReap, LedgerView, ReapOptions, ReapReport, SkipReason,
    Skipped, StillAppearing, Target, TargetOutcome, execute, plan, reap, reap_install,
};
pub use recorder::Recorder;
pub use records::{
    Outcome, OwnerId, OwnerRecord, OwnerRow, Quarantine, SessionRow, SessionStart, Source,
};
pub use registration::{
    RegisteredEntry, RegisteredReap, Registration, RegistrationRecord, RegistrationRow, Spawner,
    SpawnerEntry, SpawnerSource, register_self,
};
pub use scan::{Descent, DescentKind, KEEPER_PURPOSE, Scan, TaggedProcess, UnreadableProcess};
pub use schema::CURRENT_VERSION as SCHEMA_VERSION;
pub use store::{BUSY_TIMEOUT, LEDGER_FILE, Ledger, RETENTION};
