//! A keeper started ahead of need (`tether::start_keeper_ahead`) serves the
//! next spawn; if the owner changed what a keeper passes on since, it is
//! let go and a fresh one serves instead; with no spawn it goes at
//! `set_warm_keepers(0)`. Nothing is left either way.
//!
//! One test function: the pool is process-wide.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

use std::time::Duration;

use tether::Command;
use tether_testkit::{fd_count, spawned_by_this_process, zombie_children};

/// The one keeper waiting for this process (started ahead, idle).
fn the_waiting_keeper() -> u32 {
    let keepers: Vec<u32> = spawned_by_this_process()
        .into_iter()
        .filter(|&pid| tether::sys::spawn_tag(pid).is_some_and(|t| t.purpose == "keeper"))
        .collect();
    assert_eq!(keepers.len(), 1, "one keeper started ahead: {keepers:?}");
    keepers[0]
}

/// The parent of a command: its keeper.
fn keeper_of_a_command() -> u32 {
    keeper_of_a_command_in(tether::SessionId::generate())
}

fn keeper_of_a_command_in(session: tether::SessionId) -> u32 {
    let child = Command::new("sh")
        .args(["-c", "echo $PPID"])
        .stdout(tether::Stdio::Piped)
        .session_id(session)
        .spawn()
        .unwrap();
    let keeper = child.keeper_pid().expect("a keeper");
    let out = child.wait_with_output().unwrap();
    let printed: u32 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(printed, keeper, "the command's parent is its keeper");
    keeper
}

/// Whether `pid` is still alive after up to 5 s: a keeper whose session
/// ended exits at once and is reaped by the owner's reaper thread, so the
/// wait (on a pidfd) ends at that exit; the bound only turns a leak into a
/// failure instead of a hang.
fn alive(pid: u32) -> bool {
    use std::os::fd::AsRawFd;
    let Some(pidfd) = tether_testkit::pidfd(pid) else {
        return false; // gone and reaped
    };
    let mut pfd = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    unsafe { libc::poll(&mut pfd, 1, 5_000) == 0 }
}

#[test]
fn a_keeper_started_ahead_serves_the_next_spawn_only_if_still_right() {
    Command::new("true").status().unwrap();
    let fds = fd_count();
    let zombies = zombie_children();

    // Taken by the next spawn, although the pool is off; its tag names
    // the session given, the command's too.
    let session = tether::SessionId::generate();
    tether::start_keeper_ahead(&session).unwrap();
    let ahead = the_waiting_keeper();
    let tag = tether::sys::spawn_tag(ahead).unwrap();
    assert_eq!(tag.session, session.as_str());
    assert_eq!(tag.owner_pid, std::process::id());
    // One is enough: a no-op now.
    tether::start_keeper_ahead(&tether::SessionId::generate()).unwrap();
    assert_eq!(the_waiting_keeper(), ahead);
    assert_eq!(
        keeper_of_a_command_in(session),
        ahead,
        "the spawn took the keeper started ahead"
    );
    // The pool is off: that keeper went with its session, and the next
    // command gets a keeper of its own.
    assert!(!alive(ahead), "keeper {ahead} outlived its session");
    let fresh = keeper_of_a_command();
    assert_ne!(fresh, ahead);

    // The owner lowered a limit since: a keeper started before would pass
    // the old one on to the command. It is let go; a fresh one serves.
    // (The open-files soft limit, one lower: any process may lower it.)
    tether::start_keeper_ahead(&tether::SessionId::generate()).unwrap();
    let ahead = the_waiting_keeper();
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    let lowered = libc::rlimit {
        rlim_cur: limit.rlim_cur - 1,
        rlim_max: limit.rlim_max,
    };
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lowered) }, 0);
    let served = keeper_of_a_command();
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    assert_ne!(served, ahead, "a keeper of the old limits ran the command");
    assert!(!alive(ahead), "the stale keeper {ahead} was not let go");

    // No spawn comes: `set_warm_keepers(0)` lets it go, reaped at once.
    tether::start_keeper_ahead(&tether::SessionId::generate()).unwrap();
    let ahead = the_waiting_keeper();
    tether::set_warm_keepers(0);
    assert!(
        !std::path::Path::new(&format!("/proc/{ahead}")).exists(),
        "keeper {ahead} was not reaped"
    );

    // Back to baseline: no process, descriptor or zombie of ours left.
    let left = spawned_by_this_process();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(fd_count(), fds, "descriptors");
    // Bounded: the keepers of the sessions above are reaped as their
    // sessions end; this only lets a reap in flight land.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while zombie_children() > zombies && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(zombie_children(), zombies, "zombies");
}
