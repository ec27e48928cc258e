//! Forwarding the termination signals the owner receives to its one
//! foreground command (what `tether run` does), and the signals a command
//! meant for its parent, which its keeper passes on to the owner.

use std::io;

use nix::sys::signal::{SigSet, Signal};

use super::tree::TreeHandle;

/// The signals forwarded: what a terminal, a supervisor or `kill` sends to
/// ask a program to stop.
const FORWARDED: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// The forwarded signals, blocked in this process so that only the
/// forwarding thread's `sigwait` sees them.
#[derive(Debug)]
pub(crate) struct Forwarder(SigSet);

impl Forwarder {
    /// Blocks the forwarded signals in the calling thread — and, since
    /// threads inherit their creator's mask, in every thread started after
    /// this, which is why it must come before any.
    pub(crate) fn install() -> io::Result<Forwarder> {
        let mut set = SigSet::empty();
        for sig in FORWARDED {
            set.add(sig);
        }
        set.thread_block()?;
        Ok(Forwarder(set))
    }

    /// Forwards each signal from now on — `SIGINT` to the command's
    /// process group, as a terminal's Ctrl-C reaches it; `SIGTERM` and
    /// `SIGHUP` to every process of the tree at once — then the whole tree
    /// is killed after `grace` unless it ended by itself.
    pub(crate) fn forward_to(self, tree: TreeHandle, grace: std::time::Duration) -> io::Result<()> {
        std::thread::Builder::new()
            .name("tether-signals".into())
            .spawn(move || {
                while let Ok(sig) = self.0.wait() {
                    let _ = tree.interrupt(sig as i32, grace);
                }
            })?;
        Ok(())
    }
}

/// The signals a keeper passes on to its owner when a process of its tree
/// sends them to it (`kill -USR1 $PPID`: CPython's `test_communicate_eintr`,
/// Xvfb's "ready"): the ones programs use to tell their parent something.
/// Not these: `SIGTERM` (the keeper ends the session: the command asked
/// its parent to end, and the owner — an agent, an MCP server — hosts
/// more than this command), `SIGINT`/`SIGHUP`/`SIGQUIT` (ignored: the
/// owner's to forward), `SIGCHLD` and the job-control signals (they would
/// stop or resume the owner under the command's feet), and the faults
/// (`SIGSEGV`, `SIGBUS`, `SIGFPE`, `SIGILL`, `SIGTRAP`, `SIGABRT`,
/// `SIGSYS`), which say something about the process that gets them.
pub(crate) fn meant_for_parent(signal: i32) -> bool {
    #[cfg(target_os = "linux")]
    if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&signal)
        || signal == libc::SIGPWR
        || signal == libc::SIGSTKFLT
    {
        return true;
    }
    matches!(
        signal,
        libc::SIGUSR1
            | libc::SIGUSR2
            | libc::SIGALRM
            | libc::SIGVTALRM
            | libc::SIGPROF
            | libc::SIGIO
            | libc::SIGXCPU
            | libc::SIGXFSZ
            | libc::SIGPIPE
            | libc::SIGWINCH
            | libc::SIGURG
    )
}

/// The `si_value` a keeper's passed-on signal carries (with `si_code`
/// `SI_QUEUE` and the keeper's `si_pid`), so that an owner can tell it
/// from one sent to it directly.
pub(crate) const PASSED_ON: usize = 0x7465_7468;

/// Makes this process drop the signals its keepers pass on (see
/// [`meant_for_parent`]) that would otherwise end it — those whose
/// disposition is the default and whose default ends the process. Each
/// such signal gets a handler that drops it when it carries the keeper's
/// mark ([`PASSED_ON`]) and otherwise restores the default and takes the
/// signal again, which then ends the process as before: a `SIGUSR1`
/// from anyone else still does what it always did. Signals with a
/// handler or ignored are left alone (the keeper's pass-on then runs the
/// handler). Linux only: elsewhere no keeper passes signals on.
///
/// For `tether run` and `tether mcp`: a command that signals "its parent"
/// asked nothing of them, and one `kill -USR1 $PPID` would otherwise end
/// the run, or the server with every session it holds.
pub(crate) fn absorb_parent_signals() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    for signal in 1..=libc::SIGRTMAX() {
        if !meant_for_parent(signal) || matches!(signal, libc::SIGWINCH | libc::SIGURG) {
            continue;
        }
        // SAFETY: sigaction reads into `old`, which we own, and installs
        // `absorb`, which only calls async-signal-safe functions.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                return Err(io::Error::last_os_error());
            }
            if old.sa_sigaction != libc::SIG_DFL {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = absorb as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

impl Forwarder {
    /// See [`absorb_parent_signals`].
    pub(crate) fn absorb_parent_signals() -> io::Result<()> {
        absorb_parent_signals()
    }
}

/// The handler [`absorb_parent_signals`] installs.
#[cfg(target_os = "linux")]
extern "C" fn absorb(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler;
    // si_value is valid for SI_QUEUE. sigaction and raise are
    // async-signal-safe; the raised signal stays pending (blocked while
    // this handler runs) and, its disposition the default again, ends the
    // process as it would have without this handler.
    unsafe {
        let info = &*info;
        if info.si_code == libc::SI_QUEUE && info.si_value().sival_ptr as usize == PASSED_ON {
            return;
        }
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(signal, &default, std::ptr::null_mut());
        libc::raise(signal);
    }
}
