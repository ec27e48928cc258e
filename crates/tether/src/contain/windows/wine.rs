//! Knowing when we run under Wine: to skip tests of what Wine lacks, and to
//! try again a process creation that Wine failed on its own.
//!
//! Wine exports `wine_get_version` from its ntdll; Windows does not. Tests
//! of behaviour Wine 8 does not implement (ConPTY output,
//! `ResizePseudoConsole`) call [`version`] and skip, naming the gap, so
//! that on real Windows they run.

use std::io;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use windows_sys::Win32::Foundation::{ERROR_INTERNAL_ERROR, ERROR_INVALID_FUNCTION};
use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};

use super::win_error::code_of;

/// How many times, in all, a creation Wine failed on its own is tried.
const CREATE_ATTEMPTS: u32 = 3;

/// Creations tried again in this process so far.
static TRIED_AGAIN: AtomicU32 = AtomicU32::new(0);

/// How many creations this process has tried again so far (always 0 on
/// Windows). A job counts the failed attempt's process among those it
/// ever held (`TotalProcesses`): it was created in the job and died in
/// Wine's start-up.
#[cfg(test)]
pub(crate) fn tried_again() -> u32 {
    TRIED_AGAIN.load(Ordering::SeqCst)
}

/// Runs `create` — a `CreateProcessW` or a `CreatePseudoConsole` (which
/// creates conhost) — and, under Wine only, runs it again (3 tries in all)
/// when it failed the way Wine fails a new process that died while
/// starting, before any code of its own ran.
///
/// Wine 8 does that now and then (seen twice here: once in ~500 looped
/// runs of one test, once in ~25 fresh-clone CI runs, both under load): the
/// new process ends during Wine's own start-up,
/// and `CreateProcessW` says `ERROR_INTERNAL_ERROR` (1359) with no process
/// created. `CreatePseudoConsole` then reports `ERROR_INVALID_FUNCTION`
/// (1) instead, because Wine's `Wow64RevertWow64FsRedirection`, called
/// after its failed `CreateProcessW` of conhost, overwrites the last error
/// on a 64-bit system. Nothing is left of the failed attempt (its process
/// died in Wine's start-up; a job it was created in counts it among the
/// processes it ever held, nothing more), so trying again starts nothing
/// twice. On Windows nothing is tried again: these codes there mean what
/// they say.
pub(crate) fn retry_failed_creation<T>(mut create: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    let mut attempt = 1;
    loop {
        match create() {
            Err(err)
                if attempt < CREATE_ATTEMPTS
                    && is_wine()
                    && code_of(&err).is_some_and(is_failed_start) =>
            {
                attempt += 1;
                TRIED_AGAIN.fetch_add(1, Ordering::SeqCst);
            }
            result => return result,
        }
    }
}

/// Whether `code` — a Win32 error code or an HRESULT made of one — is one
/// of the two Wine gives for a new process that died while starting.
fn is_failed_start(code: u32) -> bool {
    let win32 = if code & 0xFFFF_0000 == 0x8007_0000 {
        code & 0xFFFF
    } else {
        code
    };
    win32 == ERROR_INTERNAL_ERROR || win32 == ERROR_INVALID_FUNCTION
}

/// Whether this process runs under Wine (asked once).
pub fn is_wine() -> bool {
    static WINE: OnceLock<bool> = OnceLock::new();
    *WINE.get_or_init(|| version().is_some())
}

/// Wine's version (`"8.0"`), or `None` on Windows.
pub fn version() -> Option<String> {
    let ntdll: Vec<u16> = "ntdll.dll\0".encode_utf16().collect();
    // SAFETY: ntdll is loaded in every process; the name is NUL-terminated.
    let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
    if module.is_null() {
        return None;
    }
    // SAFETY: valid module and NUL-terminated ASCII name.
    let proc = unsafe { GetProcAddress(module, c"wine_get_version".as_ptr().cast()) }?;
    // SAFETY: Wine declares it `const char * CDECL wine_get_version(void)`
    // (cdecl and the system ABI are one on x86_64), returning a static
    // NUL-terminated string.
    let version = unsafe {
        let get: extern "C" fn() -> *const std::ffi::c_char = std::mem::transmute(proc);
        std::ffi::CStr::from_ptr(get())
    };
    Some(version.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contain::os::win_error::WinError;

    #[test]
    fn only_a_failed_start_is_tried_again_and_only_under_wine() {
        // As Wine reports it: CreateProcessW's code, and CreatePseudoConsole's
        // HRESULT.
        assert!(is_failed_start(ERROR_INTERNAL_ERROR));
        assert!(is_failed_start(0x8007_0001));
        assert!(!is_failed_start(5)); // access denied
        assert!(!is_failed_start(0x8007_0005));
        assert!(!is_failed_start(0x8000_4001)); // E_NOTIMPL

        let mut calls = 0;
        let result = retry_failed_creation(|| {
            calls += 1;
            Err::<(), _>(WinError::with_code("CreatePseudoConsole", 0x8007_0001))
        });
        assert!(result.is_err());
        assert_eq!(calls, if is_wine() { CREATE_ATTEMPTS } else { 1 });

        let mut calls = 0;
        let result = retry_failed_creation(|| {
            calls += 1;
            if calls == 1 {
                Err(WinError::with_code("CreateProcessW", ERROR_INTERNAL_ERROR))
            } else {
                Ok(calls)
            }
        });
        if is_wine() {
            assert_eq!(result.unwrap(), 2);
        } else {
            assert!(result.is_err());
        }

        let mut calls = 0;
        let _ = retry_failed_creation(|| {
            calls += 1;
            Err::<(), _>(WinError::with_code("CreateProcessW", 5))
        });
        assert_eq!(calls, 1, "other failures are final");
    }
}
