//! Windows: when the owner dies — `TerminateProcess`, or `kill -9` of its
//! Wine process — the kernel closes its job handles and every process of
//! every session dies, a PTY session's included (and its conhost, which
//! the owner's death leaves without its pipes). And tether inside another
//! job still works.
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
        .spawn_retrying()
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

#[test]
fn owner_terminated_kills_a_pty_sessions_tree_and_its_conhost() {
    let (mut proc_, [owner, child, grandchild]) = owner("pty", &unique("pty"));
    // The pseudoconsole's host is the owner's child, outside the job (it
    // must outlive the job to paint the last frame): it must go too.
    let hosts: Vec<tether::sys::Pinned> = tether::sys::children(owner.identity().pid)
        .into_iter()
        .filter(|&pid| {
            tether::sys::describe(pid)
                .to_ascii_lowercase()
                .contains("conhost")
        })
        .map(pin)
        .collect();
    assert_eq!(
        hosts.len(),
        1,
        "the owner's one conhost (for its one session)"
    );
    assert!(owner.kill().unwrap(), "TerminateProcess of the owner");
    assert_dies(&child, "child on a pseudoconsole");
    assert_dies(&grandchild, "grandchild of a PTY child");
    for host in &hosts {
        assert_dies(host, "the owner's conhost");
    }
    let _ = proc_.wait();
}
