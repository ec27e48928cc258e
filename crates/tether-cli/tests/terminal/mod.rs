//! A real terminal for tests: a pseudo-terminal whose slave is the
//! controlling terminal of a new session running a shell, driven from the
//! master as a person at a keyboard would (typed lines, Ctrl-C, Ctrl-Z).

#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A session on its own pseudo-terminal.
pub struct Terminal {
    master: File,
    child: Child,
    /// Everything the terminal printed so far.
    output: Vec<u8>,
    /// How much of `output` [`expect`](Self::expect) has consumed.
    seen: usize,
}

impl Terminal {
    /// Runs `cmd` as the leader of a new session whose controlling terminal
    /// is a fresh pty (stdin, stdout and stderr).
    pub fn spawn(mut cmd: Command) -> Terminal {
        let pty = nix::pty::openpty(None, None).expect("openpty");
        let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
        cmd.stdin(slave(&pty.slave))
            .stdout(slave(&pty.slave))
            .stderr(slave(&pty.slave));
        // SAFETY: setsid(2) and ioctl(TIOCSCTTY) are async-signal-safe;
        // nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn on the pty");
        drop(pty.slave);
        Terminal {
            master: File::from(pty.master),
            child,
            output: Vec::new(),
            seen: 0,
        }
    }

    /// The session leader's pid (its process group is the shell's job).
    pub fn leader(&self) -> u32 {
        self.child.id()
    }

    /// Types `text`.
    pub fn type_text(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).unwrap();
    }

    /// The terminal's foreground process group now.
    pub fn foreground(&self) -> Option<u32> {
        nix::unistd::tcgetpgrp(self.master.as_fd())
            .ok()
            .map(|p| p.as_raw() as u32)
    }

    /// Waits until the terminal has printed `needle` after what earlier
    /// calls consumed, at most `bound`; consumes through it. `false` if it
    /// did not come (the output so far is in [`output`](Self::output)).
    pub fn expect(&mut self, needle: &str, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(at) = find(&self.output[self.seen..], needle.as_bytes()) {
                self.seen += at + needle.len();
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.read_some(left) {
                return false;
            }
        }
    }

    /// Waits until `ready()` holds, reading (and keeping) output meanwhile,
    /// at most `bound`. For states that raise no event visible outside the
    /// session (the terminal's foreground group): checked every 2 ms.
    pub fn wait_until(
        &mut self,
        bound: Duration,
        mut ready: impl FnMut(&Terminal) -> bool,
    ) -> bool {
        let deadline = Instant::now() + bound;
        while !ready(self) {
            if Instant::now() >= deadline {
                return false;
            }
            self.read_some(Duration::from_millis(2));
        }
        true
    }

    /// What the terminal printed so far (for failure messages).
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.output).into_owned()
    }

    /// Reads what is there within `bound`; `false` once the terminal is
    /// closed (every process holding the slave is gone).
    fn read_some(&mut self, bound: Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = bound.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, ms) } <= 0 {
            return true;
        }
        let mut buf = [0u8; 4096];
        match self.master.read(&mut buf) {
            Ok(0) | Err(_) => false, // EIO: the slave side is closed
            Ok(n) => {
                self.output.extend_from_slice(&buf[..n]);
                true
            }
        }
    }

    /// Waits for the session leader to exit, at most `bound`.
    pub fn wait_exit(&mut self, bound: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + bound;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            // Drain the terminal so the leader never blocks on a full one.
            self.read_some(Duration::from_millis(10));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // Hanging up the terminal (closing the master) sends SIGHUP to the
        // session; SIGKILL the leader in case it ignores it.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The process group of the live process carrying `tag` whose command line
/// is exactly `argv`.
pub fn group_of(tag: &str, argv: &[&str]) -> Option<u32> {
    tether_testkit::tagged_pids(tag)
        .into_iter()
        .find(|&pid| tether::sys::command_line(pid) == argv)
        .and_then(|pid| tether::sys::process(pid).ok())
        .map(|p| p.pgrp)
}
