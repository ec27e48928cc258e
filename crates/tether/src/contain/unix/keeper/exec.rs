//! Starting the command with `posix_spawn` from the keeper. Everything here
//! runs in the single-threaded keeper.

use std::ffi::CString;
use std::os::fd::RawFd;

use nix::errno::Errno;

use crate::contain::unix::protocol::{SpawnSpec, SpawnStage};

/// Everything `execve` needs, built before starting anything.
pub(crate) struct Exec {
    pub(crate) program: CString,
    pub(crate) argv: Vec<CString>,
    pub(crate) envp: Vec<CString>,
    pub(crate) cwd: Option<CString>,
    pub(crate) new_session: bool,
    /// Hand the terminal on fd 0 to the command's process group before
    /// exec (see [`posix_spawn`]).
    pub(crate) take_terminal: bool,
}

impl Exec {
    pub(crate) fn prepare(spec: &SpawnSpec) -> Result<Exec, Errno> {
        let c = |b: &[u8]| CString::new(b.to_vec()).map_err(|_| Errno::EINVAL);
        Ok(Exec {
            program: c(&spec.program)?,
            argv: spec.argv.iter().map(|a| c(a)).collect::<Result<_, _>>()?,
            envp: spec.envp.iter().map(|e| c(e)).collect::<Result<_, _>>()?,
            cwd: spec.cwd.as_deref().map(c).transpose()?,
            new_session: spec.new_session,
            take_terminal: spec.take_terminal && !spec.new_session,
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

fn pointers(items: &[CString]) -> Vec<*mut libc::c_char> {
    items
        .iter()
        .map(|a| a.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect()
}

/// Starts the command with `posix_spawn` (a vfork: no page-table copy, and
/// exec errors come back as the return value), in a process group of its
/// own (or a new session), with a clean signal state and `stdio` installed.
///
/// With `exec.take_terminal`, the command's group becomes the foreground of
/// the terminal on its stdin *in the child, before exec* (glibc 2.35+:
/// `posix_spawn_file_actions_addtcsetpgrp_np`). Done by the owner after the
/// spawn instead, a command that reads the terminal at once gets `SIGTTIN`
/// first (2 of 20 `tether run -- head -c1` runs with input typed ahead, here),
/// and a late report of that stop undid a Ctrl-Z. Where the C library has
/// no such action, the owner hands the terminal over after the spawn.
pub(crate) fn posix_spawn(exec: &Exec, stdio: [RawFd; 3]) -> Result<u32, (SpawnStage, Errno)> {
    let argv = exec.argv_ptrs();
    let envp = exec.envp_ptrs();
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
            flags |= crate::contain::os::keeper::POSIX_SPAWN_SETSID;
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
        if exec.take_terminal {
            // After the dup2s: fd 0 is the terminal now. glibc runs file
            // actions after setpgid, with every signal blocked (so the
            // background child's tcsetpgrp raises no SIGTTOU).
            hand_over_terminal(&mut actions, 0);
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
        let stage = if chdir_failed {
            SpawnStage::Chdir
        } else {
            SpawnStage::Exec
        };
        Err((stage, Errno::from_raw(rc)))
    }
}

/// Adds "make the child's process group the foreground of the terminal on
/// `fd`" to `actions`, where the C library can (`false` otherwise).
fn hand_over_terminal(actions: &mut libc::posix_spawn_file_actions_t, fd: RawFd) -> bool {
    #[cfg(target_os = "linux")]
    {
        crate::contain::os::keeper::add_tcsetpgrp_action(actions, fd)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (actions, fd);
        false
    }
}
