//! What the keeper needs to start a command, and the fork it starts one
//! with where the platform's spawn (`os::keeper::spawn`) cannot. Everything
//! here runs in the single-threaded keeper.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::sys::wait::waitpid;
use nix::unistd::Pid;

use crate::contain::unix::channel::MAX_PASSED_FDS;
use crate::contain::unix::protocol::{SetupSpec, SpawnSpec, SpawnStage};

/// Everything `execve` needs, built before starting anything.
pub(crate) struct Exec {
    pub(crate) program: CString,
    pub(crate) argv: Vec<CString>,
    pub(crate) envp: Vec<CString>,
    pub(crate) cwd: Option<CString>,
    pub(crate) new_session: bool,
    /// Stdin is a terminal to make the command's controlling terminal.
    pub(crate) controlling_tty: bool,
    /// Hand the terminal on fd 0 to the command's process group before
    /// exec (where the platform's spawn can).
    pub(crate) take_terminal: bool,
    /// `cgroup.procs` of the session's cgroups: the command writes `0`
    /// (itself) to each before anything else, so it runs in them from its
    /// first instruction. Non-empty means the fork path ([`fork_exec`]).
    pub(crate) cgroup_procs: Vec<RawFd>,
    /// What the command's side does beyond the usual.
    pub(crate) setup: SetupSpec,
    /// The descriptors passed on: (the keeper's, the command's number).
    pub(crate) passed: Vec<(RawFd, i32)>,
    /// `setgroups`'s list (prepared here: no allocation after the fork).
    groups: Vec<libc::gid_t>,
}

impl Exec {
    pub(crate) fn prepare(spec: &SpawnSpec) -> Result<Exec, Errno> {
        let c = |b: &[u8]| CString::new(b.to_vec()).map_err(|_| Errno::EINVAL);
        Ok(Exec {
            program: c(&spec.program)?,
            argv: spec.argv.iter().map(|a| c(a)).collect::<Result<_, _>>()?,
            envp: if spec.setup.keeper_env {
                keeper_environment(&spec.envp)
                    .iter()
                    .map(|e| c(e))
                    .collect::<Result<_, _>>()?
            } else {
                spec.envp.iter().map(|e| c(e)).collect::<Result<_, _>>()?
            },
            cwd: spec.cwd.as_deref().map(c).transpose()?,
            new_session: spec.new_session || spec.controlling_tty,
            controlling_tty: spec.controlling_tty,
            take_terminal: spec.take_terminal && !spec.new_session && !spec.controlling_tty,
            cgroup_procs: Vec::new(),
            setup: spec.setup.clone(),
            passed: Vec::new(),
            groups: spec.setup.groups.clone().unwrap_or_default(),
        })
    }

    /// NULL-terminated argv pointers (valid while `self` lives).
    pub(crate) fn argv_ptrs(&self) -> Vec<*mut libc::c_char> {
        pointers(&self.argv)
    }

    /// NULL-terminated envp pointers (valid while `self` lives).
    pub(crate) fn envp_ptrs(&self) -> Vec<*mut libc::c_char> {
        pointers(&self.envp)
    }
}

/// This keeper's own environment for its command (`SetupSpec::keeper_env`):
/// every variable but the keeper's tag, then the command's tag from `envp`.
fn keeper_environment(envp: &[Vec<u8>]) -> Vec<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let tag_var = crate::spawn_tag::SPAWN_TAG_VAR.as_bytes();
    let is_tag = |entry: &[u8]| {
        entry
            .strip_prefix(tag_var)
            .is_some_and(|rest| rest.first() == Some(&b'='))
    };
    let mut vars: Vec<Vec<u8>> = std::env::vars_os()
        .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
        .filter(|entry| !is_tag(entry))
        .collect();
    vars.extend(envp.iter().filter(|entry| is_tag(entry)).cloned());
    vars
}

fn pointers(items: &[CString]) -> Vec<*mut libc::c_char> {
    items
        .iter()
        .map(|a| a.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect()
}

/// Forks and execs the command; returns its pid once exec succeeded. The
/// child waits for a byte on `gate` (if any) before exec. `forked` runs in
/// the parent right after the fork, before exec is confirmed.
///
/// The platform's spawn (`os::keeper::spawn`: a `CLONE_VFORK` clone on
/// Linux, `posix_spawn` on macOS) cannot give a command a controlling
/// terminal (`posix_spawn` has no file action for `TIOCSCTTY`, and on
/// macOS opening a tty after `setsid` does not acquire one) nor enter
/// cgroups before exec, so PTY sessions, limited sessions — and the PID
/// namespace's init, which needs the gate — start the command with this
/// plain fork. It is cheap here: the keeper is a small single-threaded
/// process.
pub(crate) fn fork_exec(
    exec: &Exec,
    stdio: [RawFd; 3],
    gate: Option<RawFd>,
    forked: impl FnOnce(u32),
) -> Result<u32, (SpawnStage, Errno)> {
    let (err_r, err_w) =
        crate::contain::unix::stdio::pipe().map_err(|e| (SpawnStage::Fork, super::errno_of(&e)))?;
    // Above every descriptor passed on: the child's `setup` installs them
    // with dup2, and one on the same number replaced this pipe — the spawn
    // then looked started, and a failed exec reported its errno into the
    // command's descriptor.
    let above = exec
        .passed
        .iter()
        .map(|&(_, target)| target + 1)
        .max()
        .unwrap_or(0);
    let err_w = if err_w.as_raw_fd() < above {
        // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we own, or -1.
        let lifted = unsafe { libc::fcntl(err_w.as_raw_fd(), libc::F_DUPFD_CLOEXEC, above) };
        if lifted < 0 {
            return Err((SpawnStage::Fork, Errno::last()));
        }
        // The low copy goes now: held until the read below, it kept the
        // pipe open and the read never saw the EOF a successful exec gives.
        drop(err_w);
        // SAFETY: `lifted` is a descriptor we just made and own.
        unsafe { OwnedFd::from_raw_fd(lifted) }
    } else {
        err_w
    };
    let argv = exec.argv_ptrs();
    let envp = exec.envp_ptrs();
    // SAFETY: the init is single-threaded; the child only makes
    // async-signal-safe calls on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err((SpawnStage::Fork, Errno::last()));
    }
    if pid == 0 {
        // SAFETY: in the child, see above.
        unsafe {
            exec_child(
                exec,
                &argv,
                &envp,
                stdio,
                Failure::Pipe(err_w.as_raw_fd()),
                gate,
            )
        }
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
    let stage = SpawnStage::from_code(report[0]).unwrap_or(SpawnStage::Setup);
    let errno = i32::from_le_bytes(report[4..].try_into().unwrap());
    let _ = waitpid(Pid::from_raw(pid), None);
    Err((stage, Errno::from_raw(errno)))
}

/// The signals below 32 (bit `sig`) whose disposition in this process is
/// not the default: the ones a command's side of a spawn resets. All of
/// them until [`note_dispositions`] has looked.
static NOT_DEFAULT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(u32::MAX);

/// Looks once at this process's signal dispositions, so that each spawn's
/// child resets only the signals not at their default — a handful (those
/// the keeper ignores, those it inherited ignored, the standard library's
/// fault handlers) where it reset all 29, one system call each, on every
/// spawn. The keeper calls it after the last change it makes to a
/// disposition (`Keeper::new`); code that changes one later must call it
/// again, or a command could inherit an ignored signal. (`run_cli.rs`'s
/// `the_command_starts_with_no_signal_ignored_or_blocked` runs a command
/// under an owner that ignores seven signals: it fails if the child resets
/// none of them.)
pub(crate) fn note_dispositions() {
    let mut not_default = 0u32;
    for sig in 1..32 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: sigaction with no new action only fills `old`, which we own.
        let (rc, old) = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            let rc = libc::sigaction(sig, std::ptr::null(), &mut old);
            (rc, old)
        };
        if rc != 0 || old.sa_sigaction != libc::SIG_DFL {
            not_default |= 1 << sig;
        }
    }
    NOT_DEFAULT.store(not_default, std::sync::atomic::Ordering::Relaxed);
}

/// How a child that failed before exec tells the keeper the stage and
/// the errno.
pub(crate) enum Failure<'a> {
    /// Eight bytes on this pipe (a forked child: `fork_exec`).
    Pipe(RawFd),
    /// Written here, in memory the keeper shares with the child until its
    /// exec (a `CLONE_VM` child: `linux/vfork.rs`).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Memory(&'a mut Option<(SpawnStage, i32)>),
}

/// The child's side of a spawn, from the fork (or clone) to exec: the
/// session's cgroups, the gate, its group or session, stdio, the terminal,
/// a clean signal state, its directory. Never returns.
///
/// Signals stay as the keeper left them until right before exec: a
/// `CLONE_VM` child is started with every signal blocked, so no handler of
/// the keeper's runs on the memory it shares.
///
/// # Safety
/// Only call in a freshly forked child of a single-threaded process, or in
/// the child of a `CLONE_VM | CLONE_VFORK` clone made with every signal
/// blocked.
pub(crate) unsafe fn exec_child(
    exec: &Exec,
    argv: &[*mut libc::c_char],
    envp: &[*mut libc::c_char],
    stdio: [RawFd; 3],
    mut failure: Failure<'_>,
    gate: Option<RawFd>,
) -> ! {
    let mut fail = |stage: SpawnStage| -> ! {
        let errno = Errno::last_raw();
        match &mut failure {
            Failure::Pipe(err_w) => {
                let mut report = [0u8; 8];
                report[0] = stage.code();
                report[4..].copy_from_slice(&errno.to_le_bytes());
                // SAFETY: write(2) is async-signal-safe.
                unsafe { libc::write(*err_w, report.as_ptr().cast(), report.len()) };
            }
            Failure::Memory(slot) => **slot = Some((stage, errno)),
        }
        // SAFETY: _exit(2) is async-signal-safe and runs nothing of the
        // keeper's (no atexit handlers, no buffers flushed).
        unsafe { libc::_exit(127) }
    };
    // SAFETY (whole block): async-signal-safe libc calls on valid data.
    unsafe {
        // Into the session's cgroups first: everything after, exec
        // included, is charged to them and limited by them.
        if enter_cgroups(&exec.cgroup_procs).is_err() {
            fail(SpawnStage::Cgroup);
        }
        if let Some(gate) = gate {
            let mut byte = 0u8;
            if libc::read(gate, (&mut byte as *mut u8).cast(), 1) != 1 {
                libc::_exit(127);
            }
            libc::close(gate);
        }
        if exec.new_session {
            if libc::setsid() < 0 {
                fail(SpawnStage::Setup);
            }
        } else if libc::setpgid(0, 0) < 0 {
            fail(SpawnStage::Setup);
        }
        // Lift the three descriptors above 2 first so that installing one
        // cannot clobber another that happens to sit on 0..2.
        let mut high = [0; 3];
        for (slot, fd) in high.iter_mut().zip(stdio) {
            *slot = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
            if *slot < 0 {
                fail(SpawnStage::Stdio);
            }
        }
        for (target, fd) in high.into_iter().enumerate() {
            if libc::dup2(fd, target as i32) < 0 {
                fail(SpawnStage::Stdio);
            }
        }
        // The foreground of the terminal on stdin, as the platform's spawn
        // gives it (see `linux/vfork.rs`): with SIGTTOU blocked, since this
        // child is not yet in the foreground.
        if exec.take_terminal {
            let mut ttou: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut ttou);
            libc::sigaddset(&mut ttou, libc::SIGTTOU);
            libc::sigprocmask(libc::SIG_BLOCK, &ttou, std::ptr::null_mut());
            libc::tcsetpgrp(0, libc::getpid());
        }
        // The session leader adopts its stdin, a PTY slave, as controlling
        // terminal: the line discipline then turns Ctrl-C into SIGINT for
        // the foreground group, and the slave's hang-up reaches the
        // session. (The owner opened the slave with O_NOCTTY, so nobody
        // else holds it as a controlling terminal.)
        if exec.controlling_tty && libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
            fail(SpawnStage::Stdio);
        }
        // A clean signal state for the command: nothing ignored (the keeper
        // ignores SIGPIPE; exec itself resets only handlers), then — right
        // before exec — nothing blocked (the keeper blocks SIGCHLD/TERM).
        // Only what is not at its default here needs the call.
        let not_default = NOT_DEFAULT.load(std::sync::atomic::Ordering::Relaxed);
        for sig in 1..32 {
            if not_default & (1 << sig) != 0 && sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        if let Some(cwd) = &exec.cwd
            && libc::chdir(cwd.as_ptr()) < 0
        {
            fail(SpawnStage::Chdir);
        }
        if !exec.setup.is_empty() && setup(exec).is_err() {
            fail(SpawnStage::Setup);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve(
            exec.program.as_ptr(),
            argv.as_ptr().cast(),
            envp.as_ptr().cast(),
        );
        fail(SpawnStage::Exec)
    }
}

/// What `SetupSpec` asks of the command's side, after its streams and its
/// directory, in `_posixsubprocess`'s order: the descriptors passed on
/// (lifted above every target first, so that installing one cannot
/// clobber another), the umask, the ignored signals, then the
/// credentials — supplementary groups, group, user — last, while the
/// privilege to change them lasts. Async-signal-safe.
///
/// # Safety
/// As [`exec_child`]'s.
unsafe fn setup(exec: &Exec) -> Result<(), ()> {
    let check = |rc: libc::c_int| if rc < 0 { Err(()) } else { Ok(()) };
    // SAFETY (whole block): async-signal-safe libc calls on valid data.
    unsafe {
        // Close-on-exec copies at or above `above` (never a target), all
        // made before the first target is written: a descriptor passed on
        // may sit on another's target.
        let above = exec.passed.iter().map(|&(_, t)| t).max().unwrap_or(2) + 1;
        let mut high: [RawFd; MAX_PASSED_FDS] = [-1; MAX_PASSED_FDS];
        for (slot, &(fd, _)) in high.iter_mut().zip(&exec.passed) {
            *slot = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, above);
            check(*slot)?;
        }
        for (&copy, &(_, target)) in high.iter().zip(&exec.passed) {
            // dup2 clears close-on-exec on the target: inheritable.
            check(libc::dup2(copy, target))?;
        }
        if let Some(mask) = exec.setup.umask {
            libc::umask(mask as libc::mode_t);
        }
        for sig in 1..32 {
            if exec.setup.ignore & (1 << sig) != 0 {
                libc::signal(sig, libc::SIG_IGN);
            }
        }
        if exec.setup.groups.is_some() {
            check(libc::setgroups(
                exec.groups.len() as _,
                exec.groups.as_ptr(),
            ))?;
        }
        if let Some(gid) = exec.setup.gid {
            check(libc::setregid(gid, gid))?;
        }
        if let Some(uid) = exec.setup.uid {
            check(libc::setreuid(uid, uid))?;
        }
    }
    Ok(())
}

/// Writes `0` (the calling process) to each `cgroup.procs` descriptor:
/// moves the caller into those cgroups. Async-signal-safe (a `write(2)`
/// per descriptor), for a freshly forked child.
pub(crate) fn enter_cgroups(procs: &[RawFd]) -> Result<(), ()> {
    for &fd in procs {
        // SAFETY: write(2) of a static byte to a descriptor we hold.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            return Err(());
        }
    }
    Ok(())
}
