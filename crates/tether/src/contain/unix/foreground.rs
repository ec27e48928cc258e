//! A foreground command under a terminal, as a job-control shell runs one:
//! the command's process group gets the terminal (so it can read it without
//! `SIGTTIN` stopping it, and Ctrl-C/Ctrl-Z reach it directly), its stops
//! stop this process's job too (so the shell sees the job stopped and
//! `fg`/`bg` work), and the terminal comes back to this process on every
//! way out — exit, kill, timeout, error, drop.

use std::os::fd::BorrowedFd;

use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::unistd::{Pid, getpgrp, isatty, tcgetpgrp, tcsetpgrp};

/// The terminal on stdin, while the command holds its foreground.
#[derive(Debug)]
pub(crate) struct Terminal {
    /// Our own process group (the shell's job).
    ours: Pid,
    /// The command's process group.
    theirs: Pid,
    /// The command's group has the terminal now.
    given: bool,
}

fn stdin() -> BorrowedFd<'static> {
    // SAFETY: fd 0 stays open for the life of the process (std never
    // closes it); we only ever borrow it for one call.
    unsafe { BorrowedFd::borrow_raw(0) }
}

impl Terminal {
    /// A terminal for the command whose process group is `group`, if stdin
    /// is a terminal. The foreground is handed over only if this process
    /// has it now (a command started in the background stays there, and
    /// stops when it reads the terminal — as under a shell).
    pub(crate) fn new(group: u32) -> Option<Terminal> {
        if !isatty(stdin()).unwrap_or(false) {
            return None;
        }
        let mut terminal = Terminal {
            ours: getpgrp(),
            theirs: Pid::from_raw(group as i32),
            given: false,
        };
        terminal.give();
        Some(terminal)
    }

    /// Hands the foreground to the command, if this process holds it.
    pub(crate) fn give(&mut self) {
        if tcgetpgrp(stdin()).ok() == Some(self.ours) && set_foreground(self.theirs) {
            self.given = true;
        }
    }

    /// Takes the foreground back for this process.
    pub(crate) fn reclaim(&mut self) {
        if self.given {
            set_foreground(self.ours);
            self.given = false;
        }
    }

    /// The command was stopped by job control: stop this process's job the
    /// same way (the shell sees it stopped), and once the shell continues
    /// it, give the terminal back to the command if we are in the
    /// foreground again. Returns when this process runs again; the caller
    /// then continues the command.
    pub(crate) fn stop_job(&mut self, signal: i32) {
        self.reclaim();
        let signal = if matches!(signal, libc::SIGTTIN | libc::SIGTTOU) {
            signal
        } else {
            libc::SIGTSTP
        };
        // SAFETY: kill(2) of our own process group: it stops this process
        // too, and returns once a SIGCONT resumed it.
        unsafe { libc::kill(-self.ours.as_raw(), signal) };
        self.give();
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.reclaim();
    }
}

/// `tcsetpgrp` on stdin with `SIGTTOU` blocked in this thread (a process
/// in the background may only change the foreground while it blocks or
/// ignores `SIGTTOU`). `true` if it worked.
fn set_foreground(group: Pid) -> bool {
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let mut old = SigSet::empty();
    let blocked =
        nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old));
    let done = tcsetpgrp(stdin(), group).is_ok();
    if blocked.is_ok() {
        let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    }
    done
}
