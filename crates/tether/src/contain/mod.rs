//! How a process tree is held. Everything platform-specific lives below this
//! module; the rest of the crate calls the functions re-exported here, whose
//! signatures are the same on every platform.
//!
//! On Linux a *keeper* process sits between the owner and each command (see
//! [`keeper`] for its theory of operation); [`link`] is the owner's end of
//! it; [`protocol`] is what they say to each other.

mod channel;
mod exec;
pub mod keeper;
pub(crate) mod link;
mod linux;
pub(crate) mod protocol;
pub(crate) mod reactor;

pub use linux::{
    PinnedProcess, Stat, all_pids, children_of, command_line, read_stat, signal_if_identity,
    spawn_tag_of,
};
pub(crate) use linux::{
    boot_id, current_uid, identity_alive, identity_of, kill_tagged, set_child_subreaper,
};
