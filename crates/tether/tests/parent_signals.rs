//! A command that signals "its parent" (`kill -USR1 $PPID`) reaches its
//! keeper: the keeper must survive every signal it can be sent, and pass
//! it on to the owner — the process that asked for the command, its parent
//! under `subprocess` or a shell — whose own disposition then applies
//! (issue 34 item 7; CPython's `test_communicate_eintr`, Xvfb's "ready"
//! `SIGUSR1`).

// Real Linux process trees and signals: the suite runs on Linux; macOS is
// type-checked (its keeper survives these signals but cannot tell who
// sent one, so passes none on).
#![cfg(target_os = "linux")]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tether::{Command, Stdio};
use tether_testkit::{TAG_VAR, TagGuard, alone, assert_nothing_left};

/// For each signal, the `si_pid` of the last one this process received
/// (0: none yet), if it came marked as passed on by a keeper (`SI_QUEUE`);
/// `u32::MAX` if it came otherwise.
static SENDERS: [AtomicU32; 65] = [const { AtomicU32::new(0) }; 65];

extern "C" fn record(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let from = unsafe {
        if (*info).si_code == libc::SI_QUEUE {
            (*info).si_pid() as u32
        } else {
            u32::MAX
        }
    };
    SENDERS[sig as usize].store(from, Ordering::SeqCst);
}

/// Installs [`record`] as this process's handler for each of `signals`.
fn handle(signals: &[i32]) {
    for &sig in signals {
        // SAFETY: a zeroed sigaction with an SA_SIGINFO handler that only
        // stores to an atomic (async-signal-safe).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = record as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            assert_eq!(
                libc::sigaction(sig, &action, std::ptr::null_mut()),
                0,
                "{sig}"
            );
        }
    }
}

/// The signals programs send their parent to tell it something, which the
/// keeper passes on: the user, timer, I/O and resource signals and every
/// real-time one (not `SIGTERM`, which ends the session; not
/// SIGINT/SIGHUP/SIGQUIT, the owner's to forward; not `SIGCHLD`, the
/// job-control signals or the faults; `SIGWINCH` and `SIGURG` are passed
/// on too, but ignored by default, so left out here).
fn passed_on() -> Vec<i32> {
    let mut signals = vec![
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGPWR,
        libc::SIGSTKFLT,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGPIPE,
    ];
    signals.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    signals
}

/// Waits (bounded) until this process's handler has seen each of
/// `signals`: a signal the keeper passed on is delivered to whichever of
/// our threads the kernel picks, maybe just after the command's end
/// reached the waiting one.
fn wait_for_senders(signals: &[i32]) -> Vec<(i32, u32)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let seen: Vec<(i32, u32)> = signals
            .iter()
            .map(|&sig| (sig, SENDERS[sig as usize].load(Ordering::SeqCst)))
            .collect();
        if seen.iter().all(|&(_, from)| from != 0) || Instant::now() > deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

// issue 34 item 7: `kill -USR1 $PPID` killed the keeper ("tether keeper
// died unexpectedly", exit 125, output lost), and so did every other
// signal left at its default in the keeper. Now each reaches the owner —
// sent by the keeper, through the owner's pidfd — and the owner's
// handler runs; the command finishes with its output and status.
#[test]
fn every_signal_a_command_sends_its_parent_reaches_the_owner() {
    if !alone(
        module_path!(),
        "every_signal_a_command_sends_its_parent_reaches_the_owner",
    ) {
        return;
    }
    let signals = passed_on();
    handle(&signals);
    let guard = TagGuard::new("parent-signals");
    let kills: String = signals
        .iter()
        .map(|sig| format!("kill -{sig} $PPID; "))
        .collect();
    let child = Command::new("/bin/sh")
        .args(["-c", &format!("{kills}echo child-finished")])
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::Null)
        .stdout(Stdio::Piped)
        .spawn()
        .expect("spawn");
    let keeper = child.keeper_pid().expect("a keeper on Unix");
    let output = child.wait_with_output().expect("the keeper survived");
    assert_eq!(output.stdout, b"child-finished\n");
    assert!(output.status.success(), "{:?}", output.status);
    // Every one came, each sent by the keeper (which passed it on), none
    // by the command itself.
    let seen = wait_for_senders(&signals);
    let wrong: Vec<(i32, u32)> = seen
        .into_iter()
        .filter(|&(_, from)| from != keeper)
        .collect();
    assert!(
        wrong.is_empty(),
        "not from the keeper {keeper} (0: never came): {wrong:?}"
    );
    assert_nothing_left();
}

// The signals the keeper keeps: it survives each (a fault signal sent to
// it killed it, a stop signal stopped it until its owner resumed it), and
// passes none of them on — `SIGINT`/`SIGHUP`/`SIGQUIT` are the owner's to
// forward, the job-control signals would stop or resume the owner, the
// faults say something about the process that gets them. (`SIGTERM` ends
// the session: `run_cli.rs`.)
#[test]
fn the_keeper_survives_the_signals_it_keeps() {
    if !alone(module_path!(), "the_keeper_survives_the_signals_it_keeps") {
        return;
    }
    let kept = [
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGTSTP,
        libc::SIGTTIN,
        libc::SIGTTOU,
        libc::SIGCONT,
        libc::SIGCHLD,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
        libc::SIGTRAP,
        libc::SIGABRT,
        libc::SIGSYS,
    ];
    handle(&kept);
    let guard = TagGuard::new("parent-signals-kept");
    let kills: String = kept
        .iter()
        .map(|sig| format!("kill -{sig} $PPID; "))
        .collect();
    let output = Command::new("/bin/sh")
        .args(["-c", &format!("{kills}echo child-finished")])
        .env(TAG_VAR, guard.tag())
        .stdin(Stdio::Null)
        .stdout(Stdio::Piped)
        .spawn()
        .expect("spawn")
        .wait_with_output()
        .expect("the keeper survived");
    assert_eq!(output.stdout, b"child-finished\n");
    assert!(output.status.success(), "{:?}", output.status);
    // Passed on means sent as a keeper sends (`SI_QUEUE`); the kernel's
    // own `SIGCHLD` for the keeper's exit is not.
    let reached: Vec<i32> = kept
        .iter()
        .copied()
        .filter(|&sig| !matches!(SENDERS[sig as usize].load(Ordering::SeqCst), 0 | u32::MAX))
        .collect();
    assert!(reached.is_empty(), "passed on: {reached:?}");
    assert_nothing_left();
}
