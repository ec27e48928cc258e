//! What the ledger stores: owners and their sessions, as written by the
//! front-ends and as read back.

use std::path::PathBuf;

use serde::Serialize;
use tether::{Install, ProcessIdentity, SessionId};

use crate::clock::{Clock, now_ms};

/// How many leading arguments of an owner's command line are kept, and at
/// most how many bytes each: enough to recognise it, bounded in size.
const ARGV_KEEP: usize = 16;
const ARG_MAX_BYTES: usize = 512;

/// The row id of an owner in one ledger store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct OwnerId(pub(crate) i64);

/// An owner as it registers: the process that asks tether to spawn.
#[derive(Clone, Debug)]
pub struct OwnerRecord {
    /// Its identity (boot id, pid, start time, pidfs inode).
    pub identity: ProcessIdentity,
    /// The install whose tags it writes.
    pub install: String,
    /// What kind of owner it is (`run`, `mcp`, …).
    pub purpose: String,
    /// The first arguments of its command line.
    pub argv: Vec<String>,
    /// Its real uid.
    pub uid: u32,
    /// When it started, Unix ms.
    pub started_at_ms: u64,
}

impl OwnerRecord {
    /// The calling process as an owner of `install`, with `purpose`
    /// (checked when it is written: see [`crate::LedgerError`]).
    ///
    /// # Errors
    /// Only if the process's own identity cannot be read (no `/proc`).
    pub fn current(install: &Install, purpose: &str) -> std::io::Result<OwnerRecord> {
        let identity = ProcessIdentity::current()?;
        Ok(OwnerRecord {
            started_at_ms: Clock::now().wall_ms(identity.start_time),
            argv: bounded_argv(std::env::args_os().map(|a| a.to_string_lossy().into_owned())),
            identity,
            install: install.id().to_owned(),
            purpose: purpose.to_owned(),
            uid: tether::sys::current_uid(),
        })
    }
}

/// Keeps the first [`ARGV_KEEP`] arguments, each cut to [`ARG_MAX_BYTES`].
pub(crate) fn bounded_argv(args: impl Iterator<Item = String>) -> Vec<String> {
    args.take(ARGV_KEEP)
        .map(|mut a| {
            if a.len() > ARG_MAX_BYTES {
                let mut cut = ARG_MAX_BYTES;
                while !a.is_char_boundary(cut) {
                    cut -= 1;
                }
                a.truncate(cut);
                a.push('…');
            }
            a
        })
        .collect()
}

/// A session as it starts.
#[derive(Clone, Debug)]
pub struct SessionStart {
    /// The session id (as in the spawn tags of its processes).
    pub id: SessionId,
    /// The purpose in its spawn tags.
    pub purpose: String,
    /// Containment name as reported by the library (`subreaper`, `pidns`).
    pub containment: Option<String>,
    /// The command and its arguments (bounded like an owner's argv).
    pub command: Vec<String>,
    /// Working directory of the command, if set.
    pub cwd: Option<PathBuf>,
    /// The main process.
    pub main: Option<ProcessIdentity>,
    /// The keeper holding the tree.
    pub keeper: Option<ProcessIdentity>,
    /// When it started, Unix ms (default: now).
    pub started_at_ms: u64,
    /// Its limits and how each was enforced (`None`: none asked for).
    pub limits: Option<crate::LimitsRecord>,
    /// The cgroup directories made for it (Linux), for `tether reap` to
    /// remove if its keeper cannot.
    pub cgroups: Vec<String>,
}

impl SessionStart {
    /// A session record started now, with nothing but its id and purpose.
    pub fn new(id: SessionId, purpose: &str) -> SessionStart {
        SessionStart {
            id,
            purpose: purpose.to_owned(),
            containment: None,
            command: Vec::new(),
            cwd: None,
            main: None,
            keeper: None,
            started_at_ms: now_ms(),
            limits: None,
            cgroups: Vec::new(),
        }
    }

    /// The record of a child just spawned by [`tether::Command::spawn`]:
    /// main and keeper identities, containment, and `command`.
    pub fn of_child(child: &tether::Child, purpose: &str, command: &[String]) -> SessionStart {
        let mut start = SessionStart::new(child.session_id().clone(), purpose);
        start.containment = Some(child.containment().to_string());
        start.main = Some(child.identity().clone());
        // The keeper is our child and not yet reaped: its pid cannot have
        // been recycled, so reading its identity now is exact.
        start.keeper = child
            .keeper_pid()
            .and_then(|pid| ProcessIdentity::of_pid(pid).ok());
        start.command = bounded_argv(command.iter().cloned());
        start.limits = crate::LimitsRecord::of(child.limits());
        start.cgroups = child
            .limits()
            .cgroups
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        start
    }
}

/// How a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The main process exited with this code.
    Exited {
        /// Exit code.
        code: i32,
    },
    /// The main process was killed by this signal.
    Signaled {
        /// Signal number.
        signal: i32,
    },
    /// The session's timeout expired and tether killed it.
    TimedOut,
    /// Its owner killed it.
    Killed,
    /// `tether reap` killed what was left of it after its owner died.
    Reaped,
}

impl Outcome {
    /// The outcome a [`tether::ExitStatus`] describes.
    pub fn of_status(status: &tether::ExitStatus) -> Outcome {
        if status.timed_out() {
            Outcome::TimedOut
        } else if let Some(code) = status.code() {
            Outcome::Exited { code }
        } else {
            // No exit code: a signal ended it (Unix), and the shell code
            // is 128 + its number.
            Outcome::Signaled {
                signal: status.shell_code() - 128,
            }
        }
    }

    pub(crate) fn columns(self) -> (&'static str, Option<i32>, Option<i32>) {
        match self {
            Outcome::Exited { code } => ("exited", Some(code), None),
            Outcome::Signaled { signal } => ("signaled", None, Some(signal)),
            Outcome::TimedOut => ("timed_out", None, None),
            Outcome::Killed => ("killed", None, None),
            Outcome::Reaped => ("reaped", None, None),
        }
    }

    pub(crate) fn from_columns(kind: &str, code: Option<i32>, signal: Option<i32>) -> Option<Self> {
        Some(match kind {
            "exited" => Outcome::Exited { code: code? },
            "signaled" => Outcome::Signaled { signal: signal? },
            "timed_out" => Outcome::TimedOut,
            "killed" => Outcome::Killed,
            "reaped" => Outcome::Reaped,
            _ => return None,
        })
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Exited { code } => write!(f, "exited {code}"),
            Outcome::Signaled { signal } => write!(f, "killed by signal {signal}"),
            Outcome::TimedOut => f.write_str("timed out"),
            Outcome::Killed => f.write_str("killed"),
            Outcome::Reaped => f.write_str("reaped"),
        }
    }
}

/// Whether a row was written by its owner or rebuilt from spawn tags after
/// the ledger was quarantined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Written by the owner itself.
    Registered,
    /// Reconstructed from the spawn tags of live processes.
    Rebuilt,
}

impl Source {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::Registered => "registered",
            Source::Rebuilt => "rebuilt",
        }
    }

    pub(crate) fn parse(s: &str) -> Source {
        if s == "rebuilt" {
            Source::Rebuilt
        } else {
            Source::Registered
        }
    }
}

/// An owner as read back from the ledger.
#[derive(Clone, Debug)]
pub struct OwnerRow {
    /// Row id.
    pub id: OwnerId,
    /// Identity recorded at registration.
    pub identity: ProcessIdentity,
    /// Install id.
    pub install: String,
    /// Purpose.
    pub purpose: String,
    /// Leading arguments.
    pub argv: Vec<String>,
    /// Real uid.
    pub uid: u32,
    /// Start, Unix ms.
    pub started_at_ms: u64,
    /// When it said it was done, Unix ms (`None` if it never did — still
    /// running, or killed).
    pub ended_at_ms: Option<u64>,
    /// Who wrote the row.
    pub source: Source,
}

/// A session as read back from the ledger.
#[derive(Clone, Debug)]
pub struct SessionRow {
    /// Session id.
    pub id: String,
    /// Its owner's row.
    pub owner: OwnerId,
    /// Purpose.
    pub purpose: String,
    /// Containment name.
    pub containment: Option<String>,
    /// Command and arguments.
    pub command: Vec<String>,
    /// Working directory.
    pub cwd: Option<String>,
    /// Main process identity.
    pub main: Option<ProcessIdentity>,
    /// Keeper identity.
    pub keeper: Option<ProcessIdentity>,
    /// Start, Unix ms.
    pub started_at_ms: u64,
    /// End, Unix ms, once recorded.
    pub ended_at_ms: Option<u64>,
    /// How it ended, once recorded.
    pub outcome: Option<Outcome>,
    /// Who wrote the row.
    pub source: Source,
    /// Its limits and how each was enforced.
    pub limits: Option<crate::LimitsRecord>,
    /// The limit it ran into (`memory`, `pids`), once recorded.
    pub limit_hit: Option<String>,
    /// The cgroup directories made for it.
    pub cgroups: Vec<String>,
}

/// A quarantine of a corrupt store, as recorded in the fresh one.
#[derive(Clone, Debug, Serialize)]
pub struct Quarantine {
    /// When, Unix ms.
    pub at_ms: u64,
    /// Where the corrupt store was moved.
    pub moved_to: PathBuf,
    /// What was wrong with it.
    pub reason: String,
    /// Owners rebuilt from spawn tags.
    pub rebuilt_owners: u64,
    /// Sessions rebuilt from spawn tags.
    pub rebuilt_sessions: u64,
}

/// Joins argv for storage (NUL cannot occur in an argument).
pub(crate) fn join_args(args: &[String]) -> String {
    args.join("\0")
}

/// Splits a stored argv.
pub(crate) fn split_args(text: &str) -> Vec<String> {
    if text.is_empty() {
        Vec::new()
    } else {
        text.split('\0').map(str::to_owned).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_is_bounded_on_char_boundaries() {
        let long = "é".repeat(400);
        let args = bounded_argv((0..40).map(|i| if i == 1 { long.clone() } else { i.to_string() }));
        assert_eq!(args.len(), ARGV_KEEP);
        assert!(args[1].len() <= ARG_MAX_BYTES + '…'.len_utf8());
        assert!(args[1].ends_with('…'));
        assert_eq!(split_args(&join_args(&args)), args);
        assert!(split_args("").is_empty());
    }

    #[test]
    fn outcomes_round_trip_through_columns() {
        for o in [
            Outcome::Exited { code: 3 },
            Outcome::Signaled { signal: 9 },
            Outcome::TimedOut,
            Outcome::Killed,
            Outcome::Reaped,
        ] {
            let (k, c, s) = o.columns();
            assert_eq!(Outcome::from_columns(k, c, s), Some(o));
        }
        assert_eq!(Outcome::from_columns("exited", None, None), None);
    }
}

/// A durable session's record (issue 37): kept by its holder, read by
/// `tether ps` and `tether reap`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DurableRow {
    /// The session's id.
    pub session: String,
    /// Its name, if given.
    pub name: Option<String>,
    /// The holder's pid and start time (its owner in `sessions`).
    pub holder_pid: u32,
    /// The holder's start time (clock ticks since boot).
    pub holder_start_time: u64,
    /// The process that asked for it: pid, start time, uid, what it was.
    pub owner_pid: Option<u32>,
    /// Its start time.
    pub owner_start_time: Option<u64>,
    /// Its uid, as the kernel reported it on the holder's socket.
    pub owner_uid: Option<u32>,
    /// What it was (`tether run`, `tether mcp`, `python`, …).
    pub owner_purpose: Option<String>,
    /// The TTL given, seconds.
    pub ttl_s: u64,
    /// When the TTL ends (wall clock, Unix ms): the holder kills it then,
    /// and past it `tether reap` may.
    pub expires_at_ms: u64,
}
