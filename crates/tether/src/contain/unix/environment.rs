//! Withholding variables from this process's own environment
//! (`tether::withhold_environment`), so that nothing this process starts
//! can read them back from it.
//!
//! `unsetenv` alone is not enough: it drops the pointer from libc's
//! `environ`, and the string stays where it was — for the initial
//! environment, in the block between the `env_start` and `env_end` the
//! kernel recorded at `exec`, which is exactly what `/proc/<pid>/environ`
//! (Linux) and `KERN_PROCARGS2` (macOS) read. A command of the same user
//! read `GITHUB_TOKEN`, `ANTHROPIC_API_KEY`, `AWS_SECRET_ACCESS_KEY` and
//! `*_PASSWORD` back from `tether mcp` that way (issue 16). So each value
//! is first overwritten with NUL bytes where it lies (the `NAME=` before it
//! stays, so `unsetenv` still finds the entry), then unset.
//!
//! Only memory known to be writable is written: on Linux every mapping
//! `/proc/self/maps` marks writable (the initial block on the stack, and
//! the heap copies `setenv` made); on macOS the strings area at the top of
//! the main thread's stack that `exec` filled. A value elsewhere (a
//! `putenv` of a constant string) is unset and counted, not overwritten.
//!
//! `environ` is read and changed without a lock: sound only while no other
//! thread can touch the environment, so this refuses to run (changing
//! nothing) when the process has more than one thread.

use std::ffi::{CStr, CString, OsStr, OsString, c_char};
use std::os::unix::ffi::OsStrExt;

use crate::contain::os::environment as os;
use crate::error::WithholdError;
use crate::withheld::Withheld;

/// Removes every variable `withhold` names, values overwritten first.
pub(crate) fn withhold(withhold: &dyn Fn(&OsStr) -> bool) -> Result<Withheld, WithholdError> {
    let threads = os::thread_count().map_err(WithholdError::Io)?;
    if threads > 1 {
        return Err(WithholdError::OtherThreads { threads });
    }
    let writable = os::Writable::now().map_err(WithholdError::Io)?;
    let mut names: Vec<OsString> = Vec::new();
    let mut withheld = Withheld::default();
    // SAFETY: `environ` is libc's NULL-terminated array of pointers to
    // NUL-terminated strings; this process has one thread (checked above),
    // so nothing reads or changes the array or its strings meanwhile, and
    // nothing here changes the array until the loop is done.
    unsafe {
        let mut entry = os::environ();
        while !entry.is_null() && !(*entry).is_null() {
            let text = CStr::from_ptr(*entry).to_bytes();
            if let Some(eq) = text.iter().position(|&b| b == b'=')
                && withhold(OsStr::from_bytes(&text[..eq]))
            {
                let name = OsStr::from_bytes(&text[..eq]).to_owned();
                let value = (*entry).add(eq + 1).cast::<u8>();
                let len = text.len() - eq - 1;
                if writable.contains(value as usize, len) {
                    std::ptr::write_bytes(value, 0, len);
                    withheld.overwritten += 1;
                } else {
                    withheld.not_overwritten += 1;
                }
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            entry = entry.add(1);
        }
    }
    for name in &names {
        let Ok(c_name) = CString::new(name.as_bytes()) else {
            continue; // a name from a C string has no NUL
        };
        // SAFETY: a NUL-terminated name; single-threaded (checked above).
        unsafe { libc::unsetenv(c_name.as_ptr()) };
    }
    withheld.names = names;
    Ok(withheld)
}

/// `environ` as a pointer to its first entry.
pub(crate) type Environ = *const *mut c_char;
