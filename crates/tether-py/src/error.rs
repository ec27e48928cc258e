//! The library's errors as the Python exceptions code already catches:
//! program not found → `FileNotFoundError`, not executable →
//! `PermissionError`, bad input → `ValueError`, …; tether's own are the
//! classes of `tether._errors` (pure Python, so they can subclass two
//! builtins and carry attributes), looked up when one is raised.

use pyo3::exceptions::{
    PyBrokenPipeError, PyFileNotFoundError, PyOSError, PyPermissionError, PyValueError,
};
use pyo3::prelude::*;

/// `errno` values Python's `OSError` subclasses are chosen by (the same
/// numbers on every platform tether runs on).
const ENOENT: i32 = 2;
const EACCES: i32 = 13;
const EPIPE: i32 = 32;

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
        E::ProgramNotFound { program, .. } => {
            PyFileNotFoundError::new_err((ENOENT, message, program))
        }
        E::NotExecutable { path, .. } => {
            PyPermissionError::new_err((EACCES, message, path.to_string_lossy().into_owned()))
        }
        E::BadCwd { cwd, .. } => {
            PyFileNotFoundError::new_err((ENOENT, message, cwd.to_string_lossy().into_owned()))
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
