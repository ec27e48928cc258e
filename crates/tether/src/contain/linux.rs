//! Linux primitives: pidfds, `/proc`, prctl. Everything that reads the
//! process table or pins a process lives here, behind small functions.

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

use crate::identity::ProcessIdentity;
use crate::spawn_tag::{SPAWN_TAG_VAR, SpawnTag};

/// A pidfd: a handle that names one process for as long as we hold it. A
/// signal sent through it never reaches a process that took over the pid.
#[derive(Debug)]
pub struct Pidfd(OwnedFd);

impl Pidfd {
    /// Opens a pidfd for `pid` (any process we may inspect, not only children).
    pub fn open(pid: u32) -> io::Result<Pidfd> {
        // SAFETY: pidfd_open takes (pid_t, unsigned int) and returns a new fd
        // or -1; it touches no memory of ours.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel just returned this fd to us; nobody else owns it.
        Ok(Pidfd(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// Sends `sig` to the process. `ESRCH` once it has exited.
    pub fn send_signal(&self, sig: i32) -> io::Result<()> {
        // SAFETY: pidfd_send_signal(fd, sig, NULL info, 0 flags): no memory
        // is passed in.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Whether the process has exited (the pidfd polls readable). A zombie
    /// has exited.
    pub fn has_exited(&self) -> bool {
        let mut fds = [libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: one valid pollfd, zero timeout.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) };
        rc > 0
    }

    /// The pidfs inode, where the kernel keeps pidfds on pidfs (6.9+); on
    /// older kernels every pidfd shares the anon-inode and `None` is returned.
    pub fn inode(&self) -> Option<u64> {
        let st = nix::sys::stat::fstat(self.0.as_fd()).ok()?;
        static ANON_INODE: OnceLock<Option<u64>> = OnceLock::new();
        let anon = ANON_INODE.get_or_init(anon_inode_number);
        if Some(st.st_ino) == *anon {
            None
        } else {
            Some(st.st_ino)
        }
    }
}

impl AsFd for Pidfd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// The inode shared by anonymous-inode files (eventfd) — if a pidfd has it,
/// the kernel has no pidfs and the inode is not an identity.
fn anon_inode_number() -> Option<u64> {
    let fd = nix::sys::eventfd::EventFd::new().ok()?;
    nix::sys::stat::fstat(fd.as_fd()).ok().map(|st| st.st_ino)
}

/// A process pinned by a pidfd after its identity was verified: a signal
/// sent through it reaches that very process or nobody, however the pid is
/// recycled afterwards.
///
/// For code that acts on processes it did not start (`tether reap`): pin,
/// re-read whatever proves the process may be signalled (its spawn tag),
/// then signal. Reads of `/proc/<pid>` made while the pinned process has not
/// exited are known to be of that process, because a pid is not reused
/// before its process is reaped.
#[derive(Debug)]
pub struct PinnedProcess {
    pidfd: Pidfd,
    identity: ProcessIdentity,
}

impl PinnedProcess {
    /// Pins the process `expected` names: opens a pidfd for its pid, then
    /// verifies boot id, start time and (where both sides know it) the
    /// pidfs inode. `Ok(None)` if that process has exited or its pid now
    /// names another process; `Err` only for errors other than "no such
    /// process" (e.g. `EPERM`, `EMFILE`).
    pub fn pin(expected: &ProcessIdentity) -> io::Result<Option<PinnedProcess>> {
        if expected.boot_id != boot_id() {
            return Ok(None);
        }
        let pidfd = match Pidfd::open(expected.pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
            Err(e) => return Err(e),
        };
        match identity_with_pidfd(expected.pid, &pidfd) {
            Ok(now) if now.matches(expected) => Ok(Some(PinnedProcess {
                pidfd,
                identity: now,
            })),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The pinned process's identity (with its pidfs inode where the kernel
    /// has pidfs).
    pub fn identity(&self) -> &ProcessIdentity {
        &self.identity
    }

    /// The spawn tag in the pinned process's environment now; `None` if it
    /// has none or has exited (then nothing read could be trusted to be its).
    pub fn spawn_tag(&self) -> Option<SpawnTag> {
        let tag = spawn_tag_of(self.identity.pid);
        if self.pidfd.has_exited() { None } else { tag }
    }

    /// Sends `sig` through the pidfd. `Ok(false)` if the process has already
    /// exited (a zombie has exited: nothing is sent).
    pub fn signal(&self, sig: i32) -> io::Result<bool> {
        if self.pidfd.has_exited() {
            return Ok(false);
        }
        match self.pidfd.send_signal(sig) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether the process has exited (zombies included).
    pub fn has_exited(&self) -> bool {
        self.pidfd.has_exited()
    }
}

impl AsFd for PinnedProcess {
    /// The pidfd: it polls readable once the process has exited.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }
}

/// Signals the process `identity` names, and only it: pins it with a pidfd,
/// re-verifies the identity, then signals through the pidfd. `Ok(false)`
/// when that process is gone (exited, or its pid names another process now).
pub fn signal_if_identity(identity: &ProcessIdentity, sig: i32) -> io::Result<bool> {
    match PinnedProcess::pin(identity)? {
        Some(pinned) => pinned.signal(sig),
        None => Ok(false),
    }
}

/// Fields of `/proc/<pid>/stat` that tether uses.
#[derive(Clone, Copy, Debug)]
pub struct Stat {
    /// Process state letter (`R`, `S`, `Z`, …).
    pub state: u8,
    /// Parent pid.
    pub ppid: u32,
    /// Process group id.
    pub pgrp: u32,
    /// Start time in clock ticks since boot.
    pub start_time: u64,
}

/// Reads `/proc/<pid>/stat`.
pub fn read_stat(pid: u32) -> io::Result<Stat> {
    use std::io::Read;
    // One read into a stack buffer: the line is well under 1 KiB, and a
    // seq_file hands over a whole record in the first read. (`fs::read`
    // would add a statx and an lseek to size its buffer: `tether ps` reads
    // this for every tagged process.)
    let mut buf = [0u8; 4096];
    let n = fs::File::open(format!("/proc/{pid}/stat"))?.read(&mut buf)?;
    parse_stat(&buf[..n])
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unparsable stat"))
}

fn parse_stat(text: &[u8]) -> Option<Stat> {
    // The command name is in parentheses and may contain anything,
    // including ") ": the fields start after the *last* ')'.
    let close = text.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&text[close + 2..]).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // fields[0] is field 3 (state); start time is field 22.
    Some(Stat {
        state: *fields.first()?.as_bytes().first()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// The kernel's boot id, read once.
pub fn boot_id() -> &'static str {
    static BOOT_ID: OnceLock<String> = OnceLock::new();
    BOOT_ID.get_or_init(|| {
        fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    })
}

/// The identity of `pid` now. The pidfd is opened first and checked last, so
/// the start time read in between belongs to the process the pidfd names.
pub fn identity_of(pid: u32) -> io::Result<ProcessIdentity> {
    let pidfd = Pidfd::open(pid)?;
    identity_with_pidfd(pid, &pidfd)
}

/// Like [`identity_of`] with a pidfd the caller already holds.
pub fn identity_with_pidfd(pid: u32, pidfd: &Pidfd) -> io::Result<ProcessIdentity> {
    let stat = read_stat(pid)?;
    if pidfd.has_exited() || stat.state == b'Z' {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("process {pid} has exited"),
        ));
    }
    Ok(ProcessIdentity {
        boot_id: boot_id().to_owned(),
        pid,
        start_time: stat.start_time,
        pidfs_inode: pidfd.inode(),
    })
}

/// Whether the process named by `id` is alive and still the same process.
pub fn identity_alive(id: &ProcessIdentity) -> bool {
    if id.boot_id != boot_id() {
        return false;
    }
    match identity_of(id.pid) {
        Ok(now) => now.matches(id),
        Err(_) => false,
    }
}

/// The calling process's real uid.
pub fn current_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// The direct children of `pid` (all its threads), from
/// `/proc/<pid>/task/*/children`. Missing process → empty.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        let path = task.path().join("children");
        if let Ok(text) = fs::read_to_string(path) {
            out.extend(
                text.split_ascii_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// Marks the calling process as a child subreaper: orphans below it
/// reparent to it instead of init.
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The spawn tag in `pid`'s environment, if it has a valid one.
pub fn spawn_tag_of(pid: u32) -> Option<SpawnTag> {
    let env = fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{SPAWN_TAG_VAR}=");
    env.split(|&b| b == 0)
        .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .and_then(|value| std::str::from_utf8(value).ok()?.parse().ok())
}

/// The command line of `pid`, NULs turned into spaces, for reports.
pub fn command_line(pid: u32) -> String {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    words.join(" ")
}

/// Every pid in `/proc` right now.
pub fn all_pids() -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Kills every process whose spawn tag names `session`, until none is left
/// (or a 5 s verification window passes), and reaps those that are our
/// children. Returns how many were killed. Used when a keeper died and its
/// orphans went to us (we are a subreaper) or to init.
pub fn kill_tagged(session: &str) -> usize {
    let mut killed = std::collections::HashSet::new();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let ours = |pid: u32| spawn_tag_of(pid).is_some_and(|t| t.session == session);
    loop {
        let mut pinned = Vec::new();
        for pid in all_pids().into_iter().filter(|&p| ours(p)) {
            let Ok(pidfd) = Pidfd::open(pid) else {
                continue;
            };
            // Re-check after pinning: the pid may have been recycled
            // between the scan and the open.
            if ours(pid) && pidfd.send_signal(libc::SIGKILL).is_ok() {
                killed.insert(pid);
                pinned.push((pid, pidfd));
            }
        }
        if pinned.is_empty() || std::time::Instant::now() >= give_up {
            return killed.len();
        }
        for (pid, pidfd) in pinned {
            // Wait for the death we just caused (SIGKILL is prompt), then
            // reap if it was our child (ECHILD otherwise: init reaps it).
            let mut pfd = [libc::pollfd {
                fd: pidfd.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            // SAFETY: one valid pollfd; bounded wait.
            unsafe { libc::poll(pfd.as_mut_ptr(), 1, 100) };
            let _ = nix::sys::wait::waitpid(
                nix::unistd::Pid::from_raw(pid as i32),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parses_names_with_parens_and_spaces() {
        let line = b"42 (a) b (c) S 7 42 42 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 1 0 123456 0 0";
        let stat = parse_stat(line).unwrap();
        assert_eq!(
            (stat.state, stat.ppid, stat.pgrp, stat.start_time),
            (b'S', 7, 42, 123456)
        );
    }

    #[test]
    fn pidfd_inode_is_unique_per_process() {
        let me = Pidfd::open(std::process::id()).unwrap();
        let parent = Pidfd::open(nix::unistd::getppid().as_raw() as u32).unwrap();
        if let (Some(a), Some(b)) = (me.inode(), parent.inode()) {
            assert_ne!(a, b);
        }
        assert!(!me.has_exited());
    }
}
