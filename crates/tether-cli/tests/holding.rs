//! The updater's rung: `tether ps --holding DIR` lists who holds a
//! directory, `tether reap --holding DIR` kills exactly the proven orphans
//! among them and says — by exit status — whether DIR is free, listing the
//! live holders and their owners. Untagged holders are never killed.

#![cfg(target_os = "linux")]

mod orphans;
mod support;

use std::collections::{HashMap, HashSet};
use std::process::{Command, Stdio};

use orphans::Home;
use serde_json::Value;
use tether::ProcessIdentity;
use tether_testkit::TAG_VAR;

/// Pid → verdict kind of the holders in a report.
fn verdicts(report: &Value) -> HashMap<u32, String> {
    report["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["pid"].as_u64().unwrap() as u32,
                h["verdict"]["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The session's one `sleep`. Its script says "ready" and then execs
/// `sleep`, which no event announces: polled, bounded (a fresh-clone run
/// under load read the session before the exec, 1 of 10).
fn one_process(home: &Home, session: &str) -> ProcessIdentity {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let procs = orphans::session_processes(home.install().id(), session);
        let commands: Vec<_> = procs
            .iter()
            .filter(|p| {
                tether::sys::command_line(p.pid)
                    .first()
                    .is_some_and(|c| c == "sleep")
            })
            .cloned()
            .collect();
        if commands.len() == 1 {
            return commands[0].clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not one sleep in the session: {procs:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn reap_holding_kills_exactly_the_proven_orphans_and_reports_the_rest() {
    let home = Home::new("holding");
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::canonicalize(dir.path()).unwrap();
    let d = d.to_str().unwrap();
    // 1. A proven orphan holding a file under DIR open.
    let open = home.orphan(
        &[],
        &format!("exec 3>'{d}/held.log'; echo ready; exec sleep 1000"),
        1,
    );
    // 2. A proven orphan whose working directory is DIR.
    let cwd = home.orphan(&[], &format!("cd '{d}'; echo ready; exec sleep 1000"), 1);
    // 3. A live owner's process with its working directory in DIR.
    let mut live = home.run(&[], &format!("cd '{d}'; echo ready; exec sleep 1000"), 1);
    // 4. An untagged process there.
    let mut untagged = Command::new("sleep")
        .arg("1000")
        .current_dir(d)
        .env_remove(tether::SPAWN_TAG_VAR)
        .env(TAG_VAR, home.tag())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let open_id = one_process(&home, &open.session);
    let cwd_id = one_process(&home, &cwd.session);
    let live_id = one_process(&home, &live.session);
    let untagged_id = ProcessIdentity::of_pid(untagged.id()).unwrap();

    // ps lists all four, classified; the exit status says "held".
    let (code, ps) = home.json(&["ps", "--holding", d]);
    assert_eq!(code, 3, "{ps}");
    let expected: HashMap<u32, String> = [
        (open_id.pid, "orphan"),
        (cwd_id.pid, "orphan"),
        (live_id.pid, "spared"),
        (untagged_id.pid, "untagged"),
    ]
    .into_iter()
    .map(|(p, k)| (p, k.to_owned()))
    .collect();
    assert_eq!(verdicts(&ps), expected, "{ps}");
    let by_pid = |report: &Value, pid: u32| -> Value {
        report["holders"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["pid"] == pid)
            .cloned()
            .unwrap()
    };
    let held = by_pid(&ps, open_id.pid);
    assert_eq!(held["holds"][0]["how"], "open", "{held}");
    assert!(
        held["holds"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("held.log")
    );
    assert_eq!(by_pid(&ps, cwd_id.pid)["holds"][0]["how"], "cwd");
    let live_holder = by_pid(&ps, live_id.pid);
    assert_eq!(live_holder["verdict"]["reason"]["kind"], "owner_alive");
    assert_eq!(live_holder["owner"]["pid"], live.owner);
    assert_eq!(live_holder["owner"]["status"]["status"], "alive");
    assert!(
        live_holder["owner"]["command"]
            .as_str()
            .unwrap()
            .contains("run"),
        "{live_holder}"
    );
    assert_eq!(
        by_pid(&ps, untagged_id.pid)["parent"]["pid"],
        std::process::id()
    );

    // A dry run plans the two orphans and kills nothing.
    let (code, plan) = home.json(&["reap", "--holding", d, "--dry-run"]);
    assert_eq!(code, 3, "{plan}");
    let planned: HashSet<u32> = plan["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["pid"].as_u64().unwrap() as u32)
        .collect();
    assert_eq!(planned, HashSet::from([open_id.pid, cwd_id.pid]));
    for id in [&open_id, &cwd_id, &live_id, &untagged_id] {
        assert!(id.is_alive(), "a dry run killed {id}");
    }

    // The reap kills exactly those two; DIR is still held by the other two,
    // reported with a distinct exit status.
    let (code, done) = home.json(&["reap", "--holding", d, "--grace", "300ms"]);
    assert_eq!(code, 3, "{done}");
    assert_eq!(done["free"], false);
    let killed: HashSet<u32> = done["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| matches!(t["outcome"]["kind"].as_str(), Some("terminated" | "killed")))
        .map(|t| t["pid"].as_u64().unwrap() as u32)
        .collect();
    assert_eq!(killed, HashSet::from([open_id.pid, cwd_id.pid]), "{done}");
    assert!(
        !open_id.is_alive() && !cwd_id.is_alive(),
        "an orphan holder survived"
    );
    assert!(live_id.is_alive(), "a live owner's process was killed");
    assert!(untagged_id.is_alive(), "an untagged process was killed");
    let after = verdicts(&done["after"]);
    assert_eq!(
        after.keys().copied().collect::<HashSet<_>>(),
        HashSet::from([live_id.pid, untagged_id.pid]),
        "{done}"
    );
    let (_, text) = home.text(&["reap", "--holding", d, "--dry-run"]);
    assert!(text.contains("is held by 2 process"), "{text}");
    assert!(
        text.contains("owner_alive") || text.contains("owner is alive"),
        "{text}"
    );

    // Once the remaining holders exit, DIR is free: exit status 0.
    untagged.kill().unwrap();
    untagged.wait().unwrap();
    live.kill_owner();
    let keeper_gone = support::wait_pid_exit(live_id.pid, std::time::Duration::from_secs(20));
    assert!(
        keeper_gone,
        "the live run's tree did not die with its owner"
    );
    let (code, free) = home.json(&["reap", "--holding", d]);
    assert_eq!(code, 0, "{free}");
    assert_eq!(free["free"], true);
    let (code, _) = home.text(&["ps", "--holding", d]);
    assert_eq!(code, 0);
    let (code, _) = home.text(&["ps", "--holding", "/nonexistent/tether-test"]);
    assert_eq!(code, 125);
}
