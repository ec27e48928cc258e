//! A keeper SIGKILLed on its own: with a PID namespace the kernel kills the
//! namespace with it; with a subreaper keeper the orphans reparent to
//! `tether run` (itself a subreaper), which finds them by spawn tag and
//! kills them — in every output mode, also while they hold the pipes
//! `--json` reads (issue 34, item 6).

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod support;

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

use support::{Owner, keeper_of, tether, wait_pid_exit};
use tether_testkit::{TAG_VAR, TagGuard, Tree, wait_all_dead, wait_for_count};

fn keeper_sigkill(extra: &[&str], expect_exit: i32) {
    let guard = TagGuard::new("keeper-death");
    let mut owner = Owner::start(guard.tag(), extra, Tree::Hundred.script());
    owner.expect_ready();
    assert!(wait_for_count(guard.tag(), 100, Duration::from_secs(20)) >= 100);
    let keeper = keeper_of(owner.pid()).expect("keeper");
    // SAFETY: kill(2) on a pid we just read as our owner's child; the owner
    // does not reap it until it sees the socket's EOF, so it cannot be reused.
    unsafe { libc::kill(keeper as i32, libc::SIGKILL) };
    let survivors = wait_all_dead(guard.tag(), Duration::from_secs(15));
    assert!(
        survivors.is_empty(),
        "survived the keeper's death: {} processes",
        survivors.len()
    );
    let status = owner
        .wait_bounded(Duration::from_secs(15))
        .expect("tether run returns");
    assert_eq!(status.code(), Some(expect_exit));
}

#[test]
fn subreaper_owner_kills_the_orphans() {
    keeper_sigkill(&["--containment", "subreaper"], 125);
}

#[test]
fn pid_namespace_dies_with_its_keeper() {
    if !tether_testkit::require_root("pid namespace containment") {
        return;
    }
    keeper_sigkill(&["--containment", "pidns"], 125);
}

/// Issue 34, item 6: `tether run --json` read the output to EOF before it
/// looked at the keeper, so with the keeper SIGKILLed and orphans holding
/// stdout it supervised nothing: no JSON until they ended by themselves,
/// and then "0 orphaned process(es) killed" (5 of 5). The keeper's death
/// is now an event the output wait sees: the orphans — the main `sh`, a
/// grandchild holding the pipe, a setsid escape — are killed and counted,
/// and the JSON says why, with the output read until then.
#[test]
fn json_run_notices_the_keeper_death_while_orphans_hold_stdout() {
    let guard = TagGuard::new("keeper-death-json");
    let mut owner = tether()
        .args(["run", "--json", "--"])
        .args([
            "/bin/sh",
            "-c",
            "echo before; sleep 1000 & setsid sleep 1000 & wait",
        ])
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tether run --json");
    // The owner, the main `sh` and its two sleeps carry the test's tag.
    assert!(wait_for_count(guard.tag(), 4, Duration::from_secs(20)) >= 4);
    let keeper = keeper_of(owner.id()).expect("keeper");
    // SAFETY: kill(2) on a pid we just read as our owner's child; the owner
    // does not reap it until it sees the socket's EOF, so it cannot be reused.
    unsafe { libc::kill(keeper as i32, libc::SIGKILL) };

    // Bounded: before the fix the owner waited for the orphans' EOF.
    let exited = wait_pid_exit(owner.id(), Duration::from_secs(30));
    if !exited {
        let _ = owner.kill();
        let _ = owner.wait();
        panic!("tether run --json still waits 30 s after its keeper was SIGKILLed");
    }
    let status = owner.wait().expect("reap tether run");
    let mut stdout = String::new();
    owner
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let mut stderr = String::new();
    owner
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(125), "stderr: {stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(json["stdout"], "before\n");
    assert_eq!(json["exit_code"], serde_json::Value::Null);
    // The main process, the pipe-holding sleep and the setsid escape.
    assert_eq!(json["orphans_killed"], 3, "{json}");
    let error = json["error"].as_str().expect("the cause");
    assert!(error.contains("keeper died"), "{error}");
    assert!(error.contains("3 orphaned"), "{error}");
    assert!(stderr.contains("keeper died"), "{stderr}");
    assert!(
        wait_all_dead(guard.tag(), Duration::from_secs(15)).is_empty(),
        "survived the keeper's death"
    );
}
