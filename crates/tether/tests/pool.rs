//! Warm keepers: the keeper of a session whose tree is empty waits in the
//! pool for the next command. A recycled keeper must serve its next session as a fresh one
//! would, and nothing of the old session may reach the new one.
//!
//! One test function: the pool is process-wide, and descriptor counts
//! would see a parallel test's keepers.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

use std::os::fd::AsRawFd;

use tether::unix::ChildExt;
use tether::{Command, Stdio};
use tether_testkit::{fd_count, zombie_children};

#[test]
fn warm_and_recycled_keepers() {
    Command::new("true").status().unwrap();
    let fds = fd_count();
    tether::set_warm_keepers(2);

    // Many sessions through the pool: each is correct.
    for i in 0..300 {
        let out = Command::new("sh")
            .args(["-c", &format!("echo {i}; sleep 1000 &")])
            .output()
            .unwrap();
        assert_eq!(out.stdout, format!("{i}\n").into_bytes());
        assert_eq!(out.status.descendants_killed(), 1);
    }

    // A handle of a finished session cannot reach the session that reuses
    // its keeper.
    let mut a = Command::new("true").spawn().unwrap();
    let stale = a.handle();
    let keeper = a.keeper_pid();
    a.wait().unwrap();
    let mut b = Command::new("sleep")
        .arg("1000")
        .stdin(Stdio::Null)
        .spawn()
        .unwrap();
    assert_eq!(b.keeper_pid(), keeper, "the keeper was recycled");
    assert!(stale.start_kill().is_err());
    assert!(stale.signal(libc::SIGKILL).is_err());
    let pidfd = tether_testkit::pidfd(b.id()).unwrap();
    let mut pfd = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // Bounded: a stray SIGKILL would be delivered before the send returned;
    // 200 ms is only there to let the kernel show it.
    assert_eq!(
        unsafe { libc::poll(&mut pfd, 1, 200) },
        0,
        "the new session was hit through a stale handle"
    );
    b.kill().unwrap();
    drop((a, b, stale, pidfd));

    // Only idle keepers are left: no thread of the library runs for them
    // (a host that forks must see none while no session is live).
    assert!(!tether::sys::children(std::process::id()).is_empty());
    assert_eq!(library_threads(), Vec::<String>::new());

    // Turning the pool off lets idle keepers go, reaped before it returns.
    tether::set_warm_keepers(0);
    assert_eq!(fd_count(), fds, "descriptors leaked");
    assert_eq!(tether::sys::children(std::process::id()), Vec::<u32>::new());
    assert_eq!(zombie_children(), 0, "keepers left unreaped");
}

/// The library's threads of this process (`tether-guard`, `tether-reaper`,
/// …), by name.
fn library_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|comm| comm.trim().to_owned())
        .filter(|comm| comm.starts_with("tether-"))
        .collect()
}
