//! The owner a teardown bench kills: a `tether run` (or, for the floor, a
//! bare shell) whose command prints `ready` once its tree is built, and the
//! clock and the signals its teardown is timed with.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use tether_testkit::TAG_VAR;

/// Starts `command` (its program and arguments already set; stderr and any
/// other environment too, as the caller wants them) with `tag` in its
/// environment, `home` as its `TETHER_HOME`, stdin from `/dev/null` and
/// stdout piped, and returns once the command has printed `ready\n`.
pub fn start_owner(command: &mut Command, tag: &str, home: &Path) -> Child {
    let mut owner = command
        .env(TAG_VAR, tag)
        .env("TETHER_HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = [0u8; 6];
    owner
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut ready)
        .unwrap();
    owner
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock the keeper's phase report
/// (`TETHER_KEEPER_DEBUG`) uses, so the two can be compared.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `SIGKILL`s every process through a pidfd the bench already holds: the
/// kernel's floor for tearing the tree down.
pub fn sigkill_all(fds: &[OwnedFd]) {
    for fd in fds {
        // SAFETY: pidfd_send_signal on a pidfd we hold, no siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            )
        };
    }
}

/// The keeper's one-line report of a kill in its stderr
/// (`TETHER_KEEPER_DEBUG`), if it made one.
pub fn keeper_phases(stderr: &str) -> Option<&str> {
    stderr
        .lines()
        .find(|l| l.starts_with("tether-keeper: kill phases:"))
}
