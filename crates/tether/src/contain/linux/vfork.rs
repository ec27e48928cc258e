//! Starting a command from the keeper the way `posix_spawn` does, written
//! out: `clone(CLONE_VM | CLONE_VFORK)` — no page tables copied, the keeper
//! suspended until the child has exec'd (or failed, which it reports in the
//! memory both share). Everything here runs in the single-threaded keeper.
//!
//! Not the C library's `posix_spawn`, because of the keeper the Python
//! wheel ships (a static musl program):
//! - musl has no action that hands the terminal's foreground to the child
//!   before exec (glibc 2.35+ has): the owner handed it over after the
//!   spawn, and a command that read the terminal at once was stopped by
//!   `SIGTTIN` first. The child does it here, whatever the C library.
//! - musl's waits for the exec on a close-on-exec pipe (four more system
//!   calls, and one more wake-up of the keeper during the exec); here the
//!   keeper resumes when glibc's does, once the exec replaced the child's
//!   memory. (Not measurable in the warm-spawn bench: within its noise.)
//! - The child enters the command's directory itself: the keeper no longer
//!   `chdir`s (`posix_spawn_file_actions_addchdir_np`, which would do it in
//!   the child, is declared weak by the standard library and was left at
//!   address 0 in the statically linked `tether`), so it does not hold the
//!   last command's directory.

use std::mem::MaybeUninit;
use std::os::fd::RawFd;

use nix::errno::Errno;

use crate::contain::unix::keeper::Exec;
use crate::contain::unix::protocol::SpawnStage;

/// The child's stack: a region of the keeper's own, which the keeper does
/// not touch while the child runs (`CLONE_VFORK` suspends it until the
/// child's exec or exit). Ample for the few C calls the child makes
/// (musl's `posix_spawn` gives its child ~5 KiB the same way).
const CHILD_STACK: usize = 16 << 10;

/// What the child reads and, if it fails, writes: memory the keeper and
/// the child share until the child's exec.
struct Shared<'a> {
    exec: &'a Exec,
    argv: *const *mut libc::c_char,
    envp: *const *mut libc::c_char,
    stdio: [RawFd; 3],
    failed: Option<(SpawnStage, i32)>,
}

/// Starts `exec` with `stdio` `[stdin, stdout, stderr]`: in its directory,
/// in a process group of its own (or a new session), with a clean signal
/// state (nothing blocked, every signal at its default) and, with
/// `exec.take_terminal`, the terminal on its stdin in its group's
/// foreground before exec.
/// Returns its pid once exec succeeded, else the stage that failed and why
/// (the failed child reaped).
pub(crate) fn spawn(exec: &Exec, stdio: [RawFd; 3]) -> Result<u32, (SpawnStage, Errno)> {
    let argv = exec.argv_ptrs();
    let envp = exec.envp_ptrs();
    let mut shared = Shared {
        exec,
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        stdio,
        failed: None,
    };
    let mut stack = [MaybeUninit::<u8>::uninit(); CHILD_STACK];
    // SAFETY: the child runs `child` on the top of `stack` (the stack grows
    // down on every architecture tether is built for), with
    // `shared` — both live in this frame, which outlives the child's use of
    // them: CLONE_VFORK returns only after the child's exec or exit.
    // Every signal is blocked around the clone, so that no handler of the
    // keeper's runs in the child on the memory they share; the child
    // unblocks them itself right before exec.
    let pid = unsafe {
        let top = stack.as_mut_ptr().add(CHILD_STACK);
        let top = top.sub(top as usize % 16).cast::<libc::c_void>();
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let pid = libc::clone(
            child,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut shared).cast(),
        );
        let errno = Errno::last();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err((SpawnStage::Fork, errno));
        }
        pid
    };
    // The child wrote this before it exited, if it failed (CLONE_VFORK:
    // it is done with the memory by now).
    if let Some((stage, errno)) = shared.failed {
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        return Err((stage, Errno::from_raw(errno)));
    }
    Ok(pid as u32)
}

/// The child: from the clone to exec. Shares the keeper's memory, so it
/// makes only system calls (through the C library's thin wrappers) and
/// writes nothing but `Shared::failed`.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is `spawn`'s `Shared`, which nothing else touches until
    // this child has exec'd or exited.
    let shared = unsafe { &mut *arg.cast::<Shared<'_>>() };
    // SAFETY: in the child of a CLONE_VM | CLONE_VFORK clone, on the
    // memory described above.
    unsafe { start(shared) }
}

/// Records `stage` and the current errno for the keeper, and exits.
///
/// # Safety
/// Only in the child of [`spawn`].
unsafe fn fail(shared: &mut Shared<'_>, stage: SpawnStage) -> ! {
    shared.failed = Some((stage, Errno::last_raw()));
    // SAFETY: _exit(2) ends the child without running anything of the
    // keeper's (no atexit handlers, no buffers flushed).
    unsafe { libc::_exit(127) }
}

/// # Safety
/// Only in the child of [`spawn`].
unsafe fn start(shared: &mut Shared<'_>) -> ! {
    let exec = shared.exec;
    // SAFETY (whole block): system calls on descriptors and memory that
    // are valid for the child (see `spawn`).
    unsafe {
        let grouped = if exec.new_session {
            libc::setsid() >= 0
        } else {
            libc::setpgid(0, 0) == 0
        };
        if !grouped {
            fail(shared, SpawnStage::Setup);
        }
        // Installed in order 0, 1, 2; a descriptor that a later stream
        // needs and an earlier one would overwrite is moved above 2 first.
        let mut fds = shared.stdio;
        for target in 0..3 {
            if fds[target + 1..].contains(&(target as RawFd)) {
                let lifted = libc::fcntl(target as RawFd, libc::F_DUPFD_CLOEXEC, 3);
                if lifted < 0 {
                    fail(shared, SpawnStage::Stdio);
                }
                for fd in &mut fds[target + 1..] {
                    if *fd == target as RawFd {
                        *fd = lifted;
                    }
                }
            }
            let installed = if fds[target] == target as RawFd {
                // Already there: only its close-on-exec flag must go.
                libc::fcntl(target as RawFd, libc::F_SETFD, 0) == 0
            } else {
                libc::dup2(fds[target], target as RawFd) == target as RawFd
            };
            if !installed {
                fail(shared, SpawnStage::Stdio);
            }
        }
        // Every signal is still blocked (see `spawn`): this process, in the
        // background until now, gets no SIGTTOU for it. Best effort, as
        // glibc's action is not: if it fails the owner hands the terminal
        // over after the spawn (see `foreground.rs`).
        if exec.take_terminal {
            libc::tcsetpgrp(0, libc::getpid());
        }
        // A clean signal state for the command: every signal at its default
        // (the keeper ignores SIGPIPE; exec itself resets only handlers),
        // then nothing blocked.
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        // This child's own directory (no CLONE_FS: the keeper's stays).
        if let Some(cwd) = &exec.cwd
            && libc::chdir(cwd.as_ptr()) < 0
        {
            fail(shared, SpawnStage::Chdir);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve(
            exec.program.as_ptr(),
            shared.argv.cast(),
            shared.envp.cast(),
        );
        fail(shared, SpawnStage::Exec)
    }
}
