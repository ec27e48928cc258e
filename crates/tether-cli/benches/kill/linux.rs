//! See the bench target's own docs (`../kill.rs`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tether_testkit::{TAG_VAR, tagged_pids, unique_tag, wait_all_dead, wait_for_count};

use crate::support::owner::start_owner;
use crate::support::{Build, builds, listing, ms, percentile};

const ROUNDS: usize = 15;

/// The command's background child stays in its process group.
const GROUP_CHILD: &str = "sleep 1000 & echo ready; wait";
/// The command's background child leads a session of its own.
const SETSID_CHILD: &str = "setsid sleep 1000 & echo ready; wait";

/// `SIGTERM` to a `tether run` of `script` once the tree is built, until
/// `tether run` has exited (and with it the tree).
fn term_to_run(build: &Build, script: &str) -> Duration {
    let tag = unique_tag("bench-kill-run");
    let home = tempfile::tempdir().unwrap();
    let mut owner = start_owner(
        Command::new(&build.path).args(["run", "--grace", "2s", "--", "/bin/sh", "-c", script]),
        &tag,
        home.path(),
    );
    // tether run, the shell and its sleep.
    assert_eq!(wait_for_count(&tag, 3, Duration::from_secs(30)), 3);
    wait_for_sleeps(&tag, 1);
    let start = Instant::now();
    // SAFETY: kill(2) of our own unreaped child.
    unsafe { libc::kill(owner.id() as libc::pid_t, libc::SIGTERM) };
    let status = owner.wait().unwrap();
    let took = start.elapsed();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status}");
    let rest = wait_all_dead(&tag, Duration::from_secs(10));
    assert!(rest.is_empty(), "survivors: {rest:?}");
    took
}

/// Waits until `n` tagged processes have exec'd `sleep` (so a `nohup`
/// child already ignores `SIGHUP`).
fn wait_for_sleeps(tag: &str, n: usize) {
    wait_for_program(tag, "sleep", n);
}

/// Waits until `n` tagged processes have exec'd `program`.
fn wait_for_program(tag: &str, program: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let comm = format!("{program}\n");
    loop {
        let sleeps = tagged_pids(tag)
            .into_iter()
            .filter(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c == comm))
            .count();
        if sleeps >= n {
            return;
        }
        assert!(Instant::now() < deadline, "the fixture was never built");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A `tether mcp` server driven over stdio, one request at a time.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    tag: String,
    next_id: u64,
    _home: tempfile::TempDir,
}

impl Server {
    fn start(build: &Build) -> Server {
        let tag = unique_tag("bench-kill-mcp");
        let home = tempfile::tempdir().unwrap();
        let mut child = Command::new(&build.path)
            .arg("mcp")
            .env(TAG_VAR, &tag)
            .env("TETHER_HOME", home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut server = Server {
            child,
            stdin,
            stdout,
            tag,
            next_id: 1,
            _home: home,
        };
        server.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}),
        );
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "server gone");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        answer["result"]["structuredContent"].clone()
    }

    /// Runs `script` on a PTY, waits until its tree is built (`sleeps`
    /// processes running `sleep`), then times `kill` (grace 2 s).
    fn kill_pty(&mut self, script: &str, sleeps: usize) -> Duration {
        self.kill_session(script, true, "sleep", sleeps)
    }

    /// Runs `script` (on a PTY if `pty`, else with its stdin kept open),
    /// waits until `n` of its processes run `program`, then times `kill`
    /// (grace 2 s).
    fn kill_session(&mut self, script: &str, pty: bool, program: &str, n: usize) -> Duration {
        let run = self.call(
            "run",
            json!({"command": script, "pty": pty, "keep_stdin_open": !pty,
                   "until": "ready", "yield_s": 30}),
        );
        let id = run["id"].as_str().expect("a session id").to_owned();
        wait_for_program(&self.tag, program, n);
        let start = Instant::now();
        let killed = self.call("kill", json!({"id": id, "grace_s": 2}));
        let took = start.elapsed();
        assert_eq!(killed["status"], "killed", "{killed}");
        let alive: Vec<u32> = tagged_pids(&self.tag)
            .into_iter()
            .filter(|&p| p != self.child.id())
            .collect();
        assert!(alive.is_empty(), "survivors: {alive:?}");
        took
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = wait_all_dead(&self.tag, Duration::from_secs(10));
    }
}

/// Every member dies of `SIGHUP`.
const PTY_ALL_HUP: &str = "sleep 1000 & echo ready; exec sleep 1000";
/// One member ignores `SIGHUP` (and dies of `SIGTERM`).
const PTY_NOHUP: &str = "nohup sleep 1000 >/dev/null 2>&1 & echo ready; exec sleep 1000";

fn table(title: &str, rows: &[(String, Vec<Duration>)]) {
    println!("\n## {title} ({ROUNDS} rounds, interleaved)\n");
    println!("| case | p50 ms | p90 ms | max ms |");
    println!("|---|---|---|---|");
    for (name, samples) in rows {
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} |",
            ms(percentile(samples, 0.5)),
            ms(percentile(samples, 0.9)),
            ms(percentile(samples, 1.0))
        );
    }
}

pub fn main() {
    if listing() {
        return;
    }
    let builds = builds();

    let cases = [
        ("background child in the command's group", GROUP_CHILD),
        (
            "background child in its own session (`setsid`)",
            SETSID_CHILD,
        ),
    ];
    let mut rows: Vec<(String, Vec<Duration>)> = Vec::new();
    for build in &builds {
        for (name, _) in cases {
            rows.push((format!("{name}, {}", build.name), Vec::new()));
        }
    }
    for _ in 0..ROUNDS {
        let mut row = 0;
        for build in &builds {
            for (_, script) in cases {
                rows[row].1.push(term_to_run(build, script));
                row += 1;
            }
        }
    }
    table(
        "`SIGTERM` to `tether run --grace 2s` until it exited",
        &rows,
    );

    let cases = [
        ("every member dies of SIGHUP", PTY_ALL_HUP),
        ("one member ignores SIGHUP (`nohup`)", PTY_NOHUP),
    ];
    let mut servers: Vec<Server> = builds.iter().map(Server::start).collect();
    let mut rows: Vec<(String, Vec<Duration>)> = Vec::new();
    for build in &builds {
        for (name, _) in cases {
            rows.push((format!("{name}, {}", build.name), Vec::new()));
        }
    }
    for _ in 0..ROUNDS {
        let mut row = 0;
        for server in &mut servers {
            for (_, script) in cases {
                rows[row].1.push(server.kill_pty(script, 2));
                row += 1;
            }
        }
    }
    table(
        "`tether mcp`: `kill` of a PTY session (grace 2 s), send to answer",
        &rows,
    );

    // An interactive shell on pipes (an agent's terminal tool): it ignores
    // SIGTERM, the session's only gentle signal (issue 34 item 11).
    let mut rows: Vec<(String, Vec<Duration>)> = builds
        .iter()
        .map(|build| (format!("`bash -i`, {}", build.name), Vec::new()))
        .collect();
    for _ in 0..ROUNDS {
        for (row, server) in servers.iter_mut().enumerate() {
            rows[row]
                .1
                .push(server.kill_session(INTERACTIVE_SHELL, false, "bash", 1));
        }
    }
    table(
        "`tether mcp`: `kill` of an interactive shell that ignores SIGTERM (grace 2 s), send to answer",
        &rows,
    );
}

/// An interactive `bash` (it ignores `SIGTERM`), reading the session's
/// stdin (kept open: at EOF it would exit by itself).
const INTERACTIVE_SHELL: &str = "echo ready; exec bash -i";
