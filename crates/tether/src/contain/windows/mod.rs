//! Windows: no keeper — the kernel's job object is the containment.
//!
//! # How it works
//!
//! Each session gets an anonymous job with `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`
//! and no breakaway, whose only handle the owner holds (not inheritable).
//! The command is created *inside* it by our own `CreateProcessW`
//! (`PROC_THREAD_ATTRIBUTE_JOB_LIST`, or suspended → assigned → resumed),
//! so every process it ever starts is a member from its first instruction
//! ([`spawn`](self::spawn) has the details). When the owner ends — exit,
//! crash, `TerminateProcess`, `kill -9` of its Wine process — the kernel
//! closes the handle and kills the whole tree: no destructor, no watchdog.
//!
//! A job monitor thread ([`monitor`]) does what the keeper does on Unix:
//! reports the main process's exit, runs the timeout, kills leftovers, and
//! climbs the kill ladder — `CTRL_BREAK_EVENT` to the command's console
//! process group, then `TerminateJobObject` after the grace, verified by the
//! job's accounting (no active process left). Processes are named by
//! `(pid, creation time)` and acted on through held handles; every process
//! carries the spawn tag in its environment, which `tether::sys` reads from
//! other processes' PEBs ([`peb`]).
//!
//! Failing to make or join the job is an error carrying the Windows error
//! code; a command runs uncontained only when the caller asked for
//! `ContainmentPolicy::Uncontained`, and is then reported as `none`.

mod async_pipe;
mod attribute_list;
mod completion_port;
mod conpty;
mod console;
mod ctrl_event;
pub(crate) mod doctor;
pub(crate) mod environment;
pub(crate) mod file_id;
mod forward;
mod handle;
pub(crate) mod holding;
pub(crate) mod init;
mod job;
mod launch;
pub mod local_socket;
mod monitor;
mod peb;
mod pipe;
mod process;
mod pty;
mod quote;
pub(crate) mod self_attach;
mod spawn;
pub(crate) mod spill;
mod stdio;
pub(crate) mod sys;
mod tree;
mod user;
pub(crate) mod watchdog;
mod wide;
mod win_error;
pub(crate) mod wine;

pub(crate) use async_pipe::{AsyncReader, AsyncWriter};
pub(crate) use console::{Console, WinchWatcher};
pub(crate) use forward::Forwarder;
pub(crate) use job::Breakaway;
pub(crate) use launch::spawn;
pub(crate) use pty::Doorbell;
pub(crate) use pty::Pty;
pub(crate) use stdio::{EventSource, OwnedIo, PipeEnd, output_pipe, read_both};
pub(crate) use tree::{Tree, TreeHandle, TreeWatcher};

/// The `win_tree` helper (`examples/win_tree.rs`) for the unit tests of
/// this backend: build it first (`cargo build --example win_tree`).
#[cfg(test)]
pub(crate) fn win_tree() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join(r"examples\win_tree.exe");
    assert!(
        path.is_file(),
        "{} is missing: `cargo build --example win_tree`",
        path.display()
    );
    path
}

/// The owner's pid and start time (creation time since the Unix epoch, in
/// 100 ns units), read once.
pub(crate) fn owner_identity() -> (u32, u64) {
    static OWNER: std::sync::OnceLock<(u32, u64)> = std::sync::OnceLock::new();
    *OWNER.get_or_init(|| {
        let pid = std::process::id();
        let start = crate::contain::sys::process(pid).map_or(0, |p| p.start_time);
        (pid, start)
    })
}

/// A C runtime descriptor of this process (what Python's `fileno()`
/// returns) as a child's stdio: its handle, duplicated now.
pub(crate) fn duplicate_descriptor(fd: i32) -> std::io::Result<OwnedIo> {
    // SAFETY: `_get_osfhandle` validates `fd` and returns -1 for a bad one.
    let raw = unsafe { libc::get_osfhandle(fd) };
    if raw == -1 || raw == -2 {
        return Err(std::io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: borrowed only for the duplication; the CRT keeps it open.
    let handle = unsafe { std::os::windows::io::BorrowedHandle::borrow_raw(raw as _) };
    handle.try_clone_to_owned()
}

/// No keeper program on Windows: nothing to set.
pub(crate) fn set_keeper_program(_program: Option<std::path::PathBuf>) {}

/// No subreapers on Windows (a job holds the tree instead): nothing to do.
pub(crate) fn become_subreaper() -> std::io::Result<()> {
    Ok(())
}

/// No keepers on Windows: nothing to keep warm.
pub(crate) fn set_warm_keepers(_n: usize) {}

/// No keepers on Windows: nothing to start ahead.
pub(crate) fn start_keeper_ahead(
    _install: &crate::install::Install,
    _session: &crate::session_id::SessionId,
) -> crate::error::Result<()> {
    Ok(())
}

/// There is no keeper program on Windows.
pub mod keeper_entry {
    /// The argument that makes a program act as its keeper (unused here).
    pub const KEEPER_ARG: &str = "__tether-keeper";

    /// There is no keeper on Windows: exits with status 125.
    pub fn main() -> ! {
        eprintln!("tether: there is no keeper on Windows");
        std::process::exit(125)
    }

    /// Does nothing on Windows (no keeper).
    pub fn run_if_requested() {}
}

/// Program search, the Windows way (`PATHEXT`).
pub(crate) mod resolve {
    use std::ffi::OsStr;
    use std::path::{Path, PathBuf};

    /// Search path used when the command's environment has none.
    pub(crate) const DEFAULT_PATH: &str = r"C:\Windows\system32;C:\Windows";

    pub(crate) fn is_path(program: &OsStr) -> bool {
        let s = program.to_string_lossy();
        s.contains('/') || s.contains('\\') || s.contains(':')
    }

    pub(crate) fn is_path_var(key: &OsStr) -> bool {
        key.eq_ignore_ascii_case("PATH")
    }

    fn extensions() -> Vec<String> {
        std::env::var("PATHEXT")
            .unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into())
            .split(';')
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect()
    }

    pub(crate) fn path_candidates(path: &Path) -> Vec<PathBuf> {
        let mut out = vec![path.to_owned()];
        if path.extension().is_none() {
            out.extend(extensions().iter().map(|e| {
                let mut p = path.as_os_str().to_owned();
                p.push(e);
                PathBuf::from(p)
            }));
        }
        out
    }

    pub(crate) fn candidates(dir: &Path, program: &OsStr) -> Vec<PathBuf> {
        path_candidates(&dir.join(program))
    }

    pub(crate) fn executable(path: &Path) -> std::result::Result<(), Option<String>> {
        let meta = std::fs::metadata(path).map_err(|_| None)?;
        if meta.is_dir() {
            return Err(Some("is a directory".into()));
        }
        Ok(())
    }
}

/// The state directory Windows users expect: `%LOCALAPPDATA%\tether`.
pub(crate) fn platform_state_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("LOCALAPPDATA")
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_absolute())
        .map(|p| p.join("tether"))
}

/// Random bytes from the system for session ids: none here (`false`; the
/// caller then mixes its own, as it always has on Windows).
pub(crate) fn random_bytes(_buf: &mut [u8]) -> bool {
    false
}
