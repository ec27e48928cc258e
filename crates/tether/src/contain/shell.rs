//! The shell that runs a registry session's script (`RunSpec::shell`,
//! `tether mcp`'s `command` string).
//!
//! Unix: `/bin/sh -c`. Windows: `cmd.exe /d /s /c` — the shell every
//! Windows machine has, and the one Python's `subprocess(shell=True)` and
//! Node's `child_process.exec` use (through `%ComSpec%`), so a script an
//! agent developer tested with those behaves the same here. PowerShell
//! starts ~10× slower and quotes differently; Git-for-Windows bash is not
//! installed everywhere. Callers wanting either pass an argv instead
//! (`["powershell", "-NoProfile", "-Command", script]`, `["bash", "-c",
//! script]`).

use std::ffi::OsString;

/// The program that runs scripts.
#[cfg(unix)]
pub(crate) const SHELL: &str = "/bin/sh";
/// The program that runs scripts.
#[cfg(windows)]
pub(crate) const SHELL: &str = "cmd.exe";

/// The argv that runs `script`.
#[cfg(unix)]
pub(crate) fn argv(script: &str) -> Vec<OsString> {
    vec![SHELL.into(), "-c".into(), script.into()]
}

/// The argv that runs `script`: `/d` skips the registry's AutoRun, `/s /c`
/// runs the rest verbatim (the Windows backend passes the script with
/// cmd's quoting, not the MSVCRT rules).
#[cfg(windows)]
pub(crate) fn argv(script: &str) -> Vec<OsString> {
    vec![
        SHELL.into(),
        "/d".into(),
        "/s".into(),
        "/c".into(),
        script.into(),
    ]
}
