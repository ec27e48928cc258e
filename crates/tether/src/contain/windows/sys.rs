//! `tether::sys` on Windows: the Toolhelp snapshot, process handles, and
//! other processes' environment blocks (see `peb`).
//!
//! Start times are creation times in 100 ns units since the Unix epoch
//! (`GetProcessTimes` counts from 1601; the offset is subtracted), so the
//! [`Clock`]'s "boot" origin is the epoch itself. They are absolute
//! instants at 100 ns, so a process of an earlier boot never shares one
//! with a live process: the boot id is empty.
//!
//! Windows has no uids. A process's "uid" here is a 32-bit FNV-1a hash of
//! its token's user SID: equal for the same user, and a collision between
//! two users of one machine needs 2^32-to-1 luck — and even then nothing
//! is killed on the uid alone (reap also proves the spawn tag and the
//! owner's death, and opening another user's process for termination needs
//! rights a normal user does not have).

use std::io;
use std::os::windows::io::{AsHandle, AsRawHandle, OwnedHandle};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{HANDLE, WAIT_FAILED, WAIT_TIMEOUT};
use windows_sys::Win32::System::Threading::{
    PROCESS_QUERY_INFORMATION, PROCESS_VM_READ, WaitForMultipleObjects,
};

use super::process::{self, EPOCH_OFFSET, QUERY, QUERY_TERMINATE};
use super::user::Sid;
use super::{peb, quote};
use crate::contain::sys::{
    Clock, ProcessInfo, ProcessState, TagRead, TagScan, TaggedProcess, Visibility,
};
use crate::identity::ProcessIdentity;
use crate::spawn_tag::{SPAWN_TAG_VAR, SpawnTag};

/// A creation time (`GetProcessTimes`) as a start time (since the epoch).
pub(super) fn start_of(creation: u64) -> u64 {
    creation.saturating_sub(EPOCH_OFFSET)
}

/// A start time back as a creation time.
fn creation_of(start: u64) -> u64 {
    start + EPOCH_OFFSET
}

fn info_of(pid: u32, handle: &OwnedHandle, ppid: Option<u32>) -> io::Result<ProcessInfo> {
    let start_time = start_of(process::creation_time(handle.as_handle())?);
    let exited = process::wait(handle.as_handle(), Some(Duration::ZERO)).unwrap_or(false);
    let ppid = match ppid {
        Some(p) => p,
        None => process::parent_pid(handle.as_handle()).unwrap_or(0),
    };
    Ok(ProcessInfo {
        pid,
        ppid,
        pgrp: 0,
        session: 0,
        // An exited process whose object someone's handle keeps alive is the
        // nearest thing Windows has to a zombie.
        state: if exited {
            ProcessState::Zombie
        } else {
            ProcessState::Running
        },
        threads: if exited { 0 } else { 1 },
        start_time,
    })
}

pub(crate) fn process(pid: u32) -> io::Result<ProcessInfo> {
    let handle = process::open(pid, QUERY)?;
    info_of(pid, &handle, None)
}

pub(crate) fn all_pids() -> Vec<u32> {
    // Pid 0 is the idle process, not a process one could act on.
    process::snapshot()
        .map(|rows| {
            rows.into_iter()
                .map(|r| r.pid)
                .filter(|&p| p != 0)
                .collect()
        })
        .unwrap_or_default()
}

/// The direct children of `pid`: processes naming it as parent and created
/// after it (Windows keeps a parent's pid after the parent exits, so an
/// older process "with this parent" names an earlier owner of the pid).
pub(crate) fn children(pid: u32) -> Vec<u32> {
    let Ok(parent) = process::open(pid, QUERY) else {
        return Vec::new();
    };
    let Ok(born) = process::creation_time(parent.as_handle()) else {
        return Vec::new();
    };
    process::snapshot()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.parent_pid == pid && r.pid != pid)
        .filter(|r| {
            process::open(r.pid, QUERY)
                .and_then(|h| process::creation_time(h.as_handle()))
                .is_ok_and(|t| t >= born)
        })
        .map(|r| r.pid)
        .collect()
}

pub(crate) fn command_line(pid: u32) -> Vec<String> {
    let Ok(handle) = process::open(pid, peb::PEB_READ) else {
        return Vec::new();
    };
    let Ok(line) = peb::command_line(handle.as_handle()) else {
        return Vec::new();
    };
    use std::os::windows::ffi::OsStrExt;
    let wide: Vec<u16> = line.encode_wide().collect();
    quote::split(&wide)
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

pub(crate) fn short_name(pid: u32) -> String {
    process::snapshot()
        .unwrap_or_default()
        .into_iter()
        .find(|r| r.pid == pid)
        .map(|r| r.exe.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// How long a tag read waits for a starting process to finish starting
/// (its loader runs in well under a millisecond; a process created
/// suspended waits for its creator, so this is a bound, not a wait).
const STARTING_BOUND: Duration = Duration::from_millis(200);

/// The tag in the environment of the process `handle` names. A process
/// still starting is waited for (bounded: no event says "the loader has
/// run", so this looks every millisecond), then reported as
/// [`TagRead::Starting`] — never as untagged on the strength of
/// parameters not yet in place.
fn tag_of(handle: &OwnedHandle) -> TagRead {
    let deadline = std::time::Instant::now() + STARTING_BOUND;
    loop {
        if process::wait(handle.as_handle(), Some(Duration::ZERO)).unwrap_or(true) {
            return TagRead::Gone;
        }
        match peb::has_started(handle.as_handle()) {
            Ok(true) => return started_tag_of(handle),
            Ok(false) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(false) => return TagRead::Starting,
            Err(_) => return TagRead::Unreadable,
        }
    }
}

/// The tag of a process whose loader has run.
fn started_tag_of(handle: &OwnedHandle) -> TagRead {
    match peb::environment(handle.as_handle()) {
        Ok(env) => match env.get(SPAWN_TAG_VAR.as_ref()) {
            Some(value) => match value.to_str().and_then(|v| v.parse::<SpawnTag>().ok()) {
                Some(tag) => TagRead::Tag(tag),
                None => TagRead::Untagged,
            },
            None => TagRead::Untagged,
        },
        Err(_) => TagRead::Unreadable,
    }
}

pub(crate) fn read_tag(pid: u32) -> TagRead {
    match process::open(pid, peb::PEB_READ) {
        Ok(handle) => tag_of(&handle),
        Err(e) if e.kind() == io::ErrorKind::NotFound => TagRead::Gone,
        Err(_) => TagRead::Unreadable,
    }
}

/// The "uid" of a user: see the module docs.
fn uid_of(sid: &Sid) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in sid.as_bytes() {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

pub(crate) fn real_uid(pid: u32) -> io::Result<u32> {
    let handle = process::open(pid, QUERY)?;
    Ok(uid_of(&Sid::of_process(handle.as_handle())?))
}

pub(crate) fn current_uid() -> u32 {
    static UID: OnceLock<u32> = OnceLock::new();
    *UID.get_or_init(|| Sid::current().map_or(0, |sid| uid_of(&sid)))
}

pub(crate) fn boot_id() -> &'static str {
    ""
}

pub(crate) fn clock() -> Clock {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Clock {
        ticks_per_sec: 10_000_000,
        uptime_ticks: (now.as_nanos() / 100) as u64,
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

pub(crate) fn scan_tagged(uid: u32) -> TagScan {
    let mut scan = TagScan::default();
    let me = std::process::id();
    for row in process::snapshot().unwrap_or_default() {
        if row.pid == 0 || row.pid == me {
            continue;
        }
        scan.scanned += 1;
        let Ok(query) = process::open(row.pid, QUERY) else {
            continue;
        };
        let Ok(sid) = Sid::of_process(query.as_handle()) else {
            continue;
        };
        if uid_of(&sid) != uid {
            continue;
        }
        let Ok(info) = info_of(row.pid, &query, Some(row.parent_pid)) else {
            continue;
        };
        if info.state.has_exited() {
            continue;
        }
        let read = process::open(row.pid, peb::PEB_READ)
            .map(|h| tag_of(&h))
            .unwrap_or(TagRead::Unreadable);
        match read {
            TagRead::Tag(tag) => scan.tagged.push(TaggedProcess { info, uid, tag }),
            // Listed, never signalled: what it will carry is not known yet.
            TagRead::Unreadable | TagRead::Starting => scan.unreadable.push(info),
            TagRead::Untagged | TagRead::Gone | TagRead::Exited => {}
        }
    }
    scan.tagged.sort_by_key(|t| t.info.pid);
    scan
}

/// Live processes whose tag names `session`, other than `except`, as
/// `(pid, creation time)` — an uncontained tree's members.
pub(super) fn session_members(session: &str, except: u32) -> Vec<(u32, u64)> {
    scan_tagged(current_uid())
        .tagged
        .into_iter()
        .filter(|t| t.tag.session == session && t.info.pid != except)
        .map(|t| (t.info.pid, creation_of(t.info.start_time)))
        .collect()
}

pub(crate) fn identity_of(pid: u32) -> io::Result<ProcessIdentity> {
    let handle = process::open(pid, QUERY)?;
    Ok(ProcessIdentity {
        boot_id: String::new(),
        pid,
        start_time: start_of(process::creation_time(handle.as_handle())?),
        pidfs_inode: None,
    })
}

/// A process pinned by a handle opened after its identity was checked:
/// the handle keeps the pid from being reused, so whatever goes through it
/// reaches this very process.
#[derive(Debug)]
pub(crate) struct Pin {
    handle: OwnedHandle,
    identity: ProcessIdentity,
}

impl Pin {
    pub(crate) fn open(expected: &ProcessIdentity) -> io::Result<Option<Pin>> {
        if expected.boot_id != boot_id() {
            return Ok(None);
        }
        let full = QUERY_TERMINATE | PROCESS_QUERY_INFORMATION | PROCESS_VM_READ;
        let handle = match process::open(expected.pid, full) {
            Ok(h) => h,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            // Another user's process: watchable, not killable.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                match process::open(expected.pid, QUERY) {
                    Ok(h) => h,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        let start = start_of(process::creation_time(handle.as_handle())?);
        if start != expected.start_time {
            return Ok(None);
        }
        Ok(Some(Pin {
            handle,
            identity: expected.clone(),
        }))
    }

    pub(crate) fn identity(&self) -> &ProcessIdentity {
        &self.identity
    }

    pub(crate) fn spawn_tag(&self) -> Option<SpawnTag> {
        match tag_of(&self.handle) {
            TagRead::Tag(tag) => Some(tag),
            _ => None,
        }
    }

    /// Nothing graceful exists for an arbitrary process on Windows.
    pub(crate) fn terminate(&self) -> io::Result<bool> {
        Ok(false)
    }

    pub(crate) fn kill(&self) -> io::Result<bool> {
        if self.has_exited() {
            return Ok(false);
        }
        process::terminate(self.handle.as_handle(), super::monitor::KILLED_EXIT_CODE)?;
        Ok(true)
    }

    pub(crate) fn has_exited(&self) -> bool {
        process::wait(self.handle.as_handle(), Some(Duration::ZERO)).unwrap_or(true)
    }
}

/// Waits on the pinned processes' handles (64 at a time, Windows' limit).
pub(crate) fn wait_exited(pins: &[&Pin], bound: Duration) {
    let deadline = Instant::now() + bound;
    for chunk in pins.chunks(64) {
        let handles: Vec<HANDLE> = chunk.iter().map(|p| p.handle.as_raw_handle()).collect();
        let left = deadline.saturating_duration_since(Instant::now());
        let millis = left.as_millis().min(u128::from(u32::MAX - 1)) as u32;
        // SAFETY: up to 64 valid process handles, held by the pins.
        let r =
            unsafe { WaitForMultipleObjects(handles.len() as u32, handles.as_ptr(), 1, millis) };
        if r == WAIT_TIMEOUT || r == WAIT_FAILED {
            return;
        }
    }
}
