//! The ledger's schema and its migrations.
//!
//! The schema version lives in SQLite's `user_version` header field.
//! Migration `i` (0-based) takes a store from version `i` to `i + 1`; each
//! runs in the same `BEGIN IMMEDIATE` transaction as the version bump, so
//! two processes opening an old store at once migrate it exactly once and
//! a crash mid-migration leaves the old version intact. Migrations are
//! append-only: a released one is never edited.

use rusqlite::{Connection, TransactionBehavior};

/// Version 1: owners, their sessions, and the record of quarantines.
const V1: &str = "
CREATE TABLE owners (
    id               INTEGER PRIMARY KEY,
    install          TEXT    NOT NULL,
    boot_id          TEXT    NOT NULL,
    pid              INTEGER NOT NULL,
    start_time       INTEGER NOT NULL,   -- clock ticks since boot
    pidfs_inode      INTEGER,
    uid              INTEGER NOT NULL,
    purpose          TEXT    NOT NULL,
    argv             TEXT    NOT NULL,   -- first arguments, NUL-separated
    started_at_ms    INTEGER NOT NULL,   -- wall clock, Unix ms
    registered_at_ms INTEGER NOT NULL,
    ended_at_ms      INTEGER,
    source           TEXT    NOT NULL CHECK (source IN ('registered', 'rebuilt')),
    UNIQUE (boot_id, pid, start_time)
);
CREATE TABLE sessions (
    id                 TEXT    PRIMARY KEY,
    owner_id           INTEGER NOT NULL REFERENCES owners(id) ON DELETE CASCADE,
    purpose            TEXT    NOT NULL,
    containment        TEXT,
    command            TEXT,             -- argv, NUL-separated
    cwd                TEXT,
    main_pid           INTEGER,
    main_start_time    INTEGER,
    main_pidfs_inode   INTEGER,
    keeper_pid         INTEGER,
    keeper_start_time  INTEGER,
    keeper_pidfs_inode INTEGER,
    started_at_ms      INTEGER NOT NULL,
    ended_at_ms        INTEGER,
    outcome            TEXT,
    exit_code          INTEGER,
    exit_signal        INTEGER,
    source             TEXT    NOT NULL CHECK (source IN ('registered', 'rebuilt'))
);
CREATE INDEX sessions_by_owner ON sessions(owner_id);
CREATE TABLE quarantines (
    id               INTEGER PRIMARY KEY,
    at_ms            INTEGER NOT NULL,
    moved_to         TEXT    NOT NULL,
    reason           TEXT    NOT NULL,
    rebuilt_owners   INTEGER NOT NULL,
    rebuilt_sessions INTEGER NOT NULL
);
";

/// Version 2: processes that registered themselves (`tether exec`,
/// `register_self`) with their purpose and spawner.
const V2: &str = "
CREATE TABLE registrations (
    id                  INTEGER PRIMARY KEY,
    install             TEXT    NOT NULL,
    boot_id             TEXT    NOT NULL,
    pid                 INTEGER NOT NULL,
    start_time          INTEGER NOT NULL,   -- clock ticks since boot
    pidfs_inode         INTEGER,
    uid                 INTEGER NOT NULL,
    purpose             TEXT    NOT NULL,
    argv                TEXT    NOT NULL,   -- first arguments, NUL-separated
    cwd                 TEXT,
    spawner_pid         INTEGER,
    spawner_start_time  INTEGER,
    spawner_pidfs_inode INTEGER,
    spawner_source      TEXT    NOT NULL
                        CHECK (spawner_source IN ('tag', 'parent', 'given', 'none')),
    session             TEXT,               -- the spawn tag's session it carries
    registered_at_ms    INTEGER NOT NULL,
    ended_at_ms         INTEGER,
    UNIQUE (boot_id, pid, start_time)
);
";

/// Version 3: each session's limits (JSON: value and enforcement per
/// limit), the limit it ran into (`memory`, `pids`), and the cgroup
/// directories made for it (NUL-separated), which `tether reap` removes
/// once its owner and keeper are gone.
const V3: &str = "
ALTER TABLE sessions ADD COLUMN limits TEXT;
ALTER TABLE sessions ADD COLUMN limit_hit TEXT;
ALTER TABLE sessions ADD COLUMN cgroups TEXT;
";

/// Version 4: durable sessions (issue 37) — per session its name, its
/// holder, its owner of record (the process that asked for it) and its
/// TTL, kept current by the holder (an extension rewrites the row).
const V4: &str = "
CREATE TABLE durable (
    session_id         TEXT    PRIMARY KEY,
    name               TEXT,
    holder_pid         INTEGER NOT NULL,
    holder_start_time  INTEGER NOT NULL,
    owner_pid          INTEGER,
    owner_start_time   INTEGER,
    owner_uid          INTEGER,
    owner_purpose      TEXT,
    ttl_s              INTEGER NOT NULL,
    expires_at_ms      INTEGER NOT NULL   -- wall clock, Unix ms
);
";

/// Every migration, oldest first.
const MIGRATIONS: &[&str] = &[V1, V2, V3, V4];

/// The tables a store of schema `version` has (0: none yet).
pub fn tables_at(version: i64) -> &'static [&'static str] {
    const ALL: &[&str] = &[
        "owners",
        "sessions",
        "quarantines",
        "registrations",
        "durable",
    ];
    match version {
        ..=0 => &[],
        1 => &ALL[..3],
        2 | 3 => &ALL[..4],
        _ => ALL,
    }
}

/// The schema version this build writes.
pub const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the store to [`CURRENT_VERSION`]. Returns the version found
/// before migrating (inside the transaction, so it is the true one) —
/// greater than `CURRENT_VERSION` means a newer tether wrote it and nothing
/// was changed.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<i64> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    migrate_from(conn, version)
}

/// [`migrate`], for a caller that has just read the version (`version`):
/// nothing more is read unless there is something to migrate.
pub fn migrate_from(conn: &mut Connection, version: i64) -> rusqlite::Result<i64> {
    if version >= CURRENT_VERSION {
        return Ok(version);
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Re-read under the write lock: another process may have migrated
    // between our first look and taking the lock.
    let found: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if found >= CURRENT_VERSION {
        return Ok(found);
    }
    for (from, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", from as i64 + 1)?;
    }
    tx.commit()?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrates_an_empty_store_once() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&mut conn).unwrap(), 0);
        assert_eq!(migrate(&mut conn).unwrap(), CURRENT_VERSION);
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, CURRENT_VERSION);
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, tables_at(CURRENT_VERSION).len() as i64);
    }

    #[test]
    fn a_version_1_store_migrates_to_the_current_one_keeping_its_rows() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(V1).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute(
            "INSERT INTO quarantines (at_ms, moved_to, reason, rebuilt_owners, rebuilt_sessions)
             VALUES (1, 'x', 'y', 0, 0)",
            [],
        )
        .unwrap();
        assert_eq!(migrate(&mut conn).unwrap(), 1);
        let kept: i64 = conn
            .query_row("SELECT count(*) FROM quarantines", [], |r| r.get(0))
            .unwrap();
        assert_eq!(kept, 1);
        conn.execute("SELECT count(*) FROM registrations", []).ok();
    }

    #[test]
    fn a_version_2_store_gains_the_limit_columns_keeping_its_sessions() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(V1).unwrap();
        conn.execute_batch(V2).unwrap();
        conn.pragma_update(None, "user_version", 2).unwrap();
        conn.execute(
            "INSERT INTO owners (install, boot_id, pid, start_time, uid, purpose, argv,
                                 started_at_ms, registered_at_ms, source)
             VALUES ('i', 'b', 1, 1, 0, 'run', '', 0, 0, 'registered')",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO sessions (id, owner_id, purpose, started_at_ms, source)
             VALUES ('s', 1, 'run', 0, 'registered')",
            [],
        )
        .unwrap();
        assert_eq!(migrate(&mut conn).unwrap(), 2);
        let (limits, hit, cgroups): (Option<String>, Option<String>, Option<String>) = conn
            .query_row(
                "SELECT limits, limit_hit, cgroups FROM sessions WHERE id = 's'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((limits, hit, cgroups), (None, None, None));
    }

    #[test]
    fn leaves_a_newer_store_alone() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", CURRENT_VERSION + 5)
            .unwrap();
        assert_eq!(migrate(&mut conn).unwrap(), CURRENT_VERSION + 5);
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .unwrap();
        assert_eq!(tables, 0);
    }
}
