//! `tether::sys` on macOS: `sysctl` for reading, and — there being no
//! pidfd — a pin that is the identity (pid and start time), re-read right
//! before every signal.

use std::io;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::kqueue::{self, Kqueue};
use super::records::{Environment, Kinfo, parse_procargs, tag_in};
use super::sysctl::{self, ArgsError};
use crate::contain::sys::{Clock, ProcessInfo, TagRead, TagScan, TaggedProcess, Visibility};
use crate::identity::ProcessIdentity;
use crate::spawn_tag::SpawnTag;

fn not_found(pid: u32) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("no process {pid}"))
}

fn info(k: &Kinfo) -> ProcessInfo {
    ProcessInfo {
        pid: k.pid,
        ppid: k.ppid,
        pgrp: k.pgrp,
        session: sysctl::session_of(k.pid).unwrap_or(0),
        state: k.state(),
        threads: 1,
        start_time: k.start_us,
    }
}

pub(crate) fn process(pid: u32) -> io::Result<ProcessInfo> {
    sysctl::proc_of(pid)?
        .map(|k| info(&k))
        .ok_or_else(|| not_found(pid))
}

pub(crate) fn all_pids() -> Vec<u32> {
    sysctl::all_procs()
        .unwrap_or_default()
        .into_iter()
        .map(|k| k.pid)
        // pid 0 is the kernel, not a process anything may act on.
        .filter(|&pid| pid != 0)
        .collect()
}

pub(crate) fn children(pid: u32) -> Vec<u32> {
    sysctl::all_procs()
        .unwrap_or_default()
        .into_iter()
        .filter(|k| k.ppid == pid && k.pid != pid)
        .map(|k| k.pid)
        .collect()
}

pub(crate) fn command_line(pid: u32) -> Vec<String> {
    let mut buf = Vec::new();
    let Ok(area) = sysctl::procargs(pid, &mut buf) else {
        return Vec::new();
    };
    parse_procargs(area).map_or_else(Vec::new, |args| {
        args.argv
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    })
}

pub(crate) fn short_name(pid: u32) -> String {
    sysctl::proc_of(pid)
        .ok()
        .flatten()
        .map(|k| k.comm())
        .unwrap_or_default()
}

pub(crate) fn read_tag(pid: u32) -> TagRead {
    read_tag_with(pid, &mut Vec::new())
}

/// Reads `pid`'s spawn tag with the scratch buffer `buf`.
fn read_tag_with(pid: u32, buf: &mut Vec<u8>) -> TagRead {
    match sysctl::procargs(pid, buf) {
        Ok(area) => match parse_procargs(area).map(|args| args.env) {
            Some(Environment::Strings(env)) => tag_in(&env).map_or(TagRead::Untagged, TagRead::Tag),
            Some(Environment::Withheld) | None => TagRead::Unreadable,
        },
        Err(ArgsError::Truncated) => TagRead::Unreadable,
        // The kernel says EINVAL alike for a process that is gone, a
        // zombie, and another user's: the process table tells them apart.
        Err(ArgsError::Refused) => match sysctl::proc_of(pid) {
            Ok(Some(k)) if !k.has_exited() => TagRead::Unreadable,
            Ok(_) => TagRead::Gone,
            Err(_) => TagRead::Unreadable,
        },
    }
}

pub(crate) fn real_uid(pid: u32) -> io::Result<u32> {
    sysctl::proc_of(pid)?
        .map(|k| k.ruid)
        .ok_or_else(|| not_found(pid))
}

pub(crate) fn current_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// `kern.bootsessionuuid`, read once. (Not derived from `kern.boottime`:
/// macOS moves that when the clock is set, and a boot id must not change
/// within a boot. Empty if it cannot be read, which every process of this
/// boot then agrees on.)
pub(crate) fn boot_id() -> &'static str {
    static BOOT_ID: OnceLock<String> = OnceLock::new();
    BOOT_ID.get_or_init(|| sysctl::boot_session_uuid().unwrap_or_default())
}

/// Start times on macOS are microseconds since the Unix epoch (see
/// `Kinfo::start_us`), so the clock's origin is the epoch: "uptime" is now
/// since the epoch and the wall clock at the origin is 0. Ages and wall
/// times come out right; a clock set backwards makes recent ages read
/// short, never an identity change.
pub(crate) fn clock() -> Clock {
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros().min(u64::MAX as u128) as u64);
    Clock {
        ticks_per_sec: 1_000_000,
        uptime_ticks: now_us,
        boot_time_ms: 0,
    }
}

pub(crate) fn visibility() -> Visibility {
    Visibility {
        own_namespace: true,
        // kern.proc.all lists every user's processes.
        hides_other_users: false,
    }
}

pub(crate) fn in_own_pid_namespace(_pid: u32) -> bool {
    true
}

/// The tag scan: one `kern.proc.all` snapshot, then `kern.procargs2` of
/// every live process of `uid` — the environment it was exec'd with,
/// inherited by every descendant, even a daemon that closed all its
/// descriptors.
pub(crate) fn scan_tagged(uid: u32) -> TagScan {
    let procs = sysctl::all_procs().unwrap_or_default();
    let mut scan = TagScan {
        scanned: procs.len(),
        ..TagScan::default()
    };
    let mut buf = Vec::new();
    for k in procs
        .iter()
        .filter(|k| k.ruid == uid && k.pid != 0 && !k.has_exited())
    {
        let read = read_tag_with(k.pid, &mut buf);
        if !matches!(read, TagRead::Tag(_) | TagRead::Unreadable) {
            continue;
        }
        // The read was of whatever had the pid then: it is this process's
        // only if the pid still names a live process of `uid` with the same
        // start time now.
        let Ok(Some(now)) = sysctl::proc_of(k.pid) else {
            continue;
        };
        if now.start_us != k.start_us || now.ruid != uid || now.has_exited() {
            continue;
        }
        match read {
            TagRead::Tag(tag) => scan.tagged.push(TaggedProcess {
                info: info(&now),
                uid,
                tag,
            }),
            // Withheld or refused although ours and alive: worth reporting.
            _ => scan.unreadable.push(info(&now)),
        }
    }
    scan
}

/// The identity of `pid` now.
pub(crate) fn identity_of(pid: u32) -> io::Result<ProcessIdentity> {
    match sysctl::proc_of(pid)? {
        Some(k) if !k.has_exited() => Ok(ProcessIdentity {
            boot_id: boot_id().to_owned(),
            pid,
            start_time: k.start_us,
            pidfs_inode: None,
        }),
        Some(_) => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("process {pid} has exited"),
        )),
        None => Err(not_found(pid)),
    }
}

/// A process pinned by its identity: every use re-reads the process table
/// and acts only if the pid still names a live process with the pinned
/// start time. What is left open — the process exiting, being reaped and
/// its pid reused between that read and the signal — macOS gives no way
/// to close (see `Member::signal` in `keeper.rs`).
#[derive(Debug)]
pub(crate) struct Pin {
    identity: ProcessIdentity,
}

impl Pin {
    pub(crate) fn open(expected: &ProcessIdentity) -> io::Result<Option<Pin>> {
        if expected.boot_id != boot_id() {
            return Ok(None);
        }
        match identity_of(expected.pid) {
            Ok(now) if now.matches(expected) => Ok(Some(Pin { identity: now })),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn identity(&self) -> &ProcessIdentity {
        &self.identity
    }

    /// Whether the pinned process is alive now (`Err`: the table could not
    /// be read, which proves nothing either way).
    fn alive(&self) -> io::Result<bool> {
        Ok(sysctl::proc_of(self.identity.pid)?
            .is_some_and(|k| k.start_us == self.identity.start_time && !k.has_exited()))
    }

    pub(crate) fn spawn_tag(&self) -> Option<SpawnTag> {
        let tag = match read_tag(self.identity.pid) {
            TagRead::Tag(tag) => Some(tag),
            _ => None,
        };
        // Read first, checked after: if it is still the pinned process
        // now, the environment read was its.
        if self.alive().unwrap_or(false) {
            tag
        } else {
            None
        }
    }

    pub(crate) fn signal(&self, sig: i32) -> io::Result<bool> {
        if !self.alive()? {
            return Ok(false);
        }
        // SAFETY: kill(2) with the pid just verified to name the pinned
        // process (the residual race: see the type docs).
        if unsafe { libc::kill(self.identity.pid as libc::pid_t, sig) } == 0 {
            return Ok(true);
        }
        match io::Error::last_os_error() {
            e if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
            e => Err(e),
        }
    }

    pub(crate) fn terminate(&self) -> io::Result<bool> {
        let sent = self.signal(libc::SIGTERM)?;
        if sent {
            let _ = self.signal(libc::SIGCONT);
        }
        Ok(sent)
    }

    pub(crate) fn kill(&self) -> io::Result<bool> {
        self.signal(libc::SIGKILL)
    }

    /// Exited (a zombie counts). An unreadable table proves no death.
    pub(crate) fn has_exited(&self) -> bool {
        matches!(self.alive(), Ok(false))
    }
}

/// Waits until every pin has exited or `bound` passes, woken by
/// `EVFILT_PROC`/`NOTE_EXIT` on each pinned pid (allowed for any process).
/// No exit is missed between the check and the registration: XNU hides an
/// exiting process from lookups (`proc_prepareexit`) before it posts
/// `NOTE_EXIT` (`proc_exit`), so registering either fails (`ESRCH`: the
/// process counts as exited) or sees the exit.
pub(crate) fn wait_exited(pins: &[&Pin], bound: Duration) {
    let deadline = Instant::now() + bound;
    let kq = Kqueue::new().ok();
    if let Some(kq) = &kq {
        for pin in pins {
            let _ = kq.apply(kqueue::change(
                pin.identity.pid as usize,
                libc::EVFILT_PROC,
                libc::EV_ADD,
                libc::NOTE_EXIT,
            ));
        }
    }
    let mut events = vec![kqueue::slot(); pins.len().clamp(1, 64)];
    loop {
        // Registered first, checked after: an exit after this check wakes
        // the wait below.
        let left = deadline.saturating_duration_since(Instant::now());
        if pins.iter().all(|p| p.has_exited()) || left.is_zero() {
            return;
        }
        match &kq {
            Some(kq) => {
                let _ = kq.wait(&[], &mut events, Some(left));
            }
            // No kqueue (descriptor limit): look again every 10 ms.
            None => std::thread::sleep(left.min(Duration::from_millis(10))),
        }
    }
}
