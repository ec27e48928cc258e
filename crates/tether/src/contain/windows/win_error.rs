//! A failed Windows call: which call, and the Windows error code.
//!
//! Every primitive in this backend returns `std::io::Error`, so callers can
//! use `?` and `raw_os_error()` as they would with std. The error's message
//! names the failing call (`CreateJobObjectW: Access is denied. (os error
//! 5)`), and [`code_of`] gets the Windows error code back, because the issue
//! is explicit that a containment failure reaches the caller *with the
//! Windows error code*, never as a bare string.

use std::fmt;
use std::io;

use windows_sys::Win32::Foundation::{GetLastError, NTSTATUS, RtlNtStatusToDosError};

/// The Windows error code of one failed call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WinError {
    /// The API that failed, as Windows spells it.
    pub call: &'static str,
    /// The Win32 error code (`GetLastError`, or an NTSTATUS translated by
    /// `RtlNtStatusToDosError`).
    pub code: u32,
}

impl WinError {
    /// The calling thread's last error, attributed to `call`. Call it
    /// immediately after the failing call: any other API may overwrite it.
    pub fn last(call: &'static str) -> io::Error {
        // SAFETY: GetLastError has no preconditions.
        let code = unsafe { GetLastError() };
        WinError { call, code }.into()
    }

    /// An NTSTATUS failure of `call`, translated to the Win32 code.
    pub fn from_ntstatus(call: &'static str, status: NTSTATUS) -> io::Error {
        // SAFETY: RtlNtStatusToDosError is a pure table lookup.
        let code = unsafe { RtlNtStatusToDosError(status) };
        WinError { call, code }.into()
    }

    /// A given code attributed to `call` (for calls that return their error,
    /// like `ResizePseudoConsole`'s HRESULT).
    pub fn with_code(call: &'static str, code: u32) -> io::Error {
        WinError { call, code }.into()
    }
}

impl fmt::Display for WinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // io::Error renders the system message for the code ("Access is
        // denied. (os error 5)").
        let system = io::Error::from_raw_os_error(self.code as i32);
        write!(f, "{}: {system}", self.call)
    }
}

impl std::error::Error for WinError {}

impl From<WinError> for io::Error {
    fn from(err: WinError) -> io::Error {
        let kind = io::Error::from_raw_os_error(err.code as i32).kind();
        io::Error::new(kind, err)
    }
}

/// The Windows error code carried by `err`, whether it came from this
/// module or from std (`raw_os_error`).
pub fn code_of(err: &io::Error) -> Option<u32> {
    if let Some(code) = err.raw_os_error() {
        return Some(code as u32);
    }
    err.get_ref()
        .and_then(|inner| inner.downcast_ref::<WinError>())
        .map(|win| win.code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use windows_sys::Win32::Foundation::{ERROR_ACCESS_DENIED, ERROR_FILE_NOT_FOUND};

    #[test]
    fn keeps_call_and_code() {
        let err = WinError::with_code("CreateJobObjectW", ERROR_ACCESS_DENIED);
        assert_eq!(code_of(&err), Some(ERROR_ACCESS_DENIED));
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        let text = err.to_string();
        assert!(text.starts_with("CreateJobObjectW: "), "{text}");
        assert!(text.contains("os error 5"), "{text}");
        let std_err = io::Error::from_raw_os_error(ERROR_FILE_NOT_FOUND as i32);
        assert_eq!(code_of(&std_err), Some(ERROR_FILE_NOT_FOUND));
    }
}
