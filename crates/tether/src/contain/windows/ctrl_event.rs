//! Console control events: the graceful step of a Windows kill.
//!
//! Windows has no SIGTERM. The nearest thing a console program understands
//! is `CTRL_BREAK_EVENT`, delivered to a *process group* — which is why
//! every session's main process is started with `CREATE_NEW_PROCESS_GROUP`
//! (its pid is the group id, and a group of its own keeps the event from
//! reaching the owner). `CTRL_C_EVENT` cannot be aimed at a group (it goes
//! to every process on the console, and a new group ignores it).
//!
//! The event only reaches processes attached to the sender's console. An
//! owner with no console (a GUI agent, a service) cannot send it; neither
//! can anyone reach a GUI program this way. Then the ladder goes straight to
//! `TerminateJobObject` after the grace — the kill is still complete, only
//! not graceful.

use std::io;

use windows_sys::Win32::System::Console::{CTRL_BREAK_EVENT, GenerateConsoleCtrlEvent};

use super::win_error::WinError;

/// Sends `CTRL_BREAK_EVENT` to the console process group `group` (the pid of
/// a process started with `CREATE_NEW_PROCESS_GROUP`).
pub fn send_ctrl_break(group: u32) -> io::Result<()> {
    // SAFETY: plain call; an unknown group is reported as an error.
    if unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, group) } == 0 {
        return Err(WinError::last("GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT)"));
    }
    Ok(())
}
