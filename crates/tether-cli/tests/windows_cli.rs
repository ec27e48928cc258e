//! Windows: `tether run` and `tether mcp` end to end (under Wine in CI):
//! exit codes as documented, the tree dying with a killed `tether run`, and
//! an MCP `command` running through cmd.exe in a job.
#![cfg(windows)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use tether::ProcessIdentity;
use tether::sys::{self, Pinned};

fn tether_exe() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tether"));
    // A state directory of this test run's own.
    let home = std::env::temp_dir().join(format!("tether-win-cli-{}", std::process::id()));
    cmd.env("TETHER_HOME", home);
    cmd
}

/// `spawn()`, tried again (3 tries in all) under Wine when Wine failed the
/// creation on its own: `ERROR_INTERNAL_ERROR` (1359), a new process that
/// died in Wine's start-up, with nothing created (the library does the same
/// for its own creations: `wine::retry_failed_creation`).
trait SpawnRetrying {
    fn spawn_retrying(&mut self) -> std::io::Result<std::process::Child>;
}

impl SpawnRetrying for std::process::Command {
    fn spawn_retrying(&mut self) -> std::io::Result<std::process::Child> {
        let mut attempt = 1;
        loop {
            match self.spawn() {
                Err(err)
                    if attempt < 3
                        && err.raw_os_error() == Some(1359)
                        && wine_version().is_some() =>
                {
                    attempt += 1
                }
                result => return result,
            }
        }
    }
}

/// `examples/win_tree.rs` of the tether crate, built into the same target.
fn win_tree() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join(r"examples\win_tree.exe");
    assert!(
        path.is_file(),
        "{} is missing: `cargo build -p process-tether --example win_tree`",
        path.display()
    );
    path
}

fn pin(pid: u32) -> Pinned {
    let info = sys::process(pid).unwrap();
    let identity = ProcessIdentity {
        boot_id: sys::boot_id().to_owned(),
        pid,
        start_time: info.start_time,
        pidfs_inode: None,
    };
    Pinned::pin(&identity).unwrap().expect("alive")
}

fn assert_dies(p: &Pinned, what: &str) {
    sys::wait_exited(&[p], Duration::from_secs(10));
    assert!(p.has_exited(), "{what} (pid {}) survived", p.identity().pid);
}

/// Runs `cmd` to its end, with stdout captured; fails the test (after
/// killing it) if it has not ended within `bound` — a hang is a failure
/// here, never a stuck CI run.
fn output_within(mut cmd: Command, bound: Duration) -> std::process::Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_retrying()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(bound) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = Command::new("taskkill")
                .args(["/F", "/T", "/PID", &pid.to_string()])
                .status();
            panic!("{cmd:?} did not end within {bound:?}");
        }
    }
}

fn run_code(args: &[&str]) -> i32 {
    tether_exe()
        .arg("run")
        .args(args)
        .status()
        .unwrap()
        .code()
        .unwrap()
}

#[test]
fn tether_run_exit_codes_are_as_documented() {
    let tree = win_tree();
    let tree = tree.to_str().unwrap();
    assert_eq!(run_code(&["--", tree, "exit", "0"]), 0);
    assert_eq!(run_code(&["--", tree, "exit", "42"]), 42);
    // The full 32-bit code, not a byte of it.
    assert_eq!(
        run_code(&["--", tree, "exit", "3221225477"]) as u32,
        0xC000_0005
    );
    assert_eq!(
        run_code(&["--timeout", "300ms", "--", tree, "sleep", "30"]),
        124
    );
    assert_eq!(run_code(&["--", "no-such-program-here"]), 127);
    assert_eq!(run_code(&["--shell", "exit /b 4"]), 4);
    assert_eq!(
        run_code(&["--containment", "pidns", "--", tree, "exit", "0"]),
        125
    );
}

#[test]
fn tether_run_shell_is_cmd_exe() {
    let out = tether_exe()
        .args([
            "run",
            "--shell",
            "echo one \"two  three\"& echo %TETHER_SPAWN:~0,3%",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert_eq!(text, "one \"two  three\"\nv1:\n");
}

#[test]
fn killing_tether_run_kills_the_tree() {
    let mut run = tether_exe()
        .args(["run", "--"])
        .arg(win_tree())
        .args(["tree", "60"])
        .stdout(Stdio::piped())
        .spawn_retrying()
        .unwrap();
    let mut line = String::new();
    BufReader::new(run.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pids: Vec<u32> = line
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let (child, grandchild) = (pin(pids[0]), pin(pids[1]));
    run.kill().unwrap(); // TerminateProcess of tether itself
    assert_dies(&child, "child of a killed tether run");
    assert_dies(&grandchild, "grandchild of a killed tether run");
    let _ = run.wait();
}

/// `tether mcp` on pipes, driven by raw JSON-RPC lines.
struct Mcp {
    server: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
    /// Answers read while looking for another id: calls run concurrently,
    /// so answers come in any order.
    early: std::collections::HashMap<u64, serde_json::Value>,
}

/// The `initialize` request and its notification, ids 1 and none.
const INITIALIZE: [&str; 2] = [
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
];

impl Mcp {
    fn start() -> Mcp {
        let mut server = tether_exe()
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn_retrying()
            .expect("start tether mcp");
        Mcp {
            stdin: server.stdin.take(),
            stdout: BufReader::new(server.stdout.take().unwrap()),
            server,
            early: std::collections::HashMap::new(),
        }
    }

    fn send(&mut self, request: &str) {
        writeln!(self.stdin.as_mut().unwrap(), "{request}").unwrap();
    }

    /// The answer to request `id`.
    fn answer(&mut self, id: u64) -> serde_json::Value {
        loop {
            if let Some(a) = self.early.remove(&id) {
                return a;
            }
            let mut line = String::new();
            self.stdout.read_line(&mut line).expect("read answer");
            let value: serde_json::Value = serde_json::from_str(&line).expect("JSON answer");
            if let Some(got) = value["id"].as_u64() {
                self.early.insert(got, value);
            }
        }
    }

    /// EOF on stdin: the server kills every session, verifies it empty,
    /// and exits; its exit code.
    fn close(mut self) -> Option<i32> {
        drop(self.stdin.take());
        self.server.wait().unwrap().code()
    }
}

#[test]
fn tether_mcp_runs_cmd_exe_commands_in_a_job_and_leaves_nothing_on_eof() {
    let mut mcp = Mcp::start();
    let tree = win_tree().to_string_lossy().replace('\\', "\\\\");
    let requests = [
        INITIALIZE[0].to_owned(),
        INITIALIZE[1].to_owned(),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run","arguments":{"command":"echo hello & exit /b 3"}}}"#.to_owned(),
        format!(
            r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{{"name":"run","arguments":{{"argv":["{tree}","tree-exit"]}}}}}}"#
        ),
    ];
    for request in &requests {
        mcp.send(request);
    }
    assert_eq!(mcp.answer(1)["result"]["serverInfo"]["name"], "tether");
    let tools = mcp.answer(2);
    let run_tool = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "run")
        .unwrap()
        .clone();
    assert!(
        run_tool["description"]
            .as_str()
            .unwrap()
            .contains("cmd.exe"),
        "{run_tool}"
    );
    let result = mcp.answer(3);
    let body = &result["result"]["structuredContent"];
    assert_eq!(body["status"], "exited", "{result}");
    assert_eq!(body["exit_code"], 3, "{result}");
    assert_eq!(
        body["output"].as_str().unwrap().replace("\r\n", "\n"),
        "hello \n"
    );
    let result = mcp.answer(4);
    let body = &result["result"]["structuredContent"];
    assert_eq!(body["status"], "exited", "{result}");
    let pids: Vec<u32> = body["output"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(mcp.close(), Some(0));
    // The leftover of `tree-exit` stays contained while the server runs and
    // was killed before the server exited.
    for pid in pids {
        assert!(
            sys::process(pid).map_or(true, |p| p.state.has_exited()),
            "pid {pid} outlived tether mcp"
        );
    }
}

#[test]
fn tether_ps_shows_a_running_tree_and_reap_kills_proven_orphans() {
    // An uncontained run (explicit policy): when its owner dies, its tree
    // survives — orphans that `ps` must mark and `reap` must kill.
    let home = std::env::temp_dir().join(format!("tether-win-reap-{}", std::process::id()));
    let with_home = |mut c: Command| {
        c.env("TETHER_HOME", &home);
        c
    };
    let mut run = with_home(tether_exe())
        .args(["run", "--containment", "none", "--"])
        .arg(win_tree())
        .args(["tree", "60"])
        .stdout(Stdio::piped())
        .spawn_retrying()
        .unwrap();
    let mut line = String::new();
    BufReader::new(run.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pids: Vec<u32> = line
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let (child, grandchild) = (pin(pids[0]), pin(pids[1]));
    let ps = with_home(tether_exe()).arg("ps").output().unwrap();
    let listing = String::from_utf8_lossy(&ps.stdout);
    assert!(
        listing.contains(" alive ") && listing.contains(" none "),
        "{listing}"
    );
    for pid in &pids {
        assert!(
            listing.contains(&pid.to_string()),
            "ps misses {pid}: {listing}"
        );
    }
    run.kill().unwrap();
    let _ = run.wait();
    // Bounded: nothing kills an uncontained tree; 300 ms proves it stayed.
    sys::wait_exited(&[&child], Duration::from_millis(300));
    assert!(
        !child.has_exited(),
        "the uncontained child died with its owner"
    );
    let ps = with_home(tether_exe()).arg("ps").output().unwrap();
    let listing = String::from_utf8_lossy(&ps.stdout);
    assert!(listing.contains("ORPHANED"), "{listing}");
    let reap = with_home(tether_exe()).arg("reap").output().unwrap();
    assert!(reap.status.success(), "{reap:?}");
    assert_dies(&child, "orphaned child after reap");
    assert_dies(&grandchild, "orphaned grandchild after reap");
}

#[test]
fn tether_run_pty_runs_on_a_pseudoconsole_with_its_exit_codes() {
    let tree = win_tree();
    let tree = tree.to_str().unwrap();
    // stdin is not a console here (nor under CI): the pass-through copies
    // the pseudoconsole's output until its end of file, which follows the
    // job's end and the console's close.
    let bound = Duration::from_secs(60);
    let run = |args: &[&str]| {
        let mut cmd = tether_exe();
        cmd.args(["run", "--pty"]).args(args).stdin(Stdio::null());
        output_within(cmd, bound)
    };
    let code = |args: &[&str]| run(args).status.code().unwrap();
    assert_eq!(code(&["--", tree, "exit", "3"]), 3);
    assert_eq!(code(&["--shell", "exit /b 4"]), 4);
    assert_eq!(
        code(&[
            "--timeout",
            "300ms",
            "--grace",
            "100ms",
            "--",
            tree,
            "sleep",
            "30"
        ]),
        124
    );
    let out = run(&["--shell", "echo pty-out"]);
    assert!(out.status.success(), "{out:?}");
    match wine_version() {
        Some(v) => eprintln!(
            "output not checked under Wine {v}: a pseudoconsole child's std handles are never \
             connected to it, so nothing reaches the pipe"
        ),
        None => assert!(
            String::from_utf8_lossy(&out.stdout).contains("pty-out"),
            "{out:?}"
        ),
    }
}

#[test]
fn tether_mcp_runs_a_pty_session_in_a_job() {
    let mut mcp = Mcp::start();
    let tree = win_tree().to_string_lossy().replace('\\', "\\\\");
    let requests = [
        INITIALIZE[0].to_owned(),
        INITIALIZE[1].to_owned(),
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"command":"echo on-a-pty& exit /b 6","pty":true,"rows":24,"cols":80}}}"#.to_owned(),
        format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"run","arguments":{{"argv":["{tree}","tree","60"],"pty":true,"yield_s":1}}}}}}"#
        ),
    ];
    for request in &requests[..3] {
        mcp.send(request);
    }
    assert_eq!(mcp.answer(1)["result"]["serverInfo"]["name"], "tether");
    let result = mcp.answer(2);
    let body = &result["result"]["structuredContent"];
    assert_eq!(body["status"], "exited", "{result}");
    assert_eq!(body["exit_code"], 6, "{result}");
    if wine_version().is_none() {
        assert!(result.to_string().contains("on-a-pty"), "{result}");
    }
    mcp.send(&requests[3]);
    let result = mcp.answer(3);
    let body = &result["result"]["structuredContent"];
    assert_eq!(body["status"], "running", "{result}");
    // The session's processes, by their spawn tag.
    let session = body["id"].as_str().unwrap().to_owned();
    let members: Vec<Pinned> = sys::scan_tagged()
        .tagged
        .iter()
        .filter(|t| t.tag.session == session && t.tag.owner_pid == mcp.server.id())
        .map(|t| pin(t.info.pid))
        .collect();
    assert!(
        !members.is_empty(),
        "no process carries session {session}'s tag"
    );
    assert_eq!(mcp.close(), Some(0));
    for p in &members {
        assert_dies(p, "a PTY session's process after tether mcp exited");
    }
}

/// `Some(version)` under Wine (its ntdll exports `wine_get_version`).
fn wine_version() -> Option<String> {
    tether::windows::wine_version()
}

#[test]
fn doctor_reports_a_session_job_and_a_pseudoconsole() {
    let mut cmd = tether_exe();
    cmd.args(["doctor", "--json"]).stdin(Stdio::null());
    // Bound: one session of `exit 0` and a pseudoconsole opened and closed
    // take well under a second even under Wine.
    let out = output_within(cmd, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(report["can_run"], true, "{report}");
    let status = |topic: &str| {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["topic"] == topic)
            .unwrap_or_else(|| panic!("no {topic} in {report}"))["status"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(status("job"), "available");
    assert_eq!(status("conpty"), "available");
    assert_eq!(status("system"), "info");
    assert_eq!(status("state_dir"), "available");
    assert!(["available", "info"].contains(&status("nested_jobs").as_str()));

    // Each limit line says what `tether run` with the same limits gets:
    // `job` on Windows, `none` with the same reason under Wine (Wine 8
    // takes job limits without enforcing them).
    let run = tether_exe()
        .args([
            "run", "--json", "--memory", "64M", "--pids", "16", "--cpu", "0.5",
        ])
        .args(["--shell", "exit /b 0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let run: serde_json::Value = serde_json::from_slice(&run.stdout).expect("run --json");
    for (topic, key) in [
        ("memory_limit", "memory"),
        ("pids_limit", "pids"),
        ("cpu_limit", "cpu"),
    ] {
        let line = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["topic"] == topic)
            .unwrap_or_else(|| panic!("no {topic} in {report}"));
        let applied = &run["limits"][key];
        assert_eq!(line["mechanism"], applied["enforced"], "{line} vs {run}");
        match wine_version() {
            Some(_) => {
                assert_eq!(line["status"], "unavailable", "{line}");
                assert_eq!(line["mechanism"], "none", "{line}");
                assert_eq!(line["found"], applied["reason"], "{line} vs {run}");
            }
            None => {
                assert_eq!(line["status"], "available", "{line}");
                assert_eq!(line["mechanism"], "job", "{line}");
            }
        }
    }
}
