//! The updater's rung: which processes hold a path — their executable,
//! working or root directory, an open file or a mapped file lies under it —
//! and, for `tether reap --holding`, killing the proven orphans among them
//! so an updater can replace the directory.
//!
//! A holder is classified exactly as `tether reap` would treat it (the
//! reaper's own plan decides): a proven orphan of this install is killed —
//! re-pinned and re-checked right before each signal, by the reaper's
//! executor — and everything else is listed with its owner so the updater
//! can ask it to exit: a live owner's process, one whose owner cannot be
//! proven dead, an interactive one, another install's, another user's, and
//! every untagged process (never killed: nothing proves whose it is).
//! Processes that cannot be inspected (another user's, as a normal user;
//! our own non-dumpable ones) are counted and named, never guessed about.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use tether::SpawnTag;
use tether::sys::{self, Held, HeldUnder};

use crate::proof::{OwnerStatus, Prover};
use crate::reaper::{LedgerView, ReapOptions, SkipReason, Target, execute, plan};

/// At most this many held paths are listed per holder (the count says how
/// many there were): a process can map hundreds of files of one tree.
const LISTED_PER_HOLDER: usize = 8;

/// Rounds of re-scanning after a kill, for orphans that start holding the
/// path meanwhile (a dying supervisor's last restart).
const MAX_ROUNDS: usize = 10;

/// Who holds a path, now.
#[derive(Clone, Debug, Serialize)]
pub struct HoldingReport {
    /// The path, canonical.
    pub path: PathBuf,
    /// Live processes holding it (this process excluded), by pid.
    pub holders: Vec<Holder>,
    /// Processes of this user that could not be inspected (non-dumpable:
    /// ssh-agent, gpg-agent, …): whether they hold the path is unknown.
    pub uninspectable: Vec<Uninspected>,
    /// Other users' processes that could not be inspected (run as root to
    /// see them).
    pub other_users_not_inspected: usize,
    /// Set when this platform cannot tell what processes hold: then
    /// nothing here is known.
    pub unsupported: Option<String>,
    /// How many processes were looked at.
    pub scanned: usize,
}

/// A process holding the path.
#[derive(Clone, Debug, Serialize)]
pub struct Holder {
    /// Pid.
    pub pid: u32,
    /// Start time, clock ticks since boot.
    pub start_time: u64,
    /// Real uid.
    pub uid: u32,
    /// Command line.
    pub command: String,
    /// Its parent (pid and command line): who to ask when it has no owner.
    pub parent: Relative,
    /// What it holds under the path (at most a few listed; `held_count`
    /// says how many).
    pub holds: Vec<HeldEntry>,
    /// How many paths under the path it holds in all.
    pub held_count: usize,
    /// Its spawn tag, if it carries one.
    pub tag: Option<TagEntry>,
    /// The owner its tag names, if any, and whether that is alive.
    pub owner: Option<OwnerEntry>,
    /// What `tether reap --holding` does with it.
    pub verdict: Verdict,
}

/// A process related to a holder.
#[derive(Clone, Debug, Serialize)]
pub struct Relative {
    /// Pid.
    pub pid: u32,
    /// Command line (empty when unreadable or gone).
    pub command: String,
}

/// One held path.
#[derive(Clone, Debug, Serialize)]
pub struct HeldEntry {
    /// `exe`, `cwd`, `root`, `open` or `mapped`.
    pub how: &'static str,
    /// The path.
    pub path: PathBuf,
    /// It was deleted or replaced since (still held).
    pub deleted: bool,
}

/// A holder's spawn tag.
#[derive(Clone, Debug, Serialize)]
pub struct TagEntry {
    /// Install id.
    pub install: String,
    /// Purpose.
    pub purpose: String,
    /// Session id.
    pub session: String,
    /// The session's name when it is a durable session (issue 37).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub durable_name: Option<String>,
}

/// A holder's owner (from its tag).
#[derive(Clone, Debug, Serialize)]
pub struct OwnerEntry {
    /// Pid.
    pub pid: u32,
    /// Start time.
    pub start_time: u64,
    /// Alive, dead or unknown, from the live process table.
    pub status: OwnerStatus,
    /// Its command line, while alive.
    pub command: String,
}

/// A process whose holdings could not be read.
#[derive(Clone, Debug, Serialize)]
pub struct Uninspected {
    /// Pid.
    pub pid: u32,
    /// Command line.
    pub command: String,
}

/// What `tether reap --holding` does with a holder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// A proven orphan of this install: killed.
    Orphan,
    /// Left alone, for the reason the reaper gives.
    Spared {
        /// Why.
        reason: SkipReason,
    },
    /// It carries another install's spawn tag: that install's `tether
    /// reap` decides.
    OtherInstall,
    /// Another user's process.
    OtherUser,
    /// No spawn tag: nothing proves whose it is. Never killed.
    Untagged,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Orphan => f.write_str("proven orphan"),
            Verdict::Spared { reason } => write!(f, "{reason}"),
            Verdict::OtherInstall => f.write_str("another install's process"),
            Verdict::OtherUser => f.write_str("another user's process"),
            Verdict::Untagged => f.write_str("untagged: never killed"),
        }
    }
}

impl HoldingReport {
    /// Whether no inspected process holds the path (see
    /// [`HoldingReport::uninspectable`] for what could not be looked at).
    pub fn is_free(&self) -> bool {
        self.holders.is_empty() && self.unsupported.is_none()
    }
}

/// What `tether reap --holding` did.
#[derive(Clone, Debug, Serialize)]
pub struct HoldingReap {
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Grace between `SIGTERM` and `SIGKILL`, ms.
    pub grace_ms: u64,
    /// Kill rounds (0 for a dry run or when there was nothing to kill).
    pub rounds: usize,
    /// Proven orphans among the holders, with what happened to each.
    pub targets: Vec<Target>,
    /// Who holds the path now (after the kill; before it, for a dry run).
    pub after: HoldingReport,
    /// Whether the path is free now.
    pub free: bool,
}

/// Who holds `path` now, classified for `install` with what the ledger
/// knows (`ledger` may be empty).
///
/// # Errors
/// When `path` cannot be resolved (it does not exist).
pub fn holders(
    path: &Path,
    install: &str,
    ledger: LedgerView<'_>,
    opts: &ReapOptions,
) -> std::io::Result<HoldingReport> {
    let under = HeldUnder::new(path)?;
    Ok(find(&under, install, ledger, opts).0)
}

/// Kills the proven orphans among the holders of `path` (unless
/// `opts.dry_run`) and says who holds it afterwards.
///
/// # Errors
/// When `path` cannot be resolved (it does not exist).
pub fn reap_holding(
    path: &Path,
    install: &str,
    ledger: LedgerView<'_>,
    opts: &ReapOptions,
) -> std::io::Result<HoldingReap> {
    let under = HeldUnder::new(path)?;
    let (mut report, mut targets) = find(&under, install, ledger, opts);
    if opts.dry_run {
        return Ok(HoldingReap {
            dry_run: true,
            grace_ms: opts.grace.as_millis() as u64,
            rounds: 0,
            targets,
            free: report.is_free(),
            after: report,
        });
    }
    let (mut done, mut seen, mut rounds) = (Vec::new(), HashSet::new(), 0);
    while !targets.is_empty() && rounds < MAX_ROUNDS {
        // Orphans found after the first round started holding the path
        // while it was being freed: no second grace.
        let grace = if rounds == 0 {
            opts.grace
        } else {
            Duration::ZERO
        };
        execute(&mut targets, grace);
        rounds += 1;
        seen.extend(targets.iter().map(|t| (t.pid, t.start_time)));
        done.append(&mut targets);
        let (now, mut fresh) = find(&under, install, ledger, opts);
        fresh.retain(|t| !seen.contains(&(t.pid, t.start_time)));
        report = now;
        targets = fresh;
    }
    Ok(HoldingReap {
        dry_run: false,
        grace_ms: opts.grace.as_millis() as u64,
        rounds,
        targets: done,
        free: report.is_free(),
        after: report,
    })
}

/// One scan: the holders of the path `under` resolved (compared by path
/// text and by identity: see [`HeldUnder`]), classified, and the reaper's
/// targets among them.
fn find(
    under: &HeldUnder,
    install: &str,
    ledger: LedgerView<'_>,
    opts: &ReapOptions,
) -> (HoldingReport, Vec<Target>) {
    let me = std::process::id();
    let uid = sys::current_uid();
    let mut report = HoldingReport {
        path: under.path().to_path_buf(),
        holders: Vec::new(),
        uninspectable: Vec::new(),
        other_users_not_inspected: 0,
        unsupported: None,
        scanned: 0,
    };
    let mut found: Vec<(u32, Vec<Held>)> = Vec::new();
    for pid in sys::all_pids() {
        if pid == me {
            continue;
        }
        report.scanned += 1;
        match under.held_by(pid) {
            Ok(held) => {
                if !held.is_empty() {
                    found.push((pid, held));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                report.unsupported = Some(e.to_string());
                return (report, Vec::new());
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                if sys::real_uid(pid).is_ok_and(|u| u == uid) {
                    report.uninspectable.push(Uninspected {
                        pid,
                        command: sys::describe(pid),
                    });
                } else {
                    report.other_users_not_inspected += 1;
                }
            }
            Err(_) => {} // gone meanwhile
        }
    }
    if found.is_empty() {
        return (report, Vec::new());
    }
    // The reaper's plan decides every tagged holder of this install.
    let planned = plan(install, ledger, opts);
    let targets: HashMap<(u32, u64), Target> = planned
        .targets
        .into_iter()
        .map(|t| ((t.pid, t.start_time), t))
        .collect();
    let skipped: HashMap<u32, SkipReason> = planned
        .skipped
        .into_iter()
        .map(|s| (s.pid, s.reason))
        .collect();
    let untagged_registered: HashSet<u32> =
        crate::registration::untagged_skips(install, ledger.registrations)
            .into_iter()
            .map(|s| s.pid)
            .collect();
    let mut prover = Prover::new(ledger.owners);
    let mut chosen = Vec::new();
    for (pid, under) in found {
        let Ok(info) = sys::process(pid) else {
            continue;
        };
        if info.has_exited() {
            continue;
        }
        let holder_uid = sys::real_uid(pid).unwrap_or(u32::MAX);
        let tag = sys::spawn_tag(pid);
        let verdict = if let Some(t) = targets.get(&(pid, info.start_time)) {
            chosen.push(t.clone());
            Verdict::Orphan
        } else if let Some(reason) = skipped.get(&pid) {
            Verdict::Spared {
                reason: reason.clone(),
            }
        } else if holder_uid != uid {
            Verdict::OtherUser
        } else if untagged_registered.contains(&pid) {
            Verdict::Spared {
                reason: SkipReason::RegisteredWithoutTag,
            }
        } else {
            match &tag {
                Some(t) if t.install != install => Verdict::OtherInstall,
                _ => Verdict::Untagged,
            }
        };
        let owner = tag.as_ref().map(|t| owner_entry(pid, t, &mut prover));
        let held_count = under.len();
        report.holders.push(Holder {
            pid,
            start_time: info.start_time,
            uid: holder_uid,
            command: sys::describe(pid),
            parent: Relative {
                pid: info.ppid,
                command: if info.ppid == 0 {
                    String::new()
                } else {
                    sys::describe(info.ppid)
                },
            },
            holds: under
                .into_iter()
                .take(LISTED_PER_HOLDER)
                .map(|h| HeldEntry {
                    how: h.how.word(),
                    path: h.path,
                    deleted: h.deleted,
                })
                .collect(),
            held_count,
            tag: tag.as_ref().map(|t| TagEntry {
                install: t.install.clone(),
                purpose: t.purpose.clone(),
                session: t.session.clone(),
                durable_name: ledger
                    .durable
                    .iter()
                    .find(|d| d.session == t.session)
                    .and_then(|d| d.name.clone()),
            }),
            owner,
            verdict,
        });
    }
    report.holders.sort_by_key(|h| h.pid);
    (report, chosen)
}

/// The owner `tag` names, judged from the holder `pid` as `ps` and `reap`
/// judge it ([`Prover::standing`]).
fn owner_entry(pid: u32, tag: &SpawnTag, prover: &mut Prover) -> OwnerEntry {
    let status = prover.standing(pid, tag).status();
    let command = if status == OwnerStatus::Alive {
        sys::describe(tag.owner_pid)
    } else {
        String::new()
    };
    OwnerEntry {
        pid: tag.owner_pid,
        start_time: tag.owner_start,
        status,
        command,
    }
}

/// [`holders`] and [`reap_holding`] with the install's ledger where it can
/// be opened (what `tether ps --holding` and `tether reap --holding` run).
/// Returns the ledger's error alongside, if any: then tags alone decided.
pub fn with_ledger<T>(
    install: &tether::Install,
    run: impl FnOnce(LedgerView<'_>) -> T,
) -> (T, Option<crate::LedgerError>) {
    let rows = crate::Ledger::open(install).and_then(|l| {
        Ok((
            l.owners()?,
            l.sessions()?,
            l.registrations()?,
            l.durable_sessions()?,
        ))
    });
    let (rows, error) = match rows {
        Ok(rows) => (rows, None),
        Err(e) => (Default::default(), Some(e)),
    };
    let view = LedgerView {
        owners: &rows.0,
        sessions: &rows.1,
        registrations: &rows.2,
        durable: &rows.3,
    };
    (run(view), error)
}

#[cfg(all(test, windows))]
mod windows_tests {
    use super::*;
    use std::io::Read;
    use std::process::{Command, Stdio};

    /// The child of `finds_a_process_by_its_working_directory`: this test
    /// binary again, parked in a directory until its stdin closes.
    #[test]
    #[ignore = "run as a child by finds_a_process_by_its_working_directory"]
    fn park_until_stdin_closes() {
        let _ = std::io::stdin().read(&mut [0u8; 1]);
    }

    #[test]
    fn finds_a_process_by_its_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "holding::windows_tests::park_until_stdin_closes",
            ])
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // libtest's first line proves the child is running its main.
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("running") {
            line.clear();
            let n = std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
            assert!(n > 0, "the child exited before it ran");
        }
        let opts = ReapOptions {
            dry_run: true,
            ..ReapOptions::default()
        };
        let report = holders(dir.path(), "holding-test", LedgerView::default(), &opts);
        drop(child.stdin.take());
        child.wait().unwrap();
        let report = report.unwrap();
        assert!(report.unsupported.is_none(), "{:?}", report.unsupported);
        let holder = report
            .holders
            .iter()
            .find(|h| h.pid == child.id())
            .unwrap_or_else(|| panic!("{report:#?} lacks pid {}", child.id()));
        assert!(holder.holds.iter().any(|h| h.how == "cwd"), "{holder:#?}");
        assert_eq!(holder.verdict, Verdict::Untagged, "{holder:#?}");
        assert!(
            !report.path.to_string_lossy().starts_with(r"\\?\"),
            "{:?}",
            report.path
        );
    }
}
