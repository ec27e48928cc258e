//! Fixtures for `tether ps` and `tether reap`: a private install per test,
//! and real orphans — a `tether run` whose owner and keeper were both
//! SIGKILLed, so its tree survives, reparented to init.
//!
//! Every process a fixture starts carries the test's unique
//! `TETHER_TEST_TAG` and a spawn tag of the test's own install; clean-up goes
//! by those (through pidfds), never by process name.

#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tether::Install;
use tether::sys::Pinned;
use tether_testkit::{TAG_VAR, TagGuard, kill_tagged, wait_for_count};

use crate::support::{read_line_bounded, tether, wait_pid_exit};

/// A private tether home (install) plus the test's unique tag.
pub struct Home {
    pub dir: tempfile::TempDir,
    pub guard: TagGuard,
}

impl Home {
    pub fn new(name: &str) -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
            guard: TagGuard::new(name),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn install(&self) -> Install {
        Install::at(self.dir.path())
    }

    pub fn tag(&self) -> &str {
        self.guard.tag()
    }

    /// `tether ARGS` in this home, tagged with the test's tag.
    pub fn tether(&self, args: &[&str]) -> Command {
        let mut cmd = tether();
        cmd.args(args)
            .env("TETHER_HOME", self.dir.path())
            .env(TAG_VAR, self.tag())
            .env_remove(tether::SPAWN_TAG_VAR);
        cmd
    }

    /// Runs `tether ARGS --json` to completion; (exit code, parsed stdout).
    pub fn json(&self, args: &[&str]) -> (i32, Value) {
        let out = self
            .tether(args)
            .arg("--json")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let value = serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "tether {args:?} --json printed no JSON ({e}): {text}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code().unwrap_or(-1), value)
    }

    /// Runs `tether ARGS` to completion; (exit code, stdout).
    pub fn text(&self, args: &[&str]) -> (i32, String) {
        let out = self.tether(args).stdin(Stdio::null()).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// Whether the ledger has the session (and so its owner).
    pub fn ledger_has_session(&self, session: &str) -> bool {
        tether_ledger::Ledger::open(&self.install())
            .and_then(|l| l.sessions())
            .is_ok_and(|s| s.iter().any(|s| s.id == session))
    }

    /// Live processes carrying this install's spawn tag.
    pub fn live(&self) -> Vec<u32> {
        let install = self.install();
        tether_ledger::Scan::take()
            .of_install(install.id())
            .map(|p| p.pid)
            .collect()
    }

    /// Starts `tether run [extra] -- sh -c SCRIPT` (the script prints
    /// `ready` once built) and waits until at least `min` processes of the
    /// tree carry the test's tag.
    ///
    /// `tether run` is started by a `sh` that leads a session of its own:
    /// so the owner's process group is orphaned from the start (its death
    /// orphans nothing, and the kernel sends no SIGHUP + SIGCONT to a
    /// keeper stopped in it), while the owner's pid, being neither a session
    /// nor a group id, is free for reuse as soon as that `sh` reaps it.
    pub fn run(&self, extra: &[&str], script: &str, min: usize) -> Run {
        let tether_run = self.tether(&["run", "--grace", "200ms"]);
        let mut cmd = Command::new("/bin/sh");
        // The leader's own stderr goes nowhere (it would report the owner's
        // SIGKILL); `tether run` keeps the test's stderr (fd 3).
        cmd.args(["-c", "exec 3>&2 2>/dev/null; \"$@\" 2>&3", "sh"])
            .arg(tether_run.get_program())
            .args(tether_run.get_args())
            .args(extra)
            .args(["--", "/bin/sh", "-c", script])
            .envs(tether_run.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .env_remove(tether::SPAWN_TAG_VAR)
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        // SAFETY: setsid(2) is async-signal-safe; nothing else runs between
        // fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut leader = cmd.spawn().unwrap();
        let mut pending = Vec::new();
        let line = read_line_bounded(
            leader.stdout.as_mut().unwrap(),
            &mut pending,
            Duration::from_secs(30),
        );
        assert_eq!(line.as_deref(), Some("ready"), "fixture did not get ready");
        let owner = tether::sys::children(leader.id())
            .into_iter()
            .next()
            .expect("tether run");
        // Process creation raises no event outside the tree: this polls,
        // bounded (see tether_testkit::wait_for_count).
        let have = wait_for_count(self.tag(), min + 1, Duration::from_secs(20));
        assert!(
            have > min,
            "fixture built {have} processes, wanted {min} + keeper"
        );
        let scan = tether_ledger::Scan::take();
        let keeper = scan
            .processes
            .iter()
            .find(|p| p.is_keeper() && p.ppid == owner)
            .expect("keeper of the run");
        let session = keeper.tag.session.clone();
        let keeper = tether::ProcessIdentity::of_pid(keeper.pid).unwrap();
        let owner = tether::ProcessIdentity::of_pid(owner).unwrap();
        // `tether run` writes the ledger right after the spawn, racing the
        // script's `ready`; a write raises no event we can wait on: poll the
        // ledger, bounded.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !self.ledger_has_session(&session) {
            assert!(
                std::time::Instant::now() < deadline,
                "run never reached the ledger"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        Run {
            leader: Some(leader),
            owner: owner.pid,
            owner_start: owner.start_time,
            owner_id: owner,
            keeper,
            session,
        }
    }

    /// A `tether run` whose owner and keeper are both SIGKILLed, leaving
    /// its tree alive, orphaned and reparented to init.
    pub fn orphan(&self, extra: &[&str], script: &str, min: usize) -> Run {
        let mut run = self.run(extra, script, min);
        run.orphan();
        let have = wait_for_count(self.tag(), min, Duration::from_secs(5));
        // Whatever the script was still starting has started (or ended).
        tether_testkit::wait_for_stable(self.tag(), Duration::from_secs(5));
        assert!(
            have >= min,
            "the orphaned tree lost processes: {have} < {min}"
        );
        run
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        kill_install(self.install().id());
        kill_tagged(self.tag());
    }
}

/// One `tether run` fixture.
pub struct Run {
    /// The session-leading `sh` whose child is `tether run`.
    pub leader: Option<Child>,
    /// The owner (`tether run`) pid and start time.
    pub owner: u32,
    pub owner_start: u64,
    pub owner_id: tether::ProcessIdentity,
    pub keeper: tether::ProcessIdentity,
    pub session: String,
}

impl Run {
    /// SIGKILLs owner and keeper so that neither can kill the tree: the
    /// owner is stopped first (so it cannot kill the orphans it adopts as a
    /// subreaper), then the keeper dies (its orphans go to the stopped
    /// owner), then the owner dies (they go to init). A stopped *keeper*
    /// would not do: the kernel resumes a stopped keeper whose owner dies
    /// (orphaned process group), and it would kill the tree.
    pub fn orphan(&mut self) {
        let owner = Pinned::pin(&self.owner_id).unwrap().expect("owner alive");
        assert!(owner.signal(libc::SIGSTOP).unwrap());
        // A stop raises no event we can wait on from here (the owner is
        // not our child): poll its state, bounded.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while tether::sys::process(self.owner).map(|s| s.state).ok()
            != Some(tether::sys::ProcessState::Stopped)
        {
            assert!(std::time::Instant::now() < deadline, "owner did not stop");
            std::thread::sleep(Duration::from_millis(1));
        }
        let keeper = Pinned::pin(&self.keeper).unwrap().expect("keeper alive");
        assert!(keeper.signal(libc::SIGKILL).unwrap());
        assert!(wait_pid_exit(self.keeper.pid, Duration::from_secs(10)));
        assert!(owner.signal(libc::SIGKILL).unwrap());
        // The leader `sh` reaps the owner and exits with it.
        let mut leader = self.leader.take().unwrap();
        leader.wait().unwrap();
    }

    /// Kills a live run's owner (its keeper then kills the tree).
    pub fn kill_owner(&mut self) {
        if let Ok(Some(owner)) = Pinned::pin(&self.owner_id) {
            let _ = owner.signal(libc::SIGKILL);
        }
        if let Some(mut leader) = self.leader.take() {
            let _ = leader.wait();
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.kill_owner();
    }
}

/// SIGKILLs every process carrying a spawn tag of `install`, through pidfds
/// with the tag re-checked, until none is left (bounded).
pub fn kill_install(install: &str) {
    for _ in 0..50 {
        let scan = tether_ledger::Scan::take();
        let mut any = false;
        for p in scan.of_install(install) {
            let Ok(id) = tether::ProcessIdentity::of_pid(p.pid) else {
                continue;
            };
            if let Ok(Some(pin)) = Pinned::pin(&id)
                && pin.spawn_tag().is_some_and(|t| t.install == install)
            {
                let _ = pin.signal(libc::SIGKILL);
                any = true;
                wait_pid_exit(p.pid, Duration::from_secs(2));
            }
        }
        if !any {
            return;
        }
    }
}

/// Whether the process `id` names is still alive (not a zombie).
pub fn alive(id: &tether::ProcessIdentity) -> bool {
    id.is_alive()
}

/// The identities of the live processes of `session`.
pub fn session_processes(install: &str, session: &str) -> Vec<tether::ProcessIdentity> {
    tether_ledger::Scan::take()
        .of_install(install)
        .filter(|p| p.tag.session == session)
        .filter_map(|p| tether::ProcessIdentity::of_pid(p.pid).ok())
        .collect()
}

/// `sh` script: a tree with setsid and double-fork escapes and a child that
/// clears its spawn tag (an untagged descendant), then `ready`.
pub const TREE_WITH_UNTAGGED_CHILD: &str = "setsid sh -c 'sleep 1000 & exec sleep 1000' & \
     (setsid sh -c 'sleep 1000 &' &); \
     env -u TETHER_SPAWN sleep 1000 & \
     echo ready; exec sleep 1000";
