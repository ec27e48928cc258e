//! The tag scan: every live process of this user that carries a spawn tag,
//! read straight from the process table ([`tether::sys::scan_tagged`]).
//!
//! This is what finds processes the ledger never saw (it was lost, or they
//! escaped), and what a quarantined ledger is rebuilt from. Every process's
//! environment is read — the environment a process was exec'd with,
//! inherited by every descendant, even a daemon that closed all its
//! descriptors. Processes of other users (by real uid) are never included:
//! their environment is unreadable to a normal user, and even root only
//! ever reaps its own. Processes of ours whose environment cannot be read
//! (they made themselves non-dumpable) are counted as unattributable.

use std::collections::BTreeMap;

use tether::SpawnTag;
use tether::sys::{Clock, ProcessInfo, ProcessState};

use crate::proof::OwnerKey;

/// One live process carrying a valid spawn tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaggedProcess {
    /// Its pid (in tether's pid namespace).
    pub pid: u32,
    /// Its parent's pid (1, or a subreaper, once orphaned).
    pub ppid: u32,
    /// Start time, in the process table's units ([`Clock`] converts them).
    pub start_time: u64,
    /// Scheduling state (zombies are excluded).
    pub state: ProcessState,
    /// The tag from its environment.
    pub tag: SpawnTag,
}

/// A snapshot of the tagged processes on the machine.
#[derive(Clone, Debug)]
pub struct Scan {
    /// Tagged live processes of this user, by pid.
    pub processes: Vec<TaggedProcess>,
    /// Live processes of this user whose environment cannot be read: they
    /// may belong to a session, but cannot be attributed (never reaped).
    pub unattributable: Vec<ProcessInfo>,
    /// How many pids were looked at.
    pub scanned: usize,
    /// The clocks when the scan was taken (for ages).
    pub clock: Clock,
}

impl Scan {
    /// Scans the process table now. Never fails: a process that vanishes
    /// or cannot be read mid-scan is simply not in the result.
    pub fn take() -> Scan {
        let clock = Clock::now();
        let scan = tether::sys::scan_tagged();
        let processes = scan
            .tagged
            .into_iter()
            .map(|p| TaggedProcess {
                pid: p.info.pid,
                ppid: p.info.ppid,
                start_time: p.info.start_time,
                state: p.info.state,
                tag: p.tag,
            })
            .collect();
        Scan {
            processes,
            unattributable: scan.unreadable,
            scanned: scan.scanned,
            clock,
        }
    }
    /// The tagged processes of one install.
    pub fn of_install<'a>(&'a self, install: &'a str) -> impl Iterator<Item = &'a TaggedProcess> {
        self.processes
            .iter()
            .filter(move |p| p.tag.install == install)
    }

    /// The process with this pid, if it is tagged.
    pub fn get(&self, pid: u32) -> Option<&TaggedProcess> {
        self.processes
            .binary_search_by_key(&pid, |p| p.pid)
            .ok()
            .map(|i| &self.processes[i])
    }
}

/// Tagged processes grouped by owner, then by session (ordered, so every
/// listing is stable).
pub type ByOwner<'a> = BTreeMap<OwnerKey, BTreeMap<&'a str, Vec<&'a TaggedProcess>>>;

impl Scan {
    /// The tagged processes of `install`, grouped by owner and session.
    pub fn by_owner<'a>(&'a self, install: &'a str) -> ByOwner<'a> {
        let mut out: ByOwner<'a> = BTreeMap::new();
        for p in self.of_install(install) {
            out.entry(p.owner())
                .or_default()
                .entry(p.tag.session.as_str())
                .or_default()
                .push(p);
        }
        out
    }
}

impl TaggedProcess {
    /// The owner its tag names.
    pub fn owner(&self) -> OwnerKey {
        OwnerKey {
            pid: self.tag.owner_pid,
            start_time: self.tag.owner_start,
        }
    }

    /// Whether it is a keeper (purpose `keeper`).
    pub fn is_keeper(&self) -> bool {
        self.tag.purpose == KEEPER_PURPOSE
    }
}

/// The purpose in a keeper's spawn tag.
pub const KEEPER_PURPOSE: &str = "keeper";

/// The command line of `pid` as arguments (empty if unreadable).
pub fn argv_of(pid: u32) -> Vec<String> {
    tether::sys::command_line(pid)
}

// The scan is tested against real Linux processes (tether-testkit).
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A `sh` that has said it is running (so its exec, and with it its
    /// environment, is complete — the parent of a `posix_spawn` resumes
    /// before the child's new environment is in place) and exits when its
    /// stdin closes.
    fn ready_sh(tag: Option<&str>) -> std::process::Child {
        tether_testkit::spawn_ready(tether::SPAWN_TAG_VAR, tag)
    }

    #[test]
    fn the_scan_sees_a_tagged_child_and_not_an_untagged_one() {
        let tag = "v1:00000000000000aa:test:1:1:scanself";
        let mut tagged = ready_sh(Some(tag));
        let mut plain = ready_sh(None);
        let scan = Scan::take();
        let found = scan.get(tagged.id()).cloned();
        let plain_found = scan.get(plain.id()).is_some();
        drop(tagged.stdin.take());
        drop(plain.stdin.take());
        tagged.wait().unwrap();
        plain.wait().unwrap();
        let found = found.expect("tagged child found");
        assert_eq!(found.tag.to_string(), tag);
        assert_eq!(found.ppid, std::process::id());
        assert!(!plain_found);
        assert_eq!(scan.of_install("00000000000000aa").count(), 1);
    }
}
