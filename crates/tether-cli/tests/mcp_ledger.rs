//! `tether mcp` in the ledger: it registers as an owner (purpose `mcp`),
//! records each session and its outcome, and with `--reap-on-start` first
//! kills the proven orphans of dead owners of its install.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod orphans;
mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use orphans::{Home, session_processes};
use tether_ledger::{Ledger, Outcome};
use tether_testkit::{Tree, wait_all_dead};

#[test]
fn mcp_records_its_sessions_and_reaps_orphans_on_start() {
    let home = Home::new("mcp-ledger");
    let orphan = home.orphan(&[], Tree::SetsidDoubleFork.script(), 4);

    let mut server = home
        .tether(&["mcp", "--reap-on-start"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start tether mcp");
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"command":"exit 4"}}}"#,
    ];
    for request in requests {
        writeln!(stdin, "{request}").unwrap();
    }
    let mut answers = Vec::new();
    for _ in 0..2 {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        answers.push(serde_json::from_str::<serde_json::Value>(&line).unwrap());
    }
    assert_eq!(
        answers[1]["result"]["structuredContent"]["exit_code"], 4,
        "{answers:?}"
    );
    // The reap finished before the server answered anything (the server
    // itself carries the test's tag, so look at the orphan's session).
    let survivors = session_processes(home.install().id(), &orphan.session);
    assert!(
        survivors.is_empty(),
        "orphans survived --reap-on-start: {survivors:?}"
    );
    drop(stdin);
    assert_eq!(server.wait().unwrap().code(), Some(0));
    assert!(wait_all_dead(home.tag(), Duration::from_secs(10)).is_empty());

    let ledger = Ledger::open(&home.install()).unwrap();
    let mcp_owner = ledger
        .owners()
        .unwrap()
        .into_iter()
        .find(|o| o.purpose == "mcp")
        .expect("mcp owner");
    let sessions = ledger.sessions().unwrap();
    let run = sessions
        .iter()
        .find(|s| s.owner == mcp_owner.id)
        .expect("the mcp session is recorded");
    assert!(
        matches!(run.outcome, Some(Outcome::Exited { code: 4 })),
        "{run:?}"
    );
    let reaped = sessions
        .iter()
        .find(|s| s.id == orphan.session)
        .expect("the orphan's session");
    assert!(
        matches!(reaped.outcome, Some(Outcome::Reaped)),
        "{reaped:?}"
    );
}

/// Issue 34, item 12: while another process held the ledger's write lock
/// (a `tether reap` stopped with Ctrl-Z mid-transaction), each `run`
/// blocked the whole server for SQLite's 10 s busy timeout: `run echo hi`
/// answered after 20.0 s with `duration_ms` 10,025, a `list` behind it
/// waited too, and so did shutdown on stdin EOF. The recorder now writes
/// on a thread of its own and journals what the store has not taken at
/// the end: every answer and the shutdown come while the lock is still
/// held, and the session is in the ledger once it is released.
#[test]
fn mcp_never_waits_on_a_held_ledger_lock() {
    let home = Home::new("mcp-ledger-lock");
    // The store exists before the server starts (its path to lock).
    let path = Ledger::open(&home.install()).unwrap().path().to_owned();
    let mut server = home
        .tether(&["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start tether mcp");
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = server.stdout.take().unwrap();
    let mut pending = Vec::new();
    let mut answer = |what: &str| -> serde_json::Value {
        let line = support::read_line_bounded(&mut stdout, &mut pending, Duration::from_secs(60))
            .unwrap_or_else(|| panic!("no answer to {what} within 60 s"));
        serde_json::from_str(&line).unwrap()
    };
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    // Answered after the server's start-up, the ledger's part included.
    answer("initialize");

    // Another process's write transaction: the store's lock, held until
    // this connection goes.
    let locker = rusqlite::Connection::open(&path).unwrap();
    locker.execute_batch("BEGIN IMMEDIATE").unwrap();

    for request in [
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"command":"echo hi"}}}"#,
    ] {
        writeln!(stdin, "{request}").unwrap();
    }
    let ran = answer("run");
    let result = &ran["result"]["structuredContent"];
    assert_eq!(result["exit_code"], 0, "{ran}");
    assert!(
        result["output"].as_str().is_some_and(|o| o.contains("hi")),
        "{ran}"
    );
    // The command's own time, not the ledger's: a run that waited on the
    // lock waited SQLite's whole busy timeout (it is held throughout), so
    // its duration_ms is at least that (10,025 ms before the fix). Not a
    // speed figure: `echo hi` never takes the 10 s, however loaded the
    // machine.
    let duration_ms = result["duration_ms"].as_u64().expect("duration_ms");
    assert!(
        duration_ms < tether_ledger::BUSY_TIMEOUT.as_millis() as u64,
        "duration_ms {duration_ms} includes a wait for the ledger"
    );
    let session = result["id"].as_str().expect("the session's id").to_owned();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"list","arguments":{{}}}}}}"#
    )
    .unwrap();
    let listed = answer("list");
    assert!(listed.to_string().contains(&session), "{listed}");

    // Shutdown on stdin EOF while the lock is still held.
    drop(stdin);
    assert!(
        support::wait_pid_exit(server.id(), Duration::from_secs(60)),
        "the server did not exit"
    );
    assert_eq!(server.wait().unwrap().code(), Some(0));
    assert!(!locker.is_autocommit(), "the lock was held throughout");
    drop(locker);

    // Released: the next open of the store has the session.
    let ledger = Ledger::open(&home.install()).unwrap();
    let sessions = ledger.sessions().unwrap();
    let row = sessions
        .iter()
        .find(|s| s.id == session)
        .unwrap_or_else(|| panic!("session {session} not in the ledger: {sessions:?}"));
    assert!(
        matches!(row.outcome, Some(Outcome::Exited { code: 0 })),
        "{row:?}"
    );
}
