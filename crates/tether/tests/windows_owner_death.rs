//! Windows: when the owner dies — `TerminateProcess`, or `kill -9` of its
//! Wine process — the kernel closes its job handles and every process of
//! every session dies. And tether inside another job still works.
#![cfg(windows)]

mod windows_support;

use std::io::{BufRead, BufReader};
use std::time::Duration;

use tether::Stdio;
use windows_support::*;

/// An owner (the helper using tether, started by std so that it is in no
/// job of ours) and pins of it, its child and its grandchild.
fn owner(policy: &str, marker: &str) -> (std::process::Child, [tether::sys::Pinned; 3]) {
    let mut owner = std::process::Command::new(helper())
        .args(["owner", "60", policy, marker])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(owner.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ids = pids(&line);
    assert_eq!(ids[0], owner.id());
    (owner, [pin(ids[0]), pin(ids[1]), pin(ids[2])])
}

#[test]
fn owner_terminated_kills_child_and_grandchild() {
    let (mut proc_, [owner, child, grandchild]) = owner("contained", &unique("term"));
    assert!(owner.kill().unwrap(), "TerminateProcess of the owner");
    assert_dies(&child, "child");
    assert_dies(&grandchild, "grandchild");
    let _ = proc_.wait();
}

#[test]
fn control_without_a_job_the_tree_outlives_its_owner() {
    // Proves the test above can fail: the same tree, uncontained by
    // explicit policy, survives its owner's TerminateProcess.
    let (mut proc_, [owner, child, grandchild]) = owner("uncontained", &unique("control"));
    assert!(owner.kill().unwrap());
    assert_survives(&child, Duration::from_millis(500), "uncontained child");
    assert!(!grandchild.has_exited(), "uncontained grandchild died");
    child.kill().unwrap();
    grandchild.kill().unwrap();
    let _ = proc_.wait();
}

#[test]
fn kill_9_of_the_owners_wine_process_kills_child_and_grandchild() {
    if wine().is_none() {
        eprintln!("skipped: not under Wine (this is the Unix SIGKILL of a Wine process)");
        return;
    }
    let marker = unique("kill9");
    let (mut proc_, [owner, child, grandchild]) = owner("contained", &marker);
    let unix = unix_pid_of(&[" owner ", &marker]);
    assert_eq!(unix.len(), 1, "the owner's Unix process: {unix:?}");
    // Wine runs a Unix executable given to CreateProcess; it has no Windows
    // process (no handle to wait on), so wait on the owner instead.
    #[allow(clippy::zombie_processes)] // a Unix process: nothing to wait on
    let _ = std::process::Command::new("/bin/kill")
        .args(["-9", &unix[0].to_string()])
        .spawn()
        .unwrap();
    assert_dies(&owner, "owner");
    assert_dies(&child, "child");
    assert_dies(&grandchild, "grandchild");
    let _ = proc_.wait();
}

#[test]
fn tether_inside_another_job_nests_and_either_kill_works() {
    // The owner runs in a tether job; its own session's job nests in it.
    let mut outer = tree_command(&["owner", "60", "contained"])
        .stdout(Stdio::Piped)
        .spawn()
        .unwrap();
    let ids = pids(&first_line(&mut outer));
    let (owner, child, grandchild) = (pin(ids[0]), pin(ids[1]), pin(ids[2]));
    let listed: Vec<u32> = outer.descendants().iter().map(|d| d.pid).collect();
    assert!(
        listed.contains(&ids[1]) && listed.contains(&ids[2]),
        "{listed:?}"
    );
    outer.kill().unwrap();
    assert_dies(&owner, "owner in the outer job");
    assert_dies(&child, "child in the nested job");
    assert_dies(&grandchild, "grandchild in the nested job");
}
