//! The keeper: a small single-threaded process between an owner and one
//! command at a time.
//!
//! Theory of operation:
//!
//! 1. The owner starts the keeper with one end of a Unix socket as its
//!    stdin, in a process group of its own. That socket is both the
//!    control channel and the *lifeline*: only the owner holds the other
//!    end (close-on-exec), so EOF means the owner is gone — by exit, panic,
//!    `SIGKILL` or OOM alike.
//! 2. The keeper makes itself non-dumpable (its command cannot ptrace it)
//!    and, on Linux, `PR_SET_CHILD_SUBREAPER`: everything the command
//!    forks, including `setsid` + double-fork escapes, stays its
//!    descendant. It is the session's only reaper. (macOS has no
//!    subreaper: there the tree is the command's process group and session
//!    plus every process carrying the session's spawn tag.)
//! 3. It waits for a `Spawn` request (a warm keeper waits here, already
//!    holding its lifeline) and starts the command the way `posix_spawn`
//!    does (a `CLONE_VFORK` clone on Linux, see `linux/vfork.rs`;
//!    `posix_spawn` itself on macOS) in a process group (or session) of its
//!    own with a clean signal state.
//!    With a PID namespace (Linux), the command runs under a pid-1 init
//!    with `PR_SET_PDEATHSIG(SIGKILL)` (safe: the keeper is
//!    single-threaded), so even a `SIGKILL`ed keeper takes the namespace
//!    down with it.
//! 4. It waits on the socket and its signals. It reaps everything, reports
//!    the main process's exit, and kills the tree when asked, at the
//!    timeout, on lifeline EOF, on `SIGTERM`, or (policy) when the main
//!    process exits with descendants left. Every signal a process can
//!    block is blocked and read from the wait: none kills the keeper, and
//!    one its command sends "its parent" (`SIGUSR1`, …) is passed on to
//!    the owner (see `Keeper::on_signals`). Killing is a ladder (see
//!    `ladder.rs`): the gentle signals to every member at once, then, for
//!    whatever is alive when the grace ends, `SIGKILL` rounds until the
//!    tree is empty — and every process is signalled through a handle
//!    opened and verified as a tree member first, so a recycled pid is
//!    never hit.
//! 5. When the tree is empty it says so and waits for the next command
//!    (the owner may recycle it); a keeper that entered a PID namespace
//!    serves one session only.

mod exec;
mod ladder;
mod trace;

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;

use super::channel::{recv_into, send_frame};
use super::forward::{PASSED_ON, meant_for_parent};
use super::protocol::{Event, FrameBuffer, Request, Rung, Scope, SpawnSpec, SpawnStage};
use crate::contain::Termination;
use crate::contain::os::keeper::{
    self as os, Arrival, Change, InitLink, OomPriority, Owner, SessionCgroups, TreeScope, Waiter,
};
use crate::containment::{Containment, ContainmentPolicy, Leftovers};
use crate::exit::ResourceUsage;
use crate::spawn_tag::{SPAWN_TAG_VAR, SpawnTag};
// The PID namespace's init (Linux) enters the session's cgroups itself.
#[cfg_attr(not(target_os = "linux"), allow(unused_imports))]
pub(crate) use exec::enter_cgroups;
pub(crate) use exec::{Exec, fork_exec, note_dispositions};
// The Linux keeper's clone (`linux/vfork.rs`) runs the child's side too.
#[cfg_attr(not(target_os = "linux"), allow(unused_imports))]
pub(crate) use exec::{Failure, exec_child};
use ladder::{Delivery, KILL_SWEEP, Ladder, VERIFY_WINDOW};
pub(crate) use trace::DEBUG_VAR;
use trace::KillTrace;

/// Serves sessions one after the other until the owner goes away: a keeper
/// whose tree is empty goes back to waiting for the next `Spawn`, so an
/// owner that recycles keepers pays for no keeper exec or exit per command.
pub(crate) fn serve() -> io::Result<()> {
    let mut keeper = Keeper::new()?;
    loop {
        let Some((spec, fds)) = keeper.next_spawn()? else {
            return Ok(());
        };
        // The three streams, then one per descriptor passed on.
        if fds.len() != 3 + spec.setup.fds.len() {
            keeper.send(&Event::SpawnFailed {
                errno: libc::EBADF,
                stage: SpawnStage::Stdio,
            });
            continue;
        }
        let started = keeper.start(spec, &fds);
        drop(fds);
        let mut session = match started {
            Ok((session, event)) => {
                keeper.send(&event);
                session
            }
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
        };
        keeper.run(&mut session);
        if keeper.ctl.is_none() || keeper.spent {
            return Ok(());
        }
    }
}

/// The main process of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Main {
    /// Running, or exited but not yet reaped (host pid).
    Running(u32),
    /// Its exit has been reported.
    Exited,
}

impl Main {
    fn pid(self) -> Option<u32> {
        match self {
            Main::Running(pid) => Some(pid),
            Main::Exited => None,
        }
    }
}

/// One command and its tree, from `Started` to `TreeEmpty`.
struct Session {
    spec: SpawnSpec,
    /// The session id from the command's spawn tag.
    session: String,
    /// The keeper's own child: the command, or the namespace init.
    child: u32,
    main: Main,
    /// The command's process group id: the main process's pid. On macOS
    /// the tree is scanned by it after the main process exits (the keeper
    /// holds the zombie until the tree is empty, so the id stays the
    /// command's).
    group: u32,
    /// The command runs in a PID namespace: `child` is its init.
    pidns: bool,
    /// The namespace init's report channel, while open (PID namespace
    /// only).
    init: Option<InitLink>,
    ladder: Ladder,
    timeout_at: Option<Instant>,
    timed_out: bool,
    /// Which signals each descendant got during the kill under way (the
    /// main process excluded): nobody gets one twice.
    signalled: HashSet<(u32, i32)>,
    /// Signals the kill under way sent to the main process's whole group.
    group_signalled: HashSet<i32>,
    /// The descendants alive when a kill began (the main process and the
    /// namespace init excluded), listed before its first signal: what
    /// `TreeEmpty` reports as killed. Counting the processes each
    /// delivery reached instead undercounted under load (a group member
    /// killed by the group signal was often gone before the sweep listed
    /// it: 1, 4 and 3 for three identical 4-process trees).
    doomed: HashSet<u32>,
    /// The session's own cgroups (limits; `cgroup.kill`), removed when
    /// the tree is empty.
    cgroups: SessionCgroups,
    /// When the tree's membership of the session's cgroups is checked
    /// next (see [`WATCH`]); `None` for a session without cgroups.
    watch_at: Option<Instant>,
    /// When the kill under way last walked the tree (see
    /// [`sweep_due`](Session::sweep_due)).
    swept_at: Option<Instant>,
    /// When the phases of the kill under way happened (reported under
    /// `TETHER_KEEPER_DEBUG`).
    trace: KillTrace,
    /// What the processes reaped for this command used, all together
    /// (`None` where the platform does not say).
    usage: Option<ResourceUsage>,
}

impl Session {
    /// Whether a kill under way should walk the tree again now: at most
    /// every [`KILL_SWEEP`]. A dying tree wakes the keeper once per orphan
    /// it inherits (`SIGCHLD`); a walk at each of those wake-ups read
    /// `/proc` for every member still alive, over and over, on the CPUs
    /// the tree needed to die on.
    fn sweep_due(&mut self, now: Instant) -> bool {
        if self.swept_at.is_some_and(|at| now < at + KILL_SWEEP) {
            return false;
        }
        self.swept_at = Some(now);
        true
    }
}

struct Keeper {
    ctl: Option<OwnedFd>,
    /// Encoded events not sent yet.
    outbox: Vec<u8>,
    frames: FrameBuffer,
    waiter: Waiter,
    /// The keeper cannot serve another session (it entered a namespace).
    spent: bool,
    /// `TETHER_KEEPER_DEBUG` is set: report each kill's phases on stderr.
    debug: bool,
    /// Where the signals the tree sends the keeper go.
    owner: Owner,
}

impl Keeper {
    /// Sets the keeper process up: subreaper, non-dumpable, lifeline off
    /// fd 0, signals. A step that fails is reported to the owner first
    /// (an [`Event::Unusable`] naming the step and the error), so the
    /// owner's error says why instead of "connection reset": a keeper that
    /// needed `/dev/fd` exited 125 without a word on a devtmpfs without
    /// it (issue 35).
    fn new() -> io::Result<Keeper> {
        // Move the socket off fd 0 (close-on-exec, so no command inherits
        // the lifeline), and put /dev/null in its place. Failing that, the
        // reason goes out on fd 0, which is the socket.
        let ctl = unusable(0, "no descriptor above 9 for its socket", dup_high(0))?;
        let fd = ctl.as_raw_fd();
        let null = unusable(fd, "opening /dev/null", std::fs::File::open("/dev/null"))?;
        unusable(
            fd,
            "putting /dev/null on stdin",
            nix::unistd::dup2_stdin(null.as_fd()).map_err(io::Error::from),
        )?;
        drop(null);
        // Before `prepare`, which opens what the keeper keeps (its own
        // `oom_score_adj`, while /proc/self is still its user's): closed
        // after it, that descriptor was gone and no session was raised to
        // the OOM killer's first choice (0, 0, 0 in the limits test).
        unusable(fd, "closing inherited descriptors", os::close_inherited(fd))?;
        unusable(fd, "setting itself up", os::prepare())?;
        // SIGPIPE: a dead owner must be an EPIPE, not the keeper's death.
        // SAFETY: setting a disposition to SIG_IGN installs no handler code.
        unsafe {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGPIPE,
                nix::sys::signal::SigHandler::SigIgn,
            )
        }?;
        note_dispositions();
        let waiter = unusable(fd, "waiting for signals", Waiter::new())?;
        // The owner the keeper's own spawn tag names, proven by its start
        // time (see `Owner::from_tag`).
        let owner = Owner::from_tag(
            std::env::var(SPAWN_TAG_VAR)
                .ok()
                .and_then(|t| t.parse::<SpawnTag>().ok())
                .as_ref(),
        );
        Ok(Keeper {
            ctl: Some(ctl),
            outbox: Vec::new(),
            frames: FrameBuffer::default(),
            waiter,
            spent: false,
            debug: std::env::var_os(trace::DEBUG_VAR).is_some(),
            owner,
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
                    return Ok(Some((*spec, fds)));
                }
            }
            let Some(ctl) = self.ctl.as_ref().map(|c| c.as_raw_fd()) else {
                return Ok(None);
            };
            let wake = self.waiter.wait(&[ctl], None)?;
            if self.on_signals(&wake.signals) {
                return Ok(None);
            }
            if wake.ready[0] {
                let ctl = self.ctl.as_ref().expect("checked above");
                let (n, more) = recv_into(ctl.as_fd(), &mut self.frames)?;
                fds.extend(more);
                if n == 0 {
                    return Ok(None);
                }
            }
        }
    }

    /// Acts on the signals that reached the keeper; `true` if one asks it
    /// to stop (kill the tree, as if the owner were gone): `SIGTERM`,
    /// from anyone — from the tree, the command asked its parent to end,
    /// and the session is what it can end.
    ///
    /// A signal from the session's tree that programs use to tell their
    /// parent something (`kill -USR1 $PPID`; see `meant_for_parent`) is
    /// passed on to the owner — the process that asked for the command,
    /// its parent under `subprocess` or a shell — through the owner's
    /// pidfd, never by pid, marked as passed on (`SI_QUEUE`, the keeper's
    /// pid, `PASSED_ON`): the owner's own disposition decides. A Python
    /// owner's handler runs; `tether run` and `tether mcp` drop what they
    /// would die of (`absorb_parent_signals`). The rest, and anything an
    /// outsider or the kernel sends, is ignored: SIGINT/SIGHUP/SIGQUIT
    /// are the owner's to forward (a terminal sends them to the foreground
    /// group).
    fn on_signals(&self, arrivals: &[Arrival]) -> bool {
        let mut stop = false;
        for arrival in arrivals {
            let signal = arrival.signal;
            stop |= signal == libc::SIGTERM;
            if meant_for_parent(signal) && arrival.from.is_some_and(os::sent_by_tree) {
                // The owner may be gone: its lifeline EOF handles that.
                self.owner.signal(signal, PASSED_ON);
            }
        }
        stop
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

    /// Starts the command (or the namespace init that starts it) in the
    /// session's cgroups, which it makes first (and removes again if the
    /// start fails).
    fn start(
        &mut self,
        spec: SpawnSpec,
        stdio: &[OwnedFd],
    ) -> Result<(Session, Event), (SpawnStage, Errno)> {
        let tag = tag_of(&spec);
        let session = tag.as_ref().map(|t| t.session.clone()).unwrap_or_default();
        let (cgroups, limits) = SessionCgroups::create(&spec.limits, tag.as_ref());
        // A limit the kernel refused, or one required and not enforced:
        // the command does not start.
        if let Some(refused) = cgroups.refused() {
            cgroups.remove();
            return Err(refused);
        }
        let mut exec = match Exec::prepare(&spec) {
            Ok(exec) => exec,
            Err(e) => {
                cgroups.remove();
                return Err((SpawnStage::Setup, e));
            }
        };
        exec.cgroup_procs = cgroups.procs();
        exec.passed = stdio[3..]
            .iter()
            .zip(&spec.setup.fds)
            .map(|(fd, &target)| (fd.as_raw_fd(), target))
            .collect();
        // Every process of the session is the OOM killer's first choice:
        // raised here, inherited by the command however it starts.
        let started = {
            let _raised = OomPriority::raise();
            self.start_exec(&spec, &exec, stdio)
        };
        let (containment, child, main, (start_time, pidfs_inode), init) = match started {
            Ok(started) => started,
            Err(e) => {
                cgroups.remove();
                return Err(e);
            }
        };
        let timeout_at = spec
            .timeout_ms
            .map(|ms| Instant::now() + Duration::from_millis(ms));
        let event = Event::Started {
            pid: main,
            start_time,
            pidfs_inode,
            containment,
            limits,
        };
        Ok((
            Session {
                spec,
                session,
                child,
                main: Main::Running(main),
                group: main,
                pidns: init.is_some(),
                init,
                ladder: Ladder::Idle,
                timeout_at,
                timed_out: false,
                signalled: HashSet::new(),
                group_signalled: HashSet::new(),
                doomed: HashSet::new(),
                watch_at: cgroups.watched().then(|| Instant::now() + WATCH),
                cgroups,
                swept_at: None,
                trace: KillTrace::default(),
                usage: os::MEASURES_USAGE.then(ResourceUsage::default),
            },
            event,
        ))
    }

    /// Starts the command as `exec` says, in the containment `spec` asks
    /// for: what holds it, the keeper's child, the command's pid and
    /// identity, and the namespace init's link.
    fn start_exec(
        &mut self,
        spec: &SpawnSpec,
        exec: &Exec,
        stdio: &[OwnedFd],
    ) -> Result<Launched, (SpawnStage, Errno)> {
        let containment = match spec.containment {
            ContainmentPolicy::Standard => os::STANDARD,
            wanted => match os::pidns::enter() {
                Ok(()) => {
                    self.spent = true;
                    Containment::PidNamespace
                }
                Err(e) => {
                    self.spent |= e.spent;
                    // Required, or the keeper is no longer usable: fail
                    // rather than run the command somewhere unreported.
                    if wanted == ContainmentPolicy::PidNamespace || e.spent {
                        return Err((SpawnStage::PidNamespace, e.errno));
                    }
                    os::STANDARD
                }
            },
        };
        let stdio = [
            stdio[0].as_raw_fd(),
            stdio[1].as_raw_fd(),
            stdio[2].as_raw_fd(),
        ];
        match containment {
            Containment::PidNamespace => {
                let ctl = self.ctl.as_ref().map_or(-1, |c| c.as_raw_fd());
                let started = os::pidns::start(exec, stdio, ctl)?;
                Ok((
                    containment,
                    started.init,
                    started.main,
                    started.identity,
                    Some(started.link),
                ))
            }
            _ => {
                // The platform's spawn can neither give a controlling
                // terminal nor enter cgroups before exec: those take the
                // fork path.
                // Nor, portably, set up what `SetupSpec` asks for (and
                // `setuid` in a `CLONE_VM` child is what CPython avoids
                // vfork for): those take it too.
                let pid = if exec.controlling_tty
                    || !exec.cgroup_procs.is_empty()
                    || !exec.setup.is_empty()
                {
                    fork_exec(exec, stdio, None, |_| {})?
                } else {
                    os::spawn(exec, stdio)?
                };
                // Our own unreaped child: its pid stays valid even if it
                // has already exited.
                let identity = os::identify(pid).map_err(|e| (SpawnStage::Setup, errno_of(&e)))?;
                Ok((containment, pid, pid, identity, None))
            }
        }
    }

    /// One session's event loop; returns once its tree is empty.
    fn run(&mut self, s: &mut Session) {
        loop {
            self.reap(s);
            if s.main == Main::Exited && os::tree_is_empty(&scope(s)) {
                let killed = s.doomed.len() as u32;
                if self.debug {
                    s.trace.report(killed);
                }
                let limit_hit = s.cgroups.hit();
                let oom_outside = s.cgroups.oom_outside();
                let escaped = s.cgroups.escaped();
                // Gone before the owner hears the tree is empty.
                std::mem::take(&mut s.cgroups).remove();
                self.send(&Event::TreeEmpty {
                    killed,
                    limit_hit,
                    oom_outside,
                    escaped,
                    usage: s.usage,
                });
                self.flush();
                return;
            }
            let now = Instant::now();
            if s.timeout_at.is_some_and(|t| now >= t) && s.main != Main::Exited {
                s.timeout_at = None;
                s.timed_out = true;
                self.begin_kill(s, &[], s.spec.grace_ms);
            }
            self.advance_ladder(s, now);
            watch(s, now);
            self.wait_for_event(s);
        }
    }

    /// Waits on the socket, the signals and the init pipe until something
    /// happens or the nearest deadline passes.
    fn wait_for_event(&mut self, s: &mut Session) {
        self.flush();
        let now = Instant::now();
        let watch_at = s.watch_at.filter(|_| matches!(s.ladder, Ladder::Idle));
        let deadline = [s.timeout_at, s.ladder.next_wake(now), watch_at]
            .into_iter()
            .flatten()
            .min();
        let ctl = self.ctl.as_ref().map(|c| c.as_raw_fd());
        let init = s.init.as_ref().map(|i| i.fd());
        let fds: Vec<RawFd> = [ctl, init].into_iter().flatten().collect();
        let Ok(wake) = self.waiter.wait(&fds, deadline) else {
            return;
        };
        let mut ready = wake.ready.iter().copied();
        let ctl_ready = ctl.is_some() && ready.next() == Some(true);
        let init_ready = init.is_some() && ready.next() == Some(true);
        if self.on_signals(&wake.signals) {
            self.begin_kill(s, &[], s.spec.grace_ms);
        }
        if ctl_ready {
            self.read_requests(s);
        }
        if init_ready {
            self.read_init_report(s);
        }
    }

    fn read_requests(&mut self, s: &mut Session) {
        let Some(ctl) = self.ctl.as_ref() else { return };
        match recv_into(ctl.as_fd(), &mut self.frames) {
            Ok((0, _)) | Err(_) => {
                // Lifeline EOF: the owner is gone. Nobody is left to report
                // to; kill the tree and exit once it is empty.
                self.ctl = None;
                self.begin_kill(s, &[], s.spec.grace_ms);
                return;
            }
            Ok(_) => {}
        }
        while let Ok(Some(payload)) = self.frames.next_payload() {
            match Request::decode(&payload) {
                Ok(Request::Signal { signal, scope }) => {
                    delivery(s).signal_now(signal, scope);
                }
                Ok(Request::Kill { ladder, grace_ms }) => {
                    self.begin_kill(s, &ladder, grace_ms);
                }
                Ok(Request::Spawn(_) | Request::Nudge) | Err(_) => {}
            }
        }
    }

    fn read_init_report(&mut self, s: &mut Session) {
        let Some(init) = s.init.as_mut() else {
            return;
        };
        match init.read_exit() {
            Ok(Some(termination)) => self.main_exited(s, termination),
            Ok(None) => {}
            Err(_) => s.init = None,
        }
    }

    /// Reaps every child that has exited (and, for a foreground command,
    /// reports the main process's job-control stops).
    fn reap(&mut self, s: &mut Session) {
        while let Some((pid, change)) = os::reap_any(s.spec.report_stops) {
            let is_main = !s.pidns && Some(pid) == s.main.pid();
            if let (Change::Exited(_, Some(used)), Some(total)) = (&change, s.usage.as_mut()) {
                *total = *total + *used;
            }
            match change {
                Change::Exited(termination, _) if is_main => self.main_exited(s, termination),
                Change::Exited(..) if s.pidns && pid == s.child => {
                    // Init's report of the command's end may still be
                    // unread (it reports, then exits). With none, init died
                    // before reporting (killed from outside): the command
                    // died with the namespace.
                    let reported = s.init.as_mut().and_then(|init| init.last_exit());
                    let termination = reported.unwrap_or(Termination::Signal(libc::SIGKILL));
                    self.main_exited(s, termination);
                }
                Change::Stopped(signal) if is_main => {
                    self.send(&Event::MainStopped { signal });
                }
                Change::Continued if is_main => self.send(&Event::MainContinued),
                _ => {}
            }
        }
    }

    fn main_exited(&mut self, s: &mut Session, termination: Termination) {
        if s.main == Main::Exited {
            return;
        }
        s.main = Main::Exited;
        self.send(&Event::MainExited {
            termination,
            timed_out: s.timed_out,
            limit_hit: s.cgroups.hit(),
            oom_outside: s.cgroups.oom_outside(),
            usage: s.usage,
        });
        // What the main process left gets the session's gentle signals now
        // — also during a kill whose first signal reached only the main
        // process's group (a forwarded SIGINT): it would otherwise wait
        // for the grace, the forced end, although it might die at once.
        if s.spec.leftovers == Leftovers::Kill
            && !matches!(s.ladder, Ladder::Forced { .. })
            && !os::tree_is_empty(&scope(s))
        {
            self.begin_kill(s, &[], s.spec.grace_ms);
        }
    }

    /// Starts (or hurries) a kill: the gentle signals of `ladder` (the
    /// session's own when empty) go to their scope at once, and whatever
    /// is alive `grace_ms` later gets the forced end. A kill already under
    /// way sends the new signals to whoever has not had them yet and takes
    /// the earlier deadline.
    fn begin_kill(&mut self, s: &mut Session, ladder: &[Rung], grace_ms: u64) {
        if matches!(s.ladder, Ladder::Forced { .. }) {
            return;
        }
        let rungs: Vec<Rung> = if ladder.is_empty() {
            s.spec.ladder.clone()
        } else {
            ladder.to_vec()
        };
        let now = Instant::now();
        // No gentle signal: the forced end at once.
        let grace = if rungs.is_empty() { 0 } else { grace_ms };
        let deadline = now + Duration::from_millis(grace);
        let starting = matches!(s.ladder, Ladder::Idle);
        if starting {
            s.trace = KillTrace::begin();
            s.signalled.clear();
            s.group_signalled.clear();
        }
        // One walk of the tree serves both the count and the delivery:
        // the members alive now, all listed before the first signal. With
        // no gentle signal and a cgroup v2 of the session's own, nothing
        // needs the walk: the count is one read of its `cgroup.procs`
        // (`note_doomed`) and the forced end is `cgroup.kill` (a walk of a
        // 3,000-process storm opened every one of them first).
        s.swept_at = Some(now);
        // Whether `listed` is the whole tree (the cgroup's listing is not:
        // what left the cgroup waits for the next sweep's walk, and so does
        // the verdict that nothing alive will act on the gentle signal).
        let mut whole = true;
        let listed = if rungs.is_empty() && starting && s.cgroups.members().is_some() {
            Vec::new()
        } else if starting && self.ctl.is_none() && !rungs.is_empty() {
            // The owner is gone: no count to keep exact, the signals go
            // out during the walk (the delivery below finds them sent).
            let (listed, complete) = delivery(s).members_delivering(&rungs);
            whole = complete;
            listed
        } else {
            delivery(s).members()
        };
        if starting {
            note_doomed(s, &listed);
            s.trace.listed();
        }
        delivery(s).deliver(&rungs, &listed);
        if starting {
            s.trace.signalled();
        }
        s.ladder = match std::mem::replace(&mut s.ladder, Ladder::Idle) {
            Ladder::Gentle {
                rungs: mut old,
                deadline: old_deadline,
            } => {
                for rung in rungs {
                    if !old.contains(&rung) {
                        old.push(rung);
                    }
                }
                Ladder::Gentle {
                    rungs: old,
                    deadline: old_deadline.min(deadline),
                }
            }
            _ => Ladder::Gentle { rungs, deadline },
        };
        if grace == 0 || (whole && self.none_will_act(s, &listed)) {
            Self::hurry(s, now);
            self.advance_ladder(s, now);
        }
    }

    /// Whether nothing alive in `listed` will act on the gentle signals
    /// of the kill under way (see `Delivery::none_will_act`).
    fn none_will_act(&self, s: &mut Session, listed: &[os::Member]) -> bool {
        let Ladder::Gentle { rungs, .. } = &s.ladder else {
            return false;
        };
        let rungs = rungs.clone();
        delivery(s).none_will_act(&rungs, listed)
    }

    /// Ends the grace of the kill under way at `now`: the forced rung
    /// comes at the next look at the ladder.
    fn hurry(s: &mut Session, now: Instant) {
        if let Ladder::Gentle { deadline, .. } = &mut s.ladder {
            *deadline = now.min(*deadline);
        }
    }

    fn advance_ladder(&mut self, s: &mut Session, now: Instant) {
        match s.ladder.clone() {
            Ladder::Idle => {}
            Ladder::Gentle { rungs, deadline } => {
                if now >= deadline {
                    s.ladder = Ladder::Forced {
                        give_up: now + VERIFY_WINDOW,
                    };
                    s.swept_at = Some(now);
                    force(s);
                } else if s.sweep_due(now) {
                    // A fork racing the first sweep made a process that
                    // never saw the signals, or an orphan was reparented
                    // to the keeper: sweep again, new ones only. And if
                    // what is left ignores the signals, the grace is over.
                    let listed = delivery(s).members();
                    if rungs.iter().any(|r| r.scope == Scope::Tree) {
                        delivery(s).deliver(&rungs, &listed);
                    }
                    if self.none_will_act(s, &listed) {
                        Self::hurry(s, now);
                        self.advance_ladder(s, now);
                    }
                }
            }
            Ladder::Forced { give_up } => {
                self.reap(s);
                if os::tree_is_empty(&scope(s)) {
                    return;
                }
                if s.sweep_due(now) {
                    force(s);
                }
                if now >= give_up {
                    let survivors = os::members(&scope(s))
                        .into_iter()
                        .map(|m| (m.pid, crate::contain::sys::describe(m.pid).into_bytes()))
                        .collect();
                    self.send(&Event::KillFailed { survivors });
                    // Stay tracked and killable: a later Kill starts over.
                    // With the owner gone there is nobody to ask again, so
                    // keep trying.
                    s.ladder = if self.ctl.is_none() {
                        Ladder::Forced {
                            give_up: now + VERIFY_WINDOW,
                        }
                    } else {
                        Ladder::Idle
                    };
                }
            }
        }
    }
}

/// A started command: what holds it, the keeper's child (the command or
/// the namespace init), the command's pid, its start time and pidfs inode,
/// and the namespace init's report channel.
type Launched = (Containment, u32, u32, (u64, Option<u64>), Option<InitLink>);

/// The forced rung: `SIGKILL` to everything of the tree alive now (with a
/// cgroup v2 of the session's own, its `cgroup.kill`: see
/// `Delivery::force`).
fn force(s: &mut Session) {
    delivery(s).force(libc::SIGKILL);
}

/// Adds the tree's members alive now, other than the main process and the
/// namespace init, to the processes a kill is counted against: `listed`
/// (walked before the kill's first signal) and, for a session with a
/// cgroup v2 of its own, that cgroup's `cgroup.procs` (one read) — both:
/// a process that moved itself out of the session's cgroup is killed by
/// the walk and counted from it (before, 201 killed were reported as 0),
/// one someone moved in is killed by `cgroup.kill` and counted from the
/// cgroup. Where the kill needed no walk (`cgroup.kill` alone), whatever
/// the walk after it still finds is counted there (`Delivery::force`).
fn note_doomed(s: &mut Session, listed: &[os::Member]) {
    let (main, child) = (s.main.pid(), s.child);
    let in_cgroup = s.cgroups.members().unwrap_or_default();
    // Who of them left the session's cgroups (its limits): reported.
    let walked: Vec<u32> = listed.iter().map(|m| m.pid).collect();
    s.cgroups.note_escapes(&walked);
    s.doomed.extend(
        in_cgroup
            .into_iter()
            .chain(listed.iter().map(|m| m.pid))
            .filter(|&pid| Some(pid) != main && pid != child),
    );
}

/// How often the keeper checks, while a session with cgroups of its own
/// runs, that every process of its tree is still in them: one write of
/// its pid to another cgroup's `cgroup.procs` takes a process out of its
/// limits (root; the delegated user), and the check moves it back
/// ([`SessionCgroups::move_back`]). A check is one walk of the tree and
/// one read of each leaf's `cgroup.procs`: for a tree of 1,000 sleeping
/// processes under `--pids`, the keeper used 440–450 ms of CPU per 10 s
/// (release build, two runs; 0 without limits), ~11 ms a check, 4.5% of
/// one core. A larger tree spaces the checks out instead
/// ([`WATCH_SHARE`]). Sessions without limits have no cgroups and no
/// check.
const WATCH: Duration = Duration::from_millis(250);

/// At most one part in this many of the keeper's time goes to the
/// membership check: the next one comes no sooner than this many times
/// what the last one took (a 10,000-process tree: about every 2 s).
const WATCH_SHARE: u32 = 20;

/// Checks the tree's membership of the session's cgroups if due (see
/// [`WATCH`]). Not while a kill is under way: its own walks note what
/// left, and `cgroup.kill` would only be raced.
fn watch(s: &mut Session, now: Instant) {
    let Some(at) = s.watch_at else { return };
    if now < at || !matches!(s.ladder, Ladder::Idle) {
        return;
    }
    let started = Instant::now();
    let members = os::members(&scope(s));
    s.cgroups.move_back(&members);
    drop(members);
    let spent = started.elapsed();
    s.watch_at = Some(Instant::now() + WATCH.max(spent * WATCH_SHARE));
}

/// The tree's bounds, for the platform's member listing.
fn scope(s: &Session) -> TreeScope<'_> {
    TreeScope {
        session: &s.session,
        main_pgrp: s.group,
    }
}

fn delivery(s: &mut Session) -> Delivery<'_> {
    Delivery {
        main: s.main.pid(),
        child: s.child,
        init: s.pidns.then_some(s.child),
        scope: TreeScope {
            session: &s.session,
            main_pgrp: s.group,
        },
        signalled: &mut s.signalled,
        group_signalled: &mut s.group_signalled,
        cgroups: &mut s.cgroups,
        doomed: &mut s.doomed,
    }
}

/// The command's spawn tag, if it has a valid one.
fn tag_of(spec: &SpawnSpec) -> Option<SpawnTag> {
    let prefix = format!("{SPAWN_TAG_VAR}=");
    spec.envp
        .iter()
        .find_map(|e| e.strip_prefix(prefix.as_bytes()))
        .and_then(|v| std::str::from_utf8(v).ok()?.parse::<SpawnTag>().ok())
}

pub(crate) fn errno_of(e: &io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// Passes `result` on; an error is first told to the owner on `sock` (an
/// [`Event::Unusable`] saying what the keeper was doing), and on stderr
/// (`/dev/null` unless `TETHER_KEEPER_DEBUG` is set).
fn unusable<T>(sock: RawFd, doing: &str, result: io::Result<T>) -> io::Result<T> {
    if let Err(e) = &result {
        let reason = format!("the keeper could not start: {doing}: {e}");
        eprintln!("tether-keeper: {reason}");
        let event = Event::Unusable {
            reason: reason.into_bytes(),
        };
        // SAFETY: `sock` is the keeper's socket (fd 0, or its copy), open
        // for the whole call.
        let sock = unsafe { std::os::fd::BorrowedFd::borrow_raw(sock) };
        let _ = send_frame(sock, &event.encode(), &[]);
    }
    result
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
