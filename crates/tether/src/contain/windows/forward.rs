//! Forwarding console control events to the one command a program runs:
//! `tether run`'s Ctrl-C behaviour on Windows.
//!
//! Ctrl-C and Ctrl-Break reach this process from its console. The command
//! does not see them itself: it leads a console process group of its own
//! (`CREATE_NEW_PROCESS_GROUP`, which also makes it ignore Ctrl-C). So the
//! handler starts the tree's kill ladder — `CTRL_BREAK_EVENT` to the
//! command's group, `TerminateJobObject` after the grace unless it ended by
//! itself — and returns "handled", so this process lives to report.
//!
//! Console close, logoff and shutdown end this process a few seconds after
//! the handler returns whatever it does; the kill starts at once (no grace)
//! and, if this process is gone first, closing its job handle kills the tree.

use std::io;
use std::sync::Mutex;
use std::time::Duration;

use windows_sys::Win32::System::Console::{
    CTRL_BREAK_EVENT, CTRL_C_EVENT, CTRL_CLOSE_EVENT, SetConsoleCtrlHandler,
};
use windows_sys::core::BOOL;

use super::tree::TreeHandle;
use super::win_error::WinError;

/// What the handler forwards to, and an event that came before there was a
/// target (`Some(grace)` to apply on arrival).
struct Target {
    tree: Option<(TreeHandle, Duration)>,
    early: Option<Duration>,
}

static TARGET: Mutex<Target> = Mutex::new(Target {
    tree: None,
    early: None,
});

/// Console control events taken over for this process.
#[derive(Debug)]
pub(crate) struct Forwarder;

impl Forwarder {
    /// Nothing to do: no keeper passes signals on (Unix keepers only).
    pub(crate) fn absorb_parent_signals() -> io::Result<()> {
        Ok(())
    }

    /// Installs the console control handler.
    pub(crate) fn install() -> io::Result<Forwarder> {
        // SAFETY: `handler` is a valid `extern "system"` routine for the
        // whole life of the process.
        if unsafe { SetConsoleCtrlHandler(Some(handler), 1) } == 0 {
            return Err(WinError::last("SetConsoleCtrlHandler"));
        }
        Ok(Forwarder)
    }

    /// Forwards every event from now on to `tree` (and one that came
    /// before, at once).
    pub(crate) fn forward_to(self, tree: TreeHandle, grace: Duration) -> io::Result<()> {
        let mut target = TARGET.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(early) = target.early.take() {
            let _ = tree.start_kill(early.min(grace));
        }
        target.tree = Some((tree, grace));
        Ok(())
    }
}

unsafe extern "system" fn handler(event: u32) -> BOOL {
    let grace_for = |grace: Duration| match event {
        CTRL_C_EVENT | CTRL_BREAK_EVENT => grace,
        _ => Duration::ZERO,
    };
    let mut target = TARGET.lock().unwrap_or_else(|e| e.into_inner());
    match &target.tree {
        Some((tree, grace)) => {
            let _ = tree.start_kill(grace_for(*grace));
        }
        None => target.early = Some(grace_for(Duration::MAX)),
    }
    // Handled: Ctrl-C / Ctrl-Break do not end this process. For close the
    // system ends it anyway once the handler returns.
    if event == CTRL_CLOSE_EVENT { 0 } else { 1 }
}
