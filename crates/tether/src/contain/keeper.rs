//! The keeper: a small single-threaded process between an owner and one
//! command.
//!
//! Theory of operation:
//!
//! 1. The owner starts the keeper with one end of a Unix socket as its
//!    stdin. That socket is both the control channel and the *lifeline*:
//!    only the owner holds the other end (close-on-exec), so EOF means the
//!    owner is gone — by exit, panic, `SIGKILL` or OOM alike.
//! 2. The keeper marks itself `PR_SET_CHILD_SUBREAPER`: everything the
//!    command forks, including `setsid` + double-fork escapes, stays its
//!    descendant. It is the session's only reaper.
//! 3. It waits for a `Spawn` request (a warm keeper waits here, already
//!    holding its lifeline), forks, and in the child sets up the process
//!    group or session, resets the signal mask and dispositions, installs
//!    stdio and execs. With a PID namespace, the child is a pid-1 init with
//!    `PR_SET_PDEATHSIG(SIGKILL)` (safe: the keeper is single-threaded), so
//!    even a `SIGKILL`ed keeper takes the namespace down with it.
//! 4. It polls the socket and a signalfd. It reaps everything, reports the
//!    main process's exit, and kills the tree when asked, at the timeout, on
//!    lifeline EOF, or (policy) when the main process exits with
//!    descendants left. Killing is a ladder — a signal, a grace period,
//!    then `SIGKILL` rounds until `waitpid` says `ECHILD` — and every
//!    process is signalled through a pidfd opened and verified as a tree
//!    member first, so a recycled pid is never hit.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::channel::{recv_into, send_frame};
use super::exec::{
    Exec, INIT_EXECED, INIT_EXITED, INIT_FORKED, enter_pid_namespace, errno_of, init_main,
    posix_spawn, read_report,
};
use super::linux::{Pidfd, children_of, command_line, read_stat, set_child_subreaper};
use super::protocol::{
    ContainmentKind, Event, FrameBuffer, Leftovers, Request, Scope, SpawnSpec, Termination,
};

/// How long SIGKILL rounds go on before a kill is reported as incomplete
/// (a process in uninterruptible sleep can ignore SIGKILL for a while).
const VERIFY_WINDOW: Duration = Duration::from_secs(5);
/// Re-sweep interval once SIGKILL is being sent: orphans reparented to the
/// keeper raise no event, so the keeper looks again at this pace until the
/// tree is empty (measured: a fork-looping tree empties in ~20 ms).
const KILL_SWEEP: Duration = Duration::from_millis(5);

/// The argument that makes a program that embeds tether act as its keeper.
pub const KEEPER_ARG: &str = "__tether-keeper";

/// Runs the keeper on the socket at fd 0 and exits the process.
pub fn main() -> ! {
    let code = match serve() {
        Ok(()) => 0,
        Err(_) => 125,
    };
    std::process::exit(code)
}

/// Serves sessions one after the other until the owner goes away: a keeper
/// whose tree is empty goes back to waiting for the next `Spawn`, so an
/// owner that recycles keepers pays for no keeper exec or exit per command.
/// A keeper that entered a PID namespace serves one session only (its
/// namespace is spent).
fn serve() -> io::Result<()> {
    let mut keeper = Keeper::new()?;
    loop {
        let Some((spec, fds)) = keeper.next_spawn()? else {
            return Ok(());
        };
        keeper.reset(spec);
        if fds.len() != 3 {
            keeper.send(&Event::SpawnFailed {
                errno: libc::EBADF,
                stage: 5,
            });
            continue;
        }
        let started = keeper.spawn(&fds);
        drop(fds);
        match started {
            Ok(event) => keeper.send(&event),
            Err((stage, errno)) => {
                keeper.send(&Event::SpawnFailed {
                    errno: errno as i32,
                    stage,
                });
                if keeper.spent {
                    keeper.flush();
                    return Ok(());
                }
                continue;
            }
        }
        keeper.run();
        if keeper.ctl.is_none() || keeper.spent {
            return Ok(());
        }
    }
}

/// Where the kill ladder stands.
#[derive(Clone, Copy, Debug)]
enum Ladder {
    /// Nothing is being killed.
    Idle,
    /// `signal` went out to `scope`; SIGKILL follows at `deadline`.
    /// Meanwhile processes forked after the first sweep get `signal` too.
    Grace {
        deadline: Instant,
        signal: i32,
        scope: Scope,
    },
    /// SIGKILL rounds until the tree is empty or `give_up` passes.
    Killing { give_up: Instant },
}

struct Keeper {
    ctl: Option<OwnedFd>,
    /// Encoded events not sent yet.
    outbox: Vec<u8>,
    frames: FrameBuffer,
    sigfd: SignalFd,
    /// Pid of the keeper's child: the command, or the namespace init.
    child: u32,
    /// The command (host pid); reaped or reported exited → None.
    main: Option<u32>,
    main_done: bool,
    /// Pipe from the namespace init (pidns only).
    init_reports: Option<OwnedFd>,
    /// This session runs in a PID namespace (the keeper's child is its init).
    pidns: bool,
    /// The keeper cannot serve another session (it entered a namespace).
    spent: bool,
    spec: SpawnSpec,
    ladder: Ladder,
    timeout_at: Option<Instant>,
    timed_out: bool,
    /// Pids of descendants a kill signalled (the main process excluded).
    signalled: HashSet<u32>,
}

impl Keeper {
    /// Sets the keeper process up: subreaper, lifeline off fd 0, signals.
    fn new() -> io::Result<Keeper> {
        set_child_subreaper()?;
        // Move the socket off fd 0 (close-on-exec, so no command inherits
        // the lifeline), and put /dev/null in its place.
        let ctl = dup_high(0)?;
        let null = std::fs::File::open("/dev/null")?;
        nix::unistd::dup2_stdin(null.as_fd())?;
        // SIGPIPE: a dead owner must be an EPIPE, not the keeper's death.
        // SAFETY: setting a disposition to SIG_IGN installs no handler code.
        unsafe { nix::sys::signal::signal(Signal::SIGPIPE, nix::sys::signal::SigHandler::SigIgn) }?;
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
        Ok(Keeper {
            ctl: Some(ctl),
            outbox: Vec::new(),
            frames: FrameBuffer::default(),
            sigfd,
            child: 0,
            main: None,
            main_done: false,
            init_reports: None,
            pidns: false,
            spent: false,
            spec: SpawnSpec::default(),
            ladder: Ladder::Idle,
            timeout_at: None,
            timed_out: false,
            signalled: HashSet::new(),
        })
    }

    /// Waits for the next `Spawn` and the descriptors that came with it.
    /// `None`: the owner went away (or the keeper was told to stop) first.
    /// Anything else that arrives while idle belongs to a finished session
    /// and is dropped.
    fn next_spawn(&mut self) -> io::Result<Option<(SpawnSpec, Vec<OwnedFd>)>> {
        self.flush();
        let mut fds = Vec::new();
        loop {
            while let Some(payload) = self.frames.next_payload()? {
                if let Ok(Request::Spawn(spec)) = Request::decode(&payload) {
                    return Ok(Some((spec, fds)));
                }
            }
            let Some(ctl) = self.ctl.as_ref() else {
                return Ok(None);
            };
            let mut pfds = [
                pollfd(ctl.as_raw_fd()),
                pollfd(self.sigfd.as_fd().as_raw_fd()),
            ];
            // SAFETY: a valid array of two pollfds.
            if unsafe { libc::poll(pfds.as_mut_ptr(), 2, -1) } < 0 {
                continue; // EINTR
            }
            if pfds[1].revents != 0 {
                while let Ok(Some(info)) = self.sigfd.read_signal() {
                    if info.ssi_signo as i32 == libc::SIGTERM {
                        return Ok(None);
                    }
                }
            }
            if pfds[0].revents != 0 {
                let (n, more) = recv_into(ctl.as_fd(), &mut self.frames)?;
                fds.extend(more);
                if n == 0 {
                    return Ok(None);
                }
            }
        }
    }

    /// Forgets the previous session.
    fn reset(&mut self, spec: SpawnSpec) {
        self.child = 0;
        self.main = None;
        self.main_done = false;
        self.init_reports = None;
        self.pidns = false;
        self.ladder = Ladder::Idle;
        self.timeout_at = spec
            .timeout_ms
            .map(|ms| Instant::now() + Duration::from_millis(ms));
        self.timed_out = false;
        self.signalled.clear();
        self.spec = spec;
    }

    /// Queues an event; [`flush`](Self::flush) sends the queue in one
    /// write before the keeper next waits, so events of one wake-up (the
    /// exit and the empty tree, say) reach the owner in one wake-up too.
    fn send(&mut self, event: &Event) {
        self.outbox.extend_from_slice(&event.encode());
    }

    fn flush(&mut self) {
        if let Some(ctl) = &self.ctl
            && !self.outbox.is_empty()
        {
            // The owner may be gone; the lifeline EOF handles that.
            let _ = send_frame(ctl.as_fd(), &self.outbox, &[]);
        }
        self.outbox.clear();
    }

    /// Forks the command (or the namespace init that forks it).
    fn spawn(&mut self, stdio: &[OwnedFd]) -> Result<Event, (u8, Errno)> {
        let exec = Exec::prepare(&self.spec).map_err(|e| (3, e))?;
        let containment = match self.spec.containment {
            Some(ContainmentKind::Subreaper) => ContainmentKind::Subreaper,
            wanted => match enter_pid_namespace() {
                Ok(()) => {
                    self.pidns = true;
                    self.spent = true;
                    ContainmentKind::PidNamespace
                }
                Err(e) => {
                    self.spent |= e.spent;
                    // Required, or the keeper is no longer usable: fail
                    // rather than run the command somewhere unreported.
                    if wanted == Some(ContainmentKind::PidNamespace) || e.spent {
                        return Err((4, e.errno));
                    }
                    ContainmentKind::Subreaper
                }
            },
        };
        let stdio = [
            stdio[0].as_raw_fd(),
            stdio[1].as_raw_fd(),
            stdio[2].as_raw_fd(),
        ];
        let (main, start_time, pidfs_inode) = match containment {
            ContainmentKind::Subreaper => {
                let pid = posix_spawn(&exec, stdio)?;
                self.child = pid;
                // Our own unreaped child: its pid stays valid even if it
                // has already exited.
                identify(pid).map_err(|e| (3, errno_of(&e)))?
            }
            ContainmentKind::PidNamespace => self.spawn_init(&exec, stdio)?,
        };
        self.main = Some(main);
        Ok(Event::Started {
            pid: main,
            start_time,
            pidfs_inode,
            containment,
        })
    }

    /// Forks the pid-1 init of a fresh PID namespace, which forks the
    /// command and relays its fate over a pipe. Returns the command's pid as
    /// seen from here.
    ///
    /// The command waits at a gate before exec until the keeper has found
    /// its host pid: a command that exits at once (`sh -c 'echo $$'`) would
    /// otherwise be reaped by init before the keeper could name it.
    fn spawn_init(
        &mut self,
        exec: &Exec,
        stdio: [RawFd; 3],
    ) -> Result<(u32, u64, Option<u64>), (u8, Errno)> {
        let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
        let (report_r, report_w) = nix::unistd::pipe2(cloexec).map_err(|e| (2, e))?;
        let (gate_r, gate_w) = nix::unistd::pipe2(cloexec).map_err(|e| (2, e))?;
        let me = Pidfd::open(std::process::id()).map_err(|e| (2, errno_of(&e)))?;
        let ctl = self.ctl.as_ref().map(|c| c.as_raw_fd()).unwrap_or(-1);
        // SAFETY: the keeper is single-threaded, so the child may do anything.
        match unsafe { nix::unistd::fork() }.map_err(|e| (2, e))? {
            nix::unistd::ForkResult::Child => {
                // SAFETY: closing our copy of the gate's write end.
                unsafe { libc::close(gate_w.as_raw_fd()) };
                init_main(
                    exec,
                    stdio,
                    &me,
                    ctl,
                    report_r.as_raw_fd(),
                    report_w.as_raw_fd(),
                    gate_r.as_raw_fd(),
                )
            }
            nix::unistd::ForkResult::Parent { child } => {
                drop(report_w);
                drop(gate_r);
                self.child = child.as_raw() as u32;
                let fail = |child| {
                    let _ = waitpid(child, None);
                };
                let (kind, value, extra) =
                    read_report(report_r.as_fd()).map_err(|e| (4, errno_of(&e)))?;
                if kind != INIT_FORKED {
                    fail(child);
                    return Err((value as u8, Errno::from_raw(extra)));
                }
                // `value` is the command's pid inside the namespace; it is
                // held at the gate, so it is alive and init's child.
                let host = children_of(self.child)
                    .into_iter()
                    .find(|&pid| ns_pid_of(pid) == Some(value as u32));
                let Some(identity) = host.and_then(|pid| identify(pid).ok()) else {
                    drop(gate_w);
                    fail(child);
                    return Err((4, Errno::ESRCH));
                };
                // Identified while held at the gate: once released, it may
                // exit and be reaped by init at any moment.
                nix::unistd::write(&gate_w, b"g").map_err(|e| (4, e))?;
                drop(gate_w);
                let (kind, value, extra) =
                    read_report(report_r.as_fd()).map_err(|e| (4, errno_of(&e)))?;
                if kind != INIT_EXECED {
                    fail(child);
                    return Err((value as u8, Errno::from_raw(extra)));
                }
                self.init_reports = Some(report_r);
                Ok(identity)
            }
        }
    }

    /// One session's event loop; returns once its tree is empty.
    fn run(&mut self) {
        loop {
            self.reap();
            if self.main_done && self.tree_is_empty() {
                let killed = self.signalled.len() as u32;
                self.send(&Event::TreeEmpty { killed });
                self.flush();
                return;
            }
            let now = Instant::now();
            if self.timeout_at.is_some_and(|t| now >= t) && !self.main_done {
                self.timeout_at = None;
                self.timed_out = true;
                self.begin_kill(libc::SIGTERM, Scope::Tree, self.spec.grace_ms);
            }
            self.advance_ladder(now);
            self.wait_for_event();
        }
    }

    /// Polls the socket, the signalfd and the init pipe until something
    /// happens or the nearest deadline passes.
    fn wait_for_event(&mut self) {
        self.flush();
        let deadline = [
            self.timeout_at,
            match self.ladder {
                Ladder::Idle => None,
                Ladder::Grace { deadline, .. } => Some(deadline.min(Instant::now() + KILL_SWEEP)),
                Ladder::Killing { give_up } => Some(give_up.min(Instant::now() + KILL_SWEEP)),
            },
        ]
        .into_iter()
        .flatten()
        .min();
        let timeout_ms = match deadline {
            Some(d) => {
                d.saturating_duration_since(Instant::now())
                    .as_millis()
                    .min(i32::MAX as u128) as i32
                    + 1
            }
            None => -1,
        };
        let mut fds = vec![pollfd(self.sigfd.as_fd().as_raw_fd())];
        let ctl_raw = self.ctl.as_ref().map(|c| c.as_raw_fd());
        if let Some(raw) = ctl_raw {
            fds.push(pollfd(raw));
        }
        let init_raw = self.init_reports.as_ref().map(|r| r.as_raw_fd());
        if let Some(raw) = init_raw {
            fds.push(pollfd(raw));
        }
        // SAFETY: `fds` is a valid array of pollfd for its length.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if rc <= 0 {
            return;
        }
        let ready = |raw: Option<RawFd>| {
            raw.and_then(|raw| fds.iter().find(|p| p.fd == raw))
                .is_some_and(|p| p.revents != 0)
        };
        if fds[0].revents != 0 {
            self.drain_signals();
        }
        if ready(ctl_raw) {
            self.read_requests();
        }
        if ready(init_raw) {
            self.read_init_report();
        }
    }

    fn drain_signals(&mut self) {
        while let Ok(Some(info)) = self.sigfd.read_signal() {
            let sig = info.ssi_signo as i32;
            // Someone asked the keeper itself to stop: treat it like the
            // owner going away. SIGINT/SIGHUP/SIGQUIT are the owner's to
            // forward (a terminal sends them to the owner's group, which
            // includes the keeper), so the keeper ignores them.
            if sig == libc::SIGTERM {
                self.begin_kill(libc::SIGTERM, Scope::Tree, self.spec.grace_ms);
            }
        }
    }

    fn read_requests(&mut self) {
        let Some(ctl) = self.ctl.as_ref() else { return };
        match recv_into(ctl.as_fd(), &mut self.frames) {
            Ok((0, _)) | Err(_) => {
                // Lifeline EOF: the owner is gone. Nobody is left to report
                // to; kill the tree and exit once it is empty.
                self.ctl = None;
                self.begin_kill(libc::SIGTERM, Scope::Tree, self.spec.grace_ms);
                return;
            }
            Ok(_) => {}
        }
        while let Ok(Some(payload)) = self.frames.next_payload() {
            match Request::decode(&payload) {
                Ok(Request::Signal { signal, scope }) => {
                    self.deliver(signal, scope);
                }
                Ok(Request::Kill {
                    signal,
                    scope,
                    grace_ms,
                }) => {
                    self.begin_kill(signal, scope, grace_ms);
                }
                Ok(Request::Spawn(_)) | Err(_) => {}
            }
        }
    }

    fn read_init_report(&mut self) {
        let Some(reports) = self.init_reports.as_ref() else {
            return;
        };
        match read_report(reports.as_fd()) {
            Ok((INIT_EXITED, status, _)) => self.main_exited(decode_wait_status(status)),
            Ok(_) => {}
            Err(_) => self.init_reports = None,
        }
    }

    /// Reaps every child that has exited.
    fn reap(&mut self) {
        loop {
            match waitpid(
                None::<Pid>,
                Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL),
            ) {
                Ok(WaitStatus::StillAlive) | Err(_) => return,
                Ok(status) => {
                    let Some(pid) = status.pid().map(|p| p.as_raw() as u32) else {
                        return;
                    };
                    let termination = match status {
                        WaitStatus::Exited(_, code) => Termination::Code(code),
                        WaitStatus::Signaled(_, sig, _) => Termination::Signal(sig as i32),
                        _ => continue,
                    };
                    if !self.pidns && Some(pid) == self.main && !self.main_done {
                        self.main_exited(termination);
                    } else if self.pidns && pid == self.child && !self.main_done {
                        // Init died before reporting (killed from outside):
                        // the command died with the namespace.
                        self.main_exited(Termination::Signal(libc::SIGKILL));
                    }
                }
            }
        }
    }

    fn main_exited(&mut self, termination: Termination) {
        if self.main_done {
            return;
        }
        self.main_done = true;
        self.main = None;
        let timed_out = self.timed_out;
        self.send(&Event::MainExited {
            termination,
            timed_out,
        });
        if self.spec.leftovers == Leftovers::Kill
            && matches!(self.ladder, Ladder::Idle)
            && !self.tree_is_empty()
        {
            self.begin_kill(libc::SIGTERM, Scope::Tree, self.spec.grace_ms);
        }
    }

    fn tree_is_empty(&self) -> bool {
        // ECHILD from a non-reaping wait: no children at all, live or
        // zombie. Everything of the session is a descendant of the keeper
        // (subreaper / pid namespace), so no children means no session.
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

    fn begin_kill(&mut self, signal: i32, scope: Scope, grace_ms: u64) {
        self.deliver(signal, scope);
        let deadline = Instant::now() + Duration::from_millis(grace_ms);
        self.ladder = match self.ladder {
            Ladder::Idle => Ladder::Grace {
                deadline,
                signal,
                scope,
            },
            Ladder::Grace { deadline: old, .. } => Ladder::Grace {
                deadline: old.min(deadline),
                signal,
                scope,
            },
            killing @ Ladder::Killing { .. } => killing,
        };
        if grace_ms == 0 {
            self.advance_ladder(Instant::now());
        }
    }

    fn advance_ladder(&mut self, now: Instant) {
        match self.ladder {
            Ladder::Idle => {}
            Ladder::Grace {
                deadline,
                signal,
                scope,
            } => {
                if now >= deadline {
                    self.ladder = Ladder::Killing {
                        give_up: now + VERIFY_WINDOW,
                    };
                    self.deliver(libc::SIGKILL, Scope::Tree);
                } else if scope == Scope::Tree {
                    // A fork racing the first sweep made a process that
                    // never saw the signal: sweep again, new ones only.
                    self.deliver_new(signal);
                }
            }
            Ladder::Killing { give_up } => {
                self.reap();
                if self.tree_is_empty() {
                    return;
                }
                self.deliver(libc::SIGKILL, Scope::Tree);
                if now >= give_up {
                    let survivors = self
                        .tree()
                        .into_iter()
                        .map(|(pid, _, _)| (pid, command_line(pid).into_bytes()))
                        .collect();
                    self.send(&Event::KillFailed { survivors });
                    // Stay tracked and killable: a later Kill starts over.
                    // With the owner gone there is nobody to ask again, so
                    // keep trying.
                    self.ladder = if self.ctl.is_none() {
                        Ladder::Killing {
                            give_up: now + VERIFY_WINDOW,
                        }
                    } else {
                        Ladder::Idle
                    };
                }
            }
        }
    }

    /// Sends `signal` to `scope`, once per process. A stopped process would
    /// hold a pending signal forever, so anything but SIGKILL and the stop
    /// signals is followed by SIGCONT.
    ///
    /// The main process's group gets one `killpg` while its leader is
    /// unreaped (the kernel does not reuse the id of a live group leader):
    /// it reaches the whole group at once, which stops a fork loop in the
    /// group far faster than a per-process sweep (measured: a fork storm
    /// dies in ~25 ms with it, ~400 ms without). Members of that group are
    /// then skipped by the sweep, so no process gets the signal twice.
    fn deliver(&mut self, signal: i32, scope: Scope) {
        let cont = continues(signal);
        let group = self.main;
        if let Some(main) = group {
            // SAFETY: kill(2) with a negative pid signals a group.
            unsafe { libc::kill(-(main as libc::pid_t), signal) };
            if cont {
                // SAFETY: as above.
                unsafe { libc::kill(-(main as libc::pid_t), libc::SIGCONT) };
            }
        }
        if scope == Scope::Group {
            return;
        }
        for (pid, pidfd, pgrp) in self.tree() {
            let reached = Some(pgrp) == group || pidfd.send_signal(signal).is_ok();
            if reached {
                if Some(pid) != self.main && pid != self.child {
                    self.signalled.insert(pid);
                }
                if cont && Some(pgrp) != group {
                    let _ = pidfd.send_signal(libc::SIGCONT);
                }
            }
        }
    }

    /// Sends `signal` (then SIGCONT) to tree members not signalled yet.
    fn deliver_new(&mut self, signal: i32) {
        for (pid, pidfd, _) in self.tree() {
            if !self.signalled.contains(&pid)
                && Some(pid) != self.main
                && pid != self.child
                && pidfd.send_signal(signal).is_ok()
            {
                self.signalled.insert(pid);
                if continues(signal) {
                    let _ = pidfd.send_signal(libc::SIGCONT);
                }
            }
        }
    }

    /// Every live process of the session, each pinned by a pidfd and
    /// verified to be a descendant of the keeper *after* the pidfd was
    /// opened — so a pid recycled between listing and opening is skipped.
    fn tree(&self) -> Vec<(u32, Pidfd, u32)> {
        let me = std::process::id();
        let mut known: HashSet<u32> = HashSet::from([me]);
        let mut frontier = vec![me];
        let mut members = Vec::new();
        while let Some(parent) = frontier.pop() {
            for pid in children_of(parent) {
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
                frontier.push(pid);
                members.push((pid, pidfd, stat.pgrp));
            }
        }
        members
    }
}

/// Whether a signal should be followed by SIGCONT: not SIGKILL (acts on
/// stopped processes) and not the stop signals themselves.
fn continues(signal: i32) -> bool {
    !matches!(
        signal,
        libc::SIGKILL | libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
    )
}

/// Pid, start time and pidfs inode of a process that cannot go away yet.
fn identify(pid: u32) -> io::Result<(u32, u64, Option<u64>)> {
    let pidfd = Pidfd::open(pid)?;
    let start_time = read_stat(pid)?.start_time;
    Ok((pid, start_time, pidfd.inode()))
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

fn decode_wait_status(status: i32) -> Termination {
    if libc::WIFSIGNALED(status) {
        Termination::Signal(libc::WTERMSIG(status))
    } else {
        Termination::Code(libc::WEXITSTATUS(status))
    }
}

/// The innermost pid of `pid` (last field of `NSpid:` in its status).
fn ns_pid_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
    line.split_ascii_whitespace().last()?.parse().ok()
}

/// Duplicates `fd` to a close-on-exec descriptor numbered 10 or above.
fn dup_high(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC returns a fresh descriptor or -1.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `new` was just created for us.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Lets a program that embeds tether be its own keeper.
///
/// Call it first thing in `main`. When the library starts this program as a
/// keeper (with the argument `__tether-keeper`), the call runs the keeper
/// and never returns; otherwise it records that this program can serve as
/// the keeper and returns at once, so no separate `tether-keeper` binary
/// needs to be installed.
///
/// ```no_run
/// tether::keeper::run_if_requested();
/// // … the program as usual …
/// ```
pub fn run_if_requested() {
    if std::env::args_os().nth(1).is_some_and(|a| a == KEEPER_ARG) {
        main();
    }
    super::link::SELF_IS_KEEPER.store(true, std::sync::atomic::Ordering::Relaxed);
}
