//! `tether doctor`'s probes shared by Linux and macOS: the kernel's name,
//! the keeper, and the open-file limit.

use std::ffi::CStr;

use crate::doctor::{Finding, Status, Topic};
use crate::{Containment, Error};

/// Descriptors one live session holds in its owner, measured on Linux with
/// `tether mcp` (issue 17): 50 sessions of `sleep` took the server from 11
/// open descriptors to 211 — 4 each (the output pipe's read end, and the
/// keeper's socket held by the session's reader, writer and watcher).
pub(crate) const FDS_PER_SESSION: u64 = 4;

/// `uname`'s system name, release and machine (`Linux`, `6.12.48`,
/// `x86_64`), or `None` if the call failed.
pub(crate) fn uname() -> Option<(String, String, String)> {
    // SAFETY: `utsname` is plain old data; all-zero is a valid value.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out pointer to a utsname the call fills.
    if unsafe { libc::uname(&mut name) } != 0 {
        return None;
    }
    let field = |chars: &[libc::c_char]| {
        // SAFETY: uname NUL-terminates every field inside its array.
        unsafe { CStr::from_ptr(chars.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    Some((
        field(&name.sysname),
        field(&name.release),
        field(&name.machine),
    ))
}

/// The keeper: where it was found and whether it held a session.
/// `standard` is the outcome of running `exit 0` under the standard
/// containment.
pub(crate) fn keeper(standard: &crate::Result<Containment>) -> Finding {
    let path = super::discovery::keeper_path();
    let is_self = match (&path, std::env::current_exe()) {
        (Ok(path), Ok(exe)) => std::fs::canonicalize(path).ok() == std::fs::canonicalize(exe).ok(),
        _ => false,
    };
    let place = match &path {
        Ok(path) if is_self => format!("{} (this program is its own keeper)", path.display()),
        Ok(path) => path.display().to_string(),
        Err(e) => e.to_string(),
    };
    match standard {
        Ok(containment) => Finding::new(
            Topic::Keeper,
            Status::Available,
            format!("{place}; it ran a session held as {containment}"),
            "each session's tree is held by a keeper process of its own, which kills the tree the \
             moment its lifeline shows the owner gone, however the owner ended (G2)",
        ),
        Err(e @ Error::KeeperNotFound { .. }) => Finding::new(
            Topic::Keeper,
            Status::Unavailable,
            e.to_string(),
            "nothing can run: set TETHER_KEEPER to a tether or tether-keeper of this version, or \
             call tether::keeper::run_if_requested() first in main",
        ),
        Err(e) => Finding::new(
            Topic::Keeper,
            Status::Unavailable,
            format!("{place}; a session under it failed: {e}"),
            "tether cannot start commands here until this is fixed",
        ),
    }
}

/// The open-file limit and how many sessions it leaves room for.
pub(crate) fn open_files() -> Finding {
    use nix::sys::resource::{Resource, getrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) => {
            let limit = |n: u64| {
                if n == libc::RLIM_INFINITY {
                    "unlimited".to_owned()
                } else {
                    n.to_string()
                }
            };
            Finding::new(
                Topic::OpenFiles,
                Status::Info,
                format!("ulimit -n: soft {}, hard {}", limit(soft), limit(hard)),
                format!(
                    "each live session holds {FDS_PER_SESSION} descriptors in its owner, so \
                     about {} sessions fit under the soft limit (tether mcp allows 64 by \
                     default); tether does not raise the limit itself",
                    soft / FDS_PER_SESSION
                ),
            )
        }
        Err(e) => Finding::new(
            Topic::OpenFiles,
            Status::Info,
            format!("getrlimit(RLIMIT_NOFILE): {e}"),
            "the descriptor limit is unknown",
        ),
    }
}
