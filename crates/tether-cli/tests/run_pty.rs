//! `tether run --pty` under a real terminal: the test plays the terminal
//! (it holds the master of a PTY that a shell runs on), and that shell runs
//! `tether run --pty`. While tether runs, the terminal is raw (a key with no
//! Enter reaches the program at once); after tether ends — by a forwarded
//! SIGINT, by `--timeout`, by the program's exit — the shell finds its
//! terminal's mode exactly as it left it (`stty -g` before and after).

// Real Linux process trees (/proc, pidfds, signals, shell fixtures): the
// suite runs on Linux; macOS is type-checked, Windows has its own tests.
#![cfg(target_os = "linux")]

mod support;

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tether::terminal::{Pty, PtySize};
use tether::{Child, Command};

/// The inner program: raw mode on its own terminal, one key, then a
/// process that only a signal or the timeout ends.
const INNER: &str = r#"
import os, tty
tty.setraw(0)
os.write(1, b"inner-ready\r\n")
key = os.read(0, 1)
os.write(1, b"got " + key + b"\r\n")
os.execvp("sleep", ["sleep", "100"])
"#;

/// Bound for events that come long before it.
const BOUND: Duration = Duration::from_secs(30);

/// The terminal: what the shell on it printed so far, arriving from a
/// reader thread.
struct Screen {
    chunks: mpsc::Receiver<Vec<u8>>,
    text: String,
}

impl Screen {
    fn new(mut pty: Pty) -> Screen {
        let (tx, chunks) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pty.read(&mut buf) {
                if tx.send(buf[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
        Screen {
            chunks,
            text: String::new(),
        }
    }

    /// Waits until the output contains `needle`.
    fn expect(&mut self, needle: &str) {
        let deadline = Instant::now() + BOUND;
        while !self.text.contains(needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.chunks.recv_timeout(left) {
                Ok(chunk) => self.text.push_str(&String::from_utf8_lossy(&chunk)),
                Err(_) => panic!("{needle:?} never came; the terminal shows {:?}", self.text),
            }
        }
    }

    /// Everything until the terminal's end of file.
    fn finish(&mut self) -> &str {
        let deadline = Instant::now() + BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.chunks.recv_timeout(left) {
                Ok(chunk) => self.text.push_str(&String::from_utf8_lossy(&chunk)),
                Err(mpsc::RecvTimeoutError::Disconnected) => return &self.text,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("no EOF: {:?}", self.text),
            }
        }
    }
}

/// A shell on a terminal of ours that records the terminal's mode, runs
/// `tether run --pty <extra> -- python3 -c INNER`, and records it again.
fn start(extra: &str) -> (Child, Pty, Screen) {
    let script = format!(
        "stty -g; echo; {tether} run --pty --grace 500ms {extra} -- python3 -c '{INNER}'; \
         echo \"rc=$?\"; stty -g",
        tether = env!("CARGO_BIN_EXE_tether"),
    );
    let mut child = Command::new("/bin/sh")
        .args(["-c", &script])
        .env("TETHER_HOME", support::home())
        .pty(PtySize::new(24, 80).unwrap())
        .spawn()
        .expect("start the shell on a terminal");
    let pty = child.pty.take().unwrap();
    let writer = pty.try_clone().unwrap();
    (child, writer, Screen::new(pty))
}

/// Types one key with no Enter: only a raw terminal passes it on before
/// a newline, so the program's "got x" proves tether made it raw.
fn prove_raw(keyboard: &mut Pty, screen: &mut Screen) {
    screen.expect("inner-ready");
    keyboard.write_all(b"x").unwrap();
    screen.expect("got x");
}

/// The mode lines before and after, and the exit code the shell saw.
fn modes_and_code(text: &str) -> (String, String, String) {
    // Lines end in CR LF, or in LF alone where the program's terminal was
    // raw (a traceback of a SIGINT that beat the exec of `sleep`).
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let before = lines[0].to_owned();
    let rc = lines
        .iter()
        .position(|l| l.starts_with("rc="))
        .unwrap_or_else(|| panic!("no exit code: {text:?}"));
    let after = lines.get(rc + 1).copied().unwrap_or_default().to_owned();
    (before, after, lines[rc].to_owned())
}

#[test]
fn the_terminal_mode_is_restored_after_sigint() {
    let (child, mut keyboard, mut screen) = start("");
    prove_raw(&mut keyboard, &mut screen);
    let tether = child
        .descendants()
        .into_iter()
        .find(|d| d.command.contains(" run --pty"))
        .expect("tether run is running on the terminal");
    // SAFETY: kill(2) of a process this test's own tree holds (the keeper
    // of `child` keeps it from being reaped and its pid reused).
    assert_eq!(unsafe { libc::kill(tether.pid as i32, libc::SIGINT) }, 0);
    let (before, after, rc) = modes_and_code(screen.finish());
    assert_eq!(rc, "rc=130", "the program died of the forwarded SIGINT");
    assert!(before.contains(':') && !before.is_empty(), "{before:?}");
    assert_eq!(after, before, "the terminal's mode was not restored");
}

#[test]
fn the_terminal_mode_is_restored_after_the_timeout() {
    let (_child, mut keyboard, mut screen) = start("--timeout 2s");
    prove_raw(&mut keyboard, &mut screen);
    let (before, after, rc) = modes_and_code(screen.finish());
    assert_eq!(rc, "rc=124");
    assert_eq!(after, before, "the terminal's mode was not restored");
}

#[test]
fn the_terminal_mode_is_restored_after_a_normal_exit_and_a_failed_start() {
    for (program, code) in [("true", "rc=0"), ("/nonexistent/program", "rc=127")] {
        let script = format!(
            "stty -g; echo; {} run --pty -- {program}; echo \"rc=$?\"; stty -g",
            env!("CARGO_BIN_EXE_tether"),
        );
        let mut child = Command::new("/bin/sh")
            .args(["-c", &script])
            .env("TETHER_HOME", support::home())
            .pty(PtySize::default())
            .spawn()
            .unwrap();
        let mut screen = Screen::new(child.pty.take().unwrap());
        let (before, after, rc) = modes_and_code(screen.finish());
        assert_eq!(rc, code, "{}", screen.text);
        assert_eq!(
            after, before,
            "{program}: the terminal's mode was not restored"
        );
    }
}

#[test]
fn window_size_changes_reach_the_program() {
    let script = format!(
        "{} run --pty -- sh -c \"trap 'echo size=\\$(stty size)' WINCH; echo size=\\$(stty size); \
         while :; do sleep 0.05; done\"",
        env!("CARGO_BIN_EXE_tether"),
    );
    let mut child = Command::new("/bin/sh")
        .args(["-c", &script])
        .env("TETHER_HOME", support::home())
        .pty(PtySize::new(24, 80).unwrap())
        .spawn()
        .unwrap();
    let terminal = child.pty.take().unwrap();
    let control = terminal.try_clone().unwrap();
    let mut screen = Screen::new(terminal);
    // The program's terminal starts with the size of tether's own.
    screen.expect("size=24 80");
    control.resize(PtySize::new(33, 99).unwrap()).unwrap();
    screen.expect("size=33 99");
    child.kill().unwrap();
}

/// Issue 34, item 6, with `--pty`: the pass-through copied until nobody
/// held the program's terminal, so a SIGKILLed keeper went unnoticed while
/// its orphans held it — nothing supervised them until they ended. The
/// keeper's death is now an event of the pass-through: the orphans are
/// killed, tether says so and exits 125, the terminal's mode restored.
#[test]
fn a_killed_keeper_is_noticed_while_orphans_hold_the_terminal() {
    let guard = tether_testkit::TagGuard::new("pty-keeper-death");
    let script = format!(
        "stty -g; echo; {tether} run --pty -- sh -c 'sleep 1000 & setsid sleep 1000 & \
         echo inner-ready; wait'; echo \"rc=$?\"; stty -g",
        tether = support::tether_path().display(),
    );
    let mut child = Command::new("/bin/sh")
        .args(["-c", &script])
        .env("TETHER_HOME", support::home())
        .env(tether_testkit::TAG_VAR, guard.tag())
        .pty(PtySize::new(24, 80).unwrap())
        .spawn()
        .expect("start the shell on a terminal");
    let mut screen = Screen::new(child.pty.take().unwrap());
    screen.expect("inner-ready");
    // The outer shell, tether run, the inner `sh` and its two sleeps.
    assert!(tether_testkit::wait_for_count(guard.tag(), 5, BOUND) >= 5);
    let tether = child
        .descendants()
        .into_iter()
        .find(|d| d.command.contains(" run --pty"))
        .expect("tether run is running on the terminal");
    let keeper = support::keeper_of(tether.pid).expect("its keeper");
    // SAFETY: kill(2) of tether run's keeper, which tether run does not reap
    // before it sees the keeper's socket close: its pid cannot be reused.
    assert_eq!(unsafe { libc::kill(keeper as i32, libc::SIGKILL) }, 0);

    let (before, after, rc) = modes_and_code(screen.finish());
    assert_eq!(rc, "rc=125", "{}", screen.text);
    assert!(
        screen.text.contains("keeper died unexpectedly"),
        "{}",
        screen.text
    );
    // Counted, never "0 orphaned" (a sleep of the terminal's foreground
    // group may die of the kernel's SIGHUP when its session leader is
    // killed, before it is counted).
    assert!(!screen.text.contains("; 0 orphaned"), "{}", screen.text);
    assert_eq!(after, before, "the terminal's mode was not restored");
    child.wait().unwrap();
    assert!(
        tether_testkit::wait_all_dead(guard.tag(), BOUND).is_empty(),
        "survived the keeper's death"
    );
}
