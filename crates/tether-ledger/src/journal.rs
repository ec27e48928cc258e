//! Run journals: how an owner of one command (`tether run`) records itself
//! without opening the store.
//!
//! Opening the SQLite store, reading its schema, writing two transactions
//! and checkpointing the WAL as the last connection closes cost ~0.9 ms of
//! CPU per `tether run` — more than the rest of tether's own work for a
//! short command. A run writes a journal instead: one small file,
//! `<state dir>/runs/<session>.run`, created 0600 with `O_EXCL`, locked
//! (`flock`) for as long as the run lives, holding one JSON line when the
//! command started (the owner and its session, exactly what the store
//! would get) and one more when it ended. That is one `open`, one `flock`,
//! two `write`s and a `close`.
//!
//! Every open of the store folds the journals in first ([`collect`], then
//! the store writes them in one transaction, then [`settle`]), so whatever
//! reads the ledger — `tether ps`, `tether reap`, `tether doctor`, the
//! census, a recorder — sees every run, live or ended, as if the run had
//! written the store itself:
//!
//! - **Lock free: the run is over** (it ended, or died, even by
//!   `SIGKILL`: the kernel drops its lock). Its lines are written and the
//!   journal is removed.
//! - **Locked: the run is live.** Its lines are written and the journal
//!   stays for the run's end line.
//! - Writing is idempotent and only ever adds: an owner or session already
//!   in the store is kept, and an end is written only onto a session with
//!   none. Two openers folding the same journal at once (one holds the
//!   lock, the other takes it for a live run) write the same rows.
//! - A journal whose lines cannot be read is never trusted: renamed
//!   `<name>.bad` once its run is over, and left out. One without a whole
//!   start line is left alone for [`ABANDONED_AFTER`] (its run may be
//!   between `open` and its first write), then removed.
//! - Journals pile up only while nothing opens the store; a run folds them
//!   itself one time in [`FOLD_ONE_IN`] (see [`RunJournal::finish`]), so a
//!   script of short runs and nothing else keeps a few hundred at most.
//!
//! The journal is attacker-shaped input like the store (a process of this
//! user can write either): it decides no kill by itself, every kill is
//! re-proven against the live process.
//!
//! Unix only: on Windows a locked file cannot be read by another process,
//! so `tether run` there records into the store directly.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tether::{Install, ProcessIdentity, SessionId};

use crate::clock::now_ms;
use crate::error::{LedgerError, Result};
use crate::records::{Outcome, OwnerRecord, SessionStart};
use crate::state_dir;

/// The directory of run journals inside the state directory.
pub const RUNS_DIR: &str = "runs";
const EXTENSION: &str = "run";

/// A journal longer than this is not one of ours (a start line of a
/// command with 16 arguments of 512 bytes is under 10 KiB).
const MAX_JOURNAL_BYTES: u64 = 64 * 1024;

/// How long a journal without a whole start line is left alone.
pub const ABANDONED_AFTER: Duration = Duration::from_secs(60);

/// One run in this many folds the journals itself at its end.
pub const FOLD_ONE_IN: u64 = 256;

/// A run's journal, locked while it lives: see the module docs.
#[derive(Debug)]
pub struct RunJournal {
    file: File,
    install: Install,
    session: SessionId,
}

/// What a run has ready before its command starts: the checked journal
/// directory and its owner record. See [`RunJournal::prepare`].
#[derive(Debug)]
pub struct PendingRun {
    dir: PathBuf,
    install: Install,
    owner: OwnerRecord,
}

impl RunJournal {
    /// Checks (creating if needed) the state directory and its `runs/`
    /// directory, and reads this process's owner record with `purpose`.
    /// Nothing is written until [`PendingRun::start`].
    ///
    /// # Errors
    /// As [`Ledger::open`](crate::Ledger::open) for the directories
    /// ([`LedgerError::Insecure`], [`LedgerError::Io`]); [`LedgerError::Io`]
    /// if this process's identity cannot be read.
    pub fn prepare(install: &Install, purpose: &str) -> Result<PendingRun> {
        let dir = install.state_dir().join(RUNS_DIR);
        state_dir::secure_dir(install.state_dir())?;
        state_dir::secure_dir(&dir)?;
        let owner = OwnerRecord::current(install, purpose).map_err(|source| LedgerError::Io {
            path: "(this process)".into(),
            source,
        })?;
        Ok(PendingRun {
            dir,
            install: install.clone(),
            owner,
        })
    }

    /// Appends how the session ended (and the limit it ran into) and
    /// releases the journal: the run is over. One run in [`FOLD_ONE_IN`]
    /// (chosen by its random session id) then opens the store, which folds
    /// every journal of runs that are over — best effort: if the store
    /// cannot be opened, the journals wait for the next open, which says
    /// why.
    ///
    /// # Errors
    /// [`LedgerError::Io`] if the line cannot be written (the journal then
    /// says the run ended without saying how, as after a `SIGKILL`).
    pub fn finish(self, outcome: Outcome, limit_hit: Option<tether::LimitHit>) -> Result<()> {
        let (install, session) = (self.install.clone(), self.session.clone());
        self.close(Some((outcome, limit_hit)))?;
        if fold_turn(&session) {
            let _ = crate::Ledger::open_to_record(&install);
        }
        Ok(())
    }

    /// Appends the end line, if there is one, and releases the journal,
    /// without ever opening the store: what a recorder does at its owner's
    /// end with the writes the store has not taken yet (another process
    /// holds its lock), so its shutdown never waits on the store.
    pub(crate) fn close(self, end: Option<(Outcome, Option<tether::LimitHit>)>) -> Result<()> {
        let RunJournal {
            mut file,
            install,
            session,
        } = self;
        let Some((outcome, limit_hit)) = end else {
            // Closing drops the lock: a run over without saying how.
            return Ok(());
        };
        let (kind, code, signal) = outcome.columns();
        let line = Line {
            start: None,
            end: Some(EndLine {
                at_ms: now_ms(),
                outcome: kind.to_owned(),
                code,
                signal,
                limit_hit: limit_hit.map(|hit| hit.name().to_owned()),
            }),
        };
        let written = file.write_all(&line.to_bytes());
        // Closing drops the lock: the run is over either way.
        drop(file);
        written.map_err(|source| LedgerError::Io {
            path: journal_path(&install, &session),
            source,
        })
    }
}

impl PendingRun {
    /// Creates the run's journal (0600, `O_EXCL`), locks it and writes the
    /// start line: the owner and `session`.
    ///
    /// # Errors
    /// [`LedgerError::Io`] if it cannot be created, locked or written
    /// (nothing is left behind then).
    pub fn start(self, session: &SessionStart) -> Result<RunJournal> {
        let path = self.dir.join(format!("{}.{EXTENSION}", session.id));
        let io = |source| LedgerError::Io {
            path: path.clone(),
            source,
        };
        let mut file = state_dir::create_new_private(&path).map_err(io)?;
        let line = Line {
            start: Some(StartLine::of(&self.owner, session)),
            end: None,
        };
        let written = file.lock().and_then(|()| file.write_all(&line.to_bytes()));
        if let Err(e) = written {
            let _ = fs::remove_file(&path);
            return Err(io(e));
        }
        Ok(RunJournal {
            file,
            install: self.install,
            session: session.id.clone(),
        })
    }
}

/// Whether this run folds the journals as it ends: one in
/// [`FOLD_ONE_IN`], by its session id (random).
fn fold_turn(session: &SessionId) -> bool {
    let hash = session
        .as_str()
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    hash % FOLD_ONE_IN == 0
}

fn journal_path(install: &Install, session: &SessionId) -> PathBuf {
    install
        .state_dir()
        .join(RUNS_DIR)
        .join(format!("{session}.{EXTENSION}"))
}

/// One line of a journal: a start or an end.
#[derive(Serialize, Deserialize)]
struct Line {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start: Option<StartLine>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end: Option<EndLine>,
}

impl Line {
    fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(self).expect("a journal line serializes");
        bytes.push(b'\n');
        bytes
    }
}

#[derive(Serialize, Deserialize)]
struct Identity {
    boot_id: String,
    pid: u32,
    start_time: u64,
    pidfs_inode: Option<u64>,
}

impl Identity {
    fn of(id: &ProcessIdentity) -> Identity {
        Identity {
            boot_id: id.boot_id.clone(),
            pid: id.pid,
            start_time: id.start_time,
            pidfs_inode: id.pidfs_inode,
        }
    }

    fn into_identity(self) -> ProcessIdentity {
        ProcessIdentity {
            boot_id: self.boot_id,
            pid: self.pid,
            start_time: self.start_time,
            pidfs_inode: self.pidfs_inode,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct StartLine {
    owner: Identity,
    install: String,
    owner_purpose: String,
    argv: Vec<String>,
    uid: u32,
    owner_started_at_ms: u64,
    session: String,
    purpose: String,
    containment: Option<String>,
    command: Vec<String>,
    cwd: Option<PathBuf>,
    main: Option<Identity>,
    keeper: Option<Identity>,
    started_at_ms: u64,
    limits: Option<crate::LimitsRecord>,
    cgroups: Vec<String>,
}

impl StartLine {
    fn of(owner: &OwnerRecord, s: &SessionStart) -> StartLine {
        StartLine {
            owner: Identity::of(&owner.identity),
            install: owner.install.clone(),
            owner_purpose: owner.purpose.clone(),
            argv: owner.argv.clone(),
            uid: owner.uid,
            owner_started_at_ms: owner.started_at_ms,
            session: s.id.to_string(),
            purpose: s.purpose.clone(),
            containment: s.containment.clone(),
            command: s.command.clone(),
            cwd: s.cwd.clone(),
            main: s.main.as_ref().map(Identity::of),
            keeper: s.keeper.as_ref().map(Identity::of),
            started_at_ms: s.started_at_ms,
            limits: s.limits.clone(),
            cgroups: s.cgroups.clone(),
        }
    }

    /// The records, if they are well formed and of `install` (bounded like
    /// records written directly).
    fn into_records(self, install: &str) -> Option<(OwnerRecord, SessionStart)> {
        if self.install != install {
            return None;
        }
        let id = SessionId::parse(&self.session)?;
        let owner = OwnerRecord {
            identity: self.owner.into_identity(),
            install: self.install,
            purpose: self.owner_purpose,
            argv: crate::records::bounded_argv(self.argv.into_iter()),
            uid: self.uid,
            started_at_ms: self.owner_started_at_ms,
        };
        let session = SessionStart {
            id,
            purpose: self.purpose,
            containment: self.containment,
            command: crate::records::bounded_argv(self.command.into_iter()),
            cwd: self.cwd,
            main: self.main.map(Identity::into_identity),
            keeper: self.keeper.map(Identity::into_identity),
            started_at_ms: self.started_at_ms,
            limits: self.limits,
            cgroups: self.cgroups,
        };
        Some((owner, session))
    }
}

#[derive(Serialize, Deserialize)]
struct EndLine {
    at_ms: u64,
    outcome: String,
    code: Option<i32>,
    signal: Option<i32>,
    limit_hit: Option<String>,
}

/// How a folded run ended.
#[derive(Debug)]
pub(crate) struct RunEnd {
    pub at_ms: u64,
    pub outcome: Outcome,
    pub limit_hit: Option<&'static str>,
}

/// What a journal says: its run's owner and session, and how it ended.
#[derive(Debug)]
pub(crate) struct RunRecord {
    pub owner: OwnerRecord,
    pub session: SessionStart,
    pub end: Option<RunEnd>,
}

/// A journal read by [`collect`].
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    /// Held (with the lock, when `over`) until [`settle`].
    _file: File,
    /// Its run is over: the lock was free.
    over: bool,
    pub(crate) state: JournalState,
}

#[derive(Debug)]
pub(crate) enum JournalState {
    /// A start line, and the end line if there is one.
    Read(Box<RunRecord>),
    /// No whole line yet, written this long ago.
    Empty { age: Duration },
    /// Lines that are not a journal's (or of another install).
    Bad,
}

/// Reads every journal in the state directory `dir` (none if it has no
/// `runs/`), taking the lock of each whose run is over.
///
/// # Errors
/// [`LedgerError::Insecure`] / [`LedgerError::Io`] if `runs/` is not this
/// user's alone or cannot be listed; a journal that cannot be opened or
/// read is skipped (the next fold tries again).
pub(crate) fn collect(dir: &Path, install: &str) -> Result<Vec<Journal>> {
    let runs = dir.join(RUNS_DIR);
    let listing = match fs::read_dir(&runs) {
        Ok(listing) => listing,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(LedgerError::Io { path: runs, source }),
    };
    state_dir::secure_dir(&runs)?;
    let mut journals = Vec::new();
    for entry in listing.flatten() {
        let path = entry.path();
        let ours = path.extension().is_some_and(|e| e == EXTENSION)
            && path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(SessionId::parse)
                .is_some();
        if !ours || state_dir::secure_file(&path).is_err() {
            continue;
        }
        if let Some(journal) = read_journal(path, install) {
            journals.push(journal);
        }
    }
    Ok(journals)
}

fn read_journal(path: PathBuf, install: &str) -> Option<Journal> {
    let mut file = File::open(&path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let over = match file.try_lock() {
        Ok(()) => true,
        Err(fs::TryLockError::WouldBlock) => false,
        Err(fs::TryLockError::Error(_)) => return None,
    };
    let mut text = Vec::new();
    (&mut file)
        .take(MAX_JOURNAL_BYTES + 1)
        .read_to_end(&mut text)
        .ok()?;
    let state = if text.len() as u64 > MAX_JOURNAL_BYTES {
        JournalState::Bad
    } else {
        parse(&text, install).unwrap_or_else(|| {
            let age = meta
                .modified()
                .ok()
                .and_then(|m| m.elapsed().ok())
                .unwrap_or_default();
            match text.iter().position(|b| *b == b'\n') {
                None => JournalState::Empty { age },
                Some(_) => JournalState::Bad,
            }
        })
    };
    Some(Journal {
        path,
        _file: file,
        over,
        state,
    })
}

/// The journal's records; `None` if it has no whole line, or lines that are
/// not a start line of `install` followed by at most an end line.
fn parse(text: &[u8], install: &str) -> Option<JournalState> {
    // Only whole lines: a run may be writing the next one.
    let whole = &text[..text.iter().rposition(|b| *b == b'\n')? + 1];
    let mut lines = whole
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice::<Line>(l).ok());
    let start = lines.next()??.start?;
    let end = match lines.next() {
        None => None,
        Some(line) => Some(line?.end?),
    };
    if lines.next().is_some() {
        return None;
    }
    let (owner, session) = start.into_records(install)?;
    let end = match end {
        None => None,
        Some(e) => Some(RunEnd {
            at_ms: e.at_ms,
            outcome: Outcome::from_columns(&e.outcome, e.code, e.signal)?,
            limit_hit: match e.limit_hit.as_deref() {
                None => None,
                Some("memory") => Some("memory"),
                Some("pids") => Some("pids"),
                Some(_) => return None,
            },
        }),
    };
    Some(JournalState::Read(Box::new(RunRecord {
        owner,
        session,
        end,
    })))
}

/// After the store committed what `journals` say: removes those whose run
/// is over, renames the unreadable ones `<name>.bad`, removes the empty
/// ones older than [`ABANDONED_AFTER`]; leaves live runs' journals.
pub(crate) fn settle(journals: Vec<Journal>) {
    for journal in journals {
        if !journal.over {
            continue;
        }
        match journal.state {
            JournalState::Read(_) => {
                let _ = fs::remove_file(&journal.path);
            }
            JournalState::Empty { age } if age >= ABANDONED_AFTER => {
                let _ = fs::remove_file(&journal.path);
            }
            JournalState::Empty { .. } => {}
            JournalState::Bad => {
                let mut bad = journal.path.clone().into_os_string();
                bad.push(".bad");
                let _ = fs::rename(&journal.path, bad);
            }
        }
        // The lock goes with the file, after the name did.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> OwnerRecord {
        OwnerRecord {
            identity: ProcessIdentity {
                boot_id: "boot".into(),
                pid: 42,
                start_time: 7,
                pidfs_inode: Some(9),
            },
            install: "inst".into(),
            purpose: "run".into(),
            argv: vec!["tether".into(), "run".into()],
            uid: 1000,
            started_at_ms: 5,
        }
    }

    fn start_bytes() -> Vec<u8> {
        let session = SessionStart::new(SessionId::parse("abc").unwrap(), "run");
        Line {
            start: Some(StartLine::of(&owner(), &session)),
            end: None,
        }
        .to_bytes()
    }

    fn end_bytes(outcome: &str, code: Option<i32>) -> Vec<u8> {
        Line {
            start: None,
            end: Some(EndLine {
                at_ms: 11,
                outcome: outcome.into(),
                code,
                signal: None,
                limit_hit: None,
            }),
        }
        .to_bytes()
    }

    #[test]
    fn a_start_and_an_end_read_back() {
        let mut text = start_bytes();
        text.extend(end_bytes("exited", Some(3)));
        let Some(JournalState::Read(record)) = parse(&text, "inst") else {
            panic!("not read");
        };
        let RunRecord {
            owner: o,
            session,
            end,
        } = *record;
        assert_eq!(o.identity, owner().identity);
        assert_eq!(session.id.as_str(), "abc");
        let end = end.unwrap();
        assert_eq!(end.at_ms, 11);
        assert!(matches!(end.outcome, Outcome::Exited { code: 3 }));
    }

    #[test]
    fn a_partial_line_is_not_read_and_bad_lines_are_refused() {
        let mut text = start_bytes();
        let partial = end_bytes("exited", Some(3));
        text.extend(&partial[..partial.len() - 4]);
        assert!(matches!(
            parse(&text, "inst"),
            Some(JournalState::Read(r)) if r.end.is_none()
        ));
        // Another install's, an unknown outcome, a third line, garbage.
        assert!(parse(&start_bytes(), "other").is_none());
        let mut unknown = start_bytes();
        unknown.extend(end_bytes("vanished", None));
        assert!(parse(&unknown, "inst").is_none());
        let mut three = start_bytes();
        three.extend(end_bytes("killed", None));
        three.extend(end_bytes("killed", None));
        assert!(parse(&three, "inst").is_none());
        assert!(parse(b"{\"start\": 1}\n", "inst").is_none());
        assert!(parse(b"no newline yet", "inst").is_none());
    }

    #[test]
    fn about_one_run_in_fold_one_in_folds() {
        let n = 20_000;
        let folding = (0..n).filter(|_| fold_turn(&SessionId::generate())).count() as u64;
        let expected = n / FOLD_ONE_IN;
        assert!(
            (expected / 3..=expected * 3).contains(&folding),
            "{folding} of {n} folded"
        );
    }
}
