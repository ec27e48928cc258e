//! Taking ownership of the raw handles Win32 calls return.
//!
//! Win32 has two failure values for a handle: most calls return NULL, a few
//! (`CreateFileW`, `CreateToolhelp32Snapshot`) return
//! `INVALID_HANDLE_VALUE`. Both are refused here, so an `OwnedHandle` in this
//! backend always names a real kernel object and closes it exactly once.

use std::io;
use std::os::windows::io::{AsRawHandle, BorrowedHandle, FromRawHandle, OwnedHandle};

use windows_sys::Win32::Foundation::{
    DUPLICATE_SAME_ACCESS, DuplicateHandle, HANDLE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::System::Threading::GetCurrentProcess;

use super::win_error::WinError;

/// Owns `raw`, the result of `call`; NULL or `INVALID_HANDLE_VALUE` become
/// `call`'s last error.
///
/// # Safety
///
/// `raw` is what `call` just returned: NULL, `INVALID_HANDLE_VALUE`, or a
/// handle nothing else owns (it will be closed exactly once, on drop).
pub unsafe fn owned(raw: HANDLE, call: &'static str) -> io::Result<OwnedHandle> {
    if raw.is_null() || raw == INVALID_HANDLE_VALUE {
        return Err(WinError::last(call));
    }
    // SAFETY: per this function's contract, `raw` is a fresh handle that
    // nothing else owns.
    Ok(unsafe { OwnedHandle::from_raw_handle(raw) })
}

/// A duplicate of `handle` in this process, inheritable or not.
///
/// Used for the one moment handles must be inheritable: the child's stdio
/// during `CreateProcessW`. The duplicate is closed when dropped.
pub fn duplicate(handle: BorrowedHandle<'_>, inheritable: bool) -> io::Result<OwnedHandle> {
    let mut dup: HANDLE = std::ptr::null_mut();
    // SAFETY: the current-process pseudo handle is always valid; `handle` is
    // borrowed from the caller for this call; `dup` is a valid out pointer.
    let ok = unsafe {
        let me = GetCurrentProcess();
        DuplicateHandle(
            me,
            handle.as_raw_handle(),
            me,
            &mut dup,
            0,
            inheritable.into(),
            DUPLICATE_SAME_ACCESS,
        )
    };
    if ok == 0 {
        return Err(WinError::last("DuplicateHandle"));
    }
    // SAFETY: DuplicateHandle just made `dup` for us alone.
    unsafe { owned(dup, "DuplicateHandle") }
}
