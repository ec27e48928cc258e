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
    /// This process handed it over after the spawn (the keeper could not
    /// before exec).
    late: bool,
}

fn stdin() -> BorrowedFd<'static> {
    // SAFETY: fd 0 stays open for the life of the process (std never
    // closes it); we only ever borrow it for one call.
    unsafe { BorrowedFd::borrow_raw(0) }
}

/// Whether stdin is a terminal whose foreground this process's group holds
/// now (only then may a command be handed the terminal).
pub(crate) fn holds_terminal() -> bool {
    isatty(stdin()).unwrap_or(false) && tcgetpgrp(stdin()).ok() == Some(getpgrp())
}

impl Terminal {
    /// A terminal for the command whose process group is `group`, if stdin
    /// is a terminal. The keeper normally handed the foreground to the
    /// command before exec (Linux: `contain/linux/vfork.rs`); otherwise it
    /// is handed over now, if this process has it (a command started in the
    /// background stays there, and stops when it reads the terminal — as
    /// under a shell).
    pub(crate) fn new(group: u32) -> Option<Terminal> {
        if !isatty(stdin()).unwrap_or(false) {
            return None;
        }
        let mut terminal = Terminal {
            ours: getpgrp(),
            theirs: Pid::from_raw(group as i32),
            given: false,
            late: false,
        };
        if tcgetpgrp(stdin()).ok() == Some(terminal.theirs) {
            terminal.given = true;
        } else {
            terminal.give();
            terminal.late = terminal.given;
        }
        Some(terminal)
    }

    /// Whether the terminal was handed over only after the command started
    /// (it may have read it first, and been stopped by `SIGTTIN`).
    pub(crate) fn handed_late(&self) -> bool {
        self.late
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

    /// Whether a job-control stop by `signal` is stale: a `SIGTTIN` or
    /// `SIGTTOU` (a background process touching the terminal) while the
    /// command's group holds the foreground came from before the handover —
    /// the command read the terminal in the instant between its exec and
    /// our `tcsetpgrp` (2 of 20 `tether run -- head -c1` with input typed
    /// ahead, here). The caller just continues the command, whose read then
    /// restarts; stopping our job for it would be a stop nobody asked for.
    pub(crate) fn is_stale_stop(&self, signal: i32) -> bool {
        self.late
            && matches!(signal, libc::SIGTTIN | libc::SIGTTOU)
            && tcgetpgrp(stdin()).ok() == Some(self.theirs)
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

/// Takes the terminal back after a spawn that failed once the keeper had
/// handed it to the command's group (the child took it, then its exec
/// failed): the foreground must not stay with a group that no longer
/// exists.
pub(crate) fn reclaim_after_failed_spawn() {
    let ours = getpgrp();
    if isatty(stdin()).unwrap_or(false) && tcgetpgrp(stdin()).ok() != Some(ours) {
        set_foreground(ours);
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
