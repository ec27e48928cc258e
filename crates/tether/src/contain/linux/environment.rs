//! What withholding environment variables needs from Linux (see
//! `contain/unix/environment.rs`): the thread count, which memory may be
//! written, and libc's `environ`.

use std::io;

use crate::contain::unix::environment::Environ;

mod libc_environ {
    unsafe extern "C" {
        /// libc's environment (glibc and musl alike).
        pub(super) static mut environ: *mut *mut std::ffi::c_char;
    }
}

/// libc's `environ`, as a pointer to its first entry.
pub(crate) fn environ() -> Environ {
    // SAFETY: reading the pointer's value (not through it); the callers
    // hold the process single-threaded while they use it.
    unsafe { libc_environ::environ.cast_const() }
}

/// This process's live threads (`/proc/self/stat`).
pub(crate) fn thread_count() -> io::Result<u32> {
    Ok(super::procfs::read_stat(std::process::id())?.threads)
}

/// The mappings of this process that may be written, from
/// `/proc/self/maps`: the stack (where `exec` put the initial environment)
/// and the heap (where `setenv` puts its copies) among them.
pub(crate) struct Writable(Vec<(usize, usize)>);

impl Writable {
    /// Reads them now.
    pub(crate) fn now() -> io::Result<Writable> {
        let maps = std::fs::read_to_string("/proc/self/maps")?;
        let ranges = maps
            .lines()
            .filter_map(|line| {
                let mut fields = line.split(' ');
                let (start, end) = fields.next()?.split_once('-')?;
                let perms = fields.next()?;
                (perms.as_bytes().get(1) == Some(&b'w')).then_some((
                    usize::from_str_radix(start, 16).ok()?,
                    usize::from_str_radix(end, 16).ok()?,
                ))
            })
            .collect();
        Ok(Writable(ranges))
    }

    /// Whether `len` bytes at `addr` lie in one writable mapping.
    pub(crate) fn contains(&self, addr: usize, len: usize) -> bool {
        self.0
            .iter()
            .any(|&(start, end)| start <= addr && addr.saturating_add(len) <= end)
    }
}
