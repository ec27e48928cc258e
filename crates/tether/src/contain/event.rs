//! What a contained tree reports to its owner.

use crate::error::Survivor;
use crate::exit::ResourceUsage;
use crate::limits::{LimitEscape, LimitHit};

/// How the main process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Termination {
    /// It exited with this code.
    Code(i32),
    /// A Unix signal killed it (never on Windows).
    #[cfg_attr(windows, allow(dead_code))]
    Signal(i32),
}

/// One thing that happened to a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TreeEvent {
    /// The main process ended.
    MainExited {
        termination: Termination,
        timed_out: bool,
        /// A limit the session had run into by then.
        limit_hit: Option<LimitHit>,
        /// Processes OOM-killed by then for memory the session's own limit
        /// did not run out of.
        oom_outside: u32,
        /// What the processes reaped by then used (`None`: not measured
        /// on this platform).
        usage: Option<ResourceUsage>,
    },
    /// Nothing of the session is left; `killed` descendants were killed
    /// (the main process's own exit not counted); `limit_hit`: a limit the
    /// session ran into, over its whole life.
    Settled {
        killed: u32,
        limit_hit: Option<LimitHit>,
        /// As in `MainExited`, over its whole life.
        oom_outside: u32,
        /// Processes found outside the session's cgroups (out of its
        /// limits), and where.
        escaped: Vec<LimitEscape>,
        /// What the whole tree used.
        usage: Option<ResourceUsage>,
    },
    /// A kill gave up on these survivors; the tree stays killable.
    KillFailed { survivors: Vec<Survivor> },
}

/// A live process of a tree other than its main process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descendant {
    /// Its pid.
    pub pid: u32,
    /// Its command line (empty if unreadable).
    pub command: String,
}
