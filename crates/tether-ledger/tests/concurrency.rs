//! Many processes writing at once, and writers killed mid-transaction.
//!
//! The writers are real processes: this test binary re-run with
//! `TETHER_LEDGER_TEST_ROLE` set, entering at [`writer_process_entry`].

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use common::TestInstall;
use tether::{Install, SessionId};
use tether_ledger::{Ledger, Outcome, OwnerRecord, SessionStart};

const ROLE: &str = "TETHER_LEDGER_TEST_ROLE";
const STATE: &str = "TETHER_LEDGER_TEST_STATE";
const INDEX: &str = "TETHER_LEDGER_TEST_INDEX";
const COUNT: &str = "TETHER_LEDGER_TEST_COUNT";

/// Not a test by itself: the entry point of the writer processes the tests
/// below start. Without `TETHER_LEDGER_TEST_ROLE` it returns at once.
#[test]
fn writer_process_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let install = Install::at(std::env::var(STATE).unwrap());
    let index: usize = std::env::var(INDEX).unwrap().parse().unwrap();
    let count: usize = std::env::var(COUNT).unwrap().parse().unwrap();
    match role.as_str() {
        // `count` sessions, each a start and an end transaction, reporting
        // progress after each so the test can kill it at a chosen point.
        "writer" => {
            let mut ledger = Ledger::open(&install).unwrap();
            let owner = ledger
                .register_owner(&OwnerRecord::current(&install, "test").unwrap())
                .unwrap();
            println!("READY");
            for i in 0..count {
                let id = SessionId::parse(&format!("w{index}-{i}")).unwrap();
                let mut start = SessionStart::new(id.clone(), "test");
                start.command = vec!["writer".into(), i.to_string()];
                ledger.record_session_start(owner, &start).unwrap();
                let ended = ledger
                    .record_session_end(&id, Outcome::Exited { code: i as i32 })
                    .unwrap();
                assert!(ended);
                println!("WROTE {i}");
            }
            println!("DONE");
        }
        // Opens a write transaction, writes `count` sessions into it, says
        // so, and blocks (holding the write lock) until killed.
        "stuck" => {
            let path = install.state_dir().join(tether_ledger::LEDGER_FILE);
            let mut conn = rusqlite::Connection::open(path).unwrap();
            conn.busy_timeout(std::time::Duration::from_secs(10))
                .unwrap();
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .unwrap();
            let owner: i64 = tx
                .query_row(
                    "INSERT INTO owners (install, boot_id, pid, start_time, uid, purpose, argv,
                         started_at_ms, registered_at_ms, source)
                     VALUES ('x', 'stuck', ?1, 1, 0, 'stuck', '', 0, 0, 'registered') RETURNING id",
                    [std::process::id()],
                    |r| r.get(0),
                )
                .unwrap();
            for i in 0..count {
                tx.execute(
                    "INSERT INTO sessions (id, owner_id, purpose, started_at_ms, source)
                     VALUES (?1, ?2, 'stuck', 0, 'registered')",
                    rusqlite::params![format!("stuck{index}-{i}"), owner],
                )
                .unwrap();
            }
            println!("IN-TRANSACTION");
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
            panic!("the stuck writer was meant to be killed, not released");
        }
        other => panic!("unknown role {other}"),
    }
}

/// A writer's stdout, line by line, from a reader thread (so waits can be
/// bounded: a hung writer fails the test instead of hanging it).
struct Lines(std::sync::mpsc::Receiver<String>);

/// How long any one step of a writer may take before the test fails.
const STEP_BOUND: Duration = Duration::from_secs(120);

/// A writer process started in `role`, and its output lines.
fn start(t: &TestInstall, role: &str, index: usize, count: usize) -> (Child, Lines) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "writer_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(STATE, t.state_dir())
        .env(INDEX, index.to_string())
        .env(COUNT, count.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, Lines(rx))
}

/// Waits for a line equal to `marker`; false if the writer's output ended
/// first. Panics after [`STEP_BOUND`].
fn wait_for(out: &mut Lines, marker: &str) -> bool {
    let deadline = Instant::now() + STEP_BOUND;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match out.0.recv_timeout(left) {
            // libtest prints `test writer_process_entry ... ` before the
            // test's own output, on the same line.
            Ok(line) if line.trim_end().rsplit(" ... ").next() == Some(marker) => return true,
            Ok(_) => {}
            Err(RecvTimeoutError::Disconnected) => return false,
            Err(RecvTimeoutError::Timeout) => panic!("no {marker:?} within {STEP_BOUND:?}"),
        }
    }
}

fn quick_check(t: &TestInstall) -> String {
    let conn = rusqlite::Connection::open(t.ledger_path()).unwrap();
    conn.query_row("PRAGMA quick_check", [], |r| r.get(0))
        .unwrap()
}

fn sigkill(child: &mut Child) {
    // Our own child, not yet reaped: its pid cannot have been recycled.
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn eight_processes_writing_500_sessions_each_lose_and_duplicate_nothing() {
    const WRITERS: usize = 8;
    const SESSIONS: usize = 500;
    let t = TestInstall::new();
    drop(Ledger::open(&t.install).unwrap());
    let mut writers: Vec<_> = (0..WRITERS)
        .map(|i| start(&t, "writer", i, SESSIONS))
        .collect();
    for (child, out) in &mut writers {
        assert!(wait_for(out, "DONE"), "writer exited early");
        assert!(child.wait().unwrap().success());
    }
    let ledger = Ledger::open(&t.install).unwrap();
    assert!(ledger.quarantined().is_none());
    let sessions = ledger.sessions().unwrap();
    assert_eq!(
        sessions.len(),
        WRITERS * SESSIONS,
        "no lost or duplicated rows"
    );
    let mut ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), WRITERS * SESSIONS);
    for s in &sessions {
        let i: i32 = s.id.rsplit('-').next().unwrap().parse().unwrap();
        assert_eq!(s.outcome, Some(Outcome::Exited { code: i }), "{}", s.id);
        assert_eq!(s.command, vec!["writer".to_string(), i.to_string()]);
    }
    assert_eq!(ledger.owners().unwrap().len(), WRITERS);
    assert_eq!(quick_check(&t), "ok");
}

#[test]
fn a_writer_killed_mid_transaction_leaves_the_store_consistent() {
    let t = TestInstall::new();
    drop(Ledger::open(&t.install).unwrap());
    let (mut stuck, mut stuck_out) = start(&t, "stuck", 0, 300);
    assert!(wait_for(&mut stuck_out, "IN-TRANSACTION"));
    // A writer started now needs the lock the stuck one holds...
    let (mut writer, mut writer_out) = start(&t, "writer", 1, 50);
    // ...and proceeds once the holder is SIGKILLed mid-transaction.
    sigkill(&mut stuck);
    assert!(wait_for(&mut writer_out, "DONE"));
    assert!(writer.wait().unwrap().success());

    assert_eq!(quick_check(&t), "ok");
    let ledger = Ledger::open(&t.install).unwrap();
    assert!(
        ledger.quarantined().is_none(),
        "a killed writer is not corruption"
    );
    let sessions = ledger.sessions().unwrap();
    assert!(
        sessions.iter().all(|s| !s.id.starts_with("stuck")),
        "the killed transaction left no rows"
    );
    assert!(
        ledger
            .owners()
            .unwrap()
            .iter()
            .all(|o| o.purpose != "stuck")
    );
    assert_eq!(sessions.len(), 50);
}

#[test]
fn writers_killed_at_arbitrary_points_never_corrupt_the_store() {
    let t = TestInstall::new();
    drop(Ledger::open(&t.install).unwrap());
    let mut writers: Vec<_> = (0..6).map(|i| start(&t, "writer", i, 400)).collect();
    // Kill every other writer at a different point of its run.
    for (n, (child, out)) in writers.iter_mut().enumerate() {
        if n % 2 == 0 {
            assert!(wait_for(out, &format!("WROTE {}", 40 * n + 7)));
            sigkill(child);
        }
    }
    for (n, (child, out)) in writers.iter_mut().enumerate() {
        if n % 2 == 1 {
            assert!(wait_for(out, "DONE"));
            assert!(child.wait().unwrap().success());
        }
    }
    assert_eq!(quick_check(&t), "ok");
    let ledger = Ledger::open(&t.install).unwrap();
    assert!(ledger.quarantined().is_none());
    let sessions = ledger.sessions().unwrap();
    for n in (1..6).step_by(2) {
        let done = sessions
            .iter()
            .filter(|s| s.id.starts_with(&format!("w{n}-")))
            .count();
        assert_eq!(done, 400, "writer {n} completed");
    }
    for n in (0..6).step_by(2) {
        let mine: Vec<_> = sessions
            .iter()
            .filter(|s| s.id.starts_with(&format!("w{n}-")))
            .collect();
        // It reported `WROTE k` after both transactions of session k
        // committed, so at least k+1 sessions are complete; the one being
        // written when it died is either absent, started, or complete.
        let reported = 40 * n + 7 + 1;
        assert!(mine.len() >= reported, "writer {n}: {} rows", mine.len());
        let unfinished = mine.iter().filter(|s| s.outcome.is_none()).count();
        assert!(
            unfinished <= 1,
            "writer {n}: {unfinished} half-written sessions"
        );
    }
    // And the store still takes writes.
    let (mut writer, mut out) = start(&t, "writer", 9, 10);
    assert!(wait_for(&mut out, "DONE"));
    assert!(writer.wait().unwrap().success());
}
