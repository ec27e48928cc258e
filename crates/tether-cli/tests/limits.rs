//! Limits from the front-ends: `tether run --memory/--pids/--cpu` and its
//! `--json` (`limits`, `limit_hit`), `tether mcp`'s `run` and defaults,
//! `tether ps`; a session's cgroups are gone after its owner's SIGKILL (the
//! keeper removes them) and after owner *and* keeper were killed (`tether
//! reap` does); a user without a delegated cgroup gets `none` with the
//! reason.
//!
//! Root here (creating cgroups needs it on this machine): each test fails
//! instead of skipping under `TETHER_REQUIRE_ROOT=1`.

#![cfg(target_os = "linux")]

mod orphans;
mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use orphans::Home;
use serde_json::Value;
use support::{tether, tether_as, wait_pid_exit};
use tether_testkit::{
    ESCAPE_LIMITS, TAG_VAR, TagGuard, Tree, require_root, tagged_pids, wait_all_dead,
};

/// The cgroups the ledger recorded for `session`.
fn recorded_cgroups(home: &Home, session: &str) -> Vec<String> {
    tether_ledger::Ledger::open(&home.install())
        .and_then(|l| l.sessions())
        .unwrap()
        .into_iter()
        .find(|s| s.id == session)
        .expect("the session is in the ledger")
        .cgroups
}

#[test]
fn run_json_reports_limits_and_an_oom_kill_as_the_memory_limit() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("cli-limits-oom");
    let out = tether()
        .args([
            "run", "--json", "--memory", "256M", "--pids", "64", "--cpu", "1.5",
        ])
        .args(["--", "python3", "-c", "x = bytearray(2 << 30)"])
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["limit_hit"], "memory", "{json}");
    assert_eq!(json["oom_kills"], 1, "{json}");
    assert_eq!(json["signal"], 9, "{json}");
    assert_eq!(out.status.code(), Some(137));
    let limits = &json["limits"];
    assert_eq!(limits["memory"]["value"], 256u64 << 20);
    assert_eq!(limits["pids"]["value"], 64);
    assert_eq!(limits["cpu"]["value"], 1.5);
    for limit in ["memory", "pids", "cpu"] {
        let how = limits[limit]["enforced"].as_str().unwrap();
        assert!(how == "cgroup1" || how == "cgroup2", "{limit}: {json}");
    }
    let leaf = limits["cgroup"].as_str().expect("a cgroup v2 leaf");
    assert!(!Path::new(leaf).exists(), "removed when the run ended");
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[test]
fn the_cgroups_go_when_the_owner_is_sigkilled_and_ps_shows_the_limits_meanwhile() {
    if !require_root("creating cgroups") {
        return;
    }
    let home = Home::new("cli-limits-owner-kill");
    let mut run = home.run(
        &["--memory", "64M", "--pids", "50"],
        Tree::SetsidDoubleFork.script(),
        4,
    );
    let cgroups = recorded_cgroups(&home, &run.session);
    assert!(
        !cgroups.is_empty(),
        "the ledger records the session's cgroups"
    );
    for dir in &cgroups {
        assert!(Path::new(dir).is_dir(), "{dir} exists while it runs");
    }
    let (_, ps) = home.text(&["ps"]);
    assert!(
        ps.contains("limits: memory 64 MiB (cgroup") && ps.contains("pids 50 (cgroup"),
        "{ps}"
    );
    run.kill_owner();
    // The keeper kills the tree, removes the cgroups, then exits.
    assert!(wait_pid_exit(run.keeper.pid, Duration::from_secs(20)));
    assert!(wait_all_dead(home.tag(), Duration::from_secs(5)).is_empty());
    for dir in &cgroups {
        assert!(
            !Path::new(dir).exists(),
            "{dir} left after the owner's SIGKILL"
        );
    }
}

#[test]
fn reap_removes_the_cgroups_of_a_session_whose_owner_and_keeper_were_killed() {
    if !require_root("creating cgroups") {
        return;
    }
    let home = Home::new("cli-limits-reap");
    let run = home.orphan(&["--pids", "50"], Tree::SetsidDoubleFork.script(), 4);
    let cgroups = recorded_cgroups(&home, &run.session);
    assert!(!cgroups.is_empty());
    for dir in &cgroups {
        assert!(
            Path::new(dir).is_dir(),
            "{dir}: nobody was left to remove it"
        );
    }
    let (code, report) = home.json(&["reap", "--grace", "200ms"]);
    assert_eq!(code, 0, "{report}");
    let removed: Vec<&str> = report["cgroups_removed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mut want: Vec<&str> = cgroups.iter().map(String::as_str).collect();
    let mut got = removed.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want, "{report}");
    for dir in &cgroups {
        assert!(!Path::new(dir).exists());
    }
    assert!(wait_all_dead(home.tag(), Duration::from_secs(5)).is_empty());
}

#[test]
fn a_user_without_a_delegated_cgroup_gets_none_with_the_reason() {
    if !require_root("switching to an unprivileged user") {
        return;
    }
    let guard = TagGuard::new("cli-limits-nobody");
    let state = tempfile::tempdir().unwrap();
    // The unprivileged user's own state directory.
    std::os::unix::fs::chown(state.path(), Some(65534), Some(65534)).unwrap();
    let out = tether_as(65534)
        .args([
            "run", "--json", "--memory", "64M", "--pids", "10", "--cpu", "1",
        ])
        .args(["--", "/bin/true"])
        .env(TAG_VAR, guard.tag())
        .env("TETHER_HOME", state.path())
        .env("HOME", state.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(json["exit_code"], 0, "{json}");
    for limit in ["memory", "pids", "cpu"] {
        let entry = &json["limits"][limit];
        assert_eq!(entry["enforced"], "none", "{limit}: {json}");
        let reason = entry["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("not writable") && reason.contains("delegat"),
            "{limit}: the reason names the missing delegation: {reason}"
        );
    }
    assert!(json["limits"]["cgroup"].is_null(), "no cgroup was made");
    assert!(json["limit_hit"].is_null());
}

#[test]
fn mcp_run_takes_limits_and_the_servers_defaults_and_reports_them() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("cli-limits-mcp");
    let mut server = tether()
        .args(["mcp", "--pids", "64"])
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start tether mcp");
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let mut answer = || {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read answer");
        serde_json::from_str::<Value>(&line).expect("JSON answer")
    };
    for request in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"argv":["python3","-c","x = bytearray(1 << 30)"],"memory":"128M"}}}"#,
    ] {
        writeln!(stdin, "{request}").unwrap();
    }
    assert_eq!(answer()["result"]["serverInfo"]["name"], "tether");
    let result = answer();
    let body = &result["result"]["structuredContent"];
    assert_eq!(body["limit_hit"], "memory", "{result}");
    assert_eq!(body["limits"]["memory"]["value"], 128u64 << 20, "{result}");
    assert_eq!(
        body["limits"]["pids"]["value"], 64,
        "the server's default: {result}"
    );
    assert!(
        body["note"]
            .as_str()
            .is_some_and(|n| n.contains("memory limit")),
        "{result}"
    );
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"list","arguments":{{}}}}}}"#
    )
    .unwrap();
    let listed = answer();
    let session = &listed["result"]["structuredContent"]["sessions"][0];
    assert_eq!(session["limit_hit"], "memory", "{listed}");
    assert_eq!(
        session["limits"]["pids"]["enforced"],
        body["limits"]["pids"]["enforced"]
    );
    // A limit out of range is a clear error, and the server runs on.
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"run","arguments":{{"command":"true","memory":"lots"}}}}}}"#
    )
    .unwrap();
    let refused = answer();
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(refused.to_string().contains("512M"), "{refused}");
    drop(stdin);
    assert_eq!(server.wait().unwrap().code(), Some(0));
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

/// This process's cgroup directory in the v1 hierarchy of `controller`
/// (from /proc/self/cgroup and /proc/self/mountinfo).
fn own_v1_cgroup(controller: &str) -> std::path::PathBuf {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let path = cgroup
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
            ctrls.split(',').any(|c| c == controller).then_some(path)
        })
        .expect("a v1 hierarchy with the controller");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let point = mountinfo
        .lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let tail: Vec<&str> = right.split(' ').collect();
            let fields: Vec<&str> = left.split(' ').collect();
            (tail[0] == "cgroup" && tail[2].split(',').any(|o| o == controller) && fields[3] == "/")
                .then(|| fields[4].to_owned())
        })
        .expect("its mount");
    Path::new(&point).join(path.trim_start_matches('/'))
}

/// A cgroup made for one test below this process's own, removed (depth
/// first, after its processes are gone) when dropped.
struct TestCgroup(std::path::PathBuf);

impl TestCgroup {
    fn new(controller: &str, name: &str) -> TestCgroup {
        let dir = own_v1_cgroup(controller).join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        TestCgroup(dir)
    }

    /// `sh -c 'echo $$ > cgroup.procs; exec tether ARGS…'`: tether started
    /// inside this cgroup.
    fn tether(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg("echo $$ > \"$0/cgroup.procs\" && exec \"$@\"")
            .arg(&self.0)
            .arg(support::tether_path())
            .args(args)
            .env("TETHER_HOME", support::home());
        cmd
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let mut dirs = vec![self.0.clone()];
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

#[test]
fn plain_run_says_on_stderr_which_limits_are_not_enforced_and_why() {
    if !require_root("switching to an unprivileged user") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(state.path(), Some(65534), Some(65534)).unwrap();
    let out = tether_as(65534)
        .args(["run", "--memory", "64M", "--pids", "8", "--", "/bin/true"])
        .env("TETHER_HOME", state.path())
        .env("HOME", state.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("limits not enforced")
            && stderr.contains("memory 64 MiB (")
            && stderr.contains("pids 8 (")
            && stderr.contains("delegat"),
        "{stderr}"
    );
    // Enforced limits say nothing (as root here).
    let out = tether()
        .args(["run", "--pids", "8", "--", "/bin/true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn require_limits_refuses_to_run_unlimited_before_the_program_starts() {
    if !require_root("switching to an unprivileged user") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(state.path(), Some(65534), Some(65534)).unwrap();
    let marker = state.path().join("started");
    let script = format!("touch {}", marker.display());
    let out = tether_as(65534)
        .args(["run", "--require-limits", "--memory", "64M", "--"])
        .args(["/bin/sh", "-c", &script])
        .env("TETHER_HOME", state.path())
        .env("HOME", state.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("memory limit not applied") && stderr.contains("delegat"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the program never started");
    // As root the limits are enforced: it runs.
    let out = tether()
        .args(["run", "--require-limits", "--memory", "64M", "--pids", "8"])
        .args(["--", "/bin/true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn a_limit_value_the_kernel_refuses_is_an_error_before_the_program_starts() {
    if !require_root("creating cgroups") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let script = format!("touch {}", marker.display());
    // Above the kernel's most processes: pids.max says EINVAL.
    let out = tether()
        .args(["run", "--pids", "4194305", "--", "/bin/sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("4194304"), "{stderr}");
    assert!(!marker.exists(), "the program never started");
    // A v1 CPU quota above the owner's own: the kernel refuses the write
    // (EINVAL), found only when the keeper writes it.
    let parent = TestCgroup::new("cpu", "tether-test-cpu-quota");
    std::fs::write(parent.0.join("cpu.cfs_quota_us"), "50000").unwrap();
    let out = parent
        .tether(&["run", "--cpu", "2", "--", "/bin/sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("cpu limit not applied") && stderr.contains("refused"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the program never started");
}

#[test]
fn an_oom_kill_by_the_owners_limit_is_not_reported_as_the_sessions_limit() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("cli-limits-ancestor-oom");
    // The owner's cgroup holds 200 MiB; the session asks for 1 GiB and
    // allocates 500 MiB: the owner's limit is what the OOM killer acts for.
    let parent = TestCgroup::new("memory", "tether-test-ancestor-oom");
    std::fs::write(parent.0.join("memory.limit_in_bytes"), "200M").unwrap();
    let _ = std::fs::write(parent.0.join("memory.memsw.limit_in_bytes"), "200M");
    let run = |memory: &str| {
        let out = parent
            .tether(&["run", "--json", "--memory", memory, "--"])
            .args(["python3", "-c", "x = bytearray(500 << 20)"])
            .env(TAG_VAR, guard.tag())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    let json = run("1G");
    assert_eq!(json["signal"], 9, "the OOM killer ended it: {json}");
    assert!(
        json["limit_hit"].is_null(),
        "not the session's limit: {json}"
    );
    assert_eq!(json["oom_kills"], 0, "{json}");
    assert_eq!(json["oom_killed_outside"], 1, "reported as such: {json}");
    // The same allocation under a session limit below the owner's is the
    // session's limit.
    let json = run("100M");
    assert_eq!(json["limit_hit"], "memory", "{json}");
    assert_eq!(json["oom_kills"], 1, "{json}");
    assert_eq!(json["oom_killed_outside"], 0, "{json}");
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[test]
fn mcp_require_limits_refuses_a_run_whose_limits_would_be_none() {
    if !require_root("switching to an unprivileged user") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(state.path(), Some(65534), Some(65534)).unwrap();
    let marker = state.path().join("started");
    let mut server = tether_as(65534)
        .args(["mcp", "--require-limits"])
        .env("TETHER_HOME", state.path())
        .env("HOME", state.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start tether mcp");
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let mut answer = || {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read answer");
        serde_json::from_str::<Value>(&line).expect("JSON answer")
    };
    let touch = format!("touch {}", marker.display());
    for request in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run", "arguments": {"command": touch, "memory": "64M"}}})
        .to_string(),
    ] {
        writeln!(stdin, "{request}").unwrap();
    }
    assert_eq!(answer()["result"]["serverInfo"]["name"], "tether");
    let refused = answer();
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused.to_string();
    assert!(
        text.contains("memory limit not applied") && text.contains("delegat"),
        "{refused}"
    );
    assert!(!marker.exists(), "the command never started");
    // Without the server default, the same call runs and says `none`.
    drop(stdin);
    assert_eq!(server.wait().unwrap().code(), Some(0));
}

#[test]
fn a_command_that_leaves_its_limits_is_reported_in_every_output_mode() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("cli-limits-escape");
    let out = tether()
        .args(["run", "--memory", "256M", "--pids", "64", "--"])
        .args(["python3", "-c", ESCAPE_LIMITS])
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("process(es) left the session's limits") && stderr.contains(" to memory:"),
        "{stderr}"
    );
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
    let out = tether()
        .args(["run", "--json", "--memory", "256M", "--pids", "64", "--"])
        .args(["python3", "-c", ESCAPE_LIMITS])
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["descendants_killed"], 5, "{json}");
    let escaped = json["limits_escaped"].as_array().expect("a list");
    // The 5 sleepers; and the command itself if the keeper's membership
    // check (every 250 ms) ran before it exited.
    assert!((5..=6).contains(&escaped.len()), "{json}");
    for e in escaped {
        assert!(e["pid"].as_u64().is_some(), "{json}");
        assert!(!e["cgroup"].as_str().unwrap().contains("tether-"), "{json}");
    }
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[test]
fn mcp_results_name_the_processes_that_left_the_sessions_limits() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("cli-limits-mcp-escape");
    let mut server = tether()
        .args(["mcp", "--memory", "256M", "--pids", "64"])
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start tether mcp");
    let mut stdin = server.stdin.take().unwrap();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let mut answer = || {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read answer");
        serde_json::from_str::<Value>(&line).expect("JSON answer")
    };
    for request in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run", "arguments": {"argv": ["python3", "-c", ESCAPE_LIMITS]}}})
        .to_string(),
    ] {
        writeln!(stdin, "{request}").unwrap();
    }
    assert_eq!(answer()["result"]["serverInfo"]["name"], "tether");
    let result = answer();
    let id = result["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // It exited and left its 5 sleepers (MCP keeps them until a kill):
    // found outside the session's cgroups when the kill walks the tree.
    let kill = serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "kill", "arguments": {"id": id}}});
    writeln!(stdin, "{kill}").unwrap();
    let result = answer();
    let body = &result["result"]["structuredContent"];
    assert_eq!(body["descendants_killed"], 5, "{result}");
    let escaped = body["limits_escaped"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"));
    assert!((5..=6).contains(&escaped.len()), "{result}");
    drop(stdin);
    assert_eq!(server.wait().unwrap().code(), Some(0));
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

/// The keeper's removal of a session's leaves is bounded: a process moved
/// into them from outside that cannot die of `SIGKILL` yet (frozen in a v1
/// freezer cgroup) held the keeper — deaf to its owner — for 5 s plus 5 s
/// per leaf (20.2 s for three leaves here); now the run ends, and the leaf
/// is left to `tether reap`. Needs a v1 freezer hierarchy (the v2 freezer
/// lets `SIGKILL` through).
#[test]
fn a_frozen_outsider_in_the_sessions_leaves_does_not_hold_the_keeper() {
    if !require_root("creating cgroups") {
        return;
    }
    let Some(freezer) = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let tail: Vec<&str> = right.split(' ').collect();
            let fields: Vec<&str> = left.split(' ').collect();
            (tail[0] == "cgroup" && tail[2].split(',').any(|o| o == "freezer") && fields[3] == "/")
                .then(|| std::path::PathBuf::from(fields[4]))
        })
    else {
        eprintln!("no cgroup v1 freezer hierarchy here: nothing to test");
        return;
    };
    let guard = TagGuard::new("cli-limits-frozen-outsider");
    let frozen = freezer.join(format!("tether-test-frozen-{}", std::process::id()));
    std::fs::create_dir(&frozen).unwrap();
    let mut outsider = std::process::Command::new("sleep")
        .arg("1000")
        .env(TAG_VAR, guard.tag())
        .spawn()
        .unwrap();
    std::fs::write(frozen.join("cgroup.procs"), outsider.id().to_string()).unwrap();
    std::fs::write(frozen.join("freezer.state"), "FROZEN").unwrap();
    // The command moves the outsider into its own cgroups (v2 and the v1
    // memory and pids ones: its leaves), then exits.
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mut moves = String::new();
    for l in mountinfo.lines() {
        let Some((left, right)) = l.split_once(" - ") else {
            continue;
        };
        let tail: Vec<&str> = right.split(' ').collect();
        let fields: Vec<&str> = left.split(' ').collect();
        let pattern = match tail[0] {
            "cgroup2" => "^0::".to_owned(),
            "cgroup" => match ["memory", "pids"]
                .into_iter()
                .find(|c| tail[2].split(',').any(|o| o == *c))
            {
                Some(c) => format!(":{c}:"),
                None => continue,
            },
            _ => continue,
        };
        if fields[3] == "/" {
            moves.push_str(&format!(
                "p=$(grep '{pattern}' /proc/self/cgroup | cut -d: -f3); \
                 echo {pid} > '{mount}'\"$p/cgroup.procs\"; echo '{mount}'\"$p\"; ",
                pid = outsider.id(),
                mount = fields[4]
            ));
        }
    }
    let script = format!("{moves}echo moved");
    let mut run = tether()
        .args([
            "run", "--memory", "64M", "--pids", "32", "--", "sh", "-c", &script,
        ])
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ended = wait_pid_exit(run.id(), Duration::from_secs(10));
    let out = std::io::read_to_string(run.stdout.take().unwrap()).unwrap_or_default();
    std::fs::write(frozen.join("freezer.state"), "THAWED").unwrap();
    let _ = outsider.kill();
    let _ = outsider.wait();
    let _ = run.wait();
    let _ = std::fs::remove_dir(&frozen);
    // The leaves the keeper had to leave (the test's own cleanup).
    let leaves: Vec<&str> = out.lines().filter(|l| l.contains("/tether-")).collect();
    for leaf in &leaves {
        let _ = std::fs::remove_dir(leaf);
    }
    assert_eq!(out.lines().last(), Some("moved"), "{out}");
    assert!(!leaves.is_empty(), "{out}");
    assert!(ended, "the run was held by a frozen process in its leaves");
}

/// A command that leaves its leaves (writes its pid to its owner's
/// cgroups, as [`ESCAPE_LIMITS`] does), then waits — bounded — to find
/// itself back in them, then forks 100 sleeps under `--pids 64`. Prints
/// `back` once moved back; exits 3 saying `never moved back` otherwise.
const ESCAPE_AND_WAIT: &str = r#"
import os, subprocess, sys, time
mounts = [l.split(' - ') for l in open('/proc/self/mountinfo').read().splitlines()]
left = []
for line in open('/proc/self/cgroup').read().splitlines():
    hid, ctrls, path = line.split(':', 2)
    if 'tether-' not in path:
        continue
    for a, b in mounts:
        f, t = a.split(), b.split()
        v2 = t[0] == 'cgroup2' and not ctrls
        v1 = t[0] == 'cgroup' and ctrls and set(ctrls.split(',')) <= set(t[2].split(','))
        if (v2 or v1) and f[3] == '/':
            open(os.path.dirname(f[4] + path) + '/cgroup.procs', 'w').write(str(os.getpid()))
            left.append(hid)
            break
if not left:
    sys.exit('no leaf to leave')
print('escaped', os.getpid(), flush=True)
deadline = time.monotonic() + 20
while True:
    lines = [l.split(':', 2) for l in open('/proc/self/cgroup').read().splitlines()]
    if all('tether-' in p for h, _, p in lines if h in left):
        break
    if time.monotonic() > deadline:
        print('never moved back', flush=True)
        sys.exit(3)
    time.sleep(0.02)
print('back', flush=True)
sleeps = []
try:
    for i in range(100):
        sleeps.append(subprocess.Popen(['sleep', '1000']))
except OSError as e:
    print('refused after', len(sleeps), e, flush=True)
"#;

/// While the session runs, the keeper moves a process that left its
/// cgroups back into them: the command finds itself back, its forks then
/// hit `--pids 64`, and the result lists it as moved back.
#[test]
fn a_command_that_leaves_its_limits_is_moved_back_while_it_runs() {
    if !require_root("creating cgroups") {
        return;
    }
    let guard = TagGuard::new("cli-limits-moved-back");
    let out = tether()
        .args(["run", "--json", "--pids", "64", "--"])
        .args(["python3", "-c", ESCAPE_AND_WAIT])
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let said = json["stdout"].as_str().unwrap_or_default();
    assert!(said.contains("back\n") && !said.contains("never"), "{json}");
    assert_eq!(json["limit_hit"], "pids", "{json}");
    let escaped = json["limits_escaped"].as_array().expect("a list");
    let pid: u64 = said
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{json}"));
    let entry = escaped
        .iter()
        .find(|e| e["pid"] == pid)
        .unwrap_or_else(|| panic!("the command itself is listed: {json}"));
    assert_eq!(entry["moved_back"], true, "{json}");
    assert!(entry["times_moved_back"].as_u64() >= Some(1), "{json}");
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

/// Cgroups delegated to an unprivileged user as systemd delegates them:
/// a directory of the user's own (and its `cgroup.procs`) in the v1
/// `pids` hierarchy and in the v2 one, removed on drop.
struct Delegated(Vec<std::path::PathBuf>);

impl Delegated {
    /// `None` where this machine lacks either hierarchy.
    fn new(name: &str, uid: u32) -> Option<Delegated> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = |v2: bool| {
            mountinfo.lines().find_map(|line| {
                let (left, right) = line.split_once(" - ")?;
                let (f, t): (Vec<&str>, Vec<&str>) =
                    (left.split(' ').collect(), right.split(' ').collect());
                let fits = if v2 {
                    t[0] == "cgroup2"
                } else {
                    t[0] == "cgroup" && t.get(2)?.split(',').any(|o| o == "pids")
                };
                (fits && f.get(3) == Some(&"/")).then(|| Path::new(f[4]).join(name))
            })
        };
        let dirs = vec![mount(false)?, mount(true)?];
        for dir in &dirs {
            std::fs::create_dir(dir).unwrap();
            for path in [dir.clone(), dir.join("cgroup.procs")] {
                std::os::unix::fs::chown(&path, Some(uid), Some(uid)).unwrap();
            }
        }
        Some(Delegated(dirs))
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// The same as a user with delegated cgroups: `tether run` as `nobody`,
/// started (by root) in cgroups that user owns; the command leaves its
/// leaves for them and is moved back by its keeper, which runs as that
/// user too.
#[test]
fn a_delegated_users_command_that_leaves_its_limits_is_moved_back() {
    if !require_root("delegating cgroups to an unprivileged user") {
        return;
    }
    if std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no setpriv to switch users with");
        return;
    }
    let guard = TagGuard::new("cli-limits-delegated-back");
    let Some(delegated) = Delegated::new(&format!("deleg-test.{}", guard.tag()), 65534) else {
        eprintln!("skipped: no cgroup v1 pids hierarchy beside cgroup v2 here");
        return;
    };
    let state = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(state.path(), Some(65534), Some(65534)).unwrap();
    // Root moves the shell into the user's cgroups (a v2 move needs write
    // access to the common ancestor), then it becomes the user.
    let enter = format!(
        "echo $$ > {}/cgroup.procs && echo $$ > {}/cgroup.procs && \
         exec setpriv --reuid 65534 --regid 65534 --clear-groups \"$@\"",
        delegated.0[0].display(),
        delegated.0[1].display()
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &enter, "sh"])
        .arg(support::tether_path_for_anyone())
        .args(["run", "--json", "--pids", "64", "--"])
        .args(["python3", "-c", ESCAPE_AND_WAIT])
        .current_dir("/")
        .env(TAG_VAR, guard.tag())
        .env("TETHER_HOME", state.path())
        .env("HOME", state.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(json["limits"]["pids"]["enforced"], "cgroup1", "{json}");
    let said = json["stdout"].as_str().unwrap_or_default();
    assert!(said.contains("back\n") && !said.contains("never"), "{json}");
    assert_eq!(json["limit_hit"], "pids", "{json}");
    let escaped = json["limits_escaped"].as_array().expect("a list");
    assert!(
        escaped
            .iter()
            .any(|e| e["pid"] == json["pid"] && e["moved_back"] == true),
        "{json}"
    );
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}
