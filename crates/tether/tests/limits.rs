//! G9: a session's memory, process-count and CPU limits are enforced by
//! its own cgroups (v2 where the controller is there, v1 on hybrid hosts)
//! and reported as applied; a limit hit is a result of the session — its
//! OOM kill, its refused forks — and never costs the owner its life;
//! session processes are the OOM killer's first choice; a session with a
//! cgroup v2 of its own dies through `cgroup.kill`; the cgroups are gone
//! when the session is.
//!
//! Root here (creating cgroups needs it on this machine); each test fails
//! instead of skipping under `TETHER_REQUIRE_ROOT=1`.

#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tether::unix::ExitStatusExt;
use tether::{Command, Enforcement, LimitHit, Limits, Stdio};
use tether_testkit::{TAG_VAR, TagGuard, Tree, require_root, tagged_pids, wait_for_count};

/// How each limit of `child` is enforced, as names.
fn enforced(report: &tether::LimitReport) -> Vec<&'static str> {
    [
        report.memory.as_ref().map(|(_, how)| how),
        report.pids.as_ref().map(|(_, how)| how),
        report.cpu_millis.as_ref().map(|(_, how)| how),
    ]
    .into_iter()
    .flatten()
    .map(Enforcement::name)
    .collect()
}

fn assert_enforced_by_cgroups(report: &tether::LimitReport) {
    for how in enforced(report) {
        assert!(
            how == "cgroup2" || how == "cgroup1",
            "as root every limit has a cgroup here: {report:?}"
        );
    }
}

/// The cgroup directories of `pid`'s cgroups that are tether session leaves.
fn session_cgroups_of(pid: u32) -> Vec<String> {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.rsplit(':').next())
        .filter(|path| {
            path.rsplit('/')
                .next()
                .is_some_and(|n| n.starts_with("tether-"))
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_2_gib_allocation_under_256_mib_is_killed_and_reported_while_the_owner_lives() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("limits-oom");
    let output = Command::new("python3")
        .args([
            "-c",
            "import sys\nx = bytearray(2 << 30)\nprint('allocated', len(x))",
        ])
        .env(TAG_VAR, guard.tag())
        .limits(Limits::new().memory(256 << 20))
        .output()
        .expect("spawn");
    let status = output.status;
    assert_eq!(
        status.limit_hit(),
        Some(LimitHit::Memory { victims: 1 }),
        "{status}; stdout {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    assert!(output.stdout.is_empty(), "the allocation never completed");
    // The owner — this test process — was not the OOM killer's victim: it
    // is here, and its memory cgroup saw no OOM kill of it.
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[test]
fn the_report_says_how_each_limit_is_enforced_and_the_command_runs_in_its_cgroups() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("limits-report");
    let mut child = Command::new("/bin/sh")
        .args(["-c", "cat /proc/self/cgroup; echo ready; exec sleep 1000"])
        .env(TAG_VAR, guard.tag())
        .limits(Limits::new().memory(512 << 20).pids(100).cpu(0.5))
        .stdout(Stdio::Piped)
        .spawn()
        .expect("spawn");
    let report = child.limits().clone();
    assert_enforced_by_cgroups(&report);
    assert_eq!(report.memory.as_ref().unwrap().0, 512 << 20);
    assert_eq!(report.pids.as_ref().unwrap().0, 100);
    assert_eq!(report.cpu_millis.as_ref().unwrap().0, 500);
    let v2 = report.cgroup.clone().expect("a cgroup v2 leaf of its own");
    assert!(report.cgroups.contains(&v2));
    let session = child.session_id().to_string();
    // Named after the session and its owner (this process), so that
    // `tether reap` can prove whose a leaf is when nothing recorded it.
    let name = v2.file_name().unwrap().to_str().unwrap().to_owned();
    let fields: Vec<&str> = name.split('.').collect();
    assert_eq!(fields[0], format!("tether-{session}"), "{name}");
    assert_eq!(fields[2], std::process::id().to_string(), "{name}");
    for dir in &report.cgroups {
        assert_eq!(dir.file_name().unwrap().to_str().unwrap(), name);
        assert!(
            dir.is_dir(),
            "{} exists while the session runs",
            dir.display()
        );
    }
    // The command is in every leaf from its first instruction: the shell's
    // own view of its cgroups, printed before anything else, names them.
    let mut lines = Vec::new();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim() == "ready" || line.is_empty() {
            break;
        }
        lines.push(line);
    }
    let in_leaves = lines
        .iter()
        .filter(|l| l.trim_end().ends_with(&format!("/{name}")))
        .count();
    assert_eq!(in_leaves, report.cgroups.len(), "{lines:?}");
    // The limits are the leaves' own.
    for dir in &report.cgroups {
        for (file, want) in [
            ("memory.limit_in_bytes", (512u64 << 20).to_string()),
            ("memory.max", (512u64 << 20).to_string()),
            ("pids.max", "100".to_owned()),
            ("cpu.cfs_quota_us", "50000".to_owned()),
            ("cpu.max", "50000 100000".to_owned()),
        ] {
            if let Ok(got) = std::fs::read_to_string(dir.join(file)) {
                assert_eq!(got.trim(), want, "{}/{file}", dir.display());
            }
        }
    }
    child.kill().unwrap();
    for dir in &report.cgroups {
        assert!(!dir.exists(), "{} removed after the kill", dir.display());
    }
}

#[test]
fn a_fork_bomb_under_64_pids_is_contained_and_the_machine_keeps_its_pids() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("limits-forkbomb");
    // Every process forks as fast as it can, forever, and so does every
    // child: without a limit this doubles until the machine's pids are
    // gone; under it the tree stays at 64 and every fork past it fails
    // (and is tried again, every 200 ms: a failed fork of a Python process
    // still copies its page tables before the pids check refuses it, and
    // 64 of them retrying every 10 ms kept both vCPUs here busy).
    let bomb = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.2)\n";
    let mut child = Command::new("python3")
        .args(["-c", bomb])
        .env(TAG_VAR, guard.tag())
        .limits(Limits::new().pids(64))
        .stdout(Stdio::Null)
        .stderr(Stdio::Null)
        .spawn()
        .expect("spawn");
    assert_enforced_by_cgroups(child.limits());
    // The bomb is at its ceiling: 64 processes (the limit counts every
    // process of the session; the namespace of the test has many more).
    let reached = wait_for_count(guard.tag(), 64, Duration::from_secs(30));
    assert_eq!(reached, 64, "the bomb reached the limit and no further");
    // The machine keeps its pids: this process can still start one.
    let status = std::process::Command::new("/bin/true")
        .status()
        .expect("a fork outside the session still works");
    assert!(status.success());
    // Still at most 64, however long it keeps trying.
    for _ in 0..20 {
        let n = tagged_pids(guard.tag()).len();
        assert!(n <= 64, "{n} processes: the limit did not hold");
    }
    child.kill().expect("a verified kill");
    let status = child.wait().unwrap();
    assert!(
        matches!(status.limit_hit(), Some(LimitHit::Pids { refused }) if refused > 0),
        "{:?}",
        status.limit_hit()
    );
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[test]
fn a_3000_process_fork_storm_dies_through_cgroup_kill() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("limits-storm");
    let mut child = Command::new("/bin/sh")
        .args(["-c", Tree::ForkStorm.script()])
        .env(TAG_VAR, guard.tag())
        // A limit far above the storm: it gives the session cgroups of its
        // own, and with them cgroup.kill.
        .limits(Limits::new().pids(20_000))
        .keep_descendants(true)
        .stdout(Stdio::Piped)
        .spawn()
        .expect("spawn");
    let leaf = child
        .limits()
        .cgroup
        .clone()
        .expect("a cgroup v2 leaf of its own");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    let built = wait_for_count(guard.tag(), 2_000, Duration::from_secs(60));
    assert!(built >= 2_000, "only {built} processes built");
    // Every one of them is in the session's cgroup v2: one write to its
    // cgroup.kill reaches them all.
    let in_leaf = procs_in(&leaf);
    assert!(in_leaf >= 2_000, "{in_leaf} in {}", leaf.display());
    child
        .kill_with_grace(Duration::ZERO)
        .expect("a verified kill");
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
    assert!(!leaf.exists(), "the leaf is removed with the session");
    let status = child.wait().unwrap();
    assert!(
        status.descendants_killed() >= 2_000,
        "{}",
        status.descendants_killed()
    );
}

fn procs_in(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn session_processes_are_the_oom_killers_first_choice_not_their_owner() {
    // No privilege needed: raising oom_score_adj is allowed to everyone.
    let guard = TagGuard::new("limits-oom-score");
    let output = Command::new("/bin/sh")
        .args([
            "-c",
            "cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'; \
             cat /proc/$PPID/oom_score_adj",
        ])
        .env(TAG_VAR, guard.tag())
        .output()
        .expect("spawn");
    let text = String::from_utf8_lossy(&output.stdout);
    let values: Vec<i32> = text.lines().map(|l| l.trim().parse().unwrap()).collect();
    let owner: i32 = std::fs::read_to_string("/proc/self/oom_score_adj")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(owner < 1000, "the test process itself is at {owner}");
    // The command and its child: the OOM killer's first choice.
    assert_eq!(values[..2], [1000, 1000], "{text}");
    // The keeper (the command's parent) stays at its owner's value.
    assert_eq!(values[2], owner, "the keeper: {text}");
}

#[test]
fn the_cgroups_are_removed_when_the_tree_is_killed_and_when_it_ends() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("limits-leaves");
    let mut child = Command::new("/bin/sh")
        .args(["-c", "sleep 1000 & setsid sleep 1000 & echo ready; wait"])
        .env(TAG_VAR, guard.tag())
        .limits(Limits::new().memory(256 << 20).pids(50))
        .stdout(Stdio::Piped)
        .spawn()
        .expect("spawn");
    let dirs: Vec<PathBuf> = child.limits().cgroups.clone();
    assert!(!dirs.is_empty());
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pids = tagged_pids(guard.tag());
    assert!(pids.len() >= 3);
    for pid in &pids {
        assert_eq!(
            session_cgroups_of(*pid).len(),
            dirs.len(),
            "pid {pid} is in every leaf"
        );
    }
    child.kill().unwrap();
    for dir in &dirs {
        assert!(!dir.exists(), "{} left after the kill", dir.display());
    }
    // A session that simply ends removes them too.
    let mut child = Command::new("/bin/true")
        .limits(Limits::new().pids(50))
        .spawn()
        .unwrap();
    let dirs = child.limits().cgroups.clone();
    assert!(!dirs.is_empty());
    assert!(child.wait().unwrap().success());
    for dir in &dirs {
        assert!(!dir.exists(), "{} left after the exit", dir.display());
    }
}

#[test]
fn a_session_without_limits_gets_no_cgroup() {
    let child = Command::new("/bin/true").spawn().unwrap();
    assert!(child.limits().is_empty());
    assert!(child.limits().cgroups.is_empty());
    let mut child = child;
    assert!(child.wait().unwrap().limit_hit().is_none());
}

#[test]
fn invalid_limits_are_refused_at_spawn() {
    for limits in [
        Limits::new().memory(0),
        Limits::new().pids(0),
        Limits::new().cpu(0.0),
        Limits::new().cpu(f64::INFINITY),
    ] {
        let err = Command::new("/bin/true")
            .limits(limits)
            .spawn()
            .expect_err("refused");
        assert!(
            matches!(err, tether::Error::InvalidInput { what: "limits", .. }),
            "{err}"
        );
    }
}

#[test]
fn the_kill_of_a_session_with_a_cgroup_v2_goes_through_cgroup_kill() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("limits-cgroup-kill");
    let mut child = Command::new("/bin/sh")
        .args(["-c", "echo ready; exec sleep 1000"])
        .env(TAG_VAR, guard.tag())
        .limits(Limits::new().pids(100))
        .stdout(Stdio::Piped)
        .spawn()
        .expect("spawn");
    let leaf = child.limits().cgroup.clone().expect("a cgroup v2 leaf");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    // A process that is no descendant of the keeper — the per-process
    // sweep can never reach it — put into the session's cgroup: only the
    // cgroup-wide kill ends it.
    let mut outsider = std::process::Command::new("sleep")
        .arg("1000")
        .env(TAG_VAR, guard.tag())
        .spawn()
        .unwrap();
    std::fs::write(leaf.join("cgroup.procs"), outsider.id().to_string()).unwrap();
    child
        .kill_with_grace(Duration::ZERO)
        .expect("a verified kill");
    // Bounded (a SIGKILL takes effect in milliseconds; 10 s is far past
    // it): without the cgroup-wide kill the outsider sleeps on.
    let left = tether_testkit::wait_all_dead(guard.tag(), Duration::from_secs(10));
    assert!(left.is_empty(), "{left:?} outlived the session's kill");
    let status = outsider.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL),
        "the process in the session's cgroup died with it"
    );
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
    assert!(!leaf.exists());
}

#[test]
fn descendants_killed_stays_exact_when_the_kill_goes_through_the_cgroup() {
    if !require_root("creating cgroups") {
        return;
    }
    for round in 0..5 {
        let guard = TagGuard::new("limits-killed-count");
        // As the count's own regression test: three in the main process's
        // group, two in sessions of their own.
        let mut child = Command::new("/bin/sh")
            .args([
                "-c",
                "sleep 1000 & sleep 1000 & sleep 1000 & \
                 setsid sleep 1000 & setsid sleep 1000 & echo ready; wait",
            ])
            .env(TAG_VAR, guard.tag())
            .limits(Limits::new().pids(100))
            .stdout(Stdio::Piped)
            .spawn()
            .unwrap();
        assert!(child.limits().cgroup.is_some());
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n");
        assert_eq!(wait_for_count(guard.tag(), 6, Duration::from_secs(30)), 6);
        child.kill_with_grace(Duration::ZERO).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.descendants_killed(), 5, "round {round}: {status:?}");
        assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
    }
}
