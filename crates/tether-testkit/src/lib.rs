//! Test utilities shared by every layer of tether: adversarial process trees
//! and the checks a user would make — which processes carrying a test's
//! unique tag are alive, how many descriptors and zombies a process holds.
//!
//! Every test marks the processes it starts with its own unique tag in the
//! environment variable [`TAG_VAR`]; every descendant inherits it (even a
//! daemon that closes all its descriptors). Assertions and clean-up go by
//! that tag, never by process name, so tests running in parallel — or
//! anything else on the machine — are never confused with each other.

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Environment variable carrying a test's unique tag.
pub const TAG_VAR: &str = "TETHER_TEST_TAG";

/// A unique tag for one test: its name, this process's pid and a counter.
pub fn unique_tag(name: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{name}-{}-{n}", std::process::id())
}

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
    let deadline = Instant::now() + bound;
    loop {
        let alive = tagged_pids(tag);
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
            if let Some(fd) = pidfd(pid) {
                // SAFETY: pidfd_send_signal on our own pidfd, no siginfo.
                unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        fd.as_raw_fd(),
                        libc::SIGKILL,
                        std::ptr::null::<u8>(),
                        0u32,
                    )
                };
            }
        }
        wait_all_dead(tag, Duration::from_millis(200));
    }
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

/// Whether a root-only test can run: `true` as root. Otherwise it prints
/// `skipped: <reason> needs root` and returns `false` — unless
/// `TETHER_REQUIRE_ROOT=1` is set (CI runs as root with it), where a skip
/// would be a silent pass: then it panics.
pub fn require_root(reason: &str) -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var_os("TETHER_REQUIRE_ROOT").is_none_or(|v| v != "1"),
        "TETHER_REQUIRE_ROOT=1 but not root: cannot test {reason}"
    );
    eprintln!("skipped: {reason} needs root (CI runs as root)");
    false
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

/// Adversarial process trees. Each is a `/bin/sh` script that prints
/// `ready` on stdout once its escapes are launched, and keeps its main
/// process alive (`exec sleep`) unless said otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tree {
    /// `setsid` children and a double-forked `setsid` orphan.
    SetsidDoubleFork,
    /// `nohup … &`.
    Nohup,
    /// A classic daemon: double fork, `setsid`, `chdir /`, every fd closed.
    Daemon,
    /// Processes that ignore SIGTERM, SIGHUP and SIGINT (and their children
    /// inherit the ignored dispositions).
    TrapIgnore,
    /// Two loops forking `setsid` children continuously (bounded to 1500
    /// each, pid_max here is 32768) while the test kills the tree.
    ForkStorm,
    /// The main process exits at once; a grandchild keeps stdout open.
    GrandchildHoldsStdout,
    /// 103 processes: setsid sessions, double-fork orphans, nested shells.
    Hundred,
}

impl Tree {
    /// Every tree.
    pub const ALL: [Tree; 7] = [
        Tree::SetsidDoubleFork,
        Tree::Nohup,
        Tree::Daemon,
        Tree::TrapIgnore,
        Tree::ForkStorm,
        Tree::GrandchildHoldsStdout,
        Tree::Hundred,
    ];

    /// The script (run with `/bin/sh -c`).
    pub fn script(self) -> &'static str {
        match self {
            Tree::SetsidDoubleFork => {
                "setsid sh -c 'sleep 1000 & exec sleep 1000' & \
                 (setsid sh -c 'sleep 1000 &' &); \
                 echo ready; exec sleep 1000"
            }
            Tree::Nohup => {
                "nohup sleep 1000 >/dev/null 2>&1 & nohup sh -c 'sleep 1000' >/dev/null 2>&1 & echo ready; exec sleep 1000"
            }
            Tree::Daemon => {
                "python3 -c '
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.chdir(\"/\")
        sys.stdout.write(\"ready\\n\"); sys.stdout.flush()
        os.closerange(0, 1024)
        os.execvp(\"sleep\", [\"sleep\", \"1000\"])
    os._exit(0)
os.wait()
'; exec sleep 1000"
            }
            Tree::TrapIgnore => {
                "trap '' TERM HUP INT; \
                 sh -c 'while :; do sleep 1; done' & setsid sleep 1000 & \
                 echo ready; while :; do sleep 1; done"
            }
            Tree::ForkStorm => {
                "for j in 1 2; do (i=0; while [ $i -lt 1500 ]; do setsid sleep 1000 & i=$((i+1)); done; wait) & done; \
                 echo ready; exec sleep 1000"
            }
            Tree::GrandchildHoldsStdout => "sh -c 'sleep 1000' & echo ready",
            Tree::Hundred => {
                "i=0; while [ $i -lt 17 ]; do \
                   setsid sh -c 'sleep 1000 & sleep 1000 & exec sleep 1000' & \
                   (setsid sh -c 'sleep 1000 &' &); \
                   sh -c 'sleep 1000 & wait' & \
                   i=$((i+1)); done; echo ready; exec sleep 1000"
            }
        }
    }

    /// How many live tagged processes the built tree has at least (used to
    /// prove a fixture was built before the test tries to break it).
    pub fn min_processes(self) -> usize {
        match self {
            Tree::SetsidDoubleFork => 4,
            Tree::Nohup => 4,
            Tree::Daemon => 2,
            Tree::TrapIgnore => 4,
            Tree::ForkStorm => 20,
            Tree::GrandchildHoldsStdout => 2,
            Tree::Hundred => 100,
        }
    }
}
