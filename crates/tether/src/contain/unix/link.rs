//! The owner's end of a keeper: starting it, exchanging requests and
//! events with it, reaping it, and keeping it running.

use std::cell::Cell;
use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::channel::{recv_into, send_frame};
use super::fork::{Lifeline, PerProcess, created_here};
use super::inheritance::Inheritance;
use super::keeper::DEBUG_VAR;
use super::keeper_entry::{BUILD_ID, KEEPER_ARG, OTHER_BUILD};
use super::protocol::{Event, FrameBuffer, Request};
use crate::error::{Error, Result};

/// The sending half, shareable across threads (a `ChildHandle` forwards
/// signals while another thread waits).
#[derive(Debug)]
pub(crate) struct Sender {
    sock: Lifeline,
    keeper: u32,
    /// The process that started the keeper (see `fork.rs`).
    owner: u32,
    /// Held while sending; `false` once the keeper was handed to another
    /// session, so a stale handle can never reach the new session's tree.
    open: Mutex<bool>,
}

impl Sender {
    fn new(sock: &Lifeline, keeper: u32, owner: u32) -> io::Result<Arc<Sender>> {
        Ok(Arc::new(Sender {
            sock: sock.try_clone()?,
            keeper,
            owner,
            open: Mutex::new(true),
        }))
    }

    /// The process that owns this keeper, if it is not this one (a child
    /// forked since; see `fork.rs`).
    pub(crate) fn inherited_from(&self) -> Option<u32> {
        (!created_here(self.owner)).then_some(self.owner)
    }

    fn close(&self) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = false;
    }

    pub(crate) fn send(&self, request: &Request, fds: &[RawFd]) -> io::Result<()> {
        if !created_here(self.owner) {
            return Err(inherited(self.owner));
        }
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if !*open {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the session is over",
            ));
        }
        // A keeper stopped by its own command (`kill -STOP $PPID`) would sit
        // on this request: resume it first.
        resume(self.keeper);
        send_frame(self.sock.as_fd(), &request.encode(), fds)
    }
}

/// A running keeper and the socket to it.
#[derive(Debug)]
pub(crate) struct KeeperLink {
    sock: Lifeline,
    sender: Arc<Sender>,
    frames: FrameBuffer,
    process: Option<std::process::Child>,
    eof: bool,
    /// The keeper program, so a recycled keeper goes back to the right pool.
    path: PathBuf,
    /// The keeper now serves another session through another link; this one
    /// is inert (reads nothing, sends nothing, closes nothing).
    detached: bool,
    /// The process that started the keeper. In a child forked since, the
    /// link is inert too: its socket was pointed at `/dev/null` at the fork
    /// (see `fork.rs`), and the tree is the parent's to end.
    owner: u32,
    /// The keeper was told to go (its tree is empty); it is reaped when
    /// the link is dropped.
    draining: bool,
    /// What the owner passed on to the keeper when it started, if the warm
    /// pool took note (only a keeper with one is kept for later commands).
    pub(crate) inheritance: Option<Inheritance>,
    /// The session's waiter patrols the keeper instead of the guard thread
    /// (see [`attended`]).
    attended: bool,
    /// When the waiter of an attended link last looked at the keeper.
    patrolled: Instant,
}

impl KeeperLink {
    /// Starts a keeper. Its stdin is its end of the socket; it inherits
    /// nothing else (stdout/stderr are /dev/null unless
    /// `TETHER_KEEPER_DEBUG` is set) and carries `keeper_tag` as its spawn
    /// tag (and `TETHER_KEEPER_DEBUG`, when the owner has it, which makes
    /// it report each kill's phases). No `pre_exec`: the owner stays on std's posix_spawn path.
    ///
    /// The keeper gets a process group of its own from its first
    /// instruction (`POSIX_SPAWN_SETPGROUP`): a signal aimed at the owner's
    /// group — GNU `timeout` signals its whole group, a job-control shell's
    /// `kill -9 %1`, the official MCP Python SDK's `killpg` on its server —
    /// must never take owner and keeper down together, or the tree would
    /// outlive both. It stays in the owner's *session* on purpose: then the
    /// kernel's orphaned-process-group rule sends `SIGHUP` + `SIGCONT` to a
    /// keeper its own command stopped (`kill -STOP $PPID`) the moment the
    /// owner dies, and the keeper (which ignores `SIGHUP`) sees the lifeline
    /// EOF and kills the tree. A session of its own would lose that.
    pub(crate) fn start(keeper: &Path, keeper_tag: &str) -> Result<KeeperLink> {
        let mut link = Self::start_idle(keeper, keeper_tag)?;
        link.busy();
        Ok(link)
    }

    /// [`start`](Self::start) with `hook` run in the keeper's process
    /// before its exec (see `CommandExt::pre_exec_keeper`): forked, not
    /// `posix_spawn`ed. Its process group is set after the hook (a group
    /// leader could not `setsid` in it), unless the hook made it a session
    /// leader. Never noted for the pool: what the hook did is this
    /// command's alone. Its environment is this process's as the hook
    /// left it (an exec with no environment of its own: `os.putenv` in a
    /// `preexec_fn` is seen), its tag set last; a command whose own
    /// environment is not set gets it (`SetupSpec::keeper_env`).
    pub(crate) fn start_hooked(
        keeper: &Path,
        keeper_tag: &str,
        hook: &crate::contain::KeeperHook,
    ) -> Result<KeeperLink> {
        let hook = hook.0.clone();
        let nul = |e| Error::Keeper(io::Error::new(io::ErrorKind::InvalidInput, e));
        let tag_var = std::ffi::CString::new(crate::spawn_tag::SPAWN_TAG_VAR).map_err(nul)?;
        let tag = std::ffi::CString::new(keeper_tag).map_err(nul)?;
        let mut link = Self::launch(keeper, keeper_tag, false, move |command| {
            // SAFETY: the closure makes async-signal-safe calls besides
            // the hook and `setenv`, whose caller vouched for them
            // (`pre_exec_keeper`: the hook runs arbitrary code already).
            unsafe {
                command.pre_exec(move || {
                    let mut hook = hook.lock().unwrap_or_else(|e| e.into_inner());
                    (*hook)()?;
                    if libc::getsid(0) != libc::getpid() && libc::setpgid(0, 0) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    if libc::setenv(tag_var.as_ptr(), tag.as_ptr(), 1) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                })
            };
        })?;
        link.busy();
        Ok(link)
    }

    /// Starts a keeper that waits for its first session: ours to signal,
    /// but not patrolled by the guard until [`busy`](Self::busy) (an idle
    /// keeper has no command that could stop it; see
    /// [`detach`](Self::detach)).
    pub(crate) fn start_idle(keeper: &Path, keeper_tag: &str) -> Result<KeeperLink> {
        Self::launch(keeper, keeper_tag, true, |command| {
            command.process_group(0);
        })
    }

    /// Starts the keeper program, `prepare` adding to its command.
    /// `clear_env`: the keeper gets no variable but its tag and
    /// `DEBUG_VAR` (else `prepare` sees to its environment).
    fn launch(
        keeper: &Path,
        keeper_tag: &str,
        clear_env: bool,
        prepare: impl FnOnce(&mut std::process::Command),
    ) -> Result<KeeperLink> {
        let (ours, theirs) = UnixStream::pair().map_err(Error::Keeper)?;
        crate::contain::os::prepare_socket(&ours);
        crate::contain::os::prepare_socket(&theirs);
        let debug = std::env::var_os(DEBUG_VAR).is_some();
        let mut command = std::process::Command::new(keeper);
        command.arg(KEEPER_ARG).arg(BUILD_ID);
        if clear_env {
            command
                .env_clear()
                .env(crate::spawn_tag::SPAWN_TAG_VAR, keeper_tag);
            if debug {
                command.env(DEBUG_VAR, "1");
            }
        }
        command
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(if debug {
                Stdio::inherit()
            } else {
                Stdio::null()
            });
        prepare(&mut command);
        let process = command.spawn().map_err(Error::Keeper)?;
        let pid = process.id();
        guard().adopt(pid);
        let owner = std::process::id();
        let ours = Lifeline::new(OwnedFd::from(ours));
        Ok(KeeperLink {
            sender: Sender::new(&ours, pid, owner).map_err(Error::Keeper)?,
            sock: ours,
            frames: FrameBuffer::default(),
            process: Some(process),
            eof: false,
            path: keeper.to_owned(),
            detached: false,
            owner,
            draining: false,
            inheritance: None,
            attended: false,
            patrolled: Instant::now(),
        })
    }

    /// The process that owns this keeper, if it is not this one (a child
    /// forked since; see `fork.rs`).
    pub(crate) fn inherited_from(&self) -> Option<u32> {
        (!created_here(self.owner)).then_some(self.owner)
    }

    /// The keeper program this link runs.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Moves the keeper of a finished session to a new, idle link, leaving
    /// this one inert. Handles of the old session lose their way to the
    /// keeper. The guard stops patrolling it until [`busy`](Self::busy):
    /// an idle keeper has no command that could stop it, and a keeper
    /// stopped by anyone else is resumed before the request that takes it
    /// (see [`Sender::send`]) or, once the owner is gone, by the kernel
    /// (see [`start`](Self::start)) — so an owner whose keepers are all
    /// idle has no thread of ours.
    pub(crate) fn detach(&mut self) -> io::Result<KeeperLink> {
        // Any descriptor will do (an inert link never uses it): `/dev/null`
        // is opened and closed in ~1 µs here, a socket pair in ~4.5 µs.
        let placeholder = Lifeline::new(OwnedFd::from(std::fs::File::open("/dev/null")?));
        let sock = std::mem::replace(&mut self.sock, placeholder);
        self.sender.close();
        self.detached = true;
        let idle = KeeperLink {
            sender: Sender::new(&sock, self.sender.keeper, self.owner)?,
            sock,
            frames: std::mem::take(&mut self.frames),
            process: self.process.take(),
            eof: false,
            path: self.path.clone(),
            detached: false,
            owner: self.owner,
            draining: false,
            inheritance: self.inheritance.take(),
            attended: false,
            patrolled: Instant::now(),
        };
        guard().rest(idle.sender.keeper);
        Ok(idle)
    }

    /// An idle keeper is about to serve a session: the guard patrols it
    /// again — or, within [`attended`], the session's waiter does.
    pub(crate) fn busy(&mut self) {
        if ATTENDED.with(Cell::get) {
            self.attended = true;
            self.patrolled = Instant::now();
            return;
        }
        if let Some(process) = &self.process {
            guard().watch(process.id());
        }
    }

    /// Whether the (idle) keeper has exited — killed, or OOM — reaping it
    /// if so. No thread watches an idle keeper: the pool asks this at each
    /// spawn and each session's end, so a dead one is never a zombie past
    /// the next of those.
    pub(crate) fn exited(&mut self) -> bool {
        let Some(process) = &self.process else {
            return true;
        };
        let pid = process.id();
        if !exited(pid) {
            return false;
        }
        // Out of the guard before it is reaped (its pid is then free for
        // reuse: nothing may signal it after).
        guard().forget(pid);
        if let Some(mut process) = self.process.take() {
            let _ = process.wait();
        }
        true
    }

    /// For an attended link's waiter: resumes the keeper if it is stopped,
    /// when a [`GUARD_PERIOD`] passed since it last looked (what the guard
    /// thread would do). Returns when the next look is due.
    fn patrol_if_due(&mut self) -> Instant {
        let now = Instant::now();
        if now.saturating_duration_since(self.patrolled) >= GUARD_PERIOD {
            if let Some(process) = &self.process {
                guard().resume_if_stopped(process.id());
            }
            self.patrolled = now;
        }
        self.patrolled + GUARD_PERIOD
    }

    pub(crate) fn sender(&self) -> Arc<Sender> {
        Arc::clone(&self.sender)
    }

    pub(crate) fn send(&self, request: &Request, fds: &[RawFd]) -> io::Result<()> {
        self.sender.send(request, fds)
    }

    /// The next event, waiting at most `timeout` (`None` = forever).
    /// `Ok(None)`: the timeout passed. `UnexpectedEof`: the keeper is gone.
    ///
    /// A signal that interrupts the wait ends it early when a `timeout`
    /// was given (`Ok(None)`, as if it had passed), so a caller can run its
    /// signal handlers — Python's Ctrl-C — and wait again.
    pub(crate) fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Event>> {
        if self.detached {
            return Ok(None);
        }
        if !created_here(self.owner) {
            return Err(inherited(self.owner));
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(payload) = self.frames.next_payload()? {
                return Event::decode(&payload).map(Some);
            }
            if self.eof {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let mut wait_ms = match deadline {
                None => -1,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() && timeout != Some(Duration::ZERO) {
                        return Ok(None);
                    }
                    left.as_millis().min(i32::MAX as u128) as i32
                }
            };
            // Attended: this thread is the keeper's guard while it waits —
            // in whatever slices its caller waits (Python's are 100 ms,
            // with a signal check between), and in a zero-timeout poll: it
            // looks at the keeper once a patrol period is due, and never
            // sleeps past that.
            let mut patrol_due = false;
            if self.attended {
                let next = self.patrol_if_due();
                let until = next.saturating_duration_since(Instant::now());
                let until_ms = until.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
                if wait_ms < 0 || until_ms < wait_ms {
                    wait_ms = until_ms;
                    patrol_due = true;
                }
            }
            let mut pfd = [libc::pollfd {
                fd: self.sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(pfd.as_mut_ptr(), 1, wait_ms) };
            if rc < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    if timeout.is_some() {
                        return Ok(None);
                    }
                    continue;
                }
                return Err(err);
            }
            if rc == 0 {
                // Cut short for the patrol (the loop's next turn makes it),
                // or the caller's timeout passed.
                if deadline.is_none() || patrol_due {
                    continue;
                }
                return Ok(None);
            }
            let (n, _fds) = recv_into(self.sock.as_fd(), &mut self.frames)?;
            if n == 0 {
                self.eof = true;
            }
        }
    }

    /// What a keeper that could not start said before it exited (an
    /// `Unusable` event still queued on the socket), if it said anything.
    /// For a failed first request: the keeper's exit may have failed the
    /// send (`EPIPE`) before its words were read.
    pub(crate) fn last_word(&mut self) -> Option<Vec<u8>> {
        loop {
            match self.recv(Some(Duration::ZERO)) {
                Ok(Some(Event::Unusable { reason })) => return Some(reason),
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// A copy of the socket, for an event loop that waits for it to
    /// become readable and then calls [`recv`](Self::recv) with a zero
    /// timeout (the registry does this instead of a thread per session).
    pub(crate) fn event_lifeline(&self) -> io::Result<Lifeline> {
        self.sock.try_clone()
    }

    /// The keeper's pid.
    pub(crate) fn keeper_pid(&self) -> Option<u32> {
        self.process.as_ref().map(|p| p.id())
    }

    /// Tells a keeper whose tree is empty to go (EOF), without waiting for
    /// it: it exits while the owner goes on (a `tether run` records the
    /// end in the ledger meanwhile), and is reaped when the link is
    /// dropped — by then, normally, without a wait.
    pub(crate) fn finish(&mut self) {
        if self.detached || !created_here(self.owner) {
            return;
        }
        shutdown(&self.sock);
        self.draining = true;
    }

    /// Whether the keeper refused this owner as of another build of tether
    /// (it exits at once with [`OTHER_BUILD`]). Call after a failed first
    /// request: reaps the keeper (it has exited, or is told to by the
    /// EOF) and reads its status.
    pub(crate) fn refused_other_build(&mut self) -> bool {
        if self.detached || !created_here(self.owner) {
            return false;
        }
        shutdown(&self.sock);
        let Some(mut process) = self.process.take() else {
            return false;
        };
        guard().forget(process.id());
        resume(process.id());
        process
            .wait()
            .is_ok_and(|status| status.code() == Some(OTHER_BUILD))
    }

    /// Waits for the keeper process to exit and reaps it. Call once the
    /// keeper said its last word (or the socket hit EOF). Once this
    /// returns, everything the keeper's exit reparented has been
    /// reparented (the kernel does that before the exit is reported).
    pub(crate) fn reap(&mut self) {
        if self.detached || !created_here(self.owner) {
            return;
        }
        // An idle keeper waits for the next command: the EOF tells it to go.
        shutdown(&self.sock);
        if let Some(mut process) = self.process.take() {
            guard().forget(process.id());
            resume(process.id());
            let _ = process.wait();
        }
    }
}

impl Drop for KeeperLink {
    fn drop(&mut self) {
        // Closing our end is the lifeline EOF: the keeper kills the tree and
        // exits. It must still be reaped, without blocking the dropper.
        if self.detached || !created_here(self.owner) {
            return;
        }
        shutdown(&self.sock);
        if let Some(process) = self.process.take() {
            if self.draining {
                // Its tree is empty and it was told to go a while ago:
                // reap it here rather than hand it to the reaper thread
                // (and start one, in a one-shot `tether run`).
                reap_child(process);
            } else {
                reaper().send(process);
            }
        }
    }
}

/// The error of a handle used in a child forked since its keeper started.
fn inherited(owner: u32) -> io::Error {
    io::Error::other(crate::error::Error::InheritedAcrossFork { owner })
}

/// Ends both directions of the owner's socket: the keeper reads EOF.
fn shutdown(sock: &Lifeline) {
    let _ = nix::sys::socket::shutdown(sock.as_raw_fd(), nix::sys::socket::Shutdown::Both);
}

/// Reaps our child `pid`, blocking until it exits — and resuming it each
/// time it stops meanwhile (a stopped keeper would never act on its EOF).
/// Event-driven: `waitid` returns on the stop as on the exit.
fn reap_resuming(pid: u32) {
    resume(pid);
    loop {
        // SAFETY: waitid fills a zeroed siginfo we own.
        let (rc, code) = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let rc = libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WSTOPPED,
            );
            (rc, info.si_code)
        };
        if rc != 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return; // ECHILD: already reaped
        }
        if code == libc::CLD_STOPPED {
            resume(pid);
            continue;
        }
        return;
    }
}

/// Whether our child `pid` has exited (its zombie is left in place) — or
/// is no child of ours any more: someone else's `waitpid(-1)` (a host's
/// catch-all `SIGCHLD` handler) reaped it, and its pid may name another
/// process already, so it must leave the guard now.
fn exited(pid: u32) -> bool {
    // SAFETY: waitid fills a zeroed siginfo we own; WNOWAIT leaves the
    // child to be reaped by its `Child`.
    let (rc, info) = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        (rc, info)
    };
    if rc != 0 {
        return io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD);
    }
    // SAFETY: si_pid is set by a waitid that returned 0 (0 when no child
    // had exited).
    unsafe { info.si_pid() != 0 }
}

/// Whether `pid` is a keeper of ours, idle or busy (not yet reaped).
pub(crate) fn is_keeper(pid: u32) -> bool {
    guard().lock().live.contains(&pid)
}

/// Sends `SIGCONT` to our keeper `pid`. Safe by construction: the keeper is
/// our child and is not reaped before it leaves the guard, so its pid
/// cannot name anything else while we still call this.
fn resume(pid: u32) {
    // SAFETY: kill(2) with a pid we own (see above).
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
}

/// Reaps keepers whose links were dropped (G5: every child is reaped).
/// Keepers exit soon after the EOF, after at most their grace.
///
/// One thread at a time does it, started for the first dropped link and
/// gone once none is left to reap: a host that forks (Python's
/// `multiprocessing`, `pty.fork`) must see no thread of ours while no tree
/// is live, or CPython 3.12+ warns on each fork.
struct Reaper {
    state: Mutex<ReaperState>,
}

#[derive(Default)]
struct ReaperState {
    pending: Vec<std::process::Child>,
    /// A reaping thread is running.
    running: bool,
}

fn reaper() -> &'static Reaper {
    static REAPER: PerProcess<Reaper> = PerProcess::new();
    REAPER.get(|| Reaper {
        state: Mutex::new(ReaperState::default()),
    })
}

impl Reaper {
    fn send(&'static self, process: std::process::Child) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.pending.push(process);
        if state.running {
            return;
        }
        let started = std::thread::Builder::new()
            .name("tether-reaper".into())
            .spawn(move || self.drain());
        if started.is_ok() {
            state.running = true;
        } else {
            // No thread to be had: reap here, blocking the dropper.
            let pending = std::mem::take(&mut state.pending);
            drop(state);
            pending.into_iter().for_each(reap_child);
        }
    }

    fn drain(&self) {
        loop {
            let next = {
                let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let next = state.pending.pop();
                if next.is_none() {
                    state.running = false;
                }
                next
            };
            match next {
                Some(process) => reap_child(process),
                None => return,
            }
        }
    }
}

/// Reaps one dropped link's keeper; from here on only the reaper signals it.
fn reap_child(process: std::process::Child) {
    let pid = process.id();
    guard().forget(pid);
    reap_resuming(pid);
    drop(process);
}

/// How often the guard looks for stopped keepers while the owner lives.
const GUARD_PERIOD: Duration = Duration::from_millis(200);

thread_local! {
    /// Set by [`attended`] for the spawns it runs.
    static ATTENDED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `spawn` — a spawn whose child this thread waits for at once and
/// never hands out (`Command::status`) — with the keeper it takes guarded
/// by that wait rather than by the guard thread: the waiter looks at the
/// keeper every [`GUARD_PERIOD`] while it blocks, as the thread would
/// (in `recv`: whether it waits whole, in slices or polls), and
/// no thread is started and joined for the session (~0.15 ms of a ~1.4 ms
/// warm spawn here). A waiter that leaves before the session's end drops
/// the child: its keeper goes to the reaper, which resumes a stopped one.
pub(crate) fn attended<T>(spawn: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            ATTENDED.with(|a| a.set(false));
        }
    }
    ATTENDED.with(|a| a.set(true));
    let _reset = Reset;
    spawn()
}

/// Resumes keepers that their own command stopped (`kill -STOP $PPID`):
/// a stopped keeper serves no kill, timeout or lifeline EOF. While the
/// owner lives, this thread looks at each busy keeper's state every
/// [`GUARD_PERIOD`] and sends `SIGCONT` to a stopped one; once the owner is
/// gone, the kernel's orphaned-process-group rule does it (see
/// [`KeeperLink::start`]). A defence against an adversarial command, not
/// the owner-death path: no guarantee waits on this thread. It runs only
/// while a keeper serves a session (joined when the last one is reaped or
/// goes idle), so an owner with no live session — idle warm keepers or
/// none — has no thread of ours.
struct Guard {
    state: Mutex<GuardState>,
    wake: Condvar,
}

#[derive(Default)]
struct GuardState {
    /// Every keeper of ours not yet reaped, idle or busy: a pid here is
    /// ours to signal.
    live: HashSet<u32>,
    /// The keepers serving a session: the ones patrolled.
    busy: HashSet<u32>,
    /// The running guard thread (it returns its kernel thread id) and its
    /// generation.
    thread: Option<(JoinHandle<Option<i32>>, u64)>,
    generation: u64,
}

fn guard() -> &'static Guard {
    static GUARD: PerProcess<Guard> = PerProcess::new();
    GUARD.get(|| Guard {
        state: Mutex::new(GuardState::default()),
        wake: Condvar::new(),
    })
}

impl Guard {
    fn lock(&self) -> std::sync::MutexGuard<'_, GuardState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `pid` is a keeper of ours, idle for now.
    fn adopt(&self, pid: u32) {
        self.lock().live.insert(pid);
    }

    /// `pid` serves a session: patrol it (starting the thread if need be).
    fn watch(&'static self, pid: u32) {
        let mut state = self.lock();
        state.live.insert(pid);
        state.busy.insert(pid);
        if state.thread.is_none() {
            state.generation += 1;
            let generation = state.generation;
            if let Ok(handle) = std::thread::Builder::new()
                .name("tether-guard".into())
                .spawn(move || {
                    self.patrol(generation);
                    crate::sys::thread_id()
                })
            {
                state.thread = Some((handle, generation));
            }
        }
    }

    fn patrol(&self, generation: u64) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            // Looked at before each wait, not only after: a keeper reaped
            // before this thread first took the lock (one that refused
            // this build exits at once) notified nobody, and the join in
            // `stop_if_unneeded` would wait a whole period.
            if state.generation != generation || state.busy.is_empty() {
                return;
            }
            let (woken, wait) = self
                .wake
                .wait_timeout(state, GUARD_PERIOD)
                .unwrap_or_else(|e| e.into_inner());
            state = woken;
            if !wait.timed_out() {
                continue;
            }
            let busy: Vec<u32> = state.busy.iter().copied().collect();
            drop(state);
            for pid in busy {
                self.resume_if_stopped(pid);
            }
            state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Resumes our keeper `pid` if it is stopped.
    fn resume_if_stopped(&self, pid: u32) {
        let stopped = crate::contain::sys::process(pid).is_ok_and(|p| {
            matches!(
                p.state,
                crate::contain::sys::ProcessState::Stopped
                    | crate::contain::sys::ProcessState::Traced
            )
        });
        // Under the lock: a pid leaves `live` before its keeper is reaped,
        // so it is still ours.
        let state = self.lock();
        if stopped && state.live.contains(&pid) {
            resume(pid);
        }
    }

    /// `pid` went idle (a warm keeper waiting for its next session): no
    /// longer patrolled, still ours.
    fn rest(&self, pid: u32) {
        let mut state = self.lock();
        state.busy.remove(&pid);
        self.stop_if_unneeded(state);
    }

    /// `pid` is about to be reaped: no longer ours to signal.
    fn forget(&self, pid: u32) {
        let mut state = self.lock();
        state.live.remove(&pid);
        state.busy.remove(&pid);
        self.stop_if_unneeded(state);
    }

    /// With no busy keeper left, the thread ends now, not a period later.
    fn stop_if_unneeded(&self, mut state: std::sync::MutexGuard<'_, GuardState>) {
        if !state.busy.is_empty() {
            return;
        }
        let thread = state.thread.take();
        state.generation += 1;
        drop(state);
        self.wake.notify_all();
        if let Some((handle, _)) = thread
            && let Ok(tid) = handle.join()
        {
            // Gone from the process when this returns: a host that forks
            // next sees no thread of ours.
            crate::sys::wait_threads_released(tid.as_slice(), THREAD_RELEASE);
        }
    }
}

/// How long [`Guard::stop_if_unneeded`] waits for the kernel to release the
/// joined guard thread: normally microseconds; the bound only keeps a
/// stuck exit from blocking the owner.
const THREAD_RELEASE: Duration = Duration::from_secs(1);
