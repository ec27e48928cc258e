//! A command that stops its own keeper (`kill -STOP $PPID`) cannot stop
//! what the keeper enforces while the owner lives: the keeper is resumed
//! within a patrol period (200 ms) — by the guard thread for a child handed
//! out (`spawn`), by the waiting thread itself for `Command::status` and
//! `spawn_attended`, which start no guard thread (whether it waits whole,
//! in slices or by polling) — and the command's timeout still ends it.

// Real Linux process trees (/proc, signals): the suite runs on Linux;
// macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

use std::sync::mpsc;
use std::time::Duration;

use tether::{Command, ExitStatus};
use tether_testkit::{TAG_VAR, kill_tagged, tagged_pids, unique_tag, wait_all_dead};

/// Stops its keeper (the parent of the main process), then would run for
/// ever.
const STOPS_ITS_KEEPER: &str = "kill -STOP $PPID; exec sleep 1000";

/// Runs `run` on a timed-out command that stops its keeper and asserts the
/// timeout still ended it, whole.
fn the_timeout_still_ends_it(name: &str, run: fn(&mut Command) -> tether::Result<ExitStatus>) {
    let tag = unique_tag(name);
    let (done, outcome) = mpsc::channel();
    let env_tag = tag.clone();
    std::thread::spawn(move || {
        let mut command = Command::new("sh");
        command
            .args(["-c", STOPS_ITS_KEEPER])
            .env(TAG_VAR, &env_tag)
            .timeout(Duration::from_millis(500));
        let _ = done.send(run(&mut command));
    });
    // A keeper left stopped never fires the timeout, and the wait never
    // returns: bounded at 30 s (the patrol takes 200 ms, the timeout
    // 500 ms), after which the tree is killed by tag and the test fails.
    let got = outcome.recv_timeout(Duration::from_secs(30));
    if got.is_err() {
        kill_tagged(&tag);
    }
    let status = got
        .expect("the stopped keeper was never resumed: the timeout never fired")
        .unwrap();
    assert!(status.timed_out(), "{status:?}");
    assert_eq!(
        wait_all_dead(&tag, Duration::from_secs(10)),
        Vec::<u32>::new()
    );
    assert_eq!(tagged_pids(&tag), Vec::<u32>::new());
}

#[test]
fn status_resumes_a_keeper_its_command_stopped() {
    the_timeout_still_ends_it("stopped-keeper-status", |command| command.status());
}

#[test]
fn the_guard_resumes_a_keeper_its_spawned_command_stopped() {
    the_timeout_still_ends_it("stopped-keeper-spawn", |command| command.spawn()?.wait());
}

/// A waiter that waits in slices (Python's `wait` waits 100 ms at a time,
/// checking for Ctrl-C between) patrols as a blocking `wait` does: the
/// attended keeper is resumed although no slice lasts a patrol period.
#[test]
fn an_attended_wait_in_slices_resumes_a_keeper_its_command_stopped() {
    the_timeout_still_ends_it("stopped-keeper-slices", |command| {
        let mut child = command.spawn_attended()?;
        loop {
            if let Some(status) = child.wait_timeout(Duration::from_millis(100))? {
                return Ok(status);
            }
        }
    });
}

/// The same for a waiter that only polls (`try_wait`), as a loop over the
/// command's pipes does between its reads.
#[test]
fn an_attended_poll_resumes_a_keeper_its_command_stopped() {
    the_timeout_still_ends_it("stopped-keeper-poll", |command| {
        let mut child = command.spawn_attended()?;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            // Between two polls the poller is busy elsewhere (its pipes).
            std::thread::sleep(Duration::from_millis(50));
        }
    });
}
