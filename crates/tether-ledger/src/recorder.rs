//! Recording an owner and its sessions in the ledger — one recorder for
//! every front-end: `tether run` records its one [`tether::Child`], and a
//! [`tether::registry::Registry`] records every session through the
//! recorder as its [`SessionObserver`].
//!
//! # Nothing waits on the store
//!
//! Another process can hold the store's write lock for long — a `tether
//! reap` or `tether ps` stopped with Ctrl-Z mid-transaction did in 7 of 400
//! random stops — and SQLite then waits up to [`BUSY_TIMEOUT`] per write.
//! When the recorder wrote on its caller's thread, each `tether mcp` `run`
//! held the whole server for those 10 s (`run echo hi` answered after
//! 20.0 s, a `list` behind it after 9.8 s, shutdown on stdin EOF 10.0 s;
//! issue 34). So a [`Recorder`] hands every write to a thread of its own,
//! which opens the store and writes in order; its callers only queue. At
//! the owner's end, [`Recorder::finish`] waits for that thread only when it
//! has nothing left to do but the owner's end; writes still queued (the
//! lock is held elsewhere) go into run journals instead (see
//! `journal.rs`: a file each, no lock on the store), which the next open
//! of the store folds in — so the owner ends at once, and its sessions are
//! in the ledger once the lock is free.
//!
//! [`BUSY_TIMEOUT`]: crate::BUSY_TIMEOUT

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tether::registry::{SessionInfo, SessionObserver, SessionState};
use tether::{Install, SessionId};

use crate::clock::now_ms;
use crate::{Ledger, LedgerError, Outcome, OwnerId, OwnerRecord, Result, SessionStart};

/// Registers this process as an owner and records its sessions: one row
/// at start, its outcome once it ended. Attach it to a registry as its
/// observer (`RegistryConfig::observer`), or call
/// [`record_start`](Recorder::record_start) and
/// [`record_end`](Recorder::record_end) yourself.
///
/// Never blocks its caller on the store: writes go to a thread of the
/// recorder's own, in order (see the module docs); call
/// [`finish`](Recorder::finish) at the owner's end.
///
/// Best effort by design: a write that fails is reported once on stderr
/// and the session runs on — its processes still carry spawn tags, which
/// is what `tether ps` and `tether reap` rely on most.
pub struct Recorder {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

/// What the recorder's callers and its writing thread share.
struct Shared {
    state: Mutex<Queue>,
    /// Signalled when a write is queued, taken, or done.
    changed: Condvar,
    install: Install,
    purpose: String,
}

/// The writes not yet in the store.
#[derive(Default)]
struct Queue {
    /// In order; the front one stays here while it is being written, so
    /// [`Recorder::finish`] can journal it if the store holds it up.
    writes: VecDeque<Write>,
    /// The thread is opening the store or writing the front write.
    busy: bool,
    /// The store is open and the owner registered.
    ready: bool,
    /// The store cannot be used (warned about): writes are dropped.
    failed: bool,
    /// `finish` ran: the thread stops.
    closed: bool,
    /// Writes the store refused (another process held its lock beyond
    /// the busy timeout): journaled by `finish`, in order.
    refused: Vec<Write>,
    /// Every session whose end is not in the store yet: a journal needs
    /// its start.
    sessions: HashMap<SessionId, SessionStart>,
    warned: bool,
}

#[derive(Clone, Debug)]
enum Write {
    Start(Box<SessionStart>),
    End {
        id: SessionId,
        outcome: Outcome,
        limit_hit: Option<tether::LimitHit>,
    },
    LimitHit {
        id: SessionId,
        hit: tether::LimitHit,
    },
    OwnerEnd,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, write: Write) {
        let mut queue = self.lock();
        if queue.failed || queue.closed {
            return;
        }
        if let Write::Start(session) = &write {
            queue
                .sessions
                .insert(session.id.clone(), SessionStart::clone(session));
        }
        queue.writes.push_back(write);
        drop(queue);
        self.changed.notify_all();
    }

    /// The writing thread: opens the store, registers the owner, then
    /// writes what is queued, in order, until `finish`.
    fn write_all(&self) {
        let Some((mut ledger, owner)) = self.open() else {
            return;
        };
        loop {
            let mut queue = self.lock();
            while queue.writes.is_empty() && !queue.closed {
                queue = self.changed.wait(queue).unwrap_or_else(|e| e.into_inner());
            }
            // Closed: what is still queued was journaled by `finish`
            // (or, for the owner's end alone, is written here first).
            let Some(write) = queue.writes.front().cloned() else {
                return;
            };
            if queue.closed && !matches!(write, Write::OwnerEnd) {
                return;
            }
            queue.busy = true;
            drop(queue);
            let result = match &write {
                Write::Start(session) => ledger.record_session_start(owner, session),
                Write::End {
                    id,
                    outcome,
                    limit_hit,
                } => ledger
                    .record_session_end(id, *outcome)
                    .and_then(|_| match limit_hit {
                        Some(hit) => ledger.record_limit_hit(id, *hit).map(|_| ()),
                        None => Ok(()),
                    }),
                Write::LimitHit { id, hit } => ledger.record_limit_hit(id, *hit).map(|_| ()),
                // Not warned about: an owner whose end is not written is
                // judged by its identity.
                Write::OwnerEnd => {
                    let _ = ledger.record_owner_end_now(owner);
                    Ok(())
                }
            };
            let mut queue = self.lock();
            queue.busy = false;
            queue.writes.pop_front();
            match result {
                Ok(()) => {
                    if let Write::End { id, .. } = &write {
                        queue.sessions.remove(id);
                    }
                }
                Err(e) => {
                    warn_once(&mut queue.warned, Err(e));
                    queue.refused.push(write);
                }
            }
            drop(queue);
            self.changed.notify_all();
        }
    }

    /// Opens the store and registers the owner (waiting for the store as
    /// long as it takes: nobody waits on this thread — a store locked
    /// beyond the busy timeout is tried again, until `finish`). `None`:
    /// the store cannot be used, said once on stderr, or `finish` came
    /// first.
    fn open(&self) -> Option<(Ledger, OwnerId)> {
        loop {
            self.lock().busy = true;
            let opened = Recorder::prepare(&self.install, &self.purpose).and_then(
                |PendingOwner { mut ledger, owner }| {
                    let owner = ledger.register_owner(&owner)?;
                    Ok((ledger, owner))
                },
            );
            let mut queue = self.lock();
            queue.busy = false;
            let opened = match opened {
                Ok(opened) => {
                    queue.ready = true;
                    Some(opened)
                }
                Err(e) if is_busy(&e) && !queue.closed => continue,
                Err(_) if queue.closed => None,
                Err(e) => {
                    eprintln!("tether: not recording sessions in the ledger: {e}");
                    queue.failed = true;
                    queue.writes.clear();
                    queue.sessions.clear();
                    None
                }
            };
            drop(queue);
            self.changed.notify_all();
            return opened;
        }
    }

    /// The writes the store has not taken, as run journals (see the module
    /// docs): a session whose end is known gets its start and end, one
    /// still running (none should be at the owner's end) its start.
    fn journal(&self, queue: &mut Queue) {
        let mut ends: HashMap<SessionId, (Outcome, Option<tether::LimitHit>)> = HashMap::new();
        let mut pending: Vec<SessionId> = Vec::new();
        let writes: Vec<Write> = queue
            .refused
            .drain(..)
            .chain(queue.writes.drain(..))
            .collect();
        for write in writes {
            match write {
                Write::Start(session) => pending.push(session.id),
                Write::End {
                    id,
                    outcome,
                    limit_hit,
                } => {
                    ends.insert(id.clone(), (outcome, limit_hit));
                    pending.push(id);
                }
                Write::LimitHit { id, hit } => {
                    if let Some((_, limit_hit)) = ends.get_mut(&id) {
                        *limit_hit = Some(hit);
                    }
                }
                Write::OwnerEnd => {}
            }
        }
        let mut seen = std::collections::HashSet::new();
        pending.retain(|id| seen.insert(id.clone()));
        for id in pending {
            let Some(session) = queue.sessions.remove(&id) else {
                continue;
            };
            let journaled = crate::RunJournal::prepare(&self.install, &self.purpose)
                .and_then(|run| run.start(&session))
                .and_then(|journal| journal.close(ends.remove(&id)));
            warn_once(&mut queue.warned, journaled);
        }
    }
}

impl Recorder {
    /// A recorder of `install`'s ledger, this process the owner, with
    /// `purpose` (`mcp`, …). Returns at once: a thread of its own opens the
    /// store ([`Ledger::open_to_record`]: without reading every page) and
    /// registers the owner, and says once on stderr if it cannot (the
    /// sessions then carry only their spawn tags).
    ///
    /// # Errors
    /// [`LedgerError::Io`] if the thread cannot be started.
    pub fn register(install: &Install, purpose: &str) -> Result<Recorder> {
        let shared = Arc::new(Shared {
            state: Mutex::new(Queue::default()),
            changed: Condvar::new(),
            install: install.clone(),
            purpose: purpose.to_owned(),
        });
        let writer = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("tether-ledger".into())
            .spawn(move || writer.write_all())
            .map_err(|source| LedgerError::Io {
                path: "(the ledger's writing thread)".into(),
                source,
            })?;
        Ok(Recorder { shared })
    }

    /// Opens the ledger and reads this process's identity as
    /// [`register`](Recorder::register) does, but writes nothing yet: the
    /// owner is registered with its first session, in one write
    /// ([`PendingOwner::register_with`]). What an owner of one command does
    /// (on Windows, `tether run`, on a thread of its own).
    ///
    /// # Errors
    /// As [`Ledger::open`] and [`LedgerError::Io`] if this process's own
    /// identity cannot be read.
    pub fn prepare(install: &Install, purpose: &str) -> Result<PendingOwner> {
        let ledger = Ledger::open_to_record(install)?;
        let owner = OwnerRecord::current(install, purpose).map_err(|source| LedgerError::Io {
            path: "(this process)".into(),
            source,
        })?;
        Ok(PendingOwner { ledger, owner })
    }

    /// Records a session that started (queued; best effort).
    pub fn record_start(&self, session: &SessionStart) {
        self.shared.push(Write::Start(Box::new(session.clone())));
    }

    /// Records how a session ended (queued; best effort).
    pub fn record_end(&self, id: &tether::SessionId, outcome: Outcome) {
        self.shared.push(Write::End {
            id: id.clone(),
            outcome,
            limit_hit: None,
        });
    }

    /// Records the limit a session ran into (queued; best effort; nothing
    /// for `None`).
    pub fn record_limit_hit(&self, id: &tether::SessionId, hit: Option<tether::LimitHit>) {
        if let Some(hit) = hit {
            self.shared.push(Write::LimitHit {
                id: id.clone(),
                hit,
            });
        }
    }

    /// Records that this owner is done (call at its end), without waiting
    /// on the store: if everything else is written, the owner's end is
    /// written now (one write that gives up at once if another process
    /// holds the store's lock); if writes are still queued — another
    /// process holds the store's lock, or it is not open yet — they go
    /// into run journals instead, for the next open of the store to fold
    /// in (which marks the owner ended with its last session), and this
    /// returns at once. Later records are dropped.
    pub fn finish(&self) {
        self.close(true);
    }

    /// Stops the writing thread: what the store has not taken yet is
    /// journaled (see [`finish`](Recorder::finish)); with `owner_end`, the
    /// owner's end is written when nothing else is pending.
    fn close(&self, owner_end: bool) {
        let shared = &self.shared;
        let mut queue = shared.lock();
        if queue.closed || queue.failed {
            return;
        }
        queue.closed = true;
        let idle = queue.ready && !queue.busy && queue.refused.is_empty();
        if owner_end && idle && queue.writes.is_empty() {
            queue.writes.push_back(Write::OwnerEnd);
            shared.changed.notify_all();
            while !queue.writes.is_empty() && !queue.failed {
                queue = shared
                    .changed
                    .wait(queue)
                    .unwrap_or_else(|e| e.into_inner());
            }
            return;
        }
        shared.journal(&mut queue);
        drop(queue);
        shared.changed.notify_all();
    }
}

impl Drop for Recorder {
    /// Dropped without [`finish`](Recorder::finish): the thread stops, and
    /// what the store has not taken is journaled (whose fold, as every
    /// journal's, marks the owner ended with its last session).
    fn drop(&mut self) {
        self.close(false);
    }
}

/// An owner ready to be registered with its first session: see
/// [`Recorder::prepare`]. Dropped without registering, it writes nothing
/// (an owner whose command never started has nothing to record).
pub struct PendingOwner {
    ledger: Ledger,
    owner: OwnerRecord,
}

impl std::fmt::Debug for PendingOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingOwner")
    }
}

impl PendingOwner {
    /// Registers the owner and records `session`, its first, in one
    /// write, and returns the open ledger and the owner's id, to record
    /// the rest with.
    ///
    /// # Errors
    /// As [`Ledger::register_owner_with_session`].
    pub fn register_with(self, session: &SessionStart) -> Result<(Ledger, OwnerId)> {
        let PendingOwner { mut ledger, owner } = self;
        let owner = ledger.register_owner_with_session(&owner, session)?;
        Ok((ledger, owner))
    }
}

/// Whether `e` is another process holding the store's lock beyond the
/// busy timeout.
fn is_busy(e: &LedgerError) -> bool {
    matches!(
        e,
        LedgerError::Sqlite {
            source: rusqlite::Error::SqliteFailure(failure, _),
            ..
        } if failure.code == rusqlite::ErrorCode::DatabaseBusy
    )
}

fn warn_once(warned: &mut bool, result: Result<()>) {
    if let Err(e) = result
        && !std::mem::replace(warned, true)
    {
        eprintln!("tether: cannot record sessions in the ledger: {e}");
    }
}

/// How a settled session ended, in the ledger's terms.
fn outcome(info: &SessionInfo) -> Outcome {
    match (info.state, info.exit) {
        (SessionState::TimedOut, _) => Outcome::TimedOut,
        (SessionState::Killed, _) => Outcome::Killed,
        (_, Some(status)) => Outcome::of_status(&status),
        (_, None) => Outcome::Killed,
    }
}

impl SessionObserver for Recorder {
    fn started(&self, info: &SessionInfo) {
        let session = SessionStart {
            id: info.id.clone(),
            purpose: info.purpose.clone(),
            containment: Some(info.containment.name().to_owned()),
            command: vec![info.command.clone()],
            cwd: info.cwd.clone(),
            main: Some(info.identity.clone()),
            keeper: None,
            started_at_ms: now_ms(),
            limits: crate::LimitsRecord::of(&info.limits),
            cgroups: info
                .limits
                .cgroups
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
        };
        self.record_start(&session);
    }

    fn settled(&self, info: &SessionInfo) {
        self.shared.push(Write::End {
            id: info.id.clone(),
            outcome: outcome(info),
            limit_hit: info.limit_hit,
        });
    }
}

/// How an owner of one command (`tether run`) records it: best effort —
/// a run whose record cannot be written still runs (its processes carry
/// spawn tags, which is what `tether ps` and `tether reap` need most) and
/// says why once on stderr.
///
/// On Unix, a [`RunJournal`](crate::RunJournal): checked, created and
/// written on the calling thread once the command started (~50 µs, while
/// the command runs on another core; before the spawn it would delay the
/// command), folded in by the next open of the store. On Windows, where
/// another process cannot read a locked file, the store itself, opened at
/// [`begin`](RunRecording::begin) and written once the command started, on
/// a thread of its own (~1 ms of SQLite, and a store locked by another
/// writer must not hold up the run).
#[derive(Debug)]
pub struct RunRecording(Run);

#[derive(Debug)]
enum Run {
    #[cfg(unix)]
    Pending { install: Install, purpose: String },
    #[cfg(unix)]
    Journal(Option<crate::RunJournal>),
    #[cfg(windows)]
    Thread {
        to_record: Option<std::sync::mpsc::Sender<SessionStart>>,
        recording: std::thread::JoinHandle<Option<(Ledger, OwnerId)>>,
    },
}

fn warn_unrecorded(e: LedgerError) {
    eprintln!("tether: warning: this run is not in the ledger: {e}");
}

impl RunRecording {
    /// Before the command is spawned: the owner of `install`, with
    /// `purpose`.
    ///
    /// # Errors
    /// Only if a thread cannot be started (Windows).
    pub fn begin(install: &Install, purpose: &str) -> std::io::Result<RunRecording> {
        #[cfg(unix)]
        {
            Ok(RunRecording(Run::Pending {
                install: install.clone(),
                purpose: purpose.to_owned(),
            }))
        }
        #[cfg(windows)]
        {
            let (to_record, start_of) = std::sync::mpsc::channel::<SessionStart>();
            let (install, purpose) = (install.clone(), purpose.to_owned());
            let recording = std::thread::Builder::new()
                .name("tether-ledger".into())
                .spawn(move || {
                    let pending = Recorder::prepare(&install, &purpose)
                        .map_err(warn_unrecorded)
                        .ok()?;
                    let session = start_of.recv().ok()?;
                    pending
                        .register_with(&session)
                        .map_err(warn_unrecorded)
                        .ok()
                })?;
            Ok(RunRecording(Run::Thread {
                to_record: Some(to_record),
                recording,
            }))
        }
    }

    /// The command did not start: nothing is written.
    pub fn abandon(self) {
        match self.0 {
            #[cfg(windows)]
            Run::Thread {
                to_record,
                recording,
            } => {
                drop(to_record);
                let _ = recording.join();
            }
            #[cfg(unix)]
            _ => {}
        }
    }

    /// The command started as `session` says.
    pub fn started(self, session: SessionStart) -> RunRecording {
        RunRecording(match self.0 {
            #[cfg(unix)]
            Run::Pending { install, purpose } => Run::Journal(
                crate::RunJournal::prepare(&install, &purpose)
                    .and_then(|pending| pending.start(&session))
                    .map_err(warn_unrecorded)
                    .ok(),
            ),
            #[cfg(windows)]
            Run::Thread {
                to_record,
                recording,
            } => {
                if let Some(to_record) = &to_record {
                    let _ = to_record.send(session);
                }
                Run::Thread {
                    to_record: None,
                    recording,
                }
            }
            #[cfg(unix)]
            other => other,
        })
    }

    /// Records how the run's session `id` ended.
    pub fn end(self, id: &tether::SessionId, status: &tether::ExitStatus) {
        let outcome = Outcome::of_status(status);
        match self.0 {
            #[cfg(unix)]
            Run::Journal(Some(journal)) => {
                let _ = id;
                if let Err(e) = journal.finish(outcome, status.limit_hit()) {
                    eprintln!("tether: warning: how this run ended is not in the ledger: {e}");
                }
            }
            #[cfg(windows)]
            Run::Thread { recording, .. } => {
                // The thread is done by now: it had the command's whole
                // run for one write.
                if let Some((mut ledger, owner)) = recording.join().ok().flatten() {
                    let ended = ledger
                        .record_session_and_owner_end(owner, id, outcome, status.limit_hit())
                        .map(|_| ());
                    warn_once(&mut false, ended);
                }
            }
            #[cfg(unix)]
            _ => {}
        }
    }
}
