//! Helpers for driving the real `tether` binary.

#![allow(dead_code)]

use std::io::Read;
use std::os::fd::AsRawFd;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tether_testkit::TAG_VAR;

/// The `tether` binary under test: this build's, or the one
/// `TETHER_TEST_BIN` names — for showing that a regression test fails
/// against an older build (`TETHER_TEST_BIN=/old/target/debug/tether
/// cargo test -p process-tether-cli --test regression`). It runs in the
/// test's own tether home ([`home`]); a test that sets `TETHER_HOME`
/// itself overrides it.
pub fn tether() -> Command {
    let mut cmd = Command::new(tether_path());
    cmd.env("TETHER_HOME", home());
    cmd
}

thread_local! {
    /// The running test's own state directory: libtest runs every test on
    /// a thread of its own, so each test gets one, removed when its thread
    /// ends. Without it `tether run` and `tether mcp` would record into
    /// the machine's shared `~/.local/state/tether`, where other builds
    /// leave their ledger (one at a newer schema made `tether run` warn on
    /// stderr, and a stderr-checking test fail 5 of 5), and `ps`/`reap`
    /// would see every other build's sessions.
    static HOME: tempfile::TempDir = tempfile::Builder::new()
        .prefix("tether-test-home.")
        .tempdir()
        .expect("a private tether home");
}

/// The running test's private `TETHER_HOME` (see [`HOME`]): for commands
/// that run `tether` other than through [`tether`] (a shell script, a
/// wrapper such as `timeout` or `unshare`).
pub fn home() -> std::path::PathBuf {
    HOME.with(|home| home.path().to_owned())
}

/// The path [`tether`] runs.
pub fn tether_path() -> std::path::PathBuf {
    std::env::var_os("TETHER_TEST_BIN")
        .filter(|p| !p.is_empty())
        .map_or_else(|| env!("CARGO_BIN_EXE_tether").into(), Into::into)
}

/// `tether` run as `uid` (its gid the same), from `/`, at a path that
/// user can execute: the build's own binary may sit below a directory only
/// its owner can enter (a checkout in a `mktemp -d` directory, or under
/// `/root`), where the exec fails with `EACCES`, and so would a working
/// directory inside it ("bad working directory"). The binary is hard-linked
/// (copied across file systems) once per build into a directory of its
/// own in the system's temp dir, named after the build's inode, and reused.
/// No `TETHER_HOME`: the caller gives the user a home it can write.
pub fn tether_as(uid: u32) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(tether_path_for_anyone());
    cmd.current_dir("/").uid(uid).gid(uid);
    cmd
}

/// See [`tether_as`].
pub fn tether_path_for_anyone() -> std::path::PathBuf {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    static PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let built = tether_path();
        let meta = std::fs::metadata(&built).expect("the tether binary");
        let dir = std::env::temp_dir().join(format!(
            "tether-test-bin.{}.{}.{}",
            meta.dev(),
            meta.ino(),
            meta.mtime()
        ));
        let path = dir.join("tether");
        if !path.exists() {
            std::fs::create_dir_all(&dir).expect("a directory for the binary");
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
                .expect("chmod 755");
            // Another test binary may race us to it: link or copy under a
            // name of our own, then rename into place (atomic).
            let partial = dir.join(format!("tether.{}", std::process::id()));
            let _ = std::fs::remove_file(&partial);
            if std::fs::hard_link(&built, &partial).is_err() {
                std::fs::copy(&built, &partial).expect("copy the tether binary");
            }
            std::fs::rename(&partial, &path).expect("the binary in place");
        }
        path
    })
    .clone()
}

/// A program that is `tether mcp`, for MCP clients that take one program
/// path (the Python and TypeScript suites' `TETHER_MCP_CMD`): a script in
/// `dir` that `exec`s this build's `tether mcp` with its arguments, so the
/// server the clients drive is the `tether` process itself.
pub fn mcp_server_program(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let quoted = tether_path()
        .to_str()
        .expect("UTF-8 path")
        .replace('\'', "'\\''");
    let program = dir.join("tether-mcp-server");
    std::fs::write(&program, format!("#!/bin/sh\nexec '{quoted}' mcp \"$@\"\n"))
        .expect("write the server script");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
        .expect("make the server script executable");
    program
}

/// A `tether run` owner running a shell script, stdout piped.
pub struct Owner {
    child: Child,
    pending: Vec<u8>,
}

impl Owner {
    pub fn start(tag: &str, extra: &[&str], script: &str) -> Owner {
        Owner::start_graced(tag, "500ms", extra, script)
    }

    /// [`start`](Self::start) with the kill ladder's grace `grace`.
    pub fn start_graced(tag: &str, grace: &str, extra: &[&str], script: &str) -> Owner {
        let child = tether()
            .arg("run")
            .args(["--grace", grace])
            .args(extra)
            .args(["--", "/bin/sh", "-c", script])
            .env(TAG_VAR, tag)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tether run");
        Owner {
            child,
            pending: Vec::new(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads stdout until a line `ready` (bounded: 30 s).
    pub fn expect_ready(&mut self) {
        let line = read_line_bounded(
            self.child.stdout.as_mut().unwrap(),
            &mut self.pending,
            Duration::from_secs(30),
        );
        // A PTY's line ends in CR LF.
        assert_eq!(
            line.as_deref().map(|l| l.trim_end_matches('\r')),
            Some("ready"),
            "fixture did not report ready"
        );
    }

    pub fn sigkill(&mut self) {
        self.child.kill().expect("SIGKILL the owner");
        self.child.wait().expect("reap the owner");
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own unreaped child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Waits for exit, at most `bound`, on a pidfd.
    pub fn wait_bounded(&mut self, bound: Duration) -> Option<ExitStatus> {
        if wait_pid_exit(self.child.id(), bound) {
            self.child.wait().ok()
        } else {
            None
        }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One line from `reader`, waiting at most `bound` (poll, not sleep).
pub fn read_line_bounded(
    reader: &mut impl ReadFd,
    pending: &mut Vec<u8>,
    bound: Duration,
) -> Option<String> {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(pos) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=pos).collect();
            return Some(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let mut pfd = libc::pollfd {
            fd: reader.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, left.as_millis() as i32) } <= 0 {
            return None;
        }
        let mut buf = [0u8; 4096];
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
        }
    }
}

pub trait ReadFd: Read {
    fn raw(&self) -> i32;
}

impl<T: Read + AsRawFd> ReadFd for T {
    fn raw(&self) -> i32 {
        self.as_raw_fd()
    }
}

/// Whether `pid` exits (or is already gone) within `bound`, waiting on a pidfd.
pub fn wait_pid_exit(pid: u32, bound: Duration) -> bool {
    let Some(fd) = tether_testkit::pidfd(pid) else {
        return true;
    };
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, bound.as_millis() as i32) > 0 }
}

/// The keeper child of a `tether run` process.
pub fn keeper_of(owner: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{owner}/task/{owner}/children")).ok()?;
    children
        .split_ascii_whitespace()
        .filter_map(|p| p.parse().ok())
        .find(|&pid: &u32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.windows(15).any(|w| w == b"__tether-keeper"))
        })
}

/// What a process that should have exited is doing, for a failure
/// message: each of its threads' name, state and kernel wait channel, and
/// its children with their command lines.
pub fn where_it_waits(pid: u32) -> String {
    let mut out = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let path = task.path();
            let read = |f: &str| {
                std::fs::read_to_string(path.join(f))
                    .unwrap_or_default()
                    .trim()
                    .to_owned()
            };
            let state = read("stat")
                .rsplit_once(") ")
                .map(|(_, rest)| rest.chars().next().unwrap_or('?'))
                .unwrap_or('?');
            out.push(format!(
                "thread {} {:?} state {state} wchan {:?} children [{}]",
                task.file_name().to_string_lossy(),
                read("comm"),
                read("wchan"),
                read("children")
                    .split_ascii_whitespace()
                    .map(|c| format!("{c}: {}", tether::sys::describe(c.parse().unwrap_or(0))))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
    out.join(" | ")
}
