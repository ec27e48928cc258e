//! `tether reap`: proven orphans of this install die, whole trees, with the
//! ladder; nothing else is ever signalled — not a live owner's processes,
//! not untagged look-alikes, not another install's or an interactive
//! session's orphans, and (as root, in a private pid namespace) not a
//! process that took a dead owner's or orphan's pid.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod orphans;
mod support;

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use orphans::{Home, TREE_WITH_UNTAGGED_CHILD, session_processes};
use serde_json::Value;
use tether::ProcessIdentity;
use tether_testkit::{TAG_VAR, Tree};

fn pids(report: &Value, list: &str) -> HashSet<u32> {
    report[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["pid"].as_u64().unwrap() as u32)
        .collect()
}

fn pid_set(ids: &[ProcessIdentity]) -> HashSet<u32> {
    ids.iter().map(|i| i.pid).collect()
}

fn all_alive(ids: &[ProcessIdentity]) -> bool {
    ids.iter().all(ProcessIdentity::is_alive)
}

fn none_alive(ids: &[ProcessIdentity]) -> bool {
    ids.iter().all(|i| !i.is_alive())
}

/// An untagged `sleep 1000` child of this test: the look-alike of the
/// orphans' `sleep 1000`s.
fn look_alike(tag: &str) -> std::process::Child {
    Command::new("sleep")
        .arg("1000")
        .env_remove(tether::SPAWN_TAG_VAR)
        .env(TAG_VAR, tag)
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

/// Processes that ignore SIGTERM (an ignored signal stays ignored across
/// `exec`), and start nothing new afterwards: the test compares snapshots
/// of the tree taken at different moments, which a loop respawning
/// `sleep 1` (as `Tree::TrapIgnore` does) would make differ.
const STUBBORN: &str = "trap '' TERM HUP INT; sh -c 'exec sleep 1000' & \
     setsid sh -c 'exec sleep 1000' & (setsid sh -c 'exec sleep 1000' &); \
     echo ready; exec sleep 1000";

#[test]
fn reap_kills_proven_orphans_and_nothing_else() {
    let home = Home::new("reap-main");
    let other = Home::new("reap-other-install");
    // Orphans: a tree with escapes and an untagged child; a tree that
    // ignores SIGTERM (it needs the SIGKILL rung).
    let plain = home.orphan(&[], TREE_WITH_UNTAGGED_CHILD, 4);
    let stubborn = home.orphan(&[], STUBBORN, 4);
    // Never to be touched: a live owner's tree, an interactive orphan,
    // another install's orphan, an untagged look-alike.
    let live = home.run(&[], Tree::SetsidDoubleFork.script(), 4);
    let interactive = home.orphan(&["--purpose", "interactive"], Tree::Nohup.script(), 4);
    let foreign = other.orphan(&[], Tree::SetsidDoubleFork.script(), 4);
    let mut twin = look_alike(home.tag());
    let twin_id = ProcessIdentity::of_pid(twin.id()).unwrap();

    let install = home.install();
    let orphans: Vec<_> = [&plain, &stubborn]
        .iter()
        .flat_map(|r| session_processes(install.id(), &r.session))
        .collect();
    let spared: Vec<_> = [&live, &interactive]
        .iter()
        .flat_map(|r| session_processes(install.id(), &r.session))
        .chain(session_processes(other.install().id(), &foreign.session))
        .chain([twin_id.clone()])
        .collect();
    assert!(
        orphans.len() >= 8 && spared.len() >= 13,
        "{orphans:?} {spared:?}"
    );

    // ps marks exactly the orphans.
    let (_, ps) = home.json(&["ps"]);
    let orphaned: HashSet<u32> = ps["owners"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| o["sessions"].as_array().unwrap())
        .flat_map(|s| s["processes"].as_array().unwrap())
        .filter(|p| p["orphaned"] == true)
        .map(|p| p["pid"].as_u64().unwrap() as u32)
        .collect();
    let interactive_pids = pid_set(&session_processes(install.id(), &interactive.session));
    let plain_and_stubborn = pid_set(&orphans);
    assert_eq!(
        orphaned,
        &plain_and_stubborn | &interactive_pids,
        "ps marks every process of a dead owner orphaned (interactive included)"
    );

    // The dry run plans exactly the reapable orphans and signals nothing.
    let (code, plan) = home.json(&["reap", "--dry-run"]);
    assert_eq!(code, 0);
    assert_eq!(plan["dry_run"], true);
    assert_eq!(pids(&plan, "targets"), plain_and_stubborn);
    assert!(
        plan["targets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["outcome"]["kind"] == "planned")
    );
    let skipped = plan["skipped"].as_array().unwrap();
    let reason = |kind: &str| -> HashSet<u32> {
        skipped
            .iter()
            .filter(|s| s["reason"]["kind"] == kind)
            .map(|s| s["pid"].as_u64().unwrap() as u32)
            .collect()
    };
    assert_eq!(reason("interactive"), interactive_pids);
    assert_eq!(
        reason("owner_alive"),
        pid_set(&session_processes(install.id(), &live.session))
    );
    assert_eq!(reason("untagged_descendant").len(), 1);
    assert!(
        all_alive(&orphans) && all_alive(&spared),
        "a dry run kills nothing"
    );
    let (_, text) = home.text(&["reap", "--dry-run"]);
    assert!(text.contains("would kill"), "{text}");

    // The reap kills them all, the stubborn ones with SIGKILL.
    let (code, report) = home.json(&["reap", "--grace", "300ms"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["survivors"], 0);
    assert!(pids(&report, "targets").is_superset(&plain_and_stubborn));
    let outcome = |kind: &str| {
        report["targets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["outcome"]["kind"] == kind)
            .count()
    };
    assert!(outcome("terminated") >= 4, "{report}");
    assert!(
        outcome("killed") >= 2,
        "TERM-ignoring processes need KILL: {report}"
    );
    assert!(none_alive(&orphans), "an orphan survived the reap");
    assert!(all_alive(&spared), "reap touched something it must not");
    assert!(twin.try_wait().unwrap().is_none());

    // The ledger says how those sessions ended, and nothing is left to reap.
    let (_, all) = home.json(&["ps", "--all"]);
    let reaped = all["owners"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| o["sessions"].as_array().unwrap())
        .filter(|s| s["state"]["outcome"]["kind"] == "reaped")
        .count();
    assert_eq!(reaped, 2, "{all}");
    let (code, again) = home.json(&["reap"]);
    assert_eq!(code, 0);
    assert!(again["targets"].as_array().unwrap().is_empty(), "{again}");

    // The other install reaps its own.
    let foreign_procs = session_processes(other.install().id(), &foreign.session);
    let (code, theirs) = other.json(&["reap", "--grace", "300ms"]);
    assert_eq!(code, 0);
    assert_eq!(pids(&theirs, "targets"), pid_set(&foreign_procs));
    assert!(none_alive(&foreign_procs));
    let _ = twin.kill();
    let _ = twin.wait();
}

#[test]
fn purpose_selects_which_orphans_are_reaped() {
    let home = Home::new("reap-purpose");
    let build = home.orphan(&["--purpose", "build"], Tree::SetsidDoubleFork.script(), 4);
    let mcp = home.orphan(&["--purpose", "mcp"], Tree::SetsidDoubleFork.script(), 4);
    let install = home.install();
    let build_procs = session_processes(install.id(), &build.session);
    let mcp_procs = session_processes(install.id(), &mcp.session);
    let (code, report) = home.json(&["reap", "--purpose", "mcp", "--grace", "300ms"]);
    assert_eq!(code, 0);
    assert_eq!(pids(&report, "targets"), pid_set(&mcp_procs));
    assert!(none_alive(&mcp_procs));
    assert!(all_alive(&build_procs));
    let skipped: Vec<_> = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["reason"]["kind"] == "purpose_not_selected")
        .collect();
    assert_eq!(skipped.len(), build_procs.len());
}

#[test]
fn interactive_purposes_are_refused() {
    let home = Home::new("reap-refuse");
    let out = home
        .tether(&["reap", "--purpose", "chat"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("interactive"));
}

// ---------------------------------------------------------------------------
// Forced pid reuse, as root, inside a private pid namespace: the scenario
// runs as pid 1 of a fresh namespace (this test binary re-run under
// `unshare --pid --fork --mount-proc`), where `ns_last_pid` decides the
// next pid.
// ---------------------------------------------------------------------------

const PIDNS_SCENARIO: &str = "TETHER_REAP_TEST_PIDNS_SCENARIO";

/// Runs `scenario` (a test of this file) as pid 1 of a private pid
/// namespace; skips with a message when not root or without `unshare`.
fn in_private_pid_namespace(scenario: &str) {
    tether_testkit::run_in_private_pid_namespace(scenario, PIDNS_SCENARIO);
}

/// Whether this process is the scenario inside the namespace.
fn inside_namespace() -> bool {
    std::env::var_os(PIDNS_SCENARIO).is_some() && std::process::id() == 1
}

/// Spawns `cmd` so that it gets pid `pid` (free, in this namespace), by
/// setting `ns_last_pid` to `pid - 1` first. Nothing else forks here.
fn spawn_at(pid: u32, cmd: &mut Command) -> std::process::Child {
    for _ in 0..20 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
        let child = cmd.spawn().unwrap();
        if child.id() == pid {
            return child;
        }
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
    }
    let holder = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    panic!("could not get pid {pid}: {holder}");
}

/// Whether `pid` is an orphan whose pid we can free: reparented to us (pid
/// 1, so we reap it) and not a process group or session leader (a group or
/// session id keeps its pid allocated while any member lives).
fn freeable(pid: u32) -> bool {
    tether::sys::process(pid).is_ok_and(|s| s.ppid == 1 && s.pgrp != pid)
}

/// As pid 1 we are the orphans' init: reap `pid` once it has exited so its
/// pid is free again.
fn reap_pid(pid: u32) {
    let mut status = 0;
    // SAFETY: waitpid on a child of ours (an orphan reparented to pid 1).
    unsafe { libc::waitpid(pid as i32, &mut status, 0) };
}

#[test]
fn pid_reuse_never_redirects_reap_cli() {
    if !inside_namespace() {
        in_private_pid_namespace("pid_reuse_never_redirects_reap_cli_inside");
    }
}

#[test]
fn pid_reuse_never_redirects_reap_cli_inside() {
    if !inside_namespace() {
        return; // only meaningful as pid 1 of the namespace (see above)
    }
    let home = Home::new("reap-pidns");
    let orphan = home.orphan(&[], TREE_WITH_UNTAGGED_CHILD, 4);
    reap_pid(orphan.keeper.pid);
    let install = home.install();
    let mut orphans = session_processes(install.id(), &orphan.session);
    assert!(orphans.len() >= 4);

    // A live owner takes the dead owner's pid: its tree's tags name the
    // same pid with another start time.
    let mut cmd = home.tether(&["run", "--", "/bin/sh", "-c", "echo ready; exec sleep 1000"]);
    cmd.stdout(Stdio::piped()).stdin(Stdio::null());
    let mut usurper = spawn_at(orphan.owner, &mut cmd);
    let mut pending = Vec::new();
    let line = support::read_line_bounded(
        usurper.stdout.as_mut().unwrap(),
        &mut pending,
        Duration::from_secs(30),
    );
    assert_eq!(line.as_deref(), Some("ready"));
    let usurper_id = ProcessIdentity::of_pid(usurper.id()).unwrap();
    assert_ne!(usurper_id.start_time, orphan.owner_start);

    // An untagged look-alike takes an orphan's pid.
    let at = orphans
        .iter()
        .position(|o| freeable(o.pid))
        .expect("an orphan whose pid we can free");
    let victim = orphans.remove(at);
    let pin = tether::sys::Pinned::pin(&victim).unwrap().unwrap();
    pin.signal(libc::SIGKILL).unwrap();
    reap_pid(victim.pid);
    let mut twin = spawn_at(victim.pid, &mut {
        let mut c = Command::new("sleep");
        c.arg("1000")
            .env_remove(tether::SPAWN_TAG_VAR)
            .env(TAG_VAR, home.tag());
        c
    });
    let twin_id = ProcessIdentity::of_pid(twin.id()).unwrap();
    // Wait until the usurper is in the ledger (it writes after its spawn).
    let live_session = tether_ledger::Scan::take()
        .processes
        .iter()
        .find(|p| p.tag.owner_pid == orphan.owner && p.tag.owner_start == usurper_id.start_time)
        .map(|p| p.tag.session.clone())
        .expect("usurper's tree");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !home.ledger_has_session(&live_session) {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(2));
    }
    let live = session_processes(install.id(), &live_session);

    let (_, ps) = home.json(&["ps"]);
    let dead = ps["owners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["pid"] == orphan.owner && o["start_time"] == orphan.owner_start)
        .expect("dead owner listed");
    assert_eq!(dead["status"]["proof"]["kind"], "pid_reused", "{dead}");

    let (code, report) = home.json(&["reap", "--grace", "300ms"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(pids(&report, "targets"), pid_set(&orphans));
    assert!(none_alive(&orphans));
    assert!(
        usurper_id.is_alive(),
        "the process holding the dead owner's pid"
    );
    assert!(all_alive(&live), "the live owner's tree");
    assert!(twin_id.is_alive(), "the look-alike holding an orphan's pid");
    for child in [&mut twin, &mut usurper] {
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[test]
fn a_stale_plan_never_signals_a_pid_reused_since() {
    if !inside_namespace() {
        in_private_pid_namespace("a_stale_plan_never_signals_a_pid_reused_since_inside");
    }
}

#[test]
fn a_stale_plan_never_signals_a_pid_reused_since_inside() {
    if !inside_namespace() {
        return; // only meaningful as pid 1 of the namespace (see above)
    }
    let home = Home::new("reap-stale-plan");
    let orphan = home.orphan(&[], TREE_WITH_UNTAGGED_CHILD, 4);
    let install = home.install();
    let opts = tether_ledger::ReapOptions {
        grace: Duration::from_millis(300),
        ..Default::default()
    };
    let mut plan = tether_ledger::plan(install.id(), Default::default(), &opts);
    assert_eq!(plan.targets.len(), 4);
    // Between plan and execution, one target dies and an impostor takes
    // its pid — with the very same spawn tag and command line, so only its
    // identity (start time, pidfs inode) tells it apart.
    let at = plan
        .targets
        .iter()
        .position(|t| freeable(t.pid))
        .expect("an orphan whose pid we can free");
    let victim = &plan.targets[at];
    let victim_id = ProcessIdentity {
        boot_id: ProcessIdentity::current().unwrap().boot_id,
        pid: victim.pid,
        start_time: victim.start_time,
        pidfs_inode: victim.pidfs_inode,
    };
    let tag = tether::sys::spawn_tag(victim.pid).unwrap().to_string();
    let pin = tether::sys::Pinned::pin(&victim_id).unwrap().unwrap();
    pin.signal(libc::SIGKILL).unwrap();
    reap_pid(victim.pid);
    let mut impostor = spawn_at(victim.pid, &mut {
        let mut c = Command::new("sleep");
        c.arg("1000")
            .env(tether::SPAWN_TAG_VAR, &tag)
            .env(TAG_VAR, home.tag());
        c
    });
    let impostor_id = ProcessIdentity::of_pid(impostor.id()).unwrap();
    assert!(!impostor_id.matches(&victim_id));

    tether_ledger::execute(&mut plan.targets, opts.grace);
    assert_eq!(
        plan.targets[at].outcome,
        tether_ledger::TargetOutcome::AlreadyGone
    );
    assert!(impostor_id.is_alive(), "the impostor was signalled");
    for t in plan.targets.iter().filter(|t| t.pid != impostor_id.pid) {
        assert!(
            matches!(
                t.outcome,
                tether_ledger::TargetOutcome::Terminated | tether_ledger::TargetOutcome::Killed
            ),
            "{t:?}"
        );
    }
    let _ = impostor.kill();
    let _ = impostor.wait();
    let _ = orphan;
}
