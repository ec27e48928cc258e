//! What the keeper needs from macOS: kqueue for its descriptors, signals
//! and the exits of tree members that are not its children; `waitid` for
//! the main process; and a tree found by parent chain, process group,
//! session and spawn tag (`tree.rs`), since macOS has no subreaper.
//!
//! The main process is the keeper's only child. Its exit is *reported* as
//! soon as it happens, but its zombie is reaped only when the tree is
//! empty: while the zombie holds its pid, no other process can get that
//! pid, nor form a process group or session with that id — so "the
//! command's group" and "the command's session" keep naming the command's
//! processes after it exits (`tree.rs` rule 3).
//!
//! Everything here runs in the single-threaded keeper; the state shared
//! between calls (the held zombie, what scans learnt, the exits to watch)
//! lives in a thread-local [`Tracker`].

use std::cell::RefCell;
use std::collections::HashSet;
use std::io;
use std::os::fd::RawFd;
use std::time::Instant;

use nix::errno::Errno;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

use super::kqueue::{self, Kevent, Kqueue};
use super::records::Kinfo;
use super::sysctl;
use super::tree::{self, Bounds, Identity, Memo};
use crate::contain::Termination;
use crate::contain::unix::keeper::Exec;
use crate::contain::unix::protocol::SpawnStage;
use crate::containment::Containment;

pub(crate) use super::limits::{OomPriority, SessionCgroups};
pub(crate) use super::pidns::{self, InitLink};

/// What holds a tree on macOS.
pub(crate) const STANDARD: Containment = Containment::ProcessGroupAndTag;

/// `posix_spawn` flag for a new session (macOS 10.15+, `<spawn.h>`; libc
/// does not export it for Apple targets).
const POSIX_SPAWN_SETSID: libc::c_int = 0x0400;

/// Starts the command with `posix_spawn` (a vfork: no page-table copy, and
/// exec errors come back as the return value), in a process group of its
/// own (or a new session), with a clean signal state and `stdio` installed.
///
/// macOS's `posix_spawn` has no action that hands the terminal's
/// foreground to the child before exec: with `exec.take_terminal` the
/// owner hands it over after the spawn, and continues a command that an
/// early read of the terminal stopped (`foreground.rs`).
pub(crate) fn spawn(exec: &Exec, stdio: [RawFd; 3]) -> Result<u32, (SpawnStage, Errno)> {
    let argv = exec.argv_ptrs();
    let envp = exec.envp_ptrs();
    // SAFETY: the attribute and action objects are initialised before use
    // and destroyed after; every pointer handed to posix_spawn outlives it.
    unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        libc::posix_spawnattr_init(&mut attr);
        libc::posix_spawn_file_actions_init(&mut actions);
        // A clean signal state for the command: nothing blocked, every
        // signal at its default (the keeper blocks some and ignores SIGPIPE).
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        let mut defaults: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut defaults);
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::sigaddset(&mut defaults, sig);
            }
        }
        let mut flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
        if exec.new_session {
            flags |= POSIX_SPAWN_SETSID;
        } else {
            flags |= libc::POSIX_SPAWN_SETPGROUP;
            libc::posix_spawnattr_setpgroup(&mut attr, 0);
        }
        libc::posix_spawnattr_setflags(&mut attr, flags as libc::c_short);
        libc::posix_spawnattr_setsigmask(&mut attr, &empty);
        libc::posix_spawnattr_setsigdefault(&mut attr, &defaults);
        for (target, fd) in stdio.into_iter().enumerate() {
            libc::posix_spawn_file_actions_adddup2(&mut actions, fd, target as i32);
        }
        // The keeper enters the command's directory itself and the command
        // inherits it: the keeper is single-threaded and needs no
        // directory of its own (it names every file by an absolute path).
        // Not `posix_spawn_file_actions_addchdir_np`: the standard library
        // declares that function weak, and in a statically linked program
        // built with fat LTO (`tether` as the Python wheel ships it) the
        // merged declaration stayed weak, unresolved, at address 0 — a
        // keeper given a directory crashed there.
        if let Some(cwd) = &exec.cwd
            && libc::chdir(cwd.as_ptr()) != 0
        {
            let errno = Errno::last();
            libc::posix_spawn_file_actions_destroy(&mut actions);
            libc::posix_spawnattr_destroy(&mut attr);
            return Err((SpawnStage::Chdir, errno));
        }
        let mut pid: libc::pid_t = 0;
        let rc = libc::posix_spawn(
            &mut pid,
            exec.program.as_ptr(),
            &actions,
            &attr,
            argv.as_ptr(),
            envp.as_ptr(),
        );
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        if rc == 0 {
            return Ok(pid as u32);
        }
        Err((SpawnStage::Exec, Errno::from_raw(rc)))
    }
}

/// Prepares the keeper process: `SIGCHLD` back to its default disposition
/// (no `SA_NOCLDWAIT`, no `SA_NOCLDSTOP`) — an exec keeps `SIG_IGN` from
/// whoever started the keeper, and with it the kernel hands the main
/// process's zombie to launchd (XNU `proc_exit`, `P_NOCLDWAIT`): no exit
/// status, no held zombie.
///
/// There is no subreaper to become, and the keeper stays attachable on
/// purpose: `ptrace(PT_DENY_ATTACH)` — the
/// closest macOS has to Linux's non-dumpable — also stops the kernel from
/// reporting a `SIGSEGV` of the keeper's *children* to Crash Reporter (XNU
/// `proc_prepareexit`: "Workaround for processes checking up on
/// PT_DENY_ATTACH"), so a crashing command would leave no crash report;
/// and it cannot be undone, even by root. Attaching to the keeper needs
/// what attaching to any process needs on macOS (the debug policy of
/// AMFI: root, or a debugger entitlement the user authorised). The command
/// can still signal the keeper, as on Linux; `KeeperLink` resumes a
/// stopped one.
pub(crate) fn prepare() -> io::Result<()> {
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    // SAFETY: SIG_DFL installs no handler code.
    unsafe { sigaction(Signal::SIGCHLD, &default) }?;
    Ok(())
}

/// Closes every descriptor above stderr but `keep` (see the Linux
/// keeper's for why). macOS has no `close_range`; its `/dev/fd` is part
/// of every system (devfs + fdesc), unlike Linux's, which udev makes.
pub(crate) fn close_inherited(keep: RawFd) -> io::Result<()> {
    // Listed first, closed after: the listing's own descriptor is among
    // them, and is closed (by the drop) before the loop. Single-threaded:
    // no number is reused meanwhile.
    let open: Vec<RawFd> = std::fs::read_dir("/dev/fd")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2 && fd != keep)
        .collect();
    for fd in open {
        // SAFETY: nothing of this process owns these descriptors (they were
        // inherited, unknown to it); EBADF (the listing's own, closed
        // already) is harmless.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// The bounds of one session's tree: the session id of the spawn tag, and
/// the command's process group id (its pid).
#[derive(Clone, Copy)]
pub(crate) struct TreeScope<'a> {
    /// The session id in the command's spawn tag.
    pub session: &'a str,
    /// The command's process group id (the main process's pid), valid
    /// after its exit too: the keeper holds the zombie.
    pub main_pgrp: u32,
}

/// The keeper's state across calls (see the module docs).
#[derive(Default)]
struct Tracker {
    /// The main process's zombie, its exit reported, not reaped yet.
    held: Option<u32>,
    /// Which session `memo` and `watch` are about: (session id, group).
    session: Option<(String, u32)>,
    memo: Memo,
    /// Members found by the last scan that are not the keeper's children:
    /// their exits raise no `SIGCHLD`, so the next [`Waiter::wait`] watches
    /// them with `NOTE_EXIT` — a keeper waiting for kept descendants wakes
    /// when the last one exits.
    watch: Vec<Identity>,
}

thread_local! {
    static TRACKER: RefCell<Tracker> = RefCell::new(Tracker::default());
}

/// One scan of the whole process table for the tree of `scope`: its live
/// members, and the pids of the keeper's children (zombies included).
fn scan(scope: &TreeScope<'_>) -> io::Result<(Vec<Kinfo>, Vec<u32>)> {
    let procs = sysctl::all_procs()?;
    let me = std::process::id();
    let bounds = Bounds {
        keeper: me,
        group: scope.main_pgrp,
        session: scope.session,
    };
    let found = TRACKER.with(|t| {
        let mut t = t.borrow_mut();
        let key = (scope.session.to_owned(), scope.main_pgrp);
        if t.session.as_ref() != Some(&key) {
            t.session = Some(key);
            t.memo = Memo::default();
        }
        let found = tree::members(
            &procs,
            &bounds,
            &mut t.memo,
            &mut sysctl::LiveProbe::default(),
        );
        t.watch = found
            .iter()
            .filter(|p| p.ppid != me)
            .map(|p| (p.pid, p.start_us))
            .collect();
        found
    });
    let children = procs
        .iter()
        .filter(|p| p.ppid == me)
        .map(|p| p.pid)
        .collect();
    Ok((found, children))
}

/// A live process of the tree, named by pid and start time.
pub(crate) struct Member {
    pub pid: u32,
    pub pgrp: u32,
    start_us: u64,
}

impl Member {
    /// Sends `sig` if `pid` still names this process; `false` if it could
    /// not be sent (the process exited, or is not ours to signal).
    ///
    /// macOS has no pidfd: the identity (pid and start time) is re-read
    /// right before `kill(2)`. A race remains that no macOS interface
    /// closes: the process may exit, be reaped by its parent, and its pid
    /// go to a new process between that read and the signal. The new
    /// process would have to take exactly this pid within those few
    /// microseconds — pids are handed out in order, up to 99,999, and
    /// skip every live pid, group and session id.
    pub(crate) fn signal(&self, sig: i32) -> bool {
        let same = sysctl::proc_of(self.pid)
            .is_ok_and(|now| now.is_some_and(|k| k.start_us == self.start_us && !k.has_exited()));
        // SAFETY: kill(2) with a pid just verified to name this process.
        same && unsafe { libc::kill(self.pid as libc::pid_t, sig) } == 0
    }

    /// Whether this process will not act on any of `signals`. Not read on
    /// macOS (its ignore mask is not looked up here): never, so a kill
    /// there waits out the grace for a tree that ignores its signals.
    pub(crate) fn ignores_all(&self, _signals: &[i32]) -> bool {
        false
    }
}

impl From<&Kinfo> for Member {
    fn from(k: &Kinfo) -> Member {
        Member {
            pid: k.pid,
            pgrp: k.pgrp,
            start_us: k.start_us,
        }
    }
}

/// Every live process of the session's tree (see `tree.rs`), the main
/// process included while it runs. An unreadable process table lists none.
pub(crate) fn members(scope: &TreeScope<'_>) -> Vec<Member> {
    match scan(scope) {
        Ok((found, _)) => found.iter().map(Member::from).collect(),
        Err(_) => Vec::new(),
    }
}

/// No cgroups on macOS: the scan ([`walk`]) lists every member.
pub(crate) fn cgroup_members(_cgroups: &SessionCgroups) -> Option<Vec<Member>> {
    None
}

/// [`members`], calling `visit` with each (on macOS after the one scan
/// that lists them all).
pub(crate) fn walk(scope: &TreeScope<'_>, mut visit: impl FnMut(&Member)) -> Vec<Member> {
    let members = members(scope);
    for member in &members {
        visit(member);
    }
    members
}

/// [`walk`], `visit` called for the members outside `group` only (the
/// Linux walk visits those before listing their children; the scan here
/// lists every member first in any case).
pub(crate) fn walk_signalling(
    scope: &TreeScope<'_>,
    group: Option<u32>,
    mut visit: impl FnMut(&Member),
) -> Vec<Member> {
    walk(scope, |member| {
        if Some(member.pgrp) != group {
            visit(member);
        }
    })
}

/// Whether the tree is over: no live member, and no child of the keeper
/// but the main process's zombie — which is reaped now, since nothing is
/// left that its pid must keep naming. `false` when the process table
/// cannot be read (never a premature "empty").
pub(crate) fn tree_is_empty(scope: &TreeScope<'_>) -> bool {
    let Ok((found, children)) = scan(scope) else {
        return false;
    };
    if !found.is_empty() {
        return false;
    }
    let held = TRACKER.with(|t| t.borrow().held);
    if !children.iter().all(|&pid| Some(pid) == held) {
        return false;
    }
    if let Some(pid) = held {
        let mut status = 0;
        // SAFETY: waitpid on our own zombie child with a valid status
        // pointer; it returns at once.
        let reaped = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
        if reaped != pid as libc::pid_t {
            return false;
        }
        TRACKER.with(|t| t.borrow_mut().held = None);
    }
    true
}

/// A change in a child's state.
pub(crate) enum Change {
    /// It ended. (On macOS: reported, its zombie held — see the module
    /// docs.) What it used is not measured here (`None`): its zombie is
    /// reaped later, by `tree_is_empty`.
    Exited(Termination, Option<crate::exit::ResourceUsage>),
    /// It was stopped by this signal.
    Stopped(i32),
    /// It was continued. Never reported on macOS: `waitid` names the
    /// process that sent `SIGCONT` there, not the child (XNU
    /// `waitid_nocancel` copies `p_contproc`), and the owner ignores the
    /// event anyway.
    #[allow(dead_code)]
    Continued,
}

/// `waitid(P_ALL, options)` on our children: `(pid, si_code, si_status)`,
/// or `None` when nothing is waiting.
fn waitid_any(options: libc::c_int) -> Option<(u32, libc::c_int, libc::c_int)> {
    loop {
        // SAFETY: waitid fills a zeroed siginfo_t we own.
        let (rc, info) = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let rc = libc::waitid(libc::P_ALL, 0, &mut info, options | libc::WNOHANG);
            (rc, info)
        };
        if rc < 0 {
            if Errno::last() == Errno::EINTR {
                continue;
            }
            return None;
        }
        // SAFETY: waitid filled these fields (zero when nothing waited).
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        return u32::try_from(pid)
            .ok()
            .filter(|&pid| pid != 0)
            .map(|pid| (pid, info.si_code, status));
    }
}

/// Whether [`reap_any`] reports what each process used: not here.
pub(crate) const MEASURES_USAGE: bool = false;

/// Reports one exited child (or, with `stops`, one stop): its pid and what
/// happened. `None` when nothing changed.
///
/// An exit is read with `WNOWAIT`: the zombie stays, held until
/// [`tree_is_empty`] reaps it, and is reported once. Stops are read
/// without `WEXITED`, so reading one never reaps anything.
pub(crate) fn reap_any(stops: bool) -> Option<(u32, Change)> {
    let held = TRACKER.with(|t| t.borrow().held);
    if let Some((pid, code, status)) = waitid_any(libc::WEXITED | libc::WNOWAIT)
        && Some(pid) != held
    {
        TRACKER.with(|t| t.borrow_mut().held = Some(pid));
        let termination = if code == libc::CLD_EXITED {
            // The kernel ORs high exit bits into si_status above the low 8.
            Termination::Code(status & 0xff)
        } else {
            Termination::Signal(status & 0x7f)
        };
        return Some((pid, Change::Exited(termination, None)));
    }
    if stops
        && held.is_none()
        && let Some((pid, libc::CLD_STOPPED, signal)) = waitid_any(libc::WSTOPPED)
    {
        return Some((pid, Change::Stopped(signal)));
    }
    None
}

/// Start time of our unreaped child `pid` (no pidfs inode on macOS).
pub(crate) fn identify(pid: u32) -> io::Result<(u64, Option<u64>)> {
    match sysctl::proc_of(pid)? {
        Some(k) => Ok((k.start_us, None)),
        None => Err(io::Error::from_raw_os_error(libc::ESRCH)),
    }
}

/// What woke the keeper.
pub(crate) struct Wake {
    /// For each descriptor passed to [`Waiter::wait`]: readable (or hung up).
    pub ready: Vec<bool>,
    /// Signals that arrived (SIGCHLD, SIGTERM, …).
    pub signals: Vec<Arrival>,
}

/// A signal that reached the keeper.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arrival {
    pub signal: i32,
    /// Who sent it: never known on macOS (`EVFILT_SIGNAL` counts
    /// signals, it does not say who sent them).
    pub from: Option<u32>,
}

/// The keeper's owner. Not pinned on macOS: with no sender known
/// (see [`Arrival`]), no signal is ever passed on to it.
pub(crate) struct Owner;

impl Owner {
    pub(crate) fn from_tag(_tag: Option<&crate::spawn_tag::SpawnTag>) -> Owner {
        Owner
    }

    pub(crate) fn signal(&self, _sig: i32, _value: usize) -> bool {
        false
    }
}

/// Whether a signal sent by `from` came from the keeper's tree: never
/// asked on macOS (no sender is known).
pub(crate) fn sent_by_tree(_from: u32) -> bool {
    false
}

/// The signals the keeper handles: every one a process can send it but
/// the faults the keeper itself would cause (its command can send it any
/// of them; one left at its default killed it, see the Linux keeper's
/// `Waiter`). They are blocked, so none ever runs its default action or
/// interrupts anything; `EVFILT_SIGNAL` sees them anyway (XNU notes a
/// signal to kqueues before looking at masks and dispositions). SIGCHLD
/// keeps its default disposition (see [`prepare`]).
const SIGNALS: [Signal; 23] = [
    Signal::SIGCHLD,
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
    Signal::SIGVTALRM,
    Signal::SIGPROF,
    Signal::SIGIO,
    Signal::SIGXCPU,
    Signal::SIGXFSZ,
    Signal::SIGWINCH,
    Signal::SIGURG,
    Signal::SIGINFO,
    Signal::SIGEMT,
    Signal::SIGSYS,
    Signal::SIGTRAP,
    Signal::SIGABRT,
    Signal::SIGTSTP,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
];

/// The keeper's one blocking wait: its descriptors (`EVFILT_READ`), its
/// signals (`EVFILT_SIGNAL`) and the exits of tree members that are not
/// its children (`EVFILT_PROC`/`NOTE_EXIT`), on one kqueue.
pub(crate) struct Waiter {
    kq: Kqueue,
    /// Descriptors registered for reading by the last wait.
    reading: Vec<RawFd>,
    /// Members whose exit is being watched.
    watching: HashSet<Identity>,
}

impl Waiter {
    pub(crate) fn new() -> io::Result<Waiter> {
        let mut mask = SigSet::empty();
        for sig in SIGNALS {
            mask.add(sig);
        }
        mask.thread_block()?;
        let kq = Kqueue::new()?;
        for sig in SIGNALS {
            kq.apply(kqueue::change(
                sig as usize,
                libc::EVFILT_SIGNAL,
                libc::EV_ADD,
                0,
            ))?;
        }
        Ok(Waiter {
            kq,
            reading: Vec::new(),
            watching: HashSet::new(),
        })
    }

    /// Waits until one of `fds` is readable, a signal arrives, a watched
    /// member exits, or `deadline` passes (`None`: no deadline).
    pub(crate) fn wait(&mut self, fds: &[RawFd], deadline: Option<Instant>) -> io::Result<Wake> {
        let mut changes: Vec<Kevent> = Vec::new();
        // Read registrations are level-triggered and outlive the call: drop
        // the ones not asked for now (a closed descriptor lost its own
        // already; that delete fails harmlessly), (re-)add the rest.
        for &fd in self.reading.iter().filter(|fd| !fds.contains(fd)) {
            changes.push(kqueue::change(
                fd as usize,
                libc::EVFILT_READ,
                libc::EV_DELETE,
                0,
            ));
        }
        for &fd in fds {
            changes.push(kqueue::change(
                fd as usize,
                libc::EVFILT_READ,
                libc::EV_ADD,
                0,
            ));
        }
        self.reading = fds.to_vec();
        let watch = TRACKER.with(|t| std::mem::take(&mut t.borrow_mut().watch));
        for id in watch {
            if self.watching.insert(id) {
                changes.push(kqueue::change(
                    id.0 as usize,
                    libc::EVFILT_PROC,
                    libc::EV_ADD,
                    libc::NOTE_EXIT,
                ));
            }
        }
        let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let mut events = vec![kqueue::slot(); changes.len() + 16];
        let n = match self.kq.wait(&changes, &mut events, timeout) {
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => 0,
            Err(e) => return Err(e),
        };
        let mut wake = Wake {
            ready: vec![false; fds.len()],
            signals: Vec::new(),
        };
        for ev in &events[..n] {
            let (ident, filter, flags) = (ev.ident, ev.filter, ev.flags);
            match filter {
                libc::EVFILT_READ => {
                    // Readable, at EOF — or the registration failed
                    // (EBADF): the read that follows reports that.
                    for (slot, &fd) in wake.ready.iter_mut().zip(fds) {
                        *slot |= fd as usize == ident;
                    }
                }
                libc::EVFILT_SIGNAL if flags & libc::EV_ERROR == 0 => {
                    wake.signals.push(Arrival {
                        signal: ident as i32,
                        from: None,
                    });
                }
                libc::EVFILT_PROC => {
                    // It exited (NOTE_EXIT), or was gone before it could be
                    // watched (EV_ERROR, ESRCH). Either way the next scan
                    // tells; a new process with that pid is watched anew.
                    self.watching.retain(|&(pid, _)| pid as usize != ident);
                }
                _ => {}
            }
        }
        Ok(wake)
    }
}
