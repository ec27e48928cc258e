//! Recording an owner and its sessions in the ledger — one recorder for
//! every front-end: `tether run` records its one [`tether::Child`], and a
//! [`tether::registry::Registry`] records every session through the
//! recorder as its [`SessionObserver`].

use std::sync::Mutex;

use tether::Install;
use tether::registry::{SessionInfo, SessionObserver, SessionState};

use crate::clock::now_ms;
use crate::{Ledger, LedgerError, Outcome, OwnerId, OwnerRecord, Result, SessionStart};

/// Registers this process as an owner and records its sessions: one row
/// at start, its outcome once it ended. Attach it to a registry as its
/// observer (`RegistryConfig::observer`), or call
/// [`record_start`](Recorder::record_start) and
/// [`record_end`](Recorder::record_end) yourself.
///
/// Best effort by design: a write that fails is reported once on stderr
/// and the session runs on — its processes still carry spawn tags, which
/// is what `tether ps` and `tether reap` rely on most.
pub struct Recorder {
    state: Mutex<(Ledger, OwnerId, bool)>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

impl Recorder {
    /// Opens the install's ledger to record into it
    /// ([`Ledger::open_to_record`]: without reading every page) and
    /// registers this process as an owner with `purpose` (`mcp`, …).
    ///
    /// # Errors
    /// As [`Ledger::open`] and [`Ledger::register_owner`];
    /// [`LedgerError::Io`] if this process's own identity cannot be read.
    /// A front-end that gets one runs on without a ledger: spawn tags still
    /// mark every process.
    pub fn register(install: &Install, purpose: &str) -> Result<Recorder> {
        let PendingOwner { mut ledger, owner } = Recorder::prepare(install, purpose)?;
        let owner = ledger.register_owner(&owner)?;
        Ok(Recorder {
            state: Mutex::new((ledger, owner, false)),
        })
    }

    /// Opens the ledger and reads this process's identity as
    /// [`register`](Recorder::register) does, but writes nothing yet: the
    /// owner is registered with its first session, in one write
    /// ([`PendingOwner::register_with`]). What an owner of one command does
    /// (`tether run`): the open while the command starts, the write once it
    /// has.
    ///
    /// # Errors
    /// As [`register`](Recorder::register), but for the write.
    pub fn prepare(install: &Install, purpose: &str) -> Result<PendingOwner> {
        let ledger = Ledger::open_to_record(install)?;
        let owner = OwnerRecord::current(install, purpose).map_err(|source| LedgerError::Io {
            path: "(this process)".into(),
            source,
        })?;
        Ok(PendingOwner { ledger, owner })
    }

    /// Records a session that started (best effort).
    pub fn record_start(&self, session: &SessionStart) {
        self.with_ledger(|ledger, owner| ledger.record_session_start(owner, session));
    }

    /// Records how a session ended (best effort).
    pub fn record_end(&self, id: &tether::SessionId, outcome: Outcome) {
        self.with_ledger(|ledger, _| ledger.record_session_end(id, outcome).map(|_| ()));
    }

    /// Records how the owner's last session ended (and the limit it ran
    /// into, if any) and that the owner is done, in one write (what an
    /// owner of one command does at its end).
    pub fn finish_after(
        &self,
        id: &tether::SessionId,
        outcome: Outcome,
        limit_hit: Option<tether::LimitHit>,
    ) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (ledger, owner, _) = &mut *state;
        let result = ledger
            .record_session_and_owner_end(*owner, id, outcome, limit_hit)
            .map(|_| ());
        warn_once(&mut state.2, result);
    }

    /// Records the limit a session ran into (best effort; nothing for
    /// `None`).
    pub fn record_limit_hit(&self, id: &tether::SessionId, hit: Option<tether::LimitHit>) {
        if let Some(hit) = hit {
            self.with_ledger(|ledger, _| ledger.record_limit_hit(id, hit).map(|_| ()));
        }
    }

    /// Records that this owner is done (call at a clean shutdown).
    pub fn finish(&self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (ledger, owner, _) = &mut *state;
        let result = ledger.record_owner_end(*owner);
        warn_once(&mut state.2, result);
    }

    fn with_ledger(&self, write: impl FnOnce(&mut Ledger, OwnerId) -> Result<()>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (ledger, owner, _) = &mut *state;
        let result = write(ledger, *owner);
        warn_once(&mut state.2, result);
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
    /// write; the recorder then records the rest as
    /// [`Recorder::register`]'s does.
    ///
    /// # Errors
    /// As [`Ledger::register_owner_with_session`].
    pub fn register_with(self, session: &SessionStart) -> Result<Recorder> {
        let PendingOwner { mut ledger, owner } = self;
        let owner = ledger.register_owner_with_session(&owner, session)?;
        Ok(Recorder {
            state: Mutex::new((ledger, owner, false)),
        })
    }
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
        self.record_end(&info.id, outcome(info));
        self.record_limit_hit(&info.id, info.limit_hit);
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
        recording: std::thread::JoinHandle<Option<Recorder>>,
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
                if let Some(recorder) = recording.join().ok().flatten() {
                    recorder.finish_after(id, outcome, status.limit_hit());
                }
            }
            #[cfg(unix)]
            _ => {}
        }
    }
}
