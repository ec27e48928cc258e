//! The background sessions' engine: one [`Registry`] per process, and a
//! tokio runtime that exists only while it has work.
//!
//! # Why the runtime comes and goes
//!
//! A session's output must be read while Python does something else, so a
//! thread runs while any session is live. But CPython 3.12+ warns on every
//! `fork()` of a process with a thread, and Python agents fork (pexpect's
//! `pty.fork`, `multiprocessing`). So the runtime — one current-thread
//! runtime on one thread of ours, plus tokio's blocking pool for spawns —
//! is started by the first operation that needs it and stopped as soon as
//! no session is live and no operation is in flight: by the caller whose
//! operation finished last (joined before that call returns, so an idle
//! process has no thread of ours when it gets control back), or by the
//! runtime itself when the last session settles on its own.
//!
//! Finished sessions stay readable in the registry without a runtime
//! (`read`, `info`, `list` and `screen` need none). Their retention timers
//! live on the runtime, so a stopped runtime keeps them until
//! `max_finished` evicts the oldest.
//!
//! # Fork
//!
//! The engine belongs to the process that made it. A child forked without
//! `exec` finds its pid differs and makes a fresh, empty engine, leaving
//! the parent's untouched (its locks may have been held by the parent's
//! runtime thread at the fork; that thread does not exist in the child).
//! The parent's keepers no longer hear from the child: the library points
//! its copies of their sockets at `/dev/null` at the fork.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pyo3::prelude::*;
use tether::registry::{Registry, RegistryConfig, SessionInfo, SessionObserver};
use tokio::runtime::Handle;
use tokio::sync::{Notify, oneshot};

use crate::op::{Op, Outcome};

/// One process's sessions.
pub(crate) struct Engine {
    /// The process this engine belongs to.
    pub(crate) pid: u32,
    pub(crate) registry: Arc<Registry>,
    state: Mutex<State>,
    /// Woken when a session settles or an operation ends.
    changed: Arc<Notify>,
    /// The runtime's threads, as the kernel knows them (see [`Threads`]).
    threads: Arc<Threads>,
}

#[derive(Default)]
struct State {
    /// The running runtime, while there is one.
    running: Option<Running>,
    /// A runtime thread that stopped itself and may not have exited yet.
    stopping: Option<JoinHandle<()>>,
    /// Operations spawned and not finished.
    in_flight: usize,
}

struct Running {
    handle: Handle,
    stop: oneshot::Sender<()>,
    thread: JoinHandle<()>,
}

/// Counts an operation's end — finished or cancelled (its task dropped).
struct OpEnded(Arc<Engine>);

impl Drop for OpEnded {
    fn drop(&mut self) {
        self.0.lock().in_flight -= 1;
        self.0.changed.notify_one();
    }
}

/// Tells the engine when a session settles (the runtime may stop then).
#[derive(Debug)]
struct Settling(Arc<Notify>);

impl SessionObserver for Settling {
    fn started(&self, _info: &SessionInfo) {}
    fn settled(&self, _info: &SessionInfo) {
        self.0.notify_one();
    }
}

static ENGINE: Mutex<Option<Arc<Engine>>> = Mutex::new(None);

/// Most live sessions `set_max_sessions` accepts. Each live session holds
/// ~6 descriptors of this process (pipes or a PTY, its pidfd, the keeper
/// link, a spill file once it spills): 4096 of them is ~25,000, past
/// most processes' `RLIMIT_NOFILE` already.
pub(crate) const MAX_SESSIONS_CEILING: usize = 4096;

/// The cap `set_max_sessions` set (0: never set, the library's default).
/// Process-wide, so an engine made afresh after a fork has it too.
static MAX_SESSIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets the live-session cap of this process's engine (and of any made
/// after a fork); returns the previous one.
pub(crate) fn set_max_sessions(n: usize) -> usize {
    let engine = engine();
    let previous = engine.registry.max_live();
    MAX_SESSIONS.store(n, std::sync::atomic::Ordering::SeqCst);
    engine.registry.set_max_live(n);
    previous
}

/// This process's engine (a fresh one in a child forked since the last).
pub(crate) fn engine() -> Arc<Engine> {
    let me = std::process::id();
    let mut slot = ENGINE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(engine) = slot.as_ref()
        && engine.pid == me
    {
        return Arc::clone(engine);
    }
    if let Some(inherited) = slot.take() {
        // The parent's: its runtime thread is not in this process, its
        // locks may be held for ever, its sessions are the parent's.
        std::mem::forget(inherited);
    }
    let changed = Arc::new(Notify::new());
    let mut config = RegistryConfig {
        observer: Some(Arc::new(Settling(Arc::clone(&changed)))),
        ..RegistryConfig::default()
    };
    match MAX_SESSIONS.load(std::sync::atomic::Ordering::SeqCst) {
        0 => {}
        n => config.max_live = n,
    }
    let engine = Arc::new(Engine {
        pid: me,
        registry: Arc::new(Registry::new(config)),
        state: Mutex::new(State::default()),
        changed,
        threads: Arc::default(),
    });
    *slot = Some(Arc::clone(&engine));
    engine
}

/// Drops the engine a forked child inherited (called from Python's
/// `os.register_at_fork(after_in_child=…)`; `engine()` does the same on
/// first use in any case).
pub(crate) fn after_fork_in_child() {
    let me = std::process::id();
    let mut slot = match ENGINE.try_lock() {
        Ok(slot) => slot,
        // Held at the fork by a thread that is not in this child: leave it
        // (engine() finds the pid differs and starts afresh anyway).
        Err(_) => return,
    };
    if slot.as_ref().is_some_and(|e| e.pid != me) {
        std::mem::forget(slot.take());
    }
}

impl Engine {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `future` on the runtime (started if need be) and returns a
    /// handle to its outcome.
    pub(crate) fn spawn<F>(self: &Arc<Self>, future: F) -> PyResult<Op>
    where
        F: Future<Output = Outcome> + Send + 'static,
    {
        let mut state = self.lock();
        let handle = self.running(&mut state)?;
        state.in_flight += 1;
        let op = Op::new(Arc::clone(self));
        let finish = op.finisher();
        let ended = OpEnded(Arc::clone(self));
        let task = handle.spawn(async move {
            let outcome = future.await;
            // Counted as ended before the caller hears of it, so a caller
            // that goes idle stops the runtime itself (`stop_if_idle`).
            drop(ended);
            finish.finish(outcome);
        });
        op.set_task(task);
        Ok(op)
    }

    /// The runtime's handle, starting it if none runs.
    fn running(self: &Arc<Self>, state: &mut State) -> PyResult<Handle> {
        if let Some(running) = &state.running {
            return Ok(running.handle.clone());
        }
        if let Some(thread) = state.stopping.take() {
            let _ = thread.join();
            self.registry.release_ended_tasks();
        }
        let threads = Arc::clone(&self.threads);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("tether-blocking")
            .on_thread_start(move || threads.started())
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel();
        let engine = Arc::clone(self);
        let thread = std::thread::Builder::new()
            .name("tether-runtime".into())
            .spawn(move || {
                engine.threads.started();
                runtime.block_on(engine.serve(stopped));
                // Joins the blocking pool's threads.
                drop(runtime);
            })?;
        state.running = Some(Running {
            handle: handle.clone(),
            stop,
            thread,
        });
        Ok(handle)
    }

    /// The runtime thread's own task: returns (ending the runtime) when
    /// told to stop, or when it finds nothing left to do.
    async fn serve(self: Arc<Self>, mut stop: oneshot::Receiver<()>) {
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = self.changed.notified() => {}
            }
            let mut state = self.lock();
            if state.in_flight == 0 && self.registry.live_count() == 0 {
                // Nobody waits on this stop: the next start (or a caller
                // that goes idle) joins the thread.
                if let Some(running) = state.running.take() {
                    state.stopping = Some(running.thread);
                }
                return;
            }
        }
    }

    /// Called by a caller whose operation just finished: if nothing is left
    /// to do, stops the runtime and joins its threads before returning.
    pub(crate) fn stop_if_idle(&self) {
        let (thread, stop) = {
            let mut state = self.lock();
            if state.in_flight != 0 || self.registry.live_count() != 0 {
                return;
            }
            match state.running.take() {
                Some(running) => (Some(running.thread), Some(running.stop)),
                None => (state.stopping.take(), None),
            }
        };
        if let Some(stop) = stop {
            let _ = stop.send(());
        }
        if let Some(thread) = thread
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
            self.threads.wait_released();
            // The runtime is gone: its finished sessions' tasks with it.
            self.registry.release_ended_tasks();
        }
    }
}

/// The kernel thread ids of the runtime's threads: the runtime thread and
/// tokio's blocking pool, each recorded as it starts. A joined thread
/// stays listed in `/proc/self/task` (and counted by CPython's fork
/// warning) until the kernel releases it, a little after the join returns:
/// a caller that stopped the runtime waits for that too
/// ([`tether::sys::wait_threads_released`]).
#[derive(Default)]
struct Threads(Mutex<Vec<i32>>);

/// How long a stopping caller waits for the kernel to release the
/// runtime's joined threads: normally microseconds; the bound only keeps a
/// stuck exit from blocking Python.
const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl Threads {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<i32>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Called on each of the runtime's threads as it starts.
    fn started(&self) {
        if let Some(tid) = tether::sys::thread_id() {
            self.lock().push(tid);
        }
    }

    /// Waits until the kernel has released every thread recorded, all of
    /// them joined by now.
    fn wait_released(&self) {
        let tids = std::mem::take(&mut *self.lock());
        tether::sys::wait_threads_released(&tids, RELEASE_WAIT);
    }
}
