//! The ledger store: one SQLite file per install, shared by every process
//! of that install.
//!
//! - **Concurrency.** WAL mode (readers never block the writer), a busy
//!   timeout, and short `BEGIN IMMEDIATE` write transactions (taking the
//!   write lock up front, so a transaction never fails half-way on a lock
//!   upgrade). SQLite's locks are released by the kernel when a process
//!   dies, so a writer `SIGKILL`ed mid-transaction leaves the store as it
//!   was before that transaction. No `fsync`: see
//!   [`configure`] for why, crash case by crash case.
//! - **Trust.** The state directory and the ledger's files must be this
//!   user's alone — no symbolic links, owned by the effective uid, not
//!   writable by group or others — or the store is not opened at all
//!   ([`LedgerError::Insecure`], saying what to do; see `state_dir.rs`).
//! - **Creation.** A new store is built completely in a temporary file
//!   (0600 from birth) and hard-linked into place, so `ledger.db` always
//!   has a header and a schema: an empty or short `ledger.db` is damage,
//!   not a fresh store.
//! - **Corruption.** A store that SQLite cannot read as a database, that
//!   fails `PRAGMA quick_check`, or that lacks the ledger's tables is
//!   renamed to `ledger.db.corrupt-<UTC timestamp>` (with its `-wal` and
//!   `-shm`), never emptied or rewritten in place; a fresh store is built
//!   with the live entries rebuilt from the spawn tags of running processes
//!   and a record of the quarantine, which `tether ps` shows. A lock file
//!   serialises quarantine and creation, so two processes finding the same
//!   damage quarantine it once.
//! - **Replacement under a long-lived handle.** Before each write the
//!   handle checks that `ledger.db` is still the file it opened, and
//!   reopens it if another process quarantined it meanwhile.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};
use tether::{Install, ProcessIdentity, SessionId};

use crate::clock::{file_stamp, now_ms};
use crate::error::{LedgerError, Result};
use crate::journal::{self, JournalState, RunRecord};
use crate::records::{
    Outcome, OwnerId, OwnerRecord, OwnerRow, Quarantine, SessionRow, SessionStart, Source,
    join_args, split_args,
};
use crate::registration::{RegistrationRecord, RegistrationRow, SpawnerSource};
use crate::schema::{self, CURRENT_VERSION};
use crate::state_dir;

/// File name of the store inside the state directory.
pub const LEDGER_FILE: &str = "ledger.db";
const LOCK_FILE: &str = "ledger.lock";
const TMP_PREFIX: &str = ".ledger.db.tmp-";

/// How long a write waits for another process's write transaction.
/// Transactions are a few row writes, so contention clears in
/// milliseconds; this bound only matters if a writer is stopped mid-way.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Rows of owners that ended (or of an earlier boot) are kept this long.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// An open ledger store: one SQLite file per install
/// (`<state dir>/`[`LEDGER_FILE`]), shared by every process of that
/// install.
///
/// - **Concurrency.** WAL mode (readers never block the writer), a busy
///   timeout ([`BUSY_TIMEOUT`]), and short `BEGIN IMMEDIATE` write
///   transactions. SQLite's locks are released by the kernel when a
///   process dies, so a writer `SIGKILL`ed mid-transaction leaves the store
///   as it was before that transaction, and nothing committed is lost.
///   No `fsync` (`synchronous = OFF`: syncing cost most of a `tether run`):
///   a power loss or kernel crash may lose recent transactions or damage
///   the file — rows that only name processes of the boot that ended; the
///   next open finds the damage, quarantines and rebuilds.
/// - **Trust.** The state directory and the ledger's files must be this
///   user's alone — no symbolic links, owned by the effective uid, not
///   writable by group or others — or the store is not opened at all
///   ([`LedgerError::Insecure`], saying what to do). On Windows links and
///   non-regular files are refused; ACLs are not inspected yet.
/// - **Creation.** A new store is built completely in a temporary file
///   (0600 from birth) and hard-linked into place, so `ledger.db` always
///   has a header and a schema: an empty or short `ledger.db` is damage,
///   not a fresh store.
/// - **Corruption.** A store that SQLite cannot read, that fails
///   `PRAGMA quick_check`, or that lacks the ledger's tables is renamed to
///   `ledger.db.corrupt-<UTC timestamp>` (with its `-wal` and `-shm`), never
///   emptied or rewritten in place; a fresh store is built with the live
///   entries rebuilt from the spawn tags of running processes and a record
///   of the [`Quarantine`], which `tether ps` shows.
/// - **Replacement under a long-lived handle.** Before each write the
///   handle checks that `ledger.db` is still the file it opened, and
///   reopens it if another process quarantined it meanwhile.
/// - **Retention.** Rows of owners that ended or belong to an earlier boot
///   are pruned after [`RETENTION`] (7 days).
///
/// One handle is one SQLite connection: it is `Send` but not `Sync` —
/// share it behind a mutex, or open one per thread. Write methods take
/// `&mut self` because they may transparently reopen the store.
///
/// Every write can fail like [`open`](Ledger::open) (when it must reopen a
/// replaced store) and with [`LedgerError::Sqlite`] (the store locked by
/// another writer beyond [`BUSY_TIMEOUT`], a full disk); nothing is half
/// written then.
#[derive(Debug)]
pub struct Ledger {
    conn: Connection,
    dir: PathBuf,
    path: PathBuf,
    install: String,
    /// (device, inode) of the file this connection has open.
    file_id: (u64, u64),
    /// Set when this open quarantined a corrupt store.
    quarantined: Option<Quarantine>,
}

/// How much of the store an open checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Header, schema and `PRAGMA quick_check` (every page).
    Full,
    /// Header and schema (see [`Ledger::open_to_record`]).
    Light,
}

/// Why an attempt to open the existing store did not produce a handle.
enum Attempt {
    /// There is no store yet (or it vanished while we looked).
    Missing,
    /// The file at the path is damaged; `file_id` names the one judged.
    Corrupt { reason: String, file_id: (u64, u64) },
    /// Anything else: reported, the store left alone.
    Failed(LedgerError),
}

impl Ledger {
    /// Opens (creating if needed) the ledger of `install`, in its state
    /// directory (created 0700 if missing). A corrupt store is quarantined
    /// and rebuilt; [`Ledger::quarantined`] tells.
    ///
    /// # Errors
    /// - [`LedgerError::Insecure`] if the directory or a ledger file is a
    ///   symbolic link, owned by another user or writable by group or
    ///   others (nothing is read or written then);
    /// - [`LedgerError::Io`] if the directory or store cannot be created,
    ///   opened, renamed or locked;
    /// - [`LedgerError::Sqlite`] if the store stays locked beyond
    ///   [`BUSY_TIMEOUT`];
    /// - [`LedgerError::NewerSchema`] for a store a newer tether wrote (left
    ///   untouched);
    /// - [`LedgerError::StillCorrupt`] / [`LedgerError::KeepsChanging`] when
    ///   something else keeps damaging, renaming or deleting the store.
    pub fn open(install: &Install) -> Result<Ledger> {
        Ledger::open_checked(install, Check::Full)
    }

    /// Opens the ledger to record into it — what an owner does at its
    /// start (`tether run`, `tether exec`, `tether mcp`,
    /// [`register_self`](crate::register_self)) — without
    /// [`open`](Ledger::open)'s `PRAGMA quick_check`.
    ///
    /// `quick_check` reads every page of the store: with a week of a busy
    /// user's runs in it (30,000 owners, 12 MB) it made one `tether run --
    /// /bin/true` 5× slower (77 ms against 15 ms). A recording owner does
    /// not need it. The cheap checks stay (a short file, one that is not an
    /// SQLite database or not the ledger's schema is quarantined as by
    /// `open`); damage inside a page that SQLite meets while writing makes
    /// the write reopen with the full check, which quarantines and
    /// rebuilds (see the type docs); damage the write does not meet is
    /// found by the next full open — `tether ps`, `tether reap`, `tether
    /// doctor` — before anything is read from the store to decide a kill
    /// (and the store never proves a kill by itself anyway). Damage only
    /// comes from a power loss, a kernel crash, or another process of this
    /// user writing into the file.
    ///
    /// # Errors
    /// As [`open`](Ledger::open).
    pub fn open_to_record(install: &Install) -> Result<Ledger> {
        Ledger::open_checked(install, Check::Light)
    }

    fn open_checked(install: &Install, check: Check) -> Result<Ledger> {
        let dir = install.state_dir().to_path_buf();
        state_dir::secure_dir(&dir)?;
        let path = dir.join(LEDGER_FILE);
        let mut quarantined = None;
        let mut last_corruption = None;
        for _ in 0..4 {
            for file in [path.clone(), sibling(&path, "-wal"), sibling(&path, "-shm")] {
                state_dir::secure_file(&file)?;
            }
            match open_existing(&path, check) {
                Ok((conn, file_id)) => {
                    let mut ledger = Ledger {
                        conn,
                        dir,
                        path,
                        install: install.id().to_owned(),
                        file_id,
                        quarantined,
                    };
                    ledger.fold_runs()?;
                    return Ok(ledger);
                }
                Err(Attempt::Missing) => create_locked(&dir, &path, install.id())?,
                Err(Attempt::Corrupt { reason, file_id }) => {
                    if let Some(q) = quarantine(&dir, &path, install.id(), file_id, &reason)? {
                        quarantined = Some(q);
                    }
                    last_corruption = Some(reason);
                }
                Err(Attempt::Failed(e)) => return Err(e),
            }
        }
        Err(match last_corruption {
            Some(reason) => LedgerError::StillCorrupt { path, reason },
            None => LedgerError::KeepsChanging { path },
        })
    }

    /// Path of the store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The install this ledger belongs to.
    pub fn install(&self) -> &str {
        &self.install
    }

    /// The quarantine this handle performed when it opened, if the store
    /// it found was corrupt.
    pub fn quarantined(&self) -> Option<&Quarantine> {
        self.quarantined.as_ref()
    }

    /// Every quarantine recorded in this store (normally at most one: the
    /// one that created it), oldest first.
    ///
    /// # Errors
    /// [`LedgerError::Sqlite`] if the store cannot be read.
    pub fn quarantines(&self) -> Result<Vec<Quarantine>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT at_ms, moved_to, reason, rebuilt_owners, rebuilt_sessions
                 FROM quarantines ORDER BY id",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Quarantine {
                    at_ms: r.get(0)?,
                    moved_to: PathBuf::from(r.get::<_, String>(1)?),
                    reason: r.get(2)?,
                    rebuilt_owners: r.get(3)?,
                    rebuilt_sessions: r.get(4)?,
                })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(|e| self.sql(e))?;
        Ok(rows)
    }

    /// Registers an owner (idempotent: registering the same process again
    /// updates its row). Every [`PRUNE_EVERY`]th registration also prunes
    /// the rows older than [`RETENTION`] of owners that ended or belong to
    /// an earlier boot, and of sessions that ended.
    ///
    /// # Errors
    /// As every write (see the type docs).
    pub fn register_owner(&mut self, owner: &OwnerRecord) -> Result<OwnerId> {
        let boot = owner.identity.boot_id.clone();
        self.write(|tx| {
            let id = insert_owner(tx, owner, Source::Registered)?;
            if id.0 % PRUNE_EVERY == 0 {
                prune(tx, &boot)?;
            }
            Ok(id)
        })
    }

    /// Registers an owner and records its first session in one
    /// transaction — what an owner of one command does once the command
    /// started (`tether run`): one write instead of two
    /// ([`register_owner`](Ledger::register_owner), then
    /// [`record_session_start`](Ledger::record_session_start)).
    ///
    /// # Errors
    /// As every write (see the type docs).
    pub fn register_owner_with_session(
        &mut self,
        owner: &OwnerRecord,
        session: &SessionStart,
    ) -> Result<OwnerId> {
        let boot = owner.identity.boot_id.clone();
        self.write(|tx| {
            let id = insert_owner(tx, owner, Source::Registered)?;
            insert_session(tx, id, session, Source::Registered)?;
            if id.0 % PRUNE_EVERY == 0 {
                prune(tx, &boot)?;
            }
            Ok(id)
        })
    }

    /// Records that an owner is done (it exited on its own terms).
    ///
    /// # Errors
    /// As every write (see the type docs).
    pub fn record_owner_end(&mut self, owner: OwnerId) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE owners SET ended_at_ms = ?1 WHERE id = ?2",
                params![now_ms(), owner.0],
            )
            .map(drop)
        })
    }

    /// [`record_owner_end`](Ledger::record_owner_end), failing at once
    /// (`SQLITE_BUSY`) rather than waiting while another process holds the
    /// store's lock: an owner's last write must not hold up its exit. (An
    /// owner whose end is not written is judged by its identity, as after
    /// a `SIGKILL`.)
    pub(crate) fn record_owner_end_now(&mut self, owner: OwnerId) -> Result<()> {
        self.conn
            .busy_timeout(std::time::Duration::ZERO)
            .map_err(|e| self.sql(e))?;
        let ended = self.record_owner_end(owner);
        let _ = self.conn.busy_timeout(BUSY_TIMEOUT);
        ended
    }

    /// Records a session's start under `owner` (idempotent: the same
    /// session id again replaces its row, so no duplicates).
    ///
    /// # Errors
    /// As every write (see the type docs).
    pub fn record_session_start(&mut self, owner: OwnerId, session: &SessionStart) -> Result<()> {
        self.write(|tx| insert_session(tx, owner, session, Source::Registered))
    }

    /// Records how a session ended. Returns `false` if the ledger has no
    /// such session (it was started before a quarantine, say).
    ///
    /// # Errors
    /// As every write (see the type docs).
    pub fn record_session_end(&mut self, session: &SessionId, outcome: Outcome) -> Result<bool> {
        let (kind, code, signal) = outcome.columns();
        self.write(|tx| {
            let n = tx.execute(
                "UPDATE sessions SET ended_at_ms = ?1, outcome = ?2, exit_code = ?3, exit_signal = ?4
                 WHERE id = ?5",
                params![now_ms(), kind, code, signal, session.as_str()],
            )?;
            Ok(n > 0)
        })
    }

    /// Records how a session ended (and the limit it ran into, if any)
    /// and that its owner is done, in one transaction: the end of an owner
    /// of one command (`tether run`). Returns `false` if the ledger has no
    /// such session.
    ///
    /// # Errors
    /// As every write (see the type docs).
    pub fn record_session_and_owner_end(
        &mut self,
        owner: OwnerId,
        session: &SessionId,
        outcome: Outcome,
        limit_hit: Option<tether::LimitHit>,
    ) -> Result<bool> {
        let (kind, code, signal) = outcome.columns();
        self.write(|tx| {
            let now = now_ms();
            let n = tx.execute(
                "UPDATE sessions SET ended_at_ms = ?1, outcome = ?2, exit_code = ?3, exit_signal = ?4
                 WHERE id = ?5",
                params![now, kind, code, signal, session.as_str()],
            )?;
            if let Some(hit) = limit_hit {
                tx.execute(
                    "UPDATE sessions SET limit_hit = ?1 WHERE id = ?2",
                    params![hit.name(), session.as_str()],
                )?;
            }
            tx.execute(
                "UPDATE owners SET ended_at_ms = ?1 WHERE id = ?2",
                params![now, owner.0],
            )?;
            Ok(n > 0)
        })
    }

    /// Records the limit a session ran into (`memory` or `pids`).
    /// Returns `false` if the ledger has no such session.
    ///
    /// # Errors
    /// As every write (see the type docs).
    pub fn record_limit_hit(&mut self, session: &SessionId, hit: tether::LimitHit) -> Result<bool> {
        self.write(|tx| {
            let n = tx.execute(
                "UPDATE sessions SET limit_hit = ?1 WHERE id = ?2",
                params![hit.name(), session.as_str()],
            )?;
            Ok(n > 0)
        })
    }

    /// Marks sessions `reaped` unless they already recorded an end.
    ///
    /// # Errors
    /// As every write (see the type docs).
    pub fn record_reaped(&mut self, sessions: &[String]) -> Result<()> {
        self.write(|tx| {
            let mut stmt = tx.prepare(
                "UPDATE sessions SET ended_at_ms = ?1, outcome = 'reaped'
                 WHERE id = ?2 AND ended_at_ms IS NULL",
            )?;
            for id in sessions {
                stmt.execute(params![now_ms(), id])?;
            }
            Ok(())
        })
    }

    /// Registers a process that tether did not start (idempotent: the same
    /// process again replaces its row), and prunes the rows of processes
    /// that are gone (by identity, from the live process table) or of an
    /// earlier boot.
    ///
    /// # Errors
    /// As every write (see the type docs).
    pub fn register_process(&mut self, r: &RegistrationRecord) -> Result<()> {
        let gone: Vec<i64> = self
            .registrations()?
            .into_iter()
            .filter(|row| !row.identity.is_alive())
            .map(|row| row.id)
            .collect();
        self.write(|tx| {
            for id in &gone {
                tx.execute("DELETE FROM registrations WHERE id = ?1", params![id])?;
            }
            let id = &r.identity;
            let sp = r.spawner.as_ref();
            tx.execute(
                "INSERT INTO registrations (install, boot_id, pid, start_time, pidfs_inode, uid,
                     purpose, argv, cwd, spawner_pid, spawner_start_time, spawner_pidfs_inode,
                     spawner_source, session, registered_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
                 ON CONFLICT (boot_id, pid, start_time) DO UPDATE SET
                     install = excluded.install, pidfs_inode = excluded.pidfs_inode,
                     uid = excluded.uid, purpose = excluded.purpose, argv = excluded.argv,
                     cwd = excluded.cwd, spawner_pid = excluded.spawner_pid,
                     spawner_start_time = excluded.spawner_start_time,
                     spawner_pidfs_inode = excluded.spawner_pidfs_inode,
                     spawner_source = excluded.spawner_source, session = excluded.session,
                     registered_at_ms = excluded.registered_at_ms, ended_at_ms = NULL",
                params![
                    r.install,
                    id.boot_id,
                    id.pid,
                    id.start_time,
                    id.pidfs_inode,
                    r.uid,
                    r.purpose,
                    join_args(&r.argv),
                    r.cwd.as_ref().map(|c| c.to_string_lossy().into_owned()),
                    sp.map(|s| s.pid),
                    sp.map(|s| s.start_time),
                    sp.and_then(|s| s.pidfs_inode),
                    r.spawner_source.as_str(),
                    r.session,
                    now_ms(),
                ],
            )
            .map(drop)
        })
    }

    /// Removes the registration of `identity` (a `tether exec` whose
    /// `exec` failed). Returns whether there was one.
    ///
    /// # Errors
    /// As every write (see the type docs).
    pub fn unregister_process(&mut self, identity: &ProcessIdentity) -> Result<bool> {
        self.write(|tx| {
            let n = tx.execute(
                "DELETE FROM registrations WHERE boot_id = ?1 AND pid = ?2 AND start_time = ?3",
                params![identity.boot_id, identity.pid, identity.start_time],
            )?;
            Ok(n > 0)
        })
    }

    /// Every registration row, oldest first.
    ///
    /// # Errors
    /// [`LedgerError::Sqlite`] if the store cannot be read.
    pub fn registrations(&self) -> Result<Vec<RegistrationRow>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, install, boot_id, pid, start_time, pidfs_inode, uid, purpose, argv,
                        cwd, spawner_pid, spawner_start_time, spawner_pidfs_inode,
                        spawner_source, session, registered_at_ms
                 FROM registrations WHERE ended_at_ms IS NULL ORDER BY id",
            )
            .map_err(|e| self.sql(e))?;
        stmt.query_map([], |r| {
            let boot: String = r.get(2)?;
            let spawner_pid: Option<u32> = r.get(10)?;
            let spawner_start: Option<u64> = r.get(11)?;
            Ok(RegistrationRow {
                id: r.get(0)?,
                install: r.get(1)?,
                identity: ProcessIdentity {
                    boot_id: boot.clone(),
                    pid: r.get(3)?,
                    start_time: r.get(4)?,
                    pidfs_inode: r.get(5)?,
                },
                uid: r.get(6)?,
                purpose: r.get(7)?,
                argv: split_args(&r.get::<_, String>(8)?),
                cwd: r.get(9)?,
                spawner: match (spawner_pid, spawner_start) {
                    (Some(pid), Some(start_time)) => Some(ProcessIdentity {
                        boot_id: boot,
                        pid,
                        start_time,
                        pidfs_inode: r.get(12)?,
                    }),
                    _ => None,
                },
                spawner_source: SpawnerSource::parse(&r.get::<_, String>(13)?),
                session: r.get(14)?,
                registered_at_ms: r.get(15)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.sql(e))
    }

    /// Every owner row, oldest first.
    ///
    /// # Errors
    /// [`LedgerError::Sqlite`] if the store cannot be read.
    pub fn owners(&self) -> Result<Vec<OwnerRow>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, install, boot_id, pid, start_time, pidfs_inode, uid, purpose, argv,
                        started_at_ms, ended_at_ms, source
                 FROM owners ORDER BY id",
            )
            .map_err(|e| self.sql(e))?;
        stmt.query_map([], |r| {
            Ok(OwnerRow {
                id: OwnerId(r.get(0)?),
                install: r.get(1)?,
                identity: ProcessIdentity {
                    boot_id: r.get(2)?,
                    pid: r.get(3)?,
                    start_time: r.get(4)?,
                    pidfs_inode: r.get(5)?,
                },
                uid: r.get(6)?,
                purpose: r.get(7)?,
                argv: split_args(&r.get::<_, String>(8)?),
                started_at_ms: r.get(9)?,
                ended_at_ms: r.get(10)?,
                source: Source::parse(&r.get::<_, String>(11)?),
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.sql(e))
    }

    /// Every session row, oldest first.
    ///
    /// # Errors
    /// [`LedgerError::Sqlite`] if the store cannot be read.
    pub fn sessions(&self) -> Result<Vec<SessionRow>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT s.id, s.owner_id, s.purpose, s.containment, s.command, s.cwd,
                        s.main_pid, s.main_start_time, s.main_pidfs_inode,
                        s.keeper_pid, s.keeper_start_time, s.keeper_pidfs_inode,
                        s.started_at_ms, s.ended_at_ms, s.outcome, s.exit_code, s.exit_signal,
                        s.source, o.boot_id, s.limits, s.limit_hit, s.cgroups
                 FROM sessions s JOIN owners o ON o.id = s.owner_id ORDER BY s.rowid",
            )
            .map_err(|e| self.sql(e))?;
        stmt.query_map([], |r| {
            let boot: String = r.get(18)?;
            let identity = |pid: Option<u32>, start: Option<u64>, inode: Option<u64>| {
                Some(ProcessIdentity {
                    boot_id: boot.clone(),
                    pid: pid?,
                    start_time: start?,
                    pidfs_inode: inode,
                })
            };
            let outcome: Option<String> = r.get(14)?;
            Ok(SessionRow {
                id: r.get(0)?,
                owner: OwnerId(r.get(1)?),
                purpose: r.get(2)?,
                containment: r.get(3)?,
                command: split_args(&r.get::<_, Option<String>>(4)?.unwrap_or_default()),
                cwd: r.get(5)?,
                main: identity(r.get(6)?, r.get(7)?, r.get(8)?),
                keeper: identity(r.get(9)?, r.get(10)?, r.get(11)?),
                started_at_ms: r.get(12)?,
                ended_at_ms: r.get(13)?,
                outcome: outcome
                    .and_then(|k| Outcome::from_columns(&k, r.get(15).ok()?, r.get(16).ok()?)),
                source: Source::parse(&r.get::<_, String>(17)?),
                limits: r
                    .get::<_, Option<String>>(19)?
                    .and_then(|text| crate::LimitsRecord::from_json(&text)),
                limit_hit: r
                    .get::<_, Option<String>>(20)?
                    .filter(|hit| matches!(hit.as_str(), "memory" | "pids")),
                cgroups: split_args(&r.get::<_, Option<String>>(21)?.unwrap_or_default()),
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.sql(e))
    }

    /// Writes what the run journals say (see [`journal`]) in one
    /// transaction, then removes the journals of runs that are over.
    fn fold_runs(&mut self) -> Result<()> {
        let journals = journal::collect(&self.dir, &self.install)?;
        if !journals
            .iter()
            .any(|j| matches!(j.state, JournalState::Read(_)))
        {
            journal::settle(journals);
            return Ok(());
        }
        self.write(|tx| {
            for j in &journals {
                let JournalState::Read(record) = &j.state else {
                    continue;
                };
                let RunRecord {
                    owner,
                    session,
                    end,
                } = &**record;
                let id = insert_owner_if_absent(tx, owner, session.started_at_ms)?;
                tx.execute(
                    "INSERT INTO sessions (id, owner_id, purpose, containment, command, cwd,
                         main_pid, main_start_time, main_pidfs_inode,
                         keeper_pid, keeper_start_time, keeper_pidfs_inode, started_at_ms,
                         source, limits, cgroups)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
                     ON CONFLICT (id) DO NOTHING",
                    rusqlite::params_from_iter(session_params(id, session, Source::Registered)),
                )?;
                if let Some(end) = end {
                    let (kind, code, signal) = end.outcome.columns();
                    tx.execute(
                        "UPDATE sessions SET ended_at_ms = ?1, outcome = ?2, exit_code = ?3,
                             exit_signal = ?4, limit_hit = coalesce(?5, limit_hit)
                         WHERE id = ?6 AND ended_at_ms IS NULL",
                        params![
                            end.at_ms,
                            kind,
                            code,
                            signal,
                            end.limit_hit,
                            session.id.as_str()
                        ],
                    )?;
                    tx.execute(
                        "UPDATE owners SET ended_at_ms = ?1 WHERE id = ?2 AND ended_at_ms IS NULL",
                        params![end.at_ms, id.0],
                    )?;
                }
                if id.0 % PRUNE_EVERY == 0 {
                    prune(tx, &owner.identity.boot_id)?;
                }
            }
            Ok(())
        })?;
        journal::settle(journals);
        Ok(())
    }

    /// Runs `f` in one short `BEGIN IMMEDIATE` transaction. If the file was
    /// replaced (quarantined by another process) it reopens first; if the
    /// store turns out corrupt mid-write, it reopens (which quarantines and
    /// rebuilds) and tries once more.
    fn write<T>(
        &mut self,
        mut f: impl FnMut(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> Result<T> {
        if file_id(&self.path).ok() != Some(self.file_id) {
            self.reopen()?;
        }
        match self.try_write(&mut f) {
            Err(e) if is_corruption(&e) => {
                self.reopen()?;
                self.try_write(&mut f).map_err(|e| self.sql(e))
            }
            other => other.map_err(|e| self.sql(e)),
        }
    }

    fn try_write<T>(
        &mut self,
        f: &mut impl FnMut(&rusqlite::Transaction<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let value = f(&tx)?;
        tx.commit()?;
        Ok(value)
    }

    fn reopen(&mut self) -> Result<()> {
        let fresh = Ledger::open(&Install::at(&self.dir))?;
        let quarantined = fresh.quarantined.clone().or(self.quarantined.take());
        *self = Ledger {
            quarantined,
            ..fresh
        };
        Ok(())
    }

    /// Records a durable session, or rewrites its record (an extension).
    ///
    /// # Errors
    /// As every write (see the type docs).
    pub fn record_durable(&mut self, row: &crate::DurableRow) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT OR REPLACE INTO durable (session_id, name, holder_pid, holder_start_time,
                     owner_pid, owner_start_time, owner_uid, owner_purpose, ttl_s, expires_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    row.session,
                    row.name,
                    row.holder_pid,
                    row.holder_start_time,
                    row.owner_pid,
                    row.owner_start_time,
                    row.owner_uid,
                    row.owner_purpose,
                    row.ttl_s,
                    row.expires_at_ms
                ],
            )?;
            Ok(())
        })
    }

    /// Every durable session's record (of sessions still in the store).
    ///
    /// # Errors
    /// [`LedgerError::Sqlite`].
    pub fn durable_sessions(&self) -> Result<Vec<crate::DurableRow>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT d.session_id, d.name, d.holder_pid, d.holder_start_time, d.owner_pid,
                        d.owner_start_time, d.owner_uid, d.owner_purpose, d.ttl_s, d.expires_at_ms
                 FROM durable d JOIN sessions s ON s.id = d.session_id ORDER BY s.rowid",
            )
            .map_err(|e| self.sql(e))?;
        stmt.query_map([], |r| {
            Ok(crate::DurableRow {
                session: r.get(0)?,
                name: r.get(1)?,
                holder_pid: r.get(2)?,
                holder_start_time: r.get(3)?,
                owner_pid: r.get(4)?,
                owner_start_time: r.get(5)?,
                owner_uid: r.get(6)?,
                owner_purpose: r.get(7)?,
                ttl_s: r.get(8)?,
                expires_at_ms: r.get(9)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.sql(e))
    }

    fn sql(&self, source: rusqlite::Error) -> LedgerError {
        LedgerError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }
}

/// How often [`Ledger::register_owner`] prunes: when the new owner's row id
/// is a multiple of this. Pruning scans both tables (nothing indexes the
/// end times): 8 ms with 30,000 owners here, a cost every `tether run` paid
/// before; now one in 64 does. The ledger holds at most 64 registrations'
/// worth of rows past their retention.
pub const PRUNE_EVERY: i64 = 64;

/// Deletes the rows older than [`RETENTION`] of owners that ended or belong
/// to another boot than `boot`, and of sessions that ended.
fn prune(tx: &rusqlite::Transaction<'_>, boot: &str) -> rusqlite::Result<()> {
    let cutoff = now_ms().saturating_sub(RETENTION.as_millis() as u64);
    tx.execute(
        "DELETE FROM owners WHERE (ended_at_ms IS NOT NULL AND ended_at_ms < ?1)
            OR (boot_id <> ?2 AND registered_at_ms < ?1)",
        params![cutoff, boot],
    )?;
    tx.execute(
        "DELETE FROM sessions WHERE ended_at_ms IS NOT NULL AND ended_at_ms < ?1",
        params![cutoff],
    )?;
    tx.execute(
        "DELETE FROM durable WHERE session_id NOT IN (SELECT id FROM sessions)",
        [],
    )?;
    Ok(())
}

fn insert_owner(
    tx: &rusqlite::Transaction<'_>,
    owner: &OwnerRecord,
    source: Source,
) -> rusqlite::Result<OwnerId> {
    insert_owner_row(tx, owner, source, now_ms(), Existing::Refresh)
}

/// What inserting an owner does to the row already there for that process.
enum Existing {
    /// Takes the new record's values, and the owner is live again.
    Refresh,
    /// Left as it is (folding a journal only ever adds).
    Keep,
}

fn insert_owner_row(
    tx: &rusqlite::Transaction<'_>,
    owner: &OwnerRecord,
    source: Source,
    registered_at_ms: u64,
    existing: Existing,
) -> rusqlite::Result<OwnerId> {
    let update = match existing {
        Existing::Refresh => {
            "install = excluded.install,
             pidfs_inode = coalesce(excluded.pidfs_inode, pidfs_inode),
             uid = excluded.uid, purpose = excluded.purpose, argv = excluded.argv,
             source = excluded.source, ended_at_ms = NULL"
        }
        Existing::Keep => "install = install",
    };
    let id = &owner.identity;
    tx.query_row(
        &format!(
            "INSERT INTO owners (install, boot_id, pid, start_time, pidfs_inode, uid, purpose,
                                 argv, started_at_ms, registered_at_ms, source)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT (boot_id, pid, start_time) DO UPDATE SET {update}
             RETURNING id"
        ),
        params![
            owner.install,
            id.boot_id,
            id.pid,
            id.start_time,
            id.pidfs_inode,
            owner.uid,
            owner.purpose,
            join_args(&owner.argv),
            owner.started_at_ms,
            registered_at_ms,
            source.as_str(),
        ],
        |r| r.get(0).map(OwnerId),
    )
}

fn insert_session(
    tx: &rusqlite::Transaction<'_>,
    owner: OwnerId,
    s: &SessionStart,
    source: Source,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT OR REPLACE INTO sessions (id, owner_id, purpose, containment, command, cwd,
             main_pid, main_start_time, main_pidfs_inode,
             keeper_pid, keeper_start_time, keeper_pidfs_inode, started_at_ms, source,
             limits, cgroups)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        rusqlite::params_from_iter(session_params(owner, s, source)),
    )
    .map(drop)
}

/// The 16 values of a session row, in the order of [`insert_session`]'s
/// columns.
fn session_params(
    owner: OwnerId,
    s: &SessionStart,
    source: Source,
) -> Vec<Box<dyn rusqlite::ToSql + '_>> {
    let pid = |i: &Option<ProcessIdentity>| i.as_ref().map(|i| i.pid);
    let start = |i: &Option<ProcessIdentity>| i.as_ref().map(|i| i.start_time);
    let inode = |i: &Option<ProcessIdentity>| i.as_ref().and_then(|i| i.pidfs_inode);
    vec![
        Box::new(s.id.as_str()),
        Box::new(owner.0),
        Box::new(s.purpose.as_str()),
        Box::new(s.containment.as_deref()),
        Box::new(join_args(&s.command)),
        Box::new(s.cwd.as_ref().map(|c| c.to_string_lossy().into_owned())),
        Box::new(pid(&s.main)),
        Box::new(start(&s.main)),
        Box::new(inode(&s.main)),
        Box::new(pid(&s.keeper)),
        Box::new(start(&s.keeper)),
        Box::new(inode(&s.keeper)),
        Box::new(s.started_at_ms),
        Box::new(source.as_str()),
        Box::new(s.limits.as_ref().map(crate::LimitsRecord::to_json)),
        Box::new((!s.cgroups.is_empty()).then(|| join_args(&s.cgroups))),
    ]
}

/// An owner's row id, inserting the row if the store has none for that
/// process (a row already there is left as it is: folding a journal only
/// ever adds).
fn insert_owner_if_absent(
    tx: &rusqlite::Transaction<'_>,
    owner: &OwnerRecord,
    registered_at_ms: u64,
) -> rusqlite::Result<OwnerId> {
    insert_owner_row(
        tx,
        owner,
        Source::Registered,
        registered_at_ms,
        Existing::Keep,
    )
}

fn insert_rebuilt_owner(
    tx: &rusqlite::Transaction<'_>,
    owner: &OwnerRecord,
) -> rusqlite::Result<OwnerId> {
    insert_owner(tx, owner, Source::Rebuilt)
}

fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    state_dir::file_id(path)
}

fn is_corruption(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

/// Opens the store at `path` and checks it: header, `quick_check` (with
/// [`Check::Full`]), the ledger's tables, the schema version (migrating an
/// older one).
fn open_existing(
    path: &Path,
    check: Check,
) -> std::result::Result<(Connection, (u64, u64)), Attempt> {
    let io = |source| {
        Attempt::Failed(LedgerError::Io {
            path: path.to_path_buf(),
            source,
        })
    };
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Attempt::Missing),
        Err(e) => return Err(io(e)),
    };
    // Quarantined by another opener between the two looks: no store now.
    let file_id = match file_id(path) {
        Ok(id) => id,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Attempt::Missing),
        Err(e) => return Err(io(e)),
    };
    let corrupt = |reason: String| Attempt::Corrupt { reason, file_id };
    // A store is born with its header and schema (see create_fresh): a
    // file shorter than SQLite's 100-byte header was damaged.
    if meta.len() < 100 {
        return Err(corrupt(format!("truncated to {} bytes", meta.len())));
    }
    let sqlite = |e: rusqlite::Error| {
        if is_corruption(&e) {
            corrupt(e.to_string())
        } else {
            Attempt::Failed(LedgerError::Sqlite {
                path: path.to_path_buf(),
                source: e,
            })
        }
    };
    let mut conn = match Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(c) => c,
        // Quarantined by someone else between the stat and the open.
        Err(_) if !path.exists() => return Err(Attempt::Missing),
        Err(e) => return Err(sqlite(e)),
    };
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite)?;
    // Before any check: a connection that finds the store damaged must
    // not checkpoint the WAL into it as it closes, rewriting the file the
    // quarantine keeps as it was found.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
        .map_err(sqlite)?;
    // Every check reads only: a file that is not our store is judged
    // before anything (even the journal mode) is written to it.
    if check == Check::Full {
        let found: Vec<String> = conn
            .prepare("PRAGMA quick_check")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .map_err(sqlite)?;
        if found != ["ok"] {
            return Err(corrupt(format!("quick_check: {}", found.join("; "))));
        }
    }
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sqlite)?;
    if version > CURRENT_VERSION {
        return Err(Attempt::Failed(LedgerError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            known: CURRENT_VERSION,
        }));
    }
    // Exactly the tables of its version, and nothing else: anything else
    // is someone else's database.
    let expected = schema::tables_at(version);
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(sqlite)?;
    let ours = names
        .iter()
        .filter(|n| expected.contains(&n.as_str()))
        .count();
    let others = names
        .iter()
        .filter(|n| !expected.contains(&n.as_str()) && *n != "sessions_by_owner")
        .count();
    // Version 0 with nothing in it is an empty store to migrate.
    let empty = version == 0 && names.is_empty();
    if !empty && (ours != expected.len() || others != 0) {
        return Err(corrupt(format!(
            "not a tether ledger (schema version {version}, {ours} of its {} tables, {others} other objects)",
            expected.len()
        )));
    }
    configure(&conn).map_err(sqlite)?;
    // (`migrate` reads the version again, under the write lock, if there is
    // anything to migrate.)
    match schema::migrate_from(&mut conn, version) {
        Ok(found) if found > CURRENT_VERSION => {
            return Err(Attempt::Failed(LedgerError::NewerSchema {
                path: path.to_path_buf(),
                found,
                known: CURRENT_VERSION,
            }));
        }
        Ok(_) => {}
        Err(e) => return Err(sqlite(e)),
    }
    // The file we checked must still be the one at the path.
    match self::file_id(path) {
        Ok(id) if id == file_id => Ok((conn, file_id)),
        _ => Err(Attempt::Missing),
    }
}

/// Busy timeout, WAL, durability, foreign keys.
///
/// **No `fsync`, ever (`synchronous = OFF`).** With `NORMAL` — which in
/// WAL mode syncs nothing at commit — every `tether run` still paid four:
/// the last connection to close checkpoints the WAL (a sync of the WAL,
/// one of the database) and deletes it, so the next run creates it again
/// (a sync of its header, one of the directory). 5–40 ms each on this
/// machine's loaded disk: most of a 50–85 ms `tether run -- /bin/true`.
/// Keeping the WAL instead (no checkpoint at close) costs more than it
/// saves: a process that opens the store alone rebuilds the WAL index by
/// reading the whole WAL (up to SQLite's 1,000-page checkpoint), which
/// took 11 % of a `tether run`'s CPU. (Keeping it small — folded every 16
/// pages — and its files between runs, with the open's checks in one read
/// transaction, was tried: ~0.2 ms less per run, but openers racing a
/// quarantine then failed with `disk I/O error` in 10 of 150 runs of
/// `concurrent_openers_quarantine_once`; 0 of 150 without.)
///
/// What each crash costs, with this:
/// - **The owner `SIGKILL`ed** (or any writer, mid-transaction or
///   mid-checkpoint): a transaction without its commit frame is ignored,
///   a checkpoint that did not finish leaves the WAL in place for the
///   next opener to finish, and the kernel drops the dead writer's
///   locks. Whatever a process wrote is in the page cache, which every
///   other process reads: syncing has no part in this. Nothing lost.
/// - **The keeper `SIGKILL`ed**: the keeper never opens the ledger.
/// - **Concurrent writers**: serialised by `BEGIN IMMEDIATE` and the busy
///   timeout; they see each other's commits through the shared page
///   cache and `-shm`. Unaffected.
/// - **Power loss or a kernel crash**: recent transactions may be lost,
///   and writes that reached the disk out of order can leave the file
///   damaged. Every row that can be lost or damaged names processes of
///   the boot that just ended — all dead, and a row of an earlier boot
///   proves nothing a live process could be killed for (the ledger is
///   treated as attacker-shaped input anyway: every kill is re-proven
///   against the live process). A damaged file is found by
///   `quick_check` at the next open (or by the first write that meets
///   it), quarantined and rebuilt from the spawn tags of live processes.
///   The ledger's need for durability ends at reboot.
fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Persistent in the file; a no-op when already WAL.
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
            Some(format!("cannot switch the ledger to WAL mode (got {mode})")),
        ));
    }
    conn.pragma_update(None, "synchronous", "OFF")?;
    // Checked and found sound (see `open_existing`): a closing connection
    // may fold the WAL into the file again.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, false)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(())
}

/// An exclusive lock on the state directory's lock file (`flock` on Unix,
/// `LockFileEx` on Windows), released on drop.
struct DirLock(File);

impl DirLock {
    fn take(dir: &Path) -> Result<DirLock> {
        let path = dir.join(LOCK_FILE);
        let file = state_dir::open_private(&path)?;
        // Held only around quarantine and creation: bounded work.
        file.lock()
            .map_err(|source| LedgerError::Io { path, source })?;
        Ok(DirLock(file))
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Creates the store under the lock, unless someone else did meanwhile.
fn create_locked(dir: &Path, path: &Path, install: &str) -> Result<()> {
    let _lock = DirLock::take(dir)?;
    if !path.exists() {
        create_fresh(dir, path, install, None)?;
    }
    Ok(())
}

/// Moves the damaged file `judged` aside and builds a fresh store with the
/// live entries rebuilt from spawn tags. `None` if another process already
/// replaced the file we judged.
fn quarantine(
    dir: &Path,
    path: &Path,
    install: &str,
    judged: (u64, u64),
    reason: &str,
) -> Result<Option<Quarantine>> {
    let _lock = DirLock::take(dir)?;
    if file_id(path).ok() != Some(judged) {
        return Ok(None);
    }
    let stamp = file_stamp(now_ms());
    let mut moved_to = dir.join(format!("{LEDGER_FILE}.corrupt-{stamp}"));
    let mut n = 2;
    while moved_to.exists() {
        moved_to = dir.join(format!("{LEDGER_FILE}.corrupt-{stamp}-{n}"));
        n += 1;
    }
    let io = |path: &Path, source| LedgerError::Io {
        path: path.to_path_buf(),
        source,
    };
    fs::rename(path, &moved_to).map_err(|e| io(path, e))?;
    for suffix in ["-wal", "-shm"] {
        let side = sibling(path, suffix);
        match fs::rename(&side, sibling(&moved_to, suffix)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&side, e)),
            _ => {}
        }
    }
    create_fresh(dir, path, install, Some((&moved_to, reason)))
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Builds a store in a temporary file (0600 from birth), rebuilt from tags
/// if this follows a quarantine, and links it into place. Caller holds the
/// lock.
fn create_fresh(
    dir: &Path,
    path: &Path,
    install: &str,
    rebuild: Option<(&Path, &str)>,
) -> Result<Option<Quarantine>> {
    remove_stale_temporaries(dir);
    let tmp = dir.join(format!("{TMP_PREFIX}{}", std::process::id()));
    let io = |p: &Path, source| LedgerError::Io {
        path: p.to_path_buf(),
        source,
    };
    let _ = fs::remove_file(&tmp);
    state_dir::create_new_private(&tmp).map_err(|e| io(&tmp, e))?;
    let sqlite = |source| LedgerError::Sqlite {
        path: tmp.clone(),
        source,
    };
    let built = (|| -> Result<Option<Quarantine>> {
        let mut conn =
            Connection::open_with_flags(&tmp, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(sqlite)?;
        configure(&conn).map_err(sqlite)?;
        schema::migrate(&mut conn).map_err(sqlite)?;
        let quarantine = match rebuild {
            None => None,
            Some((moved_to, reason)) => {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(sqlite)?;
                let (mut owners, mut sessions) = (0, 0);
                for (record, starts) in crate::rebuild::rebuild(install) {
                    let owner = insert_rebuilt_owner(&tx, &record).map_err(sqlite)?;
                    owners += 1;
                    for start in &starts {
                        insert_session(&tx, owner, start, Source::Rebuilt).map_err(sqlite)?;
                        sessions += 1;
                    }
                }
                let q = Quarantine {
                    at_ms: now_ms(),
                    moved_to: moved_to.to_path_buf(),
                    reason: reason.to_owned(),
                    rebuilt_owners: owners,
                    rebuilt_sessions: sessions,
                };
                tx.execute(
                    "INSERT INTO quarantines (at_ms, moved_to, reason, rebuilt_owners, rebuilt_sessions)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        q.at_ms,
                        q.moved_to.to_string_lossy(),
                        q.reason,
                        q.rebuilt_owners,
                        q.rebuilt_sessions
                    ],
                )
                .map_err(sqlite)?;
                tx.commit().map_err(sqlite)?;
                Some(q)
            }
        };
        // Fold the WAL into the file and close, so the linked file is
        // complete on its own (no `-wal` left beside the temporary name).
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .optional()
            .map_err(sqlite)?;
        conn.close().map_err(|(_, e)| sqlite(e))?;
        // Opened for writing: Windows flushes only a handle that may write.
        fs::OpenOptions::new()
            .write(true)
            .open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| io(&tmp, e))?;
        Ok(quarantine)
    })();
    let result = built.and_then(|q| match fs::hard_link(&tmp, path) {
        Ok(()) => Ok(q),
        // Someone created it without the lock (an older tether): theirs wins.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(io(path, e)),
    });
    let _ = fs::remove_file(&tmp);
    for suffix in ["-wal", "-shm"] {
        let _ = fs::remove_file(sibling(&tmp, suffix));
    }
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    result
}

/// Temporaries of creators that died mid-way (we hold the lock: nobody is
/// creating right now).
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(TMP_PREFIX))
        {
            let _ = fs::remove_file(entry.path());
        }
    }
}
