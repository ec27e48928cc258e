//! Test utilities shared by every layer of tether: adversarial process trees
//! and the checks a user would make — which processes carrying a test's
//! unique tag are alive, how many descriptors and zombies a process holds.
//!
//! Every test marks the processes it starts with its own unique tag in the
//! environment variable [`TAG_VAR`]; every descendant inherits it (even a
//! daemon that closes all its descriptors). Assertions and clean-up go by
//! that tag, never by process name, so tests running in parallel — or
//! anything else on the machine — are never confused with each other.

use std::sync::atomic::{AtomicU32, Ordering};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;

/// Environment variable carrying a test's unique tag.
pub const TAG_VAR: &str = "TETHER_TEST_TAG";

/// A Python script (`python3 -c`) that leaves its session's limits: it
/// writes itself into its owner's cgroups (the parents of its `tether-*`
/// leaves, found from /proc/self/cgroup and mountinfo), then starts 5
/// sleepers there and exits. Root only. The Python tests read the same
/// file (`fixtures/escape_limits.py`).
pub const ESCAPE_LIMITS: &str = include_str!("../fixtures/escape_limits.py");

/// A unique tag for one test: its name, this process's pid and a counter.
pub fn unique_tag(name: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{name}-{}-{n}", std::process::id())
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
    /// 3,000 `setsid sleep`s started by two loops, which then exit (not in
    /// [`Tree::ALL`]: a benchmark's tree, issue 34 item 10). Ready once all
    /// are started; nothing forks during the kill.
    BoundedStorm,
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
            Tree::BoundedStorm => {
                "for j in 1 2; do (i=0; while [ $i -lt 1500 ]; do setsid sleep 1000 & i=$((i+1)); done) & done; \
                 wait; echo ready; exec sleep 1000"
            }
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
            Tree::BoundedStorm => 3000,
        }
    }
}

/// Environment variable that makes root-only tests fail instead of skip:
/// CI sets it (it runs as root), so a test that cannot run there is a
/// failure, never a silent pass.
pub const REQUIRE_ROOT_VAR: &str = "TETHER_REQUIRE_ROOT";

/// Whether a root-only test can run. As root: `true`. Otherwise: prints
/// `skipped: <what> needs root` and returns `false` — unless
/// `TETHER_REQUIRE_ROOT=1`, where it panics, so the test fails.
pub fn require_root(what: &str) -> bool {
    require(is_root(), &format!("{what} needs root"))
}

/// Like [`require_root`], for any precondition: `ok`, or skip with
/// `why` — or fail when `TETHER_REQUIRE_ROOT=1` (CI has every
/// precondition a root-only test needs).
pub fn require(ok: bool, why: &str) -> bool {
    if ok {
        return true;
    }
    if std::env::var_os(REQUIRE_ROOT_VAR).is_some_and(|v| v == "1") {
        panic!("cannot run: {why} ({REQUIRE_ROOT_VAR}=1 says it must run here)");
    }
    eprintln!("skipped: {why}");
    false
}

/// Whether this process runs as root (never, where there is no root).
pub fn is_root() -> bool {
    #[cfg(unix)]
    // SAFETY: geteuid cannot fail and touches no memory.
    return unsafe { libc::geteuid() == 0 };
    #[cfg(not(unix))]
    return false;
}

/// Set in a test process started by [`alone`].
const ALONE_VAR: &str = "TETHER_TEST_ALONE";

/// Runs the calling test alone, in a fresh process of the same test binary
/// with one test thread: for tests whose baselines (descriptor, zombie and
/// memory counts of the test process) other tests of the binary would
/// disturb by running at the same time.
///
/// Call it first: `if !alone(module_path!(), "my_test") { return; }`. In
/// the fresh process it returns `true` (run the body); in the original one
/// it runs the fresh process, asserts that the test passed there, and
/// returns `false`.
pub fn alone(module_path: &str, test: &str) -> bool {
    if std::env::var_os(ALONE_VAR).is_some() {
        return true;
    }
    // `module_path!()` starts with the crate (the test binary's) name; the
    // harness names tests without it.
    let name = match module_path.split_once("::") {
        Some((_, rest)) => format!("{rest}::{test}"),
        None => test.to_owned(),
    };
    let exe = std::env::current_exe().expect("current test binary");
    let out = std::process::Command::new(exe)
        .args([name.as_str(), "--exact", "--test-threads=1", "--nocapture"])
        .env(ALONE_VAR, "1")
        .output()
        .expect("run the test alone");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{name} failed when run alone:\n{stdout}\n{stderr}"
    );
    false
}
