//! Session leaves nobody recorded: found by name in every cgroup
//! hierarchy mounted here, for `tether reap`.
//!
//! A keeper makes its session's leaves before the owner has written any
//! record of the session (it cannot be otherwise without a synchronous
//! write on every limited spawn's path). When owner, keeper and command
//! die together in that window, the leaves are nobody's to remove: 150
//! such runs left 99–114 behind after `tether reap` (issue 34 item 2).
//! Their names carry the owner's identity ([`LeafName`]), so the reaper
//! lists every directory so named and proves each owner dead itself.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::LeafName;
use super::hierarchy::parse_mounts;
use super::subtree;

/// How deep below a hierarchy's mount point leaves are looked for: a
/// session leaf is directly below its owner's cgroup, and systemd hosts
/// nest cgroups 3–6 deep (`user.slice/user-1000.slice/user@1000.service/
/// app.slice/…`); 16 is far beyond, and a bound keeps the walk finite.
const SEARCH_DEPTH: usize = 16;

/// How many cgroups the walk reads at most, over every hierarchy. A busy
/// systemd host has a few hundred per hierarchy; the walk reads only
/// directory entries (here: 1,000 cgroups in about 3 ms).
const SEARCH_LIMIT: usize = 100_000;

/// Every directory named like a session leaf ([`LeafName`]) in the cgroup
/// hierarchies this process can see, the cgroups below a leaf not
/// searched (they are the session's own). A hierarchy mounted twice is
/// searched once.
pub(crate) fn session_leaves() -> Vec<(PathBuf, LeafName)> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut searched = std::collections::HashSet::new();
    let mut found = Vec::new();
    let mut budget = SEARCH_LIMIT;
    for mount in parse_mounts(&mountinfo) {
        // One hierarchy, one search: by the device of its mount point.
        let Ok(meta) = std::fs::metadata(&mount.point) else {
            continue;
        };
        use std::os::unix::fs::MetadataExt;
        if !searched.insert((meta.dev(), mount.root.clone())) {
            continue;
        }
        search(&mount.point, 0, &mut budget, &mut found);
    }
    found
}

fn search(dir: &Path, depth: usize, budget: &mut usize, found: &mut Vec<(PathBuf, LeafName)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return;
        }
        // file_type() of a readdir entry does not follow symlinks.
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        *budget -= 1;
        let path = entry.path();
        if let Some(name) = entry.file_name().to_str().and_then(LeafName::parse) {
            found.push((path, name));
        } else if depth + 1 < SEARCH_DEPTH {
            search(&path, depth + 1, budget, found);
        }
    }
}

/// Removes the session leaf `dir` (of `session`) and the cgroups below it,
/// deepest first, if no process is in any of them: nothing is killed
/// through a leaf that no record names (the kernel refuses to remove a
/// cgroup that holds a process: `EBUSY`). The path is checked as
/// [`remove_session_leaf`](super::remove_session_leaf) checks a recorded
/// one. `Ok(false)`: already gone.
pub(crate) fn remove_empty_leaf(dir: &Path, session: &str) -> io::Result<bool> {
    let parent = match checked_parent(dir, session) {
        Ok(Some(parent)) => parent,
        Ok(None) => return Ok(false),
        Err(e) => return Err(e),
    };
    let Some(file_name) = dir.file_name() else {
        return Ok(false);
    };
    let held = subtree::members(dir).len();
    if held > 0 {
        return Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!("holds {held} process(es), and no record names the session"),
        ));
    }
    match subtree::remove_empty(&parent, file_name) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The parent of `dir`, opened without following a symlink, if `dir` is
/// a directory on a cgroup filesystem named as a leaf of `session`;
/// `None`: gone.
fn checked_parent(dir: &Path, session: &str) -> io::Result<Option<OwnedFd>> {
    let refuse = |why: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, why.to_owned()));
    let named = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(LeafName::parse)
        .is_some_and(|n| n.session == session);
    if !dir.is_absolute() || !named {
        return refuse("not a session leaf's name");
    }
    let Some(parent) = dir.parent() else {
        return refuse("no parent");
    };
    let open = |path: &Path| match subtree::open_dir_nofollow(path) {
        Ok(fd) => Ok(Some(fd)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    };
    let Some(parent) = open(parent)? else {
        return Ok(None);
    };
    let Some(leaf) = open(dir)? else {
        return Ok(None);
    };
    if !super::is_cgroup_fd(&leaf) {
        return refuse("not on a cgroup filesystem");
    }
    Ok(Some(parent))
}
