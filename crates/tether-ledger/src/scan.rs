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

use serde::Serialize;
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
    /// Its process group.
    pub pgrp: u32,
    /// Start time, in the process table's units ([`Clock`] converts them).
    pub start_time: u64,
    /// Scheduling state (zombies are excluded; a process whose main thread
    /// exited while others run says `Zombie` with `threads > 1`).
    pub state: ProcessState,
    /// Live threads.
    pub threads: u32,
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
        let processes = scan.tagged.iter().map(TaggedProcess::from_sys).collect();
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

    /// The processes of this user whose environment cannot be read, each
    /// with the session it provably descends from where one can be named
    /// (see [`Descent`]). Listed, never signalled.
    pub fn unreadable(&self) -> Vec<UnreadableProcess> {
        self.unattributable
            .iter()
            .map(|info| UnreadableProcess {
                pid: info.pid,
                ppid: info.ppid,
                pgrp: info.pgrp,
                sid: info.session,
                start_time: info.start_time,
                age_ms: self.clock.age_ms(info.start_time),
                state: info.state.word(),
                command: argv_of(info.pid).join(" "),
                descends_from: self.descent_of(info),
            })
            .collect()
    }

    /// The tagged process `info` provably descends from, if any: its parent
    /// (a child of a tagged process was forked by it, or adopted by it as a
    /// subreaper from below), or the leader of its session (every member of
    /// a session descends from the process that created it, and a live
    /// session's id is never reused as a pid).
    fn descent_of(&self, info: &ProcessInfo) -> Option<Descent> {
        let from = |p: &TaggedProcess, how: DescentKind| Descent {
            install: p.tag.install.clone(),
            session: p.tag.session.clone(),
            via: p.pid,
            how,
        };
        if let Some(parent) = self.get(info.ppid) {
            return Some(from(parent, DescentKind::Parent));
        }
        let leader = self.get(info.session)?;
        // The tagged process with the session id's pid must lead that very
        // session (a pid is never reused while it names a live session).
        let leads = tether::sys::process(leader.pid)
            .is_ok_and(|l| l.session == l.pid && l.start_time == leader.start_time);
        leads.then(|| from(leader, DescentKind::SessionLeader))
    }

    /// The process with this pid, if it is tagged.
    pub fn get(&self, pid: u32) -> Option<&TaggedProcess> {
        self.processes
            .binary_search_by_key(&pid, |p| p.pid)
            .ok()
            .map(|i| &self.processes[i])
    }
}

/// A live process of this user whose environment cannot be read: it made
/// itself non-dumpable (ssh-agent, gpg-agent and others do), so its spawn
/// tag — if it has one — is invisible to anyone but root. It cannot be
/// attributed to an owner, so it is never reaped; `tether ps` and `tether
/// reap` list it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnreadableProcess {
    /// Pid.
    pub pid: u32,
    /// Parent pid.
    pub ppid: u32,
    /// Process group.
    pub pgrp: u32,
    /// Session id (the pid of the process that created its session).
    pub sid: u32,
    /// Start time, clock ticks since boot.
    pub start_time: u64,
    /// Age in milliseconds.
    pub age_ms: u64,
    /// Scheduler state.
    pub state: &'static str,
    /// Command line (readable even when the environment is not).
    pub command: String,
    /// The tether session it provably descends from, if one can be named.
    /// A descent is not an owner's death: still never signalled.
    pub descends_from: Option<Descent>,
}

/// How an unreadable process is known to descend from a tagged one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Descent {
    /// Install of the tagged process.
    pub install: String,
    /// Its session.
    pub session: String,
    /// Its pid.
    pub via: u32,
    /// How the descent is known.
    pub how: DescentKind,
}

/// How a descent is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DescentKind {
    /// The tagged process is its parent.
    Parent,
    /// The tagged process leads its session.
    SessionLeader,
}

impl UnreadableProcess {
    /// Whether it may belong to `install` (it descends from one of its
    /// sessions, or from nothing that says otherwise).
    pub fn may_belong_to(&self, install: &str) -> bool {
        self.descends_from
            .as_ref()
            .is_none_or(|d| d.install == install)
    }
}

impl std::fmt::Display for UnreadableProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("cannot be attributed: environment unreadable (non-dumpable)")?;
        match &self.descends_from {
            Some(d) => write!(
                f,
                "; descends from session {} ({} {} is tagged)",
                d.session,
                match d.how {
                    DescentKind::Parent => "its parent",
                    DescentKind::SessionLeader => "its session leader",
                },
                d.via
            ),
            None => Ok(()),
        }
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
    /// The scan's entry for what the process table found.
    pub(crate) fn from_sys(p: &tether::sys::TaggedProcess) -> TaggedProcess {
        TaggedProcess {
            pid: p.info.pid,
            ppid: p.info.ppid,
            pgrp: p.info.pgrp,
            start_time: p.info.start_time,
            state: p.info.state,
            threads: p.info.threads,
            tag: p.tag.clone(),
        }
    }

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
