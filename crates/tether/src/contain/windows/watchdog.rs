//! The watchdog's owner handle on Windows: a process handle opened with
//! `SYNCHRONIZE` (to wait on) and `PROCESS_QUERY_LIMITED_INFORMATION` (to
//! read its creation time), checked against the expected identity after it
//! was opened — a handle names one process object for as long as it is
//! held, so a pid recycled later never redirects it. Windows does not
//! reparent orphans, which is why `getppid()`-style watchdogs never fire
//! there; waiting on the owner's handle does.

use std::io;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};
use std::time::Duration;

use windows_sys::Win32::Foundation::{
    ERROR_INVALID_PARAMETER, FILETIME, WAIT_FAILED, WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use windows_sys::Win32::System::Threading::{
    GetProcessTimes, INFINITE, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE,
    WaitForSingleObject,
};

use crate::identity::ProcessIdentity;

/// 100 ns units from 1601-01-01 (`FILETIME`'s origin) to 1970-01-01: start
/// times in `tether::sys` count from the Unix epoch.
const EPOCH_OFFSET: u64 = 116_444_736_000_000_000;

/// A held handle on the owner process.
#[derive(Debug)]
pub(crate) struct OwnerHandle {
    process: OwnedHandle,
}

impl OwnerHandle {
    /// Opens the process `expected` names. `Ok(None)`: that process is
    /// gone (exited, or its pid now names a process created at another
    /// time — creation times are 100 ns instants, so never the same).
    pub(crate) fn open(expected: &ProcessIdentity) -> io::Result<Option<OwnerHandle>> {
        // SAFETY: OpenProcess takes plain values and returns a new handle
        // or null.
        let raw = unsafe {
            OpenProcess(
                PROCESS_SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION,
                0,
                expected.pid,
            )
        };
        if raw.is_null() {
            let err = io::Error::last_os_error();
            // No process has that pid.
            return if err.raw_os_error() == Some(ERROR_INVALID_PARAMETER as i32) {
                Ok(None)
            } else {
                Err(err)
            };
        }
        // SAFETY: the handle is new and ours alone.
        let process = unsafe { OwnedHandle::from_raw_handle(raw as RawHandle) };
        let handle = OwnerHandle { process };
        let zero = FILETIME {
            dwLowDateTime: 0,
            dwHighDateTime: 0,
        };
        let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
        // SAFETY: a valid process handle and four FILETIMEs we own.
        let ok = unsafe {
            GetProcessTimes(
                handle.raw(),
                &mut created,
                &mut exited,
                &mut kernel,
                &mut user,
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        let creation = (u64::from(created.dwHighDateTime) << 32) | u64::from(created.dwLowDateTime);
        if creation.saturating_sub(EPOCH_OFFSET) != expected.start_time
            || handle.wait(Some(Duration::ZERO))?
        {
            return Ok(None);
        }
        Ok(Some(handle))
    }

    /// Waits until the owner exits (`true`) or `timeout` passes (`false`);
    /// `None` waits for as long as it takes.
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let ms = match timeout {
            None => INFINITE,
            // Round up, and stay below INFINITE.
            Some(t) => t.as_micros().div_ceil(1000).min(u128::from(INFINITE - 1)) as u32,
        };
        // SAFETY: waiting on a valid handle we own.
        match unsafe { WaitForSingleObject(self.raw(), ms) } {
            WAIT_OBJECT_0 => Ok(true),
            WAIT_TIMEOUT => Ok(false),
            WAIT_FAILED => Err(io::Error::last_os_error()),
            other => Err(io::Error::other(format!(
                "unexpected wait result {other:#x}"
            ))),
        }
    }

    fn raw(&self) -> windows_sys::Win32::Foundation::HANDLE {
        self.process.as_raw_handle() as windows_sys::Win32::Foundation::HANDLE
    }

    /// The handle an event loop waits on: signalled once the owner exited.
    pub(crate) fn as_raw_handle(&self) -> RawHandle {
        self.process.as_raw_handle()
    }
}

/// The owner's process handle: signalled once the owner exited.
impl AsRawHandle for crate::watchdog::OwnerWatch {
    fn as_raw_handle(&self) -> RawHandle {
        self.handle.as_raw_handle()
    }
}
