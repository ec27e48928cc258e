//! G9 (issue 34 item 2): the cgroup leaves of a run whose owner, keeper
//! and command are all SIGKILLed at once during start-up — before any
//! record of the session exists — are removed by `tether reap`, which
//! proves from each leaf's name that its owner is dead; a live owner's
//! leaves are left alone.
//!
//! Root here (creating cgroups needs it on this machine): fails instead
//! of skipping under `TETHER_REQUIRE_ROOT=1`.

#![cfg(target_os = "linux")]

mod orphans;
mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use orphans::Home;
use tether_testkit::{require_root, wait_all_dead};

/// This process's cgroup in the hierarchy mounted with `fstype` (and, for
/// v1, `controller`), from /proc/self/cgroup and /proc/self/mountinfo.
fn own_cgroup(fstype: &str, controller: &str) -> Option<PathBuf> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let path = cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        let wanted = if fstype == "cgroup2" {
            ctrls.is_empty()
        } else {
            ctrls.split(',').any(|c| c == controller)
        };
        wanted.then(|| path.to_owned())
    })?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let point = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let tail: Vec<&str> = right.split(' ').collect();
        let fields: Vec<&str> = left.split(' ').collect();
        let ours = tail[0] == fstype
            && (fstype == "cgroup2" || tail[2].split(',').any(|o| o == controller));
        (ours && fields[3] == "/").then(|| fields[4].to_owned())
    })?;
    Some(Path::new(&point).join(path.trim_start_matches('/')))
}

/// One test cgroup below this process's own in the v2 hierarchy and in
/// each v1 hierarchy with the memory or pids controller: `tether` started
/// in all of them, so that every leaf its keeper makes is below one, and
/// `kill_all` (v2 `cgroup.kill`) ends owner, keeper and command at once.
struct TestCgroups {
    v2: PathBuf,
    all: Vec<PathBuf>,
}

impl TestCgroups {
    fn new(name: &str) -> TestCgroups {
        let leaf = format!("{name}-{}", std::process::id());
        let v2 = own_cgroup("cgroup2", "")
            .expect("a cgroup v2 hierarchy (for cgroup.kill)")
            .join(&leaf);
        let mut all = vec![v2.clone()];
        for controller in ["memory", "pids"] {
            if let Some(dir) = own_cgroup("cgroup", controller) {
                all.push(dir.join(&leaf));
            }
        }
        for dir in &all {
            std::fs::create_dir(dir).unwrap();
        }
        TestCgroups { v2, all }
    }

    /// `sh -c 'echo $$ > each/cgroup.procs; echo in; exec tether ARGS'`.
    fn tether(&self, home: &Home, args: &[&str]) -> std::process::Command {
        let enter: String = self
            .all
            .iter()
            .map(|d| format!("echo $$ > '{}/cgroup.procs' && ", d.display()))
            .collect();
        let mut cmd = home.tether(&[]);
        let program = cmd.get_program().to_owned();
        let envs: Vec<_> = cmd
            .get_envs()
            .map(|(k, v)| (k.to_owned(), v.map(|v| v.to_owned())))
            .collect();
        cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(format!("{enter}echo in && exec \"$@\""))
            .arg("sh")
            .arg(program)
            .args(args);
        for (k, v) in envs {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd
    }

    /// SIGKILLs every process in the test cgroups at once and waits until
    /// the kernel says none is left.
    fn kill_all(&self) {
        std::fs::write(self.v2.join("cgroup.kill"), "1").unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::read_to_string(self.v2.join("cgroup.events"))
            .unwrap()
            .contains("populated 1")
        {
            assert!(Instant::now() < deadline, "the test cgroup did not empty");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The session leaves below the test cgroups.
    fn leaves(&self) -> Vec<PathBuf> {
        self.all
            .iter()
            .flat_map(|d| std::fs::read_dir(d).unwrap().flatten())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("tether-") && n != "tether-owner")
            })
            .collect()
    }
}

impl Drop for TestCgroups {
    fn drop(&mut self) {
        let _ = std::fs::write(self.v2.join("cgroup.kill"), "1");
        for top in &self.all {
            let mut dirs = vec![top.clone()];
            let mut i = 0;
            while i < dirs.len() {
                for entry in std::fs::read_dir(&dirs[i]).into_iter().flatten().flatten() {
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        dirs.push(entry.path());
                    }
                }
                i += 1;
            }
            for dir in dirs.iter().rev() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// A small xorshift, seeded from the clock (printed, to replay a failure).
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn reap_removes_the_leaves_of_runs_killed_whole_during_start_up_and_keeps_a_live_owners() {
    if !require_root("creating cgroups") {
        return;
    }
    let home = Home::new("startup-leaves");
    let cgroups = TestCgroups::new("tether-test-startup-leaves");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("seed {seed}");
    let mut random = Random(seed);
    let args = [
        "run", "--memory", "64M", "--pids", "32", "--", "sleep", "1000",
    ];
    for _ in 0..200 {
        let mut owner = cgroups
            .tether(&home, &args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(owner.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "in\n");
        // A random moment of the start-up: most runs are killed before
        // the command starts, some after (so the keeper's leaves exist
        // and nothing has recorded them yet, or the journal has).
        std::thread::sleep(Duration::from_micros(random.below(30_000)));
        cgroups.kill_all();
        owner.wait().unwrap();
    }
    let left = cgroups.leaves();
    eprintln!(
        "{} leaves after 200 runs killed during start-up",
        left.len()
    );

    // A live owner: its leaves stay whatever reap does.
    let mut live = cgroups
        .tether(
            &home,
            &[
                "run",
                "--memory",
                "64M",
                "--pids",
                "32",
                "--",
                "sh",
                "-c",
                "echo ready; exec sleep 1000",
            ],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(live.stdout.take().unwrap());
    for want in ["in\n", "ready\n"] {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, want);
    }
    let live_leaves: Vec<PathBuf> = cgroups
        .leaves()
        .into_iter()
        .filter(|p| !left.contains(p))
        .collect();
    assert!(!live_leaves.is_empty(), "the live run has its leaves");

    let (code, report) = home.json(&["reap", "--grace", "200ms"]);
    assert_eq!(code, 0, "{report}");
    let mut after = cgroups.leaves();
    after.sort();
    let mut want = live_leaves.clone();
    want.sort();
    assert_eq!(
        after,
        want,
        "after tether reap only the live owner's leaves are left ({} before it): {report}",
        left.len()
    );
    for dir in &live_leaves {
        assert!(dir.is_dir(), "{} removed under a live owner", dir.display());
    }

    // The live run ends as any other: its owner's death takes the rest.
    cgroups.kill_all();
    live.wait().unwrap();
    assert!(wait_all_dead(home.tag(), Duration::from_secs(5)).is_empty());
}
