//! Forwarding the termination signals the owner receives to its one
//! foreground command (what `tether run` does).

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

    /// Forwards each signal from now on: to the command's process group,
    /// then the whole tree is killed after `grace` unless it ended by
    /// itself.
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
