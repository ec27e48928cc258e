//! PTY children of the library (`Command::pty`): a real terminal, held and
//! killed like any other tree. The PTY twins of `kill.rs` and `spawn.rs`.

#![cfg(target_os = "linux")]

use std::io::Read;
use std::time::Duration;

use tether::terminal::{Pty, PtySize};
use tether::unix::ExitStatusExt;
use tether::{Child, Command};
use tether_testkit::{TAG_VAR, TagGuard, Tree, tagged_pids, wait_all_dead, wait_for_count};

/// Everything the terminal shows until its last holder is gone.
fn read_all(pty: &mut Pty) -> String {
    let mut out = Vec::new();
    pty.read_to_end(&mut out).expect("read the master");
    String::from_utf8_lossy(&out).into_owned()
}

fn sh(script: &str) -> Command {
    let mut c = Command::new("/bin/sh");
    c.args(["-c", script]).pty(PtySize::default());
    c
}

#[test]
fn the_command_has_a_real_terminal() {
    let mut child = sh("tty; test -t 0 && test -t 1 && test -t 2 && echo all-terminals")
        .spawn()
        .unwrap();
    let mut pty = child.pty.take().expect("a PTY child has a master");
    let text = read_all(&mut pty);
    assert!(child.wait().unwrap().success());
    let mut lines = text.lines();
    let tty = lines.next().unwrap_or_default().trim_end();
    assert!(tty.starts_with("/dev/pts/"), "tty printed {tty:?}");
    assert_eq!(
        lines.next().map(str::trim_end),
        Some("all-terminals"),
        "{text:?}"
    );
}

#[test]
fn the_command_leads_a_session_with_the_terminal_as_controlling_tty() {
    // `ps -o sid=,tpgid=` for itself: session leader ($$ is the sid) and
    // the foreground group of its controlling terminal exists (not -1).
    let mut child = sh("ps -o pid=,sid=,tpgid= -p $$").spawn().unwrap();
    let mut pty = child.pty.take().unwrap();
    let text = read_all(&mut pty);
    child.wait().unwrap();
    let fields: Vec<i64> = text
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    assert_eq!(fields.len(), 3, "{text:?}");
    assert_eq!(fields[0], fields[1], "not a session leader: {text:?}");
    assert_eq!(
        fields[2], fields[0],
        "not the terminal's foreground group: {text:?}"
    );
}

#[test]
fn the_size_is_the_one_asked_for_and_follows_resize() {
    let mut child = Command::new("/bin/sh")
        .args(["-c", "stty size; read x; stty size"])
        .pty(PtySize::new(40, 100).unwrap())
        .spawn()
        .unwrap();
    let mut pty = child.pty.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 256];
    while !seen.contains("40 100") {
        let n = pty.read(&mut buf).unwrap();
        assert!(n > 0, "EOF before the first size: {seen:?}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    pty.resize(PtySize::new(12, 34).unwrap()).unwrap();
    assert_eq!(pty.size().unwrap(), PtySize::new(12, 34).unwrap());
    std::io::Write::write_all(&mut pty, b"go\r").unwrap();
    let rest = read_all(&mut pty);
    assert!(rest.contains("12 34"), "{rest:?}");
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_failed_spawn_on_a_pty_says_why() {
    let err = Command::new("/nonexistent/prog")
        .pty(PtySize::default())
        .spawn()
        .unwrap_err();
    assert!(
        matches!(err, tether::Error::ProgramNotFound { .. }),
        "{err}"
    );
}

fn spawn_tree(tree: Tree, tag: &str) -> (Child, Pty) {
    let mut child = Command::new("/bin/sh")
        .args(["-c", tree.script()])
        .env(TAG_VAR, tag)
        .grace(Duration::from_millis(300))
        .keep_descendants(true)
        .pty(PtySize::default())
        .spawn()
        .expect("spawn fixture");
    let mut pty = child.pty.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.contains("ready") {
        let n = pty.read(&mut buf).unwrap();
        assert!(n > 0, "{tree:?}: EOF before ready: {seen:?}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let built = wait_for_count(tag, tree.min_processes(), Duration::from_secs(20));
    assert!(
        built >= tree.min_processes(),
        "{tree:?}: only {built} processes built"
    );
    (child, pty)
}

#[test]
fn kill_returns_only_when_the_tree_is_empty() {
    // Not `GrandchildHoldsStdout`: its main process exits at once, and a
    // session leader's exit hangs its terminal up — the kernel sends
    // SIGHUP to the foreground group, where that grandchild sits (no job
    // control in `sh -c`), as a closed terminal window would.
    for tree in Tree::ALL
        .into_iter()
        .filter(|t| *t != Tree::GrandchildHoldsStdout)
    {
        let guard = TagGuard::new(&format!("pty-kill-{tree:?}"));
        let (mut child, mut pty) = spawn_tree(tree, guard.tag());
        child.kill().unwrap_or_else(|e| panic!("{tree:?}: {e}"));
        assert_eq!(
            tagged_pids(guard.tag()),
            Vec::<u32>::new(),
            "{tree:?}: kill returned early"
        );
        let status = child.wait().unwrap();
        assert!(status.code().is_some() || status.signal().is_some());
        // Nobody holds the terminal any more: the master reads EOF.
        read_all(&mut pty);
    }
}

#[test]
fn dropping_the_child_kills_the_tree() {
    for tree in [
        Tree::SetsidDoubleFork,
        Tree::Nohup,
        Tree::Daemon,
        Tree::TrapIgnore,
    ] {
        let guard = TagGuard::new(&format!("pty-drop-{tree:?}"));
        let (child, pty) = spawn_tree(tree, guard.tag());
        drop(child);
        assert!(
            wait_all_dead(guard.tag(), Duration::from_secs(10)).is_empty(),
            "{tree:?}"
        );
        drop(pty);
    }
}

#[test]
fn hangup_and_term_go_together_then_kill_waits_for_the_whole_tree() {
    // One process ignores HUP only (dies at TERM), one ignores both (dies
    // at KILL); the leader dies at HUP, the first of the two signals sent
    // together. The KILL must wait for the tree, not the leader: the
    // KILL-only process proves it was sent after the leader was gone.
    let guard = TagGuard::new("pty-ladder");
    let script = "(trap '' HUP; exec sleep 1000) & (trap '' HUP TERM; while :; do sleep 1; done) & \
                  echo ready; exec sleep 1000";
    let mut child = Command::new("/bin/sh")
        .args(["-c", script])
        .env(TAG_VAR, guard.tag())
        .grace(Duration::from_millis(300))
        .pty(PtySize::default())
        .spawn()
        .unwrap();
    let mut pty = child.pty.take().unwrap();
    let mut buf = [0u8; 64];
    let mut seen = String::new();
    while !seen.contains("ready") {
        let n = pty.read(&mut buf).unwrap();
        assert!(n > 0);
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(wait_for_count(guard.tag(), 3, Duration::from_secs(10)) >= 3);
    child.kill().unwrap();
    assert_eq!(tagged_pids(guard.tag()), Vec::<u32>::new());
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(libc::SIGHUP),
        "the leader died of the first rung"
    );
    // The two trap subshells, and the loop's current `sleep 1` if any.
    assert!(status.descendants_killed() >= 2, "{status:?}");
}
