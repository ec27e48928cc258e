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

use crate::contain::unix::keeper::{Exec, Failure, exec_child};
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
    argv: &'a [*mut libc::c_char],
    envp: &'a [*mut libc::c_char],
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
        argv: &argv,
        envp: &envp,
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

/// The child: from the clone to exec, the steps a forked child takes
/// (`exec_child`), its failure written into the memory it shares with the
/// keeper.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is `spawn`'s `Shared`, which nothing else touches until
    // this child has exec'd or exited.
    let shared = unsafe { &mut *arg.cast::<Shared<'_>>() };
    // SAFETY: the child of a CLONE_VM | CLONE_VFORK clone made with every
    // signal blocked (see `spawn`).
    unsafe {
        exec_child(
            shared.exec,
            shared.argv,
            shared.envp,
            shared.stdio,
            Failure::Memory(&mut shared.failed),
            None,
        )
    }
}
