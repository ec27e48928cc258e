//! An operation running on the engine's runtime (start, write, wait,
//! kill of a background session), as Python sees it: waited for with the
//! GIL released (sync), or completed through a callback into the asyncio
//! loop (async). Cancelling it drops its future: what it was waiting for
//! is left as it was (a session's process keeps running, contained).

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use tokio::task::JoinHandle;

use crate::engine::Engine;
use crate::session::Value;

/// What an operation produced.
pub(crate) type Outcome = tether::Result<Value>;

/// Longest stretch a sync wait blocks without looking at Python's signals
/// (a condition variable is not interrupted by them): Ctrl-C is seen
/// within this.
const SLICE: Duration = Duration::from_millis(50);

/// Where an operation stands.
enum Stage {
    /// Running.
    Pending,
    /// Finished so (taken by `result`).
    Done(Option<Outcome>),
    /// Cancelled before it finished.
    Cancelled,
}

struct Shared {
    stage: Mutex<(Stage, Vec<Py<PyAny>>)>,
    done: Condvar,
}

/// The runtime's end: publishes the outcome and wakes whoever waits.
pub(crate) struct Finisher(Arc<Shared>);

impl Finisher {
    pub(crate) fn finish(self, outcome: Outcome) {
        let callbacks = {
            let mut stage = self.0.stage.lock().unwrap_or_else(|e| e.into_inner());
            if !matches!(stage.0, Stage::Pending) {
                return;
            }
            stage.0 = Stage::Done(Some(outcome));
            std::mem::take(&mut stage.1)
        };
        self.0.done.notify_all();
        call(callbacks);
    }
}

/// Calls done-callbacks (the asyncio glue's `call_soon_threadsafe`).
fn call(callbacks: Vec<Py<PyAny>>) {
    if callbacks.is_empty() {
        return;
    }
    Python::attach(|py| {
        for callback in callbacks {
            if let Err(e) = callback.call0(py) {
                e.write_unraisable(py, Some(callback.bind(py)));
            }
        }
    });
}

/// A background-session operation in flight.
#[pyclass(module = "tether._native")]
pub(crate) struct Op {
    shared: Arc<Shared>,
    engine: Arc<Engine>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Op {
    pub(crate) fn new(engine: Arc<Engine>) -> Op {
        Op {
            shared: Arc::new(Shared {
                stage: Mutex::new((Stage::Pending, Vec::new())),
                done: Condvar::new(),
            }),
            engine,
            task: Mutex::new(None),
        }
    }

    pub(crate) fn finisher(&self) -> Finisher {
        Finisher(Arc::clone(&self.shared))
    }

    pub(crate) fn set_task(&self, task: JoinHandle<()>) {
        *self.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Stage, Vec<Py<PyAny>>)> {
        self.shared.stage.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl Op {
    /// Waits at most `timeout` seconds (`None`: for ever) with the GIL
    /// released; `True` once done. Ctrl-C cancels the operation and raises
    /// `KeyboardInterrupt`.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let deadline = timeout
            .map(|t| crate::child::seconds("timeout", t).map(|t| Instant::now() + t))
            .transpose()?;
        loop {
            let slice = deadline.map_or(SLICE, |d| {
                d.saturating_duration_since(Instant::now()).min(SLICE)
            });
            let done = crate::gil::detach(py, || {
                let stage = self.lock();
                let (stage, _) = self
                    .shared
                    .done
                    .wait_timeout_while(stage, slice, |(s, _)| matches!(s, Stage::Pending))
                    .unwrap_or_else(|e| e.into_inner());
                !matches!(stage.0, Stage::Pending)
            });
            if done {
                return Ok(true);
            }
            if let Err(interrupt) = py.check_signals() {
                self.cancel(py);
                return Err(interrupt);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
        }
    }

    /// Whether it finished (or was cancelled).
    fn done(&self) -> bool {
        !matches!(self.lock().0, Stage::Pending)
    }

    /// Its value, or its error raised. Once only. Stops the runtime if
    /// nothing is left for it to do.
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let outcome = {
            let mut stage = self.lock();
            match &mut stage.0 {
                Stage::Pending => {
                    return Err(PyRuntimeError::new_err("the operation is still running"));
                }
                Stage::Cancelled => {
                    return Err(PyRuntimeError::new_err("the operation was cancelled"));
                }
                Stage::Done(outcome) => outcome
                    .take()
                    .ok_or_else(|| PyValueError::new_err("the result was already taken"))?,
            }
        };
        let engine = Arc::clone(&self.engine);
        crate::gil::detach(py, || engine.stop_if_idle());
        match outcome {
            Ok(value) => value.into_py(py),
            Err(e) => Err(crate::error::to_py(py, e)),
        }
    }

    /// Cancels it if it is still running (its future is dropped).
    fn cancel(&self, py: Python<'_>) {
        let cancelled = {
            let mut stage = self.lock();
            if matches!(stage.0, Stage::Pending) {
                stage.0 = Stage::Cancelled;
                stage.1.clear();
                true
            } else {
                false
            }
        };
        if cancelled {
            self.shared.done.notify_all();
            if let Some(task) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
                task.abort();
            }
            let engine = Arc::clone(&self.engine);
            // The abort lands on the runtime thread; `stop_if_idle` there
            // or at the next operation's end stops the runtime.
            crate::gil::detach(py, || drop(engine));
        }
    }

    /// Calls `callback()` once done — at once if it is — from the runtime
    /// thread, with the GIL.
    fn add_done_callback(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        {
            let mut stage = self.lock();
            if matches!(stage.0, Stage::Pending) {
                stage.1.push(callback);
                return Ok(());
            }
        }
        callback.call0(py).map(drop)
    }
}
