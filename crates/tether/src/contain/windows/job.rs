//! The job object: the kernel's container for one session's process tree.
//!
//! Every job made here has `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`: when the last
//! handle to it closes — the owner exiting, crashing or being killed by
//! `TerminateProcess` or by `kill -9` of its Wine process — the kernel
//! terminates every process in it. The handle is not inheritable and the job
//! has no name, so only the owner can hold it (a name would let anyone open
//! a second handle and keep the tree alive). A process a member creates is a
//! member too, and with no breakaway flag it cannot leave:
//! `CREATE_BREAKAWAY_FROM_JOB` fails with `ERROR_ACCESS_DENIED` (measured
//! under Wine 8: cross-platform.md, test e).
//!
//! Jobs nest (Windows 8+): tether running inside a CI runner's or a
//! terminal's job still gets a job of its own per session, and closing
//! either job kills the session.

use std::io;
use std::mem::{offset_of, size_of};
use std::os::windows::io::{AsRawHandle, BorrowedHandle, OwnedHandle};

use windows_sys::Win32::Foundation::{ERROR_MORE_DATA, HANDLE};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, IsProcessInJob, JOB_OBJECT_CPU_RATE_CONTROL_ENABLE,
    JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP, JOB_OBJECT_LIMIT, JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
    JOB_OBJECT_LIMIT_BREAKAWAY_OK, JOB_OBJECT_LIMIT_JOB_MEMORY, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_ASSOCIATE_COMPLETION_PORT, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
    JOBOBJECT_BASIC_PROCESS_ID_LIST, JOBOBJECT_CPU_RATE_CONTROL_INFORMATION,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOBOBJECTINFOCLASS,
    JobObjectAssociateCompletionPortInformation, JobObjectBasicAccountingInformation,
    JobObjectBasicProcessIdList, JobObjectCpuRateControlInformation,
    JobObjectExtendedLimitInformation, QueryInformationJobObject, SetInformationJobObject,
    TerminateJobObject,
};

use super::completion_port::CompletionPort;
use super::handle::owned;
use super::win_error::{WinError, code_of};
use crate::limits::{Enforcement, LimitReport, Limits, cpu_millis};

/// Whether processes of a job may leave it.
///
/// There is deliberately no "silent" variant:
/// `JOB_OBJECT_LIMIT_SILENT_BREAKAWAY_OK` lets every child leave without
/// asking, which would make a session silently uncontained.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Breakaway {
    /// No process can leave: `CREATE_BREAKAWAY_FROM_JOB` is refused with
    /// `ERROR_ACCESS_DENIED`. Every session job is made this way.
    #[default]
    Refused,
    /// A child created with `CREATE_BREAKAWAY_FROM_JOB` starts outside the
    /// job and survives its close. Only for a caller that asks for it (a
    /// self-attached program that must launch an updater that outlives it).
    OnRequest,
}

impl Breakaway {
    fn limit_flags(self) -> JOB_OBJECT_LIMIT {
        match self {
            Breakaway::Refused => 0,
            Breakaway::OnRequest => JOB_OBJECT_LIMIT_BREAKAWAY_OK,
        }
    }
}

/// What the job's accounting says about its processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accounting {
    /// Processes that were ever in the job.
    pub total_processes: u32,
    /// Processes in the job now. Zero is the verified "tree is gone".
    pub active_processes: u32,
    /// Processes ended by a job limit (not by `TerminateJobObject`).
    pub total_terminated: u32,
}

/// An anonymous, kill-on-close job object whose only handle we hold.
#[derive(Debug)]
pub struct Job {
    handle: OwnedHandle,
}

impl Job {
    /// A new kill-on-close job.
    ///
    /// Fails (with the Windows error code) if the job cannot be created or
    /// its limits cannot be set; a job without kill-on-close is never
    /// returned.
    pub fn new(breakaway: Breakaway) -> io::Result<Job> {
        // SAFETY: NULL attributes make the handle non-inheritable; a NULL
        // name makes the job anonymous; the new handle is ours alone.
        let handle = unsafe {
            owned(
                CreateJobObjectW(std::ptr::null(), std::ptr::null()),
                "CreateJobObjectW",
            )
        }?;
        let job = Job { handle };
        let mut limits = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
        limits.BasicLimitInformation.LimitFlags =
            JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | breakaway.limit_flags();
        job.set(
            JobObjectExtendedLimitInformation,
            &limits,
            "SetInformationJobObject(JobObjectExtendedLimitInformation)",
        )?;
        Ok(job)
    }

    /// A new kill-on-close job that also holds `limits` for the whole
    /// tree: job memory (`JOB_OBJECT_LIMIT_JOB_MEMORY`: committed memory of
    /// every process together; past it allocations fail), active processes
    /// (`JOB_OBJECT_LIMIT_ACTIVE_PROCESS`: past it process creation fails),
    /// CPU rate (a hard cap of the machine's cycles, cores ÷ processors).
    /// A limit the system refuses is reported `none` with its error; the
    /// job itself (kill-on-close) is never given up for a limit.
    ///
    /// Under Wine the limits are set but not enforced (Wine 8 accepts the
    /// flags and ignores them — tested by `tests/windows_job.rs`): they are
    /// reported `none`, naming that gap, never `job`.
    pub fn with_limits(breakaway: Breakaway, limits: &Limits) -> io::Result<(Job, LimitReport)> {
        let job = Job::new(breakaway)?;
        let mut report = LimitReport::default();
        if limits.is_empty() {
            return Ok((job, report));
        }
        let wine = super::wine::version();
        let enforced = |how: io::Result<()>| match (how, &wine) {
            (Err(e), _) => Enforcement::None(format!("the job refused it: {e}")),
            (Ok(()), Some(version)) => Enforcement::None(format!(
                "Wine {version} accepts job limits but does not enforce them"
            )),
            (Ok(()), None) => Enforcement::Job,
        };
        let mut extended = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
        extended.BasicLimitInformation.LimitFlags =
            JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | breakaway.limit_flags();
        if let Some(bytes) = limits.memory {
            extended.BasicLimitInformation.LimitFlags |= JOB_OBJECT_LIMIT_JOB_MEMORY;
            extended.JobMemoryLimit = bytes.min(usize::MAX as u64) as usize;
        }
        if let Some(n) = limits.pids {
            extended.BasicLimitInformation.LimitFlags |= JOB_OBJECT_LIMIT_ACTIVE_PROCESS;
            extended.BasicLimitInformation.ActiveProcessLimit = n.min(u32::MAX as u64) as u32;
        }
        if limits.memory.is_some() || limits.pids.is_some() {
            let set = job.set(
                JobObjectExtendedLimitInformation,
                &extended,
                "SetInformationJobObject(JobObjectExtendedLimitInformation)",
            );
            report.memory = limits.memory.map(|m| (m, enforced(clone_result(&set))));
            report.pids = limits.pids.map(|p| (p, enforced(clone_result(&set))));
        }
        if let Some(cores) = limits.cpu {
            let processors = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
            // Hundredths of a percent of all processors' cycles.
            let rate = (cores / processors * 10_000.0).round().clamp(1.0, 10_000.0) as u32;
            let mut info = JOBOBJECT_CPU_RATE_CONTROL_INFORMATION {
                ControlFlags: JOB_OBJECT_CPU_RATE_CONTROL_ENABLE
                    | JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP,
                ..Default::default()
            };
            info.Anonymous.CpuRate = rate;
            let set = job.set(
                JobObjectCpuRateControlInformation,
                &info,
                "SetInformationJobObject(JobObjectCpuRateControlInformation)",
            );
            report.cpu_millis = Some((cpu_millis(cores), enforced(set)));
        }
        Ok((job, report))
    }

    /// The raw job handle, for `PROC_THREAD_ATTRIBUTE_JOB_LIST`.
    pub fn raw(&self) -> HANDLE {
        self.handle.as_raw_handle()
    }

    /// Routes this job's notifications to `port`, tagged with `key`.
    /// Associate before the first process joins, or its `NewProcess`
    /// message is never sent.
    pub fn associate(&self, port: &CompletionPort, key: usize) -> io::Result<()> {
        let info = JOBOBJECT_ASSOCIATE_COMPLETION_PORT {
            CompletionKey: key as *mut core::ffi::c_void,
            CompletionPort: port.raw(),
        };
        self.set(
            JobObjectAssociateCompletionPortInformation,
            &info,
            "SetInformationJobObject(JobObjectAssociateCompletionPortInformation)",
        )
    }

    /// Puts a running process into the job. Processes it created before
    /// this call stay outside: only use it on a process that has not run
    /// (created suspended) or on the current process before it spawns.
    pub fn assign(&self, process: BorrowedHandle<'_>) -> io::Result<()> {
        // SAFETY: both handles are valid for the duration of the call.
        let ok = unsafe { AssignProcessToJobObject(self.raw(), process.as_raw_handle()) };
        if ok == 0 {
            return Err(WinError::last("AssignProcessToJobObject"));
        }
        Ok(())
    }

    /// Whether `process` is in this job (or a job nested inside it).
    pub fn contains(&self, process: BorrowedHandle<'_>) -> io::Result<bool> {
        is_in_job(process, self.raw())
    }

    /// Terminates every process in the job with `exit_code`. Returns once
    /// the kernel has been told; verify with [`Job::accounting`].
    pub fn terminate(&self, exit_code: u32) -> io::Result<()> {
        // SAFETY: valid job handle.
        let ok = unsafe { TerminateJobObject(self.raw(), exit_code) };
        if ok == 0 {
            return Err(WinError::last("TerminateJobObject"));
        }
        Ok(())
    }

    /// The job's process counts.
    pub fn accounting(&self) -> io::Result<Accounting> {
        let mut info = JOBOBJECT_BASIC_ACCOUNTING_INFORMATION::default();
        self.query(
            JobObjectBasicAccountingInformation,
            &mut info,
            "QueryInformationJobObject(JobObjectBasicAccountingInformation)",
        )?;
        Ok(Accounting {
            total_processes: info.TotalProcesses,
            active_processes: info.ActiveProcesses,
            total_terminated: info.TotalTerminatedProcesses,
        })
    }

    /// The ids of the processes in the job now. A snapshot: pids in it may
    /// exit (and be reused) as soon as it is taken, so never signal by them
    /// without opening and checking identity first.
    pub fn process_ids(&self) -> io::Result<Vec<u32>> {
        let header = offset_of!(JOBOBJECT_BASIC_PROCESS_ID_LIST, ProcessIdList);
        let mut capacity = 64usize;
        loop {
            let bytes = header + capacity * size_of::<usize>();
            // usize elements keep the buffer aligned for the struct.
            let mut buf = vec![0usize; bytes.div_ceil(size_of::<usize>())];
            // SAFETY: `buf` is `bytes` long (rounded up) and aligned for the
            // struct; the kernel writes at most `bytes`.
            let ok = unsafe {
                QueryInformationJobObject(
                    self.raw(),
                    JobObjectBasicProcessIdList,
                    buf.as_mut_ptr().cast(),
                    bytes as u32,
                    std::ptr::null_mut(),
                )
            };
            let list = buf.as_ptr().cast::<JOBOBJECT_BASIC_PROCESS_ID_LIST>();
            // SAFETY: the buffer starts with the list header, written by the
            // call (zeros if it wrote nothing).
            let (assigned, listed) = unsafe {
                (
                    (*list).NumberOfAssignedProcesses,
                    (*list).NumberOfProcessIdsInList,
                )
            };
            if ok == 0 {
                let err = WinError::last("QueryInformationJobObject(JobObjectBasicProcessIdList)");
                if code_of(&err) == Some(ERROR_MORE_DATA) {
                    // Room for everyone now, and for some that join meanwhile.
                    capacity = (assigned as usize).max(capacity) * 2;
                    continue;
                }
                return Err(err);
            }
            let listed = (listed as usize).min(capacity);
            let ids = &buf[header / size_of::<usize>()..][..listed];
            return Ok(ids.iter().map(|&pid| pid as u32).collect());
        }
    }

    fn set<T>(&self, class: JOBOBJECTINFOCLASS, info: &T, call: &'static str) -> io::Result<()> {
        // SAFETY: `info` is the structure `class` expects (each caller pairs
        // them), valid for `size_of::<T>()` bytes.
        let ok = unsafe {
            SetInformationJobObject(
                self.raw(),
                class,
                (info as *const T).cast(),
                size_of::<T>() as u32,
            )
        };
        if ok == 0 {
            return Err(WinError::last(call));
        }
        Ok(())
    }

    fn query<T>(
        &self,
        class: JOBOBJECTINFOCLASS,
        info: &mut T,
        call: &'static str,
    ) -> io::Result<()> {
        // SAFETY: `info` is the structure `class` fills, writable for
        // `size_of::<T>()` bytes.
        let ok = unsafe {
            QueryInformationJobObject(
                self.raw(),
                class,
                (info as *mut T).cast(),
                size_of::<T>() as u32,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            return Err(WinError::last(call));
        }
        Ok(())
    }
}

/// The same outcome again (an `io::Error` is not `Clone`).
fn clone_result(result: &io::Result<()>) -> io::Result<()> {
    match result {
        Ok(()) => Ok(()),
        Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
    }
}

/// Whether `process` is in any job at all (tether itself inside a CI
/// runner's job, for instance). Needs a handle with
/// `PROCESS_QUERY_INFORMATION`: Wine 8 refuses one opened with only
/// `PROCESS_QUERY_LIMITED_INFORMATION` (cross-platform.md, test j).
pub fn in_any_job(process: BorrowedHandle<'_>) -> io::Result<bool> {
    is_in_job(process, std::ptr::null_mut())
}

fn is_in_job(process: BorrowedHandle<'_>, job: HANDLE) -> io::Result<bool> {
    let mut result = 0;
    // SAFETY: valid process handle; `job` is a valid job handle or NULL
    // ("any job"); `result` is a valid out pointer.
    let ok = unsafe { IsProcessInJob(process.as_raw_handle(), job, &mut result) };
    if ok == 0 {
        return Err(WinError::last("IsProcessInJob"));
    }
    Ok(result != 0)
}
