//! The job monitor: one owner-side thread that carries out, for every tree
//! of this process, what a keeper does on Unix.
//!
//! There is no keeper on Windows — the job object holds the tree and the
//! kernel kills it when the owner's handle closes — but someone must still
//! notice the main process's exit, run the timeout, kill leftovers and climb
//! the kill ladder. One thread does it for all trees, sleeping on one I/O
//! completion port that receives:
//!
//! - the jobs' own notifications (each job is associated with the port under
//!   its tree's key): `ActiveProcessZero` says "look: the job may be empty";
//! - "main exited", posted by a thread-pool wait on each main process handle
//!   (`RegisterWaitForSingleObject`): job messages are not guaranteed to be
//!   delivered, a process handle's signal is;
//! - requests posted by the owner's threads: kill (with a grace), tree
//!   dropped, new tree registered.
//!
//! Facts are never taken from a message: a wake-up makes the monitor *ask*
//! — `WaitForSingleObject(main, 0)` for the exit, the job's accounting
//! (`ActiveProcesses == 0`) for "empty" — and, while it waits for a job to
//! empty, it asks again every [`RECHECK`] in case a message was lost.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::windows::io::{AsHandle, AsRawHandle, OwnedHandle};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::SystemServices::{
    JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT, JOB_OBJECT_MSG_JOB_MEMORY_LIMIT,
    JOB_OBJECT_MSG_PROCESS_MEMORY_LIMIT,
};
use windows_sys::Win32::System::Threading::{
    INFINITE, RegisterWaitForSingleObject, UnregisterWaitEx, WT_EXECUTEONLYONCE,
};

use super::completion_port::{CompletionPort, Packet};
use super::conpty::PseudoConsole;
use super::job::Job;
use super::win_error::WinError;
use super::{ctrl_event, process};
use crate::contain::{Ladder, Termination, TreeEvent};
use crate::containment::Leftovers;
use crate::error::Survivor;
use crate::limits::LimitHit;

/// Our packet codes, above the `JOB_OBJECT_MSG_*` range (1–13).
const MAIN_EXITED: u32 = 0x1000;
const KILL: u32 = 0x1001;
const DROPPED: u32 = 0x1002;
const REGISTERED: u32 = 0x1003;

/// How long forced-kill rounds go on before a kill is reported incomplete
/// (as on Unix: a process stuck in the kernel can take a while to go).
const VERIFY_WINDOW: Duration = Duration::from_secs(5);
/// Pace of `TerminateJobObject` rounds while a kill waits for the job to
/// empty (a process created during the first round gets the next one).
const KILL_SWEEP: Duration = Duration::from_millis(20);
/// Pace of accounting checks while a job that should empty has not said so.
const RECHECK: Duration = Duration::from_millis(250);

/// Exit code of every process a forced kill ends (what `taskkill /F` gives).
pub(super) const KILLED_EXIT_CODE: u32 = 1;

/// The monitor of this process: its port and the trees it watches.
pub(super) struct Monitor {
    port: CompletionPort,
    /// Trees registered but not yet taken by the monitor thread.
    incoming: Mutex<Vec<Watch>>,
    next_key: AtomicUsize,
    /// Trees the monitor holds (each with its job, process handle and wait).
    watched: AtomicUsize,
}

static MONITOR: Mutex<Option<&'static Monitor>> = Mutex::new(None);

/// The monitor, started on first use.
pub(super) fn monitor() -> io::Result<&'static Monitor> {
    let mut slot = MONITOR.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(monitor) = *slot {
        return Ok(monitor);
    }
    let monitor: &'static Monitor = Box::leak(Box::new(Monitor {
        port: CompletionPort::new()?,
        incoming: Mutex::new(Vec::new()),
        next_key: AtomicUsize::new(1),
        watched: AtomicUsize::new(0),
    }));
    std::thread::Builder::new()
        .name("tether-job-monitor".into())
        .stack_size(256 << 10)
        .spawn(move || monitor.run())?;
    *slot = Some(monitor);
    Ok(monitor)
}

impl Monitor {
    /// A key no other tree of this process has (never reused).
    pub(super) fn new_key(&self) -> usize {
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn port(&self) -> &CompletionPort {
        &self.port
    }

    /// Hands a new tree to the monitor thread.
    pub(super) fn register(&'static self, mut watch: Watch) -> io::Result<()> {
        watch.wait = Some(RegisteredWait::new(&watch.main, watch.key)?);
        let key = watch.key;
        self.incoming
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(watch);
        self.post(key, REGISTERED, 0)
    }

    /// How many trees the monitor holds now (registered and not yet taken
    /// by its thread not counted).
    #[cfg(test)]
    pub(super) fn watched(&self) -> usize {
        self.watched.load(Ordering::Relaxed)
    }

    /// Starts a kill of tree `key` with `grace` before the forced end.
    pub(super) fn kill(&self, key: usize, grace: Duration) -> io::Result<()> {
        let millis = grace.as_millis().min(usize::MAX as u128) as usize;
        self.post(key, KILL, millis)
    }

    /// The owner dropped tree `key`: kill what is left, then forget it.
    pub(super) fn dropped(&self, key: usize) {
        let _ = self.post(key, DROPPED, 0);
    }

    fn post(&self, key: usize, code: u32, value: usize) -> io::Result<()> {
        self.port.post(Packet { key, code, value })
    }

    fn run(&'static self) {
        let mut watches: HashMap<usize, Watch> = HashMap::new();
        loop {
            let now = Instant::now();
            let timeout = watches
                .values()
                .filter_map(|w| w.next_wake(now))
                .min()
                .map(|at| at.saturating_duration_since(now));
            // An error leaves nothing sensible to do but keep serving.
            let packet = self.port.wait(timeout).unwrap_or_default();
            for watch in self
                .incoming
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain(..)
            {
                watches.insert(watch.key, watch);
            }
            let now = Instant::now();
            if let Some(packet) = packet
                && let Some(watch) = watches.get_mut(&packet.key)
            {
                match packet.code {
                    KILL => watch.begin_kill(Duration::from_millis(packet.value as u64), now),
                    // The job's limits said no (best effort: job messages
                    // can be lost, and then the hit goes unreported).
                    JOB_OBJECT_MSG_JOB_MEMORY_LIMIT | JOB_OBJECT_MSG_PROCESS_MEMORY_LIMIT => {
                        watch.limit_hit =
                            LimitHit::worst(watch.limit_hit, Some(LimitHit::Memory { victims: 0 }));
                    }
                    JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT => {
                        let refused = match watch.limit_hit {
                            Some(LimitHit::Pids { refused }) => refused + 1,
                            _ => 1,
                        };
                        watch.limit_hit =
                            LimitHit::worst(watch.limit_hit, Some(LimitHit::Pids { refused }));
                    }
                    DROPPED => {
                        watch.dropped = true;
                        if !watch.settled {
                            watch.begin_kill(watch.grace, now);
                        }
                    }
                    // Main exited, registered, or a job message: the step
                    // below asks what is true now.
                    _ => {}
                }
                watch.step(now);
            }
            for watch in watches.values_mut() {
                if watch.next_wake(now).is_some_and(|at| at <= now) {
                    watch.step(now);
                }
            }
            watches.retain(|_, w| !(w.settled && w.dropped));
            self.watched.store(watches.len(), Ordering::Relaxed);
        }
    }
}

/// A thread-pool wait that posts "main exited" for one tree.
struct RegisteredWait(HANDLE);

// SAFETY: a wait handle is a kernel object handle, usable from any thread.
unsafe impl Send for RegisteredWait {}

impl RegisteredWait {
    fn new(process: &OwnedHandle, key: usize) -> io::Result<RegisteredWait> {
        let mut wait: HANDLE = std::ptr::null_mut();
        // SAFETY: the process handle outlives the registration (a `Watch`
        // drops its wait before its process handle); the callback only
        // reads the key passed as context and posts to the static port.
        let ok = unsafe {
            RegisterWaitForSingleObject(
                &mut wait,
                process.as_raw_handle(),
                Some(main_exited),
                key as *const core::ffi::c_void,
                INFINITE,
                WT_EXECUTEONLYONCE,
            )
        };
        if ok == 0 {
            return Err(WinError::last("RegisterWaitForSingleObject"));
        }
        Ok(RegisteredWait(wait))
    }
}

impl Drop for RegisteredWait {
    fn drop(&mut self) {
        // SAFETY: registered once, unregistered once; INVALID_HANDLE_VALUE
        // waits for a running callback to return (it only posts a packet).
        unsafe { UnregisterWaitEx(self.0, INVALID_HANDLE_VALUE) };
    }
}

/// The thread-pool callback: the main process of tree `context` exited.
unsafe extern "system" fn main_exited(context: *mut core::ffi::c_void, _timed_out: bool) {
    let monitor = *MONITOR.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(monitor) = monitor {
        let _ = monitor.post(context as usize, MAIN_EXITED, 0);
    }
}

/// Where a kill stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kill {
    /// Nothing is being killed.
    Idle,
    /// `CTRL_BREAK_EVENT` went to the main process's group; the forced end
    /// follows at `deadline` unless the tree is empty first.
    Breaking { deadline: Instant },
    /// `TerminateJobObject` rounds every [`KILL_SWEEP`] until the job is
    /// empty or `give_up` passes.
    Terminating { give_up: Instant, next: Instant },
}

/// One tree as the monitor sees it.
pub(super) struct Watch {
    pub key: usize,
    /// Field order matters: the wait goes before the handle it waits on.
    wait: Option<RegisteredWait>,
    pub main: OwnedHandle,
    pub main_pid: u32,
    /// `None`: uncontained by the caller's explicit policy.
    pub job: Option<Arc<Job>>,
    /// The main process leads a console process group of its own.
    pub new_group: bool,
    /// A PTY session's pseudoconsole: closed when the job is empty (then
    /// its output reaches EOF), or earlier as the graceful rung of a kill.
    pub console: Option<Arc<PseudoConsole>>,
    pub ladder: Ladder,
    pub leftovers: Leftovers,
    pub grace: Duration,
    pub timeout_at: Option<Instant>,
    /// The session id (for uncontained trees, found by their tags).
    pub session: String,
    pub events: Sender<TreeEvent>,
    pub notify: Arc<Notify>,
    main_running: bool,
    timed_out: bool,
    kill: Kill,
    /// Descendants (never the main process) a kill reached.
    killed: HashSet<u32>,
    /// A job limit the tree ran into, as the job's messages said.
    limit_hit: Option<LimitHit>,
    settled: bool,
    dropped: bool,
    /// Events were sent since the listener was last woken.
    unannounced: bool,
}

impl Watch {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        key: usize,
        main: OwnedHandle,
        main_pid: u32,
        job: Option<Arc<Job>>,
        new_group: bool,
        console: Option<Arc<PseudoConsole>>,
        plan: &crate::contain::SpawnPlan,
        events: Sender<TreeEvent>,
        notify: Arc<Notify>,
    ) -> Watch {
        Watch {
            key,
            wait: None,
            main,
            main_pid,
            job,
            new_group,
            console,
            ladder: plan.ladder.clone(),
            leftovers: plan.leftovers,
            grace: plan.grace,
            timeout_at: plan.timeout.map(|t| Instant::now() + t),
            session: plan.tag.session.clone(),
            events,
            notify,
            main_running: true,
            timed_out: false,
            kill: Kill::Idle,
            killed: HashSet::new(),
            limit_hit: None,
            settled: false,
            dropped: false,
            unannounced: false,
        }
    }

    /// When the monitor must look at this tree again, at the latest.
    fn next_wake(&self, now: Instant) -> Option<Instant> {
        if self.settled {
            return None;
        }
        let waiting_to_empty = (!self.main_running).then(|| now + RECHECK);
        let kill = match self.kill {
            Kill::Idle => None,
            Kill::Breaking { deadline } => Some(deadline.min(now + RECHECK)),
            Kill::Terminating { give_up, next } => Some(give_up.min(next)),
        };
        let timeout = self.timeout_at.filter(|_| self.main_running);
        [waiting_to_empty, kill, timeout]
            .into_iter()
            .flatten()
            .min()
    }

    /// Looks at the tree now and moves it on, then wakes the listener
    /// once for everything it sent: a main exit and the empty job found
    /// in one look arrive together, so the session driver sees the tree
    /// settled when it sees the exit (and waits for the output's EOF —
    /// with ConPTY, conhost's last frame comes after the exit).
    fn step(&mut self, now: Instant) {
        self.advance(now);
        if std::mem::take(&mut self.unannounced) {
            self.notify.notify_one();
        }
    }

    fn advance(&mut self, now: Instant) {
        if self.settled {
            return;
        }
        if self.main_running
            && process::wait(self.main.as_handle(), Some(Duration::ZERO)).unwrap_or(false)
        {
            self.main_running = false;
            let code = process::exit_code(self.main.as_handle())
                .ok()
                .flatten()
                .unwrap_or(KILLED_EXIT_CODE);
            self.send(TreeEvent::MainExited {
                termination: Termination::Code(code as i32),
                timed_out: self.timed_out,
                limit_hit: self.limit_hit,
                oom_outside: 0,
                // Not measured on Windows (the job's accounting could say).
                usage: None,
            });
            if self.leftovers == Leftovers::Kill && self.kill == Kill::Idle && !self.is_empty() {
                self.begin_kill(self.grace, now);
            }
        }
        if self.main_running && self.timeout_at.is_some_and(|t| now >= t) {
            self.timeout_at = None;
            self.timed_out = true;
            self.begin_kill(self.grace, now);
        }
        match self.kill {
            Kill::Idle => {}
            Kill::Breaking { deadline } => {
                if now >= deadline && !self.is_empty() {
                    self.terminate(now);
                }
            }
            Kill::Terminating { give_up, next } => {
                if !self.is_empty() {
                    if now >= give_up {
                        let survivors = self.survivors();
                        self.send(TreeEvent::KillFailed { survivors });
                        // Stay killable: a later kill starts over. A dropped
                        // tree has nobody to ask again, so keep trying.
                        self.kill = if self.dropped {
                            Kill::Terminating {
                                give_up: now + VERIFY_WINDOW,
                                next: now + KILL_SWEEP,
                            }
                        } else {
                            Kill::Idle
                        };
                    } else if now >= next {
                        self.terminate_round(now, give_up);
                    }
                }
            }
        }
        if !self.main_running && self.is_empty() {
            self.settled = true;
            self.kill = Kill::Idle;
            // Step 2 of conpty.rs's order: the job is empty, so conhost
            // paints its last frame, exits, and the output reaches EOF.
            if let Some(console) = &self.console {
                console.close_in_background();
            }
            let killed = self.killed.len() as u32;
            self.send(TreeEvent::Settled {
                killed,
                limit_hit: self.limit_hit,
                oom_outside: 0,
                escaped: Vec::new(),
                usage: None,
            });
        }
    }

    /// Starts (or hurries) a kill: the graceful step where one exists, the
    /// forced end after `grace`. A kill under way keeps its place and takes
    /// the earlier deadline.
    fn begin_kill(&mut self, grace: Duration, now: Instant) {
        if self.settled {
            return;
        }
        self.note_targets();
        match self.kill {
            Kill::Terminating { .. } => {}
            Kill::Breaking { deadline } => {
                let deadline = deadline.min(now + grace);
                self.kill = Kill::Breaking { deadline };
                if deadline <= now {
                    self.terminate(now);
                }
            }
            Kill::Idle => {
                if !grace.is_zero() && self.graceful_step() {
                    self.kill = Kill::Breaking {
                        deadline: now + grace,
                    };
                } else {
                    self.terminate(now);
                }
            }
        }
    }

    /// A PTY session's: closing its pseudoconsole (its processes get
    /// `CTRL_CLOSE_EVENT`, and conhost ends those that stay — a hang-up).
    /// Any other session's: `CTRL_BREAK_EVENT` to the main process's
    /// console group. `false` when there is no such step here (closed
    /// already, no group of its own, a custom Unix ladder, no shared
    /// console — then the kill is forced at once rather than waiting a
    /// grace that nothing asked to use).
    fn graceful_step(&self) -> bool {
        if let Some(console) = &self.console {
            return console.close_in_background();
        }
        // Safe to aim at the group id even after the main process exited:
        // we hold its handle, so its pid (the group id) cannot be reused.
        self.new_group
            && self.ladder == Ladder::Standard
            && ctrl_event::send_ctrl_break(self.main_pid).is_ok()
    }

    fn terminate(&mut self, now: Instant) {
        self.terminate_round(now, now + VERIFY_WINDOW);
    }

    fn terminate_round(&mut self, now: Instant, give_up: Instant) {
        self.note_targets();
        match &self.job {
            Some(job) => {
                let _ = job.terminate(KILLED_EXIT_CODE);
            }
            None => {
                if self.main_running {
                    let _ = process::terminate(self.main.as_handle(), KILLED_EXIT_CODE);
                }
                for (pid, start) in self.tagged_members() {
                    let _ = process::terminate_if_identity(pid, start, KILLED_EXIT_CODE);
                }
            }
        }
        self.kill = Kill::Terminating {
            give_up,
            next: now + KILL_SWEEP,
        };
    }

    /// Records the descendants a kill reaches now.
    fn note_targets(&mut self) {
        let pids: Vec<u32> = match &self.job {
            Some(job) => job.process_ids().unwrap_or_default(),
            None => self
                .tagged_members()
                .into_iter()
                .map(|(pid, _)| pid)
                .collect(),
        };
        self.killed
            .extend(pids.into_iter().filter(|&pid| pid != self.main_pid));
    }

    /// Whether nothing of the tree runs: verified through the job's
    /// accounting (an error counts as "not empty": never settle on a guess).
    fn is_empty(&self) -> bool {
        if self.main_running {
            return false;
        }
        match &self.job {
            Some(job) => job.accounting().is_ok_and(|a| a.active_processes == 0),
            None => self.leftovers == Leftovers::Keep || self.tagged_members().is_empty(),
        }
    }

    fn survivors(&self) -> Vec<Survivor> {
        let pids = match &self.job {
            Some(job) => job.process_ids().unwrap_or_default(),
            None => self.tagged_members().into_iter().map(|(p, _)| p).collect(),
        };
        pids.into_iter()
            .map(|pid| Survivor {
                pid,
                command: crate::contain::sys::describe(pid),
            })
            .collect()
    }

    /// Live processes carrying this session's tag, main excluded (the only
    /// way to find an uncontained tree's descendants).
    fn tagged_members(&self) -> Vec<(u32, u64)> {
        super::sys::session_members(&self.session, self.main_pid)
    }

    /// Queues `event`; the listener is woken at the end of the step.
    fn send(&mut self, event: TreeEvent) {
        // The tree may have been dropped: nobody listens then.
        let _ = self.events.send(event);
        self.unannounced = true;
    }
}
