//! A keeper SIGKILLed on its own: with a PID namespace the kernel kills the
//! namespace with it; with a subreaper keeper the orphans reparent to
//! `tether run` (itself a subreaper), which finds them by spawn tag and
//! kills them.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod support;

use std::time::Duration;

use support::{Owner, keeper_of};
use tether_testkit::{TagGuard, Tree, wait_all_dead, wait_for_count};

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
