//! Releasing the GIL around a blocking call, safely at interpreter exit.
//!
//! At finalization CPython before 3.14 ends any other thread that takes
//! the GIL back (`PyEval_RestoreThread` → `take_gil` → `pthread_exit`).
//! On glibc that is a forced unwind, and through PyO3's `detach` it ran
//! into the `catch_unwind` PyO3 puts around every call from Python, which
//! swallowed it: glibc then aborts the process ("FATAL: exception not
//! rethrown", SIGABRT) — a daemon thread blocked in `tether.run`,
//! `Popen.wait` or `Session.wait` turned `sys.exit(3)` into status 134 in
//! 10 of 20 exits (`tests/test_exit.py`). PyO3 0.29 hangs such a thread
//! instead (PyO3/pyo3#6085), as CPython 3.14 does itself (python/cpython
//! #87135); this is the same for the PyO3 0.27 pinned here: the thread
//! never returns to Python, the interpreter exits with its status, and the
//! keepers kill the trees of the owner that is gone.

use pyo3::Python;
use pyo3::ffi::PyThreadState;

mod raw {
    use super::PyThreadState;

    // `C-unwind`: the forced unwind of `pthread_exit` may leave it, and
    // must reach [`HangThread`]'s drop (pyo3-ffi 0.27 declares it `C`, a
    // call that cannot unwind).
    unsafe extern "C-unwind" {
        pub fn PyEval_RestoreThread(tstate: *mut PyThreadState);
    }
}

/// Hangs the thread for ever when dropped: dropped by the forced unwind
/// of a `pthread_exit` during finalization, it stops that unwind before it
/// reaches a `catch_unwind`.
struct HangThread;

impl Drop for HangThread {
    fn drop(&mut self) {
        loop {
            std::thread::park();
        }
    }
}

/// Takes the GIL back on drop — or hangs this thread if the interpreter
/// ends it instead.
struct Reattach(*mut PyThreadState);

impl Drop for Reattach {
    fn drop(&mut self) {
        let hang = HangThread;
        // SAFETY: `self.0` is this thread's state, saved by
        // `PyEval_SaveThread` in `detach`; restored once.
        unsafe { raw::PyEval_RestoreThread(self.0) };
        std::mem::forget(hang);
    }
}

/// Runs `f` with the GIL released, as [`Python::detach`] — but a thread
/// that the interpreter's finalization would end as it takes the GIL back
/// hangs instead (see the module's documentation).
///
/// `f` must not touch Python: no `Python::attach`, no `Py<T>` dropped —
/// PyO3 still counts this thread as attached while `f` runs (every
/// closure given here works on Rust values only).
pub(crate) fn detach<T, F>(_py: Python<'_>, f: F) -> T
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    // SAFETY: the GIL is held (`_py`); it is given back by `Reattach`'s
    // drop, also when `f` panics.
    let _reattach = Reattach(unsafe { pyo3::ffi::PyEval_SaveThread() });
    f()
}
