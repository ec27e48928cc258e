//! macOS: `sysctl` for the process table, kqueue for waiting, and a tree
//! held by process group, session and spawn tag — macOS has no subreaper
//! and no PID namespaces.
//!
//! Verified here by type-checking only (`cargo check`/`clippy` for
//! `x86_64-apple-darwin` and `aarch64-apple-darwin`); the byte layouts of
//! the kernel's records are unit-tested on every platform (`records.rs`).

pub(crate) mod doctor;
pub(crate) mod environment;
pub(crate) mod holding;
pub(crate) mod inheritance;
pub(crate) mod keeper;
mod kqueue;
mod limits;
pub(crate) mod pidns;
pub(crate) mod sys;
mod sysctl;
pub(crate) mod watchdog;

// Platform-free, so that their tests run everywhere: declared in
// `contain/mod.rs`.
use super::{macos_records as records, macos_tree as tree};

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::MsgFlags;

use crate::contain::Descendant;
use crate::containment::Containment;
use crate::identity::ProcessIdentity;

/// A macOS pipe holds at most 64 KiB: its buffer starts at 16 KiB and grows
/// under large writes up to `PIPE_SIZE * 4` (XNU `sys_pipe.c`,
/// `pipesize_blocks`), and cannot be resized from user space.
const PIPE_MAX: usize = 64 << 10;

pub(crate) use limits::{limit_spec, limits_via, remove_leftover_cgroups};

/// Pipe buffers cannot be enlarged on macOS (no `F_SETPIPE_SZ`).
pub(crate) fn enlarge_pipe(_fd: &OwnedFd) {}

/// How many bytes the pipe holds at most (an upper bound: everything a
/// writer wrote before exiting fits in it).
pub(crate) fn pipe_capacity(_fd: &OwnedFd) -> usize {
    PIPE_MAX
}

/// A close-on-exec pipe. macOS has no `pipe2`: the flags are set right
/// after `pipe`, so a `fork` + `exec` on another thread of this process
/// in between inherits both ends (std's own pipes have the same window
/// there; the keeper is single-threaded and not affected).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = nix::unistd::pipe()?;
    set_cloexec(&read)?;
    set_cloexec(&write)?;
    Ok((read, write))
}

fn set_cloexec(fd: &OwnedFd) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    Ok(())
}

/// `sendmsg` flags on the keeper socket. macOS has no `MSG_NOSIGNAL`:
/// [`prepare_socket`] sets `SO_NOSIGPIPE` on the socket instead.
pub(crate) const SEND_FLAGS: MsgFlags = MsgFlags::empty();

/// `recvmsg` flags on the keeper socket. macOS has no `MSG_CMSG_CLOEXEC`:
/// [`received`] marks each descriptor.
pub(crate) const RECV_FLAGS: MsgFlags = MsgFlags::empty();

/// Marks a descriptor that arrived over the keeper socket close-on-exec,
/// so the keeper's command inherits only what it installs as stdio. (In
/// the keeper, single-threaded, nothing can fork in between; in the
/// owner, received descriptors are closed at once.)
pub(crate) fn received(fd: &OwnedFd) {
    let _ = set_cloexec(fd);
}

/// Makes a write to a keeper socket whose peer is gone an `EPIPE` error
/// rather than a `SIGPIPE` (`SO_NOSIGPIPE`; the option belongs to the
/// socket, so the keeper's end keeps it across the exec).
pub(crate) fn prepare_socket(sock: &UnixStream) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads one c_int we own, of the size given.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NOSIGPIPE,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// No subreaper on macOS: orphans reparent to launchd and are found by
/// process group, session and spawn tag instead. `Ok(false)`: this
/// process is no subreaper, so its children are not orphans of a tree.
pub(crate) fn set_child_subreaper() -> io::Result<bool> {
    Ok(false)
}

/// Live processes of a keeper's tree other than `main`, by the rules the
/// keeper kills by (`tree.rs`).
pub(crate) fn descendants(
    keeper: u32,
    main: &ProcessIdentity,
    _containment: Containment,
    session: &str,
) -> Vec<Descendant> {
    let Ok(procs) = sysctl::all_procs() else {
        return Vec::new();
    };
    let bounds = tree::Bounds {
        keeper,
        group: main.pid,
        session,
    };
    let mut probe = sysctl::LiveProbe::default();
    let mut out: Vec<Descendant> =
        tree::members(&procs, &bounds, &mut tree::Memo::default(), &mut probe)
            .into_iter()
            .filter(|p| p.pid != main.pid)
            .map(|p| Descendant {
                pid: p.pid,
                command: crate::contain::sys::describe(p.pid),
            })
            .collect();
    out.sort_by_key(|d| d.pid);
    out
}

/// Fills `buf` from `/dev/urandom`; `false` if it cannot be read.
pub(crate) fn random_bytes(buf: &mut [u8]) -> bool {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .is_ok()
}

/// Where to start this very program again when `exe` no longer names the
/// file it runs: macOS has no `/proc/self/exe` to reach a replaced file by,
/// so `exe` as it is (an owner whose file was replaced starts the file now
/// at that path; untested on macOS).
pub(crate) fn running_program(_exe: &std::path::Path) -> Option<std::path::PathBuf> {
    None
}

/// No keeper inside the program on macOS (no `.init_array` constructor
/// here): a `tether-keeper` program or `run_if_requested()` is needed.
pub(crate) fn self_as_keeper() -> Option<std::path::PathBuf> {
    None
}
