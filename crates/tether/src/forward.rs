//! Passing on the signals a program receives to the one command it runs in
//! the foreground — `tether run`'s behaviour, for any program.

use crate::child::Child;
use crate::contain::Forwarder;

/// Forwards the termination signals this process receives — `SIGINT`,
/// `SIGTERM`, `SIGHUP` on Unix; Ctrl-C, Ctrl-Break and console close on
/// Windows — to one [`Child`], and kills the whole tree after the child's
/// grace unless it ended by itself. On Unix `SIGINT` goes to the main
/// process's group (a terminal's Ctrl-C reaches only its foreground job),
/// `SIGTERM` and `SIGHUP` to every process of the tree at once; on Windows
/// the main process's group gets `CTRL_BREAK`.
///
/// ```standalone_crate
/// # #[cfg(unix)]
/// # fn main() -> tether::Result<()> {
/// # tether::keeper::run_if_requested();
/// // First thing, before any thread starts:
/// let forwarder = tether::SignalForwarder::install()?;
/// let mut child = tether::Command::new("sh").args(["-c", "exit 0"]).spawn()?;
/// forwarder.forward_to(&child)?;
/// // A Ctrl-C now reaches `sh`'s group; the tree is killed after the grace.
/// let status = child.wait()?;
/// assert!(status.success());
/// # #[cfg(target_os = "linux")]
/// # tether_testkit::assert_nothing_left();
/// # Ok(())
/// # }
/// # #[cfg(not(unix))]
/// # fn main() {}
/// ```
#[derive(Debug)]
pub struct SignalForwarder(Forwarder);

impl SignalForwarder {
    /// Takes the signals over for this process. On Unix they are blocked
    /// here, so that only the forwarding thread sees them: call this before
    /// any other thread starts (threads inherit the mask of their creator).
    ///
    /// # Errors
    /// The OS refused to change the signal mask or handlers.
    pub fn install() -> std::io::Result<SignalForwarder> {
        Ok(SignalForwarder(Forwarder::install()?))
    }

    /// Forwards every signal from now on to `child` (from a thread of its
    /// own).
    ///
    /// # Errors
    /// The thread could not be started.
    pub fn forward_to(self, child: &Child) -> std::io::Result<()> {
        let handle = child.handle();
        self.0.forward_to(handle.tree, handle.grace)
    }
}

/// Makes this process survive the signals its commands meant for their
/// parent.
///
/// A command that signals its parent (`kill -USR1 $PPID`) reaches its
/// keeper, which passes the signal on to the owner — the process that
/// asked for the command, its parent under `subprocess` or a shell — so
/// that the owner's own disposition applies: a handler runs. Where there
/// is none and the signal's default would end the process (`SIGUSR1`,
/// `SIGUSR2`, `SIGALRM`, the real-time signals, …), the owner would die of
/// it, as a `subprocess` parent would. Call this (once, early) in a
/// program that hosts commands and must not: it drops such a signal when
/// a keeper passed it on, and lets every other sender's signal act as
/// before. `tether run` and `tether mcp` call it. Signals with a handler
/// already, or ignored, are left alone; a handler installed after this
/// call replaces it.
///
/// Linux; a no-op elsewhere (the macOS keeper cannot tell who sent it a
/// signal, so it passes none on).
///
/// # Errors
/// The OS refused to read or change a signal's disposition.
pub fn absorb_parent_signals() -> std::io::Result<()> {
    Forwarder::absorb_parent_signals()
}
