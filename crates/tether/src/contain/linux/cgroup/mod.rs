//! cgroups for session limits (Linux): where ours are (`hierarchy.rs`),
//! where each limit of a session can be enforced (`route.rs`, in the
//! owner), and the session's own leaves (`leaf.rs`, in the keeper).
//!
//! # How it works
//!
//! The owner reads `/proc/self/mountinfo` and `/proc/self/cgroup`, and
//! routes each limit: to a cgroup v2 controller that its own cgroup gives
//! its children (enabled there if need be), else to the cgroup v1
//! hierarchy that has the controller (hybrid hosts), else nowhere — `none`
//! with the reason. The keeper makes `tether-<session>` below the owner's
//! cgroup in each hierarchy used (and in v2 whenever it can, for
//! `cgroup.kill`), writes the limits, opens each leaf's `cgroup.procs`,
//! and the command writes itself into them between fork and exec: it is
//! in its cgroups from its first instruction. At the kill, `cgroup.kill`
//! ends every process of the v2 leaf in one write (the per-process sweep
//! still follows for anything that left it). When the tree is empty the
//! keeper reads what was hit (`memory.events` / `memory.oom_control`
//! `oom_kill`, `pids.events` `max`) and removes the leaves. A keeper that
//! was itself killed leaves them to its owner, or to `tether reap`.
//!
//! `tether doctor` reports from the same code: the hierarchies as found
//! here, the reasons a route passed cgroup v2 over, the base of a
//! session's v2 leaf, and what a session with limits actually got.

mod hierarchy;
mod leaf;
mod route;

pub(crate) use hierarchy::{Hierarchies, writable};
pub(crate) use leaf::SessionCgroups;
pub(crate) use route::{delegation_hint, passed_over, plan, session_v2_base, short};

use std::path::Path;

/// Removes the session's leaves after its keeper was lost (the orphans
/// were killed first): each only if empty — `rmdir` of a cgroup that
/// still holds a process fails, and nothing is killed through it.
pub(crate) fn remove_leftover_leaves(dirs: &[std::path::PathBuf]) {
    for dir in dirs {
        let _ = std::fs::remove_dir(dir);
    }
}

/// Removes `dir`, a session's leftover cgroup, if it is provably one of
/// tether's session leaves: an absolute path without `.` or `..` whose
/// last component is `tether-<session>`, a directory on a cgroup
/// filesystem — and empty, which the kernel enforces (`rmdir` of a cgroup
/// that holds a process fails with `EBUSY`): nothing is ever killed
/// through it. `Ok(false)`: already gone.
pub(crate) fn remove_session_leaf(dir: &Path, session: &str) -> std::io::Result<bool> {
    use std::io::{Error, ErrorKind};
    use std::path::Component;
    let refuse = |why: &str| Err(Error::new(ErrorKind::InvalidInput, why.to_owned()));
    let valid_session = !session.is_empty()
        && session
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid_session {
        return refuse("not a session id");
    }
    if !dir.is_absolute()
        || dir
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return refuse("not a plain absolute path");
    }
    if dir.file_name() != Some(std::ffi::OsStr::new(&format!("tether-{session}"))) {
        return refuse("not named after the session (tether-<session>)");
    }
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
        Ok(meta) if !meta.is_dir() => return refuse("not a directory"),
        Ok(_) => {}
    }
    if !is_cgroup_dir(dir) {
        return refuse("not on a cgroup filesystem");
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether `dir` is a cgroup directory (on a cgroup or cgroup2
/// filesystem).
pub(crate) fn is_cgroup_dir(dir: &Path) -> bool {
    match nix::sys::statfs::statfs(dir) {
        Ok(fs) => {
            let kind = fs.filesystem_type();
            kind == nix::sys::statfs::CGROUP2_SUPER_MAGIC
                || kind == nix::sys::statfs::CGROUP_SUPER_MAGIC
        }
        Err(_) => false,
    }
}
