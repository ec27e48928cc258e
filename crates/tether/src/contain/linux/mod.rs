//! Linux: pidfds, `/proc`, child subreapers, PID namespaces, signalfd.

pub(crate) mod cgroup;
pub(crate) mod doctor;
pub(crate) mod embedded;
pub(crate) mod environment;
pub(crate) mod holding;
pub(crate) mod inheritance;
pub(crate) mod keeper;
pub(crate) mod oom;
mod pidfd;
pub(crate) mod pidns;
mod procfs;
pub(crate) mod sys;
mod vfork;
pub(crate) mod watchdog;

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;

use nix::sys::socket::MsgFlags;

use crate::contain::Descendant;
use crate::containment::Containment;
use crate::identity::ProcessIdentity;

pub(crate) use embedded::self_as_keeper;

/// Capacity asked for output pipes: 256 KiB instead of the default 64 KiB
/// means 4× fewer wake-ups of reader and writer per byte (capture of
/// 1 GiB: see the registry bench). Not more: pipe pages count against the
/// user's `pipe-user-pages-soft` (64 MiB), past which the kernel shrinks
/// every new pipe of that user — 64 live sessions × 256 KiB stay at a
/// quarter of it. If the kernel refuses, the default stays.
const PIPE_CAPACITY: libc::c_int = 256 << 10;

/// Asks for a larger pipe buffer (best effort).
pub(crate) fn enlarge_pipe(fd: &OwnedFd) {
    let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_CAPACITY));
}

/// How many bytes the pipe holds.
pub(crate) fn pipe_capacity(fd: &OwnedFd) -> usize {
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETPIPE_SZ).map_or(1 << 20, |n| n as usize)
}

/// A close-on-exec pipe.
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

/// Where each limit of a session can be enforced here (cgroups; see
/// `cgroup/`), for the keeper's spawn request.
pub(crate) fn limit_spec(
    limits: &crate::limits::Limits,
) -> crate::contain::unix::protocol::LimitSpec {
    cgroup::plan(limits)
}

/// What gave the session's cgroup v2 limits, beyond the owner's own cgroup:
/// the delegated systemd scope this process moved into for them
/// (`cgroup/systemd.rs`), if any limit is enforced there.
pub(crate) fn limits_via(report: &crate::limits::LimitReport) -> Option<String> {
    let in_v2 = [&report.memory, &report.pids, &report.cpu_millis]
        .into_iter()
        .any(|limit| matches!(limit, Some((_, crate::limits::Enforcement::Cgroup2))));
    let scope = cgroup::systemd_scope()?;
    in_v2.then(|| format!("systemd scope {scope}"))
}

/// Removes what is left of a session's cgroups after its keeper was lost
/// (only empty ones: nothing is killed through them).
pub(crate) fn remove_leftover_cgroups(dirs: &[std::path::PathBuf]) {
    cgroup::remove_leftover_leaves(dirs)
}

/// `sendmsg` flags on the keeper socket: a dead peer is an `EPIPE` error,
/// never a `SIGPIPE`.
pub(crate) const SEND_FLAGS: MsgFlags = MsgFlags::MSG_NOSIGNAL;

/// `recvmsg` flags on the keeper socket: descriptors arrive close-on-exec.
pub(crate) const RECV_FLAGS: MsgFlags = MsgFlags::MSG_CMSG_CLOEXEC;

/// Nothing to do for a received descriptor: [`RECV_FLAGS`] made it
/// close-on-exec.
pub(crate) fn received(_fd: &OwnedFd) {}

/// Nothing to do for a keeper socket: [`SEND_FLAGS`] keeps `SIGPIPE` away.
pub(crate) fn prepare_socket(_sock: &UnixStream) {}

/// Marks the calling process as a child subreaper: orphans below it
/// reparent to it instead of init. `Ok(true)`: it is one now.
pub(crate) fn set_child_subreaper() -> io::Result<bool> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(true)
    }
}

/// Live processes of a keeper's tree other than `main` (and the PID
/// namespace init, which is tether's, not the command's).
pub(crate) fn descendants(
    keeper: u32,
    main: &ProcessIdentity,
    containment: Containment,
    _session: &str,
) -> Vec<Descendant> {
    let mut out = Vec::new();
    let mut frontier = vec![(keeper, 0u32)];
    while let Some((pid, depth)) = frontier.pop() {
        for child in procfs::children_of(pid) {
            frontier.push((child, depth + 1));
            let is_init = depth == 0 && containment == Containment::PidNamespace;
            let exited = procfs::read_stat(child).map_or(true, |s| s.has_exited());
            if child != main.pid && !is_init && !exited {
                out.push(Descendant {
                    pid: child,
                    command: crate::contain::sys::describe(child),
                });
            }
        }
    }
    out.sort_by_key(|d| d.pid);
    out
}

/// Fills `buf` from the kernel's random source: `getrandom(2)` (one system
/// call, where opening `/dev/urandom` took three — every command gets a
/// session id; never blocking, so early in a boot it is `/dev/urandom`
/// after all). `false` if neither answered.
pub(crate) fn random_bytes(buf: &mut [u8]) -> bool {
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: getrandom writes at most `rest.len()` bytes into it.
        let n =
            unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), libc::GRND_NONBLOCK) };
        if n > 0 {
            filled += n as usize;
        } else if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break;
        }
    }
    if filled == buf.len() {
        return true;
    }
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .is_ok()
}

/// Where to start this very program again when `exe` — the path it was
/// started from — no longer names the file it runs: an upgrade renamed a
/// new build over it, or removed it (`cargo install`, `pip install -U`).
/// Then `/proc/self/exe`, which the kernel resolves to the running file
/// even when no name is left for it; `None` while `exe` is still that file
/// (the usual case, one `stat` of each). A long-lived owner that is its
/// own keeper — `tether mcp` — otherwise failed every later start with the
/// other build's file, or with `ENOENT`.
pub(crate) fn running_program(exe: &std::path::Path) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let running = std::fs::metadata("/proc/self/exe").ok()?;
    match std::fs::metadata(exe) {
        Ok(named) if (named.dev(), named.ino()) == (running.dev(), running.ino()) => None,
        _ => Some("/proc/self/exe".into()),
    }
}
