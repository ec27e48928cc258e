//! G9: what a limited session reports is exact — the processes its kill
//! ended, counted even when they had left the session's cgroup v2 leaf;
//! sizes beyond 2^53 bytes to the byte; a memory limit hit only when the
//! session's own limit was reached, an OOM kill caused by an ancestor's
//! limit reported as such.
//!
//! Root here (creating cgroups needs it on this machine); each test fails
//! instead of skipping under `TETHER_REQUIRE_ROOT=1`.

#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::time::Duration;

use tether::{Command, Limits, Stdio};
use tether_testkit::{TAG_VAR, TagGuard, require_root, tagged_pids, wait_for_count};

#[test]
fn descendants_killed_counts_members_that_left_the_sessions_cgroup() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("limits-left-leaf");
    // The shell moves itself out of its v2 leaf into the owner's cgroup
    // (the leaf's parent, given as $1), then forks 20 sleepers there.
    let mut child = Command::new("/bin/sh")
        .args([
            "-c",
            "read parent; echo $$ > \"$parent/cgroup.procs\" || exit 9; \
             for i in $(seq 20); do sleep 1000 & done; echo ready; wait",
        ])
        .env(TAG_VAR, guard.tag())
        .limits(Limits::new().pids(100))
        .stdin(Stdio::Piped)
        .stdout(Stdio::Piped)
        .spawn()
        .unwrap();
    let leaf = child.limits().cgroup.clone().expect("a cgroup v2 leaf");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{}", leaf.parent().unwrap().display()).unwrap();
    }
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    assert_eq!(wait_for_count(guard.tag(), 21, Duration::from_secs(30)), 21);
    child.kill_with_grace(Duration::ZERO).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.descendants_killed(), 20, "{status:?}");
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[test]
fn a_memory_limit_of_2_pow_63_minus_1_is_reported_to_the_byte() {
    let exact = (1u64 << 63) - 1;
    assert_eq!(tether::parse_size("9223372036854775807").unwrap(), exact);
    assert_eq!(
        tether::parse_size("9007199254740993").unwrap(),
        (1u64 << 53) + 1
    );
    assert_eq!(tether::parse_size("8388607.999999999999T").unwrap(), exact);
    assert!(tether::parse_size("9223372036854775809").is_err());
    if !require_root("creating cgroups") {
        return;
    }
    let mut child = Command::new("/bin/true")
        .limits(Limits::new().memory(exact))
        .spawn()
        .unwrap();
    assert_eq!(child.limits().memory.as_ref().unwrap().0, exact);
    assert!(child.wait().unwrap().success());
}

#[test]
fn processes_that_move_out_of_the_sessions_cgroups_are_reported_and_killed() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("limits-escape");
    // Reads the owner's cgroups (its leaves' parents) on stdin, writes
    // itself into each — out of its memory and pids limits — then forks
    // 10 sleepers there.
    let mut child = Command::new("/bin/sh")
        .args([
            "-c",
            "while read d; do echo $$ > \"$d/cgroup.procs\" || exit 9; done; \
             for i in $(seq 10); do sleep 1000 & done; echo ready; wait",
        ])
        .env(TAG_VAR, guard.tag())
        .limits(Limits::new().memory(256 << 20).pids(64))
        .stdin(Stdio::Piped)
        .stdout(Stdio::Piped)
        .spawn()
        .unwrap();
    let leaves = child.limits().cgroups.clone();
    assert!(leaves.len() >= 2, "{leaves:?}");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        for leaf in &leaves {
            writeln!(stdin, "{}", leaf.parent().unwrap().display()).unwrap();
        }
    }
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    assert_eq!(wait_for_count(guard.tag(), 11, Duration::from_secs(30)), 11);
    child.kill_with_grace(Duration::ZERO).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.descendants_killed(), 10, "{status:?}");
    let escaped = child.limits_escaped();
    assert!(
        escaped.len() >= 10,
        "every sleeper is reported: {escaped:?}"
    );
    assert_eq!(status.limits_escaped() as usize, escaped.len());
    for e in escaped {
        assert!(!e.cgroup.contains("tether-"), "{e:?}");
        assert!(e.cgroup.contains(':'), "hierarchy:path, {e:?}");
    }
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}
