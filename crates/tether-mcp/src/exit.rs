//! How a command ended, said for a model: the status word, the exit code
//! or the signal's name, and a sentence when the ending needs explaining
//! (a signal nobody here sent, a timeout, a kill, a shell that could not
//! find the program). Signal numbers differ between Unix kernels, so their
//! names come from `libc` on Unix (`cfg(unix)`); Windows has no signals.

use std::time::Duration;

use tether::registry::{CommandLine, KillReason, SessionInfo, SessionState};

/// The ending of a session's main process as results report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ending {
    /// `running`, `exited`, `killed`, `timed_out` or `lost`.
    pub status: &'static str,
    /// The exit code, when the main process exited normally.
    pub exit_code: Option<i32>,
    /// The signal's name (`SIGKILL`), when a signal ended it.
    pub signal: Option<String>,
    /// A sentence explaining the ending, when it needs one.
    pub note: Option<String>,
}

/// The ending of `info`'s main process. Its timeout is named in the
/// timeout sentence; when `/bin/sh -c` ran it, exit codes 126 and 127 come
/// from the shell and are explained as such.
pub fn ending(info: &SessionInfo) -> Ending {
    let timeout = info.timeout;
    let shell = matches!(info.command_line, CommandLine::Shell(_));
    let exit = info.exit;
    let exit_code = exit.and_then(|e| e.code());
    // No exit code: a signal ended it, and the shell code is 128 + its number.
    let signo = exit
        .filter(|e| e.code().is_none())
        .map(|e| e.shell_code() - 128);
    let signal = signo.map(signal_name);
    let note = match info.state {
        SessionState::Running => None,
        SessionState::TimedOut => Some(match (info.kill_reason, timeout) {
            (Some(KillReason::IdleTimeout), _) => {
                "timed out: no output for too long; the whole tree was killed".to_owned()
            }
            (_, Some(limit)) => format!(
                "timed out after {} s (its timeout_s); the whole tree was killed. Run it again \
                 with a larger timeout_s if it needs longer",
                seconds(limit)
            ),
            _ => "timed out; the whole tree was killed".to_owned(),
        }),
        SessionState::Killed => Some(match info.kill_reason {
            Some(KillReason::Shutdown) => "killed because the server is shutting down".to_owned(),
            _ => "killed on request, with its whole tree".to_owned(),
        }),
        SessionState::Lost => Some(format!(
            "its keeper died without reporting how it ended; every process it left behind was \
             killed, tagged or not ({} besides the main process)",
            info.descendants_killed
        )),
        SessionState::Exited => match (signo, exit_code) {
            (Some(sig), _) => Some(signal_note(sig)),
            (None, Some(126)) if shell => {
                Some("exit 126 from the shell: the program is not executable".to_owned())
            }
            (None, Some(127)) if shell => {
                Some("exit 127 from the shell: command not found".to_owned())
            }
            #[cfg(windows)]
            (None, Some(code)) => windows_note(code, shell),
            _ => None,
        },
    };
    // A limit the session ran into is the explanation: the OOM killer's
    // SIGKILL inside the session is that, not a mystery.
    let note = match (limit_note(info), note) {
        (Some(limit), _) if signo == Some(9) => Some(limit),
        (Some(limit), Some(note)) => Some(format!("{limit}; {note}")),
        (limit, note) => limit.or(note),
    };
    Ending {
        status: info.state.name(),
        exit_code,
        signal,
        note,
    }
}

/// The sentence for a limit the session ran into.
fn limit_note(info: &SessionInfo) -> Option<String> {
    let outside = info.exit.map_or(0, |e| e.oom_killed_outside());
    if info.limit_hit.is_none() && outside > 0 {
        return Some(format!(
            "the kernel's OOM killer ended {outside} of its processes for memory that ran out \
             outside the session (its owner's cgroup limit or the machine's), not for the \
             session's own limit (limit_hit: null)"
        ));
    }
    match info.limit_hit? {
        tether::LimitHit::Memory { victims } => {
            let limit = info
                .limits
                .memory
                .as_ref()
                .map(|(bytes, _)| format!(" ({})", tether::format_size(*bytes)))
                .unwrap_or_default();
            Some(format!(
                "the session reached its memory limit{limit}: the kernel killed {victims} of its \
                 processes for it (limit_hit: memory); raise `memory` if it needs more"
            ))
        }
        tether::LimitHit::Pids { refused } => {
            let limit = info
                .limits
                .pids
                .as_ref()
                .map(|(n, _)| format!(" ({n})"))
                .unwrap_or_default();
            Some(format!(
                "the session reached its process limit{limit}: {refused} fork(s) failed \
                 (limit_hit: pids)"
            ))
        }
    }
}

/// Explains a Windows exit code that is an NTSTATUS (a crash, a Ctrl-C),
/// or cmd.exe's "not recognized" (9009).
#[cfg(windows)]
fn windows_note(code: i32, shell: bool) -> Option<String> {
    let what = match code as u32 {
        9009 if shell => "exit 9009 from cmd.exe: command not found",
        0xC000_0005 => "crashed: access violation (invalid memory access)",
        0xC000_00FD => "crashed: stack overflow",
        0xC000_0094 => "crashed: integer division by zero",
        0xC000_0409 => "crashed: stack buffer overrun (or a fail-fast abort)",
        0xC000_013A => "ended by Ctrl-C / Ctrl-Break (STATUS_CONTROL_C_EXIT)",
        0xC000_0135 => "could not start: a DLL it needs was not found",
        _ => return None,
    };
    Some(what.to_owned())
}

/// Explains a death by signal `sig` that nobody here asked for.
#[cfg(not(unix))]
fn signal_note(sig: i32) -> String {
    format!("terminated by {}", signal_name(sig))
}

/// `SIG<n>`: there are no signal names where there are no signals.
#[cfg(not(unix))]
pub fn signal_name(sig: i32) -> String {
    format!("SIG{sig}")
}

/// Explains a death by signal `sig` that nobody here asked for.
#[cfg(unix)]
fn signal_note(sig: i32) -> String {
    let name = signal_name(sig);
    let what = match sig {
        libc::SIGKILL => {
            return format!(
                "killed by {name}, which tether did not send: possibly the kernel's OOM killer \
                 (out of memory; see `dmesg` or the memory use) or another process"
            );
        }
        libc::SIGSEGV => "segmentation fault (invalid memory access)",
        libc::SIGBUS => "bus error (bad memory access, e.g. a truncated mapped file)",
        libc::SIGABRT => "aborted (abort(), a failed assertion or a panic)",
        libc::SIGFPE => "arithmetic error (e.g. integer division by zero)",
        libc::SIGILL => "illegal instruction",
        libc::SIGPIPE => "broken pipe: it wrote to a pipe nobody reads",
        libc::SIGXCPU => "CPU time limit exceeded",
        libc::SIGXFSZ => "file size limit exceeded",
        libc::SIGTERM => "terminated (SIGTERM from outside)",
        libc::SIGINT => "interrupted",
        libc::SIGHUP => "hangup",
        libc::SIGQUIT => "quit",
        _ => "",
    };
    if what.is_empty() {
        format!("terminated by {name}")
    } else {
        format!("terminated by {name}: {what}")
    }
}

/// `SIGKILL` for 9, and so on; `SIG<n>` for a number without a name.
#[cfg(unix)]
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("SIG{sig}"),
    };
    name.to_owned()
}

/// Seconds as a short number: `600`, `1.5`.
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s}")
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    #[cfg(windows)]
    fn windows_crash_codes_are_explained() {
        let note = windows_note(0xC000_0005_u32 as i32, false).unwrap();
        assert!(note.contains("access violation"), "{note}");
        assert!(windows_note(9009, true).unwrap().contains("not found"));
        assert_eq!(windows_note(9009, false), None);
    }

    #[test]
    fn signals_have_names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(64), "SIG64");
    }

    #[test]
    fn an_unexplained_sigkill_suggests_the_oom_killer() {
        let note = signal_note(libc::SIGKILL);
        assert!(note.contains("OOM"), "{note}");
        assert!(signal_note(libc::SIGSEGV).contains("segmentation fault"));
        assert_eq!(signal_note(libc::SIGUSR1), "terminated by SIGUSR1");
    }

    #[test]
    fn seconds_read_naturally() {
        assert_eq!(seconds(Duration::from_secs(600)), "600");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5");
    }
}
