//! One contained command for `tether.Popen` and `tether.run`: a
//! [`tether::Child`] with the GIL released while it blocks. No runtime and
//! no thread of ours: waits block the calling thread on the keeper's
//! socket.

use std::ffi::OsString;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::IntoPy;
use crate::limits::LimitReport;

/// Longest stretch a wait blocks without looking at Python's signals.
/// Ctrl-C normally interrupts the wait at once (`EINTR` on the main
/// thread); this bounds it when the signal landed on another thread, and
/// bounds how long a `poll`/`kill` from another thread waits for the lock.
const SLICE: Duration = Duration::from_millis(100);

/// How a command's main process ended.
#[pyclass(frozen, module = "tether._native")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Status {
    /// The exit code, or minus the signal that killed it (as `subprocess`).
    #[pyo3(get)]
    returncode: i32,
    /// It was killed because its `timeout` passed.
    #[pyo3(get)]
    timed_out: bool,
    /// Descendants killed on the way to an empty tree (the main process
    /// not counted).
    #[pyo3(get)]
    descendants_killed: u32,
    /// The limit the session ran into (`"memory"`: the kernel killed
    /// processes of it for its memory limit; `"pids"`: forks were refused),
    /// or `None`.
    #[pyo3(get)]
    limit_hit: Option<&'static str>,
    /// Processes found outside the session's cgroups — out of its limits,
    /// moved there by a command that could write its owner's cgroup — when
    /// the keeper walked the tree; killed with it all the same.
    #[pyo3(get)]
    limits_escaped: u32,
    usage: Option<tether::ResourceUsage>,
}

impl From<tether::ExitStatus> for Status {
    fn from(status: tether::ExitStatus) -> Status {
        Status {
            returncode: returncode(&status),
            timed_out: status.timed_out(),
            descendants_killed: status.descendants_killed(),
            limit_hit: status.limit_hit().map(|hit| hit.name()),
            limits_escaped: status.limits_escaped(),
            usage: status.resource_usage(),
        }
    }
}

/// What a command's tree used, as `os.wait4` reports it for one process
/// (`resource.struct_rusage`'s names): the keeper's `wait4` reports of
/// every process of the tree, added up (`ru_maxrss`: the largest).
#[pyclass(frozen, get_all, name = "ResourceUsage", module = "tether._native")]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Usage {
    /// User CPU time, seconds.
    ru_utime: f64,
    /// System CPU time, seconds.
    ru_stime: f64,
    /// The largest resident set of any one process, KiB (as Linux's
    /// `getrusage`).
    ru_maxrss: u64,
}

impl From<tether::ResourceUsage> for Usage {
    fn from(u: tether::ResourceUsage) -> Usage {
        Usage {
            ru_utime: u.user_time.as_secs_f64(),
            ru_stime: u.system_time.as_secs_f64(),
            ru_maxrss: u.max_rss / 1024,
        }
    }
}

#[pymethods]
impl Usage {
    fn __repr__(&self) -> String {
        format!(
            "ResourceUsage(ru_utime={:.6}, ru_stime={:.6}, ru_maxrss={})",
            self.ru_utime, self.ru_stime, self.ru_maxrss
        )
    }
}

#[pymethods]
impl Status {
    /// What the whole tree used (`None` where not measured: macOS,
    /// Windows).
    #[getter]
    fn rusage(&self) -> Option<Usage> {
        self.usage.map(Usage::from)
    }

    fn __repr__(&self) -> String {
        format!(
            "Status(returncode={}, timed_out={}, descendants_killed={}, limit_hit={})",
            self.returncode,
            if self.timed_out { "True" } else { "False" },
            self.descendants_killed,
            self.limit_hit
                .map_or_else(|| "None".to_owned(), |hit| format!("{hit:?}"))
        )
    }
}

/// `subprocess`'s spelling: the code, or `-signal`.
pub(crate) fn returncode(status: &tether::ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| -(status.shell_code() - 128))
}

/// Seconds from Python as a `Duration`.
pub(crate) fn seconds(what: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        PyValueError::new_err(format!(
            "{what} must be a number of seconds >= 0, not {value}"
        ))
    })
}

/// `subprocess.SubprocessError(message)`.
#[cfg(unix)]
fn subprocess_error(py: Python<'_>, message: &str) -> PyErr {
    let made = py
        .import("subprocess")
        .and_then(|m| m.getattr("SubprocessError"))
        .and_then(|class| class.call1((message,)));
    match made {
        Ok(exception) => PyErr::from_value(exception),
        Err(e) => e,
    }
}

/// The error of a call on a handle that was closed before its command ended.
fn closed() -> PyErr {
    PyValueError::new_err("the command's handle was closed (its tree was let go and killed)")
}

/// A contained command: its tree dies when this is closed or collected,
/// when the owner dies, or at `kill()`.
#[pyclass(module = "tether._native")]
pub(crate) struct Child {
    child: Mutex<Option<tether::Child>>,
    handle: tether::ChildHandle,
    #[pyo3(get)]
    pid: u32,
    #[pyo3(get)]
    containment: String,
    #[pyo3(get)]
    session_id: String,
    /// The process that started it (see `InheritedHandleError`).
    #[pyo3(get)]
    owner_pid: u32,
    /// The limits as applied, each with how it is enforced.
    #[pyo3(get)]
    limits: Py<LimitReport>,
    status: Mutex<Option<Status>>,
}

/// A program argument or path: `str` or `bytes`, as `os.fsencode` takes.
#[derive(FromPyObject)]
pub(crate) enum OsArg {
    Text(String),
    Bytes(Vec<u8>),
}

impl OsArg {
    pub(crate) fn into_os(self) -> PyResult<OsString> {
        match self {
            OsArg::Text(s) => Ok(s.into()),
            OsArg::Bytes(b) => String::from_utf8(b)
                .map(OsString::from)
                .or_else(|e| os_from_bytes(e.into_bytes())),
        }
    }
}

/// Non-UTF-8 bytes as an `OsString`: as they are on Unix (`os.fsencode`'s
/// output: what `subprocess` passes to `execve`).
#[cfg(unix)]
fn os_from_bytes(bytes: Vec<u8>) -> PyResult<OsString> {
    use std::os::unix::ffi::OsStringExt;
    Ok(OsString::from_vec(bytes))
}

/// Non-UTF-8 bytes as an `OsString`: decoded as `os.fsdecode` does.
#[cfg(not(unix))]
fn os_from_bytes(bytes: Vec<u8>) -> PyResult<OsString> {
    Python::attach(|py| {
        let fsdecode = py.import("os")?.getattr("fsdecode")?;
        fsdecode
            .call1((pyo3::types::PyBytes::new(py, &bytes),))?
            .extract::<String>()
    })
    .map(OsString::from)
}

/// One standard stream: `None` inherits, `-1` is the null device, a
/// descriptor is duplicated for the child.
fn stdio(fd: Option<i32>) -> PyResult<tether::Stdio> {
    match fd {
        None => Ok(tether::Stdio::Inherit),
        Some(-1) => Ok(tether::Stdio::Null),
        Some(fd) => tether::Stdio::from_descriptor(fd).map_err(PyErr::from),
    }
}

/// `subprocess.Popen`'s settings of the command's side of the spawn (Unix;
/// see `tether.Popen`): a dict with every key.
#[derive(FromPyObject, Default)]
#[pyo3(from_item_all)]
pub(crate) struct Setup {
    executable: Option<OsArg>,
    new_session: bool,
    /// (the command's number, our descriptor).
    pass_fds: Vec<(i32, i32)>,
    umask: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    groups: Option<Vec<u32>>,
    ignore_signals: Vec<i32>,
}

#[cfg(unix)]
fn apply_setup(command: &mut tether::Command, setup: Setup) -> PyResult<()> {
    use tether::unix::CommandExt;
    command.new_session(setup.new_session);
    for (target, fd) in setup.pass_fds {
        // A negative number is a ValueError (subprocess's too); one that
        // is no open descriptor is OSError(EBADF, …) with its errno set.
        if fd < 0 {
            return Err(PyValueError::new_err(format!(
                "pass_fds: {fd} is not a file descriptor (negative)"
            )));
        }
        let owned = tether::unix::duplicate_fd(fd)
            .map_err(|e| Python::attach(|py| crate::error::to_py(py, tether::Error::Io(e))))?;
        command.pass_fd(target, owned);
    }
    if let Some(mask) = setup.umask {
        command.umask(mask);
    }
    if let Some(uid) = setup.uid {
        command.uid(uid);
    }
    if let Some(gid) = setup.gid {
        command.gid(gid);
    }
    if let Some(groups) = setup.groups {
        command.groups(&groups);
    }
    command.ignore_signals(&setup.ignore_signals);
    Ok(())
}

#[cfg(not(unix))]
fn apply_setup(_command: &mut tether::Command, setup: Setup) -> PyResult<()> {
    let any = setup.new_session
        || !setup.pass_fds.is_empty()
        || setup.umask.is_some()
        || setup.uid.is_some()
        || setup.gid.is_some()
        || setup.groups.is_some()
        || !setup.ignore_signals.is_empty();
    if any {
        return Err(PyValueError::new_err(
            "start_new_session, pass_fds, umask, user, group, extra_groups and restore_signals=False are Unix-only",
        ));
    }
    Ok(())
}

/// What the keeper's process reports when `preexec_fn` raised: not an errno
/// of any platform's (Linux's stop at 133 with 125 ECANCELED, which exec
/// never gives; macOS's at 106), the only part of the error that crosses
/// the exec.
#[cfg(unix)]
const PREEXEC_FAILED: i32 = 125;

/// Runs `func` in the fresh keeper's process before its exec (see
/// `tether.Popen`'s `preexec_fn`), as `_posixsubprocess` runs it in its
/// child: this thread holds the GIL across the fork.
#[cfg(unix)]
fn set_preexec(command: &mut tether::Command, func: Py<PyAny>) {
    let hook = move || {
        // SAFETY: in the forked child, whose only thread is the one that
        // held the GIL at the fork (see `spawn_holding_gil`).
        unsafe {
            pyo3::ffi::PyOS_AfterFork_Child();
            let py = Python::assume_attached();
            match func.call0(py) {
                Ok(_) => Ok(()),
                Err(_) => Err(std::io::Error::from_raw_os_error(PREEXEC_FAILED)),
            }
        }
    };
    // SAFETY: as CPython's own preexec_fn, the callable is the caller's to
    // keep fork-safe (subprocess documents the same hazard).
    unsafe {
        tether::unix::CommandExt::pre_exec_keeper(command, hook);
    }
}

/// Spawns with the GIL held across the fork of the keeper's process, with
/// CPython's fork protocol around it (what `os.fork` and
/// `_posixsubprocess` do), so that `preexec_fn` can run Python there.
#[cfg(unix)]
fn spawn_holding_gil(
    command: &mut tether::Command,
    attended: bool,
) -> tether::Result<tether::Child> {
    // SAFETY: called with the GIL held, in pairs, as CPython documents.
    unsafe { pyo3::ffi::PyOS_BeforeFork() };
    let spawned = if attended {
        command.spawn_attended()
    } else {
        command.spawn()
    };
    // SAFETY: as above.
    unsafe { pyo3::ffi::PyOS_AfterFork_Parent() };
    spawned
}

/// Starts `argv` contained (see `tether.Popen` for every argument).
/// `attended`: the caller waits for the child on this thread at once, in
/// `wait` (or `poll`) calls until it finished, and never hands it out
/// (`tether.run`, `call`): those waits watch the keeper (resume it if its
/// command stopped it) and no guard thread is started for the command
/// (`tether::Command::spawn_attended`).
#[pyfunction]
#[pyo3(signature = (argv, *, cwd=None, env=None, stdin=None, stdout=None, stderr=None, grace=2.0, timeout=None, purpose="run".to_owned(), keep_descendants=false, memory=None, pids=None, cpu=None, foreground=false, require_limits=false, setup=None, preexec_fn=None, attended=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn spawn(
    py: Python<'_>,
    argv: Vec<OsArg>,
    cwd: Option<OsArg>,
    env: Option<Vec<(OsArg, OsArg)>>,
    stdin: Option<i32>,
    stdout: Option<i32>,
    stderr: Option<i32>,
    grace: f64,
    timeout: Option<f64>,
    purpose: String,
    keep_descendants: bool,
    memory: Option<Bound<'_, PyAny>>,
    pids: Option<Bound<'_, PyAny>>,
    cpu: Option<Bound<'_, PyAny>>,
    foreground: bool,
    require_limits: bool,
    setup: Option<Setup>,
    preexec_fn: Option<Py<PyAny>>,
    attended: bool,
) -> PyResult<Child> {
    let limits = crate::limits::from_py(
        py,
        memory.as_ref(),
        pids.as_ref(),
        cpu.as_ref(),
        require_limits,
    )?;
    let mut setup = setup.unwrap_or_default();
    let mut argv = argv.into_iter();
    let first = argv
        .next()
        .ok_or_else(|| PyValueError::new_err("args must name a program"))?
        .into_os()?;
    let mut command = match setup.executable.take() {
        // The executable runs; argv[0] stays what the caller gave (Unix;
        // Windows has no argv[0] of its own to keep).
        Some(executable) => {
            let command = tether::Command::new(executable.into_os()?);
            #[cfg(unix)]
            let command = {
                let mut command = command;
                tether::unix::CommandExt::arg0(&mut command, first);
                command
            };
            #[cfg(not(unix))]
            drop(first);
            command
        }
        None => tether::Command::new(first),
    };
    for arg in argv {
        command.arg(arg.into_os()?);
    }
    if let Some(cwd) = cwd {
        command.current_dir(cwd.into_os()?);
    }
    if let Some(env) = env {
        command.env_clear();
        for (key, value) in env {
            command.env(key.into_os()?, value.into_os()?);
        }
    }
    command
        .stdin(stdio(stdin)?)
        .stdout(stdio(stdout)?)
        .stderr(stdio(stderr)?)
        .grace(seconds("grace", grace)?)
        .purpose(&purpose)
        .keep_descendants(keep_descendants)
        .foreground(foreground)
        .limits(limits);
    if let Some(timeout) = timeout {
        command.timeout(seconds("timeout", timeout)?);
    }
    apply_setup(&mut command, setup)?;
    let child = match preexec_fn {
        #[cfg(unix)]
        Some(func) => {
            set_preexec(&mut command, func);
            match spawn_holding_gil(&mut command, attended) {
                Err(tether::Error::Keeper(e)) if e.raw_os_error() == Some(PREEXEC_FAILED) => {
                    return Err(subprocess_error(py, "Exception occurred in preexec_fn."));
                }
                spawned => spawned.py_err(py)?,
            }
        }
        #[cfg(not(unix))]
        Some(_) => {
            return Err(PyValueError::new_err(
                "preexec_fn is not supported on Windows",
            ));
        }
        // (The same thread: `detach` runs it here, the GIL released.)
        None if attended => crate::gil::detach(py, || command.spawn_attended()).py_err(py)?,
        None => crate::gil::detach(py, || command.spawn()).py_err(py)?,
    };
    drop(command);
    // A signal that came during the spawn (Ctrl-C) would be raised by the
    // interpreter as this call returns, and the child returned dropped
    // unseen: its keeper killed the tree on its own time, and the terminal
    // a foreground command held went back at the drop while the command
    // still ran — it read the next line typed at the terminal (the
    // test_terminal flake: "world" arrived as "orld"). Raised here instead,
    // once the tree is verified dead (with its grace, as a `with` block's
    // end kills it).
    if let Err(interrupted) = py.check_signals() {
        let mut child = child;
        let _ = crate::gil::detach(py, || child.kill().and_then(|()| child.wait()));
        return Err(interrupted);
    }
    Ok(Child {
        limits: Py::new(py, LimitReport::new(py, child.limits())?)?,
        handle: child.handle(),
        pid: child.id(),
        containment: child.containment().name().to_owned(),
        session_id: child.session_id().as_str().to_owned(),
        owner_pid: std::process::id(),
        child: Mutex::new(Some(child)),
        status: Mutex::new(None),
    })
}

/// See `Child.events_fd`: a copy of the keeper's socket, handed over as
/// a descriptor of its own (the `Events` copy is dropped at once).
#[cfg(unix)]
fn events_fd(child: &Child) -> std::io::Result<Option<i32>> {
    use std::os::fd::{AsFd, IntoRawFd};
    use tether::unix::ChildEventsExt;
    let guard = child.child.lock().unwrap_or_else(|e| e.into_inner());
    let Some(events) = guard.as_ref().and_then(|c| c.events()) else {
        return Ok(None);
    };
    Ok(Some(events.as_fd().try_clone_to_owned()?.into_raw_fd()))
}

#[cfg(not(unix))]
fn events_fd(_child: &Child) -> std::io::Result<Option<i32>> {
    Ok(None)
}

impl Child {
    fn check_owner(&self, py: Python<'_>) -> PyResult<()> {
        if std::process::id() == self.owner_pid {
            return Ok(());
        }
        Err(crate::error::to_py(
            py,
            tether::Error::InheritedAcrossFork {
                owner: self.owner_pid,
            },
        ))
    }

    fn known(&self) -> Option<Status> {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn finished(&self, status: tether::ExitStatus) -> Status {
        let status = Status::from(status);
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = Some(status);
        status
    }

    /// One bounded wait with the GIL released. `Ok(None)`: not yet.
    fn wait_slice(&self, py: Python<'_>, slice: Duration) -> PyResult<Option<Status>> {
        let waited = crate::gil::detach(py, || {
            let mut guard = self.child.lock().unwrap_or_else(|e| e.into_inner());
            match guard.as_mut() {
                Some(child) => child.wait_timeout(slice).map(Some),
                None => Ok(None),
            }
        });
        match waited.py_err(py)? {
            Some(Some(status)) => Ok(Some(self.finished(status))),
            Some(None) => Ok(None),
            None => self.known().map(Some).ok_or_else(closed),
        }
    }
}

#[pymethods]
impl Child {
    /// Waits at most `timeout` seconds (`None`: for ever) for the main
    /// process to exit and the descendants it left to be killed. `None`:
    /// still running. Ctrl-C raises `KeyboardInterrupt` at once; the tree
    /// stays contained.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Status>> {
        if let Some(status) = self.known() {
            return Ok(Some(status));
        }
        self.check_owner(py)?;
        let deadline = timeout
            .map(|t| seconds("timeout", t).map(|t| Instant::now() + t))
            .transpose()?;
        loop {
            let slice = deadline.map_or(SLICE, |d| {
                d.saturating_duration_since(Instant::now()).min(SLICE)
            });
            if let Some(status) = self.wait_slice(py, slice)? {
                return Ok(Some(status));
            }
            py.check_signals()?;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
        }
    }

    /// The status if finished, without blocking (`None` also while another
    /// thread is waiting).
    fn poll(&self, py: Python<'_>) -> PyResult<Option<Status>> {
        if let Some(status) = self.known() {
            return Ok(Some(status));
        }
        self.check_owner(py)?;
        let polled = {
            let Ok(mut guard) = self.child.try_lock() else {
                return Ok(None);
            };
            match guard.as_mut() {
                Some(child) => child.try_wait(),
                None => Ok(None),
            }
        };
        Ok(polled.py_err(py)?.map(|s| self.finished(s)))
    }

    /// Kills the whole tree (the polite signal, `grace` seconds, then
    /// `SIGKILL`, until nothing is left) and returns the final status once
    /// the keeper verified the tree empty; raises `KillIncomplete` with the
    /// survivors otherwise (the tree stays killable).
    #[pyo3(signature = (grace=None))]
    fn kill(&self, py: Python<'_>, grace: Option<f64>) -> PyResult<Status> {
        self.check_owner(py)?;
        let grace = grace.map(|g| seconds("grace", g)).transpose()?;
        loop {
            let killed = crate::gil::detach(py, || {
                let mut guard = self.child.lock().unwrap_or_else(|e| e.into_inner());
                let Some(child) = guard.as_mut() else {
                    return Ok(None);
                };
                match grace {
                    Some(grace) => child.kill_with_grace(grace)?,
                    None => child.kill()?,
                }
                child.wait_timeout(Duration::ZERO)
            });
            match killed.py_err(py)? {
                Some(status) => return Ok(self.finished(status)),
                None => {
                    if let Some(status) = self.known() {
                        return Ok(status);
                    }
                    // Killed but the exit not read yet (a racing waiter):
                    // read it.
                    if let Some(status) = self.wait(py, None)? {
                        return Ok(status);
                    }
                }
            }
        }
    }

    /// `SIGKILL` to every process of the tree at once, without waiting
    /// (`subprocess`'s `kill()`): the keeper sends it, then goes on until
    /// the tree is empty. Nothing once the command finished.
    fn kill_now(&self, py: Python<'_>) -> PyResult<()> {
        self.check_owner(py)?;
        if self.known().is_some() {
            return Ok(());
        }
        #[cfg(unix)]
        let started = {
            use tether::unix::ChildExt;
            // SIGKILL (9) as the only rung: the tree gets it at once.
            self.handle.interrupt(9)
        };
        #[cfg(not(unix))]
        let started = self.handle.start_kill_with_grace(Duration::ZERO);
        match started {
            Ok(()) => Ok(()),
            // The keeper is done: the command already finished.
            Err(tether::Error::Keeper(_)) => Ok(()),
            Err(e) => Err(crate::error::to_py(py, e)),
        }
    }

    /// Starts the kill ladder without waiting (safe from any thread, even
    /// while another waits).
    #[pyo3(signature = (grace=None))]
    fn start_kill(&self, py: Python<'_>, grace: Option<f64>) -> PyResult<()> {
        self.check_owner(py)?;
        if self.known().is_some() {
            return Ok(());
        }
        match grace {
            None => self.handle.start_kill(),
            Some(grace) => self.handle.start_kill_with_grace(seconds("grace", grace)?),
        }
        .py_err(py)
    }

    /// Sends `signal` to the main process's process group (Unix).
    fn send_signal(&self, py: Python<'_>, signal: i32) -> PyResult<()> {
        self.check_owner(py)?;
        if self.known().is_some() {
            return Ok(());
        }
        self.handle.send_signal(signal).py_err(py)
    }

    /// Live processes of the tree other than the main one: `(pid, command)`.
    fn descendants(&self, py: Python<'_>) -> PyResult<Vec<(u32, String)>> {
        self.check_owner(py)?;
        Ok(crate::gil::detach(py, || {
            let guard = self.child.lock().unwrap_or_else(|e| e.into_inner());
            guard
                .as_ref()
                .map(|c| {
                    c.descendants()
                        .into_iter()
                        .map(|d| (d.pid, d.command))
                        .collect()
                })
                .unwrap_or_default()
        }))
    }

    /// A new descriptor, the caller's to close, that is readable when the
    /// child has events to take in with `poll()` (its end, its keeper's
    /// death): for a `select` over its pipes beside them, so a keeper that
    /// dies while orphans of its tree hold the pipes is noticed at once —
    /// `poll()` then kills them (which ends the pipes) and raises
    /// `KeeperError`. `None` once finished, or without a descriptor to
    /// spare (Windows: no keeper).
    fn events_fd(&self, py: Python<'_>) -> PyResult<Option<i32>> {
        if self.known().is_some() {
            return Ok(None);
        }
        self.check_owner(py)?;
        // The lock may be a waiting thread's for a slice: without the GIL.
        Ok(crate::gil::detach(py, || events_fd(self))?)
    }

    /// Lets go of the tree: the keeper kills whatever is left (with the
    /// grace) and exits. What a collected handle does too.
    fn close(&self, py: Python<'_>) {
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner()).take();
        crate::gil::detach(py, || drop(child));
    }
}
