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
mod subtree;
mod systemd;

pub(crate) use hierarchy::{Hierarchies, writable};
pub(crate) use leaf::SessionCgroups;
pub(crate) use route::{delegation_hint, passed_over, plan, session_v2_base, short, systemd_scope};

use std::path::Path;

/// Removes the session's leaves after its keeper was lost (the orphans
/// were killed first), each with the cgroups below it (`subtree.rs`):
/// whatever is still in them is the session's and is killed first.
pub(crate) fn remove_leftover_leaves(dirs: &[std::path::PathBuf]) {
    for dir in dirs {
        let _ = subtree::remove_path(dir);
    }
}

/// Removes `dir`, a session's leftover cgroup, if it is provably one of
/// tether's session leaves: an absolute path without `.` or `..` whose
/// last component is `tether-<session>`, every component a directory
/// opened without following a symlink (a symlinked parent is refused, not
/// followed), the leaf itself on a cgroup filesystem. The cgroups a
/// command made below it go first, deepest first, and whatever process is
/// still in them is killed by proven identity (`subtree.rs`): it is in the
/// session's cgroup, so it is the session's. `Ok(false)`: already gone.
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
    let name = format!("tether-{session}");
    if dir.file_name() != Some(std::ffi::OsStr::new(&name)) {
        return refuse("not named after the session (tether-<session>)");
    }
    let parent = dir
        .parent()
        .expect("an absolute path with a file name has a parent");
    let parent = match subtree::open_dir_nofollow(parent) {
        Ok(fd) => fd,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
            return refuse("a component of its path is a symlink or not a directory");
        }
        Err(e) => return Err(e),
    };
    let leaf = match subtree::open_dir_nofollow(dir) {
        Ok(fd) => fd,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
            return refuse("not a directory");
        }
        Err(e) => return Err(e),
    };
    if !is_cgroup_fd(&leaf) {
        return refuse("not on a cgroup filesystem");
    }
    drop(leaf);
    match subtree::remove(&parent, std::ffi::OsStr::new(&name)) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether the open directory `fd` is on a cgroup or cgroup2 filesystem.
fn is_cgroup_fd(fd: &std::os::fd::OwnedFd) -> bool {
    match nix::sys::statfs::fstatfs(fd) {
        Ok(fs) => {
            let kind = fs.filesystem_type();
            kind == nix::sys::statfs::CGROUP2_SUPER_MAGIC
                || kind == nix::sys::statfs::CGROUP_SUPER_MAGIC
        }
        Err(_) => false,
    }
}
