//! The reaper: kills processes *proven* to be orphans of this install, and
//! nothing else.
//!
//! A process is a target only if all of these hold:
//!
//! 1. it carries a valid spawn tag of this install (so it is tether's, and
//!    this tether's — never an untagged look-alike with the same command
//!    line), and it belongs to this user by real uid (the scan sees
//!    nothing else);
//! 2. its tag's owner pid names a process of our pid namespace — always
//!    for a process of ours; for one in a nested namespace only if the
//!    owner started before that namespace existed
//!    ([`Prover::tag_names_our_owner`]) — and that owner is provably dead
//!    ([`crate::proof`]): gone, a zombie, or its pid now names another
//!    process;
//! 3. its session's purpose is reapable (never an interactive one) and, if
//!    the caller asked for purposes, one of those;
//! 4. it is not the reaper or one of the reaper's ancestors.
//!
//! Then, immediately before each signal, the process is re-pinned: a pidfd
//! is opened for its pid, its full identity (start time and pidfs inode as
//! planned) is verified, and its tag is re-read through the pin and must be
//! the one planned. The signal goes through that pidfd, so it reaches that
//! process or nobody (a process in a nested pid namespace is signalled the
//! same way, by its pid in ours). Whole trees go down together with the
//! ladder — `SIGTERM` (+`SIGCONT`, so stopped processes act on it) to every
//! target, up to the grace for them to exit, `SIGKILL` to the rest.
//!
//! Then the reaper **chases**: it scans again, and every process of a
//! proven-dead owner it meets gets `SIGKILL` through a pin *as the scan
//! meets it* — microseconds after it was read, not after a whole scan —
//! round after round until a round proves the tree empty (see `chase`) or
//! [`CHASE_BUDGET`] runs out. A process forked during the kill, or the
//! next pid of a fork-and-exit "pid hopper" (which escaped a collect-then-
//! kill reaper in 7 of 12 trials, and a scan alone in 1 of 6 on a loaded
//! machine), is met by the same scan or by the watch on each new pid that
//! follows it.
//! Whatever is still alive at the end is reported, and makes `tether reap`
//! exit non-zero. Untagged children of targets and processes whose
//! environment cannot be read are reported, never signalled.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use serde::Serialize;
use tether::sys::{self, Pinned, Sighting};
use tether::{ProcessIdentity, SpawnTag};

use crate::proof::{DeathProof, OwnerKey, OwnerStatus, Prover, Standing, is_interactive};
use crate::records::{OwnerRow, SessionRow};
use crate::registration::RegistrationRow;
use crate::scan::{KEEPER_PURPOSE, Scan, TaggedProcess, UnreadableProcess, argv_of};

/// How long the reaper keeps chasing processes that appear after the
/// ladder (forked during the kill, pid hoppers). A tree that stops forking
/// once its known members are dead needs one round of a few milliseconds;
/// one that outruns every round for this long is reported, not claimed.
pub const CHASE_BUDGET: Duration = Duration::from_secs(5);

/// How long to wait for `SIGKILL` to take effect before reporting a
/// survivor (a process stuck in uninterruptible sleep).
const KILL_WAIT: Duration = Duration::from_secs(5);

/// What to reap. The default: every reapable purpose, grace
/// [`tether::DEFAULT_GRACE`] (2 s), for real.
#[derive(Clone, Debug)]
pub struct ReapOptions {
    /// Time between `SIGTERM` and `SIGKILL` (default 2 s; zero: `SIGKILL`
    /// at once).
    pub grace: Duration,
    /// Only sessions with one of these purposes (default empty: every
    /// reapable one). Interactive purposes are never reaped either way.
    pub purposes: Vec<String>,
    /// Plan only: signal nothing (default `false`).
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
    /// Its process group when planned.
    pub process_group: u32,
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

impl Target {
    fn set_identity(&mut self, identity: ProcessIdentity) {
        self.pidfs_inode = identity.pidfs_inode;
        self.identity = identity;
    }
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
    /// Proven orphaned and alive when the chase gave up
    /// ([`CHASE_BUDGET`]): it appeared faster than it could be killed.
    /// Never signalled in its current incarnation.
    Escaped,
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
    /// It lives in a nested pid namespace whose tags cannot be proven to
    /// name owners of ours (a tether inside a container names its own
    /// namespace's pids).
    NestedPidNamespace {
        /// Why not.
        reason: String,
    },
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
            SkipReason::NestedPidNamespace { reason } => write!(f, "unprovable: {reason}"),
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
    /// Processes of this user whose environment cannot be read, so that
    /// they cannot be attributed: listed, never signalled.
    pub unattributable: Vec<UnreadableProcess>,
    /// Proven orphans alive at the end (outcome `survived` or `escaped`):
    /// non-zero means the reap did not finish its job.
    pub survivors: usize,
    /// The last scan proved that no proven orphan is left alive besides
    /// the survivors listed (see the module docs). `false` on a dry run,
    /// or when the chase ran out of time (or the pid counter wrapped
    /// during every round) — then nothing is claimed.
    pub verified: bool,
    /// When not verified: the sessions whose processes kept appearing
    /// through every round — seen alive, or exiting as they were read (a
    /// fork-and-exit "pid hopper" forks before it can be read, so it
    /// cannot be proven, pinned and killed) — and how often.
    pub still_appearing: Vec<StillAppearing>,
    /// Leftover cgroups of sessions of proven-dead owners that were
    /// removed (their keeper was killed too, so nobody else would).
    pub cgroups_removed: Vec<String>,
    /// Such cgroups left in place, and why (still holding a process, not
    /// provably a session's cgroup, …).
    pub cgroups_kept: Vec<CgroupKept>,
}

/// A session's leftover cgroup the reaper did not remove.
#[derive(Clone, Debug, Serialize)]
pub struct CgroupKept {
    /// Its directory.
    pub path: String,
    /// Its session.
    pub session: String,
    /// Why it stays.
    pub reason: String,
}

/// A session whose processes kept appearing while the reaper chased them.
#[derive(Clone, Debug, Serialize)]
pub struct StillAppearing {
    /// Session id.
    pub session: String,
    /// How many times one of its processes was met during the chase.
    pub sightings: usize,
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
    /// Durable sessions' records (issue 37): one whose TTL passed
    /// [`DURABLE_SLACK`] ago is reaped even though its holder lives.
    pub durable: &'a [crate::DurableRow],
}

/// How long past a durable session's TTL `tether reap` leaves it to its
/// holder (which kills it at the TTL itself) before reaping it: 5 s.
pub const DURABLE_SLACK: Duration = Duration::from_secs(5);

/// Plans a reap of `install`'s orphans: scans, proves, and pins nothing
/// yet. Every target comes with its full identity (pidfs inode included),
/// read after the proof, for the re-check before signalling.
pub fn plan(install: &str, ledger: LedgerView<'_>, opts: &ReapOptions) -> ReapReport {
    let mut prover = Prover::new(ledger.owners);
    let scan = Scan::take();
    let (targets, skipped) = plan_round(&scan, install, ledger, opts, &mut prover);
    ReapReport {
        install: install.to_owned(),
        dry_run: true,
        grace_ms: opts.grace.as_millis() as u64,
        rounds: 1,
        targets,
        skipped,
        unattributable: scan
            .unreadable()
            .into_iter()
            .filter(|u| u.may_belong_to(install))
            .collect(),
        survivors: 0,
        verified: false,
        still_appearing: Vec::new(),
        cgroups_removed: Vec::new(),
        cgroups_kept: Vec::new(),
    }
}

/// Plans and, unless `opts.dry_run`, kills `install`'s proven orphans, then
/// chases what appears until the tree is provably empty or
/// [`CHASE_BUDGET`] runs out (see the module docs).
pub fn reap(install: &str, ledger: LedgerView<'_>, opts: &ReapOptions) -> ReapReport {
    let mut report = plan(install, ledger, opts);
    if opts.dry_run {
        return report;
    }
    report.dry_run = false;
    execute(&mut report.targets, opts.grace);
    chase(install, ledger, opts, &mut report);
    remove_cgroups(ledger, &mut report);
    remove_unrecorded_cgroups(install, ledger, &mut report);
    report.survivors = report
        .targets
        .iter()
        .filter(|t| matches!(t.outcome, TargetOutcome::Survived | TargetOutcome::Escaped))
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

/// The chase after the ladder: scan rounds that `SIGKILL` every eligible
/// process of a proven-dead owner the moment the scan meets it, until a
/// round proves the tree empty or [`CHASE_BUDGET`] is spent; then one last
/// look lists what is still alive as escaped.
///
/// What a *clean* round proves: it met no live eligible process (other
/// than known `SIGKILL` survivors), and the pid counter did not wrap while
/// it ran. The scan lists pids in ascending order, including pids created
/// while it runs above where it stands, and without a wrap every new pid is
/// higher than every older one. So a process forked during the round was
/// either met, or forked after the scan had passed its pid — by a parent
/// with a lower pid that was alive when the scan passed it, and so was met.
/// A chain of fork-and-exit hops that lives on through a round is therefore
/// met in it, and the round is not clean.
///
/// A round that met something is followed by a **watch at the top** of the
/// pid space ([`Chaser::watch_new_pids`]): a fork-and-exit hopper's next
/// pid is the next one handed out, so rather than walking the whole table
/// again (milliseconds, dozens of hops) the reaper looks up each pid as it
/// is handed out, microseconds after, and meets every hop until one is
/// pinned, proven and killed before it forks. Only a full round proves the
/// tree empty; the watch only shortens the race.
fn chase(install: &str, ledger: LedgerView<'_>, opts: &ReapOptions, report: &mut ReapReport) {
    let deadline = Instant::now() + CHASE_BUDGET;
    let mut chaser = Chaser {
        install,
        opts,
        prover: Prover::new(ledger.owners),
        ancestry: reaper_ancestry(),
        purposes: Purposes::new(ledger, &report.targets),
        survivors: report
            .targets
            .iter()
            .filter(|t| t.outcome == TargetOutcome::Survived)
            .map(|t| (t.pid, t.start_time))
            .collect(),
        // The process groups of the trees being reaped: a process of ours
        // that exits in one of them while the scan reads it may have
        // forked first.
        groups: report
            .targets
            .iter()
            .map(|t| (t.process_group, t.session.clone()))
            .collect(),
        appearing: BTreeMap::new(),
        dead: report
            .targets
            .iter()
            .filter(|t| matches!(t.outcome, TargetOutcome::Killed | TargetOutcome::Terminated))
            .map(|t| (t.pid, t.start_time))
            .collect(),
        met: 0,
        round: Vec::new(),
    };
    let mut seen: HashSet<(u32, u64)> = report
        .targets
        .iter()
        .map(|t| (t.pid, t.start_time))
        .collect();
    loop {
        let first_pid = sys::last_pid();
        chaser.met = 0;
        sys::each_tagged(|sighting| chaser.meet(sighting));
        let wrapped = matches!((first_pid, sys::last_pid()), (Some(a), Some(b)) if b < a);
        let clean = chaser.met == 0 && !wrapped;
        if let Some(first) = first_pid
            && !clean
        {
            chaser.watch_new_pids(first, deadline);
        }
        let fresh: Vec<(Target, Pinned)> = std::mem::take(&mut chaser.round)
            .into_iter()
            .filter(|(t, _)| seen.insert((t.pid, t.start_time)))
            .collect();
        if !fresh.is_empty() {
            report.rounds += 1;
            let pins: Vec<&Pinned> = fresh.iter().map(|(_, p)| p).collect();
            sys::wait_exited(&pins, KILL_WAIT);
            for (mut target, pin) in fresh {
                target.outcome = if pin.has_exited() {
                    TargetOutcome::Killed
                } else {
                    TargetOutcome::Survived
                };
                report.targets.push(target);
            }
        }
        if clean {
            report.verified = true;
            return;
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    report.still_appearing = std::mem::take(&mut chaser.appearing)
        .into_iter()
        .filter(|(session, _)| !session.is_empty())
        .map(|(session, sightings)| StillAppearing { session, sightings })
        .collect();
    // Out of budget: what is alive and eligible now escaped.
    sys::each_tagged(|sighting| {
        let Sighting::Alive(p, _) = sighting else {
            return;
        };
        if p.tag.install != install {
            return;
        }
        let p = crate::scan::TaggedProcess::from_sys(p);
        if seen.contains(&(p.pid, p.start_time)) {
            return;
        }
        let target = eligible(
            &p,
            opts,
            &mut chaser.prover,
            &chaser.ancestry,
            &chaser.purposes,
        );
        if let Ok(Some(mut target)) = target {
            target.command = argv_of(p.pid).join(" ");
            target.outcome = TargetOutcome::Escaped;
            report.targets.push(target);
        }
    });
}

/// How long the watch at the top of the pid space goes on after it last
/// met a process of the trees being reaped: a hopper hops every fraction of
/// a millisecond, so this much quiet means it was caught (or stopped); the
/// full round that follows is what proves it.
const WATCH_QUIET: Duration = Duration::from_millis(20);

/// The longest one watch at the top of the pid space lasts before a full
/// round looks at the whole table again.
const WATCH_LIMIT: Duration = Duration::from_millis(500);

/// The state of one chase: what it knows, and what the current round met.
struct Chaser<'a> {
    install: &'a str,
    opts: &'a ReapOptions,
    prover: Prover,
    ancestry: HashSet<u32>,
    purposes: Purposes<'a>,
    /// Known `SIGKILL` survivors of the ladder (met, but not news).
    survivors: HashSet<(u32, u64)>,
    /// Process groups of the trees being reaped, with their sessions.
    groups: HashMap<u32, String>,
    /// Per session, how often one of its processes was met.
    appearing: BTreeMap<String, usize>,
    /// Processes (pid, start time) this chase killed or met exited.
    dead: HashSet<(u32, u64)>,
    /// How many live or just-gone processes of the trees this round met.
    met: usize,
    /// The processes this round killed, with their pins.
    round: Vec<(Target, Pinned)>,
}

impl Chaser<'_> {
    /// Acts on one sighting: a proven orphan is killed through its pin at
    /// once; anything of the trees being reaped that was alive a moment ago
    /// counts as met (the round proves nothing).
    fn meet(&mut self, sighting: Sighting<'_>) {
        let (p, pin) = match sighting {
            Sighting::Alive(p, pin) => (p, pin),
            Sighting::Vanished { tag, .. } => {
                // Alive with a tag of a dead owner of ours a moment ago:
                // the round proves nothing (it may have forked).
                let owner = OwnerKey {
                    pid: tag.owner_pid,
                    start_time: tag.owner_start,
                };
                if tag.install == self.install
                    && matches!(self.prover.owner_status(owner), OwnerStatus::Dead { .. })
                {
                    self.appeared(&tag.session);
                }
                return;
            }
            Sighting::Exited(info) => {
                // Exited while read, in a tree being reaped: a process that
                // forks and exits at once can only be seen so. Only the
                // first sighting counts: met again in a later round (as a
                // zombie whose reaping parent is slow), it was dead before
                // that round began and proves nothing about it; so does a
                // process this chase killed.
                if let Some(session) = self.groups.get(&info.pgrp).cloned()
                    && self.dead.insert((info.pid, info.start_time))
                {
                    self.appeared(&session);
                }
                return;
            }
        };
        if p.tag.install != self.install {
            return;
        }
        let p = crate::scan::TaggedProcess::from_sys(p);
        if !matches!(
            self.prover.owner_status(p.owner()),
            OwnerStatus::Dead { .. }
        ) {
            return;
        }
        let known_survivor = self.survivors.contains(&(p.pid, p.start_time));
        // Where the scan could not pin before reading, pin now and re-read
        // through the pin below (a pid recycled within the tick of its
        // start time would be another process).
        let read_through_pin = pin.is_some();
        let Some(pin) = pin.or_else(|| pin_tagged(&p)) else {
            // Alive with a dead owner's tag a moment ago: it may have
            // forked on its way out.
            self.appeared(&p.tag.session);
            return;
        };
        let target = eligible(
            &p,
            self.opts,
            &mut self.prover,
            &self.ancestry,
            &self.purposes,
        );
        let Ok(Some(mut target)) = target else {
            if pin.has_exited() {
                // The checks failed because it left.
                self.appeared(&p.tag.session);
            }
            return;
        };
        if !known_survivor {
            self.met += 1;
        }
        // A process that exec'd with another environment, or is not this
        // user's, is spared.
        if !read_through_pin
            && (pin.spawn_tag().as_ref() != Some(&p.tag)
                || sys::real_uid(p.pid).ok() != Some(sys::current_uid()))
        {
            return;
        }
        let _ = pin.kill();
        self.dead.insert((p.pid, p.start_time));
        // Read after the signal: reading a command line waits while the
        // process forks, and the signal must not.
        target.command = argv_of(p.pid).join(" ");
        target.set_identity(pin.identity().clone());
        self.groups
            .insert(target.process_group, target.session.clone());
        self.round.push((target, pin));
    }

    /// Counts a sighting of `session`'s that proves the round not clean.
    fn appeared(&mut self, session: &str) {
        self.met += 1;
        *self.appearing.entry(session.to_owned()).or_default() += 1;
    }

    /// The watch at the top of the pid space: meets every pid handed out
    /// after `first` as soon as it is, until [`WATCH_QUIET`] passes without
    /// meeting anything of the trees being reaped, [`WATCH_LIMIT`] or
    /// `deadline` is reached, or the pid counter wraps. Spins: it lasts
    /// milliseconds, and each pid it is late costs a hop.
    fn watch_new_pids(&mut self, first: u32, deadline: Instant) {
        let start = Instant::now();
        let end = deadline.min(start + WATCH_LIMIT);
        let mut last_met = start;
        let mut next = first.saturating_add(1);
        loop {
            let Some(top) = sys::last_pid() else { return };
            if top.saturating_add(1) < next {
                return; // wrapped: a full round takes over
            }
            let before = self.met;
            sys::each_tagged_in(next..=top, |sighting| self.meet(sighting));
            next = top.saturating_add(1);
            let now = Instant::now();
            if self.met > before {
                last_met = now;
            }
            if now >= end || now.duration_since(last_met) >= WATCH_QUIET {
                return;
            }
        }
    }
}

/// Removes the leftover cgroups the ledger records for sessions whose
/// owner is proven dead (after the kill, so they are empty unless
/// something survived). Each must provably be that session's cgroup
/// ([`tether::sys::remove_session_cgroup`]) and be empty — the kernel
/// refuses `rmdir` otherwise — so nothing is ever killed or removed on the
/// ledger's word alone. A session of an earlier boot has none left.
fn remove_cgroups(ledger: LedgerView<'_>, report: &mut ReapReport) {
    let mut prover = Prover::new(ledger.owners);
    for session in ledger.sessions.iter().filter(|s| !s.cgroups.is_empty()) {
        let Some(owner) = ledger.owners.iter().find(|o| o.id == session.owner) else {
            continue;
        };
        if owner.identity.boot_id != sys::boot_id() {
            continue;
        }
        let key = OwnerKey {
            pid: owner.identity.pid,
            start_time: owner.identity.start_time,
        };
        if !matches!(prover.owner_status(key), OwnerStatus::Dead { .. }) {
            continue;
        }
        for dir in &session.cgroups {
            match sys::remove_session_cgroup(std::path::Path::new(dir), &session.id) {
                Ok(true) => report.cgroups_removed.push(dir.clone()),
                Ok(false) => {}
                Err(e) => report.cgroups_kept.push(CgroupKept {
                    path: dir.clone(),
                    session: session.id.clone(),
                    reason: e.to_string(),
                }),
            }
        }
    }
}

/// Removes the session leaves of `install` that no ledger row names —
/// their owner, keeper and command were killed together while the session
/// started, before anything was recorded (150 such runs left 99–114 leaves
/// behind every reap: issue 34 item 2) — found by name in the cgroup
/// hierarchies ([`tether::sys::session_cgroup_leaves`]). The name carries
/// the owner's pid and start time; a leaf is removed only when that owner
/// is proven dead and no process is in it (nothing is killed through a
/// leaf no record names). A live owner's leaf is left alone (its keeper
/// may be making it right now); one whose owner cannot be proven either
/// way, or that still holds a process, is listed in `cgroups_kept`.
fn remove_unrecorded_cgroups(install: &str, ledger: LedgerView<'_>, report: &mut ReapReport) {
    let recorded: HashSet<&str> = ledger
        .sessions
        .iter()
        .flat_map(|s| s.cgroups.iter().map(String::as_str))
        .collect();
    let mut prover = Prover::new(ledger.owners);
    for leaf in sys::session_cgroup_leaves() {
        let path = leaf.path.to_string_lossy().into_owned();
        if leaf.install != install || recorded.contains(path.as_str()) {
            continue;
        }
        let key = OwnerKey {
            pid: leaf.owner_pid,
            start_time: leaf.owner_start,
        };
        let kept = |reason: String| CgroupKept {
            path: path.clone(),
            session: leaf.session.clone(),
            reason,
        };
        if !leaf.owner_in_own_pid_namespace {
            report.cgroups_kept.push(kept(
                "its owner was in another pid namespace: its pid cannot be read here".into(),
            ));
            continue;
        }
        match prover.owner_status(key) {
            OwnerStatus::Dead { .. } => match sys::remove_empty_session_cgroup(&leaf) {
                Ok(true) => report.cgroups_removed.push(path.clone()),
                Ok(false) => {}
                Err(e) => report.cgroups_kept.push(kept(e.to_string())),
            },
            OwnerStatus::Unknown { reason } => report
                .cgroups_kept
                .push(kept(format!("its owner cannot be proven dead: {reason}"))),
            _ => {}
        }
    }
}

/// Pins a tagged process as the scan read it (pid and start time).
fn pin_tagged(p: &TaggedProcess) -> Option<Pinned> {
    let expected = ProcessIdentity {
        boot_id: sys::boot_id().to_owned(),
        pid: p.pid,
        start_time: p.start_time,
        pidfs_inode: None,
    };
    Pinned::pin(&expected).ok().flatten()
}

/// The reapable purpose of each session: as the ledger recorded it, else
/// as the plan found it (a keeper's own tag says `keeper`); and the
/// registrations, which a registered process also answers to.
struct Purposes<'a> {
    by_session: HashMap<String, String>,
    registered: HashMap<(u32, u64), &'a RegistrationRow>,
}

impl<'a> Purposes<'a> {
    fn new(ledger: LedgerView<'a>, targets: &[Target]) -> Purposes<'a> {
        let mut by_session: HashMap<String, String> = targets
            .iter()
            .filter(|t| t.purpose != KEEPER_PURPOSE)
            .map(|t| (t.session.clone(), t.purpose.clone()))
            .collect();
        by_session.extend(
            ledger
                .sessions
                .iter()
                .map(|s| (s.id.clone(), s.purpose.clone())),
        );
        Purposes {
            by_session,
            registered: crate::registration::by_process(ledger.registrations),
        }
    }

    fn of<'b>(&'b self, p: &'b TaggedProcess) -> &'b str {
        self.by_session
            .get(&p.tag.session)
            .map(String::as_str)
            .unwrap_or(&p.tag.purpose)
    }

    fn registration(&self, p: &TaggedProcess) -> Option<&'a RegistrationRow> {
        self.registered.get(&(p.pid, p.start_time)).copied()
    }
}

/// Whether `p` is a target: `Ok(Some)` with its proof, `Ok(None)` when its
/// owner is not provably dead, `Err` with why it is skipped otherwise.
fn eligible(
    p: &TaggedProcess,
    opts: &ReapOptions,
    prover: &mut Prover,
    ancestry: &HashSet<u32>,
    purposes: &Purposes<'_>,
) -> Result<Option<Target>, SkipReason> {
    let reason = skip_reason(
        p,
        purposes.of(p),
        purposes.registration(p),
        opts,
        prover,
        ancestry,
    );
    match reason {
        Some(SkipReason::OwnerAlive | SkipReason::OwnerUnknown { .. }) => Ok(None),
        Some(other) => Err(other),
        None => {
            let OwnerStatus::Dead { proof } = prover.owner_status(p.owner()) else {
                return Ok(None);
            };
            Ok(Some(Target {
                pid: p.pid,
                start_time: p.start_time,
                pidfs_inode: None,
                session: p.tag.session.clone(),
                process_group: p.pgrp,
                purpose: p.tag.purpose.clone(),
                owner: p.owner(),
                proof,
                // Read by the caller when it may (see `Chaser::meet`).
                command: String::new(),
                outcome: TargetOutcome::Planned,
                identity: ProcessIdentity {
                    boot_id: sys::boot_id().to_owned(),
                    pid: p.pid,
                    start_time: p.start_time,
                    pidfs_inode: None,
                },
                tag: p.tag.clone(),
            }))
        }
    }
}

/// Why `p` (of a session with reapable-or-not `purpose`) is not a target,
/// or `None` if it is one.
fn skip_reason(
    p: &TaggedProcess,
    purpose: &str,
    reg: Option<&RegistrationRow>,
    opts: &ReapOptions,
    prover: &mut Prover,
    ancestry: &HashSet<u32>,
) -> Option<SkipReason> {
    if ancestry.contains(&p.pid) {
        return Some(SkipReason::Reaper);
    }
    // The classification `tether ps` shows too: in a namespace whose pids
    // are not ours, the tag's owner pid names nobody here, alive or dead.
    match prover.standing(p.pid, &p.tag) {
        Standing::NestedPidNamespace { reason } => Some(SkipReason::NestedPidNamespace { reason }),
        Standing::Owner(OwnerStatus::Alive) => Some(SkipReason::OwnerAlive),
        Standing::Owner(OwnerStatus::Unknown { reason }) => {
            Some(SkipReason::OwnerUnknown { reason })
        }
        Standing::Owner(OwnerStatus::Dead { .. }) => {
            // A registered process also answers to its registered purpose
            // and spawner (both must allow the reap).
            let reg_purpose = reg.map(|r| r.purpose.as_str());
            if is_interactive(purpose)
                || is_interactive(&p.tag.purpose)
                || reg_purpose.is_some_and(is_interactive)
            {
                Some(SkipReason::Interactive)
            } else if let Some(reason) =
                reg.and_then(|r| registered_spawner_veto(r, p.owner(), prover))
            {
                Some(reason)
            } else if !opts.purposes.is_empty()
                && !opts
                    .purposes
                    .iter()
                    .any(|w| w == purpose || Some(w.as_str()) == reg_purpose)
            {
                Some(SkipReason::PurposeNotSelected)
            } else {
                None
            }
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

/// The plan from one scan: targets and what was skipped.
fn plan_round(
    scan: &Scan,
    install: &str,
    ledger: LedgerView<'_>,
    opts: &ReapOptions,
    prover: &mut Prover,
) -> (Vec<Target>, Vec<Skipped>) {
    let ancestry = reaper_ancestry();
    let recorded_purpose: HashMap<&str, &str> = ledger
        .sessions
        .iter()
        .map(|s| (s.id.as_str(), s.purpose.as_str()))
        .collect();
    let registered = crate::registration::by_process(ledger.registrations);
    let now = crate::clock::now_ms();
    // Durable sessions past their TTL (and the slack), by id.
    let expired: HashMap<&str, &crate::DurableRow> = ledger
        .durable
        .iter()
        .filter(|d| {
            d.expires_at_ms
                .saturating_add(DURABLE_SLACK.as_millis() as u64)
                < now
        })
        .map(|d| (d.session.as_str(), d))
        .collect();
    let (mut targets, mut skipped) = (Vec::new(), Vec::new());
    for (_, sessions) in scan.by_owner(install) {
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
                let command = argv_of(p.pid).join(" ");
                let reg = registered.get(&(p.pid, p.start_time)).copied();
                // A durable session past its TTL whose tag names its
                // holder as owner: the TTL proves it is to end.
                let ttl_passed = expired.get(session).filter(|d| {
                    p.owner()
                        == OwnerKey {
                            pid: d.holder_pid,
                            start_time: d.holder_start_time,
                        }
                        && !ancestry.contains(&p.pid)
                        && matches!(
                            prover.standing(p.pid, &p.tag),
                            Standing::Owner(OwnerStatus::Alive)
                        )
                });
                if let Some(d) = ttl_passed {
                    let Ok(identity) = ProcessIdentity::of_pid(p.pid) else {
                        continue;
                    };
                    if identity.start_time != p.start_time {
                        continue;
                    }
                    targets.push(Target {
                        pid: p.pid,
                        start_time: p.start_time,
                        pidfs_inode: identity.pidfs_inode,
                        session: session.to_owned(),
                        process_group: p.pgrp,
                        purpose: p.tag.purpose.clone(),
                        owner: p.owner(),
                        proof: crate::DeathProof::TtlPassed {
                            expires_at_ms: d.expires_at_ms,
                        },
                        command,
                        outcome: TargetOutcome::Planned,
                        identity,
                        tag: p.tag.clone(),
                    });
                    continue;
                }
                if let Some(reason) = skip_reason(p, purpose, reg, opts, prover, &ancestry) {
                    skipped.push(Skipped {
                        pid: p.pid,
                        session: session.to_owned(),
                        purpose: p.tag.purpose.clone(),
                        command,
                        reason,
                    });
                    continue;
                }
                let OwnerStatus::Dead { proof } = prover.owner_status(p.owner()) else {
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
                    process_group: p.pgrp,
                    purpose: p.tag.purpose.clone(),
                    owner: p.owner(),
                    proof,
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
/// `tether mcp --reap-on-start` run. Never fails: a ledger that cannot be
/// opened or written is [`InstallReap::ledger_error`], and the tags alone
/// decide (they are enough to prove an orphan). See the crate docs for an
/// example and what is proven before each signal.
pub fn reap_install(install: &tether::Install, opts: &ReapOptions) -> InstallReap {
    let mut ledger = crate::Ledger::open(install);
    let rows = match &ledger {
        Ok(l) => l
            .owners()
            .and_then(|o| Ok((o, l.sessions()?, l.registrations()?, l.durable_sessions()?))),
        Err(_) => Ok(Default::default()),
    };
    let (owners, sessions, registrations, durable) = match rows {
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
        durable: &durable,
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
