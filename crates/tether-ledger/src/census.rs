//! The census: who spawned what, right now — the ledger's owners and
//! sessions joined with the tag scan's live processes. This is what
//! `tether ps` prints.
//!
//! Owners come from both sides: registered ones from the ledger, and any
//! owner a live process's tag names (an owner the ledger never saw, or
//! lost). A session the ledger does not know is *untracked*; a process whose
//! owner is provably dead is *orphaned*.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde::Serialize;
use tether::ProcessIdentity;

use crate::proof::{DeathProof, OwnerKey, OwnerStatus, Prover, Standing};
use crate::records::{Outcome, OwnerRow, Quarantine, SessionRow};
use crate::registration::{RegisteredEntry, RegistrationRow};
use crate::scan::{Scan, TaggedProcess, UnreadableProcess, argv_of};
use crate::store::Ledger;

/// What `tether ps` shows: owners (from the ledger and from live tags)
/// with their sessions and live processes, each owner's status proven as
/// [`proof`](crate::proof) says.
///
/// ```standalone_crate
/// # #[cfg(unix)]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # tether::keeper::run_if_requested();
/// use tether_ledger::{Census, Ledger, OwnerStatus, Role};
///
/// # let dir = tempfile::tempdir()?;
/// let install = tether::Install::at(dir.path());
/// let ledger = Ledger::open(&install)?;
/// let mut child = tether::Command::new("sleep").arg("1000").install(install.clone()).spawn()?;
///
/// let census = Census::take(install.id(), ledger.path().to_owned(), Ok(&ledger), false);
/// let owner = &census.owners[0]; // this process: never registered, found by its tags
/// assert_eq!((owner.pid, owner.tracked), (std::process::id(), false));
/// assert_eq!(owner.status, OwnerStatus::Alive);
/// let roles: Vec<Role> = census.processes().map(|p| p.role).collect();
/// assert!(roles.contains(&Role::Keeper));
/// assert_eq!(census.orphaned_processes(), 0);
/// child.kill()?;
/// # #[cfg(target_os = "linux")]
/// # tether_testkit::assert_nothing_left();
/// # Ok(())
/// # }
/// # #[cfg(not(unix))]
/// # fn main() {}
/// ```
#[derive(Debug, Serialize)]
pub struct Census {
    /// The install listed (others only with `all`).
    pub install: String,
    /// The state of the ledger itself.
    pub ledger: LedgerState,
    /// Owners with their sessions and processes, oldest first.
    pub owners: Vec<OwnerEntry>,
    /// Live processes that registered themselves (`tether exec`,
    /// `register_self`), oldest first.
    pub registered: Vec<RegisteredEntry>,
    /// How many pids the scan looked at.
    pub scanned: usize,
    /// Live processes of this user whose environment cannot be read (they
    /// made themselves non-dumpable): they may belong to a session of this
    /// install, cannot be attributed, and are never reaped.
    pub unattributable: Vec<UnreadableProcess>,
}

/// What `ps` says about the store.
#[derive(Debug, Serialize)]
pub struct LedgerState {
    /// Path of the store.
    pub path: PathBuf,
    /// Why it could not be used, if it could not (the listing then comes
    /// from the tag scan alone).
    pub error: Option<String>,
    /// Quarantines recorded in the store (including one done just now).
    pub quarantines: Vec<Quarantine>,
}

/// One owner.
#[derive(Debug, Serialize)]
pub struct OwnerEntry {
    /// Install id of its tags.
    pub install: String,
    /// Pid.
    pub pid: u32,
    /// Start time, clock ticks since boot.
    pub start_time: u64,
    /// Alive, dead (with the proof) or unknown.
    pub status: OwnerStatus,
    /// Owner purpose as registered (`run`, `mcp`, …); `None` if untracked.
    pub purpose: Option<String>,
    /// Command line as registered, or read live if untracked.
    pub command: String,
    /// Age in milliseconds (since it started, alive or not).
    pub age_ms: u64,
    /// Whether the ledger knows it.
    pub tracked: bool,
    /// Its sessions, oldest first.
    pub sessions: Vec<SessionEntry>,
}

/// One session.
#[derive(Debug, Serialize)]
pub struct SessionEntry {
    /// Session id.
    pub id: String,
    /// Purpose in its tags.
    pub purpose: String,
    /// Where it stands.
    pub state: SessionState,
    /// Containment, if recorded.
    pub containment: Option<String>,
    /// Command, if recorded.
    pub command: Option<String>,
    /// Working directory, if recorded.
    pub cwd: Option<String>,
    /// Whether the ledger knows it.
    pub tracked: bool,
    /// Its limits and how each was enforced, if it had any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::LimitsRecord>,
    /// The limit it ran into (`memory`, `pids`), if recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_hit: Option<String>,
    /// Its live processes, by pid.
    pub processes: Vec<ProcessEntry>,
    /// Set for a durable session (issue 37): its name, owner of record and
    /// TTL. It outlives its owner of record on purpose; its owner in this
    /// listing is its holder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub durable: Option<crate::DurableRow>,
}

/// Where a session stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SessionState {
    /// Its owner is alive and it has not ended.
    Running,
    /// It recorded an end (processes listed were left behind).
    Ended {
        /// How, if recorded.
        outcome: Option<Outcome>,
    },
    /// Its owner is provably dead and processes of it are still alive.
    Orphaned,
    /// Its owner died without recording its end, and nothing of it is left.
    Lost,
    /// Its owner's status cannot be proven.
    Unknown,
}

/// One live tagged process.
#[derive(Debug, Serialize)]
pub struct ProcessEntry {
    /// Pid.
    pub pid: u32,
    /// Parent pid.
    pub ppid: u32,
    /// Start time, clock ticks since boot.
    pub start_time: u64,
    /// Age in milliseconds.
    pub age_ms: u64,
    /// Scheduler state (`running`, `sleeping`, `stopped`, …).
    pub state: &'static str,
    /// What it is to its session.
    pub role: Role,
    /// Purpose in its tag.
    pub purpose: String,
    /// Command line.
    pub command: String,
    /// Whether its owner is provably dead.
    pub orphaned: bool,
}

/// A process's place in its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The keeper holding the session's tree.
    Keeper,
    /// The session's command itself (as recorded in the ledger).
    Main,
    /// Anything else the command started.
    Descendant,
}

impl Census {
    /// Takes the census of `ledger`'s install (or of every install of this
    /// user, with `all`, which also lists owners that ended). `ledger` may
    /// be an error: the census then comes from the tag scan alone and says
    /// why.
    pub fn take(
        install: &str,
        ledger_path: PathBuf,
        ledger: Result<&Ledger, String>,
        all: bool,
    ) -> Census {
        let (rows, error) = match ledger.and_then(|l| read_rows(l).map_err(|e| e.to_string())) {
            Ok(rows) => (rows, None),
            Err(e) => (Rows::default(), Some(e)),
        };
        let scan = Scan::take();
        let mut prover = Prover::new(&rows.owners);
        let boot = prover.boot_id().to_owned();
        let wanted = |i: &str| all || i == install;

        // Owners by identity: ledger rows first, then tag-only owners.
        let mut owners: BTreeMap<(String, OwnerKey), OwnerEntry> = BTreeMap::new();
        let mut ledger_owner_of: HashMap<i64, (String, OwnerKey)> = HashMap::new();
        for row in rows.owners.iter().filter(|o| wanted(&o.install)) {
            let key = OwnerKey {
                pid: row.identity.pid,
                start_time: row.identity.start_time,
            };
            let status = if row.identity.boot_id != boot {
                OwnerStatus::Dead {
                    proof: DeathProof::EarlierBoot,
                }
            } else {
                prover.owner_status(key)
            };
            let k = (row.install.clone(), key);
            ledger_owner_of.insert(row.id.0, k.clone());
            owners.insert(
                k,
                OwnerEntry {
                    install: row.install.clone(),
                    pid: key.pid,
                    start_time: key.start_time,
                    status,
                    purpose: Some(row.purpose.clone()),
                    command: row.argv.join(" "),
                    age_ms: crate::clock::now_ms().saturating_sub(row.started_at_ms),
                    tracked: true,
                    sessions: Vec::new(),
                },
            );
        }
        let sessions_by_id: HashMap<&str, &SessionRow> =
            rows.sessions.iter().map(|s| (s.id.as_str(), s)).collect();

        // Live processes, grouped by owner and session.
        let mut live: BTreeMap<(String, OwnerKey), BTreeMap<String, Vec<&TaggedProcess>>> =
            BTreeMap::new();
        for p in scan.processes.iter().filter(|p| wanted(&p.tag.install)) {
            live.entry((p.tag.install.clone(), p.owner()))
                .or_default()
                .entry(p.tag.session.clone())
                .or_default()
                .push(p);
        }
        for (k, _) in live.iter() {
            if !owners.contains_key(k) {
                let status = prover.owner_status(k.1);
                let command = if status == OwnerStatus::Alive {
                    argv_of(k.1.pid).join(" ")
                } else {
                    String::new()
                };
                owners.insert(
                    k.clone(),
                    OwnerEntry {
                        install: k.0.clone(),
                        pid: k.1.pid,
                        start_time: k.1.start_time,
                        status,
                        purpose: None,
                        command,
                        age_ms: scan.clock.age_ms(k.1.start_time),
                        tracked: false,
                        sessions: Vec::new(),
                    },
                );
            }
        }

        // Sessions: the ledger's, then the live ones it does not know.
        let mut sessions: BTreeMap<(String, OwnerKey), BTreeMap<String, SessionEntry>> =
            BTreeMap::new();
        for row in &rows.sessions {
            let Some(k) = ledger_owner_of.get(&row.owner.0) else {
                continue;
            };
            let mut entry = session_from_row(row);
            entry.durable = rows.durable.iter().find(|d| d.session == row.id).cloned();
            sessions
                .entry(k.clone())
                .or_default()
                .insert(row.id.clone(), entry);
        }
        // Each process as the reaper judges it (`Prover::standing`): a
        // session whose processes all sit in a nested pid namespace that
        // its tags' owner pids cannot be read in is unprovable, whatever the
        // pid means here — and so is an owner named only by such processes.
        let mut unprovable: HashMap<(String, OwnerKey), HashMap<String, String>> = HashMap::new();
        for (k, by_session) in &live {
            for (id, procs) in by_session {
                let entry = sessions
                    .entry(k.clone())
                    .or_default()
                    .entry(id.clone())
                    .or_insert_with(|| untracked_session(id, procs));
                let row = sessions_by_id.get(id.as_str()).copied();
                let mut nested = None;
                let mut ours = false;
                entry.processes = procs
                    .iter()
                    .map(|p| {
                        let standing = prover.standing(p.pid, &p.tag);
                        match &standing {
                            Standing::NestedPidNamespace { reason } => {
                                nested.get_or_insert_with(|| reason.clone());
                            }
                            Standing::Owner(_) => ours = true,
                        }
                        ProcessEntry {
                            pid: p.pid,
                            ppid: p.ppid,
                            start_time: p.start_time,
                            age_ms: scan.clock.age_ms(p.start_time),
                            state: state_word(p),
                            role: role_of(p, row),
                            purpose: p.tag.purpose.clone(),
                            command: argv_of(p.pid).join(" "),
                            orphaned: standing.is_orphaned(),
                        }
                    })
                    .collect();
                if let (Some(reason), false) = (nested, ours) {
                    unprovable
                        .entry(k.clone())
                        .or_default()
                        .insert(id.clone(), reason);
                }
            }
        }
        for (k, by_session) in &unprovable {
            let all_nested = live[k].len() == by_session.len();
            if all_nested && let Some(reason) = by_session.values().next() {
                owners
                    .get_mut(k)
                    .expect("every live owner is listed")
                    .status = Standing::NestedPidNamespace {
                    reason: reason.clone(),
                }
                .status();
            }
        }

        // Settle session states and decide what to show.
        let mut listed = Vec::new();
        for (k, mut owner) in owners {
            let mut owner_sessions: Vec<SessionEntry> = sessions
                .remove(&k)
                .unwrap_or_default()
                .into_values()
                .collect();
            let nested = unprovable.get(&k);
            for s in &mut owner_sessions {
                if matches!(s.state, SessionState::Ended { .. }) {
                    continue;
                }
                s.state = if nested.is_some_and(|n| n.contains_key(&s.id)) {
                    SessionState::Unknown
                } else {
                    match (&owner.status, s.processes.is_empty()) {
                        (OwnerStatus::Alive, _) => SessionState::Running,
                        (OwnerStatus::Dead { .. }, false) => SessionState::Orphaned,
                        (OwnerStatus::Dead { .. }, true) => SessionState::Lost,
                        (OwnerStatus::Unknown { .. }, _) => SessionState::Unknown,
                    }
                };
            }
            let has_live = owner_sessions.iter().any(|s| !s.processes.is_empty());
            let active = owner.status == OwnerStatus::Alive && owner.tracked;
            if !(all || has_live || active) {
                continue;
            }
            if !all {
                // Only what is alive now: ended sessions with nothing left
                // are history.
                owner_sessions
                    .retain(|s| !s.processes.is_empty() || s.state == SessionState::Running);
            }
            owner_sessions.sort_by(|a, b| {
                let first = |s: &SessionEntry| s.processes.iter().map(|p| p.start_time).min();
                first(a).cmp(&first(b)).then_with(|| a.id.cmp(&b.id))
            });
            owner.sessions = owner_sessions;
            listed.push(owner);
        }
        listed.sort_by_key(|o| (o.start_time, o.pid));
        let registered =
            crate::registration::live_entries(install, &rows.registrations, &scan, &mut prover);
        Census {
            install: install.to_owned(),
            ledger: LedgerState {
                path: ledger_path,
                error,
                quarantines: rows.quarantines,
            },
            owners: listed,
            registered,
            scanned: scan.scanned,
            unattributable: scan
                .unreadable()
                .into_iter()
                .filter(|u| all || u.may_belong_to(install))
                .collect(),
        }
    }

    /// Processes whose owner is provably dead.
    pub fn orphaned_processes(&self) -> usize {
        self.processes().filter(|p| p.orphaned).count()
    }

    /// Every listed process.
    pub fn processes(&self) -> impl Iterator<Item = &ProcessEntry> {
        self.owners
            .iter()
            .flat_map(|o| o.sessions.iter())
            .flat_map(|s| s.processes.iter())
    }
}

#[derive(Default)]
struct Rows {
    owners: Vec<OwnerRow>,
    sessions: Vec<SessionRow>,
    quarantines: Vec<Quarantine>,
    registrations: Vec<RegistrationRow>,
    durable: Vec<crate::DurableRow>,
}

fn read_rows(ledger: &Ledger) -> crate::Result<Rows> {
    Ok(Rows {
        owners: ledger.owners()?,
        sessions: ledger.sessions()?,
        quarantines: ledger.quarantines()?,
        registrations: ledger.registrations()?,
        durable: ledger.durable_sessions()?,
    })
}

fn session_from_row(row: &SessionRow) -> SessionEntry {
    SessionEntry {
        id: row.id.clone(),
        purpose: row.purpose.clone(),
        state: if row.ended_at_ms.is_some() {
            SessionState::Ended {
                outcome: row.outcome,
            }
        } else {
            SessionState::Running
        },
        containment: row.containment.clone(),
        command: (!row.command.is_empty()).then(|| row.command.join(" ")),
        cwd: row.cwd.clone(),
        tracked: true,
        limits: row.limits.clone(),
        limit_hit: row.limit_hit.clone(),
        processes: Vec::new(),
        durable: None,
    }
}

fn untracked_session(id: &str, procs: &[&TaggedProcess]) -> SessionEntry {
    let purpose = procs
        .iter()
        .find(|p| !p.is_keeper())
        .or(procs.first())
        .map_or_else(String::new, |p| p.tag.purpose.clone());
    SessionEntry {
        id: id.to_owned(),
        purpose,
        state: SessionState::Running,
        containment: None,
        command: None,
        cwd: None,
        tracked: false,
        limits: None,
        limit_hit: None,
        processes: Vec::new(),
        durable: None,
    }
}

/// The scheduler state for listings; a process whose main thread exited
/// while others run is alive, not a zombie.
fn state_word(p: &TaggedProcess) -> &'static str {
    if p.state.has_exited() && p.threads > 1 {
        "main-thread-exited"
    } else {
        p.state.word()
    }
}

fn role_of(p: &TaggedProcess, row: Option<&SessionRow>) -> Role {
    let is = |id: &Option<ProcessIdentity>| {
        id.as_ref()
            .is_some_and(|i| i.pid == p.pid && i.start_time == p.start_time)
    };
    match row {
        Some(r) if is(&r.main) => Role::Main,
        Some(r) if is(&r.keeper) => Role::Keeper,
        _ if p.is_keeper() => Role::Keeper,
        _ => Role::Descendant,
    }
}
