//! Warm keepers: started ahead of need, and recycled once a session's tree
//! is empty. A recycled keeper must serve its next session as a fresh one
//! would, and nothing of the old session may reach the new one.
//!
//! One test function: the pool is process-wide, and descriptor counts
//! would see a parallel test's keepers.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

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

    // Turning the pool off lets idle keepers go; everything is reaped.
    tether::set_warm_keepers(0);
    assert_eq!(fd_count(), fds, "descriptors leaked");
    // Idle keepers exit on their EOF and are reaped by the library's reaper
    // thread; wait (bounded) until no child of ours is left, live or zombie
    // — a keeper still exiting is neither yet. Nothing raises an event here
    // for another thread's reap, so this looks every 5 ms.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tether::sys::children(std::process::id()).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(zombie_children(), 0, "keepers left unreaped");
}
