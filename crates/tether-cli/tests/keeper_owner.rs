//! The keeper proves its owner from its spawn tag (pid and start time,
//! through a pidfd), never from its parent pid: an owner that died while
//! its keeper started left the keeper re-parented to a subreaper, which
//! `getppid()` then named — and every "tell my parent" signal of the
//! command (`kill -USR1 $PPID`) went to that process instead.
//!
//! This test's process is the subreaper. The keeper program is a wrapper
//! (`TETHER_KEEPER`) that waits until the owner's spawn request is queued
//! on its socket, then until the test has killed the owner (holding a copy
//! of the owner's end of the lifeline, so that the keeper serves the
//! request), then execs the real keeper. Own file: it makes the test
//! process a child subreaper. Root (`pidfd_getfd` of another process).

#![cfg(target_os = "linux")]

mod support;

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use support::tether_path;
use tether_testkit::{TAG_VAR, TagGuard, require_root, wait_all_dead};

/// The `si_pid` and `si_code` of the last SIGUSR1 this process got.
static FROM: AtomicU32 = AtomicU32::new(0);
static CODE: AtomicI32 = AtomicI32::new(0);

extern "C" fn record(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    unsafe {
        FROM.store((*info).si_pid() as u32, Ordering::SeqCst);
        CODE.store((*info).si_code, Ordering::SeqCst);
    }
}

/// Waits (bounded) until `path` exists, and returns its content.
fn wait_for_file(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text;
        }
        assert!(Instant::now() < deadline, "{} never came", path.display());
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_keeper_whose_owner_died_while_it_started_passes_nothing_to_its_new_parent() {
    if !require_root("pidfd_getfd of another process") {
        return;
    }
    // SAFETY: prctl with integer arguments; sigaction with a zeroed struct
    // and a handler that only stores to atomics (async-signal-safe).
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = record as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0
        );
    }
    let guard = TagGuard::new("keeper-owner-proof");
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let fifo = std::ffi::CString::new(go.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let wrapper = dir.path().join("keeper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/usr/bin/python3\n\
             import os, select, sys\n\
             select.select([0], [], [])\n\
             open({ready:?}, 'w').write('%d\\n' % os.getpid())\n\
             open({go:?}).read()\n\
             os.execv({tether:?}, [{tether:?}] + sys.argv[1:])\n",
            ready = dir.path().join("ready").to_str().unwrap(),
            go = go.to_str().unwrap(),
            tether = tether_path().to_str().unwrap(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let sent = dir.path().join("sent");
    let mut owner = std::process::Command::new(tether_path())
        .args(["run", "--", "sh", "-c"])
        .arg(format!(
            "kill -USR1 $PPID; echo > {}; exec sleep 1000",
            sent.display()
        ))
        .env("TETHER_KEEPER", &wrapper)
        .env("TETHER_HOME", dir.path().join("home"))
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The owner's spawn request is queued on the keeper's socket.
    let keeper: u32 = wait_for_file(&dir.path().join("ready"))
        .trim()
        .parse()
        .unwrap();
    // A copy of every socket of the owner's, so that the lifeline stays
    // open when the owner dies and the keeper serves the request.
    // SAFETY: pidfd_open and pidfd_getfd with integer arguments; each new
    // descriptor is ours alone.
    let held: Vec<OwnedFd> = unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, owner.id(), 0) as i32;
        assert!(pidfd >= 0);
        let pidfd = OwnedFd::from_raw_fd(pidfd);
        std::fs::read_dir(format!("/proc/{}/fd", owner.id()))
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|t| t.to_string_lossy().starts_with("socket:"))
            })
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(|fd| {
                use std::os::fd::AsRawFd;
                let got = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) as i32;
                (got >= 0).then(|| OwnedFd::from_raw_fd(got))
            })
            .collect()
    };
    assert!(!held.is_empty(), "the owner has its lifeline");
    owner.kill().unwrap();
    owner.wait().unwrap();
    // The keeper (still the wrapper) is this process's child now.
    assert_eq!(
        tether::sys::process(keeper).unwrap().ppid,
        std::process::id(),
        "re-parented to the subreaper"
    );
    std::fs::write(&go, "").unwrap();
    wait_for_file(&sent);
    // Lifeline EOF: the keeper kills the tree and exits (it handles the
    // signal its command sent first, in the same or an earlier wake-up).
    drop(held);
    let mut status = 0;
    // SAFETY: waitpid on our own child, with a status to fill.
    assert_eq!(
        unsafe { libc::waitpid(keeper as i32, &mut status, 0) },
        keeper as i32
    );
    assert_eq!(
        (FROM.load(Ordering::SeqCst), CODE.load(Ordering::SeqCst)),
        (0, 0),
        "the command's SIGUSR1 for its parent reached the keeper's new parent \
         (this process) instead of nobody: keeper {keeper}"
    );
    assert!(wait_all_dead(guard.tag(), Duration::from_secs(5)).is_empty());
}
