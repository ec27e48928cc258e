//! What the keeper needs from Linux: a subreaper, signalfd, pidfd-pinned
//! tree members, `waitid` for emptiness, and PID namespaces.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Instant;

use nix::errno::Errno;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::pidfd::Pidfd;
use super::procfs::{children_of_process, read_stat};
use crate::contain::Termination;
use crate::containment::Containment;

pub(crate) use super::cgroup::SessionCgroups;
pub(crate) use super::oom::OomPriority;
pub(crate) use super::pidns::{self, InitLink};
pub(crate) use super::sys::identify_unreaped as identify;
pub(crate) use super::vfork::spawn;

/// What holds a tree without a PID namespace.
pub(crate) const STANDARD: Containment = Containment::Subreaper;

/// Makes the keeper a child subreaper (every orphan of its tree reparents
/// to it) and non-dumpable (its command, running as the same user, cannot
/// `ptrace` it or read its memory; it can still signal it — see
/// `KeeperLink::start` for how a stopped keeper is resumed).
pub(crate) fn prepare() -> io::Result<()> {
    super::set_child_subreaper()?;
    // While /proc/self is still ours: once non-dumpable it is root's.
    super::oom::hold_own();
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // An ignored SIGCHLD survives exec: an owner that ignores it would make
    // the kernel reap the keeper's children on its own, and the main
    // process's exit status would be lost.
    // SAFETY: setting a disposition to SIG_DFL installs no handler code.
    unsafe { nix::sys::signal::signal(Signal::SIGCHLD, nix::sys::signal::SigHandler::SigDfl) }?;
    Ok(())
}

/// The bounds of one session's tree. On Linux everything of the session
/// is a descendant of the keeper (subreaper or PID namespace), so the
/// fields are not needed; macOS uses them.
#[derive(Clone, Copy)]
pub(crate) struct TreeScope<'a> {
    #[allow(dead_code)]
    pub session: &'a str,
    #[allow(dead_code)]
    pub main_pgrp: u32,
}

/// A live process of the tree, pinned by a pidfd.
pub(crate) struct Member {
    pub pid: u32,
    pub pgrp: u32,
    pidfd: Pidfd,
}

impl Member {
    /// Sends `sig` through the pidfd; `false` if it could not be sent
    /// (the process exited).
    pub(crate) fn signal(&self, sig: i32) -> bool {
        self.pidfd.send_signal(sig).is_ok()
    }
}

/// Every live process of the session, each pinned by a pidfd and verified
/// to be a descendant of the keeper *after* the pidfd was opened — so a pid
/// recycled between listing and opening is skipped.
pub(crate) fn members(scope: &TreeScope<'_>) -> Vec<Member> {
    walk(scope, |_| {})
}

/// [`members`], calling `visit` with each as soon as its own children are
/// listed (and pinned): whatever `visit` does to it — kill it — its
/// children, which the kernel then hands to the keeper, are already known.
pub(crate) fn walk(_scope: &TreeScope<'_>, mut visit: impl FnMut(&Member)) -> Vec<Member> {
    let me = std::process::id();
    let mut known: HashSet<u32> = HashSet::from([me]);
    // (pid, threads, index in `members`): the keeper is single-threaded.
    let mut frontier = vec![(me, 1, None)];
    let mut members: Vec<Member> = Vec::new();
    while let Some((parent, threads, index)) = frontier.pop() {
        for pid in children_of_process(parent, threads) {
            if known.contains(&pid) {
                continue;
            }
            let Ok(pidfd) = Pidfd::open(pid) else {
                continue;
            };
            let Ok(stat) = read_stat(pid) else { continue };
            if pidfd.has_exited() || !known.contains(&stat.ppid) {
                continue;
            }
            known.insert(pid);
            frontier.push((pid, stat.threads, Some(members.len())));
            members.push(Member {
                pid,
                pgrp: stat.pgrp,
                pidfd,
            });
        }
        if let Some(index) = index {
            visit(&members[index]);
        }
    }
    members
}

/// Whether the keeper has no child at all, live or zombie. Everything of
/// the session is a descendant of the keeper (subreaper / PID namespace),
/// so no children means no session.
pub(crate) fn tree_is_empty(_scope: &TreeScope<'_>) -> bool {
    // SAFETY: waitid with a zeroed siginfo to fill; WNOWAIT reaps nothing.
    let rc = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL,
        )
    };
    rc < 0 && Errno::last() == Errno::ECHILD
}

/// A change in a child's state, as `waitpid` reports it.
pub(crate) enum Change {
    /// It ended (and is reaped).
    Exited(Termination),
    /// It was stopped by this signal.
    Stopped(i32),
    /// It was continued.
    Continued,
}

/// Reaps one exited child (or, with `stops`, reports one stop or
/// continue): its pid and what happened. `None` when nothing changed.
pub(crate) fn reap_any(stops: bool) -> Option<(u32, Change)> {
    let mut flags = WaitPidFlag::WNOHANG | WaitPidFlag::__WALL;
    if stops {
        flags |= WaitPidFlag::WUNTRACED | WaitPidFlag::WCONTINUED;
    }
    loop {
        match waitpid(None::<Pid>, Some(flags)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return None,
            Ok(status) => {
                let Some(pid) = status.pid().map(|p| p.as_raw() as u32) else {
                    continue;
                };
                let change = match status {
                    WaitStatus::Exited(_, code) => Change::Exited(Termination::Code(code)),
                    WaitStatus::Signaled(_, sig, _) => {
                        Change::Exited(Termination::Signal(sig as i32))
                    }
                    WaitStatus::Stopped(_, sig) => Change::Stopped(sig as i32),
                    WaitStatus::Continued(_) => Change::Continued,
                    _ => continue,
                };
                return Some((pid, change));
            }
        }
    }
}

/// What woke the keeper.
pub(crate) struct Wake {
    /// For each descriptor passed to [`Waiter::wait`]: readable (or hung up).
    pub ready: Vec<bool>,
    /// Signals that arrived (SIGCHLD, SIGTERM, …).
    pub signals: Vec<i32>,
}

/// The keeper's one blocking wait: its descriptors and its signals (read
/// through a signalfd; they are blocked, so nothing runs asynchronously in
/// the keeper).
pub(crate) struct Waiter {
    sigfd: SignalFd,
}

impl Waiter {
    pub(crate) fn new() -> io::Result<Waiter> {
        let mut mask = SigSet::empty();
        for sig in [
            Signal::SIGCHLD,
            Signal::SIGTERM,
            Signal::SIGINT,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ] {
            mask.add(sig);
        }
        mask.thread_block()?;
        let sigfd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)?;
        Ok(Waiter { sigfd })
    }

    /// Waits until one of `fds` is readable, a signal arrives, or
    /// `deadline` passes (`None`: no deadline).
    pub(crate) fn wait(&mut self, fds: &[RawFd], deadline: Option<Instant>) -> io::Result<Wake> {
        let timeout_ms = match deadline {
            Some(d) => {
                d.saturating_duration_since(Instant::now())
                    .as_millis()
                    .min(i32::MAX as u128 - 1) as i32
                    + 1
            }
            None => -1,
        };
        let mut pfds: Vec<libc::pollfd> = std::iter::once(self.sigfd.as_fd().as_raw_fd())
            .chain(fds.iter().copied())
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `pfds` is a valid array of pollfd for its length.
        let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
        let mut wake = Wake {
            ready: vec![false; fds.len()],
            signals: Vec::new(),
        };
        if rc <= 0 {
            return Ok(wake);
        }
        if pfds[0].revents != 0 {
            while let Ok(Some(info)) = self.sigfd.read_signal() {
                wake.signals.push(info.ssi_signo as i32);
            }
        }
        for (slot, pfd) in wake.ready.iter_mut().zip(&pfds[1..]) {
            *slot = pfd.revents != 0;
        }
        Ok(wake)
    }
}
