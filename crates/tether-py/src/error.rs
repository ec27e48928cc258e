//! The library's errors as the Python exceptions code already catches:
//! program not found → `FileNotFoundError`, not executable →
//! `PermissionError`, bad input → `ValueError`, …; tether's own are the
//! classes of `tether._errors` (pure Python, so they can subclass two
//! builtins and carry attributes), looked up when one is raised.

use pyo3::exceptions::{PyBrokenPipeError, PyOSError, PyValueError};
use pyo3::prelude::*;

/// `errno` values Python's `OSError` subclasses are chosen by (the same
/// numbers on every platform tether runs on).
const ENOENT: i32 = 2;
const EACCES: i32 = 13;
const ENOTDIR: i32 = 20;
const EPIPE: i32 = 32;

/// The errno in an `io::Error`'s text ("… (os error 8)"), as tether words
/// an exec failure's reason.
fn errno_in(reason: &str) -> Option<i32> {
    let start = reason.rfind("(os error ")? + "(os error ".len();
    reason[start..].strip_suffix(')')?.parse().ok()
}

/// `OSError(errno, os.strerror(errno), filename)` — the subclass Python
/// picks for the errno (`FileNotFoundError`, `PermissionError`,
/// `NotADirectoryError`, plain `OSError` for `ENOEXEC`, …), worded as
/// `subprocess`'s — with tether's own explanation as a note (3.11+).
fn os_error(py: Python<'_>, errno: i32, filename: String, detail: &str) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let strerror = py.import("os")?.getattr("strerror")?.call1((errno,))?;
        let exception = py
            .get_type::<PyOSError>()
            .call1((errno, strerror, filename))?;
        if exception.hasattr("add_note")? {
            exception.call_method1("add_note", (format!("tether: {detail}"),))?;
        }
        Ok(PyErr::from_value(exception))
    })();
    made.unwrap_or_else(|e| e)
}

/// Raises the `tether._errors` class `name` with `args`.
fn tether_error<'py, A>(py: Python<'py>, name: &str, args: A) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    let made = py
        .import("tether._errors")
        .and_then(|module| module.getattr(name))
        .and_then(|class| class.call1(args));
    match made {
        Ok(exception) => PyErr::from_value(exception),
        Err(e) => e,
    }
}

/// The Python exception for `error`.
pub(crate) fn to_py(py: Python<'_>, error: tether::Error) -> PyErr {
    use tether::Error as E;
    let message = error.to_string();
    match error {
        E::ProgramNotFound { program, .. } => os_error(py, ENOENT, program, &message),
        E::NotExecutable { path, reason } => {
            // The errno exec gave (ENOEXEC, ETXTBSY, …) where tether saw
            // one; else a check before the spawn refused it: EACCES, as
            // exec would (a directory, no execute permission).
            let errno = match errno_in(&reason) {
                Some(errno) => errno,
                // A script whose `#!` interpreter is missing: exec's ENOENT.
                None if reason.contains("#!") => ENOENT,
                None => EACCES,
            };
            os_error(py, errno, path.to_string_lossy().into_owned(), &message)
        }
        E::BadCwd { cwd, reason } => {
            let errno = match std::fs::metadata(&cwd) {
                Ok(meta) if !meta.is_dir() => ENOTDIR,
                Ok(_) => errno_in(&reason).unwrap_or(ENOENT),
                Err(e) => e.raw_os_error().unwrap_or(ENOENT),
            };
            os_error(py, errno, cwd.to_string_lossy().into_owned(), &message)
        }
        E::InvalidInput { .. }
        | E::Tag(_)
        | E::NoStdin { .. }
        | E::NoSeparateStderr { .. }
        | E::NotATerminal { .. } => PyValueError::new_err(message),
        E::StdinClosed { .. } => PyBrokenPipeError::new_err((EPIPE, message)),
        E::KillIncomplete { survivors } => {
            let survivors: Vec<(u32, String)> =
                survivors.into_iter().map(|s| (s.pid, s.command)).collect();
            tether_error(py, "KillIncomplete", (message, survivors))
        }
        E::UnknownSession { .. } | E::AmbiguousSession { .. } | E::SessionIdTooShort { .. } => {
            tether_error(py, "SessionNotFound", (message,))
        }
        E::TooManySessions { limit } => tether_error(py, "TooManySessions", (message, limit)),
        E::StdinQueueFull { .. } => tether_error(py, "StdinQueueFull", (message,)),
        E::ContainmentUnavailable { .. } => tether_error(py, "ContainmentUnavailable", (message,)),
        E::KeeperNotFound { .. } | E::Keeper(_) | E::KeeperLost { .. } | E::Protocol(_) => {
            tether_error(py, "KeeperError", (message,))
        }
        E::InheritedAcrossFork { owner } => {
            tether_error(py, "InheritedHandleError", (message, owner))
        }
        E::Unsupported { .. } => tether_error(py, "Unsupported", (message,)),
        E::Spawn { source, .. } | E::Io(source) => match source.raw_os_error() {
            Some(errno) => PyOSError::new_err((errno, message)),
            None => PyOSError::new_err(message),
        },
        _ => tether_error(py, "TetherError", (message,)),
    }
}

/// `Result<T, tether::Error>` → `PyResult<T>`.
pub(crate) trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for tether::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
