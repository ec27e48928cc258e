//! Unix (Linux and macOS): a keeper process holds each tree. This module
//! is both sides of it — the owner's client (`spawn`, `Tree`, the warm
//! pool) and the keeper program (`keeper/`) — over the platform's
//! primitives in `contain::os`.

mod channel;
mod console;
mod discovery;
pub(crate) mod doctor;
mod doorbell;
pub(crate) mod environment;
mod foreground;
mod fork;
mod forward;
pub(crate) mod inheritance;
pub(crate) mod init;
pub(crate) mod keeper;
pub mod keeper_entry;
mod link;
pub mod local_socket;
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
pub(crate) use discovery::set_keeper_program;
pub(crate) use doorbell::Doorbell;
pub(crate) use forward::Forwarder;
pub(crate) use link::attended;
pub(crate) use orphans::{become_subreaper, spare_holder};
pub(crate) use pool::set_warm_keepers;
pub(crate) use pty::Pty;
pub(crate) use spawn::{resolve, spawn, start_keeper_ahead};
pub(crate) use stdio::{EventSource, OwnedIo, PipeEnd, output_pipe, read_both};
pub(crate) use tree::{Tree, TreeHandle};
pub(crate) use watcher::{AsyncReader, AsyncWriter, TreeWatcher};

/// The owner's pid and start time, read once per process: a child forked
/// without `exec` is an owner of its own (its commands are tagged with it,
/// and die with it; see `fork.rs`).
pub(crate) fn owner_identity() -> (u32, u64) {
    static OWNER: fork::PerProcess<(u32, u64)> = fork::PerProcess::new();
    *OWNER.get(|| {
        let pid = std::process::id();
        let start = crate::contain::sys::process(pid).map_or(0, |p| p.start_time);
        (pid, start)
    })
}

/// A descriptor of this process as a child's stdio: duplicated now, so
/// the caller keeps (and may close) its own.
pub(crate) fn duplicate_descriptor(fd: i32) -> std::io::Result<OwnedIo> {
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: borrowed only for the duplication; `fcntl` fails with EBADF
    // if `fd` is not open, before anything else touches it.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    nix::fcntl::fcntl(borrowed, nix::fcntl::FcntlArg::F_GETFD)?;
    borrowed.try_clone_to_owned()
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
