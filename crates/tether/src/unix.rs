//! Unix-only abilities: signals.

use crate::child::{Child, ChildHandle};
use crate::contain::protocol::{Request, Scope};
use crate::error::Result;

/// Signals for a [`Child`] or [`ChildHandle`].
pub trait ChildExt {
    /// Sends `signal` to every process of the tree (SIGCONT follows any
    /// signal but SIGKILL, so stopped processes act on it).
    fn signal(&self, signal: i32) -> Result<()>;

    /// Sends `signal` to the main process's process group only — what a
    /// terminal's Ctrl-C would reach.
    fn signal_group(&self, signal: i32) -> Result<()>;

    /// Forwards `signal` to the process group, then kills the whole tree
    /// after the grace unless it ended by itself: how `tether run` passes
    /// on SIGINT, SIGTERM and SIGHUP.
    fn interrupt(&self, signal: i32) -> Result<()>;
}

impl ChildExt for ChildHandle {
    fn signal(&self, signal: i32) -> Result<()> {
        self.send(&Request::Signal {
            signal,
            scope: Scope::Tree,
        })
    }

    fn signal_group(&self, signal: i32) -> Result<()> {
        self.send(&Request::Signal {
            signal,
            scope: Scope::Group,
        })
    }

    fn interrupt(&self, signal: i32) -> Result<()> {
        let grace_ms = self.grace().as_millis() as u64;
        self.send(&Request::Kill {
            signal,
            scope: Scope::Group,
            grace_ms,
        })
    }
}

impl ChildExt for Child {
    fn signal(&self, signal: i32) -> Result<()> {
        self.handle().signal(signal)
    }

    fn signal_group(&self, signal: i32) -> Result<()> {
        self.handle().signal_group(signal)
    }

    fn interrupt(&self, signal: i32) -> Result<()> {
        self.handle().interrupt(signal)
    }
}
