//! `tether run` as a user sees it: exit codes (as `timeout(1)`), errors,
//! `--json`, timeouts and forwarded signals.

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod support;

use std::process::Stdio;
use std::time::Duration;

use support::{Owner, tether};
use tether_testkit::{TAG_VAR, TagGuard, Tree, wait_all_dead, wait_for_count};

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = tether()
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run tether");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn exit_code_propagates() {
    assert_eq!(run(&["--", "sh", "-c", "exit 3"]).0, Some(3));
    assert_eq!(run(&["--", "true"]).0, Some(0));
    assert_eq!(run(&["--shell", "exit 42"]).0, Some(42));
}

#[test]
fn death_by_signal_is_128_plus_n() {
    assert_eq!(run(&["--", "sh", "-c", "kill -KILL $$"]).0, Some(137));
    assert_eq!(run(&["--", "sh", "-c", "kill -TERM $$"]).0, Some(143));
}

#[test]
fn unknown_program_is_127_and_names_the_path_searched() {
    let (code, _, err) = run(&["--", "definitely-not-a-program-xyz"]);
    assert_eq!(code, Some(127));
    assert!(
        err.contains("program not found") && err.contains("PATH="),
        "{err}"
    );
}

#[test]
fn not_executable_is_126() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("script");
    std::fs::write(&file, "#!/bin/sh\n").unwrap();
    let (code, _, err) = run(&["--", file.to_str().unwrap()]);
    assert_eq!(code, Some(126), "{err}");
    assert!(err.contains("not executable"), "{err}");
}

#[test]
fn bad_cwd_is_125_with_a_clear_message() {
    let (code, _, err) = run(&["--cwd", "/nonexistent/dir", "--", "true"]);
    assert_eq!(code, Some(125));
    assert!(
        err.contains("/nonexistent/dir") && err.contains("does not exist"),
        "{err}"
    );
    let (code, _, err) = run(&["--cwd", "/etc/passwd", "--", "true"]);
    assert_eq!(code, Some(125));
    assert!(err.contains("not a directory"), "{err}");
}

#[test]
fn bad_options_are_125() {
    let (code, _, err) = run(&["--env", "NOEQUALS", "--", "true"]);
    assert_eq!(code, Some(125));
    assert!(err.contains("KEY=VALUE"), "{err}");
    let (code, _, err) = run(&["--timeout", "soon", "--", "true"]);
    assert_eq!(code, Some(125));
    assert!(err.contains("invalid duration"), "{err}");
}

#[test]
fn cwd_and_env_reach_the_program() {
    let (code, out, _) = run(&[
        "--cwd",
        "/tmp",
        "--env",
        "GREETING=hi there",
        "--",
        "sh",
        "-c",
        "echo \"$PWD $GREETING\"",
    ]);
    assert_eq!(code, Some(0));
    assert_eq!(out, "/tmp hi there\n");
}

/// The command starts with a clean signal state whatever its owner has:
/// no signal ignored (an ignored one would survive exec), none blocked.
#[test]
fn the_command_starts_with_no_signal_ignored_or_blocked() {
    let out = std::process::Command::new("/bin/sh")
        .args([
            "-c",
            r#"trap '' HUP INT QUIT PIPE TERM USR1 USR2; exec "$0" run -- grep -E '^Sig(Ign|Blk):' /proc/self/status"#,
        ])
        .arg(support::tether_path())
        .env("TETHER_HOME", support::home())
        .stdin(Stdio::null())
        .output()
        .expect("run tether under sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let mask = |field: &str| {
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .unwrap_or_else(|| panic!("no {field} in {stdout}"));
        u64::from_str_radix(line.trim(), 16).unwrap()
    };
    // Every signal, real-time ones included: glibc's posix_spawn left its
    // own two (32, 33) ignored in the keeper, and so in every command
    // (SigIgn 0000000180000000, where subprocess gives 0).
    assert_eq!(mask("SigIgn:"), 0, "ignored: {stdout}");
    assert_eq!(mask("SigBlk:"), 0, "blocked: {stdout}");
}

#[test]
fn every_process_carries_the_spawn_tag() {
    let (_, out, _) = run(&[
        "--purpose",
        "test-tag",
        "--",
        "sh",
        "-c",
        "echo $TETHER_SPAWN",
    ]);
    let tag: tether::SpawnTag = out.trim().parse().expect("valid tag");
    assert_eq!(tag.purpose, "test-tag");
}

#[test]
fn timeout_is_124_and_kills_the_whole_tree() {
    let guard = TagGuard::new("run-timeout");
    let out = tether()
        .args([
            "run",
            "--timeout",
            "300ms",
            "--grace",
            "200ms",
            "--",
            "sh",
            "-c",
        ])
        .arg(Tree::SetsidDoubleFork.script())
        .env(TAG_VAR, guard.tag())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(out.code(), Some(124));
    // `tether run` returned only after the tree was verified empty.
    assert_eq!(tether_testkit::tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[test]
fn leftover_descendants_are_killed_when_main_exits() {
    let guard = TagGuard::new("run-leftovers");
    let out = tether()
        .args([
            "run",
            "--json",
            "--grace",
            "200ms",
            "--",
            "sh",
            "-c",
            "setsid sleep 1000 & (setsid sleep 1000 &); echo started; exit 5",
        ])
        .env(TAG_VAR, guard.tag())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(json["exit_code"], 5);
    assert_eq!(json["stdout"], "started\n");
    assert_eq!(json["timed_out"], false);
    assert_eq!(json["containment"], "subreaper");
    assert!(json["descendants_killed"].as_u64().unwrap() >= 2, "{json}");
    assert_eq!(tether_testkit::tagged_pids(guard.tag()), Vec::<u32>::new());
}

#[test]
fn json_captures_both_streams_and_truncates_to_the_tail() {
    let (code, out, _) = run(&[
        "--json",
        "--max-output",
        "4",
        "--",
        "sh",
        "-c",
        "printf 0123456789; printf err >&2",
    ]);
    assert_eq!(code, Some(0));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["stdout"], "6789");
    assert_eq!(json["stdout_truncated"], true);
    assert_eq!(json["stdout_dropped_bytes"], 6);
    assert_eq!(json["stderr"], "err");
    assert_eq!(json["stderr_truncated"], false);
}

/// SIGINT to `tether run` goes to the command's process group, SIGTERM and
/// SIGHUP to every process of its tree; whatever ignores them is killed
/// after the grace.
#[test]
fn forwarded_signals_then_tree_kill_after_grace() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let guard = TagGuard::new("run-forward");
        let mut owner = Owner::start(guard.tag(), &[], Tree::TrapIgnore.script());
        owner.expect_ready();
        assert!(
            wait_for_count(
                guard.tag(),
                Tree::TrapIgnore.min_processes(),
                Duration::from_secs(20)
            ) >= 4
        );
        owner.signal(sig);
        // The tree ignores the signal: the forced end follows (at once,
        // since nothing will act on the signal; at the latest when the
        // 500 ms grace ends).
        let status = owner
            .wait_bounded(Duration::from_secs(20))
            .expect("tether run exits after the grace");
        assert_eq!(status.code(), Some(128 + libc::SIGKILL), "signal {sig}");
        assert!(wait_all_dead(guard.tag(), Duration::from_secs(5)).is_empty());
    }
}

// issue 34 item 7: a command that signals its parent signals its keeper,
// which died of it ("tether keeper died unexpectedly", exit 125, the output
// lost). The keeper passes it on to `tether run`, which drops what it would
// die of: the command finishes with its output and status. The command
// goes on once its parent has taken the signal (it left the parent's
// pending set, /proc/PID/status ShdPnd): a keeper that dies of it is dying
// by then, and the output is lost — the old keeper failed here every time.
#[test]
fn a_command_that_signals_its_parent_finishes() {
    for (sig, number) in [
        ("USR1", libc::SIGUSR1),
        ("USR2", libc::SIGUSR2),
        ("ALRM", libc::SIGALRM),
    ] {
        let script = format!("{CONSUMED}kill -{sig} $PPID; consumed {number}; echo child-finished");
        let (code, out, err) = run(&["--", "sh", "-c", &script]);
        assert_eq!(
            (code, out.as_str()),
            (Some(0), "child-finished\n"),
            "{sig}: {err}"
        );
        assert!(err.is_empty(), "{sig}: {err}");
    }
}

// SIGTERM asks the parent to end: the keeper ends the session (not the
// owner, which may host other sessions: an MCP server, an agent), and the
// command dies of it (143), its keeper alive to say so (not 125).
#[test]
fn a_command_that_sends_its_parent_sigterm_ends_with_143() {
    let (code, out, err) = run(&[
        "--",
        "sh",
        "-c",
        "kill -TERM $PPID; sleep 5; echo not-reached",
    ]);
    assert_eq!((code, out.as_str()), (Some(143), ""), "{err}");
    assert!(err.is_empty(), "{err}");
}

// What `tether run` drops from its keeper it does not drop from anyone
// else: a SIGUSR1 sent to it still ends it (and the tree with it).
#[test]
fn sigusr1_from_outside_still_ends_tether_run() {
    let guard = TagGuard::new("run-usr1");
    let mut owner = Owner::start(guard.tag(), &[], "echo ready; exec sleep 1000");
    owner.expect_ready();
    owner.signal(libc::SIGUSR1);
    let status = owner
        .wait_bounded(Duration::from_secs(20))
        .expect("tether run ends");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGUSR1)
    );
    assert!(wait_all_dead(guard.tag(), Duration::from_secs(10)).is_empty());
}

#[test]
fn forwarded_sigint_ends_a_cooperative_command_with_130() {
    let guard = TagGuard::new("run-sigint");
    let mut owner = Owner::start(guard.tag(), &[], "echo ready; exec sleep 1000");
    owner.expect_ready();
    owner.signal(libc::SIGINT);
    let status = owner
        .wait_bounded(Duration::from_secs(20))
        .expect("tether run exits");
    assert_eq!(status.code(), Some(130));
}

#[test]
fn help_explains_exit_codes() {
    let out = tether().args(["run", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for needle in [
        "124",
        "125",
        "126",
        "127",
        "--timeout",
        "--containment",
        "--json",
    ] {
        assert!(text.contains(needle), "help lacks {needle}");
    }
}

/// A command that stops its own keeper (`kill -STOP $PPID`) and exits: the
/// stopped keeper cannot report the exit until something resumes it. In
/// the plain mode `tether run`'s own wait watches the keeper (no guard
/// thread is started); with `--json` the guard thread does. Either way the
/// run returns the command's status within a patrol period (200 ms); the
/// bound only keeps a broken watch from hanging the suite.
#[test]
fn a_command_that_stops_its_keeper_still_ends_the_run() {
    for json in [false, true] {
        let guard = TagGuard::new("run-stopped-keeper");
        let mut args = vec!["run"];
        if json {
            args.push("--json");
        }
        args.extend(["--", "sh", "-c", "kill -STOP $PPID; exit 3"]);
        let mut owner = tether()
            .args(&args)
            .env(TAG_VAR, guard.tag())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let returned = support::wait_pid_exit(owner.id(), Duration::from_secs(20));
        if !returned {
            let _ = owner.kill(); // a stopped keeper is resumed as its owner dies
        }
        let status = owner.wait().unwrap();
        assert!(returned, "json {json}: tether run hung on a stopped keeper");
        assert_eq!(status.code(), Some(3), "json {json}");
        let left = wait_all_dead(guard.tag(), Duration::from_secs(10));
        assert!(left.is_empty(), "json {json}: survived: {left:?}");
    }
}

/// A command killed by a real-time signal (34 and up: numbers the `nix`
/// crate has no variant for) ends the run with 128 + N, in every
/// containment and output mode. Its keeper once reaped it through a call
/// that could not represent the status: the exit was lost, `tether run`
/// (and every front-end) waited for ever, and the keeper spun on as an
/// orphan after its owner died. Bounded at 20 s, only so that a broken
/// keeper does not hang the suite.
#[test]
fn a_command_killed_by_a_real_time_signal_ends_the_run() {
    for containment in ["subreaper", "pidns"] {
        for json in [false, true] {
            let guard = TagGuard::new("run-rt-signal");
            let mut args = vec!["run", "--containment", containment];
            if json {
                args.push("--json");
            }
            args.extend(["--", "sh", "-c", "kill -40 $$"]);
            let mut owner = tether()
                .args(&args)
                .env(TAG_VAR, guard.tag())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let returned = support::wait_pid_exit(owner.id(), Duration::from_secs(20));
            if !returned {
                let _ = owner.kill();
            }
            let out = owner.wait_with_output().unwrap();
            let what = format!("{containment}, json {json}");
            assert!(
                returned,
                "{what}: tether run hung on a real-time signal's death"
            );
            assert_eq!(
                out.status.code(),
                Some(128 + 40),
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            if json {
                let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                assert_eq!(result["signal"], 40, "{what}: {result}");
            }
            let left = wait_all_dead(guard.tag(), Duration::from_secs(10));
            assert!(left.is_empty(), "{what}: survived: {left:?}");
        }
    }
}

/// `consumed N`, for `sh -c`: returns once the parent has taken signal N
/// off its pending set (delivered: acted on, or read), or is gone; bounded
/// at 1,000 polls (~10 s here).
const CONSUMED: &str = "consumed() { i=0; while [ $i -lt 1000 ]; do p=$(sed -n 's/^ShdPnd:[[:space:]]*//p' /proc/$PPID/status 2>/dev/null); [ -n \"$p\" ] || return 0; [ $(( (0x$p >> ($1 - 1)) & 1 )) = 0 ] && return 0; i=$((i + 1)); sleep 0.005; done; }; ";
