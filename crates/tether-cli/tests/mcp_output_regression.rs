//! Regression tests of `tether mcp`, one per bug, named by what went wrong,
//! driving the real server over stdio the way an MCP client does. Each
//! names the issue item it came from and failed on the code before its
//! fix (`TETHER_MCP_BIN=<old tether-mcp> cargo test -p process-tether-cli
//! --test mcp_output_regression` shows it). Most of the server's client-level tests
//! are the Python and TypeScript suites; these need root or a spill
//! directory of their own.

// Real Linux process trees and file systems (tmpfs): the suite runs on
// Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use serde_json::{Value, json};
use tether_testkit::{TAG_VAR, TagGuard, require_root, wait_all_dead};

/// Bound for an answer that comes long before it; reaching it is a failure.
const BOUND: Duration = Duration::from_secs(120);

/// The session's in-memory ring (the library's default): bytes older than
/// the last MiB leave memory.
const RING: u64 = 1 << 20;

/// `tether mcp` on pipes.
struct Server {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
}

impl Server {
    /// Starts the server with `env` set and completes the handshake.
    fn start(tag: &str, env: &[(&str, &Path)]) -> Server {
        // `TETHER_MCP_BIN`: another server program (a build from before a
        // fix); else this build's `tether mcp`.
        let mut cmd = match std::env::var_os("TETHER_MCP_BIN") {
            Some(program) => Command::new(program),
            None => {
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_tether"));
                cmd.arg("mcp");
                cmd
            }
        };
        cmd.env("TETHER_HOME", support::home())
            .env(TAG_VAR, tag)
            .env_remove(tether::SPAWN_TAG_VAR)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        for (name, value) in env {
            cmd.env(name, value);
        }
        let mut child = cmd.spawn().expect("start tether mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        // A thread reads the answers, so a server that stops answering
        // fails the test at BOUND instead of hanging it.
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let mut server = Server {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        server.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "regression", "version": "1"}}),
        );
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = match self.lines.recv_timeout(BOUND) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => panic!("no answer to {method} in {BOUND:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("the server closed stdout"),
            };
            let answer: Value = serde_json::from_str(&line).unwrap();
            if answer["id"] == id {
                return answer;
            }
        }
    }

    /// A tool's structured result, and whether it is an error.
    fn tool(&mut self, name: &str, arguments: Value) -> (Value, bool) {
        let answer = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        let result = &answer["result"];
        assert!(result.is_object(), "{answer}");
        (
            result["structuredContent"].clone(),
            result["isError"] == true,
        )
    }

    fn ok(&mut self, name: &str, arguments: Value) -> Value {
        let (body, error) = self.tool(name, arguments);
        assert!(!error, "{body}");
        body
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `seq 1 n` as bytes.
fn seq(n: u64) -> Vec<u8> {
    (1..=n)
        .flat_map(|i| format!("{i}\n").into_bytes())
        .collect()
}

fn newlines(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

/// Line number of the line holding byte `offset`.
fn line_at(bytes: &[u8], offset: u64) -> u64 {
    newlines(&bytes[..offset as usize]) + 1
}

/// A 1 MiB tmpfs, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path) -> Tmpfs {
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                "size=1m,mode=0700",
                "tether-spill-test",
            ])
            .arg(dir)
            .status()
            .expect("run mount");
        assert!(status.success(), "mount tmpfs on {}", dir.display());
        Tmpfs(dir.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Issue 16, items 5 and 4: with the spill directory on a full file
/// system (a 1 MiB tmpfs), a 15 MB output's result said "14872519 bytes
/// omitted here; to see them call read", `read` blamed "the spill cap"
/// although 15 MB were written, and grep reported `dropped: 0`, missed the
/// lines and numbered the rest wrong. Now every place that mentions the
/// lost bytes gives the write error and their offsets, grep counts lines
/// across them, and the server keeps serving.
#[test]
fn a_full_spill_disk_is_reported_wherever_the_lost_bytes_are() {
    if !require_root("mounting a 1 MiB tmpfs as the spill directory") {
        return;
    }
    let guard = TagGuard::new("mcp-spill-full");
    let dir = tempfile::tempdir().unwrap();
    let _tmpfs = Tmpfs::mount(dir.path());
    let mut server = Server::start(guard.tag(), &[("XDG_RUNTIME_DIR", dir.path())]);
    let n = 2_000_000;
    let text = seq(n);
    let total = text.len() as u64;

    let run = server.ok(
        "run",
        json!({"command": format!("seq 1 {n}"), "yield_s": 50}),
    );
    assert_eq!(run["status"], "exited", "{run}");
    let gap = &run["gap"];
    let (start, end) = (gap["start"].as_u64().unwrap(), gap["end"].as_u64().unwrap());
    // The spill file got at most the tmpfs's MiB; memory holds the last MiB.
    assert!(start <= RING && end == total - RING, "{gap}");
    assert!(
        gap["cause"]
            .as_str()
            .unwrap()
            .contains("the spill file could not be written")
            && gap["cause"]
                .as_str()
                .unwrap()
                .contains("No space left on device"),
        "{gap}"
    );
    assert_eq!(gap["bytes"], end - start);
    assert_eq!(gap["lines"], newlines(&text[start as usize..end as usize]));
    assert_eq!(run["dropped_bytes"], end - start);
    let output = run["output"].as_str().unwrap();
    let marker = output.lines().find(|l| l.starts_with("[…")).unwrap();
    assert!(
        marker.contains(&format!(
            "{} of them are gone (offsets {start}..{end}: the spill file could not be written",
            end - start
        )),
        "{marker}"
    );

    // `read` where the bytes are gone says so, with the error.
    let id = run["id"].as_str().unwrap().to_owned();
    let page = server.ok("read", json!({"id": id, "offset": start + 10}));
    assert_eq!(
        (page["offset"].as_u64(), page["dropped"].as_u64()),
        (Some(end), Some(end - start - 10))
    );
    let note = page["note"].as_str().unwrap();
    assert!(
        note.contains(&format!("offsets {}..{end}", start + 10))
            && note.contains("No space left on device")
            && !note.contains("spill cap"),
        "{note}"
    );
    assert_eq!(page["gap"]["start"], start + 10);

    // grep numbers lines across the gap exactly and says what it skipped.
    let last = server.ok("read", json!({"id": id, "grep": "^1999999$"}));
    assert_eq!(last["match_count"], 1, "{last}");
    assert_eq!(last["matches"][0]["line"], 1_999_999, "{last}");
    assert_eq!(last["dropped"], end - start);
    assert_eq!(
        (last["gap"]["start"].as_u64(), last["gap"]["end"].as_u64()),
        (Some(start), Some(end))
    );
    assert!(
        last["note"]
            .as_str()
            .unwrap()
            .contains("No space left on device"),
        "{last}"
    );
    // A line that was printed but is gone: not found, and the gap is named.
    let gone = line_at(&text, (start + end) / 2);
    let lost = server.ok("read", json!({"id": id, "grep": format!("^{gone}$")}));
    assert_eq!(lost["match_count"], 0);
    assert!(
        lost["note"]
            .as_str()
            .unwrap()
            .contains("they were not searched"),
        "{lost}"
    );

    // The server keeps serving.
    assert_eq!(
        server.ok("run", json!({"command": "echo ok"}))["output"],
        "ok\n"
    );
    drop(server);
    assert_eq!(
        wait_all_dead(guard.tag(), Duration::from_secs(30)),
        Vec::<u32>::new()
    );
}

/// Issue 16, item 4: bytes that are gone before the first byte still held
/// (here no spill file could be made at all: the directory is writable by
/// others without the sticky bit) made grep give every match `line: null`;
/// the buffer counts their newlines now, so the numbers are exact. Needs
/// no root.
#[test]
fn grep_counts_lines_across_output_that_was_never_spilled() {
    use std::os::unix::fs::PermissionsExt as _;
    let guard = TagGuard::new("mcp-spill-refused");
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut server = Server::start(guard.tag(), &[("XDG_RUNTIME_DIR", &shared)]);
    let n = 400_000;
    let text = seq(n);
    let total = text.len() as u64;
    let run = server.ok(
        "run",
        json!({"command": format!("seq 1 {n}"), "yield_s": 50}),
    );
    assert_eq!(run["status"], "exited", "{run}");
    let id = run["id"].as_str().unwrap().to_owned();
    let found = server.ok("read", json!({"id": id, "grep": "^(399999|1)$"}));
    // Line 1 is gone; 399999 keeps its true number.
    assert_eq!(found["match_count"], 1, "{found}");
    assert_eq!(found["matches"][0]["line"], 399_999, "{found}");
    let gap = &found["gap"];
    assert_eq!(
        (gap["start"].as_u64(), gap["end"].as_u64()),
        (Some(0), Some(total - RING))
    );
    assert_eq!(gap["lines"], newlines(&text[..(total - RING) as usize]));
    assert!(
        gap["cause"]
            .as_str()
            .unwrap()
            .contains("creating spill file in"),
        "{gap}"
    );
    drop(server);
    assert_eq!(
        wait_all_dead(guard.tag(), Duration::from_secs(30)),
        Vec::<u32>::new()
    );
}
