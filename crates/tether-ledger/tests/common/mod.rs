//! Fixtures for the ledger tests: a private install per test, and tagged
//! processes that are cleaned up by that install's unique id, never by name.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use tether::{Install, SPAWN_TAG_VAR};

/// A private install in a temporary directory. Every process a test tags
/// with it is killed (through pidfds) when this is dropped.
pub struct TestInstall {
    pub dir: tempfile::TempDir,
    pub install: Install,
}

impl TestInstall {
    pub fn new() -> TestInstall {
        let dir = tempfile::tempdir().unwrap();
        let install = Install::at(dir.path().join("state"));
        TestInstall { dir, install }
    }

    pub fn id(&self) -> &str {
        self.install.id()
    }

    pub fn state_dir(&self) -> &Path {
        self.install.state_dir()
    }

    pub fn ledger_path(&self) -> std::path::PathBuf {
        self.state_dir().join(tether_ledger::LEDGER_FILE)
    }

    /// A tag of this install naming `owner` (pid, start) and `session`.
    pub fn tag(&self, purpose: &str, owner: (u32, u64), session: &str) -> String {
        format!(
            "v1:{}:{purpose}:{}:{}:{session}",
            self.id(),
            owner.0,
            owner.1
        )
    }

    /// Starts a process carrying `tag` and returns once it runs (its exec,
    /// and so its environment, is complete: the parent of a `posix_spawn`
    /// resumes before the child's new environment is in place). It is a
    /// `sh` blocked reading stdin: dropping the child's stdin ends it.
    pub fn spawn_tagged(&self, tag: &str) -> Child {
        spawn_ready(Some(tag))
    }

    /// Pids of live processes carrying a tag of this install.
    pub fn live(&self) -> Vec<u32> {
        tether_ledger::Scan::take()
            .of_install(self.id())
            .map(|p| p.pid)
            .collect()
    }
}

impl Drop for TestInstall {
    fn drop(&mut self) {
        kill_install(self.install.id());
    }
}

/// `sh -c 'echo ready; read x'` with `tag` (or explicitly without one),
/// returned after it said `ready`.
pub fn spawn_ready(tag: Option<&str>) -> Child {
    tether_testkit::spawn_ready(SPAWN_TAG_VAR, tag)
}

/// SIGKILLs every process tagged with `install` through pidfds (a recycled
/// pid is never hit) and waits for them to die, bounded.
pub fn kill_install(install: &str) {
    for _ in 0..50 {
        let scan = tether_ledger::Scan::take();
        let mut pins = Vec::new();
        for p in scan.of_install(install) {
            if let Ok(id) = tether::ProcessIdentity::of_pid(p.pid)
                && let Ok(Some(pin)) = tether::sys::Pinned::pin(&id)
                && pin.spawn_tag().is_some_and(|t| t.install == install)
            {
                let _ = pin.signal(libc::SIGKILL);
                pins.push(pin);
            }
        }
        if pins.is_empty() {
            return;
        }
        for pin in &pins {
            wait_exit(pin, Duration::from_secs(2));
        }
    }
}

/// Waits (on the pidfd) for a pinned process to exit, at most `bound`.
pub fn wait_exit(pin: &tether::sys::Pinned, bound: Duration) -> bool {
    tether::sys::wait_exited(&[pin], bound);
    pin.has_exited()
}

/// The (pid, start time) of a process that is certainly dead: a child that
/// ran `true` and was reaped.
pub fn dead_owner() -> (u32, u64) {
    let mut child = Command::new("sleep").arg("1000").spawn().unwrap();
    let start = tether::sys::process(child.id()).unwrap().start_time;
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    (pid, start)
}

/// This process as an owner key (pid, start).
pub fn me() -> (u32, u64) {
    let id = tether::ProcessIdentity::current().unwrap();
    (id.pid, id.start_time)
}

/// Kills and reaps a std child.
pub fn reap(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}
