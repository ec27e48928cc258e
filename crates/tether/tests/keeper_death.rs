//! A keeper SIGKILLed while its tree holds the output pipes (issue 34,
//! item 6): a `Child`'s wait for its output notices at once — the keeper's
//! death is an event raced against the pipes' EOF — kills the orphans
//! (here by spawn tag: this test process is no subreaper) and says how
//! many. Before, the wait read the pipes to EOF first, which the orphans
//! held off as long as they lived.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::time::Duration;

use tether::{Command, Error, Stdio};
use tether_testkit::{TAG_VAR, TagGuard, wait_all_dead, wait_for_count};

#[test]
fn output_wait_notices_a_killed_keeper_while_orphans_hold_the_pipes() {
    let guard = TagGuard::new("lib-keeper-death");
    let mut child = Command::new("/bin/sh")
        .args([
            "-c",
            "echo err >&2; sleep 1000 & setsid sleep 1000 & echo ready; wait",
        ])
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::Null)
        .stdout(Stdio::Piped)
        .stderr(Stdio::Piped)
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    assert!(wait_for_count(guard.tag(), 3, Duration::from_secs(20)) >= 3);
    let keeper = child.keeper_pid().expect("a keeper");
    // SAFETY: kill(2) of our own keeper, not reaped before its socket's
    // EOF is seen: its pid cannot have been reused.
    unsafe { libc::kill(keeper as i32, libc::SIGKILL) };

    // On a thread, bounded: before the fix this wait lasted as long as the
    // orphans (the guard kills them if it still does).
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    let waited = result
        .recv_timeout(Duration::from_secs(30))
        .expect("the output wait still blocks 30 s after the keeper was SIGKILLed");
    match waited {
        // The main `sh`, the pipe-holding sleep and the setsid escape.
        Err(Error::KeeperLost { orphans_killed }) => assert_eq!(orphans_killed, 3),
        other => panic!("expected KeeperLost, got {other:?}"),
    }
    assert!(
        wait_all_dead(guard.tag(), Duration::from_secs(15)).is_empty(),
        "survived the keeper's death"
    );
}
