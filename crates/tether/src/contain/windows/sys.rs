//! `tether::sys` on Windows: not implemented yet (an empty process table).

use std::io;
use std::time::Duration;

use crate::contain::sys::{Clock, ProcessInfo, TagRead, TagScan, Visibility};
use crate::identity::ProcessIdentity;
use crate::spawn_tag::SpawnTag;

fn unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "the process table is not read on Windows yet",
    )
}

pub(crate) fn process(_pid: u32) -> io::Result<ProcessInfo> {
    Err(unsupported())
}
pub(crate) fn all_pids() -> Vec<u32> {
    Vec::new()
}
pub(crate) fn children(_pid: u32) -> Vec<u32> {
    Vec::new()
}
pub(crate) fn command_line(_pid: u32) -> Vec<String> {
    Vec::new()
}
pub(crate) fn short_name(_pid: u32) -> String {
    String::new()
}
pub(crate) fn read_tag(_pid: u32) -> TagRead {
    TagRead::Unreadable
}
pub(crate) fn real_uid(_pid: u32) -> io::Result<u32> {
    Err(unsupported())
}
pub(crate) fn current_uid() -> u32 {
    0
}
pub(crate) fn boot_id() -> &'static str {
    ""
}
pub(crate) fn clock() -> Clock {
    Clock {
        ticks_per_sec: 10_000_000,
        uptime_ticks: 0,
        boot_time_ms: 0,
    }
}
pub(crate) fn visibility() -> Visibility {
    Visibility {
        own_namespace: true,
        hides_other_users: false,
    }
}
pub(crate) fn in_own_pid_namespace(_pid: u32) -> bool {
    true
}
pub(crate) fn scan_tagged(_uid: u32) -> TagScan {
    TagScan::default()
}
pub(crate) fn identity_of(_pid: u32) -> io::Result<ProcessIdentity> {
    Err(unsupported())
}

/// A pinned process (none can be pinned yet).
#[derive(Debug)]
pub(crate) struct Pin(super::Never);

impl Pin {
    pub(crate) fn open(_expected: &ProcessIdentity) -> io::Result<Option<Pin>> {
        Err(unsupported())
    }
    pub(crate) fn identity(&self) -> &ProcessIdentity {
        super::never()
    }
    pub(crate) fn spawn_tag(&self) -> Option<SpawnTag> {
        super::never()
    }
    pub(crate) fn terminate(&self) -> io::Result<bool> {
        super::never()
    }
    pub(crate) fn kill(&self) -> io::Result<bool> {
        super::never()
    }
    pub(crate) fn has_exited(&self) -> bool {
        super::never()
    }
}

pub(crate) fn wait_exited(_pins: &[&Pin], _bound: Duration) {}
