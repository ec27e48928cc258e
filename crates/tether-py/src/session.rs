//! Background sessions: the registry's calls, their values as Python
//! objects. Blocking calls (`start`, `write`, `wait`, `kill`) return an
//! [`Op`]; the rest answer at once from memory (or the spill file).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tether::registry::{
    KillOutcome, OutputMode, ReadResult, RunSpec, SessionInfo, StdinMode, Stream, WaitOptions,
    WaitOutcome, WaitResult,
};
use tether::terminal::{PtySize, Screen};

use crate::child::{OsArg, Usage, returncode, seconds};
use crate::engine::engine;
use crate::error::IntoPy;
use crate::limits::LimitReport;
use crate::op::Op;

/// What an operation gives back.
pub(crate) enum Value {
    Id(String),
    Unit,
    Waited(Box<WaitResult>),
    Killed(KillOutcome),
    Closed(Box<SessionInfo>),
    Read(ReadResult),
}

impl Value {
    pub(crate) fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(match self {
            Value::Id(id) => id.into_pyobject(py)?.into_any().unbind(),
            Value::Unit => py.None(),
            Value::Waited(w) => Py::new(py, Waited::new(py, *w)?)?.into_any(),
            Value::Killed(k) => Py::new(py, Killed::from(k))?.into_any(),
            Value::Closed(info) => Py::new(py, Info::new(py, *info)?)?.into_any(),
            Value::Read(read) => Py::new(py, Chunk::new(py, read))?.into_any(),
        })
    }
}

/// A snapshot of one session.
#[pyclass(frozen, get_all, module = "tether._native")]
pub(crate) struct Info {
    id: String,
    command: String,
    /// `running`, `exited`, `killed`, `timed_out` or `lost`.
    state: String,
    returncode: Option<i32>,
    timed_out: bool,
    /// `requested`, `timeout`, `idle_timeout`, `shutdown`, or `None`.
    kill_reason: Option<String>,
    pid: u32,
    containment: String,
    descendants: Vec<(u32, String)>,
    descendants_killed: u32,
    output_bytes: u64,
    stderr_bytes: Option<u64>,
    output_eof: bool,
    stdin_open: bool,
    settled: bool,
    started_at: f64,
    exited_at: Option<f64>,
    uptime: f64,
    purpose: String,
    pty: Option<(u16, u16)>,
    spill_error: Option<String>,
    /// The limits as applied, each with how it is enforced.
    limits: Py<LimitReport>,
    /// `"memory"`, `"pids"`, or `None`: the limit the session ran into.
    limit_hit: Option<&'static str>,
    /// What the tree used, once the main process exited (the whole tree's
    /// once settled); `None` before, or where not measured.
    rusage: Option<Usage>,
}

fn epoch(at: SystemTime) -> f64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Info {
    fn new(py: Python<'_>, i: SessionInfo) -> PyResult<Info> {
        Ok(Info {
            limits: Py::new(py, LimitReport::new(py, &i.limits)?)?,
            limit_hit: i.limit_hit.map(|hit| hit.name()),
            rusage: i.exit.and_then(|e| e.resource_usage()).map(Usage::from),
            id: i.id.as_str().to_owned(),
            command: i.command,
            state: i.state.name().to_owned(),
            returncode: i.exit.as_ref().map(returncode),
            timed_out: i.exit.is_some_and(|e| e.timed_out()),
            kill_reason: i.kill_reason.map(|r| r.name().to_owned()),
            pid: i.identity.pid,
            containment: i.containment.name().to_owned(),
            descendants: i
                .descendants
                .into_iter()
                .map(|d| (d.pid, d.command))
                .collect(),
            descendants_killed: i.descendants_killed,
            output_bytes: i.output_bytes,
            stderr_bytes: i.stderr_bytes,
            output_eof: i.output_eof,
            stdin_open: i.stdin_open,
            settled: i.settled,
            started_at: epoch(i.started_at),
            exited_at: i.exited_at.map(epoch),
            uptime: i.uptime.as_secs_f64(),
            purpose: i.purpose,
            pty: i.pty.map(|s| (s.rows(), s.cols())),
            spill_error: i.spill_error,
        })
    }
}

#[pymethods]
impl Info {
    fn __repr__(&self) -> String {
        format!(
            "SessionInfo(id={:?}, state={:?}, pid={}, command={:?})",
            self.id, self.state, self.pid, self.command
        )
    }
}

/// Bytes read from a session's output.
#[pyclass(frozen, get_all, module = "tether._native")]
pub(crate) struct Chunk {
    /// The bytes, exactly as written.
    data: Py<PyBytes>,
    /// Offset of `data[0]` (later than asked when bytes were `dropped`).
    offset: u64,
    /// Where the next read starts.
    next_offset: u64,
    /// Bytes before `offset` evicted beyond the spill cap: gone.
    dropped: u64,
    /// Bytes the stream received so far.
    end_offset: u64,
    /// Every writer is gone and this read reached the end.
    eof: bool,
}

impl Chunk {
    fn new(py: Python<'_>, r: ReadResult) -> Chunk {
        Chunk {
            data: PyBytes::new(py, &r.data).unbind(),
            offset: r.offset,
            next_offset: r.next_offset,
            dropped: r.dropped,
            end_offset: r.end_offset,
            eof: r.eof,
        }
    }
}

/// Why a wait returned, and the session then.
#[pyclass(frozen, get_all, module = "tether._native")]
pub(crate) struct Waited {
    /// `exited`, `matched`, `quiet` or `running` (the timeout passed).
    outcome: String,
    /// The match's `(start, end)` offsets, when `outcome == "matched"`.
    span: Option<(u64, u64)>,
    info: Py<Info>,
}

impl Waited {
    fn new(py: Python<'_>, w: WaitResult) -> PyResult<Waited> {
        let (outcome, span) = match w.outcome {
            WaitOutcome::Exited => ("exited", None),
            WaitOutcome::Matched { start, end } => ("matched", Some((start, end))),
            WaitOutcome::Quiet { .. } => ("quiet", None),
            WaitOutcome::StillRunning => ("running", None),
        };
        Ok(Waited {
            outcome: outcome.to_owned(),
            span,
            info: Py::new(py, Info::new(py, w.info)?)?,
        })
    }
}

/// What a kill did.
#[pyclass(frozen, get_all, module = "tether._native")]
pub(crate) struct Killed {
    /// The session's state afterwards.
    state: String,
    /// The main process had exited before; only leftovers were killed.
    already_exited: bool,
    /// Descendants the kill ended (the main process not counted).
    descendants_killed: u32,
}

impl From<KillOutcome> for Killed {
    fn from(k: KillOutcome) -> Killed {
        Killed {
            state: k.state.name().to_owned(),
            already_exited: k.already_exited,
            descendants_killed: k.descendants_killed,
        }
    }
}

/// A PTY session's screen as last drawn.
#[pyclass(frozen, get_all, module = "tether._native")]
pub(crate) struct ScreenView {
    rows: u16,
    cols: u16,
    /// One string per row, trailing blanks trimmed.
    lines: Vec<String>,
    cursor_row: u16,
    cursor_col: u16,
    cursor_hidden: bool,
    /// A full-screen program (vim, less) is drawing.
    alternate_screen: bool,
}

impl From<Screen> for ScreenView {
    fn from(s: Screen) -> ScreenView {
        ScreenView {
            rows: s.size.rows(),
            cols: s.size.cols(),
            lines: s.lines,
            cursor_row: s.cursor_row,
            cursor_col: s.cursor_col,
            cursor_hidden: s.cursor_hidden,
            alternate_screen: s.alternate_screen,
        }
    }
}

#[pymethods]
impl ScreenView {
    /// The rows joined by newlines, trailing blank rows dropped.
    #[getter]
    fn text(&self) -> String {
        let last = self
            .lines
            .iter()
            .rposition(|l| !l.is_empty())
            .map_or(0, |i| i + 1);
        self.lines[..last].join("\n")
    }
}

fn stream(stderr: bool) -> Stream {
    if stderr {
        Stream::Stderr
    } else {
        Stream::Output
    }
}

/// Starts a background session (see `tether.start`); the op's value is
/// its id.
#[pyfunction]
#[pyo3(signature = (argv=None, script=None, *, cwd=None, env=Vec::new(), env_clear=false, stdin=false, separate_stderr=false, pty=None, timeout=None, idle_timeout=None, grace=2.0, max_memory=None, spill_cap=None, purpose="session".to_owned(), memory=None, pids=None, cpu=None, require_limits=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn start(
    py: Python<'_>,
    argv: Option<Vec<OsArg>>,
    script: Option<String>,
    cwd: Option<OsArg>,
    env: Vec<(OsArg, OsArg)>,
    env_clear: bool,
    stdin: bool,
    separate_stderr: bool,
    pty: Option<(u32, u32)>,
    timeout: Option<f64>,
    idle_timeout: Option<f64>,
    grace: f64,
    max_memory: Option<usize>,
    spill_cap: Option<u64>,
    purpose: String,
    memory: Option<Bound<'_, PyAny>>,
    pids: Option<Bound<'_, PyAny>>,
    cpu: Option<Bound<'_, PyAny>>,
    require_limits: bool,
) -> PyResult<Op> {
    let limits = crate::limits::from_py(
        py,
        memory.as_ref(),
        pids.as_ref(),
        cpu.as_ref(),
        require_limits,
    )?;
    let mut spec = match (argv, script) {
        (Some(argv), None) => RunSpec::argv(
            argv.into_iter()
                .map(OsArg::into_os)
                .collect::<PyResult<Vec<_>>>()?,
        ),
        (None, Some(script)) => RunSpec::shell(script),
        _ => {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "give exactly one of argv and script",
            ));
        }
    };
    if let Some(cwd) = cwd {
        spec = spec.cwd(cwd.into_os()?);
    }
    if env_clear {
        spec = spec.env_clear();
    }
    for (key, value) in env {
        spec = spec.env(key.into_os()?, value.into_os()?);
    }
    if stdin {
        spec = spec.stdin(StdinMode::Piped);
    }
    if separate_stderr {
        spec = spec.output(OutputMode::Separate);
    }
    if let Some((rows, cols)) = pty {
        spec = spec.pty(PtySize::new(rows, cols).py_err(py)?);
    }
    if let Some(t) = timeout {
        spec = spec.timeout(seconds("timeout", t)?);
    }
    if let Some(t) = idle_timeout {
        spec = spec.idle_timeout(seconds("idle_timeout", t)?);
    }
    spec = spec
        .grace(seconds("grace", grace)?)
        .purpose(purpose)
        .limits(limits);
    if let Some(bytes) = max_memory {
        spec = spec.max_memory(bytes);
    }
    if let Some(bytes) = spill_cap {
        spec = spec.spill_cap(bytes);
    }
    let engine = engine();
    let registry = Arc::clone(&engine.registry);
    engine.spawn(async move {
        registry
            .run(spec)
            .await
            .map(|id| Value::Id(id.as_str().to_owned()))
    })
}

/// Reads up to `max_bytes` from `offset` (lossless: evicted bytes come
/// from the spill file).
#[pyfunction]
#[pyo3(signature = (id, offset=0, max_bytes=65536, stderr=false))]
pub(crate) fn read(
    py: Python<'_>,
    id: &str,
    offset: u64,
    max_bytes: usize,
    stderr: bool,
) -> PyResult<Chunk> {
    let registry = Arc::clone(&engine().registry);
    let read = crate::gil::detach(py, || {
        registry.read_stream(id, stream(stderr), offset, max_bytes)
    })
    .py_err(py)?;
    Ok(Chunk::new(py, read))
}

/// Writes all of `data` to the session's stdin.
#[pyfunction]
pub(crate) fn write(id: String, data: Vec<u8>) -> PyResult<Op> {
    let engine = engine();
    let registry = Arc::clone(&engine.registry);
    engine.spawn(async move { registry.write(&id, &data).await.map(|()| Value::Unit) })
}

/// Closes stdin (a PTY session gets its end-of-file character instead).
#[pyfunction]
pub(crate) fn close_stdin(py: Python<'_>, id: &str) -> PyResult<()> {
    engine().registry.close_stdin(id).py_err(py)
}

/// The bytes of named keys (`Enter`, `C-c`, `Up`, …) for a PTY session.
#[pyfunction]
pub(crate) fn keys(py: Python<'_>, id: &str, names: Vec<String>) -> PyResult<Py<PyBytes>> {
    // Reading the cursor-key mode parses what the screen lags (up to its
    // `screen_lag` after a flood): without the GIL, as every look.
    let registry = Arc::clone(&engine().registry);
    let bytes = crate::gil::detach(py, || registry.keys(id, &names)).py_err(py)?;
    Ok(PyBytes::new(py, &bytes).unbind())
}

/// Waits as the MCP server's `wait` does (see `tether.Session.wait`).
#[pyfunction]
#[pyo3(signature = (id, timeout, until=None, offset=0, stderr=false, settled=false, through_exit=false))]
pub(crate) fn wait(
    id: String,
    timeout: f64,
    until: Option<String>,
    offset: u64,
    stderr: bool,
    settled: bool,
    through_exit: bool,
) -> PyResult<Op> {
    let mut options = WaitOptions::new(seconds("timeout", timeout)?)
        .from(offset)
        .stream(stream(stderr));
    if let Some(until) = until {
        options = options.until(until);
    }
    if settled {
        options = options.settled();
    }
    if through_exit {
        options = options.through_exit();
    }
    let engine = engine();
    let registry = Arc::clone(&engine.registry);
    engine.spawn(async move {
        registry
            .wait(&id, options)
            .await
            .map(|w| Value::Waited(Box::new(w)))
    })
}

/// Kills the session's whole tree (verified).
#[pyfunction]
pub(crate) fn kill(id: String, grace: f64) -> PyResult<Op> {
    let grace = seconds("grace", grace)?;
    let engine = engine();
    let registry = Arc::clone(&engine.registry);
    engine.spawn(async move { registry.kill(&id, grace).await.map(Value::Killed) })
}

/// One session's snapshot.
#[pyfunction]
pub(crate) fn info(py: Python<'_>, id: &str) -> PyResult<Info> {
    let registry = Arc::clone(&engine().registry);
    Info::new(py, crate::gil::detach(py, || registry.info(id)).py_err(py)?)
}

/// Every session, oldest first.
#[pyfunction]
pub(crate) fn sessions(py: Python<'_>) -> PyResult<Vec<Info>> {
    let registry = Arc::clone(&engine().registry);
    crate::gil::detach(py, || registry.list())
        .into_iter()
        .map(|info| Info::new(py, info))
        .collect()
}

/// A PTY session's rendered screen.
#[pyfunction]
pub(crate) fn screen(py: Python<'_>, id: &str) -> PyResult<ScreenView> {
    let registry = Arc::clone(&engine().registry);
    Ok(ScreenView::from(
        crate::gil::detach(py, || registry.screen(id)).py_err(py)?,
    ))
}

/// Resizes a PTY session's terminal.
#[pyfunction]
pub(crate) fn resize(py: Python<'_>, id: &str, rows: u32, cols: u32) -> PyResult<()> {
    let size = PtySize::new(rows, cols).py_err(py)?;
    let registry = Arc::clone(&engine().registry);
    crate::gil::detach(py, || registry.resize(id, size)).py_err(py)
}

/// Kills what is left of the session (verified) and forgets it: every
/// descriptor and buffer it held goes now. The op's value is its last
/// snapshot.
#[pyfunction]
pub(crate) fn close(id: String, grace: f64) -> PyResult<Op> {
    let grace = seconds("grace", grace)?;
    let engine = engine();
    let registry = Arc::clone(&engine.registry);
    engine.spawn(async move {
        registry
            .close(&id, grace)
            .await
            .map(|info| Value::Closed(Box::new(info)))
    })
}

/// Waits (at most `timeout`) until the stream has bytes at `offset` or
/// after, or ended; the op's value is the read (a `Chunk`).
#[pyfunction]
#[pyo3(signature = (id, offset, max_bytes, timeout, stderr=false))]
pub(crate) fn read_wait(
    id: String,
    offset: u64,
    max_bytes: usize,
    timeout: f64,
    stderr: bool,
) -> PyResult<Op> {
    let timeout = seconds("timeout", timeout)?;
    let engine = engine();
    let registry = Arc::clone(&engine.registry);
    engine.spawn(async move {
        registry
            .read_wait(&id, stream(stderr), offset, max_bytes, timeout)
            .await
            .map(Value::Read)
    })
}

/// The session's output doorbell: a descriptor readable when output past
/// what `output_seen` acknowledged is there (the registry owns it).
#[cfg(unix)]
#[pyfunction]
pub(crate) fn output_fd(py: Python<'_>, id: &str) -> PyResult<i32> {
    use tether::unix::RegistryOutputExt;
    engine().registry.output_fd(id).py_err(py)
}

/// Acknowledges the output up to `offset` (see `output_fd`).
#[pyfunction]
pub(crate) fn output_seen(py: Python<'_>, id: &str, offset: u64) -> PyResult<()> {
    engine().registry.output_seen(id, offset).py_err(py)
}
