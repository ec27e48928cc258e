//! A `fork()` without `exec` copies the owner — and with it every keeper
//! socket the owner holds. A keeper reads its owner's death as EOF on that
//! socket, and EOF comes only once *every* copy is closed: while a forked
//! child lives (a `multiprocessing` worker, a pre-fork server's worker,
//! `pty.fork()` in pexpect), a `SIGKILL`ed owner's trees would live on.
//!
//! So every owner-side keeper descriptor — of a busy keeper or of an idle
//! one in the warm pool — is a [`Lifeline`], listed here, and
//! a `pthread_atfork` child handler points each listed descriptor at
//! `/dev/null` in the child (`dup3` over it: the number stays taken, so a
//! later close by an inherited handle cannot close an unrelated file the
//! child opened meanwhile). Handles the child inherited then refuse to act
//! ([`created_here`]); the child starts keepers of its own.
//!
//! The list is a spin lock over a `Vec`: the prepare handler takes the lock
//! so no thread is mid-update at the fork, and the child handler only
//! reads the list and calls `open`, `dup3` and `close` (async-signal-safe,
//! allocation-free), as a child of a multi-threaded process must.

use std::cell::UnsafeCell;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// The owner's end of a keeper socket (or a copy of it): listed for the
/// at-fork child handler while it is open.
#[derive(Debug)]
pub(crate) struct Lifeline(OwnedFd);

impl Lifeline {
    /// Lists `fd` as a lifeline until the `Lifeline` is dropped.
    pub(crate) fn new(fd: OwnedFd) -> Lifeline {
        install();
        let raw = fd.as_raw_fd();
        LIST.with(|fds| fds.push(raw));
        Lifeline(fd)
    }

    /// Another descriptor for the same socket, listed too.
    pub(crate) fn try_clone(&self) -> io::Result<Lifeline> {
        Ok(Lifeline::new(self.0.try_clone()?))
    }
}

impl AsFd for Lifeline {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl AsRawFd for Lifeline {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl Drop for Lifeline {
    fn drop(&mut self) {
        // Unlisted before the close (the `OwnedFd` closes after this), so
        // the number is never listed while it names another file.
        let raw = self.0.as_raw_fd();
        LIST.with(|fds| {
            if let Some(i) = fds.iter().position(|&fd| fd == raw) {
                fds.swap_remove(i);
            }
        });
    }
}

/// Whether this process is the one that was `created_by` (a pid from
/// `std::process::id()`): `false` in a child forked since.
pub(crate) fn created_here(created_by: u32) -> bool {
    std::process::id() == created_by
}

struct List {
    locked: AtomicBool,
    fds: UnsafeCell<Vec<RawFd>>,
}

// SAFETY: `fds` is only touched while `locked` is held (see `with` and the
// at-fork handlers).
unsafe impl Sync for List {}

static LIST: List = List {
    locked: AtomicBool::new(false),
    fds: UnsafeCell::new(Vec::new()),
};

impl List {
    fn lock(&self) {
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
    }

    fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }

    fn with<R>(&self, f: impl FnOnce(&mut Vec<RawFd>) -> R) -> R {
        self.lock();
        // SAFETY: the lock is held: nobody else touches the list.
        let result = f(unsafe { &mut *self.fds.get() });
        self.unlock();
        result
    }
}

fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        // SAFETY: three `extern "C"` functions that live for the program.
        // A failure (ENOMEM) leaves forks as they were before this module.
        unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
    });
}

extern "C" fn prepare() {
    LIST.lock();
}

extern "C" fn parent() {
    LIST.unlock();
}

extern "C" fn child() {
    // SAFETY: the lock was taken in `prepare` by the thread that forked,
    // which is the only thread of this child.
    let fds = unsafe { &*LIST.fds.get() };
    if !fds.is_empty() {
        // SAFETY: open, dup3 and close are async-signal-safe; the path is a
        // NUL-terminated literal.
        unsafe {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            if null >= 0 {
                for &fd in fds {
                    dup_over(null, fd);
                }
                libc::close(null);
            }
        }
    }
    LIST.unlock();
}

/// Points `fd` at the file `null` names, keeping it close-on-exec.
///
/// # Safety
/// Both must be open descriptors of this process.
unsafe fn dup_over(null: RawFd, fd: RawFd) {
    #[cfg(target_os = "linux")]
    // SAFETY: as the caller promises.
    unsafe {
        libc::dup3(null, fd, libc::O_CLOEXEC);
    }
    #[cfg(not(target_os = "linux"))]
    // SAFETY: as the caller promises; dup2 clears FD_CLOEXEC, set again.
    unsafe {
        libc::dup2(null, fd);
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
    }
}

/// A value of which each process has its own: a child forked without
/// `exec` gets a fresh one on first use instead of the parent's, whose
/// locks another thread of the parent may have held at the fork (that
/// thread does not exist in the child: the lock would never be released)
/// and whose threads and processes are not the child's. The parent's
/// instance is left untouched, never dropped, in the child.
pub(crate) struct PerProcess<T: 'static> {
    current: AtomicPtr<Instance<T>>,
}

struct Instance<T> {
    pid: u32,
    value: T,
}

impl<T: 'static> PerProcess<T> {
    pub(crate) const fn new() -> PerProcess<T> {
        PerProcess {
            current: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// This process's value, made with `init` on its first use here.
    pub(crate) fn get(&self, init: impl FnOnce() -> T) -> &'static T {
        let me = std::process::id();
        let seen = self.current.load(Ordering::Acquire);
        // SAFETY: a non-null pointer here came from `Box::into_raw` below
        // and is never freed once published.
        if let Some(instance) = unsafe { seen.as_ref() }
            && instance.pid == me
        {
            return &instance.value;
        }
        let fresh = Box::into_raw(Box::new(Instance {
            pid: me,
            value: init(),
        }));
        match self
            .current
            .compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: published just now, never freed.
            Ok(_) => unsafe { &(*fresh).value },
            Err(now) => {
                // Another thread of this process published first (only
                // this process's threads publish here): use its.
                // SAFETY: `fresh` was never published; it is ours to free.
                // `now` was published by `Box::into_raw` and is never freed.
                unsafe {
                    drop(Box::from_raw(fresh));
                    &(*now).value
                }
            }
        }
    }
}
