//! The store: permissions, records round-trip, schema versions.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod common;

use std::os::unix::fs::PermissionsExt;

use common::TestInstall;
use tether::SessionId;
use tether_ledger::{Ledger, LedgerError, Outcome, OwnerRecord, SessionStart, Source};

#[test]
fn state_dir_is_0700_and_store_0600() {
    let t = TestInstall::new();
    let ledger = Ledger::open(&t.install).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(t.state_dir()), 0o700);
    assert_eq!(mode(ledger.path()), 0o600);
    assert!(ledger.quarantined().is_none());
    // WAL side files take the store's mode (SQLite copies it).
    for side in ["ledger.db-wal", "ledger.db-shm"] {
        let p = t.state_dir().join(side);
        if p.exists() {
            assert_eq!(mode(&p), 0o600, "{side}");
        }
    }
}

#[test]
fn owners_and_sessions_round_trip_and_survive_reopening() {
    let t = TestInstall::new();
    let mut ledger = Ledger::open(&t.install).unwrap();
    let record = OwnerRecord::current(&t.install, "run").unwrap();
    let owner = ledger.register_owner(&record).unwrap();
    assert_eq!(
        ledger.register_owner(&record).unwrap(),
        owner,
        "registering twice is idempotent"
    );
    let id = SessionId::generate();
    let mut start = SessionStart::new(id.clone(), "run");
    start.command = vec!["sh".into(), "-c".into(), "echo hi".into()];
    start.cwd = Some("/tmp".into());
    start.containment = Some("subreaper".into());
    start.main = Some(tether::ProcessIdentity::current().unwrap());
    ledger.record_session_start(owner, &start).unwrap();
    ledger.record_session_start(owner, &start).unwrap();
    assert!(
        ledger
            .record_session_end(&id, Outcome::Exited { code: 3 })
            .unwrap()
    );
    assert!(
        !ledger
            .record_session_end(&SessionId::generate(), Outcome::Killed)
            .unwrap()
    );
    ledger.record_owner_end(owner).unwrap();
    drop(ledger);

    let ledger = Ledger::open(&t.install).unwrap();
    let owners = ledger.owners().unwrap();
    assert_eq!(owners.len(), 1);
    assert!(owners[0].identity.matches(&record.identity));
    assert_eq!(owners[0].argv, record.argv);
    assert_eq!(owners[0].purpose, "run");
    assert_eq!(owners[0].source, Source::Registered);
    assert!(owners[0].ended_at_ms.is_some());
    let sessions = ledger.sessions().unwrap();
    assert_eq!(sessions.len(), 1, "no duplicate rows");
    let s = &sessions[0];
    assert_eq!(s.id, id.as_str());
    assert_eq!(s.command, start.command);
    assert_eq!(s.cwd.as_deref(), Some("/tmp"));
    assert_eq!(s.outcome, Some(Outcome::Exited { code: 3 }));
    assert_eq!(s.main, start.main);
}

#[test]
fn a_store_from_a_newer_tether_is_refused_and_left_untouched() {
    let t = TestInstall::new();
    let path = Ledger::open(&t.install).unwrap().path().to_path_buf();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    match Ledger::open(&t.install) {
        Err(LedgerError::NewerSchema { found: 99, .. }) => {}
        other => panic!("expected NewerSchema, got {other:?}"),
    }
    assert!(std::fs::read(&path).unwrap() == before, "left untouched");
    let quarantined = std::fs::read_dir(t.state_dir())
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().contains("corrupt"));
    assert!(!quarantined);
}

#[test]
fn an_unwritable_state_dir_is_an_error_not_a_quarantine() {
    if unsafe { libc::getuid() } == 0 {
        eprintln!("skipped: root ignores directory permissions");
        return;
    }
    let t = TestInstall::new();
    std::fs::create_dir_all(t.state_dir()).unwrap();
    std::fs::set_permissions(t.state_dir(), std::fs::Permissions::from_mode(0o500)).unwrap();
    assert!(matches!(
        Ledger::open(&t.install),
        Err(LedgerError::Io { .. })
    ));
}

#[test]
fn a_sessions_limits_what_it_hit_and_its_cgroups_round_trip() {
    let t = TestInstall::new();
    let mut ledger = Ledger::open(&t.install).unwrap();
    let owner = ledger
        .register_owner(&OwnerRecord::current(&t.install, "run").unwrap())
        .unwrap();
    let id = SessionId::generate();
    let mut start = SessionStart::new(id.clone(), "run");
    let report = tether::LimitReport {
        memory: Some((256 << 20, tether::Enforcement::Cgroup1)),
        pids: Some((64, tether::Enforcement::None("no delegation".into()))),
        cpu_millis: None,
        cgroup: Some("/sys/fs/cgroup/unified/tether-x".into()),
        cgroups: vec!["/sys/fs/cgroup/unified/tether-x".into()],
        via: None,
    };
    start.limits = tether_ledger::LimitsRecord::of(&report);
    start.cgroups = vec![
        "/sys/fs/cgroup/unified/tether-x".into(),
        "/sys/fs/cgroup/pids/tether-x".into(),
    ];
    ledger.record_session_start(owner, &start).unwrap();
    assert!(
        ledger
            .record_limit_hit(&id, tether::LimitHit::Memory { victims: 1 })
            .unwrap()
    );
    drop(ledger);
    let sessions = Ledger::open(&t.install).unwrap().sessions().unwrap();
    let s = &sessions[0];
    assert_eq!(s.limits, start.limits);
    assert_eq!(s.limit_hit.as_deref(), Some("memory"));
    assert_eq!(s.cgroups, start.cgroups);
    assert_eq!(
        s.limits.as_ref().unwrap().summary(),
        "memory 256 MiB (cgroup1), pids 64 (none)"
    );
}

/// Pruning is amortised (one registration in [`PRUNE_EVERY`] scans the
/// tables; every `tether run` did): rows past [`RETENTION`] — owners that
/// ended, owners of another boot, sessions that ended — are gone by then,
/// and nothing younger or still running is touched.
#[test]
fn rows_past_retention_are_pruned_within_prune_every_registrations() {
    use tether_ledger::{PRUNE_EVERY, RETENTION};
    let t = TestInstall::new();
    let mut ledger = Ledger::open(&t.install).unwrap();
    let me = OwnerRecord::current(&t.install, "run").unwrap();
    let live = ledger.register_owner(&me).unwrap();
    ledger
        .record_session_start(live, &SessionStart::new(SessionId::generate(), "run"))
        .unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let old = now_ms - RETENTION.as_millis() as i64 - 3_600_000;
    let recent = now_ms - 3_600_000;
    // Rows as an earlier week left them: pid 1000 + n, start time n.
    let conn = rusqlite::Connection::open(ledger.path()).unwrap();
    let insert = |pid: i64, boot: &str, registered: i64, ended: Option<i64>| {
        conn.execute(
            "INSERT INTO owners (install, boot_id, pid, start_time, uid, purpose, argv,
                 started_at_ms, registered_at_ms, ended_at_ms, source)
             VALUES (?1, ?2, ?3, ?3, 0, 'run', 'x', ?4, ?4, ?5, 'registered')",
            rusqlite::params![t.install.id(), boot, pid, registered, ended],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO sessions (id, owner_id, purpose, started_at_ms, ended_at_ms, source)
             VALUES (?1, last_insert_rowid(), 'run', ?2, ?3, 'registered')",
            rusqlite::params![format!("s{pid}"), registered, ended],
        )
        .unwrap();
    };
    let boot = me.identity.boot_id.as_str();
    insert(1001, boot, old, Some(old)); // ended long ago: pruned
    insert(1002, "an-earlier-boot", old, None); // earlier boot: pruned
    insert(1003, boot, recent, Some(recent)); // ended within retention: kept
    insert(1004, boot, old, None); // this boot, still running: kept
    drop(conn);
    let pids = |ledger: &Ledger| -> Vec<u32> {
        let mut p: Vec<u32> = ledger
            .owners()
            .unwrap()
            .iter()
            .map(|o| o.identity.pid)
            .filter(|&p| (1001..=1004).contains(&p))
            .collect();
        p.sort();
        p
    };
    assert_eq!(pids(&ledger), [1001, 1002, 1003, 1004]);
    for n in 0..PRUNE_EVERY {
        let mut other = me.clone();
        other.identity.pid = 2_000_000 + n as u32;
        ledger.register_owner(&other).unwrap();
    }
    assert_eq!(pids(&ledger), [1003, 1004]);
    let sessions = rusqlite::Connection::open(ledger.path())
        .unwrap()
        .query_row(
            "SELECT count(*) FROM sessions WHERE id IN ('s1001', 's1002', 's1003', 's1004')",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap();
    assert_eq!(sessions, 2, "the pruned owners' sessions went with them");
}
