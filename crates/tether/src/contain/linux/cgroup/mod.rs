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
//! with the reason. The keeper makes a leaf named after the session and
//! its owner (`tether-<session>.<install>.<owner pid>.<owner start>`, see
//! [`LeafName`]) below the owner's cgroup in each hierarchy used (and in v2 whenever it can, for
//! `cgroup.kill`), writes the limits, opens each leaf's `cgroup.procs`,
//! and the command writes itself into them between fork and exec: it is
//! in its cgroups from its first instruction. At the kill, `cgroup.kill`
//! ends every process of the v2 leaf in one write (the per-process sweep
//! still follows for anything that left it). When the tree is empty the
//! keeper reads what was hit (`memory.events` / `memory.oom_control`
//! `oom_kill`, `pids.events` `max`) and removes the leaves. A keeper that
//! was itself killed leaves them to its owner, or to `tether reap` —
//! which finds them by name even when no record of the session was ever
//! written (`leftovers.rs`).
//!
//! `tether doctor` reports from the same code: the hierarchies as found
//! here, the reasons a route passed cgroup v2 over, the base of a
//! session's v2 leaf, and what a session with limits actually got.

mod hierarchy;
mod leaf;
mod leftovers;
mod route;
mod subtree;
mod systemd;

pub(crate) use hierarchy::{Hierarchies, writable};
pub(crate) use leaf::SessionCgroups;
pub(crate) use leftovers::{remove_empty_leaf, session_leaves};
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

/// The name of a session's leaf: `tether-<session>.<install>.<owner
/// pid>.<owner start>.<pid namespace>`, from the session's spawn tag and
/// the keeper's (= the owner's) pid namespace inode. The owner's
/// identity is in the name so that a leaf whose session was never
/// recorded — owner, keeper and command killed together while it started
/// (150 such runs left 99–114 leaves that `tether reap` could not place:
/// issue 34 item 2) — can still be proven to be a dead owner's: the
/// reaper proves that no process with that pid and start time lives (a
/// start time shared by a new process with the same pid only ever keeps a
/// leaf, never removes a live owner's). The pid namespace says where that
/// pid can be read: a reaper in another one (a host reaping below a
/// container's cgroup) cannot prove anything from it. The install keeps one state
/// directory's `tether reap` off another's leaves. `.` is in neither a
/// session id nor an install id, so the name parses back unambiguously.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeafName {
    pub session: String,
    pub install: String,
    pub owner_pid: u32,
    pub owner_start: u64,
    /// The inode of the owner's pid namespace (0: unknown).
    pub pidns: u64,
}

impl LeafName {
    /// The leaf name for the session `tag` names.
    pub(crate) fn of(tag: &crate::spawn_tag::SpawnTag) -> LeafName {
        LeafName {
            session: tag.session.clone(),
            install: tag.install.clone(),
            owner_pid: tag.owner_pid,
            owner_start: tag.owner_start,
            pidns: own_pidns(),
        }
    }

    /// Reads a directory name back; `None` for anything that is not
    /// exactly such a name (every field validated as the tag's are).
    pub(crate) fn parse(name: &str) -> Option<LeafName> {
        let rest = name.strip_prefix("tether-")?;
        let mut parts = rest.split('.');
        let (session, install, pid, start, pidns) = (
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
        );
        if parts.next().is_some()
            || !valid_session(session)
            || install.len() != 16
            || !install
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            || !is_decimal(pid)
            || !is_decimal(start)
            || !is_decimal(pidns)
        {
            return None;
        }
        Some(LeafName {
            session: session.to_owned(),
            install: install.to_owned(),
            owner_pid: pid.parse().ok().filter(|&p| p > 0)?,
            owner_start: start.parse().ok()?,
            pidns: pidns.parse().ok()?,
        })
    }
}

impl std::fmt::Display for LeafName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tether-{}.{}.{}.{}.{}",
            self.session, self.install, self.owner_pid, self.owner_start, self.pidns
        )
    }
}

/// The inode of this process's pid namespace (`/proc/self/ns/pid`), 0 if
/// unreadable.
pub(crate) fn own_pidns() -> u64 {
    super::procfs::own_pid_namespace()
        .and_then(|link| {
            let text = link.to_str()?;
            text.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
        })
        .unwrap_or(0)
}

fn valid_session(session: &str) -> bool {
    (1..=64).contains(&session.len())
        && session
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn is_decimal(s: &str) -> bool {
    !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `name` is the leaf name of `session`: a [`LeafName`] of it, or
/// `tether-<session>`, the name before the owner's identity was in it
/// (ledger rows written by earlier builds name such leaves).
fn names_session(name: &std::ffi::OsStr, session: &str) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    name.strip_prefix("tether-") == Some(session)
        || LeafName::parse(name).is_some_and(|n| n.session == session)
}

/// Removes `dir`, a session's leftover cgroup, if it is provably one of
/// tether's session leaves: an absolute path without `.` or `..` whose
/// last component names the session (see [`names_session`]), every component a directory
/// opened without following a symlink (a symlinked parent is refused, not
/// followed), the leaf itself on a cgroup filesystem. The cgroups a
/// command made below it go first, deepest first, and whatever process is
/// still in them is killed by proven identity (`subtree.rs`): it is in the
/// session's cgroup, so it is the session's. `Ok(false)`: already gone.
pub(crate) fn remove_session_leaf(dir: &Path, session: &str) -> std::io::Result<bool> {
    use std::io::{Error, ErrorKind};
    use std::path::Component;
    let refuse = |why: &str| Err(Error::new(ErrorKind::InvalidInput, why.to_owned()));
    if !valid_session(session) {
        return refuse("not a session id");
    }
    if !dir.is_absolute()
        || dir
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return refuse("not a plain absolute path");
    }
    let Some(name) = dir.file_name().filter(|n| names_session(n, session)) else {
        return refuse("not named after the session (tether-<session>.…)");
    };
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
    match subtree::remove(&parent, name) {
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

#[cfg(test)]
mod tests {
    use super::LeafName;

    #[test]
    fn a_leaf_name_reads_back_and_nothing_else_parses() {
        let name = LeafName {
            session: "k3x9q2-a_b".into(),
            install: "0123456789abcdef".into(),
            owner_pid: 4242,
            owner_start: 987654,
            pidns: 4026531836,
        };
        let text = name.to_string();
        assert_eq!(
            text,
            "tether-k3x9q2-a_b.0123456789abcdef.4242.987654.4026531836"
        );
        assert_eq!(LeafName::parse(&text), Some(name));
        for bad in [
            "tether-owner",
            "tether-k3x9q2",
            "tether-k3x9q2.0123456789abcdef.4242.987654",
            "tether-k3x9q2.0123456789ABCDEF.4242.987654.1",
            "tether-k3x9q2.0123456789abcdef.0.987654.1",
            "tether-k3x9q2.0123456789abcdef.-1.987654.1",
            "tether-k3x9q2.0123456789abcdef.4242.987654.1.x",
            "tether-.0123456789abcdef.4242.987654.1",
            "other-k3x9q2.0123456789abcdef.4242.987654.1",
        ] {
            assert_eq!(LeafName::parse(bad), None, "{bad}");
        }
    }
}
