//! Unix (Linux and macOS): a keeper process holds each tree. This module
//! is both sides of it — the owner's client (`spawn`, `Tree`, the warm
//! pool) and the keeper program (`keeper/`) — over the platform's
//! primitives in `contain::os`.

mod channel;
mod console;
mod discovery;
pub(crate) mod doctor;
mod foreground;
mod forward;
pub(crate) mod init;
pub(crate) mod keeper;
pub mod keeper_entry;
mod link;
mod orphans;
mod pool;
pub(crate) mod protocol;
mod pty;
mod spawn;
pub(crate) mod spill;
mod stdio;
mod tree;
mod watcher;

pub(crate) use console::{Console, WinchWatcher};
pub(crate) use forward::Forwarder;
pub(crate) use orphans::become_subreaper;
pub(crate) use pool::set_warm_keepers;
pub(crate) use pty::Pty;
pub(crate) use spawn::{resolve, spawn};
pub(crate) use stdio::{OwnedIo, PipeEnd, output_pipe, read_both};
pub(crate) use tree::{Tree, TreeHandle};
pub(crate) use watcher::{AsyncReader, AsyncWriter, TreeWatcher};

/// The owner's pid and start time, read once (the owner never forks).
pub(crate) fn owner_identity() -> (u32, u64) {
    static OWNER: std::sync::OnceLock<(u32, u64)> = std::sync::OnceLock::new();
    *OWNER.get_or_init(|| {
        let pid = std::process::id();
        let start = crate::contain::sys::process(pid).map_or(0, |p| p.start_time);
        (pid, start)
    })
}

/// No per-platform state directory on Unix: `$XDG_STATE_HOME/tether`, else
/// `~/.local/state/tether` (see [`Install`](crate::install::Install)).
pub(crate) fn platform_state_dir() -> Option<std::path::PathBuf> {
    None
}

#[cfg(test)]
mod tests {
    // Unix spellings of an install's state directory (Windows canonical
    // paths are `\\?\C:\…`, so this lives with the Unix backend).
    #[test]
    fn a_path_that_does_not_exist_is_normalized_lexically() {
        let base = "/nonexistent-tether-test";
        for spelling in [
            "/nonexistent-tether-test/x/",
            "/nonexistent-tether-test/./x",
            "/nonexistent-tether-test//x",
            "/nonexistent-tether-test/y/../x",
        ] {
            assert_eq!(
                crate::install::Install::at(spelling).state_dir(),
                std::path::Path::new(&format!("{base}/x")),
                "{spelling}"
            );
        }
    }
}
