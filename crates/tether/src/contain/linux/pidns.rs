//! PID-namespace containment: the keeper forks a pid-1 init in a fresh PID
//! namespace, and the init forks the command behind a gate. When the init
//! dies — because the keeper died (`PR_SET_PDEATHSIG`) or was told to kill
//! — the kernel kills every process of the namespace. Everything here runs
//! in the single-threaded keeper or its children.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::sys::wait::waitpid;

use super::pidfd::Pidfd;
use super::procfs::{children_of, ns_pid_of};
use crate::contain::Termination;
use crate::contain::unix::keeper::{Exec, fork_exec};
use crate::contain::unix::protocol::SpawnStage;

/// Why a PID namespace could not be had. `spent` says whether the keeper
/// was changed anyway (the user namespace was entered but its id maps
/// could not be written, as under Ubuntu's userns restrictions): such a
/// keeper must not start anything else, since its next child would land in
/// the half-made namespaces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NamespaceError {
    pub(crate) errno: Errno,
    pub(crate) spent: bool,
}

/// Enters a new PID namespace for the keeper's next child: directly as a
/// privileged user, else together with a user namespace mapping our own uid.
pub(crate) fn enter() -> Result<(), NamespaceError> {
    use nix::sched::{CloneFlags, unshare};
    if unshare(CloneFlags::CLONE_NEWPID).is_ok() {
        return Ok(());
    }
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWPID).map_err(|errno| {
        NamespaceError {
            errno,
            spent: false,
        }
    })?;
    // The keeper is non-dumpable (keeper::prepare), which makes its
    // /proc/self files root's — the initial namespace's root, which the new
    // user namespace does not map — so an unprivileged keeper could not
    // open its own id maps (EACCES as uid 61717 on Linux 6.18, where
    // `unshare --user --pid` works: found by `tether doctor`, issue 17).
    // They are opened while the keeper is dumpable for those three opens
    // and written once it is non-dumpable again: the kernel judges a map
    // write by the opener's credentials, not by who owns the file then.
    // The window admits a ptrace by this user only before this session's
    // command exists.
    set_dumpable(true);
    let opened: Vec<io::Result<std::fs::File>> = [
        "/proc/self/setgroups",
        "/proc/self/uid_map",
        "/proc/self/gid_map",
    ]
    .iter()
    .map(|path| std::fs::OpenOptions::new().write(true).open(path))
    .collect();
    set_dumpable(false);
    let texts = [
        "deny".to_owned(),
        format!("{uid} {uid} 1"),
        format!("{gid} {gid} 1"),
    ];
    for (file, text) in opened.into_iter().zip(texts) {
        file.and_then(|mut file| io::Write::write_all(&mut file, text.as_bytes()))
            .map_err(|e| NamespaceError {
                errno: errno_of(&e),
                spent: true,
            })?;
    }
    Ok(())
}

/// `PR_SET_DUMPABLE`: whether this process's /proc files are its own user's
/// (and it may be ptraced by that user) or root's.
fn set_dumpable(dumpable: bool) {
    // SAFETY: prctl with integer arguments only; it cannot fail for 0 or 1.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, dumpable as libc::c_ulong, 0, 0, 0) };
}

/// What the namespace init tells the keeper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InitReport {
    /// The command was forked with this pid (inside the namespace) and
    /// waits at the gate.
    Forked { ns_pid: u32 },
    /// Starting the command failed at `stage`.
    Failed { stage: SpawnStage, errno: i32 },
    /// The command passed the gate and its exec succeeded.
    Execed,
    /// The command ended with this wait status.
    Exited { status: i32 },
}

const REPORT_LEN: usize = 12;

impl InitReport {
    fn encode(self) -> [u8; REPORT_LEN] {
        let (kind, a, b): (u32, i32, i32) = match self {
            InitReport::Forked { ns_pid } => (0, ns_pid as i32, 0),
            InitReport::Failed { stage, errno } => (1, stage.code() as i32, errno),
            InitReport::Exited { status } => (2, status, 0),
            InitReport::Execed => (3, 0, 0),
        };
        let mut word = [0u8; REPORT_LEN];
        word[..4].copy_from_slice(&kind.to_le_bytes());
        word[4..8].copy_from_slice(&a.to_le_bytes());
        word[8..].copy_from_slice(&b.to_le_bytes());
        word
    }

    fn decode(word: &[u8; REPORT_LEN]) -> io::Result<InitReport> {
        let kind = u32::from_le_bytes(word[..4].try_into().unwrap());
        let a = i32::from_le_bytes(word[4..8].try_into().unwrap());
        let b = i32::from_le_bytes(word[8..].try_into().unwrap());
        Ok(match kind {
            0 => InitReport::Forked { ns_pid: a as u32 },
            1 => InitReport::Failed {
                stage: SpawnStage::from_code(a as u8)?,
                errno: b,
            },
            2 => InitReport::Exited { status: a },
            3 => InitReport::Execed,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "bad namespace init report",
                ));
            }
        })
    }
}

fn read_report(fd: BorrowedFd<'_>) -> io::Result<InitReport> {
    let mut word = [0u8; REPORT_LEN];
    let mut got = 0;
    while got < word.len() {
        match nix::unistd::read(fd, &mut word[got..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    InitReport::decode(&word)
}

/// The keeper's end of the init's report pipe.
#[derive(Debug)]
pub(crate) struct InitLink {
    reports: OwnedFd,
}

impl InitLink {
    /// The descriptor to wait on.
    pub(crate) fn fd(&self) -> RawFd {
        self.reports.as_raw_fd()
    }

    /// Reads one report: the command's end, if that is what it was.
    pub(crate) fn read_exit(&mut self) -> io::Result<Option<Termination>> {
        match read_report(self.reports.as_fd())? {
            InitReport::Exited { status } => Ok(Some(decode_wait_status(status))),
            _ => Ok(None),
        }
    }

    /// The command's end as the init reported it before exiting, if that
    /// report is still unread: call once the init has been reaped. The
    /// init reports the command's end, then exits when the namespace is
    /// empty, and the keeper can see the exit first (it woke for
    /// something else between the two): reading the exit as "the command
    /// died with the namespace" then turned a clean `exit 0` into
    /// `SIGKILL` (32 of 300 `tether run --containment pidns -- sh -c 'echo
    /// $$'` here). Never blocks: the init is dead, and nothing else holds
    /// the pipe's write end (close-on-exec in the command), so a read
    /// finds a report or EOF.
    pub(crate) fn last_exit(&mut self) -> Option<Termination> {
        let mut exit = None;
        while let Ok(report) = read_report(self.reports.as_fd()) {
            if let InitReport::Exited { status } = report {
                exit = Some(decode_wait_status(status));
            }
        }
        exit
    }
}

/// A command started in a fresh namespace.
pub(crate) struct Started {
    /// The init (the keeper's child).
    pub init: u32,
    /// The command, as a host pid.
    pub main: u32,
    /// The command's start time and pidfs inode, read while it was held.
    pub identity: (u64, Option<u64>),
    pub link: InitLink,
}

/// Forks the pid-1 init of the namespace entered by [`enter`], which forks
/// the command and relays its fate over a pipe. Returns the command's pid
/// as seen from here.
///
/// The command waits at a gate before exec until the keeper has found its
/// host pid: a command that exits at once (`sh -c 'echo $$'`) would
/// otherwise be reaped by init before the keeper could name it.
pub(crate) fn start(
    exec: &Exec,
    stdio: [RawFd; 3],
    ctl: RawFd,
) -> Result<Started, (SpawnStage, Errno)> {
    let fork_failed = |e| (SpawnStage::Fork, e);
    let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
    let (report_r, report_w) = nix::unistd::pipe2(cloexec).map_err(fork_failed)?;
    let (gate_r, gate_w) = nix::unistd::pipe2(cloexec).map_err(fork_failed)?;
    let me = Pidfd::open(std::process::id()).map_err(|e| (SpawnStage::Fork, errno_of(&e)))?;
    // SAFETY: the keeper is single-threaded, so the child may do anything.
    match unsafe { nix::unistd::fork() }.map_err(fork_failed)? {
        nix::unistd::ForkResult::Child => {
            // SAFETY: closing our copy of the gate's write end.
            unsafe { libc::close(gate_w.as_raw_fd()) };
            init_main(
                exec,
                stdio,
                &me,
                ctl,
                report_r.as_raw_fd(),
                report_w.as_raw_fd(),
                gate_r.as_raw_fd(),
            )
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(report_w);
            drop(gate_r);
            let init = child.as_raw() as u32;
            let fail = |child| {
                let _ = waitpid(child, None);
            };
            let in_ns = |e: io::Error| (SpawnStage::PidNamespace, errno_of(&e));
            let ns_pid = match read_report(report_r.as_fd()).map_err(in_ns)? {
                InitReport::Forked { ns_pid } => ns_pid,
                InitReport::Failed { stage, errno } => {
                    fail(child);
                    return Err((stage, Errno::from_raw(errno)));
                }
                _ => {
                    fail(child);
                    return Err((SpawnStage::PidNamespace, Errno::EPROTO));
                }
            };
            // The command is held at the gate, so it is alive and init's
            // child: find its host pid.
            let host = children_of(init)
                .into_iter()
                .find(|&pid| ns_pid_of(pid) == Some(ns_pid));
            let Some(main) = host else {
                drop(gate_w);
                fail(child);
                return Err((SpawnStage::PidNamespace, Errno::ESRCH));
            };
            // Identified while held at the gate: once released, it may
            // exit and be reaped by init at any moment.
            let Ok(identity) = super::sys::identify_unreaped(main) else {
                drop(gate_w);
                fail(child);
                return Err((SpawnStage::PidNamespace, Errno::ESRCH));
            };
            nix::unistd::write(&gate_w, b"g").map_err(|e| (SpawnStage::PidNamespace, e))?;
            drop(gate_w);
            match read_report(report_r.as_fd()).map_err(in_ns)? {
                InitReport::Execed => {}
                InitReport::Failed { stage, errno } => {
                    fail(child);
                    return Err((stage, Errno::from_raw(errno)));
                }
                _ => {
                    fail(child);
                    return Err((SpawnStage::PidNamespace, Errno::EPROTO));
                }
            }
            Ok(Started {
                init,
                main,
                identity,
                link: InitLink { reports: report_r },
            })
        }
    }
}

/// The pid-1 init of a session's PID namespace. Never returns.
fn init_main(
    exec: &Exec,
    stdio: [RawFd; 3],
    keeper: &Pidfd,
    ctl: RawFd,
    report_r: RawFd,
    report_w: RawFd,
    gate: RawFd,
) -> ! {
    let report = |r: InitReport| {
        let word = r.encode();
        // SAFETY: write(2) of a local buffer.
        unsafe { libc::write(report_w, word.as_ptr().cast(), word.len()) };
    };
    // Into the session's cgroups first (the command it forks inherits
    // them): a `cgroup.kill` then ends init and with it the namespace.
    if crate::contain::unix::keeper::enter_cgroups(&exec.cgroup_procs).is_err() {
        report(InitReport::Failed {
            stage: SpawnStage::Cgroup,
            errno: Errno::last_raw(),
        });
        // SAFETY: _exit is always safe.
        unsafe { libc::_exit(1) };
    }
    // SAFETY: plain syscalls in a forked single-threaded child.
    unsafe {
        libc::close(ctl);
        libc::close(report_r);
        // The namespace dies with this process; this process dies with the
        // keeper. PDEATHSIG is safe here: the keeper is single-threaded, so
        // "the parent thread exited" means "the keeper exited".
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
    }
    if keeper.has_exited() {
        // SAFETY: _exit is always safe.
        unsafe { libc::_exit(1) };
    }
    let command = match fork_exec(exec, stdio, Some(gate), |pid| {
        report(InitReport::Forked { ns_pid: pid })
    }) {
        Ok(pid) => pid,
        Err((stage, errno)) => {
            report(InitReport::Failed {
                stage,
                errno: errno as i32,
            });
            // SAFETY: _exit is always safe.
            unsafe { libc::_exit(1) }
        }
    };
    // SAFETY: closing init's own copies: the gate's read end, and the
    // command's stdio — init must not hold the command's pipes open (a
    // kept descendant would otherwise never let them reach EOF).
    unsafe {
        libc::close(gate);
        for fd in stdio {
            libc::close(fd);
        }
    }
    report(InitReport::Execed);
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a valid status pointer.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
        if pid < 0 {
            if Errno::last() == Errno::EINTR {
                continue;
            }
            // ECHILD: the namespace is empty.
            // SAFETY: _exit is always safe.
            unsafe { libc::_exit(0) }
        }
        if pid as u32 == command {
            report(InitReport::Exited { status });
        }
    }
}

fn decode_wait_status(status: i32) -> Termination {
    if libc::WIFSIGNALED(status) {
        Termination::Signal(libc::WTERMSIG(status))
    } else {
        Termination::Code(libc::WEXITSTATUS(status))
    }
}

fn errno_of(e: &io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}
