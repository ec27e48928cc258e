//! Regression tests of `tether mcp`, one per bug, named by what went wrong,
//! driving the real binary over stdio the way an MCP client does. Each
//! names the issue item it came from and failed on the code before its fix
//! (`TETHER_TEST_BIN=<old tether> cargo test -p process-tether-cli --test
//! mcp_regression` shows it).

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod support;

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tether::ProcessIdentity;
use tether_testkit::{TAG_VAR, TagGuard, tagged_pids, wait_all_dead, wait_for_count};

/// A `tether mcp` server and the client end of its stdio.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    pending: Vec<u8>,
    next_id: u64,
}

impl Server {
    /// Starts `tether mcp` (prefixed by `wrapper`, e.g. `timeout -s KILL
    /// 2`) and completes the handshake. With `new_session` it leads a
    /// session and process group of its own, as the official Python SDK
    /// starts servers (`start_new_session=True`).
    fn start(tag: &str, wrapper: &[&str], new_session: bool) -> Server {
        Server::start_with(tag, wrapper, new_session, &[])
    }

    /// [`start`](Self::start) with `tether mcp`'s options `options`.
    fn start_with(tag: &str, wrapper: &[&str], new_session: bool, options: &[&str]) -> Server {
        let cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = std::process::Command::new(program);
                c.args(args)
                    .arg(support::tether_path())
                    .env("TETHER_HOME", support::home());
                c
            }
            None => support::tether(),
        };
        Server::connect(cmd, tag, new_session, options)
    }

    /// Starts the `tether` at `program` as `tether mcp` (in this test's
    /// tether home) and completes the handshake.
    fn start_program(tag: &str, program: &std::path::Path) -> Server {
        let mut cmd = std::process::Command::new(program);
        cmd.env("TETHER_HOME", support::home());
        Server::connect(cmd, tag, false, &[])
    }

    fn connect(
        mut cmd: std::process::Command,
        tag: &str,
        new_session: bool,
        options: &[&str],
    ) -> Server {
        cmd.arg("mcp")
            .args(options)
            .env(TAG_VAR, tag)
            .env_remove(tether::SPAWN_TAG_VAR)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if new_session {
            // SAFETY: setsid(2) is async-signal-safe; nothing else runs
            // between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    libc::setsid();
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().expect("start tether mcp");
        let stdin = child.stdin.take();
        let mut server = Server {
            child,
            stdin,
            pending: Vec::new(),
            next_id: 1,
        };
        let init = server.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "regression", "version": "1"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "tether", "{init}");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write to the server");
    }

    /// Sends a request and returns its response (bounded: 30 s).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = support::read_line_bounded(
                self.child.stdout.as_mut().unwrap(),
                &mut self.pending,
                Duration::from_secs(30),
            )
            .unwrap_or_else(|| panic!("no answer to {method}"));
            let message: Value = serde_json::from_str(&line).expect("JSON from the server");
            if message["id"] == id {
                return message;
            }
        }
    }

    /// Calls a tool; returns its structured result.
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        answer["result"]["structuredContent"].clone()
    }

    /// Closes stdin (what every client does first to stop a server) and
    /// waits for the exit, bounded.
    fn close(&mut self, bound: Duration) -> Option<std::process::ExitStatus> {
        drop(self.stdin.take());
        if support::wait_pid_exit(self.pid(), bound) {
            self.child.wait().ok()
        } else {
            None
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tree whose every process ignores `SIGTERM`, with a `setsid` escape;
/// the main process exits at once, so `run` returns with the descendants
/// listed.
const TERM_IGNORING_TREE: &str =
    "trap '' TERM; setsid sleep 900 & sleep 900 & sleep 900 & echo ready";

/// Starts [`TERM_IGNORING_TREE`] through `run` and waits until its three
/// sleeps carry the tag (plus the server, or its wrapper). Returns how many
/// tagged processes there are.
fn start_tree(server: &mut Server, tag: &str, tagged_wrappers: usize) -> usize {
    let result = server.call("run", json!({"command": TERM_IGNORING_TREE}));
    assert_eq!(result["output"], "ready\n", "{result}");
    let want = 3 + tagged_wrappers;
    let have = wait_for_count(tag, want, Duration::from_secs(20));
    assert!(have >= want, "fixture built {have} tagged processes");
    have
}

fn survivors_after(what: &str, tag: &str, before: usize) -> Vec<u32> {
    // Bounded far beyond the ~10 ms a keeper needs plus the server's
    // 500 ms grace.
    let survivors = wait_all_dead(tag, Duration::from_secs(15));
    eprintln!(
        "{what}: {before} tagged processes before, {} survived",
        survivors.len()
    );
    survivors
}

// issue 8 item 1: an MCP client stopping `tether mcp` with SIGTERM then SIGKILL to the server's process group (the official Python SDK's stop path, and any framework's killpg) killed the keepers with the server: 27 of 28 processes survived per trial.
#[test]
fn term_then_kill_to_the_servers_process_group_leaks_nothing() {
    let guard = TagGuard::new("mcp-regression-killpg");
    let mut server = Server::start(guard.tag(), &[], true);
    let before = start_tree(&mut server, guard.tag(), 1);
    let group = server.pid() as i32;
    // The SDK's escalation, without its wait: SIGKILL while the keepers
    // (if they got the SIGTERM) are still inside their grace.
    // SAFETY: killpg(2) of the group our unreaped child leads.
    unsafe {
        assert_eq!(libc::killpg(group, libc::SIGTERM), 0);
        assert_eq!(libc::killpg(group, libc::SIGKILL), 0);
    }
    let _ = server.child.wait();
    let survivors = survivors_after("killpg TERM+KILL", guard.tag(), before);
    assert!(survivors.is_empty(), "survived: {survivors:?}");
}

// issue 8 item 1: `timeout -s KILL` signals its process group — the server and (before the fix) every keeper — and the trees survived.
#[test]
fn timeout_s_kill_of_tether_mcp_leaks_nothing() {
    let guard = TagGuard::new("mcp-regression-timeout");
    // Long enough for a debug build to start and run the tree on a
    // loaded machine; the test checks it did not fire early.
    let mut server = Server::start(guard.tag(), &["timeout", "-s", "KILL", "4"], false);
    let before = start_tree(&mut server, guard.tag(), 2);
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the machine is too slow: timeout fired before the tree was built"
    );
    let status = server.child.wait().unwrap();
    eprintln!("timeout -s KILL: {status}");
    let survivors = survivors_after("timeout -s KILL", guard.tag(), before);
    assert!(survivors.is_empty(), "survived: {survivors:?}");
}

/// The session's entry in `list`.
fn listed(server: &mut Server, id: &str) -> Value {
    let list = server.call("list", json!({}));
    list["sessions"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["id"] == id).cloned())
        .unwrap_or_else(|| panic!("{id} not listed: {list}"))
}

// issue 8 item 5: after its keeper was SIGKILLed a session still said `running`, `kill` answered `already_exited: true` with nothing in `descendants_alive` while an `env -i` child lived on, and on EOF the server exited leaving that child alive.
#[test]
fn a_lost_keeper_is_reported_lost_and_leaves_nothing_alive() {
    let guard = TagGuard::new("mcp-regression-lost-keeper");
    let mut server = Server::start(guard.tag(), &[], false);
    let script =
        "env -i /bin/sleep 900 & echo \"child $!\"; setsid sleep 900 & echo ready; exec sleep 900";
    // Returns after 1 s with the session running.
    let result = server.call("run", json!({"command": script, "yield_s": 1}));
    assert_eq!(result["status"], "running", "{result}");
    let id = result["id"].as_str().expect("session id").to_owned();
    let untagged: u32 = result["output"]
        .as_str()
        .and_then(|o| o.lines().next()?.strip_prefix("child ")?.parse().ok())
        .unwrap_or_else(|| panic!("no child pid: {result}"));
    let untagged = ProcessIdentity::of_pid(untagged).expect("the env -i child lives");
    // The server, the main process and the setsid sleep (the env -i child
    // has no test tag).
    assert!(wait_for_count(guard.tag(), 3, Duration::from_secs(20)) >= 3);

    // Its parent is the main process; the main process's, the keeper.
    let main = tether::sys::process(untagged.pid).unwrap().ppid;
    let keeper = tether::sys::process(main).unwrap().ppid;
    assert!(
        tether::sys::command_line(keeper)
            .iter()
            .any(|a| a == "__tether-keeper"),
        "{keeper} is the session's keeper"
    );
    let keeper = ProcessIdentity::of_pid(keeper).unwrap();
    let pin = tether::sys::Pinned::pin(&keeper).unwrap().expect("keeper");
    assert!(pin.kill().unwrap());
    // The server notices the loss on its own; nothing tells the client.
    // Poll `list`, bounded.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut status = listed(&mut server, &id)["status"].clone();
    while status == "running" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        status = listed(&mut server, &id)["status"].clone();
    }
    let untagged_alive = untagged.is_alive();
    let tagged_alive: Vec<u32> = tagged_pids(guard.tag())
        .into_iter()
        .filter(|&p| p != server.pid())
        .collect();
    let killed = server.call("kill", json!({"id": id}));
    eprintln!(
        "keeper SIGKILL: list says {status}; env -i child alive: {untagged_alive}; \
         tagged alive: {}; kill answered {killed}",
        tagged_alive.len()
    );
    let exit = server.close(Duration::from_secs(15));
    let untagged_after_eof = untagged.is_alive();
    if untagged_after_eof && let Ok(Some(pin)) = tether::sys::Pinned::pin(&untagged) {
        let _ = pin.kill(); // no tag: the guard cannot clean it up
    }
    assert_eq!(status, "lost", "a session whose keeper died is lost");
    assert!(!untagged_alive, "the env -i child survived its keeper");
    assert!(
        tagged_alive.is_empty(),
        "tagged survivors: {tagged_alive:?}"
    );
    assert_eq!(killed["status"], "lost", "{killed}");
    assert_eq!(killed["descendants_alive"], json!([]), "{killed}");
    // The env -i sleep and the setsid sleep: descendants, the main
    // process not counted (as the field says everywhere).
    assert_eq!(killed["descendants_killed"], 2, "an honest count: {killed}");
    assert_eq!(exit.and_then(|s| s.code()), Some(0), "exit on EOF");
    assert!(!untagged_after_eof, "alive after the server's exit");
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

/// A line of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} for {pid}"))
}

// issue 16 item 2: a PTY program printing terminal queries in a loop and never reading its input took `tether mcp` from ~22 MB to 250–285 MB: every batch of answers was a task of its own, blocked writing to the program's input, outside the stdin queue's bound.
#[test]
fn unread_answers_to_terminal_queries_do_not_grow_the_server() {
    let guard = TagGuard::new("mcp-regression-answers");
    let mut server = Server::start(guard.tag(), &[], false);
    let before = status_kib(server.pid(), "VmRSS");
    // 100 MB of cursor-position, device-attribute, status and size queries
    // from a program in raw mode (so its input buffer fills instead of
    // being discarded as an overlong line) that never reads an answer.
    let script = "stty raw -echo; q=$(printf '\\033[6n\\033[c\\033[5n\\033[18t'); \
                  yes \"$q\" | head -c 100000000; echo; echo done";
    let run = server.call("run", json!({"command": script, "pty": true, "yield_s": 1}));
    let id = run["id"].as_str().expect("a session id").to_owned();
    // Bounded far beyond the few seconds 100 MB through a PTY takes here
    // (a debug build answers every query): a hang fails, not passes.
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut waited = run;
    while waited["status"] == "running" && Instant::now() < deadline {
        waited = server.call("wait", json!({"id": id, "timeout_s": 20}));
    }
    let peak = status_kib(server.pid(), "VmHWM");
    let listed = listed(&mut server, &id);
    eprintln!(
        "server RSS {before} KiB before, peak {peak} KiB; session {}, {} answers dropped",
        waited["status"], listed["terminal_answers_dropped"]
    );
    assert_eq!(waited["status"], "exited", "{waited}");
    // The session's own memory (a 1 MiB ring, the screen, the runtime's
    // buffers) is a few MB; the answers the program never read are at
    // most 4 KiB. The old server held every batch of them: its peak grew
    // by >100 MB here.
    let growth_mib = peak.saturating_sub(before) / 1024;
    assert!(
        growth_mib < 48,
        "the server grew by {growth_mib} MiB ({before} → {peak} KiB)"
    );
}

// issue 34 item 13: the "`id` is required" error of read, wait, kill, write and screen showed the tables' unrendered tool markers (`§run`, `§list`), with or without `--tool-prefix`.
#[test]
fn a_missing_id_error_names_the_tools_as_the_client_calls_them() {
    for prefix in ["", "tether_"] {
        let guard = TagGuard::new("mcp-regression-missing-id");
        let options: &[&str] = if prefix.is_empty() {
            &[]
        } else {
            &["--tool-prefix", prefix]
        };
        let mut server = Server::start_with(guard.tag(), &[], false, options);
        for tool in ["read", "wait", "kill", "write", "screen"] {
            let name = format!("{prefix}{tool}");
            let answer = server.request("tools/call", json!({"name": name, "arguments": {}}));
            let result = &answer["result"];
            assert_eq!(result["isError"], true, "{answer}");
            let text = result["content"][0]["text"].as_str().unwrap_or_default();
            let error = result["structuredContent"]["error"]
                .as_str()
                .unwrap_or_default();
            for message in [text, error] {
                assert!(
                    message.starts_with(&format!("{name}: `id` is required: ")),
                    "{answer}"
                );
                assert!(!message.contains('§'), "an unrendered marker: {message}");
                assert!(
                    message.contains(&format!("returned by `{prefix}run`"))
                        && message.contains(&format!("see `{prefix}list`")),
                    "{message}"
                );
            }
        }
        assert_eq!(
            server.close(Duration::from_secs(20)).and_then(|s| s.code()),
            Some(0)
        );
        assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
    }
}

// A `tether mcp` whose file was replaced while it ran (an upgrade renamed a new build over it, or removed it) failed every later `run` with `failed_start: "tether keeper failed: No such file or directory"`: it is its own keeper, and started the keeper from the path it was found at. Found by the documentation review of issue 39.
#[test]
fn a_server_whose_file_was_replaced_still_starts_commands() {
    use std::os::unix::fs::PermissionsExt;
    let guard = TagGuard::new("mcp-regression-replaced");
    let dir = tempfile::tempdir().expect("a directory for the copy");
    // A copy with no `tether-keeper` beside it: the server is its own
    // keeper, as an installed `tether` is.
    let program = dir.path().join("tether");
    std::fs::copy(support::tether_path(), &program).expect("copy tether");
    let mut server = Server::start_program(guard.tag(), &program);
    let first = server.call("run", json!({"command": "echo before"}));
    assert_eq!(first["output"], "before\n", "{first}");
    // What an upgrade leaves at the path: another program (here one that
    // fails as any keeper would of a build that refuses this one).
    std::fs::remove_file(&program).expect("remove the copy");
    std::fs::write(&program, "#!/bin/sh\nexit 125\n").expect("write the stand-in");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
        .expect("make it executable");
    let second = server.call("run", json!({"command": "echo after"}));
    assert_eq!(second["output"], "after\n", "{second}");
    assert_eq!(
        server.close(Duration::from_secs(20)).and_then(|s| s.code()),
        Some(0)
    );
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

// issue 34 item 7: a command that signals its parent (`kill -USR1 $PPID`)
// killed its keeper: the session was lost with its output. Its keeper now
// passes the signal on to the server, which must drop it — by default a
// SIGUSR1 would end the server with every session it holds. The command
// finishes with its output; the server serves on, and still exits 0 on
// EOF. The command goes on once the server's keeper has taken each signal
// (it left the keeper's pending set, /proc/PID/status ShdPnd): a keeper or
// server that dies of one is dying by then.
#[test]
fn a_command_that_signals_its_parent_ends_neither_its_session_nor_the_server() {
    let guard = TagGuard::new("mcp-regression-parent-signal");
    let mut server = Server::start(guard.tag(), &[], false);
    let script = format!(
        "{}kill -USR1 $PPID; kill -USR2 $PPID; kill -ALRM $PPID; kill -34 $PPID; \
         for n in {} {} {} 34; do consumed $n; done; echo child-finished",
        CONSUMED,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM
    );
    let result = server.call("run", json!({"command": script, "yield_s": 30}));
    assert_eq!(result["status"], "exited", "{result}");
    assert_eq!(result["exit_code"], 0, "{result}");
    assert_eq!(result["output"], "child-finished\n", "{result}");
    let again = server.call(
        "run",
        json!({"command": "echo still-serving", "yield_s": 30}),
    );
    assert_eq!(again["output"], "still-serving\n", "{again}");
    let exit = server.close(Duration::from_secs(15));
    assert_eq!(exit.and_then(|s| s.code()), Some(0), "exit on EOF");
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
}

/// `consumed N`, for `sh -c`: returns once the parent has taken signal N
/// off its pending set (delivered: acted on, or read), or is gone; bounded
/// at 1,000 polls (~10 s here).
const CONSUMED: &str = "consumed() { i=0; while [ $i -lt 1000 ]; do p=$(sed -n 's/^ShdPnd:[[:space:]]*//p' /proc/$PPID/status 2>/dev/null); [ -n \"$p\" ] || return 0; [ $(( (0x$p >> ($1 - 1)) & 1 )) = 0 ] && return 0; i=$((i + 1)); sleep 0.005; done; }; ";
