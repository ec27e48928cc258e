//! Giving memory back after a burst of requests. This file calls glibc's
//! `malloc_trim` through `libc` (the one reason it uses `libc`): the
//! allocator keeps freed memory in its per-thread arenas, so after a burst
//! the server stayed at 500 MB resident with nothing in use. Elsewhere
//! (non-glibc targets) this does nothing.

/// Returns the allocator's free memory to the system, off the reactor
/// threads (walking the arenas takes a few ms after a large burst).
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    tokio::task::spawn_blocking(|| {
        // SAFETY: malloc_trim only releases free memory of the allocator;
        // it is thread-safe and touches no memory in use.
        unsafe { libc::malloc_trim(0) };
    });
}
