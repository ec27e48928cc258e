//! Shared pieces of the Windows tests (run under Wine in CI by
//! `.ci/windows`): the `win_tree` helper program, pinning processes by
//! identity, and waiting on their handles — never on a bare pid.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::Duration;

use tether::ProcessIdentity;
use tether::sys::{self, Pinned};

/// The helper program (`examples/win_tree.rs`), built next to the tests.
pub fn helper() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("examples")
        .join("win_tree.exe");
    assert!(
        path.is_file(),
        "{} is missing: build it first with `cargo build --example win_tree` for this target",
        path.display()
    );
    path
}

/// A tether command running the helper with `args`.
pub fn tree_command(args: &[&str]) -> tether::Command {
    let mut cmd = tether::Command::new(helper());
    cmd.args(args);
    cmd
}

/// The first line `child` printed (its stdout must be piped).
pub fn first_line(child: &mut tether::Child) -> String {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    line.trim().to_owned()
}

/// The numbers in a line of pids.
pub fn pids(line: &str) -> Vec<u32> {
    line.split_whitespace()
        .map(|w| w.parse().expect("pid"))
        .collect()
}

/// Pins the live process `pid` (its identity read now).
pub fn pin(pid: u32) -> Pinned {
    let info = sys::process(pid).unwrap_or_else(|e| panic!("pid {pid}: {e}"));
    let identity = ProcessIdentity {
        boot_id: sys::boot_id().to_owned(),
        pid,
        start_time: info.start_time,
        pidfs_inode: None,
    };
    Pinned::pin(&identity).unwrap().expect("process alive")
}

/// Waits (on its handle) until `p` exited; fails the test after 10 s.
pub fn assert_dies(p: &Pinned, what: &str) {
    sys::wait_exited(&[p], Duration::from_secs(10));
    assert!(p.has_exited(), "{what} (pid {}) survived", p.identity().pid);
}

/// Asserts `p` is still alive after `bound` (the bound is how long a
/// kill-on-close takes at most here by a wide margin: <1 ms measured under
/// Wine 8; cross-platform.md).
pub fn assert_survives(p: &Pinned, bound: Duration, what: &str) {
    sys::wait_exited(&[p], bound);
    assert!(!p.has_exited(), "{what} (pid {}) died", p.identity().pid);
}

/// `Some(version)` under Wine: tests of what Wine lacks skip, saying so.
pub fn wine() -> Option<String> {
    tether::windows::wine_version()
}

/// `spawn()`, tried again (3 tries in all) under Wine when Wine failed the
/// creation on its own: `ERROR_INTERNAL_ERROR` (1359), a new process that
/// died in Wine's start-up, with nothing created (the library does the same
/// for its own creations: `wine::retry_failed_creation`).
pub trait SpawnRetrying {
    fn spawn_retrying(&mut self) -> std::io::Result<std::process::Child>;
}

impl SpawnRetrying for std::process::Command {
    fn spawn_retrying(&mut self) -> std::io::Result<std::process::Child> {
        let mut attempt = 1;
        loop {
            match self.spawn() {
                Err(err) if attempt < 3 && err.raw_os_error() == Some(1359) && wine().is_some() => {
                    attempt += 1
                }
                result => return result,
            }
        }
    }
}

/// The Unix pid of the Wine process whose command line contains all of
/// `needles` (under Wine, `Z:\proc` is the host's /proc). `Z:\proc\self`
/// is no use: Wine resolves it in the wineserver.
pub fn unix_pid_of(needles: &[&str]) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(r"Z:\proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if needles.iter().all(|n| cmdline.contains(n)) {
            found.push(pid);
        }
    }
    found
}

/// A per-test unique word (for command lines, temp names).
pub fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{name}-{}-{nanos}", std::process::id())
}

/// Everything a PTY child shows, read to the end of file on a thread: the
/// end must come within `bound` (it follows the job's end and the
/// pseudoconsole's close), or the test fails instead of hanging.
pub fn read_to_eof(mut pty: tether::terminal::Pty, bound: Duration) -> Vec<u8> {
    use std::io::Read;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let read = pty.read_to_end(&mut bytes).map(|_| bytes);
        let _ = tx.send(read);
    });
    rx.recv_timeout(bound)
        .expect("the PTY's output never reached end of file")
        .expect("reading the PTY")
}

/// Reads the PTY child's output (on a thread) until it contains `text`;
/// fails the test after `bound`. What came, and the `Pty` back.
pub fn read_until(
    mut pty: tether::terminal::Pty,
    text: &str,
    bound: Duration,
) -> (String, tether::terminal::Pty) {
    use std::io::Read;
    let (tx, rx) = std::sync::mpsc::channel();
    let wanted = text.to_owned();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match pty.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
            if String::from_utf8_lossy(&seen).contains(&wanted) {
                let _ = tx.send((String::from_utf8_lossy(&seen).into_owned(), pty));
                return;
            }
        }
        drop(tx);
    });
    rx.recv_timeout(bound)
        .unwrap_or_else(|e| panic!("{text:?} never came on the PTY ({e})"))
}

/// The default terminal size.
pub fn pty_size() -> tether::terminal::PtySize {
    tether::terminal::PtySize::default()
}

/// Waits (bounded, 10 s) until `child`'s job has the helper's grandchild
/// (`win_tree sleep …`, which `tree` starts at once); its pid. No event
/// tells the owner of a new job member, so this looks every 10 ms. Not
/// merely the first member: a PTY session's job can show another, short-
/// lived process first under Wine (once in CI the first member was gone
/// before the test could pin it).
pub fn first_descendant(child: &tether::Child) -> u32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(d) = child
            .descendants()
            .into_iter()
            .find(|d| d.command.contains("sleep"))
        {
            return d.pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no descendant appeared in the job"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
