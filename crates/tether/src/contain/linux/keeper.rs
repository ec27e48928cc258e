//! What the keeper needs from Linux: a subreaper, signalfd, pidfd-pinned
//! tree members, `waitid` for emptiness, and PID namespaces.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use super::pidfd::Pidfd;
use super::procfs::{children_of_process, read_stat, thread_count};
use crate::contain::Termination;
use crate::containment::Containment;
use crate::exit::ResourceUsage;

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
    default_real_time_signals();
    Ok(())
}

/// Puts every real-time signal (32 and up) this keeper inherited ignored
/// back to its default, so that no command inherits it ignored. glibc's
/// `posix_spawn`, which starts the keeper, leaves its own internal signals
/// (32, 33: `SIGCANCEL`, `SIGSETXID`) ignored in the new program: every
/// command started `SigIgn: 0000000180000000` where `subprocess` gives 0
/// (found running CPython's `test_subprocess` against `tether.Popen`).
/// The C library's `sigaction` refuses those two, so the system call is
/// made directly. The keeper uses neither (no threads, no cancellation, no
/// timers), and it blocks every signal it does not wait for.
fn default_real_time_signals() {
    /// The kernel's `struct sigaction` on x86_64 and the other 64-bit
    /// architectures tether builds for: handler, flags, restorer, mask.
    #[repr(C)]
    struct KernelSigaction {
        handler: usize,
        flags: libc::c_ulong,
        restorer: usize,
        mask: u64,
    }
    let rt_max = libc::SIGRTMAX().min(64);
    for sig in 32..=rt_max {
        let mut old = KernelSigaction {
            handler: 0,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        // SAFETY: rt_sigaction with no new action only fills `old`, which
        // we own and which has the kernel's layout; 8 is its mask's size.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                std::ptr::null::<KernelSigaction>(),
                &mut old as *mut KernelSigaction,
                8usize,
            )
        };
        if rc != 0 || old.handler != libc::SIG_IGN {
            continue;
        }
        let default = KernelSigaction {
            handler: libc::SIG_DFL,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        // SAFETY: as above; SIG_DFL installs no handler code.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                &default as *const KernelSigaction,
                std::ptr::null_mut::<KernelSigaction>(),
                8usize,
            )
        };
    }
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

    /// Whether the process has exited (its held pidfd polls readable).
    pub(crate) fn has_exited(&self) -> bool {
        self.pidfd.has_exited()
    }

    /// Whether this process will not act on any of `signals`: it ignores
    /// every one (`SIG_IGN`; a handler or a block is not an ignore), or it
    /// has exited. Its status is read by pid, and counts only if the pidfd
    /// shows the process alive after the read: until it exits, the pid
    /// cannot name another.
    pub(crate) fn ignores_all(&self, signals: &[i32]) -> bool {
        // Dead already: no `/proc` read (3,000 of them after a storm's
        // gentle rung, each a path the reaping then has to invalidate).
        if self.pidfd.has_exited() {
            return true;
        }
        let ignored = super::procfs::ignored_signals(self.pid);
        if self.pidfd.has_exited() {
            return true;
        }
        let Some(ignored) = ignored else { return false };
        signals
            .iter()
            .all(|&sig| (1..=64).contains(&sig) && ignored & (1 << (sig - 1)) != 0)
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
pub(crate) fn walk(_scope: &TreeScope<'_>, visit: impl FnMut(&Member)) -> Vec<Member> {
    walk_from(std::process::id(), Some(1), proof(), None, visit)
}

/// [`members`] for a kill: `visit` (the signal) reaches each member
/// outside the process group `group` *before* its children are listed,
/// and the listing is skipped for a member the signal killed — its
/// children, handed to the keeper (the subreaper), are in one read of the
/// keeper's own. So: every member reachable without such a listing is
/// proven (pidfd, parent) first, all of them, then visited in one pass;
/// then the children of those still alive are listed, as [`walk`] lists
/// them, and of the keeper if any died; and again for what that finds.
/// Members of `group` (stopped by the caller, signalled after) are listed
/// and visited as [`walk`] does.
///
/// For a 3,003-process storm of `setsid sleep`s the walk read each
/// sleep's `/proc/<pid>/stat` and `/proc/<pid>/task/<pid>/children`
/// (nothing) and signalled it as it went: 265–550 ms from the owner's
/// death to the last exit under load, where the kernel alone needs
/// ~200 ms. Proving a member through its pidfd costs four system calls
/// and no `/proc` path (with [`Proof::PidfdInfo`]); proving them all
/// before the first signal keeps the dying members, each woken by its
/// signal, off the CPU the proving needs (signalled as they were proven:
/// p50 316 ms, all first: 284 ms, in 4 interleaved runs; issue 34 item
/// 10).
pub(crate) fn walk_signalling(
    _scope: &TreeScope<'_>,
    group: Option<u32>,
    visit: impl FnMut(&Member),
) -> Vec<Member> {
    walk_from(std::process::id(), Some(1), proof(), Some(group), visit)
}

/// How a walk proves that a process it pinned is a member: its parent is
/// the walk's root or a member already proven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proof {
    /// The parent from the pidfd itself (`PIDFD_GET_INFO`, Linux 6.13+),
    /// the process group by pid (`getpgid`, read before it): no `/proc`
    /// path.
    PidfdInfo,
    /// `/proc/<pid>/stat`, read by pid after the pidfd was opened and
    /// counted only if the pidfd shows the process alive after the read.
    Stat,
}

/// [`Proof::PidfdInfo`] where the kernel knows the request (asked of the
/// keeper's own pidfd), else [`Proof::Stat`] (Linux before 6.13: Debian
/// 12's 6.1, 13's 6.12). `ESRCH` for the keeper itself means a parent
/// outside its PID namespace, not an unknown request.
fn proof() -> Proof {
    static PROOF: OnceLock<Proof> = OnceLock::new();
    *PROOF.get_or_init(
        || match Pidfd::open(std::process::id()).and_then(|own| own.parent()) {
            Ok(_) => Proof::PidfdInfo,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Proof::PidfdInfo,
            Err(_) => Proof::Stat,
        },
    )
}

/// The processes a walk has proven so far: each pid with its index in the
/// walk's members (`None`: the walk's root, which the caller holds — the
/// keeper itself, or a test's unreaped child — so its pid names it).
type Known = HashMap<u32, Option<usize>>;

/// Why a process was not proven a member.
#[derive(Debug, PartialEq, Eq)]
enum Unproven {
    /// Not a child of a process in `known`, or gone.
    No,
    /// Its parent was read as a member that has exited since: the pid
    /// read may name another process by now (see [`parent_alive`]).
    ParentExited,
}

/// Whether the parent `ppid`, read for a child after that child's pidfd
/// was opened, is a member still alive *after* the read: a member known
/// by pid may have exited, been reaped and its pid been reused between
/// its proof and this child's read — and then a stranger's child would
/// pass as ours. Its held pidfd settles it (a non-blocking poll:
/// readable = exited). While the pidfd shows it alive, the pid read
/// names the member (a pid is not reused before its process is reaped).
/// A member that exited handed its children to the keeper (the
/// subreaper; its pidfd turns readable only once they are reparented),
/// so a true member refused here is found again among the keeper's own
/// children (the walk lists them once more, see `walk_from`).
fn parent_alive(ppid: u32, known: &Known, members: &[Member]) -> Result<(), Unproven> {
    match known.get(&ppid) {
        None => Err(Unproven::No),
        Some(None) => Ok(()),
        Some(Some(i)) if members[*i].pidfd.has_exited() => Err(Unproven::ParentExited),
        Some(Some(_)) => Ok(()),
    }
}

/// `pid` pinned by a pidfd and proven to be a live child of a process in
/// `known`, alive after the read (see [`parent_alive`]); with its thread
/// count where the proof read it.
fn prove(
    pid: u32,
    known: &Known,
    members: &[Member],
    proof: Proof,
) -> Result<(Member, Option<u32>), Unproven> {
    let pidfd = Pidfd::open(pid).map_err(|_| Unproven::No)?;
    if proof == Proof::PidfdInfo {
        // A zombie is no member: two system calls, not four (a sweep
        // after a storm's signals meets thousands of them).
        if pidfd.has_exited() {
            return Err(Unproven::No);
        }
        // By pid, then proven: the parent below is read only while the
        // process is unreaped (ESRCH after), and until then its pid names
        // nothing else.
        // SAFETY: getpgid takes a pid and touches no memory.
        let pgrp = unsafe { libc::getpgid(pid as libc::pid_t) };
        match pidfd.parent() {
            Ok(ppid) => {
                parent_alive(ppid, known, members)?;
                if pgrp <= 0 {
                    return Err(Unproven::No);
                }
                return Ok((
                    Member {
                        pid,
                        pgrp: pgrp as u32,
                        pidfd,
                    },
                    None,
                ));
            }
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Err(Unproven::No),
            // Refused for this process: `/proc` serves.
            Err(_) => {}
        }
    }
    let stat = read_stat(pid).map_err(|_| Unproven::No)?;
    if pidfd.has_exited() {
        return Err(Unproven::No);
    }
    parent_alive(stat.ppid, known, members)?;
    Ok((
        Member {
            pid,
            pgrp: stat.pgrp,
            pidfd,
        },
        Some(stat.threads),
    ))
}

/// The children of `pid`, which has `threads` threads (`None`: not read
/// yet).
fn children_of_member(pid: u32, threads: Option<u32>) -> Vec<u32> {
    match threads.or_else(|| thread_count(pid)) {
        Some(threads) => children_of_process(pid, threads),
        None => Vec::new(),
    }
}

/// The walk below `root` (the keeper, single-threaded: `root_threads`),
/// proving each member by `proof`. `early`: visit the members outside
/// that group before listing their children (see [`walk_signalling`]).
fn walk_from(
    root: u32,
    root_threads: Option<u32>,
    proof: Proof,
    early: Option<Option<u32>>,
    mut visit: impl FnMut(&Member),
) -> Vec<Member> {
    let mut known: Known = HashMap::from([(root, None)]);
    // (pid, threads, index in `members`, whether it is still to be visited).
    let mut frontier: Vec<(u32, Option<u32>, Option<usize>, bool)> =
        vec![(root, root_threads, None, false)];
    // Visited early, children not listed yet: (index, threads).
    let mut deferred: Vec<(usize, Option<u32>)> = Vec::new();
    let mut members: Vec<Member> = Vec::new();
    // A parent found exited during a listing or a proof: its children
    // went to the keeper, whose children are listed again.
    let mut orphaned = false;
    loop {
        while let Some((parent, threads, index, to_visit)) = frontier.pop() {
            let mut children = children_of_member(parent, threads);
            // Listed by pid: if the member has exited since, the pid may
            // name a stranger by now, and so may the listing (see
            // `parent_alive`); its own children went to the keeper.
            if let Some(i) = index
                && members[i].pidfd.has_exited()
            {
                children.clear();
                orphaned = true;
            }
            for pid in children {
                if known.contains_key(&pid) {
                    continue;
                }
                let (member, threads) = match prove(pid, &known, &members, proof) {
                    Ok(proven) => proven,
                    Err(Unproven::ParentExited) => {
                        orphaned = true;
                        continue;
                    }
                    Err(Unproven::No) => continue,
                };
                let early_here = early.is_some_and(|group| Some(member.pgrp) != group);
                members.push(member);
                let i = members.len() - 1;
                known.insert(pid, Some(i));
                if early_here {
                    deferred.push((i, threads));
                } else {
                    frontier.push((pid, threads, Some(i), true));
                }
            }
            if let (Some(index), true) = (index, to_visit) {
                visit(&members[index]);
            }
        }
        if deferred.is_empty() {
            if !std::mem::take(&mut orphaned) {
                return members;
            }
            // Each round lists the keeper's children once more only if a
            // member was found exited in the last: what it finds is new
            // (known pids are skipped), so the rounds end.
            frontier.push((root, root_threads, None, false));
            continue;
        }
        // All of them proven before the first of these signals: a member
        // that dies of one cannot take the listing's CPU (see above).
        for &(i, _) in &deferred {
            visit(&members[i]);
        }
        // A member that died has handed its children to the keeper (the
        // pidfd turns readable once the kernel has reparented them): one
        // read of the keeper's own children finds them all. A live one's
        // are listed now.
        for (i, threads) in deferred.drain(..) {
            if members[i].pidfd.has_exited() {
                orphaned = true;
            } else {
                frontier.push((members[i].pid, threads, Some(i), false));
            }
        }
        if std::mem::take(&mut orphaned) {
            frontier.push((root, root_threads, None, false));
        }
    }
}

/// The processes in the session's own cgroup v2 leaf, each pinned by a
/// pidfd and proven to be in that leaf *through the pidfd* (its cgroup id,
/// `PIDFD_GET_INFO`) — so a pid recycled between the listing and the open
/// is skipped — with no `/proc` path per process. Everything in the leaf
/// is the session's: the kernel puts a fork in its parent's cgroup, and
/// only a writer of the leaf's `cgroup.procs` (root, or the delegated
/// user) moves a process in; `cgroup.kill` ends them all alike.
///
/// The walk ([`walk`]) proves membership by parenthood instead, with two
/// `/proc` reads per process (`stat`, `children`): for a 3,000-process
/// storm the walk took 360–615 ms under load, the owner's SIGKILL to the
/// last death, where the kernel alone needs ~200 ms (issue 34 item 10).
/// This listing does not find what left the leaf (or never entered it):
/// the caller's next walk does.
///
/// `None` where it cannot serve: no v2 leaf, `cgroup.procs` unreadable,
/// or a kernel without `PIDFD_GET_INFO` (before 6.13).
pub(crate) fn cgroup_members(cgroups: &SessionCgroups) -> Option<Vec<Member>> {
    let id = cgroups.v2_id()?;
    let pids = cgroups.members()?;
    let mut members = Vec::with_capacity(pids.len());
    for pid in pids {
        let Ok(pidfd) = Pidfd::open(pid) else {
            continue;
        };
        // By pid, then proven: the cgroup id below is read only while the
        // process is unreaped (ESRCH after), and until then its pid names
        // nothing else.
        // SAFETY: getpgid takes a pid and touches no memory.
        let pgrp = unsafe { libc::getpgid(pid as libc::pid_t) };
        match pidfd.cgroup_id() {
            Ok(Some(cgroup)) if cgroup == id && pgrp > 0 => members.push(Member {
                pid,
                pgrp: pgrp as u32,
                pidfd,
            }),
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            // No `PIDFD_GET_INFO`: the walk serves.
            Err(_) => return None,
        }
    }
    Some(members)
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

/// A change in a child's state, as `wait4` reports it.
pub(crate) enum Change {
    /// It ended (and is reaped), having used this much (its own use and
    /// that of the children it reaped itself).
    Exited(Termination, Option<ResourceUsage>),
    /// It was stopped by this signal.
    Stopped(i32),
    /// It was continued.
    Continued,
}

/// Whether [`reap_any`] reports what each process used.
pub(crate) const MEASURES_USAGE: bool = true;

/// Reaps one exited child (or, with `stops`, reports one stop or
/// continue): its pid and what happened. `None` when nothing changed.
///
/// `wait4`, not `waitpid`: the reap is the one moment the kernel tells
/// what a process used, and the owner is not the command's parent (the
/// keeper is), so its own `RUSAGE_CHILDREN` never sees it.
pub(crate) fn reap_any(stops: bool) -> Option<(u32, Change)> {
    let mut flags = libc::WNOHANG | libc::__WALL;
    if stops {
        flags |= libc::WUNTRACED | libc::WCONTINUED;
    }
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 fills it and `status`.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 with valid pointers to locals.
        let pid = unsafe { libc::wait4(-1, &mut status, flags, &mut usage) };
        if pid <= 0 {
            return None;
        }
        let change = if libc::WIFEXITED(status) {
            Change::Exited(
                Termination::Code(libc::WEXITSTATUS(status)),
                Some(used(&usage)),
            )
        } else if libc::WIFSIGNALED(status) {
            Change::Exited(
                Termination::Signal(libc::WTERMSIG(status)),
                Some(used(&usage)),
            )
        } else if libc::WIFSTOPPED(status) {
            Change::Stopped(libc::WSTOPSIG(status))
        } else if libc::WIFCONTINUED(status) {
            Change::Continued
        } else {
            continue;
        };
        return Some((pid as u32, change));
    }
}

/// A `wait4` report as a [`ResourceUsage`] (`ru_maxrss` is in KiB on Linux).
fn used(usage: &libc::rusage) -> ResourceUsage {
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    ResourceUsage {
        user_time: time(usage.ru_utime),
        system_time: time(usage.ru_stime),
        max_rss: (usage.ru_maxrss.max(0) as u64).saturating_mul(1024),
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
    /// The process that sent it (`kill`, `sigqueue`, `tgkill`,
    /// `pidfd_send_signal`: its `si_pid`); `None` when the kernel did.
    pub from: Option<u32>,
}

/// The keeper's one blocking wait: its descriptors and its signals (read
/// through a signalfd; they are blocked, so nothing runs asynchronously in
/// the keeper).
///
/// Every signal that can be blocked is: the keeper's command can signal
/// it (`kill -USR1 $PPID` — CPython's `test_communicate_eintr`, Xvfb
/// telling its parent it is ready), and any signal left at its default
/// disposition killed the keeper ("tether keeper died unexpectedly",
/// exit 125, the output lost: issue 34 item 7). What a blocked signal
/// would have done is the keeper's to decide (see `Keeper::on_signals`).
/// The command starts with an empty mask (`exec_child`). A fault the
/// keeper itself causes (`SIGSEGV`, …) still kills it: the kernel
/// unblocks a synchronous fault signal.
pub(crate) struct Waiter {
    sigfd: SignalFd,
}

impl Waiter {
    pub(crate) fn new() -> io::Result<Waiter> {
        // All of them (sigfillset): glibc's sigprocmask leaves out its
        // own two real-time signals (32, 33), the kernel SIGKILL and
        // SIGSTOP.
        let mask = SigSet::all();
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
                // SI_USER (kill, pidfd_send_signal), SI_QUEUE, SI_TKILL:
                // a process sent it, and `ssi_pid` names it (in the
                // keeper's PID namespace). Anything else is the kernel's.
                let sent = matches!(
                    info.ssi_code,
                    libc::SI_USER | libc::SI_QUEUE | libc::SI_TKILL
                );
                wake.signals.push(Arrival {
                    signal: info.ssi_signo as i32,
                    from: sent.then_some(info.ssi_pid),
                });
            }
        }
        for (slot, pfd) in wake.ready.iter_mut().zip(&pfds[1..]) {
            *slot = pfd.revents != 0;
        }
        Ok(wake)
    }
}

/// Closes every descriptor above stderr but `keep`: what the owner left
/// inheritable (a pipe made with `os.pipe()` + `set_inheritable`, a
/// descriptor its own parent passed it) must reach neither the command
/// (which gets exactly the three it was given, as `subprocess` with
/// `close_fds=True`) nor the keeper itself — a warm keeper lives as long as
/// its owner, and one holding a pipe's write end kept that pipe's reader
/// from EOF after the owner closed its own copy.
///
/// `close_range(2)` (Linux 5.9): two calls, no file system. Listing
/// `/dev/fd` instead failed wherever udev (or a container runtime) did
/// not make that link — a bare devtmpfs in an initramfs, a `FROM scratch`
/// image, a chroot — and the keeper could not start (issue 35). Before
/// 5.9 (or under a seccomp filter that refuses it): `/proc/self/fd`, and
/// without `/proc` every number below the descriptor limit.
pub(crate) fn close_inherited(keep: RawFd) -> io::Result<()> {
    let close_range = |first: RawFd, last: libc::c_uint| {
        // SAFETY: close_range(2) with integer arguments; nothing of this
        // process owns the descriptors closed (inherited, unknown to it).
        unsafe { libc::syscall(libc::SYS_close_range, first as libc::c_uint, last, 0) == 0 }
    };
    let below = keep <= 3 || close_range(3, (keep - 1) as libc::c_uint);
    if below && close_range(keep + 1, libc::c_uint::MAX) {
        return Ok(());
    }
    // Listed first, closed after: the listing's own descriptor is among
    // them, and is closed (by the drop) before the loop. Single-threaded:
    // no number is reused meanwhile.
    let open: Vec<RawFd> = match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => dir
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit fills the struct it is given.
            if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
                return Err(io::Error::last_os_error());
            }
            // The kernel's own ceiling (`fs.nr_open`) is 2^20 by default.
            (0..limit.rlim_cur.min(1 << 20) as RawFd).collect()
        }
    };
    for fd in open.into_iter().filter(|&fd| fd > 2 && fd != keep) {
        // SAFETY: as above; EBADF (a number not open, the listing's own
        // descriptor closed already) is harmless.
        unsafe { libc::close(fd) };
    }
    Ok(())
}

/// The keeper's owner — the process that started it — pinned by a pidfd:
/// where a signal its command sends "its parent" goes (see
/// `Keeper::on_signals`).
pub(crate) struct Owner(Option<Pidfd>);

impl Owner {
    /// The owner the keeper's own spawn tag names (`owner_pid`,
    /// `owner_start`), if that process is alive: a pidfd is opened for the
    /// pid, then the pid's start time is read, and the pin counts only if
    /// it is the tag's and the pidfd still shows the process alive after
    /// the read (until it exits, the pid names no other process).
    ///
    /// Not `getppid()`: an owner that died before the keeper got this far
    /// (between its spawn and this call) left the keeper re-parented to a
    /// subreaper — `tether mcp`, an agent, a service manager — which the
    /// parent pid then named, and every "tell my parent" signal of the
    /// command went to that process instead.
    pub(crate) fn from_tag(tag: Option<&crate::spawn_tag::SpawnTag>) -> Owner {
        let pinned = tag.filter(|t| t.owner_pid > 1).and_then(|tag| {
            let pidfd = Pidfd::open(tag.owner_pid).ok()?;
            let stat = read_stat(tag.owner_pid).ok()?;
            (stat.start_time == tag.owner_start && !stat.has_exited() && !pidfd.has_exited())
                .then_some(pidfd)
        });
        Owner(pinned)
    }

    /// Sends `sig` to the owner through its pidfd, as `sigqueue(3)` would:
    /// `si_code` `SI_QUEUE`, `si_pid` the keeper's, `si_value` `value`
    /// (so the owner can tell a signal passed on from one sent to it).
    /// `false` if the owner is gone.
    pub(crate) fn signal(&self, sig: i32, value: usize) -> bool {
        let Some(pidfd) = &self.0 else { return false };
        let info = QueuedInfo {
            signo: sig,
            errno: 0,
            code: libc::SI_QUEUE,
            #[cfg(target_pointer_width = "64")]
            _pad: 0,
            pid: std::process::id() as i32,
            // SAFETY: getuid cannot fail and touches no memory.
            uid: unsafe { libc::getuid() },
            value,
            _rest: [0; QUEUED_REST],
        };
        pidfd.send_signal_info(sig, &info as *const QueuedInfo as *const libc::siginfo_t)
    }
}

/// A `siginfo_t` as `sigqueue(3)` fills it (`_sifields._rt`), then zeros.
#[repr(C)]
struct QueuedInfo {
    signo: i32,
    errno: i32,
    code: i32,
    #[cfg(target_pointer_width = "64")]
    _pad: i32,
    pid: i32,
    uid: u32,
    value: usize,
    _rest: [u8; QUEUED_REST],
}

/// The bytes of a `siginfo_t` (128) after the `SI_QUEUE` fields: 32 of
/// them on 64-bit targets (`si_value` is pointer-aligned), 24 on 32-bit.
const QUEUED_REST: usize = 128
    - if cfg!(target_pointer_width = "64") {
        32
    } else {
        24
    };

const _: () = assert!(std::mem::size_of::<QueuedInfo>() == std::mem::size_of::<libc::siginfo_t>());

/// Whether a signal sent by `from` came from the keeper's tree: `from` is
/// a descendant of the keeper (every process of the session is: it is
/// their subreaper, or their namespace init is its child), alive or a
/// zombie — or already gone, reaped by its parent: a `kill` program the
/// command ran is, by the time the keeper reads the signal, and an
/// outsider that signals a keeper is rarer than that. The keeper itself
/// is not its tree.
///
/// A vanished sender leaves nothing to tell the two apart (no pidfd, no
/// `/proc` entry, no cgroup), so one of two errors is chosen. Counting it
/// as the tree's is the harmless one: all that does is pass a signal
/// `meant_for_parent` (never `SIGTERM`, which stops the keeper whoever
/// sent it) on to the owner, which runs as the keeper's user: whoever
/// could signal the keeper could have signalled the owner directly, so
/// an outsider gains nothing. Counting it as an outsider's would drop
/// the tree's own notices to its parent (`/bin/kill -USR1 $PPID`)
/// whenever the `kill` program is reaped before the keeper reads the
/// signal.
pub(crate) fn sent_by_tree(from: u32) -> bool {
    let me = std::process::id();
    if from == me {
        return false;
    }
    let mut pid = from;
    // A chain deeper than this is not a tree of ours (pid_max is 2^22).
    for _ in 0..4096 {
        match read_stat(pid) {
            Ok(stat) if stat.ppid == me => return true,
            Ok(stat) if stat.ppid > 1 => pid = stat.ppid,
            Ok(_) => return false,
            // The sender is gone (reaped); an ancestor that vanished
            // mid-walk leaves nothing to go on.
            Err(_) => return pid == from,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::process::{Child, Command, Stdio};
    use tether_testkit::{TAG_VAR, TagGuard, wait_for_count};

    /// A tree below a shell of the test's own: a `sleep` in the shell's
    /// group, a `setsid` shell that ignores `SIGTERM` (so do the children
    /// it starts), and its `sleep`. Returned once all four run.
    fn tree(guard: &TagGuard) -> Child {
        let root = Command::new("sh")
            .args([
                "-c",
                "sleep 1000 & setsid sh -c 'trap \"\" TERM; sleep 1000 & wait' & wait",
            ])
            .env(TAG_VAR, guard.tag())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        assert_eq!(wait_for_count(guard.tag(), 4, Duration::from_secs(10)), 4);
        root
    }

    fn listed(members: &[Member]) -> Vec<(u32, u32)> {
        let mut listed: Vec<(u32, u32)> = members.iter().map(|m| (m.pid, m.pgrp)).collect();
        listed.sort();
        listed
    }

    /// The pidfd's own answer (Linux 6.13+) and `/proc/<pid>/stat` (the
    /// fallback before it) prove the same members, with the same groups.
    #[test]
    fn both_proofs_list_the_same_members() {
        let guard = TagGuard::new("walk-proofs");
        let mut root = tree(&guard);
        let by_stat = walk_from(root.id(), None, Proof::Stat, None, |_| {});
        assert_eq!(by_stat.len(), 3, "{:?}", listed(&by_stat));
        let groups: HashSet<u32> = by_stat.iter().map(|m| m.pgrp).collect();
        assert_eq!(groups.len(), 2, "the root's group and the setsid shell's");
        if proof() == Proof::PidfdInfo {
            let by_pidfd = walk_from(root.id(), None, Proof::PidfdInfo, None, |_| {});
            assert_eq!(listed(&by_pidfd), listed(&by_stat));
        }
        root.kill().unwrap();
        root.wait().unwrap();
    }

    /// A kill's walk signals every member outside the group before
    /// listing its children, and lists the children of those the signal
    /// did not kill — with either proof.
    #[test]
    fn a_kill_walk_reaches_the_children_of_survivors() {
        for proof in [Proof::Stat, proof()] {
            let guard = TagGuard::new("walk-kill");
            let mut root = tree(&guard);
            // SAFETY: getpgid takes a pid and touches no memory.
            let group = unsafe { libc::getpgid(root.id() as libc::pid_t) } as u32;
            let mut visited = Vec::new();
            let members = walk_from(root.id(), None, proof, Some(Some(group)), |m| {
                visited.push(m.pid);
                m.signal(libc::SIGTERM);
            });
            assert_eq!(members.len(), 3, "{proof:?}: {:?}", listed(&members));
            visited.sort();
            let all: Vec<u32> = listed(&members).into_iter().map(|(pid, _)| pid).collect();
            assert_eq!(visited, all, "{proof:?}");
            root.kill().unwrap();
            root.wait().unwrap();
        }
    }

    /// A member known by pid whose held pidfd shows it exited proves no
    /// child, though the pid read as the child's parent is in the set:
    /// the pid now names another process (here: the member's pid is the
    /// test's live `sh`, its pidfd an exited `true`'s — a reaped member
    /// whose pid was reused). With the member alive, the child is proven.
    #[test]
    fn a_child_is_not_proven_through_an_exited_parent() {
        let guard = TagGuard::new("walk-reused-parent");
        let mut parent = Command::new("sh")
            .args(["-c", "sleep 1000 & wait"])
            .env(TAG_VAR, guard.tag())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        assert_eq!(wait_for_count(guard.tag(), 2, Duration::from_secs(10)), 2);
        let child = children_of_process(parent.id(), 1);
        assert_eq!(child.len(), 1, "{child:?}");
        // Opened before `true` is reaped (one per proof: a pidfd is not
        // cloned), still readable after.
        let mut gone = Command::new("true").spawn().unwrap();
        let mut exited = vec![
            Pidfd::open(gone.id()).unwrap(),
            Pidfd::open(gone.id()).unwrap(),
        ];
        gone.wait().unwrap();
        let known: Known = HashMap::from([(parent.id(), Some(0))]);
        for proof in [Proof::Stat, proof()] {
            let dead = [Member {
                pid: parent.id(),
                pgrp: 0,
                pidfd: exited.pop().unwrap(),
            }];
            assert_eq!(
                prove(child[0], &known, &dead, proof).err(),
                Some(Unproven::ParentExited),
                "{proof:?}"
            );
            let alive = [Member {
                pid: parent.id(),
                pgrp: 0,
                pidfd: Pidfd::open(parent.id()).unwrap(),
            }];
            assert!(prove(child[0], &known, &alive, proof).is_ok(), "{proof:?}");
        }
        parent.kill().unwrap();
        parent.wait().unwrap();
    }
}
