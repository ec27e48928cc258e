//! Starting a process inside a job, from its first instruction.
//!
//! `std::process::Command` cannot do this: a child spawned normally and
//! assigned to the job afterwards may already have started children of its
//! own, which stay outside (the seed agent's fast native pipelines raced it
//! exactly so). Here the child is created by our own `CreateProcessW` with
//! `STARTUPINFOEXW`:
//!
//! - **`PROC_THREAD_ATTRIBUTE_JOB_LIST`** (Windows 10+): the kernel puts the
//!   process into the job as it creates it. [`Membership::Atomic`].
//! - Fallback where the attribute is not supported: **`CREATE_SUSPENDED`**,
//!   `AssignProcessToJobObject`, then `ResumeThread` on the primary thread,
//!   whose previous suspend count must be 1 (ours). The child runs no
//!   instruction before it is in the job. [`Membership::SuspendedThenAssigned`].
//!   If any step fails, the child is terminated and both its handles closed
//!   before the error (with its Windows code) is returned.
//! - **`PROC_THREAD_ATTRIBUTE_HANDLE_LIST`**: the child inherits exactly its
//!   three stdio handles — never another inheritable handle of the owner
//!   (another session's pipe end would hold that session's output open).
//! - Either way the result is checked with `IsProcessInJob` before it is
//!   returned: a process outside its job is never handed back as contained.
//!
//! Both ways of joining the job were measured to work under Wine 8
//! (cross-platform.md, tests a1 and b).

use std::ffi::OsStr;
use std::io;
use std::os::windows::io::{AsHandle, AsRawHandle, BorrowedHandle, OwnedHandle};

use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::System::Console::HPCON;
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, CREATE_SUSPENDED, CREATE_UNICODE_ENVIRONMENT, CreateProcessW,
    EXTENDED_STARTUPINFO_PRESENT, PROC_THREAD_ATTRIBUTE_HANDLE_LIST,
    PROC_THREAD_ATTRIBUTE_JOB_LIST, PROCESS_INFORMATION, ResumeThread, STARTF_USESTDHANDLES,
    STARTUPINFOEXW, TerminateProcess,
};

use super::attribute_list::AttributeList;
use super::handle::{duplicate, owned};
use super::job::Job;
use super::wide::to_wide;
use super::win_error::WinError;

/// Exit code given to a child killed because it could not be contained.
pub const UNCONTAINED_EXIT_CODE: u32 = 0xC000_0022; // STATUS_ACCESS_DENIED

/// How the child joined its job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Membership {
    /// Created inside the job by `PROC_THREAD_ATTRIBUTE_JOB_LIST`.
    Atomic,
    /// Created suspended, assigned, then resumed.
    SuspendedThenAssigned,
    /// In no job of ours: the caller asked for it explicitly.
    Uncontained,
}

/// Which way to try first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MembershipPolicy {
    /// The job-list attribute, falling back to suspend–assign–resume where
    /// the attribute is not supported (before Windows 10).
    #[default]
    Atomic,
    /// Always suspend–assign–resume (tests both paths).
    #[cfg_attr(not(test), allow(dead_code))]
    SuspendedThenAssigned,
}

/// What the child's console streams are.
#[derive(Clone, Copy, Debug)]
pub enum Console<'a> {
    /// Standard handles: each is duplicated as inheritable for the call and
    /// is the only thing the child inherits. `None`: the child gets none.
    Std {
        /// The child's stdin.
        stdin: Option<BorrowedHandle<'a>>,
        /// The child's stdout.
        stdout: Option<BorrowedHandle<'a>>,
        /// The child's stderr.
        stderr: Option<BorrowedHandle<'a>>,
    },
    /// Attached to this pseudoconsole. The child inherits nothing, and its
    /// std handles are explicitly NULL (`STARTF_USESTDHANDLES`): without that,
    /// a child of an owner whose own stdio is redirected writes to the
    /// owner's handles instead of the pseudoconsole (microsoft/terminal
    /// #11276, and seen under Wine).
    Pseudo(HPCON),
}

/// Everything `CreateProcessW` needs.
#[derive(Debug)]
pub struct Spawn<'a> {
    /// Full path of the executable (resolved by the caller: `CreateProcessW`'s
    /// own search looks in the owner's directory and current directory
    /// first).
    pub application: &'a OsStr,
    /// The NUL-terminated command line (see `quote`); `CreateProcessW` may
    /// write to it.
    pub command_line: Vec<u16>,
    /// The environment block (see `environment`); always given, because the
    /// spawn tag must be in it.
    pub environment: &'a [u16],
    /// Working directory; `None`: the owner's.
    pub cwd: Option<&'a OsStr>,
    /// The console streams.
    pub console: Console<'a>,
    /// The job the child is created in; `None` only for a caller that asked
    /// to run uncontained.
    pub job: Option<&'a Job>,
    /// Start the child as the leader of a new console process group, so a
    /// `CTRL_BREAK_EVENT` can be aimed at it (the graceful kill step). Such
    /// a group ignores CTRL_C; CTRL_BREAK is what reaches it.
    pub new_process_group: bool,
    /// How to join the job.
    pub membership: MembershipPolicy,
    /// Further creation flags (`CREATE_NO_WINDOW`, …); never
    /// `CREATE_BREAKAWAY_FROM_JOB` (refused by the job anyway).
    pub extra_flags: u32,
}

/// A process that has been created inside its job and resumed.
#[derive(Debug)]
pub struct Spawned {
    /// Full-access handle to the process: held while the session lives, it
    /// pins the pid and is what identity checks and waits go through.
    pub process: OwnedHandle,
    /// The process id.
    pub pid: u32,
    /// How it joined the job.
    #[cfg_attr(not(test), allow(dead_code))]
    pub membership: Membership,
}

/// Creates the process described by `spec` inside `spec.job`.
pub fn spawn(mut spec: Spawn<'_>) -> io::Result<Spawned> {
    let application = to_wide(spec.application)?;
    let cwd = spec.cwd.map(to_wide).transpose()?;
    if spec.environment.len() < 2 || spec.environment[spec.environment.len() - 2..] != [0, 0] {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "environment block is not double-NUL terminated",
        ));
    }
    if spec.command_line.last() != Some(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "command line is not NUL terminated",
        ));
    }

    // Inheritable duplicates of the stdio handles, alive until after the
    // call; the originals stay non-inheritable. (A concurrent std::process
    // spawn in this process, which inherits every inheritable handle, could
    // catch these duplicates during the call: std's own lock does not cover
    // us. Its child would then hold a copy of a stdio pipe end.)
    let mut std_dups: [Option<OwnedHandle>; 3] = [None, None, None];
    if let Console::Std {
        stdin,
        stdout,
        stderr,
    } = spec.console
    {
        for (slot, handle) in std_dups.iter_mut().zip([stdin, stdout, stderr]) {
            if let Some(h) = handle {
                *slot = Some(duplicate(h, true)?);
            }
        }
    }
    let raw_of = |h: &Option<OwnedHandle>| {
        h.as_ref()
            .map_or(std::ptr::null_mut(), |h| h.as_raw_handle())
    };
    let std_raw: [HANDLE; 3] = [
        raw_of(&std_dups[0]),
        raw_of(&std_dups[1]),
        raw_of(&std_dups[2]),
    ];
    let inherit: Vec<HANDLE> = std_raw.iter().copied().filter(|h| !h.is_null()).collect();
    let jobs = spec.job.map(|job| [job.raw()]);

    let mut attributes = AttributeList::new(3)?;
    let mut membership = match (spec.membership, &jobs) {
        (_, None) => Membership::Uncontained,
        (MembershipPolicy::Atomic, Some(_)) => Membership::Atomic,
        (MembershipPolicy::SuspendedThenAssigned, Some(_)) => Membership::SuspendedThenAssigned,
    };
    if let Some(jobs) = &jobs
        && membership == Membership::Atomic
        && attributes
            .set_handles(
                PROC_THREAD_ATTRIBUTE_JOB_LIST,
                jobs,
                "UpdateProcThreadAttribute(PROC_THREAD_ATTRIBUTE_JOB_LIST)",
            )
            .is_err()
    {
        // Before Windows 10 the attribute is unknown; nothing was created
        // yet, so falling back costs nothing.
        membership = Membership::SuspendedThenAssigned;
    }
    if !inherit.is_empty() {
        attributes.set_handles(
            PROC_THREAD_ATTRIBUTE_HANDLE_LIST,
            &inherit,
            "UpdateProcThreadAttribute(PROC_THREAD_ATTRIBUTE_HANDLE_LIST)",
        )?;
    }
    if let Console::Pseudo(console) = spec.console {
        attributes.set_pseudoconsole(console)?;
    }

    let mut startup = STARTUPINFOEXW::default();
    startup.StartupInfo.cb = size_of::<STARTUPINFOEXW>() as u32;
    startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    startup.StartupInfo.hStdInput = std_raw[0];
    startup.StartupInfo.hStdOutput = std_raw[1];
    startup.StartupInfo.hStdError = std_raw[2];
    startup.lpAttributeList = attributes.as_ptr();

    let mut flags = CREATE_UNICODE_ENVIRONMENT | EXTENDED_STARTUPINFO_PRESENT | spec.extra_flags;
    if spec.new_process_group {
        flags |= CREATE_NEW_PROCESS_GROUP;
    }
    if membership == Membership::SuspendedThenAssigned {
        flags |= CREATE_SUSPENDED;
    }

    let mut info = PROCESS_INFORMATION::default();
    // Under Wine, a creation that Wine itself failed is tried again (see
    // `wine::retry_failed_creation`: nothing was created).
    super::wine::retry_failed_creation(|| {
        // SAFETY: every pointer is valid for the call: NUL-terminated wide
        // strings, a mutable NUL-terminated command line, a double-NUL
        // terminated environment block, an initialized attribute list whose
        // values (`jobs`, `inherit`) outlive it, and a valid out pointer.
        let ok = unsafe {
            CreateProcessW(
                application.as_ptr(),
                spec.command_line.as_mut_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                (!inherit.is_empty()).into(),
                flags,
                spec.environment.as_ptr().cast(),
                cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                &startup.StartupInfo,
                &mut info,
            )
        };
        if ok == 0 {
            return Err(WinError::last("CreateProcessW"));
        }
        Ok(())
    })?;
    drop(attributes);
    drop(std_dups);
    // SAFETY: CreateProcessW succeeded, so both handles are valid and ours
    // alone.
    let (process, thread) = unsafe {
        (
            owned(info.hProcess, "CreateProcessW(hProcess)")?,
            owned(info.hThread, "CreateProcessW(hThread)")?,
        )
    };

    if let Some(job) = spec.job
        && membership == Membership::SuspendedThenAssigned
    {
        if let Err(err) = job.assign(process.as_handle()) {
            kill_uncontained(&process);
            return Err(err);
        }
        // SAFETY: valid thread handle with THREAD_SUSPEND_RESUME (full
        // access from CreateProcessW).
        let previous = unsafe { ResumeThread(thread.as_raw_handle()) };
        if previous != 1 {
            let err = if previous == u32::MAX {
                WinError::last("ResumeThread")
            } else {
                io::Error::other(format!(
                    "ResumeThread: the new process's thread had suspend count {previous}, expected 1"
                ))
            };
            kill_uncontained(&process);
            return Err(err);
        }
    }
    drop(thread);

    // Belt and braces: never return a process outside its job.
    let Some(job) = spec.job else {
        return Ok(Spawned {
            process,
            pid: info.dwProcessId,
            membership,
        });
    };
    match job.contains(process.as_handle()) {
        Ok(true) => {}
        Ok(false) => {
            kill_uncontained(&process);
            return Err(io::Error::other(
                "CreateProcessW: the new process is not in its job",
            ));
        }
        Err(err) => {
            kill_uncontained(&process);
            return Err(err);
        }
    }
    Ok(Spawned {
        process,
        pid: info.dwProcessId,
        membership,
    })
}

/// Ends a child that could not be contained (it has not run, or must not
/// keep running). Its handles close when the caller drops them.
fn kill_uncontained(process: &OwnedHandle) {
    // SAFETY: valid process handle with PROCESS_TERMINATE. A failure leaves
    // nothing better to do: the error being returned already says why.
    unsafe { TerminateProcess(process.as_raw_handle(), UNCONTAINED_EXIT_CODE) };
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::time::Duration;

    use super::super::completion_port::{CompletionPort, JobMessage};
    use super::super::environment::Environment;
    use super::super::job::Breakaway;
    use super::super::{pipe, process, quote};
    use super::*;

    /// Starts `win_tree tree 60` in `job`; returns it and the pids it printed.
    fn tree(job: &Job, membership: MembershipPolicy) -> (Spawned, Vec<u32>) {
        let exe = super::super::win_tree();
        let line = quote::command_line(exe.as_os_str(), &["tree".as_ref(), "60".as_ref()]).unwrap();
        let env = Environment::inherit().block();
        let (read, write) = pipe::pipe().unwrap();
        let spawned = spawn(Spawn {
            application: exe.as_os_str(),
            command_line: line,
            environment: &env,
            cwd: None,
            console: Console::Std {
                stdin: None,
                stdout: Some(write.as_handle()),
                stderr: None,
            },
            job: Some(job),
            new_process_group: true,
            membership,
            extra_flags: 0,
        })
        .unwrap();
        drop(write);
        let mut first = String::new();
        BufReader::new(read).read_line(&mut first).unwrap();
        let pids = first
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        (spawned, pids)
    }

    fn pin(pid: u32) -> process::Pinned {
        use windows_sys::Win32::System::Threading::PROCESS_QUERY_INFORMATION;
        // PROCESS_QUERY_INFORMATION: Wine's IsProcessInJob refuses the
        // limited right (cross-platform.md, test j).
        let access = process::QUERY_TERMINATE | PROCESS_QUERY_INFORMATION;
        let pinned = process::Pinned::open(pid, None, access)
            .unwrap()
            .expect("alive");
        assert_eq!(pinned.pid, pid);
        pinned
    }

    #[test]
    fn both_ways_in_put_child_and_instant_grandchild_in_the_job() {
        for (policy, want) in [
            (MembershipPolicy::Atomic, Membership::Atomic),
            (
                MembershipPolicy::SuspendedThenAssigned,
                Membership::SuspendedThenAssigned,
            ),
        ] {
            let job = Job::new(Breakaway::Refused).unwrap();
            let tried_again = super::super::wine::tried_again();
            let (spawned, pids) = tree(&job, policy);
            let tried_again = super::super::wine::tried_again() - tried_again;
            assert_eq!(spawned.membership, want);
            assert_eq!(pids[0], spawned.pid);
            let (child, grandchild) = (pin(pids[0]), pin(pids[1]));
            assert!(job.contains(grandchild.handle()).unwrap(), "{want:?}");
            let mut listed = job.process_ids().unwrap();
            listed.sort();
            let mut expected = pids.clone();
            expected.sort();
            assert_eq!(listed, expected);
            let accounting = job.accounting().unwrap();
            assert_eq!(accounting.active_processes, 2);
            // Every process the job ever held: the two, plus — under Wine
            // only — one per creation Wine failed on its own and we tried
            // again (its process was in the job and died in Wine's
            // start-up). The count is of this whole test process, whose
            // other tests spawn alongside: an upper bound for this job.
            assert!(
                (2..=2 + tried_again).contains(&accounting.total_processes),
                "{} processes ever in the job, {tried_again} creations tried again",
                accounting.total_processes
            );
            drop(job); // kill on close
            for p in [&child, &grandchild] {
                assert!(process::wait(p.handle(), Some(Duration::from_secs(10))).unwrap());
            }
        }
    }

    #[test]
    fn tree_empty_is_the_port_message_with_this_jobs_key_confirmed_by_accounting() {
        let port = CompletionPort::new().unwrap();
        let other = Job::new(Breakaway::Refused).unwrap();
        other.associate(&port, 1).unwrap();
        let job = Job::new(Breakaway::Refused).unwrap();
        job.associate(&port, 2).unwrap();
        let (_spawned, pids) = tree(&job, MembershipPolicy::Atomic);
        let grandchild = pin(pids[1]);
        job.terminate(77).unwrap();
        assert!(process::wait(grandchild.handle(), Some(Duration::from_secs(10))).unwrap());
        assert_eq!(process::exit_code(grandchild.handle()).unwrap(), Some(77));
        let mut joined = 0;
        loop {
            let packet = port
                .wait(Some(Duration::from_secs(10)))
                .unwrap()
                .expect("ActiveProcessZero never came");
            assert_eq!(packet.key, 2, "a packet of the other job: {packet:?}");
            match packet.job_message() {
                Some(JobMessage::NewProcess { .. }) => joined += 1,
                Some(JobMessage::ActiveProcessZero) => break,
                _ => {}
            }
        }
        assert_eq!(joined, 2);
        assert_eq!(job.accounting().unwrap().active_processes, 0);
    }

    #[test]
    fn only_the_stdio_handles_are_inherited() {
        // An inheritable pipe end the child is not given: had it leaked into
        // the child (which sleeps 60 s), reading the pipe would not end.
        let (mut read, write) = pipe::pipe().unwrap();
        let inheritable = super::super::handle::duplicate(write.as_handle(), true).unwrap();
        drop(write);
        let job = Job::new(Breakaway::Refused).unwrap();
        let (spawned, _) = tree(&job, MembershipPolicy::Atomic);
        drop(inheritable);
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut read, &mut buf).unwrap();
        assert!(
            process::exit_code(spawned.process.as_handle())
                .unwrap()
                .is_none()
        );
    }
}
