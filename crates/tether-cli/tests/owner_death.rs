//! G2: when the owner dies by SIGKILL, every process of its sessions dies —
//! driven by the kernel (the lifeline's EOF), not by any code of the owner.
//! The owner here is a real `tether run`; each test SIGKILLs it mid-run and
//! checks the process table for anything carrying the test's tag.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod support;

use std::time::Duration;

use support::{Owner, keeper_of};
use tether_testkit::{TagGuard, Tree, require_root, wait_all_dead, wait_for_count};

fn owner_sigkill_kills_tree(tree: Tree, extra: &[&str]) {
    let guard = TagGuard::new(&format!("owner-death-{tree:?}"));
    let mut owner = Owner::start(guard.tag(), extra, tree.script());
    owner.expect_ready();
    let built = wait_for_count(guard.tag(), tree.min_processes(), Duration::from_secs(20));
    assert!(
        built >= tree.min_processes(),
        "{tree:?}: fixture built only {built} processes"
    );
    let keeper = keeper_of(owner.pid()).expect("tether run has a keeper child");

    owner.sigkill();

    // Bounded: kill ladder grace (500 ms) + KILL rounds; a leak shows as
    // survivors after 15 s, far beyond the ~10 ms this normally takes.
    let survivors = wait_all_dead(guard.tag(), Duration::from_secs(15));
    assert!(
        survivors.is_empty(),
        "{tree:?}: survived the owner's SIGKILL: {survivors:?}"
    );
    assert!(
        support::wait_pid_exit(keeper, Duration::from_secs(15)),
        "{tree:?}: keeper {keeper} outlived its owner"
    );
}

#[test]
fn setsid_double_fork() {
    owner_sigkill_kills_tree(Tree::SetsidDoubleFork, &[]);
}

#[test]
fn nohup() {
    owner_sigkill_kills_tree(Tree::Nohup, &[]);
}

#[test]
fn daemon() {
    owner_sigkill_kills_tree(Tree::Daemon, &[]);
}

#[test]
fn trap_ignore_term_hup_int() {
    owner_sigkill_kills_tree(Tree::TrapIgnore, &[]);
}

#[test]
fn fork_storm_during_kill() {
    owner_sigkill_kills_tree(Tree::ForkStorm, &[]);
}

#[test]
fn hundred_process_tree() {
    owner_sigkill_kills_tree(Tree::Hundred, &[]);
}

#[test]
fn hundred_process_tree_in_pid_namespace() {
    if !tether_testkit::require_root("pid namespace containment") {
        return;
    }
    owner_sigkill_kills_tree(Tree::Hundred, &["--containment", "pidns"]);
}

// PTY twins: the same trees under `tether run --pty`, whose command leads
// a session of its own on a terminal (its own process group and session:
// the keeper still holds it all).

#[test]
fn pty_setsid_double_fork() {
    owner_sigkill_kills_tree(Tree::SetsidDoubleFork, &["--pty"]);
}

#[test]
fn pty_nohup() {
    owner_sigkill_kills_tree(Tree::Nohup, &["--pty"]);
}

#[test]
fn pty_daemon() {
    owner_sigkill_kills_tree(Tree::Daemon, &["--pty"]);
}

#[test]
fn pty_trap_ignore_term_hup_int() {
    owner_sigkill_kills_tree(Tree::TrapIgnore, &["--pty"]);
}

#[test]
fn pty_fork_storm_during_kill() {
    owner_sigkill_kills_tree(Tree::ForkStorm, &["--pty"]);
}

#[test]
fn pty_hundred_process_tree() {
    owner_sigkill_kills_tree(Tree::Hundred, &["--pty"]);
}

#[test]
fn pty_hundred_process_tree_in_pid_namespace() {
    if !tether_testkit::require_root("pid namespace containment") {
        return;
    }
    owner_sigkill_kills_tree(Tree::Hundred, &["--pty", "--containment", "pidns"]);
}

/// When the owner dies, the keeper stops the main process's group while it
/// walks the tree, and sends the group the gentle signal after: a member
/// that handles `SIGTERM` must then run its handler — continued, not left
/// stopped until the grace's `SIGKILL` (60 s here, far past the bound).
#[test]
fn a_group_member_handles_the_gentle_signal_when_the_owner_dies() {
    let guard = TagGuard::new("owner-death-handler");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("handled");
    let script = format!(
        "trap 'echo handled > {}; exit 0' TERM; echo ready; while :; do sleep 0.05; done",
        marker.display()
    );
    let mut owner = Owner::start_graced(guard.tag(), "60s", &[], &script);
    owner.expect_ready();
    let keeper = keeper_of(owner.pid()).expect("tether run has a keeper child");

    owner.sigkill();

    // Bounded at 10 s: the handler runs within milliseconds of the kill;
    // a group left stopped would sit until the grace ends (60 s).
    let survivors = wait_all_dead(guard.tag(), Duration::from_secs(10));
    assert!(
        survivors.is_empty(),
        "the group did not end on SIGTERM: {survivors:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&marker).ok().as_deref(),
        Some("handled\n"),
        "the TERM handler did not run"
    );
    assert!(
        support::wait_pid_exit(keeper, Duration::from_secs(10)),
        "keeper {keeper} outlived its owner"
    );
}

/// With a cgroup v2 of the session's own (a process limit far above the
/// tree), the owner's death lists the tree from the leaf's `cgroup.procs`,
/// each member proven through its pidfd (issue 34 item 10): a storm
/// forking during the kill still leaves nothing.
#[test]
fn fork_storm_during_kill_in_its_own_cgroup() {
    if !require_root("creating cgroups") {
        return;
    }
    owner_sigkill_kills_tree(Tree::ForkStorm, &["--pids", "100000"]);
}

/// The same listing gives the gentle signal to a member outside the main
/// process's group (a `setsid` child, which no group signal reaches): its
/// `SIGTERM` handler runs at the owner's death, not the grace's `SIGKILL`
/// (60 s here, far past the bound). A member the listing misfiled in the
/// group, or skipped, would wait for that.
#[test]
fn a_setsid_member_in_its_own_cgroup_handles_the_gentle_signal_when_the_owner_dies() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("owner-death-cgroup-handler");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("handled");
    // "ready" once the setsid shell's trap is set (it touches a file then;
    // bounded at ~10 s of polling): a SIGTERM before that would end it by
    // default, with no handler to run (1 failure in a CI run, when the
    // owner was killed while the shell was still starting).
    let script = format!(
        "setsid sh -c \"trap 'echo handled > {m}; exit 0' TERM; touch {m}.armed; \
         while :; do sleep 0.05; done\" & \
         i=0; while [ ! -e {m}.armed ] && [ $i -lt 1000 ]; do i=$((i + 1)); sleep 0.01; done; \
         echo ready; exec sleep 1000",
        m = marker.display()
    );
    let mut owner = Owner::start_graced(guard.tag(), "60s", &["--pids", "100000"], &script);
    owner.expect_ready();
    // The setsid shell, its sleep and the main process.
    let built = wait_for_count(guard.tag(), 3, Duration::from_secs(20));
    assert!(built >= 3, "fixture built only {built} processes");

    owner.sigkill();

    let survivors = wait_all_dead(guard.tag(), Duration::from_secs(10));
    assert!(
        survivors.is_empty(),
        "the setsid member did not end on SIGTERM: {survivors:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&marker).ok().as_deref(),
        Some("handled\n"),
        "the TERM handler did not run"
    );
}

/// A `setsid` member that moved itself out of the session's cgroups (as
/// root it can: one write to a parent's `cgroup.procs`) is not in the
/// leaf's listing at the owner's death: the walk that follows it, one
/// sweep later, must still give it the gentle signal — its handler runs,
/// long before the grace's `SIGKILL` (60 s) — and the forced rung must not
/// come early because everything the leaf listed ignores the signal.
#[test]
fn a_member_that_left_its_cgroup_still_gets_the_gentle_signal_when_the_owner_dies() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("owner-death-cgroup-escape");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("handled");
    let script = format!("exec python3 -c '{LEAVE_AND_HANDLE}' {}", marker.display());
    let mut owner = Owner::start_graced(guard.tag(), "60s", &["--pids", "100000"], &script);
    owner.expect_ready();

    owner.sigkill();

    let survivors = wait_all_dead(guard.tag(), Duration::from_secs(10));
    assert!(
        survivors.is_empty(),
        "the member outside the cgroup did not end on SIGTERM: {survivors:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&marker).ok().as_deref(),
        Some("handled\n"),
        "the TERM handler did not run"
    );
}

/// The main process forks a `setsid` child that leaves every cgroup of the
/// session (for its parent's), handles `SIGTERM` by writing the marker
/// (argv 1), and says `ready` once out; the main process ignores `SIGTERM`
/// (it stays until the forced rung, so its exit starts no walk, and what
/// the leaf lists all ignores the gentle signal). (No single quote: it
/// runs inside `sh -c '…'`.)
const LEAVE_AND_HANDLE: &str = r#"
import os, signal, sys, time
if os.fork() == 0:
    os.setsid()
    mounts = [l.split(" - ") for l in open("/proc/self/mountinfo").read().splitlines()]
    for line in open("/proc/self/cgroup").read().splitlines():
        hid, ctrls, path = line.split(":", 2)
        if "tether-" not in path:
            continue
        for left, right in mounts:
            f, t = left.split(), right.split()
            v2 = t[0] == "cgroup2" and not ctrls
            v1 = t[0] == "cgroup" and ctrls and set(ctrls.split(",")) <= set(t[2].split(","))
            if (v2 or v1) and f[3] == "/":
                open(os.path.dirname(f[4] + path) + "/cgroup.procs", "w").write(str(os.getpid()))
                break
    assert "tether-" not in open("/proc/self/cgroup").read()
    def handled(*_):
        open(sys.argv[1], "w").write("handled\n")
        os._exit(0)
    signal.signal(signal.SIGTERM, handled)
    print("ready", flush=True)
    while True:
        time.sleep(0.05)
else:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(1000)
"#;

/// The main process exits at once and a grandchild holds stdout: `tether
/// run` must neither hang on the pipe nor leave the grandchild behind.
#[test]
fn grandchild_holding_stdout() {
    let guard = TagGuard::new("owner-grandchild-stdout");
    let mut owner = Owner::start(guard.tag(), &[], Tree::GrandchildHoldsStdout.script());
    owner.expect_ready();
    let status = owner
        .wait_bounded(Duration::from_secs(15))
        .expect("tether run returned");
    assert_eq!(status.code(), Some(0));
    let survivors = wait_all_dead(guard.tag(), Duration::from_secs(15));
    assert!(survivors.is_empty(), "left behind: {survivors:?}");
}
