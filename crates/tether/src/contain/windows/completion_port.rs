//! An I/O completion port carrying job notifications.
//!
//! A job associated with a port (see [`Job::associate`](super::job::Job))
//! posts one packet per event: the packet's *key* is the value given at
//! association (it says which job), the *bytes transferred* field is the
//! message (`JOB_OBJECT_MSG_*`) and the *overlapped* pointer is the process
//! id for per-process messages. One port can serve many jobs, so a reader
//! must match a packet by key **and** message — "any packet" is never "tree
//! empty".
//!
//! Windows documents these messages as notifications whose delivery is not
//! guaranteed (only notification-limit messages are). A reader therefore
//! treats `ActiveProcessZero` as a prompt to check the job's accounting, and
//! re-checks the accounting on a timeout too, never trusting a silence.

use std::io;
use std::os::windows::io::{AsRawHandle, OwnedHandle};
use std::time::Duration;

use windows_sys::Win32::Foundation::{INVALID_HANDLE_VALUE, WAIT_TIMEOUT};
use windows_sys::Win32::System::IO::{
    CreateIoCompletionPort, GetQueuedCompletionStatus, OVERLAPPED, PostQueuedCompletionStatus,
};
use windows_sys::Win32::System::SystemServices::{
    JOB_OBJECT_MSG_ABNORMAL_EXIT_PROCESS, JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT,
    JOB_OBJECT_MSG_ACTIVE_PROCESS_ZERO, JOB_OBJECT_MSG_END_OF_JOB_TIME,
    JOB_OBJECT_MSG_END_OF_PROCESS_TIME, JOB_OBJECT_MSG_EXIT_PROCESS,
    JOB_OBJECT_MSG_JOB_MEMORY_LIMIT, JOB_OBJECT_MSG_NEW_PROCESS,
    JOB_OBJECT_MSG_PROCESS_MEMORY_LIMIT,
};
use windows_sys::Win32::System::Threading::INFINITE;

use super::handle::owned;
use super::win_error::WinError;

/// One packet dequeued from the port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// The completion key: which job (or which poster) it is about.
    pub key: usize,
    /// The message (`JOB_OBJECT_MSG_*`, or a poster's own code).
    pub code: u32,
    /// The message's value: a process id for per-process job messages.
    pub value: usize,
}

/// A job notification, decoded from a [`Packet`] (the monitor asks the job
/// for facts instead; tests check what the port says).
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobMessage {
    /// A process joined the job (spawned into it or assigned).
    NewProcess {
        /// Its process id.
        pid: u32,
    },
    /// A process of the job exited.
    ExitProcess {
        /// Its process id.
        pid: u32,
    },
    /// A process of the job exited by an unhandled exception.
    AbnormalExitProcess {
        /// Its process id.
        pid: u32,
    },
    /// The job's last active process exited: the tree is (probably) empty.
    ActiveProcessZero,
    /// Some other job message (limits, time): recorded, not acted on.
    Other(u32),
}

impl Packet {
    /// The job message this packet carries, if its code is one.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn job_message(&self) -> Option<JobMessage> {
        // The pid travels in the pointer-sized overlapped field; pids are
        // 32-bit on every Windows.
        let pid = self.value as u32;
        Some(match self.code {
            JOB_OBJECT_MSG_NEW_PROCESS => JobMessage::NewProcess { pid },
            JOB_OBJECT_MSG_EXIT_PROCESS => JobMessage::ExitProcess { pid },
            JOB_OBJECT_MSG_ABNORMAL_EXIT_PROCESS => JobMessage::AbnormalExitProcess { pid },
            JOB_OBJECT_MSG_ACTIVE_PROCESS_ZERO => JobMessage::ActiveProcessZero,
            JOB_OBJECT_MSG_END_OF_JOB_TIME
            | JOB_OBJECT_MSG_END_OF_PROCESS_TIME
            | JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT
            | JOB_OBJECT_MSG_PROCESS_MEMORY_LIMIT
            | JOB_OBJECT_MSG_JOB_MEMORY_LIMIT => JobMessage::Other(self.code),
            _ => return None,
        })
    }
}

/// An I/O completion port (one reader thread at a time).
#[derive(Debug)]
pub struct CompletionPort {
    handle: OwnedHandle,
}

impl CompletionPort {
    /// A new port, associated with no file.
    pub fn new() -> io::Result<CompletionPort> {
        // SAFETY: INVALID_HANDLE_VALUE + NULL existing port creates a new
        // port (concurrency 1: one thread reads it), owned by us alone.
        let handle = unsafe {
            owned(
                CreateIoCompletionPort(INVALID_HANDLE_VALUE, std::ptr::null_mut(), 0, 1),
                "CreateIoCompletionPort",
            )
        }?;
        Ok(CompletionPort { handle })
    }

    /// The raw port handle, for association with a job.
    pub fn raw(&self) -> windows_sys::Win32::Foundation::HANDLE {
        self.handle.as_raw_handle()
    }

    /// Waits up to `timeout` (`None`: forever) for one packet; `Ok(None)` on
    /// timeout.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<Option<Packet>> {
        let millis = match timeout {
            None => INFINITE,
            // Round up so a 0.5 ms timeout does not become a busy poll, and
            // stay below INFINITE.
            Some(t) => t.as_micros().div_ceil(1000).min(u128::from(INFINITE - 1)) as u32,
        };
        let mut code = 0u32;
        let mut key = 0usize;
        let mut overlapped: *mut OVERLAPPED = std::ptr::null_mut();
        // SAFETY: valid port handle and out pointers. Job packets carry a pid
        // in the overlapped field, never a pointer we dereference.
        let ok = unsafe {
            GetQueuedCompletionStatus(self.raw(), &mut code, &mut key, &mut overlapped, millis)
        };
        // FALSE with a non-NULL overlapped is a failed I/O completion: not a
        // job packet; it is reported as is.
        if ok == 0 && overlapped.is_null() {
            let err = WinError::last("GetQueuedCompletionStatus");
            if super::win_error::code_of(&err) == Some(WAIT_TIMEOUT) {
                return Ok(None);
            }
            return Err(err);
        }
        Ok(Some(Packet {
            key,
            code,
            value: overlapped as usize,
        }))
    }

    /// Posts a packet of our own (to wake the reader: a new tree to watch, a
    /// kill request, a main process that exited). Use codes outside the
    /// `JOB_OBJECT_MSG_*` range (1–13) so they never read as job messages.
    pub fn post(&self, packet: Packet) -> io::Result<()> {
        // SAFETY: valid port; the "overlapped" value is never dereferenced
        // by the reader (it is a plain number, see `wait`).
        let ok = unsafe {
            PostQueuedCompletionStatus(
                self.raw(),
                packet.code,
                packet.key,
                packet.value as *mut OVERLAPPED,
            )
        };
        if ok == 0 {
            return Err(WinError::last("PostQueuedCompletionStatus"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posted_packets_round_trip_and_timeouts_are_none() {
        let port = CompletionPort::new().unwrap();
        assert_eq!(port.wait(Some(Duration::from_millis(1))).unwrap(), None);
        let packet = Packet {
            key: 7,
            code: 0x1000,
            value: 42,
        };
        port.post(packet).unwrap();
        let got = port.wait(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(got, Some(packet));
        assert_eq!(packet.job_message(), None);
        let zero = Packet {
            key: 7,
            code: JOB_OBJECT_MSG_ACTIVE_PROCESS_ZERO,
            value: 0,
        };
        assert_eq!(zero.job_message(), Some(JobMessage::ActiveProcessZero));
    }
}
