//! G4 under forced pid reuse: a stale identity never matches the process
//! that took its pid, and nothing signalled through a session reaches it.
//!
//! The reuse is forced with `ns_last_pid` inside a private PID namespace
//! (and a private /proc), where nothing else forks, so the very pid we
//! want is the next one handed out. Needs root; skipped otherwise.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Stdio as StdStdio;

use tether::unix::ChildExt;
use tether::{Command, ProcessIdentity};

const INNER: &str = "TETHER_PID_REUSE_INNER";

#[test]
fn forced_pid_reuse_in_a_private_namespace() {
    if !tether_testkit::require_root("forcing pid reuse") {
        return;
    }
    let status = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount", "--mount-proc"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "inner_pid_reuse",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(INNER, "1")
        .status()
        .expect("run unshare");
    assert!(
        status.success(),
        "the test inside the namespace failed: {status}"
    );
}

/// Spawns `sleep` with std (not tether: an unrelated process) at exactly
/// `pid`, as the leader of its own process group — so a signal to the
/// stale process *group* would hit it too.
fn spawn_at(pid: u32) -> std::process::Child {
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string())
            .expect("write ns_last_pid");
        let mut child = std::process::Command::new("sleep")
            .arg("1000")
            .stdin(StdStdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        if child.id() == pid {
            return child;
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
    panic!("could not get pid {pid} again");
}

/// Waits until no process has `group` as its process group: the setsid
/// child leaves the old main process's group only when it runs
/// `setsid(2)`, and until then the id cannot be handed out (under the
/// load of a whole suite, 50 tries of `spawn_at` in a row got other pids).
/// Bounded far above the microseconds that takes.
fn group_gone(group: u32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let in_group = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .any(|pid| tether::sys::process(pid).is_ok_and(|p| p.pgrp == group))
    };
    while in_group() {
        assert!(
            std::time::Instant::now() < deadline,
            "group {group} never emptied"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Whether `child` is still running after a bound of 200 ms, watched on a
/// pidfd. A SIGKILL is delivered before `kill(2)` returns, so any stray one
/// would show long before the bound.
fn still_running(child: &mut std::process::Child) -> bool {
    let fd = tether_testkit::pidfd(child.id()).unwrap();
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let exited = unsafe { libc::poll(&mut pfd, 1, 200) } > 0;
    !exited && child.try_wait().unwrap().is_none()
}

#[test]
fn inner_pid_reuse() {
    if std::env::var_os(INNER).is_none() {
        return; // runs only inside the namespace set up by the test above
    }
    // 1. A stale identity never matches the process that took its pid.
    let mut a = Command::new("sleep").arg("1000").spawn().unwrap();
    let stale = a.identity().clone();
    a.kill().unwrap();
    let mut b = spawn_at(stale.pid);
    let fresh = ProcessIdentity::of_pid(stale.pid).unwrap();
    eprintln!(
        "reused pid {}: start time {} -> {}, pidfs inode {:?} -> {:?}",
        stale.pid, stale.start_time, fresh.start_time, stale.pidfs_inode, fresh.pidfs_inode
    );
    assert!(!stale.matches(&fresh));
    assert!(!stale.is_alive());
    assert!(fresh.is_alive());
    b.kill().unwrap();
    b.wait().unwrap();

    // 2. A session whose main process exited while a descendant lives on
    //    (in its own session, so the old group id is free): the main pid —
    //    and so the old group id — goes to an outsider; signals and the
    //    kill of the session must not reach the outsider.
    let mut c = Command::new("sh")
        .args(["-c", "setsid sleep 1000 & exit 0"])
        .keep_descendants(true)
        .spawn()
        .unwrap();
    let main_pid = c.id();
    c.wait().unwrap();
    group_gone(main_pid);
    let mut outsider = spawn_at(main_pid);
    c.signal_group(libc::SIGKILL).unwrap();
    c.signal(libc::SIGTERM).unwrap();
    c.kill().unwrap();
    assert!(
        still_running(&mut outsider),
        "the outsider holding the reused pid was signalled"
    );
    outsider.kill().unwrap();
    outsider.wait().unwrap();
}
