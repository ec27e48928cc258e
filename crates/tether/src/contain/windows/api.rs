//! Windows-only abilities: putting the *current* process into a
//! kill-on-close job, for long-lived programs tether does not launch.
//!
//! ```
//! # #[cfg(windows)] fn main() -> std::io::Result<()> {
//! // First thing in main, before any child is started:
//! let attached = tether::windows::attach_current_process(None, tether::windows::Breakaway::Refused)?;
//! // From now on every process this program starts dies when it does,
//! // however it ends.
//! # let _ = attached; Ok(()) }
//! # #[cfg(not(windows))] fn main() {}
//! ```

use std::io;
use std::os::windows::io::OwnedHandle;

/// Whether children of a self-attached process may leave its job.
///
/// There is no "silent" breakaway: with it every child would leave without
/// asking, which is what tether exists to prevent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Breakaway {
    /// No child can leave (the default): `CREATE_BREAKAWAY_FROM_JOB` fails
    /// with `ERROR_ACCESS_DENIED`.
    #[default]
    Refused,
    /// A child created with `CREATE_BREAKAWAY_FROM_JOB` starts outside the
    /// job and survives this process (an updater that must replace it).
    /// It leaves every job it is in, so every enclosing job (a launcher's,
    /// a CI runner's) must allow breakaway too, or its creation fails.
    OnRequest,
}

/// What [`attach_current_process`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attached {
    /// This process was already in a job (a CI runner's, a terminal's, the
    /// launcher's) before the call.
    pub was_in_job: bool,
    /// It joined the launcher's job.
    pub joined_launcher_job: bool,
    /// Whether its children may break away from its own job.
    pub breakaway: Breakaway,
}

/// Puts the current process into a kill-on-close job of its own, nested in
/// whatever job it is in, whose only handle it keeps until it ends: when it
/// ends by any cause, the kernel kills every process it started. Call it
/// first in `main`: children started before the call stay outside.
///
/// `launcher_job` is a handle to a kill-on-close job held by the program
/// that launched this one (inherited, or duplicated into this process): this
/// process joins it too and closes its own copy, so the launcher's handle
/// alone keeps that job — when the launcher dies, this process and its
/// whole tree die with it.
///
/// # Errors
/// The Windows error of a job that could not be created or joined (nothing
/// is half done silently: if joining the launcher's job failed, no own job
/// was made); `AlreadyExists` on a second call.
pub fn attach_current_process(
    launcher_job: Option<OwnedHandle>,
    breakaway: Breakaway,
) -> io::Result<Attached> {
    use crate::contain::os::Breakaway as Inner;
    let inner = match breakaway {
        Breakaway::Refused => Inner::Refused,
        Breakaway::OnRequest => Inner::OnRequest,
    };
    let done = crate::contain::os::self_attach::attach_current_process(launcher_job, inner)?;
    Ok(Attached {
        was_in_job: done.was_in_job,
        joined_launcher_job: done.joined_launcher_job,
        breakaway,
    })
}

/// Wine's version when running under Wine (`wine_get_version` in ntdll),
/// `None` on Windows: for tests and reports that must name a Wine gap.
pub fn wine_version() -> Option<String> {
    crate::contain::os::wine::version()
}

/// The identity of an open file, `(volume serial number, file index)`: what
/// `(st_dev, st_ino)` is on Unix. Two opens of one file give the same pair;
/// a file replaced at the same path gives another.
///
/// # Errors
/// What `GetFileInformationByHandle` says (a handle without
/// `FILE_READ_ATTRIBUTES`, say).
pub fn file_id(file: &std::fs::File) -> io::Result<(u64, u64)> {
    crate::contain::os::file_id::of(file)
}
