//! The reaper: kills processes *proven* to be orphans of this install, and
//! nothing else.
//!
//! A process is a target only if all of these hold:
//!
//! 1. it carries a valid spawn tag of this install (so it is tether's, and
//!    this tether's — never an untagged look-alike with the same command
//!    line), and it belongs to this user (the scan sees nothing else);
//! 2. its owner is provably dead ([`crate::proof`]): gone, a zombie, or its
//!    pid now names another process;
//! 3. its session's purpose is reapable (never an interactive one) and, if
//!    the caller asked for purposes, one of those;
//! 4. it lives in our pid namespace, and it is not the reaper or one of the
//!    reaper's ancestors.
//!
//! Then, immediately before each signal, the process is re-pinned: a pidfd
//! is opened for its pid, its full identity (start time and pidfs inode as
//! planned) is verified, and its tag is re-read through the pin and must be
//! the one planned. The signal goes through that pidfd, so it reaches that
//! process or nobody. Whole trees go down together with the ladder —
//! `SIGTERM` (+`SIGCONT`, so stopped processes act on it) to every target,
//! up to the grace for them to exit, `SIGKILL` to the rest — then the table
//! is scanned again and anything of a dead owner that appeared meanwhile
//! (forked during the kill) gets `SIGKILL` at once, for a bounded number of
//! rounds. Untagged children of targets are reported, never signalled.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde::Serialize;
use tether::sys::{self, Pinned};
use tether::{ProcessIdentity, SpawnTag};

use crate::proof::{DeathProof, OwnerKey, OwnerStatus, Prover, is_interactive};
use crate::records::{OwnerRow, SessionRow};
use crate::registration::RegistrationRow;
use crate::scan::{KEEPER_PURPOSE, Scan, argv_of};

/// Rounds of re-scanning for processes forked while their tree was being
/// killed. A tree that keeps forking gets `SIGKILL` each round; ten rounds
/// is far more than a kill that stops every known member at once needs.
const MAX_ROUNDS: usize = 10;

/// How long to wait for `SIGKILL` to take effect before reporting a
/// survivor (a process stuck in uninterruptible sleep).
const KILL_WAIT: Duration = Duration::from_secs(5);

/// What to reap.
#[derive(Clone, Debug)]
pub struct ReapOptions {
    /// Time between `SIGTERM` and `SIGKILL`.
    pub grace: Duration,
    /// Only sessions with one of these purposes (empty: every reapable one).
    pub purposes: Vec<String>,
    /// Plan only: signal nothing.
    pub dry_run: bool,
}

impl Default for ReapOptions {
    /// Grace [`tether::DEFAULT_GRACE`], every reapable purpose, for real.
    fn default() -> Self {
        ReapOptions {
            grace: tether::DEFAULT_GRACE,
            purposes: Vec::new(),
            dry_run: false,
        }
    }
}

/// One process the reaper proved orphaned.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// Pid.
    pub pid: u32,
    /// Start time, clock ticks since boot.
    pub start_time: u64,
    /// Pidfs inode when planned, where the kernel has one.
    pub pidfs_inode: Option<u64>,
    /// Session id from its tag.
    pub session: String,
    /// Purpose from its tag.
    pub purpose: String,
    /// The dead owner its tag names.
    pub owner: OwnerKey,
    /// Why that owner is known to be dead.
    pub proof: DeathProof,
    /// Command line when planned.
    pub command: String,
    /// What happened to it.
    pub outcome: TargetOutcome,
    #[serde(skip)]
    identity: ProcessIdentity,
    #[serde(skip)]
    tag: SpawnTag,
}

/// What happened to a target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TargetOutcome {
    /// Dry run: it would be killed.
    Planned,
    /// It exited within the grace after `SIGTERM`.
    Terminated,
    /// It needed `SIGKILL`.
    Killed,
    /// It had exited before it was signalled.
    AlreadyGone,
    /// When re-checked just before signalling it was no longer the process
    /// planned (pid reused) or no longer carried the planned tag: it was
    /// not signalled.
    Changed {
        /// What differed.
        reason: String,
    },
    /// Still alive after `SIGKILL` and the wait (uninterruptible sleep?).
    Survived,
}

/// A tagged process the reaper left alone, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    /// Pid.
    pub pid: u32,
    /// Session id from its tag (empty for an untagged descendant).
    pub session: String,
    /// Purpose from its tag (empty for an untagged descendant).
    pub purpose: String,
    /// Command line.
    pub command: String,
    /// Why it was not touched.
    pub reason: SkipReason,
}

/// Why a process was not reaped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SkipReason {
    /// Its owner is alive.
    OwnerAlive,
    /// Its owner's death cannot be proven.
    OwnerUnknown {
        /// Why not.
        reason: String,
    },
    /// Its purpose is interactive: never reaped.
    Interactive,
    /// Its purpose was not among those asked for.
    PurposeNotSelected,
    /// It is the reaper or one of its ancestors.
    Reaper,
    /// It lives in a nested pid namespace (a `pidns` session): its keeper
    /// is the target, and the namespace dies with it.
    NestedPidNamespace,
    /// A child of a target without a spawn tag: never signalled.
    UntaggedDescendant {
        /// The target it descends from.
        parent: u32,
    },
    /// A process that registered itself but carries no spawn tag naming
    /// its spawner: the ledger alone never proves an orphan.
    RegisteredWithoutTag,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::OwnerAlive => f.write_str("owner is alive"),
            SkipReason::OwnerUnknown { reason } => write!(f, "owner status unknown: {reason}"),
            SkipReason::Interactive => f.write_str("interactive purpose: never reaped"),
            SkipReason::PurposeNotSelected => f.write_str("purpose not selected"),
            SkipReason::Reaper => f.write_str("the reaper itself or its ancestor"),
            SkipReason::NestedPidNamespace => {
                f.write_str("in a nested pid namespace (dies with its keeper)")
            }
            SkipReason::UntaggedDescendant { parent } => {
                write!(f, "untagged child of {parent}: never signalled")
            }
            SkipReason::RegisteredWithoutTag => {
                f.write_str("registered without a spawn tag naming its spawner: never signalled")
            }
        }
    }
}

/// What a reap did (or, dry, would do).
#[derive(Clone, Debug, Serialize)]
pub struct ReapReport {
    /// Install reaped.
    pub install: String,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Grace between `SIGTERM` and `SIGKILL`, ms.
    pub grace_ms: u64,
    /// Scan rounds (1 for a dry run).
    pub rounds: usize,
    /// Proven orphans, with what happened to each.
    pub targets: Vec<Target>,
    /// Tagged processes of this install left alone, with why.
    pub skipped: Vec<Skipped>,
    /// Targets still alive at the end.
    pub survivors: usize,
}

/// The ledger rows the reaper consults (both may be empty: the tags alone
/// prove orphans; the ledger adds recorded pidfs inodes and purposes).
#[derive(Clone, Copy, Debug, Default)]
pub struct LedgerView<'a> {
    /// Owner rows.
    pub owners: &'a [OwnerRow],
    /// Session rows.
    pub sessions: &'a [SessionRow],
    /// Registrations of processes tether did not start: their purposes and
    /// spawners are respected too (see `registration.rs`).
    pub registrations: &'a [RegistrationRow],
}

/// Plans a reap of `install`'s orphans: scans, proves, and pins nothing
/// yet. Every target comes with its full identity (pidfs inode included),
/// read after the proof, for the re-check before signalling.
pub fn plan(install: &str, ledger: LedgerView<'_>, opts: &ReapOptions) -> ReapReport {
    let mut prover = Prover::new(ledger.owners);
    let (targets, skipped) = plan_round(install, ledger, opts, &mut prover, &HashSet::new());
    ReapReport {
        install: install.to_owned(),
        dry_run: true,
        grace_ms: opts.grace.as_millis() as u64,
        rounds: 1,
        targets,
        skipped,
        survivors: 0,
    }
}

/// Plans and, unless `opts.dry_run`, kills `install`'s proven orphans.
pub fn reap(install: &str, ledger: LedgerView<'_>, opts: &ReapOptions) -> ReapReport {
    let mut report = plan(install, ledger, opts);
    if opts.dry_run {
        return report;
    }
    report.dry_run = false;
    execute(&mut report.targets, opts.grace);
    let mut seen: HashSet<(u32, u64)> = report
        .targets
        .iter()
        .map(|t| (t.pid, t.start_time))
        .collect();
    while report.rounds < MAX_ROUNDS {
        let mut prover = Prover::new(ledger.owners);
        let (mut fresh, _) = plan_round(install, ledger, opts, &mut prover, &seen);
        if fresh.is_empty() {
            break;
        }
        report.rounds += 1;
        // Appeared while its tree was being killed: no second grace.
        execute(&mut fresh, Duration::ZERO);
        seen.extend(fresh.iter().map(|t| (t.pid, t.start_time)));
        report.targets.extend(fresh);
    }
    report.survivors = report
        .targets
        .iter()
        .filter(|t| t.outcome == TargetOutcome::Survived)
        .count();
    report
}

/// Carries out a plan on `targets` (from [`plan`]) with the ladder,
/// re-checking each one immediately before every signal. Sets each
/// target's outcome.
pub fn execute(targets: &mut [Target], grace: Duration) {
    let pins: Vec<Option<Pinned>> = targets.iter_mut().map(repin).collect();
    if !grace.is_zero() {
        for (t, pin) in targets.iter_mut().zip(&pins) {
            if let Some(pin) = pin {
                signal_checked(t, pin, Stop::Terminate);
            }
        }
        wait_exited(&pins, grace);
        for (t, pin) in targets.iter_mut().zip(&pins) {
            if pin.as_ref().is_some_and(|p| p.has_exited()) && t.outcome == TargetOutcome::Planned {
                t.outcome = TargetOutcome::Terminated;
            }
        }
    }
    for (t, pin) in targets.iter_mut().zip(&pins) {
        if let Some(pin) = pin
            && t.outcome == TargetOutcome::Planned
        {
            signal_checked(t, pin, Stop::Kill);
        }
    }
    wait_exited(&pins, KILL_WAIT);
    for (t, pin) in targets.iter_mut().zip(&pins) {
        if t.outcome == TargetOutcome::Planned {
            t.outcome = match pin {
                Some(p) if p.has_exited() => TargetOutcome::Killed,
                Some(_) => TargetOutcome::Survived,
                None => TargetOutcome::AlreadyGone,
            };
        }
    }
}

/// Pins a target by its planned identity; sets its outcome if it cannot be.
fn repin(t: &mut Target) -> Option<Pinned> {
    match Pinned::pin(&t.identity) {
        Ok(Some(pin)) => Some(pin),
        Ok(None) => {
            // Gone, or its pid now names another process: either way the
            // planned process is dead, and whatever has the pid is spared.
            t.outcome = TargetOutcome::AlreadyGone;
            None
        }
        Err(e) => {
            t.outcome = TargetOutcome::Changed {
                reason: format!("cannot pin it: {e}"),
            };
            None
        }
    }
}

/// Re-reads the tag through the pin and signals only if it is the planned
/// one; records why not otherwise. A process that exited since is left to
/// the outcome bookkeeping.
fn signal_checked(t: &mut Target, pin: &Pinned, how: Stop) {
    if t.outcome != TargetOutcome::Planned || pin.has_exited() {
        return;
    }
    match pin.spawn_tag() {
        Some(tag) if tag == t.tag => {
            let _ = match how {
                Stop::Terminate => pin.terminate(),
                Stop::Kill => pin.kill(),
            };
        }
        Some(_) => {
            t.outcome = TargetOutcome::Changed {
                reason: "its spawn tag changed (it exec'd with another environment)".into(),
            }
        }
        None if pin.has_exited() => {}
        None => {
            t.outcome = TargetOutcome::Changed {
                reason: "its spawn tag is gone (it exec'd with another environment)".into(),
            }
        }
    }
}

/// How a target is asked to end.
#[derive(Clone, Copy)]
enum Stop {
    /// The polite request (`SIGTERM` + `SIGCONT`).
    Terminate,
    /// The forced end (`SIGKILL`).
    Kill,
}

/// Waits until every pinned process has exited or `bound` passes.
fn wait_exited(pins: &[Option<Pinned>], bound: Duration) {
    let pins: Vec<&Pinned> = pins.iter().flatten().collect();
    sys::wait_exited(&pins, bound)
}

/// One scan: targets (not in `exclude`) and what was skipped.
fn plan_round(
    install: &str,
    ledger: LedgerView<'_>,
    opts: &ReapOptions,
    prover: &mut Prover,
    exclude: &HashSet<(u32, u64)>,
) -> (Vec<Target>, Vec<Skipped>) {
    let scan = Scan::take();
    let ancestry = reaper_ancestry();
    let recorded_purpose: HashMap<&str, &str> = ledger
        .sessions
        .iter()
        .map(|s| (s.id.as_str(), s.purpose.as_str()))
        .collect();
    let registered = crate::registration::by_process(ledger.registrations);
    let (mut targets, mut skipped) = (Vec::new(), Vec::new());
    for (owner, sessions) in scan.by_owner(install) {
        let status = prover.owner_status(owner);
        for (session, procs) in sessions {
            let purpose = recorded_purpose
                .get(session)
                .copied()
                .or_else(|| {
                    procs
                        .iter()
                        .find(|p| !p.is_keeper())
                        .map(|p| p.tag.purpose.as_str())
                })
                .unwrap_or(KEEPER_PURPOSE);
            for p in procs {
                if exclude.contains(&(p.pid, p.start_time)) {
                    continue;
                }
                let reason = if ancestry.contains(&p.pid) {
                    Some(SkipReason::Reaper)
                } else {
                    match &status {
                        OwnerStatus::Alive => Some(SkipReason::OwnerAlive),
                        OwnerStatus::Unknown { reason } => Some(SkipReason::OwnerUnknown {
                            reason: reason.clone(),
                        }),
                        OwnerStatus::Dead { .. } => {
                            let reg = registered.get(&(p.pid, p.start_time));
                            let reg_purpose = reg.map(|r| r.purpose.as_str());
                            if is_interactive(purpose)
                                || is_interactive(&p.tag.purpose)
                                || reg_purpose.is_some_and(is_interactive)
                            {
                                Some(SkipReason::Interactive)
                            } else if let Some(reason) =
                                reg.and_then(|r| registered_spawner_veto(r, owner, prover))
                            {
                                Some(reason)
                            } else if !opts.purposes.is_empty()
                                && !opts
                                    .purposes
                                    .iter()
                                    .any(|w| w == purpose || Some(w.as_str()) == reg_purpose)
                            {
                                Some(SkipReason::PurposeNotSelected)
                            } else if !prover.in_own_pidns(p.pid) {
                                Some(SkipReason::NestedPidNamespace)
                            } else {
                                None
                            }
                        }
                    }
                };
                let command = argv_of(p.pid).join(" ");
                if let Some(reason) = reason {
                    skipped.push(Skipped {
                        pid: p.pid,
                        session: session.to_owned(),
                        purpose: p.tag.purpose.clone(),
                        command,
                        reason,
                    });
                    continue;
                }
                let OwnerStatus::Dead { proof } = &status else {
                    unreachable!("only dead owners' processes get here")
                };
                // The full identity, read after the proof: the pidfs inode
                // is what tells a same-tick pid reuse apart at signal time.
                let Ok(identity) = ProcessIdentity::of_pid(p.pid) else {
                    continue; // exited since the scan
                };
                if identity.start_time != p.start_time {
                    continue; // exited, and its pid was reused since the scan
                }
                targets.push(Target {
                    pid: p.pid,
                    start_time: p.start_time,
                    pidfs_inode: identity.pidfs_inode,
                    session: session.to_owned(),
                    purpose: p.tag.purpose.clone(),
                    owner,
                    proof: *proof,
                    command,
                    outcome: TargetOutcome::Planned,
                    identity,
                    tag: p.tag.clone(),
                });
            }
        }
    }
    for t in &targets {
        for child in sys::children(t.pid) {
            let zombie = sys::process(child).map_or(true, |s| s.has_exited());
            if scan.get(child).is_none() && !zombie {
                skipped.push(Skipped {
                    pid: child,
                    session: String::new(),
                    purpose: String::new(),
                    command: argv_of(child).join(" "),
                    reason: SkipReason::UntaggedDescendant { parent: t.pid },
                });
            }
        }
    }
    (targets, skipped)
}

/// A registered process whose registration names another spawner than its
/// tag's owner is an orphan only when that spawner is provably dead too.
fn registered_spawner_veto(
    reg: &RegistrationRow,
    owner: OwnerKey,
    prover: &mut Prover,
) -> Option<SkipReason> {
    let spawner = reg.spawner.as_ref()?;
    let key = OwnerKey {
        pid: spawner.pid,
        start_time: spawner.start_time,
    };
    if key == owner || spawner.boot_id != prover.boot_id() {
        return None;
    }
    match prover.owner_status(key) {
        OwnerStatus::Alive => Some(SkipReason::OwnerAlive),
        OwnerStatus::Unknown { reason } => Some(SkipReason::OwnerUnknown { reason }),
        OwnerStatus::Dead { .. } => None,
    }
}

/// This process and its ancestors: never reaped, even if an orphaned shell
/// of a dead owner is what runs `tether reap`.
fn reaper_ancestry() -> HashSet<u32> {
    let mut out = HashSet::new();
    let mut pid = std::process::id();
    while pid > 1 && out.insert(pid) {
        match sys::process(pid) {
            Ok(stat) => pid = stat.ppid,
            Err(_) => break,
        }
    }
    out
}

/// What [`reap_install`] did, and whether the ledger could be used.
#[derive(Debug)]
pub struct InstallReap {
    /// The reap.
    pub report: ReapReport,
    /// Why the ledger could not be read or updated, if so (the reap then
    /// relied on the spawn tags alone, which is enough to prove orphans).
    pub ledger_error: Option<crate::LedgerError>,
}

/// Reaps `install`'s proven orphans using its ledger where it can be
/// opened, and records the reaped sessions there: what `tether reap` and
/// `tether mcp --reap-on-start` run.
pub fn reap_install(install: &tether::Install, opts: &ReapOptions) -> InstallReap {
    let mut ledger = crate::Ledger::open(install);
    let rows = match &ledger {
        Ok(l) => l
            .owners()
            .and_then(|o| Ok((o, l.sessions()?, l.registrations()?))),
        Err(_) => Ok(Default::default()),
    };
    let (owners, sessions, registrations) = match rows {
        Ok(rows) => rows,
        Err(e) => {
            ledger = Err(e);
            Default::default()
        }
    };
    let view = LedgerView {
        owners: &owners,
        sessions: &sessions,
        registrations: &registrations,
    };
    let mut report = reap(install.id(), view, opts);
    report.skipped.extend(crate::registration::untagged_skips(
        install.id(),
        &registrations,
    ));
    let ledger_error = match &mut ledger {
        Ok(l) if !report.dry_run => {
            let mut reaped: Vec<String> = report
                .targets
                .iter()
                .filter(|t| matches!(t.outcome, TargetOutcome::Terminated | TargetOutcome::Killed))
                .map(|t| t.session.clone())
                .collect();
            reaped.sort();
            reaped.dedup();
            l.record_reaped(&reaped).err()
        }
        Ok(_) => None,
        Err(_) => ledger.err(),
    };
    InstallReap {
        report,
        ledger_error,
    }
}
