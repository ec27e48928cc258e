//! `tether init` on Unix: the sigwait loop, the reaping, the forwarding
//! and the leftover ladder described in `crate::init`.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::foreground::Terminal;
use crate::contain::Descendant;
use crate::contain::sys::{self, Pinned};
use crate::error::{Error, Result};
use crate::init::InitReport;

/// The signals passed on to the program's process group: what `docker
/// stop`, Kubernetes, a terminal or an operator send to a container.
const FORWARDED: [Signal; 7] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// How long `SIGKILL` rounds go on before the rest is reported as
/// survivors (a process in uninterruptible sleep can outlast `SIGKILL`).
const VERIFY_WINDOW: Duration = Duration::from_secs(5);
/// How long one `SIGKILL` round waits for its deaths.
const KILL_ROUND: Duration = Duration::from_millis(100);

pub(crate) fn run(program: &OsStr, args: &[OsString], grace: Duration) -> Result<InitReport> {
    let me = std::process::id();
    let pid1 = me == 1;
    // As PID 1 every orphan comes here already; otherwise ask for the
    // program's (Linux). Where the platform has no subreaper, init still
    // reaps and kills whatever stays its descendant.
    let adopts_orphans = pid1 || crate::contain::os::set_child_subreaper().unwrap_or(false);
    let mut signals = SigSet::empty();
    for sig in FORWARDED {
        signals.add(sig);
    }
    signals.add(Signal::SIGCHLD);
    // Before the spawn: a child that exits at once must still be seen.
    signals.thread_block().map_err(io::Error::from)?;

    // Its own process group, and a clean signal mask: std's spawn keeps
    // the mask of the calling thread (measured: the program saw SIGTERM
    // blocked and `kill -TERM $$` did nothing), so the child clears it
    // before exec. That makes std fork rather than posix_spawn, which
    // costs nothing here: init is small (the owner-never-forks rule is
    // about owners with large memory).
    let mut command = std::process::Command::new(program);
    command.args(args).process_group(0);
    // SAFETY: only async-signal-safe calls between fork and exec
    // (sigemptyset, pthread_sigmask), on memory of the child's own stack.
    unsafe {
        command.pre_exec(|| {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            match libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) {
                0 => Ok(()),
                errno => Err(io::Error::from_raw_os_error(errno)),
            }
        });
    }
    let child = command.spawn().map_err(|e| spawn_error(program, e))?;
    let main = child.id();
    drop(child); // reaped below, by waitpid(-1)
    let terminal = Terminal::new(main);
    if terminal.is_some() {
        // The program may have touched the terminal before it was given
        // the foreground and been stopped for it: let it go on.
        // SAFETY: kill(2) of the program's group, whose leader is unreaped.
        unsafe { libc::kill(-(main as libc::pid_t), libc::SIGCONT) };
    }

    let mut report = InitReport {
        code: None,
        signal: None,
        exit_code: 0,
        pid1,
        adopts_orphans,
        forwarded: 0,
        reaped: 0,
        terminated: 0,
        killed: 0,
        survivors: Vec::new(),
    };
    let mut main_status = None;
    while main_status.is_none() {
        let sig = match signals.wait() {
            Ok(sig) => sig,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(Error::Io(e.into())),
        };
        if sig == Signal::SIGCHLD {
            main_status = reap_exited(main, &mut report.reaped);
        } else {
            // The leader is unreaped until SIGCHLD is handled: the group
            // id is still the program's.
            // SAFETY: kill(2) with a negative pid signals a group.
            if unsafe { libc::kill(-(main as libc::pid_t), sig as i32) } == 0 {
                report.forwarded += 1;
            }
        }
    }
    drop(terminal);
    match main_status {
        Some(WaitStatus::Exited(_, code)) => {
            report.code = Some(code);
            report.exit_code = code;
        }
        Some(WaitStatus::Signaled(_, sig, _)) => {
            report.signal = Some(sig as i32);
            report.exit_code = 128 + sig as i32;
        }
        _ => unreachable!("the loop ends on the program's exit"),
    }
    kill_leftovers(grace, &mut report);
    Ok(report)
}

fn spawn_error(program: &OsStr, e: io::Error) -> Error {
    let name = program.to_string_lossy().into_owned();
    match e.kind() {
        io::ErrorKind::NotFound => Error::ProgramNotFound {
            path_searched: if name.contains('/') {
                String::new()
            } else {
                std::env::var("PATH").unwrap_or_default()
            },
            program: name,
        },
        io::ErrorKind::PermissionDenied => Error::NotExecutable {
            path: program.into(),
            reason: e.to_string(),
        },
        _ => Error::Io(e),
    }
}

/// Reaps every exited child; returns the program's status if it was among
/// them.
fn reap_exited(main: u32, reaped: &mut usize) -> Option<WaitStatus> {
    let mut found = None;
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return found,
            Ok(status) => {
                *reaped += 1;
                if status.pid().is_some_and(|p| p.as_raw() as u32 == main) {
                    found = Some(status);
                }
            }
        }
    }
}

/// Every live descendant of init, each pinned and verified to still be a
/// descendant after it was pinned (so a recycled pid is never signalled).
fn descendants() -> Vec<Pinned> {
    let me = std::process::id();
    let mut known: HashSet<u32> = HashSet::from([me]);
    let mut frontier = vec![me];
    let mut out = Vec::new();
    while let Some(parent) = frontier.pop() {
        for pid in sys::children(parent) {
            if known.contains(&pid) {
                continue;
            }
            let Ok(identity) = sys::identity_of(pid) else {
                continue;
            };
            let Ok(Some(pin)) = Pinned::pin(&identity) else {
                continue;
            };
            let Ok(info) = sys::process(pid) else {
                continue;
            };
            if pin.has_exited() || !known.contains(&info.ppid) {
                continue;
            }
            known.insert(pid);
            frontier.push(pid);
            out.push(pin);
        }
    }
    out
}

/// The ladder for what the program left behind: `SIGTERM` (+ `SIGCONT`)
/// to all of it, the grace, then `SIGKILL` rounds (processes forked
/// meanwhile included) until nothing is left or [`VERIFY_WINDOW`] passes.
fn kill_leftovers(grace: Duration, report: &mut InitReport) {
    let mut discard = 0;
    reap_exited(0, &mut report.reaped);
    let first = descendants();
    if first.is_empty() {
        return;
    }
    let mut seen: HashSet<(u32, u64)> = HashSet::new();
    for pin in &first {
        seen.insert(key(pin));
        let _ = pin.terminate();
    }
    // Processes forked during the grace get SIGTERM too, as they appear:
    // the wait is cut into slices for that.
    let deadline = Instant::now() + grace;
    let mut pins = first;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let refs: Vec<&Pinned> = pins.iter().filter(|p| !p.has_exited()).collect();
        if refs.is_empty() || left.is_zero() {
            break;
        }
        sys::wait_exited(&refs, left.min(KILL_ROUND));
        reap_exited(0, &mut discard);
        for pin in descendants() {
            if seen.insert(key(&pin)) {
                let _ = pin.terminate();
                pins.push(pin);
            }
        }
    }
    report.terminated = pins.iter().filter(|p| p.has_exited()).count();
    report.reaped += discard;
    let give_up = Instant::now() + VERIFY_WINDOW;
    let mut killed: HashSet<(u32, u64)> = HashSet::new();
    loop {
        reap_exited(0, &mut report.reaped);
        let alive = descendants();
        if alive.is_empty() {
            break;
        }
        if Instant::now() >= give_up {
            report.survivors = alive
                .iter()
                .map(|p| Descendant {
                    pid: p.identity().pid,
                    command: sys::describe(p.identity().pid),
                })
                .collect();
            break;
        }
        for pin in &alive {
            if pin.kill().unwrap_or(false) {
                killed.insert(key(pin));
            }
        }
        let refs: Vec<&Pinned> = alive.iter().collect();
        sys::wait_exited(&refs, KILL_ROUND);
    }
    reap_exited(0, &mut report.reaped);
    let surviving: HashSet<u32> = report.survivors.iter().map(|d| d.pid).collect();
    report.killed = killed
        .iter()
        .filter(|(pid, _)| !surviving.contains(pid))
        .count();
}

fn key(pin: &Pinned) -> (u32, u64) {
    let id = pin.identity();
    (id.pid, id.start_time)
}
