//! `tether._native`: the Python binding of the tether library — as thin as
//! the CLI. It maps types and errors and releases the GIL around every
//! call that blocks; every process decision is the library's. The
//! `subprocess`-shaped API (`run`, `Popen`, exceptions, asyncio glue) is
//! the pure-Python package around it (`python/tether/`).
//!
//! Two halves:
//! - `child.rs`: one command, for `Popen`/`run` — a `tether::Child`, no
//!   runtime and no thread of ours;
//! - `engine.rs`, `op.rs`, `session.rs`: background sessions on a
//!   `tether::Registry`, whose tokio runtime runs only while a session is
//!   live or an operation is in flight (a process that forks must see no
//!   thread of ours while idle).

mod child;
mod engine;
mod error;
mod gil;
mod limits;
mod op;
mod session;

use pyo3::prelude::*;

/// Uses `path` (a `tether` executable of this version) as the keeper, or
/// goes back to discovery with `None`.
#[pyfunction]
#[pyo3(signature = (path))]
fn set_keeper(path: Option<std::path::PathBuf>) {
    tether::keeper::set_program(path);
}

/// Keeps up to `n` keepers of finished commands for the next ones (the
/// package sets 2 at import; 0: a keeper per command). Takes the keeper's
/// exec off every spawn but the first, at the price of up to `n` idle
/// keeper processes (see `tether::set_warm_keepers`).
#[pyfunction]
fn set_warm_keepers(n: usize) {
    tether::set_warm_keepers(n);
}

/// Sets how many background sessions may hold processes at once (the
/// library's default is 64), 1 to `MAX_SESSIONS_CEILING`; returns the
/// previous cap. Sessions already live are left alone.
#[pyfunction]
fn set_max_sessions(n: i64) -> PyResult<usize> {
    let ceiling = engine::MAX_SESSIONS_CEILING;
    match usize::try_from(n) {
        Ok(n) if (1..=ceiling).contains(&n) => Ok(engine::set_max_sessions(n)),
        _ => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "max sessions must be 1 to {ceiling}, not {n}"
        ))),
    }
}

/// The current live-session cap.
#[pyfunction]
fn max_sessions() -> usize {
    engine::engine().registry.max_live()
}

/// Drops the background-session state a forked child inherited (called
/// from `os.register_at_fork`); the library already pointed the child's
/// copies of the parent's keeper sockets at `/dev/null`.
#[pyfunction]
fn after_fork_in_child() {
    engine::after_fork_in_child();
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(set_keeper, m)?)?;
    m.add_function(wrap_pyfunction!(after_fork_in_child, m)?)?;
    m.add_function(wrap_pyfunction!(set_warm_keepers, m)?)?;
    m.add_function(wrap_pyfunction!(set_max_sessions, m)?)?;
    m.add_function(wrap_pyfunction!(max_sessions, m)?)?;
    m.add_function(wrap_pyfunction!(child::spawn, m)?)?;
    m.add_class::<child::Child>()?;
    m.add_class::<child::Status>()?;
    m.add_class::<child::Usage>()?;
    m.add_class::<limits::Limit>()?;
    m.add_class::<limits::LimitReport>()?;
    m.add_class::<op::Op>()?;
    m.add_class::<session::Info>()?;
    m.add_class::<session::Chunk>()?;
    m.add_class::<session::Waited>()?;
    m.add_class::<session::Killed>()?;
    m.add_class::<session::ScreenView>()?;
    m.add_function(wrap_pyfunction!(session::start, m)?)?;
    m.add_function(wrap_pyfunction!(session::read, m)?)?;
    m.add_function(wrap_pyfunction!(session::write, m)?)?;
    m.add_function(wrap_pyfunction!(session::close_stdin, m)?)?;
    m.add_function(wrap_pyfunction!(session::keys, m)?)?;
    m.add_function(wrap_pyfunction!(session::wait, m)?)?;
    m.add_function(wrap_pyfunction!(session::kill, m)?)?;
    m.add_function(wrap_pyfunction!(session::info, m)?)?;
    m.add_function(wrap_pyfunction!(session::sessions, m)?)?;
    m.add_function(wrap_pyfunction!(session::screen, m)?)?;
    m.add_function(wrap_pyfunction!(session::resize, m)?)?;
    m.add_function(wrap_pyfunction!(session::close, m)?)?;
    m.add_function(wrap_pyfunction!(session::read_wait, m)?)?;
    #[cfg(unix)]
    m.add_function(wrap_pyfunction!(session::output_fd, m)?)?;
    m.add_function(wrap_pyfunction!(session::output_seen, m)?)?;
    Ok(())
}
