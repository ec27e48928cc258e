//! Self-attach: a long-lived program puts *itself* into a kill-on-close job,
//! so that every process it starts dies with it.
//!
//! For programs tether does not launch (the seed agent's gateway and
//! dashboard backends): called first thing in `main`, before the program
//! starts any child (children started earlier stay outside — a job only
//! takes new members). Two jobs may be involved:
//!
//! - **the launcher's**, where the launcher gives us a handle to a
//!   kill-on-close job it holds: this process joins it and closes its own
//!   copy of the handle, so the launcher's handle alone keeps the job
//!   alive — when the launcher dies, this process and its whole tree die;
//! - **its own**, always: a new kill-on-close job nested inside whatever job
//!   this process is in. Its only handle is kept, never closed, for the life
//!   of the process, so when this process ends by any cause (exit, crash,
//!   `TerminateProcess`), the kernel closes it and kills every descendant.
//!
//! Breakaway is refused unless the caller asks for [`Breakaway::OnRequest`];
//! then a child created with `CREATE_BREAKAWAY_FROM_JOB` leaves our job (an
//! updater that must outlive us). A child breaks away from the whole chain of
//! jobs it is in, so it also needs every enclosing job (the launcher's, a CI
//! runner's) to allow it, or its creation fails with `ERROR_ACCESS_DENIED`.

use std::io;
use std::os::windows::io::{AsRawHandle, BorrowedHandle, OwnedHandle};
use std::sync::{Mutex, OnceLock};

use windows_sys::Win32::System::JobObjects::AssignProcessToJobObject;
use windows_sys::Win32::System::Threading::GetCurrentProcess;

use super::job::{Breakaway, Job, in_any_job};
use super::win_error::WinError;

/// This process's own job, held until the process ends.
static OWN_JOB: OnceLock<Job> = OnceLock::new();
/// Serializes attaching: a second own job made concurrently and then
/// dropped would close a kill-on-close job this process is in — killing it.
static ATTACHING: Mutex<()> = Mutex::new(());

/// What [`attach_current_process`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attached {
    /// This process was already in a job before the call (a CI runner's,
    /// a terminal's, the launcher's).
    pub was_in_job: bool,
    /// It joined the launcher's job.
    pub joined_launcher_job: bool,
    /// Whether its children may break away from its own job.
    pub breakaway: Breakaway,
}

/// Puts the current process into `launcher_job` (if given) and into a new
/// kill-on-close job of its own. See the module docs.
///
/// Fails, with the Windows error code, if a job cannot be created or
/// joined; a second call fails with `AlreadyExists`. Nothing is half done
/// silently: if joining the launcher's job failed, no own job was made.
pub fn attach_current_process(
    launcher_job: Option<OwnedHandle>,
    breakaway: Breakaway,
) -> io::Result<Attached> {
    let _serial = ATTACHING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if OWN_JOB.get().is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "this process is already attached to its own job",
        ));
    }
    let me = current_process();
    let was_in_job = in_any_job(me)?;
    let joined_launcher_job = launcher_job.is_some();
    if let Some(launcher) = launcher_job {
        assign(
            launcher.as_raw_handle(),
            "AssignProcessToJobObject(launcher's job)",
        )?;
        // Our copy closes here: the launcher's handle is what holds the job.
        drop(launcher);
    }
    let own = Job::new(breakaway)?;
    assign(own.raw(), "AssignProcessToJobObject(own job)")?;
    if let Err(own) = OWN_JOB.set(own) {
        // Unreachable under the lock; never drop (close) a job we are in.
        std::mem::forget(own);
    }
    Ok(Attached {
        was_in_job,
        joined_launcher_job,
        breakaway,
    })
}

pub(crate) fn current_process() -> BorrowedHandle<'static> {
    // SAFETY: the current-process pseudo handle is valid for the life of
    // the process and needs no closing.
    unsafe { BorrowedHandle::borrow_raw(GetCurrentProcess()) }
}

fn assign(job: windows_sys::Win32::Foundation::HANDLE, call: &'static str) -> io::Result<()> {
    // SAFETY: `job` is a valid job handle for the call; the pseudo handle
    // names this process.
    if unsafe { AssignProcessToJobObject(job, GetCurrentProcess()) } == 0 {
        return Err(WinError::last(call));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::os::windows::io::{AsRawHandle, BorrowedHandle};
    use std::time::Duration;

    use super::super::{handle, process};
    use super::*;

    /// Starts `win_tree self-attach …` (by std: in no job of ours) and pins
    /// it and the pids it printed.
    fn attached(args: &[&str]) -> (std::process::Child, Vec<Option<process::Pinned>>) {
        let mut proc_ = std::process::Command::new(super::super::win_tree())
            .arg("self-attach")
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(proc_.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let pins = line
            .split_whitespace()
            .map(|w| {
                w.parse().ok().map(|pid| {
                    use windows_sys::Win32::System::Threading::PROCESS_QUERY_INFORMATION;
                    let access = process::QUERY_TERMINATE | PROCESS_QUERY_INFORMATION;
                    process::Pinned::open(pid, None, access)
                        .unwrap()
                        .expect("alive")
                })
            })
            .collect();
        (proc_, pins)
    }

    fn dies(p: &process::Pinned) -> bool {
        process::wait(p.handle(), Some(Duration::from_secs(10))).unwrap()
    }

    #[test]
    fn children_of_a_self_attached_program_die_with_it() {
        let (mut proc_, pins) = attached(&["refused"]);
        let (me, child) = (pins[0].as_ref().unwrap(), pins[1].as_ref().unwrap());
        process::terminate(me.handle(), 1).unwrap();
        assert!(dies(child), "the self-attached program's child survived it");
        let _ = proc_.wait();
    }

    #[test]
    fn breakaway_lets_only_the_child_that_asks_escape() {
        let (mut proc_, pins) = attached(&["on-request"]);
        let me = pins[0].as_ref().unwrap();
        let child = pins[1].as_ref().unwrap();
        let escaped = pins[2].as_ref().unwrap();
        process::terminate(me.handle(), 1).unwrap();
        assert!(dies(child));
        // Bounded: kill-on-close takes <1 ms here; 500 ms is ample.
        assert!(
            !process::wait(escaped.handle(), Some(Duration::from_millis(500))).unwrap(),
            "the breakaway child died with the job"
        );
        process::terminate(escaped.handle(), 1).unwrap();
        let _ = proc_.wait();
    }

    #[test]
    fn a_launchers_job_holds_the_program_and_its_tree() {
        let launcher = Job::new(Breakaway::Refused).unwrap();
        // SAFETY: the job's handle is valid while `launcher` lives.
        let borrowed = unsafe { BorrowedHandle::borrow_raw(launcher.raw()) };
        // std's Command inherits every inheritable handle: the hand-over.
        let inheritable = handle::duplicate(borrowed, true).unwrap();
        let value = (inheritable.as_raw_handle() as usize).to_string();
        let (mut proc_, pins) = attached(&["refused", &value]);
        drop(inheritable);
        let (me, child) = (pins[0].as_ref().unwrap(), pins[1].as_ref().unwrap());
        assert!(launcher.contains(me.handle()).unwrap());
        assert!(launcher.contains(child.handle()).unwrap());
        drop(launcher); // the launcher's handle was the only one left
        assert!(dies(me), "the program outlived its launcher's job");
        assert!(dies(child));
        let _ = proc_.wait();
    }
}
