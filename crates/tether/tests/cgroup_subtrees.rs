//! G9: a session's cgroup leaves are gone when the session is, even when
//! its command made cgroups below them (container runtimes, `systemd-run`
//! and cgroup test suites do) and put processes there: the subtree goes
//! deepest first, its processes killed first — in the keeper's teardown
//! and in `tether reap`'s removal of a dead session's leaves. A leaf path
//! read from the ledger is refused when any of its components is a
//! symlink.
//!
//! Root here (creating cgroups needs it on this machine); each test fails
//! instead of skipping under `TETHER_REQUIRE_ROOT=1`.

#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tether::{Command, Limits, Stdio};
use tether_testkit::{TAG_VAR, TagGuard, require_root, tagged_pids, wait_for_count};

/// Every cgroup directory at or below `dir`.
fn cgroups_below(dir: &Path) -> Vec<PathBuf> {
    let mut found = vec![dir.to_owned()];
    let mut i = 0;
    while i < found.len() {
        if let Ok(entries) = std::fs::read_dir(&found[i]) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    found.push(entry.path());
                }
            }
        }
        i += 1;
    }
    found
}

#[test]
fn a_command_that_nests_cgroups_below_its_leaves_leaves_no_leaf_behind() {
    if !require_root("creating cgroups") {
        return;
    }
    for round in 0..3 {
        let guard = TagGuard::new("cgroup-subtree");
        // Reads its leaves on stdin; in each, makes a/b/c (and an empty
        // sibling x), moves itself into the deepest, and leaves a sleeper
        // there (its own session: the keeper's kill must find it).
        let script = "while read d; do \
                mkdir -p \"$d/a/b/c\" \"$d/x\" && echo $$ > \"$d/a/b/c/cgroup.procs\" || exit 9; \
            done; \
            setsid sleep 1000 & echo ready; wait";
        let mut child = Command::new("/bin/sh")
            .args(["-c", script])
            .env(TAG_VAR, guard.tag())
            .limits(Limits::new().memory(256 << 20).pids(64))
            .stdin(Stdio::Piped)
            .stdout(Stdio::Piped)
            .spawn()
            .expect("spawn");
        let leaves: Vec<PathBuf> = child.limits().cgroups.clone();
        assert!(
            leaves.len() >= 3,
            "v1 memory, v1 pids and a v2 leaf here: {leaves:?}"
        );
        {
            let mut stdin = child.stdin.take().unwrap();
            for dir in &leaves {
                writeln!(stdin, "{}", dir.display()).unwrap();
            }
        }
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n", "round {round}");
        assert_eq!(wait_for_count(guard.tag(), 2, Duration::from_secs(30)), 2);
        for dir in &leaves {
            let deepest = dir.join("a/b/c/cgroup.procs");
            let procs = std::fs::read_to_string(&deepest).unwrap();
            assert_eq!(procs.lines().count(), 2, "{}: {procs:?}", deepest.display());
        }
        child
            .kill_with_grace(Duration::ZERO)
            .expect("a verified kill");
        let left: Vec<PathBuf> = leaves
            .iter()
            .flat_map(|d| cgroups_below(d))
            .filter(|d| d.exists())
            .collect();
        assert!(
            left.is_empty(),
            "round {round}: left after the run: {left:?}"
        );
        assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
    }
}

/// A cgroup below this test's own in the v1 `pids` hierarchy and in v2:
/// the parents of a limited session's leaves.
fn own_cgroups() -> Vec<PathBuf> {
    let mut child = Command::new("/bin/true")
        .limits(Limits::new().pids(8))
        .spawn()
        .unwrap();
    let parents = child
        .limits()
        .cgroups
        .iter()
        .map(|d| d.parent().unwrap().to_owned())
        .collect();
    assert!(child.wait().unwrap().success());
    parents
}

#[test]
fn reap_removes_a_dead_sessions_leaf_with_its_subtree_killing_what_is_in_it() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("cgroup-subtree-reap");
    let session = format!("reaptest{}", std::process::id());
    for parent in own_cgroups() {
        let leaf = parent.join(format!("tether-{session}"));
        std::fs::create_dir_all(leaf.join("a/b")).unwrap();
        std::fs::create_dir_all(leaf.join("z")).unwrap();
        let mut sleeper = std::process::Command::new("sleep")
            .arg("1000")
            .env(TAG_VAR, guard.tag())
            .spawn()
            .unwrap();
        std::fs::write(leaf.join("a/b/cgroup.procs"), sleeper.id().to_string()).unwrap();
        assert!(
            tether::sys::remove_session_cgroup(&leaf, &session).unwrap(),
            "{}",
            leaf.display()
        );
        assert!(!leaf.exists(), "{} left", leaf.display());
        let status = sleeper.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
    }
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[test]
fn a_leaf_path_through_a_symlinked_parent_is_refused_not_followed() {
    if !require_root("creating cgroups") {
        return;
    }
    let session = format!("linktest{}", std::process::id());
    let parent = own_cgroups().remove(0);
    let leaf = parent.join(format!("tether-{session}"));
    std::fs::create_dir(&leaf).unwrap();
    let tmp = std::env::temp_dir().join(format!("tether-link-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&parent, &tmp).unwrap();
    let through_link = tmp.join(format!("tether-{session}"));
    let refused = tether::sys::remove_session_cgroup(&through_link, &session);
    let still_there = leaf.exists();
    // Clean up before asserting.
    let _ = std::fs::remove_file(&tmp);
    let _ = std::fs::remove_dir(&leaf);
    let err = refused.expect_err("a symlinked parent is refused");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
    assert!(still_there, "nothing was removed through the symlink");
}
