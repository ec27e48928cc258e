//! What withholding environment variables needs from macOS (see
//! `contain/unix/environment.rs`): the thread count, which memory may be
//! written, and libc's `environ`.
//!
//! `KERN_PROCARGS2` — how another process of the same user reads this
//! one's environment — copies the strings area `exec` laid out at the top
//! of the main thread's stack (executable path, arguments, environment,
//! `apple[]`). Overwriting the values there is what hides them; copies
//! `setenv` made on the heap are not in that area and are unset only.
//! Type-checked only here (no macOS machine).

use std::io;

use crate::contain::unix::environment::Environ;

/// libc's `environ`, as a pointer to its first entry.
pub(crate) fn environ() -> Environ {
    // SAFETY: `_NSGetEnviron` returns the address of libc's `environ`
    // variable, valid for the process's lifetime; its value is read.
    unsafe { (*libc::_NSGetEnviron()).cast_const() }
}

/// This process's live threads (`proc_pidinfo(PROC_PIDTASKINFO)`).
pub(crate) fn thread_count() -> io::Result<u32> {
    // SAFETY: zeroed plain-old-data the kernel fills.
    let mut info: libc::proc_taskinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_taskinfo>() as libc::c_int;
    // SAFETY: a buffer of the size given.
    let got = unsafe {
        libc::proc_pidinfo(
            std::process::id() as libc::c_int,
            libc::PROC_PIDTASKINFO,
            0,
            (&mut info as *mut libc::proc_taskinfo).cast(),
            size,
        )
    };
    if got != size {
        return Err(io::Error::last_os_error());
    }
    Ok(info.pti_threadnum.max(1) as u32)
}

/// The strings area `exec` filled: from the first argument's string up to
/// the top of the main thread's stack.
pub(crate) struct Writable {
    start: usize,
    end: usize,
}

impl Writable {
    /// Finds it now (called on the only thread, the main one).
    pub(crate) fn now() -> io::Result<Writable> {
        // SAFETY: `_NSGetArgv` returns the address of libc's argv
        // pointer; argv[0] is the first argument's string in the area.
        let start = unsafe { *(*libc::_NSGetArgv()) } as usize;
        // SAFETY: plain calls; the result is the stack's highest address.
        let end = unsafe { libc::pthread_get_stackaddr_np(libc::pthread_self()) } as usize;
        if start == 0 || end <= start {
            return Err(io::Error::other("cannot locate the exec strings area"));
        }
        Ok(Writable { start, end })
    }

    /// Whether `len` bytes at `addr` lie in the area.
    pub(crate) fn contains(&self, addr: usize, len: usize) -> bool {
        self.start <= addr && addr.saturating_add(len) <= self.end
    }
}
