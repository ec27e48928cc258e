//! G10: durable sessions (`tether run --durable`, `sessions`, `attach`,
//! `kill`, `extend`) — they outlive their owner on purpose, held by the
//! user's holder, re-adoptable, killed at their TTL or with their holder,
//! never anyone else's to touch.
//!
//! Each test has a `TETHER_HOME` of its own (so a holder of its own) and
//! kills that holder by pid when it ends ([`Home`]'s drop), after which
//! the keepers' lifelines take every session it held down.

#![cfg(target_os = "linux")]

mod support;

use std::os::fd::AsRawFd;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use tether_testkit::{TAG_VAR, TagGuard, tagged_pids, wait_all_dead, wait_for_count};

/// A test's own state directory, and the holder started in it.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::Builder::new()
                .prefix("tether-durable.")
                .tempdir()
                .expect("a tether home"),
        }
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// `tether ARGS` in this home, with `tag` in its environment.
    fn tether(&self, tag: &str) -> Command {
        let mut cmd = Command::new(support::tether_path());
        cmd.env("TETHER_HOME", self.path())
            .env(TAG_VAR, tag)
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, tag: &str, args: &[&str]) -> Output {
        self.tether(tag).args(args).output().expect("tether runs")
    }

    /// `tether run --durable --json ARGS`, which must succeed: its JSON.
    fn start(&self, tag: &str, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["run", "--durable", "--json"];
        all.extend_from_slice(args);
        let out = self.run(tag, &all);
        assert!(
            out.status.success(),
            "tether {all:?}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("one JSON object")
    }

    fn sessions(&self) -> Vec<serde_json::Value> {
        let out = self.run("-", &["sessions", "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("a JSON array")
    }

    /// `tether ps --json` once the holder has recorded itself and its
    /// first session (it records off its request path: a store another
    /// process locks never delays a start), asked again until then, bounded
    /// at 20 s.
    fn census_recorded(&self) -> serde_json::Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let out = self.run("-", &["ps", "--json"]);
            let census: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let recorded = !census["owners"][0]["sessions"][0]["durable"].is_null()
                && census["owners"][0]["purpose"] == "holder";
            if recorded || std::time::Instant::now() > deadline {
                return census;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The holder's pid, from its lock file — checked to be a `tether
    /// holder` of this very home before it is believed.
    fn holder_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.path().join("holder.lock")).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        let home = format!("TETHER_HOME={}", self.path().display());
        let ours = cmdline.split(|b| *b == 0).any(|a| a == b"holder")
            && environ.split(|b| *b == 0).any(|v| v == home.as_bytes());
        (ours && !tether_testkit::is_zombie(pid)).then_some(pid)
    }

    /// SIGKILLs the holder through a pidfd (so a recycled pid is never
    /// hit) and waits for it to be gone.
    fn kill_holder(&self) {
        let Some(pid) = self.holder_pid() else { return };
        if !tether_testkit::sigkill(pid) {
            return;
        }
        assert!(
            support::wait_pid_exit(pid, Duration::from_secs(10)),
            "holder {pid} survived SIGKILL"
        );
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        self.kill_holder();
    }
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists() && !tether_testkit::is_zombie(pid)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The owner of a plain session and the requester of a durable one,
/// SIGKILLed: the plain session dies with it, the durable one lives on.
#[test]
fn owner_sigkill_kills_the_plain_session_and_not_the_durable_one() {
    let home = Home::new();
    let plain = TagGuard::new("durable-plain");
    let durable = TagGuard::new("durable-kept");
    let tether = support::tether_path();
    // The owner: asks for the durable session, then becomes (exec) the
    // `tether run` of a plain one.
    let script = format!(
        "TETHER_TEST_TAG={durable} '{tether}' run --durable --name kept -- sleep 1000 >/dev/null \
           || exit 9; \
         echo ready; \
         TETHER_TEST_TAG={plain} exec '{tether}' run -- sleep 1000",
        durable = durable.tag(),
        plain = plain.tag(),
        tether = tether.display(),
    );
    let mut owner = Command::new("sh")
        .args(["-c", &script])
        .env("TETHER_HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the owner starts");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(owner.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "ready\n", "the durable start failed");
    assert!(wait_for_count(plain.tag(), 1, Duration::from_secs(20)) >= 1);
    let kept = tagged_pids(durable.tag());
    assert_eq!(kept.len(), 1, "the durable session runs: {kept:?}");

    owner.kill().unwrap(); // SIGKILL
    owner.wait().unwrap();

    assert!(
        wait_all_dead(plain.tag(), Duration::from_secs(15)).is_empty(),
        "the plain session outlived its owner's SIGKILL"
    );
    assert!(
        pid_alive(kept[0]),
        "the durable session died with its requester"
    );
    let listed = home.sessions();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["name"], "kept");
    assert_eq!(listed[0]["status"], "running");
    assert_eq!(listed[0]["pid"], kept[0]);
    // The verified kill, by name, from yet another process.
    let out = home.run("-", &["kill", "kept"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(wait_all_dead(durable.tag(), Duration::from_secs(10)).is_empty());
}

/// What a durable session printed while nobody was attached is all there
/// for a later process, from offset 0 — and from any offset after it.
#[test]
fn a_new_process_re_adopts_and_reads_from_offset_zero() {
    let home = Home::new();
    let guard = TagGuard::new("durable-readopt");
    let started = home.start(
        guard.tag(),
        &[
            "--name",
            "printer",
            "--",
            "sh",
            "-c",
            "echo first; echo second; exit 3",
        ],
    );
    let id = started["id"].as_str().unwrap().to_owned();
    assert_eq!(started["durable"], true);
    assert_eq!(started["name"], "printer");
    assert_eq!(started["ttl_s"], 24 * 3600);
    // Follows to the end: everything from offset 0, then the exit code.
    let out = home.run("-", &["attach", "printer"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "first\nsecond\n");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // Offsets are absolute: 6 is where "second" starts.
    let out = home.run("-", &["attach", &id[..6], "--from", "6", "--no-follow"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "second\n");
    let listed = home.sessions();
    assert_eq!(listed[0]["status"], "exited");
    assert_eq!(listed[0]["exit_code"], 3);
}

/// At its TTL a session is killed — whole tree, verified — with nobody
/// attached, and listed as expired.
#[test]
fn ttl_expiry_kills_the_tree() {
    let home = Home::new();
    let guard = TagGuard::new("durable-ttl");
    let script = tether_testkit::Tree::SetsidDoubleFork.script();
    // Started with an hour and cut to 1 s once the whole tree is there: a
    // 1 s TTL from the start could end it, on a loaded machine, before the
    // tree was built (or seen), and the test would check nothing.
    home.start(
        guard.tag(),
        &["--name", "ttl", "--ttl", "1h", "--shell", script],
    );
    let built = wait_for_count(
        guard.tag(),
        tether_testkit::Tree::SetsidDoubleFork.min_processes(),
        Duration::from_secs(20),
    );
    assert!(built >= tether_testkit::Tree::SetsidDoubleFork.min_processes());
    let out = home.run("-", &["extend", "ttl", "--ttl", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let survivors = wait_all_dead(guard.tag(), Duration::from_secs(20));
    assert!(survivors.is_empty(), "outlived its TTL: {survivors:?}");
    let listed = home.sessions();
    assert_eq!(listed[0]["status"], "expired", "{listed:?}");
    assert!(home.holder_pid().is_some(), "the holder itself lives on");
}

/// `tether extend` moves the TTL, both ways: one extended from 1 h to 2 h
/// reports the new TTL and lives on, one cut from 1 h to 1 s dies at once
/// (its timer follows the new TTL), and the first is untouched by that.
#[test]
fn extend_moves_the_ttl() {
    let home = Home::new();
    let long = TagGuard::new("durable-extended");
    let short = TagGuard::new("durable-cut");
    home.start(
        long.tag(),
        &["--name", "long", "--ttl", "1h", "--", "sleep", "1000"],
    );
    let out = home.run("-", &["extend", "long", "--ttl", "2h", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(info["ttl_left_s"].as_u64().unwrap() > 7000, "{info}");
    home.start(
        short.tag(),
        &["--name", "short", "--ttl", "1h", "--", "sleep", "1000"],
    );
    assert!(wait_for_count(short.tag(), 1, Duration::from_secs(10)) >= 1);
    let out = home.run("-", &["extend", "short", "--ttl", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(wait_all_dead(short.tag(), Duration::from_secs(20)).is_empty());
    assert_eq!(
        tagged_pids(long.tag()).len(),
        1,
        "the extended session was killed"
    );
    let listed = home.sessions();
    let long_left = listed
        .iter()
        .find(|s| s["name"] == "long")
        .and_then(|s| s["ttl_left_s"].as_u64());
    assert!(long_left.is_some_and(|left| left > 7000), "{listed:?}");
    // Beyond the maximum: refused, nothing changed.
    let out = home.run("-", &["extend", "long", "--ttl", "169h"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("7 days"), "{}", stderr(&out));
}

/// The holder's death — SIGKILL, no code of its own runs — kills every
/// durable session it holds, escapes included: no anonymous orphan.
#[test]
fn holder_sigkill_leaves_no_survivor() {
    let home = Home::new();
    let guard = TagGuard::new("durable-holder-death");
    for tree in [
        tether_testkit::Tree::SetsidDoubleFork,
        tether_testkit::Tree::Daemon,
        tether_testkit::Tree::TrapIgnore,
    ] {
        home.start(guard.tag(), &["--shell", tree.script()]);
    }
    let built = wait_for_count(guard.tag(), 6, Duration::from_secs(20));
    assert!(built >= 6, "fixtures built {built} processes");
    home.kill_holder();
    let survivors = wait_all_dead(guard.tag(), Duration::from_secs(15));
    assert!(
        survivors.is_empty(),
        "survived the holder's SIGKILL: {survivors:?}"
    );
}

/// Another user can neither list, attach to, nor kill this user's
/// durable sessions, and the session runs on.
#[test]
fn another_uid_cannot_list_attach_or_kill() {
    if !tether_testkit::require_root("running tether as another uid") {
        return;
    }
    let home = Home::new();
    let guard = TagGuard::new("durable-other-uid");
    let started = home.start(guard.tag(), &["--name", "mine", "--", "sleep", "1000"]);
    let id = started["id"].as_str().unwrap();
    for args in [
        vec!["sessions"],
        vec!["attach", "mine", "--no-follow"],
        vec!["attach", id, "--no-follow"],
        vec!["kill", "mine"],
        vec!["kill", id],
        vec!["kill", "--as-root", id],
    ] {
        let out = support::tether_as(65534)
            .env("TETHER_HOME", home.path())
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .expect("tether runs as nobody");
        assert_eq!(out.status.code(), Some(125), "{args:?} as nobody: {out:?}");
        assert!(
            stderr(&out).contains("Permission denied") || stderr(&out).contains("uid"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(
        tagged_pids(guard.tag()).len(),
        1,
        "nobody's kill reached the session"
    );
    assert_eq!(home.sessions()[0]["status"], "running");
}

/// Unknown ids and names are clear errors (exit 125), holder or not; a
/// program that does not exist is 127 and starts nothing.
#[test]
fn unknown_sessions_and_programs_are_clear_errors() {
    let home = Home::new();
    for args in [
        ["attach", "nosuch"],
        ["kill", "nosuch"],
        ["extend", "nosuch"],
    ] {
        let mut args = args.to_vec();
        if args[0] == "extend" {
            args.extend(["--ttl", "1h"]);
        }
        let out = home.run("-", &args);
        assert_eq!(out.status.code(), Some(125), "{args:?} without a holder");
        assert!(
            stderr(&out).contains("no durable session \"nosuch\""),
            "{}",
            stderr(&out)
        );
    }
    let out = home.run("-", &["sessions"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "no durable sessions\n"
    );

    let out = home.run("-", &["run", "--durable", "--", "/nonexistent/program"]);
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("program not found"),
        "{}",
        stderr(&out)
    );
    assert!(home.holder_pid().is_some(), "the holder started");
    for args in [["attach", "nosuch"], ["kill", "nosuch"]] {
        let out = home.run("-", &args);
        assert_eq!(out.status.code(), Some(125), "{args:?} with a holder");
        assert!(
            stderr(&out).contains("no durable session \"nosuch\""),
            "{}",
            stderr(&out)
        );
    }
    assert!(home.sessions().is_empty());
}

/// Names are unique among running sessions: a second start is refused
/// unless --replace, which kills the first (verified) and takes the name.
#[test]
fn names_are_unique_and_replace_kills_the_first() {
    let home = Home::new();
    let first = TagGuard::new("durable-name-first");
    let second = TagGuard::new("durable-name-second");
    home.start(first.tag(), &["--name", "web", "--", "sleep", "1000"]);
    let out = home.run(
        second.tag(),
        &["run", "--durable", "--name", "web", "--", "sleep", "1000"],
    );
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("--replace"), "{}", stderr(&out));
    assert!(
        tagged_pids(second.tag()).is_empty(),
        "the refused start ran"
    );
    home.start(
        second.tag(),
        &["--name", "web", "--replace", "--", "sleep", "1000"],
    );
    assert!(wait_all_dead(first.tag(), Duration::from_secs(10)).is_empty());
    assert_eq!(tagged_pids(second.tag()).len(), 1);
    let running: Vec<_> = home
        .sessions()
        .into_iter()
        .filter(|s| s["status"] == "running")
        .collect();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0]["name"], "web");
}

/// A holder cannot be started from inside a tether session (it would be
/// contained and die with it): a clear error, before anything starts.
#[test]
fn a_holder_is_not_started_from_inside_a_session() {
    let home = Home::new();
    let guard = TagGuard::new("durable-inside");
    let out = home
        .tether(guard.tag())
        .args(["run", "--", "sh", "-c"])
        .arg(format!(
            "'{}' run --durable -- sleep 1000",
            support::tether_path().display()
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("could not start the durable-session holder"),
        "{}",
        stderr(&out)
    );
    assert!(home.holder_pid().is_none());
    // Started from outside, the holder then serves requests from inside.
    let out = home.run("-", &["holder"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ready\n");
    let out = home
        .tether(guard.tag())
        .args(["run", "--", "sh", "-c"])
        .arg(format!(
            "'{}' run --durable -- sleep 1000",
            support::tether_path().display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(home.sessions()[0]["status"], "running");
    assert_eq!(
        tagged_pids(guard.tag()).len(),
        1,
        "the durable session outlived its requester's session"
    );
}

/// 100 durable sessions at once: all run, all listed, all die with the
/// holder.
#[test]
fn a_hundred_sessions() {
    let home = Home::new();
    let guard = TagGuard::new("durable-hundred");
    for _ in 0..100 {
        home.start(guard.tag(), &["--", "sleep", "1000"]);
    }
    assert_eq!(
        wait_for_count(guard.tag(), 100, Duration::from_secs(30)),
        100
    );
    let listed = home.sessions();
    assert_eq!(listed.len(), 100);
    assert!(listed.iter().all(|s| s["status"] == "running"));
    home.kill_holder();
    assert!(wait_all_dead(guard.tag(), Duration::from_secs(30)).is_empty());
}

/// Sends `signal` to `pid` through a pidfd (never a recycled pid).
fn signal(pid: u32, signal: i32) {
    let fd = tether_testkit::pidfd(pid).expect("the process is there");
    // SAFETY: pidfd_send_signal on a pidfd we hold, no siginfo.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal,
            std::ptr::null::<u8>(),
            0u32,
        )
    };
    assert_eq!(rc, 0, "signal {signal} to {pid}");
}

/// `tether ps` shows a durable session as held (owner alive: its holder),
/// with its name, owner of record and TTL — nothing orphaned — and
/// `tether reap` leaves it alone.
#[test]
fn ps_shows_it_durable_and_reap_leaves_it_alone() {
    let home = Home::new();
    let guard = TagGuard::new("durable-ps");
    home.start(
        guard.tag(),
        &["--name", "web", "--ttl", "2h", "--", "sleep", "1000"],
    );
    let census = home.census_recorded();
    let owner = &census["owners"][0];
    assert_eq!(owner["purpose"], "holder");
    assert_eq!(owner["status"]["status"], "alive");
    let session = &owner["sessions"][0];
    assert_eq!(session["durable"]["name"], "web");
    assert_eq!(session["durable"]["ttl_s"], 7200);
    assert_eq!(session["durable"]["owner_purpose"], "tether run");
    assert!(
        session["processes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["orphaned"] == false),
        "{session}"
    );
    let text = String::from_utf8(home.run("-", &["ps"]).stdout).unwrap();
    assert!(text.contains("durable \"web\""), "{text}");
    assert!(
        text.contains("TTL left 1h59m") || text.contains("TTL left 2h00m"),
        "{text}"
    );

    let out = home.run("-", &["reap"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        tagged_pids(guard.tag()).len(),
        1,
        "reap killed a live durable session"
    );
}

/// A holder that cannot end a session at its TTL (stopped here) does not
/// keep it alive: past the TTL, `tether reap` kills it — with proof (its
/// tag names the holder, the ledger its TTL) — and not before.
#[test]
fn reap_kills_a_durable_session_past_its_ttl() {
    let home = Home::new();
    let guard = TagGuard::new("durable-reap-ttl");
    let started = std::time::Instant::now();
    home.start(guard.tag(), &["--ttl", "10", "--", "sleep", "1000"]);
    // reap proves the TTL from the ledger: the holder is stopped only once
    // it has recorded the session there.
    let census = home.census_recorded();
    assert_eq!(census["owners"][0]["purpose"], "holder", "{census}");
    let holder = home.holder_pid().expect("a holder");
    signal(holder, libc::SIGSTOP);
    let out = home.run("-", &["reap", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Before the TTL (10 s, which a loaded machine may have spent on the
    // way here: then this check is not made, and says so).
    if started.elapsed() < Duration::from_secs(9) {
        assert_eq!(tagged_pids(guard.tag()).len(), 1, "reaped before its TTL");
    } else {
        eprintln!("the TTL passed before the first reap: its not-before check skipped");
    }
    // Each reap is a full proof; repeated until the TTL (and the slack
    // left to the holder) has passed — bounded.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut report = String::new();
    while !tagged_pids(guard.tag()).is_empty() && std::time::Instant::now() < deadline {
        let out = home.run("-", &["reap", "--json"]);
        report = String::from_utf8_lossy(&out.stdout).into_owned();
        std::thread::sleep(Duration::from_millis(200));
    }
    signal(holder, libc::SIGCONT);
    assert!(
        tagged_pids(guard.tag()).is_empty(),
        "still alive past its TTL"
    );
    assert!(report.contains("ttl_passed"), "{report}");
}

/// A `tether mcp` on stdio, spoken to one JSON-RPC line at a time.
struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Mcp {
    fn start(home: &Home, tag: &str) -> Mcp {
        use std::io::Write;
        let mut child = home
            .tether(tag)
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("tether mcp starts");
        let mut stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
        )
        .unwrap();
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
        let mut mcp = Mcp {
            child,
            stdin,
            stdout,
            next: 1,
        };
        mcp.answer();
        mcp
    }

    fn answer(&mut self) -> serde_json::Value {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut self.stdout, &mut line).expect("an answer");
        serde_json::from_str(&line).expect("JSON")
    }

    /// Calls `tool` and returns its structured result (asserting success).
    fn call(&mut self, tool: &str, arguments: serde_json::Value) -> serde_json::Value {
        let answer = self.call_raw(tool, arguments);
        assert_ne!(answer["result"]["isError"], true, "{tool}: {answer}");
        answer["result"]["structuredContent"].clone()
    }

    /// Calls `tool` and returns the whole JSON-RPC answer.
    fn call_raw(&mut self, tool: &str, arguments: serde_json::Value) -> serde_json::Value {
        use std::io::Write;
        let request = serde_json::json!({
            "jsonrpc": "2.0", "id": self.next, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        });
        self.next += 1;
        writeln!(self.stdin, "{request}").unwrap();
        self.answer()
    }
}

/// Hermes' restart, through MCP: an agent's `tether mcp` starts a dev
/// server durable (and a plain command beside it) and is SIGKILLed; the
/// plain command dies with it, the durable one runs on; a new `tether mcp`
/// lists it, reads what it printed meanwhile, and kills it.
#[test]
fn a_new_mcp_server_re_adopts_a_durable_session() {
    let home = Home::new();
    let plain = TagGuard::new("durable-mcp-plain");
    let durable = TagGuard::new("durable-mcp-kept");
    let mut first = Mcp::start(&home, durable.tag());
    let started = first.call(
        "run",
        serde_json::json!({
            "command": "echo serving on 8000; read line; echo got $line; exec sleep 1000",
            "durable": true, "name": "dev", "ttl_s": 3600,
        }),
    );
    assert_eq!(started["status"], "running", "{started}");
    let id = started["id"].as_str().unwrap().to_owned();
    let ready = first.call(
        "wait",
        serde_json::json!({"id": "dev", "until": "serving on", "timeout_s": 20}),
    );
    assert_eq!(ready["matched"], true, "{ready}");
    let beside = first.call(
        "run",
        serde_json::json!({"command": "exec sleep 1000", "yield_s": 0,
                           "env": {TAG_VAR: plain.tag()}}),
    );
    assert_eq!(beside["status"], "running");
    assert_eq!(tagged_pids(plain.tag()).len(), 1);

    first.child.kill().unwrap(); // SIGKILL
    first.child.wait().unwrap();
    assert!(wait_all_dead(plain.tag(), Duration::from_secs(15)).is_empty());
    assert_eq!(
        tagged_pids(durable.tag()).len(),
        1,
        "the durable session died with its server"
    );

    let mut second = Mcp::start(&home, "-");
    let listed = second.call("list", serde_json::json!({}));
    let row = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id.as_str())
        .cloned()
        .expect("the new server lists the durable session");
    assert_eq!(row["status"], "running");
    assert!(
        row["command"].as_str().unwrap().contains("\"dev\""),
        "{row}"
    );
    let read = second.call("read", serde_json::json!({"id": "dev", "offset": 0}));
    assert_eq!(read["output"], "serving on 8000\n", "{read}");
    let wrote = second.call(
        "write",
        serde_json::json!({"id": "dev", "data": "hello\n", "until": "got", "yield_s": 10}),
    );
    assert!(
        wrote["output"].as_str().unwrap().contains("got hello"),
        "{wrote}"
    );
    // Without a terminal there is no screen: said as for any session.
    let answer = second.call_raw(
        "screen",
        serde_json::json!({"id": "dev", "rows": 40, "cols": 100}),
    );
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(text.contains("runs without a terminal"), "{text}");
    let killed = second.call("kill", serde_json::json!({"id": id}));
    assert_eq!(killed["status"], "killed", "{killed}");
    assert!(wait_all_dead(durable.tag(), Duration::from_secs(10)).is_empty());
    drop(second.stdin);
    assert_eq!(second.child.wait().unwrap().code(), Some(0));
}

/// Every argument of `read`, `write` and `wait` works on a durable
/// session re-adopted by a new `tether mcp` as on the server's own: the
/// lines of `tail_lines`/`head_lines`, `grep`'s matches, stderr apart,
/// `wait` from an `offset` and on a `stream`, `write` with `quiet_s` and
/// with `eof` (which closes its stdin: `cat` ends), and the marker over
/// output beyond the result's budget.
#[test]
fn a_new_mcp_server_takes_every_argument_on_a_durable_session() {
    let home = Home::new();
    let durable = TagGuard::new("durable-mcp-args");
    let mut first = Mcp::start(&home, durable.tag());
    let lines = first.call(
        "run",
        serde_json::json!({
            "command": "i=1; while [ $i -le 50 ]; do echo line $i; i=$((i+1)); done; \
                        echo oops >&2; echo warn >&2; exec cat",
            "durable": true, "name": "lines", "separate_stderr": true,
        }),
    );
    assert_eq!(lines["status"], "running", "{lines}");
    let big = first.call(
        "run",
        serde_json::json!({"command": "seq 1 30000", "durable": true, "name": "big"}),
    );
    let big_id = big["id"].as_str().unwrap().to_owned();
    let ready = first.call(
        "wait",
        serde_json::json!({"id": "lines", "until": "^line 50$", "timeout_s": 20}),
    );
    assert_eq!(ready["matched"], true, "{ready}");
    first.child.kill().unwrap(); // SIGKILL
    first.child.wait().unwrap();

    let mut second = Mcp::start(&home, "-");
    // Stderr apart, waited for on its own stream, then read.
    let warned = second.call(
        "wait",
        serde_json::json!({"id": "lines", "until": "warn", "stream": "stderr", "timeout_s": 20}),
    );
    assert_eq!(warned["matched"], true, "{warned}");
    assert_eq!(warned["match"]["text"], "warn", "{warned}");
    let stderr = second.call(
        "read",
        serde_json::json!({"id": "lines", "stream": "stderr", "offset": 0}),
    );
    assert_eq!(stderr["output"], "oops\nwarn\n", "{stderr}");
    assert_eq!(stderr["stream"], "stderr", "{stderr}");

    let tail = second.call("read", serde_json::json!({"id": "lines", "tail_lines": 2}));
    assert_eq!(tail["output"], "line 49\nline 50\n", "{tail}");
    assert_eq!(tail["lines"], 2, "{tail}");
    let head = second.call("read", serde_json::json!({"id": "lines", "head_lines": 3}));
    assert_eq!(head["output"], "line 1\nline 2\nline 3\n", "{head}");
    assert_eq!(head["next_offset"], 21, "{head}");
    let found = second.call(
        "read",
        serde_json::json!({"id": "lines", "grep": "^line 4\\d$", "context": 0}),
    );
    assert_eq!(found["match_count"], 10, "{found}");
    let shown = found["output"].as_str().unwrap();
    assert!(
        shown.contains("line 40") && shown.contains("line 49") && !shown.contains("line 39"),
        "{found}"
    );

    // `until` looks after the last match unless given an offset.
    let third =
        serde_json::json!({"id": "lines", "until": "^line 3$", "offset": 0, "timeout_s": 10});
    let matched = second.call("wait", third.clone());
    assert_eq!(matched["match"]["start"], 14, "{matched}");
    let again = second.call(
        "wait",
        serde_json::json!({"id": "lines", "until": "^line 3$", "timeout_s": 1}),
    );
    assert_eq!(again["matched"], false, "{again}");
    assert_eq!(again["earlier_match"]["start"], 14, "{again}");
    assert!(
        again["hint"].as_str().unwrap().contains("\"offset\": 14"),
        "{again}"
    );
    let from_zero = second.call("wait", third);
    assert_eq!(from_zero["match"]["start"], 14, "{from_zero}");

    // `quiet_s`: the answer to the write, once it went quiet.
    let pinged = second.call(
        "write",
        serde_json::json!({"id": "lines", "data": "ping\n", "quiet_s": 0.5, "yield_s": 30}),
    );
    assert_eq!(pinged["quiet"], true, "{pinged}");
    assert!(
        pinged["output"].as_str().unwrap().ends_with("ping\n"),
        "{pinged}"
    );
    // `eof`: `cat` reads the end of its input and exits.
    let closed = second.call(
        "write",
        serde_json::json!({"id": "lines", "data": "bye\n", "eof": true, "yield_s": 30}),
    );
    assert!(
        closed["output"].as_str().unwrap().contains("bye"),
        "{closed}"
    );
    let ended = second.call("wait", serde_json::json!({"id": "lines", "timeout_s": 30}));
    assert_eq!(ended["status"], "exited", "{ended}");
    assert_eq!(ended["exit_code"], 0, "{ended}");

    // 168 894 bytes: a result shows the budget's head and tail, and a
    // marker naming the read that shows the rest.
    let done = second.call("wait", serde_json::json!({"id": "big", "timeout_s": 30}));
    assert_eq!(done["status"], "exited", "{done}");
    let output = done["output"].as_str().unwrap();
    assert!(output.starts_with("1\n2\n3\n"), "{done}");
    assert!(output.ends_with("29999\n30000\n"), "{done}");
    assert!(
        output.contains(&format!(
            "bytes omitted here; to see them call read {{\"id\": \"{big_id}\", \"offset\": "
        )),
        "{done}"
    );
    assert!(
        done["truncated_bytes"].as_u64().unwrap() > 100_000,
        "{done}"
    );
    assert_eq!(done["next_offset"], 168_894, "{done}");

    drop(second.stdin);
    assert_eq!(second.child.wait().unwrap().code(), Some(0));
    assert!(wait_all_dead(durable.tag(), Duration::from_secs(10)).is_empty());
}

/// A durable `run` with `until` returns at that line (as a plain one
/// does), and what a durable session does not take is a clear error; on a
/// terminal, `keys` reach the program from a new server (Enter ends the
/// line `read` waits for), and `screen` resizes it.
#[test]
fn a_durable_run_waits_for_until_and_takes_keys_after_re_adoption() {
    let home = Home::new();
    let durable = TagGuard::new("durable-mcp-keys");
    let mut first = Mcp::start(&home, durable.tag());
    let started = first.call(
        "run",
        serde_json::json!({
            "command": "echo ready; read x; echo got:$x; exec sleep 1000",
            "durable": true, "pty": true, "name": "tty", "until": "ready", "yield_s": 20,
        }),
    );
    assert_eq!(started["matched"], true, "{started}");
    assert!(
        started["output"].as_str().unwrap().contains("ready"),
        "{started}"
    );
    let refused = first.call_raw(
        "run",
        serde_json::json!({"command": "true", "durable": true, "timeout_s": 5}),
    );
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(
        refused["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("ttl_s"),
        "{refused}"
    );
    first.child.kill().unwrap(); // SIGKILL
    first.child.wait().unwrap();

    let mut second = Mcp::start(&home, "-");
    let answered = second.call(
        "write",
        serde_json::json!({"id": "tty", "data": "abc", "keys": ["Enter"], "until": "got:abc",
                           "yield_s": 20}),
    );
    assert_eq!(answered["matched"], true, "{answered}");
    let resized = second.call(
        "screen",
        serde_json::json!({"id": "tty", "rows": 40, "cols": 100}),
    );
    assert_eq!(
        (resized["rows"].as_u64(), resized["cols"].as_u64()),
        (Some(40), Some(100)),
        "{resized}"
    );
    assert!(
        resized["screen"].as_str().unwrap().contains("got:abc"),
        "{resized}"
    );
    // A wait with a progressToken reports progress while it waits (as on
    // the server's own sessions), then answers.
    {
        use std::io::Write;
        let request = serde_json::json!({
            "jsonrpc": "2.0", "id": 999, "method": "tools/call",
            "params": {"name": "wait", "arguments": {"id": "tty", "timeout_s": 3},
                       "_meta": {"progressToken": "p1"}},
        });
        writeln!(second.stdin, "{request}").unwrap();
        let mut progress = 0;
        let answer = loop {
            let line = second.answer();
            if line["method"] == "notifications/progress" {
                assert_eq!(line["params"]["progressToken"], "p1", "{line}");
                progress += 1;
            } else {
                break line;
            }
        };
        assert_eq!(answer["id"], 999, "{answer}");
        assert_eq!(
            answer["result"]["structuredContent"]["status"], "running",
            "{answer}"
        );
        assert!(progress >= 1, "no progress in a 3 s wait");
    }
    let killed = second.call("kill", serde_json::json!({"id": "tty"}));
    assert_eq!(killed["status"], "killed", "{killed}");
    assert!(wait_all_dead(durable.tag(), Duration::from_secs(10)).is_empty());
    drop(second.stdin);
    assert_eq!(second.child.wait().unwrap().code(), Some(0));
}

/// Eight first requests at once start one holder between them, and every
/// one of them gets its session.
#[test]
fn simultaneous_first_requests_share_one_holder() {
    let home = Home::new();
    let guard = TagGuard::new("durable-race");
    let starters: Vec<_> = (0..8)
        .map(|_| {
            home.tether(guard.tag())
                .args(["run", "--durable", "--", "sleep", "1000"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for starter in starters {
        let out = starter.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(home.sessions().len(), 8);
    let marker = format!("TETHER_HOME={}", home.path().display());
    let holders = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| pid_alive(*pid))
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            cmd.split(|b| *b == 0).nth(1) == Some(b"holder")
                && env.split(|b| *b == 0).any(|v| v == marker.as_bytes())
        })
        .count();
    assert_eq!(holders, 1, "one holder per state directory");
}

/// A durable MCP `run` with `stdin` succeeds once the session started:
/// input the command does not read (more than a pipe holds) is queued,
/// not waited on (`write` too), and a command that reads it to the end
/// gets all of it, then EOF.
#[test]
fn a_durable_run_queues_its_stdin() {
    let home = Home::new();
    let guard = TagGuard::new("durable-mcp-stdin");
    let mut mcp = Mcp::start(&home, guard.tag());
    let big = "x".repeat(200_000);
    let deaf = mcp.call_raw(
        "run",
        serde_json::json!({"command": "exec sleep 1000", "durable": true, "stdin": big,
                           "keep_stdin_open": true}),
    );
    assert_ne!(deaf["result"]["isError"], true, "{deaf}");
    let deaf_id = deaf["result"]["structuredContent"]["id"]
        .as_str()
        .expect("the session's id")
        .to_owned();
    let counted = mcp.call(
        "run",
        serde_json::json!({"command": "wc -c", "durable": true, "stdin": big,
                           "until": "200000", "yield_s": 20}),
    );
    assert_eq!(counted["matched"], true, "{counted}");
    // `write` queues too: more than a pipe holds, to a command that never
    // reads, answers with the session (it waited on output, not input).
    let wrote = mcp.call_raw(
        "write",
        serde_json::json!({"id": deaf_id, "data": big, "yield_s": 1}),
    );
    assert_ne!(wrote["result"]["isError"], true, "{wrote}");
    let killed = mcp.call("kill", serde_json::json!({"id": deaf_id}));
    assert_eq!(killed["status"], "killed", "{killed}");
    mcp.child.kill().unwrap(); // the server carries the tag too
    mcp.child.wait().unwrap();
    assert!(wait_all_dead(guard.tag(), Duration::from_secs(10)).is_empty());
}

/// The holder judges each connection by the uid the kernel reports for it
/// (`SO_PEERCRED`), not by who may open the socket file: root — whom no
/// file permission stops — may list another user's durable sessions, but
/// not kill them unless it asks explicitly (`--as-root`).
#[test]
fn root_reads_another_users_sessions_but_kills_them_only_when_asked() {
    if !tether_testkit::require_root("running a holder as another uid") {
        return;
    }
    let home = Home::new();
    let guard = TagGuard::new("durable-peercred");
    let path = std::ffi::CString::new(home.path().as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; chown touches no memory of ours.
    assert_eq!(unsafe { libc::chown(path.as_ptr(), 65534, 65534) }, 0);
    let out = support::tether_as(65534)
        .env("TETHER_HOME", home.path())
        .env(TAG_VAR, guard.tag())
        .args(["run", "--durable", "--json", "--", "sleep", "1000"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let started: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = started["id"].as_str().unwrap();
    let holder = home.holder_pid().expect("nobody's holder");
    let status = std::fs::read_to_string(format!("/proc/{holder}/status")).unwrap();
    assert!(
        status.lines().any(|l| l.starts_with("Uid:\t65534")),
        "{status}"
    );

    let listed = home.sessions();
    assert_eq!(listed.len(), 1, "root may list");
    assert_eq!(listed[0]["id"], id);
    let out = home.run("-", &["kill", id]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("uid 0 may not change"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        tagged_pids(guard.tag()).len(),
        1,
        "root's kill went through"
    );
    // Asked for explicitly, root's kill is the verified kill.
    let out = home.run("-", &["kill", "--as-root", id]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        wait_all_dead(guard.tag(), Duration::from_secs(10)).is_empty(),
        "root's explicit kill left the tree"
    );
}

/// With nothing left to hold and nobody connected, the holder exits by
/// itself after its idle period (here 1 s), removing nothing it should
/// keep: a session still running keeps it.
#[test]
fn an_idle_holder_exits_and_a_busy_one_stays() {
    let home = Home::new();
    let guard = TagGuard::new("durable-idle");
    let started = |args: &[&str]| {
        let out = home
            .tether(guard.tag())
            .env("TETHER_HOLDER_IDLE", "1")
            .args(["run", "--durable", "--json"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let first = started(&["--", "sleep", "1000"]);
    let holder = home.holder_pid().expect("a holder");
    // Busy: several idle periods pass (waited for as the exit of a short
    // session beside it, twice) and it stays.
    let short = started(&["--", "sleep", "1.5"]);
    let out = home.run("-", &["attach", short["id"].as_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let short = started(&["--", "sleep", "1.5"]);
    let out = home.run("-", &["attach", short["id"].as_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(pid_alive(holder), "the holder left a running session");
    let out = home.run("-", &["kill", first["id"].as_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        support::wait_pid_exit(holder, Duration::from_secs(30)),
        "the idle holder stayed"
    );
}

/// `tether ps --holding` names the durable session holding a directory.
#[test]
fn holding_names_the_durable_session() {
    let home = Home::new();
    let guard = TagGuard::new("durable-holding");
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().to_str().unwrap();
    home.start(
        guard.tag(),
        &["--name", "watcher", "--cwd", cwd, "--", "sleep", "1000"],
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let text = loop {
        let out = home.run("-", &["ps", "--holding", cwd]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.contains("(durable \"watcher\")") || std::time::Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(text.contains("(durable \"watcher\")"), "{text}");
}
