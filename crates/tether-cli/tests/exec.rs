//! Processes tether did not start: `tether exec` registers one (same pid as
//! the program), `tether ps` lists it, `tether reap` kills it only once its
//! spawner is provably dead and never when its purpose is interactive;
//! `tether spawn-tag` gives launchers a tag naming themselves.

#![cfg(target_os = "linux")]

mod orphans;
mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use orphans::Home;
use serde_json::Value;
use tether::ProcessIdentity;
use tether_testkit::TAG_VAR;

/// A spawner `sh` that runs `tether exec --purpose P -- sleep 1000` in the
/// background (so the `sh` is its parent, hence its spawner) and stays.
fn spawner(home: &Home, purpose: &str) -> Child {
    let exec = home.tether(&["exec", "--purpose", purpose, "--", "sleep", "1000"]);
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "\"$@\" & exec sleep 1000", "sh"])
        .arg(exec.get_program())
        .args(exec.get_args())
        .envs(exec.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env_remove(tether::SPAWN_TAG_VAR)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    cmd.spawn().unwrap()
}

/// The registered entry of `ps --json` with this purpose, once there is one
/// and `tether exec` has become the program, `sleep 1000` in every test here
/// (before that, `ps` says "starting", or reads the tag `tether exec` itself
/// inherited). A registration and an exec raise no event we can wait on:
/// this polls `ps`, bounded.
fn registered(home: &Home, purpose: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, ps) = home.json(&["ps"]);
        if let Some(entry) = ps["registered"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["purpose"] == purpose && r["command"] == "sleep 1000")
        {
            return entry.clone();
        }
        assert!(Instant::now() < deadline, "never registered: {ps}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pids(report: &Value, list: &str) -> Vec<u32> {
    report[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["pid"].as_u64().unwrap() as u32)
        .collect()
}

fn skip_reason(report: &Value, pid: u32) -> String {
    report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["pid"] == pid)
        .map(|s| s["reason"]["kind"].as_str().unwrap().to_owned())
        .unwrap_or_default()
}

#[test]
fn exec_registers_and_reap_waits_for_the_spawner_and_spares_interactive() {
    let home = Home::new("exec-reap");
    let mut backend_spawner = spawner(&home, "backend");
    let mut chat_spawner = spawner(&home, "interactive");
    let backend = registered(&home, "backend");
    let chat = registered(&home, "interactive");
    let backend_pid = backend["pid"].as_u64().unwrap() as u32;
    let chat_pid = chat["pid"].as_u64().unwrap() as u32;
    let backend_id = ProcessIdentity::of_pid(backend_pid).unwrap();
    let chat_id = ProcessIdentity::of_pid(chat_pid).unwrap();

    // Same pid as the program: `tether exec` became `sleep`.
    assert_eq!(tether::sys::command_line(backend_pid), ["sleep", "1000"]);
    assert_eq!(backend["spawner"]["pid"], backend_spawner.id());
    assert_eq!(backend["spawner"]["source"], "parent");
    assert_eq!(backend["spawner"]["status"]["status"], "alive");
    assert_eq!(backend["reap"]["kind"], "spawner_alive");
    // It carries a tag naming its spawner: ps lists it under that owner too.
    let tag = tether::sys::spawn_tag(backend_pid).expect("tagged");
    assert_eq!(tag.owner_pid, backend_spawner.id());
    assert_eq!(tag.purpose, "backend");
    assert_eq!(tag.install, home.install().id());
    let (_, text) = home.text(&["ps"]);
    assert!(
        text.contains("REGISTERED") && text.contains("backend"),
        "{text}"
    );

    // Never reaped while the spawner lives.
    let (code, report) = home.json(&["reap", "--grace", "300ms"]);
    assert_eq!(code, 0, "{report}");
    assert!(!pids(&report, "targets").contains(&backend_pid), "{report}");
    assert_eq!(skip_reason(&report, backend_pid), "owner_alive");
    assert!(backend_id.is_alive() && chat_id.is_alive());

    // The spawners die (SIGKILL): the backend is an orphan, the
    // interactive one is still never reaped.
    for s in [&mut backend_spawner, &mut chat_spawner] {
        s.kill().unwrap();
        s.wait().unwrap();
    }
    let orphan = registered(&home, "backend");
    assert_eq!(orphan["spawner"]["status"]["status"], "dead", "{orphan}");
    assert_eq!(orphan["reap"]["kind"], "orphan");
    assert_eq!(
        registered(&home, "interactive")["reap"]["kind"],
        "interactive"
    );
    let (code, report) = home.json(&["reap", "--grace", "300ms"]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(pids(&report, "targets"), [backend_pid], "{report}");
    assert_eq!(skip_reason(&report, chat_pid), "interactive");
    assert!(
        !backend_id.is_alive(),
        "the orphaned backend survived the reap"
    );
    assert!(chat_id.is_alive(), "an interactive process was reaped");
}

#[test]
fn exec_takes_the_spawner_from_the_tag_and_reports_a_missing_program() {
    let home = Home::new("exec-tag");
    // A launcher stamps a tag naming itself (through spawn-tag) on the
    // `tether exec` it starts.
    let spawn_tag = home.tether(&["spawn-tag", "--purpose", "launcher", "--owner"]);
    let exec = home.tether(&["exec", "--purpose", "serve", "--", "sleep", "1000"]);
    let script = "TETHER_SPAWN=$(\"$0\" \"$@\" $$); export TETHER_SPAWN; \
                  \"$0\" exec --purpose serve -- sleep 1000 & exec sleep 1000";
    let mut launcher = Command::new("/bin/sh")
        .args(["-c", script])
        .arg(spawn_tag.get_program())
        .args(spawn_tag.get_args())
        .envs(exec.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env_remove(tether::SPAWN_TAG_VAR)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let serve = registered(&home, "serve");
    assert_eq!(serve["spawner"]["pid"], launcher.id());
    assert_eq!(serve["spawner"]["source"], "tag");
    let pid = serve["pid"].as_u64().unwrap() as u32;
    let tag = tether::sys::spawn_tag(pid).unwrap();
    assert_eq!(
        (tag.owner_pid, tag.purpose.as_str()),
        (launcher.id(), "serve")
    );
    launcher.kill().unwrap();
    launcher.wait().unwrap();

    let out = home
        .tether(&["exec", "--purpose", "serve", "--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/program"));
    let out = home
        .tether(&["exec", "--purpose", "bad purpose", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("purpose"));
    // The failed exec took its registration back.
    let (_, ps) = home.json(&["ps"]);
    assert!(
        ps["registered"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["pid"] == pid),
        "{ps}"
    );
}

#[test]
fn spawn_tag_names_the_calling_process_and_launched_children_are_reaped_after_it() {
    let home = Home::new("spawn-tag");
    // Called directly by this test: the caller is this process.
    let (code, printed) = home.json(&["spawn-tag", "--purpose", "worker"]);
    assert_eq!(code, 0);
    let me = ProcessIdentity::current().unwrap();
    assert_eq!(printed["owner_pid"], me.pid);
    assert_eq!(printed["owner_start"], me.start_time);
    let tag: tether::SpawnTag = printed["tag"].as_str().unwrap().parse().unwrap();
    assert_eq!(tag.install, home.install().id());
    assert_eq!((tag.owner_pid, tag.purpose.as_str()), (me.pid, "worker"));
    let (_, plain) = home.text(&["spawn-tag", "--purpose", "worker"]);
    assert!(plain.trim().parse::<tether::SpawnTag>().is_ok(), "{plain}");
    let bad = home
        .tether(&["spawn-tag", "--purpose", "a:b"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(125));

    // A launcher in another language (here: sh) stamps the tag on a child;
    // once the launcher is SIGKILLed the child is a proven orphan.
    let spawn_tag = home.tether(&["spawn-tag", "--purpose", "worker", "--owner"]);
    let mut launcher = Command::new("/bin/sh")
        .args([
            "-c",
            "TETHER_SPAWN=$(\"$0\" \"$@\" $$) sleep 1000 & echo $!; exec sleep 1000",
        ])
        .arg(spawn_tag.get_program())
        .args(spawn_tag.get_args())
        .env("TETHER_HOME", home.path())
        .env(TAG_VAR, home.tag())
        .env_remove(tether::SPAWN_TAG_VAR)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pending = Vec::new();
    let child: u32 = support::read_line_bounded(
        launcher.stdout.as_mut().unwrap(),
        &mut pending,
        Duration::from_secs(20),
    )
    .unwrap()
    .parse()
    .unwrap();
    // Its exec (and so its environment) is done once its tag shows.
    let deadline = Instant::now() + Duration::from_secs(10);
    while tether::sys::spawn_tag(child).is_none() {
        assert!(Instant::now() < deadline, "the child never carried the tag");
        std::thread::sleep(Duration::from_millis(5));
    }
    let child_id = ProcessIdentity::of_pid(child).unwrap();
    assert_eq!(
        tether::sys::spawn_tag(child).unwrap().owner_pid,
        launcher.id()
    );
    let (_, report) = home.json(&["reap", "--dry-run"]);
    assert!(!pids(&report, "targets").contains(&child), "{report}");
    launcher.kill().unwrap();
    launcher.wait().unwrap();
    let (code, report) = home.json(&["reap", "--grace", "300ms"]);
    assert_eq!(code, 0);
    assert_eq!(pids(&report, "targets"), [child], "{report}");
    assert!(!child_id.is_alive());
}
