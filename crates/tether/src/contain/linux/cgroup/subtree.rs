//! A session leaf and the cgroups below it, removed deepest first.
//!
//! A command may make cgroups below its own — container runtimes,
//! `systemd-run`, cgroup test suites do — and the kernel refuses `rmdir`
//! of a cgroup that has children (`EBUSY`): before this, such a leaf
//! outlived its session, and `tether reap` said `EBUSY` about it on every
//! run, forever. So a leaf goes with its whole subtree: each cgroup's
//! processes killed first (every one of them is the session's: it is in
//! the session's cgroup), then its children, deepest first, then itself.
//!
//! Every directory is opened relative to its parent's descriptor with
//! `O_NOFOLLOW`, never by a path the walk made up, so no symlink is ever
//! followed (cgroupfs has none, but a path is only as good as its
//! components), and the walk stops at [`MAX_DEPTH`].

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path};
use std::time::{Duration, Instant};

use super::super::pidfd::{Pidfd, wait_all_exited};

/// How deep below a session leaf cgroups are followed. The kernel's own
/// default (`cgroup.max.depth`) is unlimited; 32 levels is far beyond what
/// runtimes make (systemd and runc: 2–4), and a bound keeps a hostile tree
/// from making the teardown recurse without end.
pub(crate) const MAX_DEPTH: usize = 32;

/// How long the processes of one cgroup get to die after `SIGKILL` (as a
/// kill's verification window: a process in uninterruptible sleep can
/// outlast `SIGKILL` for a while).
const DIE_WAIT: Duration = Duration::from_secs(5);

/// Opens the directory `path` (absolute, without `.`/`..`) one component
/// at a time, each with `O_NOFOLLOW`: a symlink anywhere on the way is an
/// error (`ELOOP`/`ENOTDIR`), not followed.
pub(crate) fn open_dir_nofollow(path: &Path) -> io::Result<OwnedFd> {
    if !path.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not an absolute path",
        ));
    }
    let mut dir = open_at(None, OsStr::new("/"), true)?;
    for component in path.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => dir = open_at(Some(&dir), name, true)?,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a plain absolute path",
                ));
            }
        }
    }
    Ok(dir)
}

/// `openat(dir, name, O_DIRECTORY | O_NOFOLLOW)` (`O_PATH` for a
/// component passed through, readable for one that is listed).
fn open_at(dir: Option<&OwnedFd>, name: &OsStr, path_only: bool) -> io::Result<OwnedFd> {
    let name = CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a path"))?;
    let access = if path_only {
        libc::O_PATH
    } else {
        libc::O_RDONLY
    };
    let flags = access | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: a valid directory fd (or AT_FDCWD) and a NUL-terminated name
    // for the call's duration; the kernel returns a new fd or -1.
    let fd = unsafe { libc::openat(at, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd, ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A file of the cgroup `dir`, opened relative to it without following a
/// symlink.
fn open_file(dir: &OwnedFd, name: &CStr, write: bool) -> io::Result<std::fs::File> {
    let access = if write {
        libc::O_WRONLY
    } else {
        libc::O_RDONLY
    };
    // SAFETY: as in `open_at`.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            access | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd, ours alone.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// The pids in the cgroup `dir` now (its `cgroup.procs`).
fn procs(dir: &OwnedFd) -> io::Result<Vec<u32>> {
    let mut text = String::new();
    open_file(dir, c"cgroup.procs", false)?.read_to_string(&mut text)?;
    Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

/// The names of the cgroups directly below `dir` (its subdirectories; the
/// rest of a cgroup directory is control files).
fn children(dir: &OwnedFd) -> io::Result<Vec<OsString>> {
    // Listed through the descriptor (its /proc/self/fd entry names the
    // open directory itself, whatever its path has become).
    let listing = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))?;
    let mut names = Vec::new();
    for entry in listing {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            names.push(entry.file_name());
        }
    }
    Ok(names)
}

/// Kills every process in the cgroup `dir` by proven identity: a pidfd is
/// opened for each pid listed, the listing is read again, and only a
/// process still listed after its pidfd was opened is signalled (a pid
/// that was reused in between names another process, which the second
/// listing would not show in this cgroup — unless it is a fork of a member
/// here, and then it is the session's too). Repeats until the cgroup is
/// empty (forks racing the kill land in it) or `deadline` passes. Returns
/// how many processes were killed.
fn kill_members(dir: &OwnedFd, deadline: Instant) -> io::Result<u32> {
    let me = std::process::id();
    let mut killed = 0;
    let mut unsignalled: Vec<u32> = Vec::new();
    loop {
        let listed: Vec<u32> = procs(dir)?.into_iter().filter(|&p| p != me).collect();
        // Empty, or the same processes none of which could be signalled
        // last time (not ours to signal): the rmdir that follows says what
        // is left.
        if listed.is_empty() || listed == unsignalled {
            return Ok(killed);
        }
        let pinned: Vec<(u32, Pidfd)> = listed
            .iter()
            .copied()
            .filter_map(|pid| Some((pid, Pidfd::open(pid).ok()?)))
            .collect();
        let still: Vec<u32> = procs(dir)?;
        let mut doomed = Vec::new();
        for (pid, pidfd) in &pinned {
            if still.contains(pid) && pidfd.send_signal(libc::SIGKILL).is_ok() {
                killed += 1;
                doomed.push(pidfd);
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(killed);
        }
        unsignalled = if doomed.is_empty() {
            listed
        } else {
            Vec::new()
        };
        wait_all_exited(&doomed, left);
    }
}

/// Every process in the cgroup `dir` and the cgroups below it (at most
/// [`MAX_DEPTH`] levels), read through descriptors opened without
/// following a symlink; empty if `dir` cannot be opened.
pub(crate) fn members(dir: &Path) -> std::collections::HashSet<u32> {
    fn collect(dir: &OwnedFd, depth: usize, into: &mut std::collections::HashSet<u32>) {
        into.extend(procs(dir).unwrap_or_default());
        if depth + 1 >= MAX_DEPTH {
            return;
        }
        for child in children(dir).unwrap_or_default() {
            if let Ok(fd) = open_at(Some(dir), &child, false) {
                collect(&fd, depth + 1, into);
            }
        }
    }
    let mut set = std::collections::HashSet::new();
    if let Ok(fd) = open_dir_nofollow(dir) {
        // open_dir_nofollow opens O_PATH: reopen readable for the listing.
        if let Ok(dir) = open_at(Some(&fd), OsStr::new("."), false) {
            collect(&dir, 0, &mut set);
        }
    }
    set
}

/// Kills what is in the cgroup `name` below `parent` and in every cgroup
/// below it, removes them deepest first, then `name` itself. `Ok(n)`: gone,
/// `n` processes killed on the way; `NotFound`: already gone.
pub(crate) fn remove(parent: &OwnedFd, name: &OsStr) -> io::Result<u32> {
    remove_at(parent, name, 0, Instant::now() + DIE_WAIT)
}

/// [`remove_path`] with the processes' wait ending at `deadline` (the
/// keeper's bound: see `SessionCgroups::remove`).
pub(crate) fn remove_path_by(dir: &Path, deadline: Instant) -> io::Result<u32> {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no parent"));
    };
    remove_at(&open_dir_nofollow(parent)?, name, 0, deadline)
}

fn remove_at(parent: &OwnedFd, name: &OsStr, depth: usize, deadline: Instant) -> io::Result<u32> {
    let dir = open_at(Some(parent), name, false)?;
    let mut killed = 0;
    // Members first: a fork of a member lands in the member's cgroup, never
    // in a child cgroup that is already gone.
    if let Ok(mut kill) = open_file(&dir, c"cgroup.kill", true) {
        // cgroup v2 (5.14+): the whole subtree in one write, forks racing
        // it included; the per-cgroup kills below then find nothing.
        let _ = kill.write_all(b"1");
    }
    killed += kill_members(&dir, deadline)?;
    for child in children(&dir)? {
        if depth + 1 >= MAX_DEPTH {
            return Err(io::Error::other(format!(
                "cgroups nested deeper than {MAX_DEPTH} levels below a session leaf"
            )));
        }
        match remove_at(&dir, &child, depth + 1, deadline) {
            Ok(n) => killed += n,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    // The members again: one may have left a child cgroup for this one
    // while the children were removed.
    killed += kill_members(&dir, deadline)?;
    drop(dir);
    rmdir_at(parent, name)?;
    Ok(killed)
}

/// Removes the cgroup `name` below `parent` and every cgroup below it,
/// deepest first, killing nothing: a cgroup that holds a process stays
/// (`EBUSY`, from the kernel).
pub(crate) fn remove_empty(parent: &OwnedFd, name: &OsStr) -> io::Result<()> {
    fn at(parent: &OwnedFd, name: &OsStr, depth: usize) -> io::Result<()> {
        let dir = open_at(Some(parent), name, false)?;
        for child in children(&dir)? {
            if depth + 1 >= MAX_DEPTH {
                return Err(io::Error::other(format!(
                    "cgroups nested deeper than {MAX_DEPTH} levels below a session leaf"
                )));
            }
            match at(&dir, &child, depth + 1) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        drop(dir);
        rmdir_at(parent, name)
    }
    at(parent, name, 0)
}

/// `rmdir` of an emptied cgroup. Should the kernel still count a task
/// being torn down (`EBUSY`), up to 50 tries 1 ms apart — a bound, not a
/// wait: here 200 of 200 v2, v1 `pids` and v1 `memory` leaves each went at
/// the first try once their process was reaped.
fn rmdir_at(parent: &OwnedFd, name: &OsStr) -> io::Result<()> {
    let name = CString::new(OsString::from(name).into_vec())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a path"))?;
    let mut tries = 0;
    loop {
        // SAFETY: a valid directory fd and a NUL-terminated name.
        let rc = unsafe {
            libc::unlinkat(
                parent.as_fd().as_raw_fd(),
                name.as_ptr(),
                libc::AT_REMOVEDIR,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        tries += 1;
        if e.raw_os_error() != Some(libc::EBUSY) || tries >= 50 {
            return Err(e);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// [`remove`] for the cgroup at `dir` (its parent opened component by
/// component, without following a symlink).
pub(crate) fn remove_path(dir: &Path) -> io::Result<u32> {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no parent"));
    };
    remove(&open_dir_nofollow(parent)?, name)
}
