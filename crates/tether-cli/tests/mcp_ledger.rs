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
