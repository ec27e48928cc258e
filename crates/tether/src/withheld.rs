//! Variables withheld from this process's own environment, so that the
//! processes it starts cannot read them back from it.
//!
//! A program that removes credentials from the environment of the commands
//! it runs (`tether mcp` removes `GITHUB_TOKEN`, `ANTHROPIC_API_KEY`,
//! `AWS_SECRET_ACCESS_KEY`, `*_PASSWORD`, …) still holds them in its own:
//! and a command of the same user reads its owner's environment — the
//! owner's pid is field 4 of its `TETHER_SPAWN` — through
//! `/proc/<pid>/environ` (Linux), `sysctl(KERN_PROCARGS2)` (macOS) or the
//! owner's PEB (Windows: `ReadProcessMemory` on a process of the same
//! user). [`withhold_environment`] removes the variables from the
//! process's environment *and* overwrites their values where those readers
//! look, so nothing started afterwards can find them.

use std::ffi::{OsStr, OsString};

use crate::error::WithholdError;

/// What [`withhold_environment`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Withheld {
    /// The variables removed, each once, in environment order.
    pub names: Vec<OsString>,
    /// Values overwritten where they were stored (one per occurrence).
    pub overwritten: usize,
    /// Values removed from the environment whose bytes could not be
    /// overwritten (Unix: stored outside memory known to be writable, as a
    /// `putenv` of a constant string is). Nothing reads them as the
    /// environment any more; they stay in the process's memory.
    pub not_overwritten: usize,
    /// Variables the predicate named that were kept because tether itself
    /// reads them ([`NEEDED`]).
    pub kept: Vec<OsString>,
}

/// Variables tether itself reads — to find its state directory and ledger
/// (`TETHER_HOME`, `XDG_STATE_HOME`, `HOME`, …), its keeper, programs
/// (`PATH`, `PATHEXT`), temporary files and Windows' system directories.
/// [`withhold_environment`] never withholds them, whatever its predicate
/// says: a server that lost `HOME` would record its sessions in another
/// ledger than `tether ps` reads. A trailing `*` matches any rest; names
/// compare without regard to ASCII case.
pub const NEEDED: &[&str] = &[
    "TETHER_*",
    "XDG_*",
    "HOME",
    "PATH",
    "PATHEXT",
    "TMPDIR",
    "TEMP",
    "TMP",
    "USERPROFILE",
    "LOCALAPPDATA",
    "SystemRoot",
    "ComSpec",
];

/// Whether tether itself reads `name` ([`NEEDED`]).
fn needed(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    NEEDED
        .iter()
        .any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => name
                .get(..prefix.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(prefix)),
            None => name.eq_ignore_ascii_case(pattern),
        })
}

/// Removes from this process's environment every variable `withhold`
/// accepts (by name) and overwrites each value where it was stored, so
/// that processes started afterwards cannot read it back from this one.
/// The names stay visible (`NAME=` and then nothing), the values do not.
///
/// Variables tether itself reads ([`NEEDED`]: `HOME`, `PATH`, `TETHER_*`,
/// …) are kept whatever `withhold` says, and listed in [`Withheld::kept`].
///
/// For programs that keep credentials away from what they run — `tether
/// mcp` calls it with its `--env-deny`/`--env-allow` policy before it
/// starts anything. Call it **first thing in `main`**, before any thread
/// starts and before anything copies the environment (`std::env::vars`
/// makes heap copies of every value). The library never calls it for you:
/// it changes the host program's environment.
///
/// Per platform:
/// - **Linux**: the values are overwritten in every writable mapping
///   libc's `environ` points into — the initial block that
///   `/proc/<pid>/environ` shows, and the heap copies `setenv` made — then
///   unset. Refused (nothing changed) while other threads run.
/// - **macOS**: the same, for the strings area at the top of the main
///   thread's stack that `KERN_PROCARGS2` reads; heap copies are unset
///   only. Refused while other threads run. Type-checked only.
/// - **Windows**: the values are overwritten in the environment block of
///   the process's PEB (what another process reads with
///   `ReadProcessMemory`), under the PEB lock, then removed with
///   `SetEnvironmentVariableW`. Threads may run (the Win32 environment
///   calls take the same lock).
///
/// What it cannot do: hide what the *parent* still holds — the agent that
/// started this process has the variables in its own environment, readable
/// the same way by a process of the same user — or what was copied before
/// the call.
///
/// # Errors
/// [`WithholdError::OtherThreads`] (Unix) when other threads run;
/// [`WithholdError::Io`] when the process's own state cannot be read.
/// Either way nothing was changed.
pub fn withhold_environment(withhold: impl Fn(&OsStr) -> bool) -> Result<Withheld, WithholdError> {
    let kept = std::cell::RefCell::new(Vec::<OsString>::new());
    let mut withheld = crate::contain::withhold_environment(&|name: &OsStr| {
        if !withhold(name) {
            return false;
        }
        if needed(name) {
            let mut kept = kept.borrow_mut();
            if !kept.iter().any(|k| k == name) {
                kept.push(name.to_owned());
            }
            return false;
        }
        true
    })?;
    withheld.kept = kept.into_inner();
    Ok(withheld)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_tether_reads_is_needed() {
        for name in [
            "TETHER_HOME",
            "tether_home",
            "XDG_STATE_HOME",
            "HOME",
            "Path",
        ] {
            assert!(needed(OsStr::new(name)), "{name}");
        }
        for name in [
            "GITHUB_TOKEN",
            "HOMEBREW_GITHUB_API_TOKEN",
            "TETHE",
            "PATH_X",
        ] {
            assert!(!needed(OsStr::new(name)), "{name}");
        }
    }

    /// With another thread alive, Unix refuses and changes nothing (the
    /// success path runs in `tether mcp`, single-threaded at start: the
    /// CLI's regression test reads its memory).
    #[cfg(unix)]
    #[test]
    fn another_thread_makes_it_refuse_and_change_nothing() {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || wait.recv());
        let before: Vec<_> = std::env::vars_os().collect();
        let result = withhold_environment(|_| true);
        done.send(()).unwrap();
        other.join().unwrap().unwrap();
        assert!(
            matches!(result, Err(WithholdError::OtherThreads { threads }) if threads >= 2),
            "{result:?}"
        );
        assert_eq!(std::env::vars_os().collect::<Vec<_>>(), before);
    }
}
