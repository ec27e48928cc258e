//! Processes by handle: opening, identity, waiting, ending, and the process
//! table.
//!
//! A Windows pid is reused once the process has exited *and* the last
//! handle to it is closed; a held handle pins both the process object and
//! its pid. So a process is named on disk by `(pid, creation time)` — the
//! creation time from `GetProcessTimes`, in 100 ns units since 1601, a
//! wall-clock instant that a later process with the same pid cannot share —
//! and acted on only through a handle whose creation time was checked after
//! opening it (a pid alone may name a newer process by the time it is
//! used).

use std::ffi::OsString;
use std::io;
use std::os::windows::io::{AsRawHandle, BorrowedHandle, OwnedHandle};
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{
    ERROR_INVALID_PARAMETER, ERROR_NO_MORE_FILES, FILETIME, WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, PROCESSENTRY32W, Process32FirstW, Process32NextW, TH32CS_SNAPPROCESS,
};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, GetProcessTimes, INFINITE, OpenProcess, PROCESS_NAME_WIN32,
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE, PROCESS_TERMINATE,
    QueryFullProcessImageNameW, TerminateProcess, WaitForSingleObject,
};

use super::handle::owned;
use super::wide::from_wide;
use super::win_error::{WinError, code_of};

/// Access for identity checks and waits.
pub const QUERY: u32 = PROCESS_QUERY_LIMITED_INFORMATION | PROCESS_SYNCHRONIZE;
/// Access for identity checks, waits and termination.
pub const QUERY_TERMINATE: u32 = QUERY | PROCESS_TERMINATE;

/// One row of the process table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessEntry {
    /// The process id.
    pub pid: u32,
    /// The pid of the process that created it. Windows keeps this number
    /// after the parent exits, so it may now name an unrelated process:
    /// a real parent was created before its child (compare creation times).
    pub parent_pid: u32,
    /// The executable's file name (no directory).
    pub exe: OsString,
}

/// The process table now (Toolhelp32 snapshot).
pub fn snapshot() -> io::Result<Vec<ProcessEntry>> {
    // SAFETY: plain call; the new handle (checked by `owned`) is ours alone.
    let snap = unsafe {
        owned(
            CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0),
            "CreateToolhelp32Snapshot",
        )
    }?;
    let mut entry = PROCESSENTRY32W {
        dwSize: size_of::<PROCESSENTRY32W>() as u32,
        ..Default::default()
    };
    let mut rows = Vec::new();
    // SAFETY: valid snapshot handle; `entry` has dwSize set as required.
    let mut ok = unsafe { Process32FirstW(snap.as_raw_handle(), &mut entry) };
    while ok != 0 {
        rows.push(ProcessEntry {
            pid: entry.th32ProcessID,
            parent_pid: entry.th32ParentProcessID,
            exe: from_wide(&entry.szExeFile),
        });
        // SAFETY: as above.
        ok = unsafe { Process32NextW(snap.as_raw_handle(), &mut entry) };
    }
    let err = WinError::last("Process32NextW");
    if code_of(&err) != Some(ERROR_NO_MORE_FILES) {
        return Err(err);
    }
    Ok(rows)
}

/// Opens process `pid` with `access`. `NotFound` if there is no such
/// process (Windows says `ERROR_INVALID_PARAMETER` for that).
pub fn open(pid: u32, access: u32) -> io::Result<OwnedHandle> {
    // SAFETY: plain call; the new handle (checked by `owned`) is ours alone.
    let handle = unsafe { owned(OpenProcess(access, 0, pid), "OpenProcess") };
    handle.map_err(|err| {
        if code_of(&err) == Some(ERROR_INVALID_PARAMETER) {
            io::Error::new(io::ErrorKind::NotFound, format!("no process {pid}"))
        } else {
            err
        }
    })
}

/// 100 ns units from 1601-01-01 to 1970-01-01.
pub const EPOCH_OFFSET: u64 = 116_444_736_000_000_000;

/// How long [`creation_time`] waits for a creation time still being set.
const CREATION_BOUND: Duration = Duration::from_millis(200);

/// When the process was created, in 100 ns units since 1601-01-01 UTC.
///
/// A creation time is an identity, so it must never be a value a later
/// read contradicts. Under Wine, a process looked at from outside the
/// moment it exists (a grandchild found in the process table, say) can
/// first report a creation time that is not set yet — 0x5555555555555555,
/// a fill pattern, centuries ahead — and the right one a moment later. A
/// creation time that is zero or later than now is therefore read again
/// (every millisecond, bounded: no event says "set"), and one that never
/// settles is an error, never an identity. (Windows sets it before the pid
/// is visible.)
pub fn creation_time(process: BorrowedHandle<'_>) -> io::Result<u64> {
    let deadline = Instant::now() + CREATION_BOUND;
    loop {
        let created = read_creation_time(process)?;
        if is_set(created, now_filetime()) {
            return Ok(created);
        }
        if Instant::now() >= deadline {
            return Err(io::Error::other(format!(
                "the process's creation time is not set (read {created}): still starting"
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether `created` can be a real creation time at `now` (both in
/// 100 ns units since 1601). A second of slack covers clocks read at
/// different granularities; the unset values seen are centuries ahead.
fn is_set(created: u64, now: u64) -> bool {
    created != 0 && created <= now.saturating_add(10_000_000)
}

/// Now, in 100 ns units since 1601-01-01 UTC (the clock creation times
/// are read from).
fn now_filetime() -> u64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    EPOCH_OFFSET + (since_epoch.as_nanos() / 100) as u64
}

fn read_creation_time(process: BorrowedHandle<'_>) -> io::Result<u64> {
    let mut times = [FILETIME::default(); 4];
    let [created, exited, kernel, user] = &mut times;
    // SAFETY: valid handle (PROCESS_QUERY_LIMITED_INFORMATION) and out
    // pointers.
    let ok = unsafe { GetProcessTimes(process.as_raw_handle(), created, exited, kernel, user) };
    if ok == 0 {
        return Err(WinError::last("GetProcessTimes"));
    }
    Ok((u64::from(times[0].dwHighDateTime) << 32) | u64::from(times[0].dwLowDateTime))
}

/// Waits up to `timeout` (`None`: forever) for the process to exit; `true`
/// if it has.
pub fn wait(process: BorrowedHandle<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    let millis = timeout.map_or(INFINITE, |t| {
        t.as_micros().div_ceil(1000).min(u128::from(INFINITE - 1)) as u32
    });
    // SAFETY: valid handle with SYNCHRONIZE.
    match unsafe { WaitForSingleObject(process.as_raw_handle(), millis) } {
        WAIT_OBJECT_0 => Ok(true),
        WAIT_TIMEOUT => Ok(false),
        _ => Err(WinError::last("WaitForSingleObject")),
    }
}

/// The exit code, or `None` while the process runs. (Asking the wait
/// first: an exit code of 259 is also what `GetExitCodeProcess` says for a
/// running process.)
pub fn exit_code(process: BorrowedHandle<'_>) -> io::Result<Option<u32>> {
    if !wait(process, Some(Duration::ZERO))? {
        return Ok(None);
    }
    let mut code = 0u32;
    // SAFETY: valid handle and out pointer.
    if unsafe { GetExitCodeProcess(process.as_raw_handle(), &mut code) } == 0 {
        return Err(WinError::last("GetExitCodeProcess"));
    }
    Ok(Some(code))
}

/// Terminates the process the handle names (and only it).
pub fn terminate(process: BorrowedHandle<'_>, exit_code: u32) -> io::Result<()> {
    // SAFETY: valid handle with PROCESS_TERMINATE.
    if unsafe { TerminateProcess(process.as_raw_handle(), exit_code) } == 0 {
        return Err(WinError::last("TerminateProcess"));
    }
    Ok(())
}

/// The full path of the process's executable.
pub fn image_path(process: BorrowedHandle<'_>) -> io::Result<OsString> {
    let mut buf = vec![0u16; 1024];
    loop {
        let mut len = buf.len() as u32;
        // SAFETY: `buf` holds `len` u16s; the call writes at most that.
        let ok = unsafe {
            QueryFullProcessImageNameW(
                process.as_raw_handle(),
                PROCESS_NAME_WIN32,
                buf.as_mut_ptr(),
                &mut len,
            )
        };
        if ok != 0 {
            return Ok(from_wide(&buf[..len as usize]));
        }
        let err = WinError::last("QueryFullProcessImageNameW");
        // ERROR_INSUFFICIENT_BUFFER (122); paths are at most 32767 units.
        if code_of(&err) == Some(122) && buf.len() < 32768 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        return Err(err);
    }
}

/// The pid of the process that created `process` (which may have exited
/// since, its pid reused: compare creation times before trusting it).
pub fn parent_pid(process: BorrowedHandle<'_>) -> io::Result<u32> {
    use windows_sys::Wdk::System::Threading::{NtQueryInformationProcess, ProcessBasicInformation};
    use windows_sys::Win32::System::Threading::PROCESS_BASIC_INFORMATION;
    let mut info = PROCESS_BASIC_INFORMATION::default();
    // SAFETY: valid handle; `info` is the structure this class fills.
    let status = unsafe {
        NtQueryInformationProcess(
            process.as_raw_handle(),
            ProcessBasicInformation,
            (&mut info as *mut PROCESS_BASIC_INFORMATION).cast(),
            size_of::<PROCESS_BASIC_INFORMATION>() as u32,
            std::ptr::null_mut(),
        )
    };
    if status < 0 {
        return Err(WinError::from_ntstatus(
            "NtQueryInformationProcess(ProcessBasicInformation)",
            status,
        ));
    }
    Ok(info.InheritedFromUniqueProcessId as u32)
}

/// A process held by a handle whose identity was checked after opening.
#[derive(Debug)]
pub struct Pinned {
    handle: OwnedHandle,
    /// The process id.
    #[cfg_attr(not(test), allow(dead_code))]
    pub pid: u32,
    /// Its creation time (see [`creation_time`]).
    #[cfg_attr(not(test), allow(dead_code))]
    pub creation_time: u64,
}

impl Pinned {
    /// Opens `pid` and checks it is the process created at
    /// `expected_creation` (any, if `None`). `Ok(None)` if no such process
    /// exists or the pid now names another one.
    pub fn open(
        pid: u32,
        expected_creation: Option<u64>,
        access: u32,
    ) -> io::Result<Option<Pinned>> {
        let handle = match open(pid, access) {
            Ok(h) => h,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
        };
        let created = creation_time(handle.as_handle())?;
        if expected_creation.is_some_and(|want| want != created) {
            return Ok(None);
        }
        Ok(Some(Pinned {
            handle,
            pid,
            creation_time: created,
        }))
    }

    /// The held handle.
    pub fn handle(&self) -> BorrowedHandle<'_> {
        self.handle.as_handle()
    }

    /// Whether it is still running.
    pub fn is_running(&self) -> io::Result<bool> {
        Ok(!wait(self.handle(), Some(Duration::ZERO))?)
    }
}

use std::os::windows::io::AsHandle;

/// Terminates `pid` only if it is still the process created at
/// `creation_time`, checked through the handle the termination then uses —
/// so a pid reused in between cannot redirect it. `Ok(false)` if the
/// process is gone or the pid names another process.
pub fn terminate_if_identity(pid: u32, creation_time: u64, exit_code: u32) -> io::Result<bool> {
    match Pinned::open(pid, Some(creation_time), QUERY_TERMINATE)? {
        Some(pinned) if pinned.is_running()? => {
            terminate(pinned.handle(), exit_code)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_in_the_table_with_a_stable_identity() {
        let me = std::process::id();
        let rows = snapshot().unwrap();
        assert!(rows.iter().any(|r| r.pid == me), "pid {me} not in snapshot");
        let a = Pinned::open(me, None, QUERY).unwrap().unwrap();
        let b = Pinned::open(me, Some(a.creation_time), QUERY)
            .unwrap()
            .unwrap();
        assert_eq!(a.creation_time, b.creation_time);
        assert!(a.is_running().unwrap());
        assert!(
            Pinned::open(me, Some(a.creation_time + 1), QUERY)
                .unwrap()
                .is_none()
        );
        let exe = image_path(a.handle()).unwrap();
        assert_eq!(std::path::Path::new(&exe), std::env::current_exe().unwrap());
    }

    #[test]
    fn an_unset_creation_time_is_not_an_identity() {
        let now = now_filetime();
        // The value Wine reported for a grandchild a moment after it was
        // created (then the right one, 17962770356320820 after the epoch).
        let seen = 0x5555_5555_5555_5555;
        assert_eq!(seen - EPOCH_OFFSET, 6_032_469_955_236_517_205);
        assert!(!is_set(seen, now));
        assert!(!is_set(0, now));
        assert!(!is_set(now + 20_000_000, now));
        assert!(is_set(now, now));
        assert!(is_set(now - 1, now));
        // This process's own creation time is set, and in the past.
        let me = Pinned::open(std::process::id(), None, QUERY)
            .unwrap()
            .unwrap();
        assert!(is_set(me.creation_time, now_filetime()));
        assert!(me.creation_time < now_filetime());
    }

    #[test]
    fn a_missing_pid_is_not_found() {
        // Pids are multiples of 4 on Windows (and under Wine): 3 never exists.
        let err = open(3, QUERY).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        assert!(!terminate_if_identity(3, 0, 1).unwrap());
    }
}
