//! The process-table checks, on Linux (`/proc`, pidfds).

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::{TAG_VAR, unique_tag};

/// Pids of live (not zombie) processes whose environment has
/// `TETHER_TEST_TAG=<tag>`.
pub fn tagged_pids(tag: &str) -> Vec<u32> {
    let needle = format!("{TAG_VAR}={tag}");
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| has_env_entry(pid, needle.as_bytes()))
        .filter(|&pid| !is_zombie(pid))
        .collect()
}

/// Whether `pid`'s environment holds `entry`. A process inside execve can
/// show an empty environment for a moment; an empty or unreadable one is
/// read again a few times before it counts as "no".
fn has_env_entry(pid: u32, entry: &[u8]) -> bool {
    for _ in 0..5 {
        match fs::read(format!("/proc/{pid}/environ")) {
            Ok(env) if !env.is_empty() => return env.split(|&b| b == 0).any(|v| v == entry),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
            _ => std::thread::yield_now(),
        }
    }
    false
}

/// A process in state `Z` has exited; PID 1 here reaps orphans only every
/// ~2 s, so a zombie counts as dead.
pub fn is_zombie(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

/// A pidfd, for waiting on a process that is not our child.
pub fn pidfd(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open(pid, 0) returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
    // SAFETY: the descriptor is new and ours.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Waits — on pidfds, not by sleeping — until no live process carries
/// `tag`, for at most `bound`. Returns the survivors (empty = all dead).
/// Processes forked while waiting are found by re-scanning after each wave
/// of deaths.
pub fn wait_all_dead(tag: &str, bound: Duration) -> Vec<u32> {
    wait_until_none(|| tagged_pids(tag), bound)
}

/// Pids of live (not zombie) processes whose spawn tag (`TETHER_SPAWN`,
/// field 4 and 5: the owner's pid and start time) names this very process
/// as their owner: everything tether started for it — keepers, commands
/// and their descendants, escapes included — that still runs. Works
/// without the test tag, so a doc example can check itself in hidden
/// lines.
pub fn spawned_by_this_process() -> Vec<u32> {
    let me = std::process::id();
    let Some(start) = start_time(me) else {
        return Vec::new();
    };
    let owner = format!(":{me}:{start}:");
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me && names_owner(pid, owner.as_bytes()))
        .filter(|&pid| !is_zombie(pid))
        .collect()
}

/// The check a doc example that starts processes ends with: nothing this
/// process started through tether may outlive the example. Waits — on
/// pidfds — until no process carrying a spawn tag of this owner is alive,
/// for at most 10 s, then panics naming the survivors. Why a wait at all:
/// a keeper exits just after it reported its tree empty, and a dropped
/// `Child`'s keeper kills the tree with the command's grace (2 s by
/// default); 10 s is well beyond both, and a leaked `sleep 1000` is not.
pub fn assert_nothing_left() {
    let survivors = wait_until_none(spawned_by_this_process, Duration::from_secs(10));
    assert!(
        survivors.is_empty(),
        "processes started by this example outlived it: {}",
        survivors
            .iter()
            .map(|pid| {
                let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                format!(
                    "{pid} {}",
                    String::from_utf8_lossy(&cmd).replace('\0', " ").trim_end()
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// Whether `pid`'s `TETHER_SPAWN` holds `owner` (`:<pid>:<start>:`) as its
/// owner fields; read again like [`has_env_entry`] while empty.
fn names_owner(pid: u32, owner: &[u8]) -> bool {
    const VAR: &[u8] = b"TETHER_SPAWN=v1:";
    for _ in 0..5 {
        match fs::read(format!("/proc/{pid}/environ")) {
            Ok(env) if !env.is_empty() => {
                return env
                    .split(|&b| b == 0)
                    .filter_map(|v| v.strip_prefix(VAR))
                    .any(|tag| {
                        // install:purpose:pid:start:session — the owner
                        // fields start after the second colon.
                        let mut colons = tag.iter().enumerate().filter(|(_, b)| **b == b':');
                        colons
                            .nth(1)
                            .is_some_and(|(at, _)| tag[at..].starts_with(owner))
                    });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
            _ => std::thread::yield_now(),
        }
    }
    false
}

/// Start time of `pid` in clock ticks since boot (`/proc/<pid>/stat`
/// field 22), the unit of a spawn tag's `owner_start` on Linux.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    // After the command name, field 3 (state) is the first: 22 is the 20th.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Waits on pidfds until `alive()` finds nothing, for at most `bound`;
/// returns what it found last (empty: all dead).
fn wait_until_none(alive: impl Fn() -> Vec<u32>, bound: Duration) -> Vec<u32> {
    let deadline = Instant::now() + bound;
    loop {
        let alive = alive();
        if alive.is_empty() {
            return alive;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return alive;
        }
        let fds: Vec<OwnedFd> = alive.iter().filter_map(|&p| pidfd(p)).collect();
        if fds.is_empty() {
            // All of them died between the scan and the open: look again.
            continue;
        }
        let mut pfds: Vec<libc::pollfd> = fds
            .iter()
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // Wait for at least one of them to die (or the deadline), then look
        // again: a process may have forked before dying.
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: valid pollfd array.
        unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    }
}

/// Waits until at least `n` live processes carry `tag`, for at most
/// `bound`; returns how many there are. Process creation raises no event
/// visible from outside the tree, so this polls the process table every
/// 5 ms — only used to make sure a fixture is fully built before a test
/// tries to break it.
pub fn wait_for_count(tag: &str, n: usize, bound: Duration) -> usize {
    let deadline = Instant::now() + bound;
    loop {
        let count = tagged_pids(tag).len();
        if count >= n || Instant::now() >= deadline {
            return count;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// SIGKILLs every process carrying `tag` (through pidfds, so a recycled
/// pid is never hit) until none is left.
pub fn kill_tagged(tag: &str) {
    for _ in 0..100 {
        let alive = tagged_pids(tag);
        if alive.is_empty() {
            return;
        }
        for pid in alive {
            sigkill(pid);
        }
        wait_all_dead(tag, Duration::from_millis(200));
    }
}

/// `SIGKILL`s `pid` through a pidfd opened first (so a recycled pid is
/// never hit); `false` when it is already gone.
pub fn sigkill(pid: u32) -> bool {
    let Some(fd) = pidfd(pid) else {
        return false;
    };
    // SAFETY: pidfd_send_signal on a pidfd we hold, no siginfo.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<u8>(),
            0u32,
        )
    };
    sent == 0
}

/// Kills whatever still carries the tag when dropped, so that a failing
/// test does not leak its processes into the next one.
pub struct TagGuard(pub String);

impl TagGuard {
    /// A guard for a fresh unique tag.
    pub fn new(name: &str) -> TagGuard {
        TagGuard(unique_tag(name))
    }

    /// The tag.
    pub fn tag(&self) -> &str {
        &self.0
    }
}

impl Drop for TagGuard {
    fn drop(&mut self) {
        kill_tagged(&self.0);
    }
}

/// `sh -c 'echo ready; read x'` with `var` set to `value` (or explicitly
/// removed when `None`), returned once it said `ready` — so it has exec'd
/// and its environment is in place. It exits when its stdin closes.
pub fn spawn_ready(var: &str, value: Option<&str>) -> std::process::Child {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo ready; read x"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    match value {
        Some(value) => cmd.env(var, value),
        None => cmd.env_remove(var),
    };
    let mut child = cmd.spawn().expect("spawn sh");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    child
}

/// Open descriptors of this process.
pub fn fd_count() -> usize {
    fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Children of this process (any thread) in state `Z`.
pub fn zombie_children() -> usize {
    let me = std::process::id();
    let Ok(tasks) = fs::read_dir(format!("/proc/{me}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| {
            text.split_ascii_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .filter(|&pid| is_zombie(pid))
        .count()
}

/// Waits until the set of live processes carrying `tag` stops changing —
/// the same in two scans 50 ms apart — for at most `bound`, and returns it.
/// A script that prints `ready` right after launching `… &` jobs is still
/// forking and exec'ing for a while after; process creation raises no
/// event outside the tree, so this polls, bounded.
pub fn wait_for_stable(tag: &str, bound: Duration) -> Vec<u32> {
    let deadline = Instant::now() + bound;
    let mut last = tagged_pids(tag);
    last.sort_unstable();
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let mut now = tagged_pids(tag);
        now.sort_unstable();
        if now == last || Instant::now() >= deadline {
            return now;
        }
        last = now;
    }
}

/// Waits until a live process carrying `tag` runs `program` (its `argv[0]`,
/// so it has exec'd) and leads its terminal's foreground process group —
/// the moment a key typed into the terminal reaches it rather than the
/// shell that forked it — for at most `bound`; its pid. A job-control
/// shell hands the terminal over between its fork and the exec, and
/// neither raises an event outside the tree, so this polls every 5 ms.
pub fn wait_for_foreground(tag: &str, program: &str, bound: Duration) -> Option<u32> {
    let deadline = Instant::now() + bound;
    loop {
        let found = tagged_pids(tag).into_iter().find(|&pid| {
            let argv0_matches = fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).next() == Some(program.as_bytes()));
            argv0_matches && leads_foreground(pid)
        });
        if found.is_some() || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether `pid`'s process group is its terminal's foreground group
/// (`/proc/<pid>/stat`: field 5 is the group, field 8 the terminal's
/// foreground group).
fn leads_foreground(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    // After the command name: state, ppid, pgrp, session, tty_nr, tpgid.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    matches!(
        (fields.get(2).and_then(|f| f.parse::<i32>().ok()), fields.get(5).and_then(|f| f.parse::<i32>().ok())),
        (Some(pgrp), Some(tpgid)) if pgrp > 0 && pgrp == tpgid
    )
}

/// Runs `scenario` (a test of the calling test binary) again, as pid 1 of
/// a private pid namespace (`unshare --pid --fork --mount-proc`) with `var`
/// set so the scenario knows it is inside, and fails unless it ran and
/// passed. Skips with a message (see [`require_root`](crate::require_root))
/// when not root or without `unshare`.
pub fn run_in_private_pid_namespace(scenario: &str, var: &str) {
    if !crate::require_root("a private pid namespace (forcing pid reuse)") {
        return;
    }
    let unshare = std::process::Command::new("unshare")
        .arg("--version")
        .output();
    if !crate::require(
        unshare.is_ok_and(|o| o.status.success()),
        "no unshare(1) (util-linux)",
    ) {
        return;
    }
    let out = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", scenario, "--nocapture", "--test-threads=1"])
        .env(var, "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "scenario failed:\n{text}");
    assert!(text.contains("1 passed"), "scenario did not run:\n{text}");
}
