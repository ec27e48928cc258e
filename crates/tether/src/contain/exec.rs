//! Starting the command: `posix_spawn` from the keeper, or — with a PID
//! namespace — a fork into a pid-1 init that forks the command behind a
//! gate. Everything here runs in the single-threaded keeper or its children.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use nix::errno::Errno;
use nix::sys::wait::waitpid;
use nix::unistd::Pid;

use super::linux::Pidfd;
use super::protocol::SpawnSpec;

pub(super) fn errno_of(e: &io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

pub(super) fn read_exact_fd(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match nix::unistd::read(fd, &mut buf[got..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Enters a new PID namespace for the keeper's next child: directly as a
/// privileged user, else together with a user namespace mapping our own uid.
///
/// On failure, `spent` says whether the keeper was changed anyway (the
/// user namespace was entered but its id maps could not be written, as
/// under Ubuntu's userns restrictions): such a keeper must not start
/// anything else, since its next child would land in the half-made
/// namespaces.
pub(super) fn enter_pid_namespace() -> Result<(), NamespaceError> {
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
    let write = |path: &str, text: String| {
        std::fs::write(path, text).map_err(|e| NamespaceError {
            errno: errno_of(&e),
            spent: true,
        })
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    Ok(())
}

/// Why a PID namespace could not be had (see [`enter_pid_namespace`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct NamespaceError {
    pub(super) errno: Errno,
    pub(super) spent: bool,
}

/// Everything `execve` needs, built before forking.
pub(super) struct Exec {
    program: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: Option<CString>,
    new_session: bool,
}

impl Exec {
    pub(super) fn prepare(spec: &SpawnSpec) -> Result<Exec, Errno> {
        let c = |b: &[u8]| CString::new(b.to_vec()).map_err(|_| Errno::EINVAL);
        Ok(Exec {
            program: c(&spec.program)?,
            argv: spec.argv.iter().map(|a| c(a)).collect::<Result<_, _>>()?,
            envp: spec.envp.iter().map(|e| c(e)).collect::<Result<_, _>>()?,
            cwd: spec.cwd.as_deref().map(c).transpose()?,
            new_session: spec.new_session,
        })
    }
}

/// Starts the command with `posix_spawn` (a vfork: no page-table copy, and
/// exec errors come back as the return value). Used wherever the keeper
/// needs no code of its own in the child, i.e. without a PID namespace.
pub(super) fn posix_spawn(exec: &Exec, stdio: [RawFd; 3]) -> Result<u32, (u8, Errno)> {
    let argv: Vec<*mut libc::c_char> = exec
        .argv
        .iter()
        .map(|a| a.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect();
    let envp: Vec<*mut libc::c_char> = exec
        .envp
        .iter()
        .map(|e| e.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect();
    // SAFETY: the attribute and action objects are initialised before use
    // and destroyed after; every pointer handed to posix_spawn outlives it.
    unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        libc::posix_spawnattr_init(&mut attr);
        libc::posix_spawn_file_actions_init(&mut actions);
        // A clean signal state for the command: nothing blocked, every
        // signal at its default (the keeper blocks some and ignores SIGPIPE).
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        let mut defaults: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut defaults);
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::sigaddset(&mut defaults, sig);
            }
        }
        let mut flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;
        if exec.new_session {
            flags |= libc::POSIX_SPAWN_SETSID as libc::c_int;
        } else {
            flags |= libc::POSIX_SPAWN_SETPGROUP;
            libc::posix_spawnattr_setpgroup(&mut attr, 0);
        }
        libc::posix_spawnattr_setflags(&mut attr, flags as libc::c_short);
        libc::posix_spawnattr_setsigmask(&mut attr, &empty);
        libc::posix_spawnattr_setsigdefault(&mut attr, &defaults);
        for (target, fd) in stdio.into_iter().enumerate() {
            libc::posix_spawn_file_actions_adddup2(&mut actions, fd, target as i32);
        }
        if let Some(cwd) = &exec.cwd {
            libc::posix_spawn_file_actions_addchdir_np(&mut actions, cwd.as_ptr());
        }
        let mut pid: libc::pid_t = 0;
        let rc = libc::posix_spawn(
            &mut pid,
            exec.program.as_ptr(),
            &actions,
            &attr,
            argv.as_ptr(),
            envp.as_ptr(),
        );
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        if rc == 0 {
            return Ok(pid as u32);
        }
        // posix_spawn does not say which step failed: a cwd that cannot be
        // entered (now) is the chdir's fault, anything else the exec's.
        let chdir_failed = exec
            .cwd
            .as_ref()
            .is_some_and(|cwd| libc::access(cwd.as_ptr(), libc::X_OK) != 0);
        Err((if chdir_failed { 1 } else { 0 }, Errno::from_raw(rc)))
    }
}

/// Forks and execs the command; returns its pid once exec succeeded.
/// `gate`: the child waits for a byte on it before exec (pidns only).
/// `forked` runs in the parent right after the fork, before exec is
/// confirmed.
pub(super) fn fork_exec(
    exec: &Exec,
    stdio: [RawFd; 3],
    gate: Option<RawFd>,
    forked: impl FnOnce(u32),
) -> Result<u32, (u8, Errno)> {
    let (err_r, err_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| (2, e))?;
    let argv: Vec<*const libc::c_char> = exec
        .argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const libc::c_char> = exec
        .envp
        .iter()
        .map(|e| e.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    // SAFETY: the keeper (and the init) are single-threaded; the child only
    // makes async-signal-safe calls on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err((2, Errno::last()));
    }
    if pid == 0 {
        // SAFETY: in the child, see above.
        unsafe { child_after_fork(exec, &argv, &envp, stdio, err_w.as_raw_fd(), gate) }
    }
    drop(err_w);
    forked(pid as u32);
    // Also set the group from the parent: whichever side runs first, the
    // group exists before anyone signals it.
    if !exec.new_session {
        // SAFETY: setpgid on our own child.
        unsafe { libc::setpgid(pid, pid) };
    }
    let mut report = [0u8; 8];
    let mut got = 0;
    while got < report.len() {
        match nix::unistd::read(err_r.as_fd(), &mut report[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    if got == 0 {
        return Ok(pid as u32);
    }
    let stage = u32::from_le_bytes(report[..4].try_into().unwrap()) as u8;
    let errno = i32::from_le_bytes(report[4..].try_into().unwrap());
    let _ = waitpid(Pid::from_raw(pid), None);
    Err((stage, Errno::from_raw(errno)))
}

/// The child side of `fork_exec`. Never returns.
///
/// # Safety
/// Only call in a freshly forked child of a single-threaded process.
unsafe fn child_after_fork(
    exec: &Exec,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    stdio: [RawFd; 3],
    err_w: RawFd,
    gate: Option<RawFd>,
) -> ! {
    let fail = |stage: u32| -> ! {
        let errno = Errno::last_raw();
        let mut report = [0u8; 8];
        report[..4].copy_from_slice(&stage.to_le_bytes());
        report[4..].copy_from_slice(&errno.to_le_bytes());
        // SAFETY: write(2) and _exit(2) are async-signal-safe.
        unsafe {
            libc::write(err_w, report.as_ptr().cast(), report.len());
            libc::_exit(127)
        }
    };
    // SAFETY (whole block): async-signal-safe libc calls on valid data.
    unsafe {
        if let Some(gate) = gate {
            let mut byte = 0u8;
            if libc::read(gate, (&mut byte as *mut u8).cast(), 1) != 1 {
                libc::_exit(127);
            }
            libc::close(gate);
        }
        if exec.new_session {
            if libc::setsid() < 0 {
                fail(3);
            }
        } else if libc::setpgid(0, 0) < 0 {
            fail(3);
        }
        // Lift the three descriptors above 2 first so that installing one
        // cannot clobber another that happens to sit on 0..2.
        let mut high = [0; 3];
        for (slot, fd) in high.iter_mut().zip(stdio) {
            *slot = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
            if *slot < 0 {
                fail(5);
            }
        }
        for (target, fd) in high.into_iter().enumerate() {
            if libc::dup2(fd, target as i32) < 0 {
                fail(5);
            }
        }
        // A clean signal state for the command: nothing blocked, nothing
        // ignored (the keeper blocks SIGCHLD/TERM and ignores SIGPIPE).
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        if let Some(cwd) = &exec.cwd
            && libc::chdir(cwd.as_ptr()) < 0
        {
            fail(1);
        }
        libc::execve(exec.program.as_ptr(), argv.as_ptr(), envp.as_ptr());
        fail(0)
    }
}

/// Reports from the namespace init: (kind, value, extra).
pub(super) const INIT_FORKED: u32 = 0;
pub(super) const INIT_FAILED: u32 = 1;
pub(super) const INIT_EXITED: u32 = 2;
pub(super) const INIT_EXECED: u32 = 3;

pub(super) fn read_report(fd: BorrowedFd<'_>) -> io::Result<(u32, i32, i32)> {
    let mut word = [0u8; 12];
    read_exact_fd(fd, &mut word)?;
    Ok((
        u32::from_le_bytes(word[..4].try_into().unwrap()),
        i32::from_le_bytes(word[4..8].try_into().unwrap()),
        i32::from_le_bytes(word[8..].try_into().unwrap()),
    ))
}

/// The pid-1 init of a session's PID namespace. Never returns.
pub(super) fn init_main(
    exec: &Exec,
    stdio: [RawFd; 3],
    keeper: &Pidfd,
    ctl: RawFd,
    report_r: RawFd,
    report_w: RawFd,
    gate: RawFd,
) -> ! {
    let report = |kind: u32, value: i32, extra: i32| {
        let mut word = [0u8; 12];
        word[..4].copy_from_slice(&kind.to_le_bytes());
        word[4..8].copy_from_slice(&value.to_le_bytes());
        word[8..].copy_from_slice(&extra.to_le_bytes());
        // SAFETY: write(2) of a local buffer.
        unsafe { libc::write(report_w, word.as_ptr().cast(), word.len()) };
    };
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
        report(INIT_FORKED, pid as i32, 0)
    }) {
        Ok(pid) => pid,
        Err((stage, errno)) => {
            report(INIT_FAILED, stage as i32, errno as i32);
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
    report(INIT_EXECED, 0, 0);
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
            report(INIT_EXITED, status, 0);
        }
    }
}
