//! Proving an owner dead, and so its processes orphaned. (One test starts
//! the platform's trivial command, `true` or `cmd /c exit 0`.)
//!
//! A spawn tag names its owner by pid and start time. A tagged process is
//! alive now, so it and its owner belong to this boot: the owner is the
//! process of this boot with that pid and start time. It is **provably
//! dead** when `/proc/<pid>` is gone, is a zombie, or belongs to a process
//! that started at another time. Every other case is **unknown**, and
//! unknown is never reaped:
//!
//! - the tag carries no owner start time (`0`: it could not be read);
//! - `/proc` is mounted with `hidepid` and the owner is not known (from the
//!   ledger) to be ours: a missing pid may just be hidden;
//! - `/proc` shows another pid namespace than ours;
//! - the tagged process lives in a nested pid namespace whose tags cannot
//!   be proven to name owners of ours (see [`Prover::tag_names_our_owner`]):
//!   a tether running inside a container writes pids of the container's
//!   namespace into its tags, and read in ours they name someone else;
//! - a live process has the owner's pid and start time but another pidfs
//!   inode than the ledger recorded. That is either a pid reused within
//!   one clock tick (start times have 10 ms resolution; forced immediate
//!   reuse collided in 295 of 300 tries here) or a ledger that is wrong —
//!   and the ledger is attacker-shaped input: editing one owner row's
//!   inode made a running `tether run` read as dead and `reap` killed its
//!   session (issue 8). Ledger data never outweighs the live process.
//!
//! The mistakes this allows are all on the safe side: a pid reused within
//! one tick looks alive or unknown, and its orphans are kept (listed by
//! `tether ps` and `tether reap`, never signalled).

use std::collections::HashMap;

use serde::Serialize;

use crate::records::OwnerRow;

/// Purposes that are never reaped, whatever happened to their owner: a
/// person may be using them. Also any purpose starting `interactive.` or
/// `interactive-`.
pub const INTERACTIVE_PURPOSES: &[&str] = &["interactive", "chat", "shell", "repl", "tui"];

/// Whether `purpose` marks processes a person may be using.
///
/// ```
/// use tether_ledger::proof::is_interactive;
///
/// assert!(is_interactive("repl"));
/// assert!(is_interactive("interactive.python"));
/// assert!(!is_interactive("run"));
/// ```
pub fn is_interactive(purpose: &str) -> bool {
    INTERACTIVE_PURPOSES.contains(&purpose)
        || purpose.starts_with("interactive.")
        || purpose.starts_with("interactive-")
}

/// Why an owner is known to be dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeathProof {
    /// No process has its pid.
    Gone,
    /// It exited and is a zombie waiting for its parent.
    Exited,
    /// Its pid now belongs to a process that started at another time.
    PidReused {
        /// Start time (ticks) of the process holding the pid now.
        now_start_time: u64,
    },
    /// The ledger recorded it in an earlier boot.
    EarlierBoot,
    /// Not a death: the process belongs to a durable session whose TTL
    /// passed [`DURABLE_SLACK`](crate::DURABLE_SLACK) ago while its holder
    /// (alive, the owner its tag names) did not end it — a stopped or
    /// wedged holder. The TTL is a promise that it ends (issue 37).
    TtlPassed {
        /// When the TTL ended, Unix ms (from the ledger's durable row).
        expires_at_ms: u64,
    },
}

impl std::fmt::Display for DeathProof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeathProof::Gone => f.write_str("gone"),
            DeathProof::Exited => f.write_str("exited (zombie)"),
            DeathProof::PidReused { .. } => f.write_str("pid reused by another process"),
            DeathProof::EarlierBoot => f.write_str("from an earlier boot"),
            DeathProof::TtlPassed { .. } => {
                f.write_str("durable session past its TTL (its holder did not end it)")
            }
        }
    }
}

/// Whether an owner is alive, provably dead, or unknown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum OwnerStatus {
    /// A live process has its identity.
    Alive,
    /// It is provably dead.
    Dead {
        /// How that is known.
        proof: DeathProof,
    },
    /// Neither can be proven; its processes are never reaped.
    Unknown {
        /// Why not.
        reason: String,
    },
}

impl OwnerStatus {
    /// Short word for listings: `alive`, `dead`, `unknown`.
    pub fn word(&self) -> &'static str {
        match self {
            OwnerStatus::Alive => "alive",
            OwnerStatus::Dead { .. } => "dead",
            OwnerStatus::Unknown { .. } => "unknown",
        }
    }
}

impl std::fmt::Display for OwnerStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OwnerStatus::Alive => f.write_str("alive"),
            OwnerStatus::Dead { proof } => write!(f, "dead: {proof}"),
            OwnerStatus::Unknown { reason } => write!(f, "unknown: {reason}"),
        }
    }
}

/// How a live tagged process stands with the owner its tag names, seen
/// from tether's pid namespace: the one classification `tether ps`, `tether
/// reap` and `--holding` all use ([`Prover::standing`]). Before it, `ps`
/// judged the owner pid alone and called a live `tether run` inside
/// `unshare --pid --fork` "dead: pid reused" (its pid 1 is not ours) and
/// its session orphaned, while `reap` listed the same processes as
/// unprovable (issue 16).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The tag's owner pid names a process of our pid namespace: its status.
    Owner(OwnerStatus),
    /// The process lives in a nested pid namespace whose tags cannot be
    /// proven to name owners of ours: the owner pid names nobody here,
    /// alive or dead ([`Prover::tag_names_our_owner`]). Never reaped.
    NestedPidNamespace {
        /// Why not.
        reason: String,
    },
}

impl Standing {
    /// The owner's status as listings show it: a nested namespace's owner
    /// is unknown.
    pub fn status(&self) -> OwnerStatus {
        match self {
            Standing::Owner(status) => status.clone(),
            Standing::NestedPidNamespace { reason } => OwnerStatus::Unknown {
                reason: format!("unprovable: {reason}"),
            },
        }
    }

    /// Whether the owner is provably dead (the process is orphaned).
    pub fn is_orphaned(&self) -> bool {
        matches!(self, Standing::Owner(OwnerStatus::Dead { .. }))
    }
}

/// An owner as a tag names it: pid and start time in this boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct OwnerKey {
    /// Pid.
    pub pid: u32,
    /// Start time, clock ticks since boot.
    pub start_time: u64,
}

/// Decides owner status, remembering each answer for one scan, and knows
/// which processes sit in a pid namespace the tags' pids can be read in.
#[derive(Debug)]
pub struct Prover {
    boot_id: String,
    /// Pidfs inodes and uids the ledger recorded for this boot's owners.
    recorded: HashMap<OwnerKey, (Option<u64>, u32)>,
    uid: u32,
    hidepid: bool,
    /// The process table shows tether's own pid namespace.
    own_pidns: bool,
    cache: HashMap<OwnerKey, OwnerStatus>,
}

impl Prover {
    /// A prover using what the ledger knows about owners (may be empty).
    pub fn new(owners: &[OwnerRow]) -> Prover {
        let visibility = tether::sys::visibility();
        let boot_id = tether::ProcessIdentity::current()
            .map(|me| me.boot_id)
            .unwrap_or_default();
        let recorded = owners
            .iter()
            .filter(|o| o.identity.boot_id == boot_id)
            .map(|o| {
                (
                    OwnerKey {
                        pid: o.identity.pid,
                        start_time: o.identity.start_time,
                    },
                    (o.identity.pidfs_inode, o.uid),
                )
            })
            .collect();
        Prover {
            boot_id,
            recorded,
            uid: tether::sys::current_uid(),
            hidepid: visibility.hides_other_users,
            own_pidns: visibility.own_namespace,
            cache: HashMap::new(),
        }
    }

    /// The boot id everything here is relative to.
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    /// The status of the owner `key` (cached per prover).
    pub fn owner_status(&mut self, key: OwnerKey) -> OwnerStatus {
        if let Some(status) = self.cache.get(&key) {
            return status.clone();
        }
        let status = self.prove(key);
        self.cache.insert(key, status.clone());
        status
    }

    fn prove(&self, key: OwnerKey) -> OwnerStatus {
        let unknown = |reason: &str| OwnerStatus::Unknown {
            reason: reason.to_owned(),
        };
        if !self.own_pidns {
            return unknown("/proc shows another pid namespace than tether's");
        }
        if key.start_time == 0 {
            return unknown("the spawn tag has no owner start time");
        }
        let recorded = self.recorded.get(&key);
        match tether::sys::process(key.pid) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let recorded_as_ours = recorded.is_some_and(|&(_, uid)| uid == self.uid);
                if self.hidepid && self.uid != 0 && !recorded_as_ours {
                    unknown("/proc is mounted with hidepid: a missing owner may be hidden")
                } else {
                    OwnerStatus::Dead {
                        proof: DeathProof::Gone,
                    }
                }
            }
            Err(e) => OwnerStatus::Unknown {
                reason: format!("cannot read the owner's /proc entry: {e}"),
            },
            Ok(stat) if stat.start_time != key.start_time => OwnerStatus::Dead {
                proof: DeathProof::PidReused {
                    now_start_time: stat.start_time,
                },
            },
            Ok(stat) if stat.has_exited() => OwnerStatus::Dead {
                proof: DeathProof::Exited,
            },
            Ok(_) => match recorded.and_then(|&(inode, _)| inode) {
                None => OwnerStatus::Alive,
                Some(inode) => self.compare_inode(key, inode),
            },
        }
    }

    fn compare_inode(&self, key: OwnerKey, inode: u64) -> OwnerStatus {
        let recorded = tether::ProcessIdentity {
            boot_id: self.boot_id.clone(),
            pid: key.pid,
            start_time: key.start_time,
            pidfs_inode: Some(inode),
        };
        match tether::ProcessIdentity::of_pid(key.pid) {
            Ok(now) if now.matches(&recorded) => OwnerStatus::Alive,
            // Same pid, same start time, alive: only the ledger says it is
            // another process, and the ledger may have been edited.
            Ok(now) if now.start_time == key.start_time => OwnerStatus::Unknown {
                reason: format!(
                    "a live process has the owner's pid and start time but pidfs inode {}, \
                     not the {inode} the ledger recorded (pid reused within one clock tick, \
                     or a wrong ledger)",
                    now.pidfs_inode.map_or("none".into(), |i| i.to_string())
                ),
            },
            Ok(now) => OwnerStatus::Dead {
                proof: DeathProof::PidReused {
                    now_start_time: now.start_time,
                },
            },
            // It died between the stat and the pidfd: dead now, but the
            // next scan proves that cleanly.
            Err(e) => OwnerStatus::Unknown {
                reason: format!("owner changed while being checked: {e}"),
            },
        }
    }

    /// How the live process `pid`, carrying `tag`, stands with the owner
    /// the tag names (see [`Standing`]): first whether that owner pid can
    /// be read here at all, then the owner's status (cached per prover).
    pub fn standing(&mut self, pid: u32, tag: &tether::SpawnTag) -> Standing {
        match self.tag_names_our_owner(pid, tag.owner_start) {
            Err(reason) => Standing::NestedPidNamespace { reason },
            Ok(()) => Standing::Owner(self.owner_status(OwnerKey {
                pid: tag.owner_pid,
                start_time: tag.owner_start,
            })),
        }
    }

    /// Whether `pid` lives in the pid namespace the tags' pids are read in
    /// (ours). `false` for a process in a nested namespace, or when that
    /// cannot be read.
    pub fn in_own_pidns(&self, pid: u32) -> bool {
        self.own_pidns && tether::sys::in_own_pid_namespace(pid)
    }

    /// Whether the owner named by the tag of process `pid` (started at
    /// `owner_start`) is a process of our pid namespace, so that its pid
    /// can be looked up here. Always for a process of ours. For one in a
    /// nested namespace — one the command made itself (`unshare --pid
    /// --fork`), or a `pidns` session's — only when the owner started
    /// *before the init of the outermost nested namespace holding it*, on
    /// the same clock: every process that ever lived in a namespace started
    /// at or after its init, so such an owner was never inside it, and the
    /// tag was inherited from ours. A tether inside a container fails this
    /// (its owners start after the container's init) and stays unprovable.
    /// `Err` says why not.
    pub fn tag_names_our_owner(&self, pid: u32, owner_start: u64) -> Result<(), String> {
        if self.in_own_pidns(pid) {
            return Ok(());
        }
        if !self.own_pidns {
            return Err("/proc shows another pid namespace than tether's".into());
        }
        let Some(nested) = tether::sys::nested_namespace(pid) else {
            return Err("in a nested pid namespace whose init cannot be found".into());
        };
        if !nested.same_clock {
            return Err("in a nested pid namespace with another clock (time namespace)".into());
        }
        if owner_start == 0 || owner_start >= nested.init.start_time {
            return Err(format!(
                "in a nested pid namespace (init {}) that its tag's owner may have lived in: \
                 the owner started at tick {owner_start}, the namespace at {}",
                nested.init.pid, nested.init.start_time
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interactive_purposes_are_recognised() {
        for p in [
            "interactive",
            "chat",
            "shell",
            "interactive.vim",
            "interactive-1",
        ] {
            assert!(is_interactive(p), "{p}");
        }
        for p in ["run", "mcp", "keeper", "interactiveness", "shells"] {
            assert!(!is_interactive(p), "{p}");
        }
    }

    #[test]
    fn a_live_owner_is_alive_and_a_wrong_start_is_pid_reuse() {
        let me = tether::ProcessIdentity::current().unwrap();
        let mut prover = Prover::new(&[]);
        let key = OwnerKey {
            pid: me.pid,
            start_time: me.start_time,
        };
        assert_eq!(prover.owner_status(key), OwnerStatus::Alive);
        let wrong = OwnerKey {
            start_time: me.start_time + 1,
            ..key
        };
        assert_eq!(
            prover.owner_status(wrong),
            OwnerStatus::Dead {
                proof: DeathProof::PidReused {
                    now_start_time: me.start_time
                }
            }
        );
        let no_start = OwnerKey {
            start_time: 0,
            ..key
        };
        assert!(matches!(
            prover.owner_status(no_start),
            OwnerStatus::Unknown { .. }
        ));
        assert!(prover.in_own_pidns(me.pid));
    }

    #[test]
    fn a_reaped_child_is_gone() {
        let mut child = if cfg!(windows) {
            std::process::Command::new("cmd")
                .args(["/c", "exit 0"])
                .spawn()
        } else {
            std::process::Command::new("true").spawn()
        }
        .unwrap();
        let pid = child.id();
        let start = tether::sys::process(pid).map(|s| s.start_time);
        child.wait().unwrap();
        let Ok(start) = start else {
            return; // it exited before we could read it: nothing to test
        };
        let status = Prover::new(&[]).owner_status(OwnerKey {
            pid,
            start_time: start,
        });
        // Gone, or (rarely) its pid already reused: dead either way.
        assert!(matches!(status, OwnerStatus::Dead { .. }), "{status:?}");
    }

    #[test]
    fn a_recorded_inode_that_differs_is_unknown_not_death() {
        let me = tether::ProcessIdentity::current().unwrap();
        let row = OwnerRow {
            id: crate::records::OwnerId(1),
            identity: tether::ProcessIdentity {
                pidfs_inode: me.pidfs_inode.map(|i| i + 1),
                ..me.clone()
            },
            install: "0".repeat(16),
            purpose: "run".into(),
            argv: vec![],
            uid: 0,
            started_at_ms: 0,
            ended_at_ms: None,
            source: crate::records::Source::Registered,
        };
        let status = Prover::new(&[row]).owner_status(OwnerKey {
            pid: me.pid,
            start_time: me.start_time,
        });
        if me.pidfs_inode.is_some() {
            assert!(matches!(status, OwnerStatus::Unknown { .. }), "{status:?}");
        } else {
            assert_eq!(status, OwnerStatus::Alive, "no pidfs: start time decides");
        }
    }
}
