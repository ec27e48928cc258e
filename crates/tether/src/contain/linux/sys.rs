//! `tether::sys` on Linux: `/proc` for reading, pidfds for pinning.

use std::io;
use std::time::Duration;

use super::pidfd::{Pidfd, wait_all_exited};
use super::procfs;
use crate::contain::sys::{
    Clock, NestedNamespace, ProcessInfo, Sighting, TagRead, TagScan, TaggedProcess, Visibility,
};
use crate::identity::ProcessIdentity;
use crate::spawn_tag::SpawnTag;

pub(crate) fn process(pid: u32) -> io::Result<ProcessInfo> {
    procfs::read_stat(pid)
}

pub(crate) fn all_pids() -> Vec<u32> {
    procfs::all_pids()
}

pub(crate) fn children(pid: u32) -> Vec<u32> {
    procfs::children_of(pid)
}

pub(crate) fn command_line(pid: u32) -> Vec<String> {
    procfs::argv_of(pid)
}

pub(crate) fn short_name(pid: u32) -> String {
    procfs::comm_of(pid)
}

pub(crate) fn read_tag(pid: u32) -> TagRead {
    procfs::read_tag(pid)
}

pub(crate) fn real_uid(pid: u32) -> io::Result<u32> {
    procfs::real_uid(pid)
}

pub(crate) fn current_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

pub(crate) fn boot_id() -> &'static str {
    procfs::boot_id()
}

pub(crate) fn clock() -> Clock {
    let ticks_per_sec = procfs::ticks_per_sec();
    let uptime_ms = procfs::uptime_ms();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    Clock {
        ticks_per_sec,
        uptime_ticks: uptime_ms * ticks_per_sec / 1000,
        boot_time_ms: now_ms.saturating_sub(uptime_ms),
    }
}

pub(crate) fn visibility() -> Visibility {
    Visibility {
        own_namespace: procfs::own_pid_namespace().is_some(),
        hides_other_users: procfs::proc_has_hidepid(),
    }
}

pub(crate) fn in_own_pid_namespace(pid: u32) -> bool {
    let Some(own) = procfs::own_pid_namespace() else {
        return false;
    };
    procfs::pid_namespace(&pid.to_string()).is_some_and(|ns| ns == own)
}

/// The tag scan: reads `/proc/<pid>/environ` of every process — the
/// environment a process was exec'd with, inherited by every descendant,
/// even a daemon that closed all its descriptors — and the stat and real
/// uid of the tagged ones.
pub(crate) fn scan_tagged(uid: u32) -> TagScan {
    let pids = procfs::all_pids();
    // Reading another process's environment goes through its memory map
    // (~5–10 µs each); with thousands of processes two threads halve the
    // wall time of `tether ps`.
    let threads = if pids.len() >= 2_000 {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
    } else {
        1
    };
    let mut parts: Vec<TagScan> = if threads <= 1 {
        vec![scan_pids(&pids, uid)]
    } else {
        let chunk = pids.len().div_ceil(threads);
        std::thread::scope(|s| {
            let handles: Vec<_> = pids
                .chunks(chunk)
                .map(|part| s.spawn(move || scan_pids(part, uid)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        })
    };
    let mut scan = TagScan {
        scanned: pids.len(),
        ..TagScan::default()
    };
    for part in &mut parts {
        scan.tagged.append(&mut part.tagged);
        scan.unreadable.append(&mut part.unreadable);
    }
    scan.tagged.sort_by_key(|p| p.info.pid);
    scan.unreadable.sort_by_key(|p| p.pid);
    scan
}

fn scan_pids(pids: &[u32], uid: u32) -> TagScan {
    let mut out = TagScan::default();
    let Ok(proc_dir) = procfs::open_proc() else {
        return out;
    };
    let mut scratch = Scratch::default();
    for &pid in pids {
        match examine(&proc_dir, pid, uid, &mut scratch) {
            Found::Tagged(p) => out.tagged.push(p),
            Found::Unreadable(info) => out.unreadable.push(info),
            Found::Vanished(_) | Found::Exited(_) | Found::Nothing => {}
        }
    }
    out
}

/// Buffers reused across the thousands of reads of one scan.
#[derive(Default)]
struct Scratch {
    path: String,
    buf: Vec<u8>,
}

/// What one pid of a scan turned out to be.
enum Found {
    Tagged(TaggedProcess),
    Unreadable(ProcessInfo),
    /// Tagged when its environment was read, gone by the stat.
    Vanished(SpawnTag),
    /// Ours, and exited while its environment was read.
    Exited(ProcessInfo),
    Nothing,
}

fn examine(proc_dir: &std::fs::File, pid: u32, uid: u32, scratch: &mut Scratch) -> Found {
    match procfs::read_tag_at(Some(proc_dir), pid, &mut scratch.path, &mut scratch.buf) {
        TagRead::Tag(tag) => {
            // Only now the (rarer) tagged process costs more syscalls.
            let Ok(info) = procfs::read_stat(pid) else {
                return Found::Vanished(tag);
            };
            let Ok(owner) = procfs::real_uid(pid) else {
                return Found::Vanished(tag);
            };
            if owner != uid {
                Found::Nothing
            } else if info.has_exited() {
                // A non-empty environment means it still had its memory
                // when the file was opened: it exited since. (Reading a
                // process's environment waits while it forks — the fork
                // holds its memory map — so a fork-and-exit hopper is
                // typically read just before it exits, its successor
                // already born.)
                Found::Vanished(tag)
            } else {
                Found::Tagged(TaggedProcess {
                    info,
                    uid: owner,
                    tag,
                })
            }
        }
        TagRead::Unreadable => {
            // Another user's (the common case), or ours made non-dumpable:
            // only the latter is worth reporting.
            if procfs::real_uid(pid).is_ok_and(|owner| owner == uid)
                && let Ok(info) = procfs::read_stat(pid)
                && !info.has_exited()
            {
                Found::Unreadable(info)
            } else {
                Found::Nothing
            }
        }
        TagRead::Exited => match procfs::read_stat(pid) {
            Ok(info) if procfs::real_uid(pid).is_ok_and(|owner| owner == uid) => {
                Found::Exited(info)
            }
            _ => Found::Nothing,
        },
        TagRead::Untagged | TagRead::Gone | TagRead::Starting => Found::Nothing,
    }
}

/// Calls `met` for each tagged process of `uid` *as the scan meets it*, in
/// ascending pid order, reading `/proc` one entry at a time
/// ([`procfs::each_pid`]): a pid created after the scan started but above
/// where it stands is still met. That is what catches a fork-and-exit
/// "pid hopper", whose every next pid is higher until pids wrap around.
pub(crate) fn each_tagged(uid: u32, mut met: impl FnMut(Sighting<'_>)) {
    let Ok(proc_dir) = procfs::open_proc() else {
        return;
    };
    let mut scratch = Scratch::default();
    procfs::each_pid(|pid| meet(&proc_dir, pid, uid, &mut scratch, &mut met));
}

/// [`each_tagged`] for the pids in `pids`, each looked up directly: a pid
/// that names no process costs one failed `pidfd_open`.
pub(crate) fn each_tagged_in(
    uid: u32,
    pids: std::ops::RangeInclusive<u32>,
    mut met: impl FnMut(Sighting<'_>),
) {
    let Ok(proc_dir) = procfs::open_proc() else {
        return;
    };
    let mut scratch = Scratch::default();
    for pid in pids {
        meet(&proc_dir, pid, uid, &mut scratch, &mut met);
    }
}

/// Examines `pid` pinned ([`examine_pinned`]) and tells `met` what it was.
fn meet(
    proc_dir: &std::fs::File,
    pid: u32,
    uid: u32,
    scratch: &mut Scratch,
    met: &mut impl FnMut(Sighting<'_>),
) {
    match examine_pinned(proc_dir, pid, uid, scratch) {
        (Found::Tagged(p), pin) => met(Sighting::Alive(&p, pin.map(crate::contain::sys::Pinned))),
        (Found::Vanished(tag), _) => met(Sighting::Vanished { pid, tag: &tag }),
        (Found::Exited(info), _) => met(Sighting::Exited(&info)),
        (Found::Unreadable(_) | Found::Nothing, _) => {}
    }
}

/// [`examine`], with `pid` pinned by a pidfd *before* anything of it is
/// read; a tagged process comes with the pin only if it had not exited
/// after the last read, so every read was of the pinned process. Whoever
/// acts on it then needs no second read before signalling through the
/// pin — and a fork-and-exit "pid hopper" lives for one fork: the fewer
/// reads between meeting one and signalling it, the likelier the signal
/// lands before the fork does. (The environment is read first and nothing
/// after it takes the process's memory-map lock: reading the environment
/// waits while the process forks, and a read that waits comes too late.)
fn examine_pinned(
    proc_dir: &std::fs::File,
    pid: u32,
    uid: u32,
    scratch: &mut Scratch,
) -> (Found, Option<Pin>) {
    let pidfd = match Pidfd::open(pid) {
        Ok(fd) => fd,
        // No process (or a thread of one, met at its own pid).
        Err(e) if matches!(e.raw_os_error(), Some(libc::ESRCH | libc::EINVAL)) => {
            return (Found::Nothing, None);
        }
        // Out of descriptors: read it unpinned; whoever acts pins it then.
        Err(_) => return (examine(proc_dir, pid, uid, scratch), None),
    };
    match examine(proc_dir, pid, uid, scratch) {
        Found::Tagged(p) if !pidfd.has_exited() => {
            let identity = ProcessIdentity {
                boot_id: procfs::boot_id().to_owned(),
                pid,
                start_time: p.info.start_time,
                pidfs_inode: pidfd.inode(),
            };
            (Found::Tagged(p), Some(Pin { pidfd, identity }))
        }
        Found::Tagged(p) => (Found::Vanished(p.tag), None),
        other => (other, None),
    }
}

/// Where `pid` sits when it lives in a pid namespace nested in ours: the
/// init of the outermost nested namespace holding it, found by walking
/// its parents (an orphan inside a namespace is adopted inside it, so the
/// walk never leaves the namespace before its init). `None` when `pid`
/// lives in ours, or the walk cannot be completed.
pub(crate) fn nested_namespace(pid: u32) -> Option<NestedNamespace> {
    let own = procfs::own_pid_namespace()?;
    let in_own = |p: u32| procfs::pid_namespace(&p.to_string()).is_some_and(|ns| ns == own);
    if in_own(pid) {
        return None;
    }
    let mut current = procfs::read_stat(pid).ok()?;
    // Bounded: a chain of parents is at most as long as the process table.
    for _ in 0..100_000 {
        if current.ppid == 0 || in_own(current.ppid) {
            break;
        }
        current = procfs::read_stat(current.ppid).ok()?;
    }
    // The top of the chain must be pid 1 of a namespace directly below ours.
    if procfs::ns_pids_of(current.pid)? != [current.pid, 1] || in_own(current.pid) {
        return None;
    }
    let clock = procfs::time_namespace("self");
    let same_clock = clock.is_some()
        && procfs::time_namespace(&pid.to_string()) == clock
        && procfs::time_namespace(&current.pid.to_string()) == clock;
    Some(NestedNamespace {
        init: current,
        same_clock,
    })
}

/// The identity of `pid` now. The pidfd is opened first and checked last, so
/// the start time read in between belongs to the process the pidfd names.
pub(crate) fn identity_of(pid: u32) -> io::Result<ProcessIdentity> {
    let pidfd = Pidfd::open(pid)?;
    identity_with_pidfd(pid, &pidfd)
}

/// Like [`identity_of`] with a pidfd the caller already holds.
pub(crate) fn identity_with_pidfd(pid: u32, pidfd: &Pidfd) -> io::Result<ProcessIdentity> {
    let stat = procfs::read_stat(pid)?;
    if pidfd.has_exited() || stat.has_exited() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("process {pid} has exited"),
        ));
    }
    Ok(ProcessIdentity {
        boot_id: procfs::boot_id().to_owned(),
        pid,
        start_time: stat.start_time,
        pidfs_inode: pidfd.inode(),
    })
}

/// A process pinned by a pidfd after its identity was verified. Reads of
/// `/proc/<pid>` made while the pinned process has not exited are known to
/// be of that process, because a pid is not reused before its process is
/// reaped.
#[derive(Debug)]
pub(crate) struct Pin {
    pidfd: Pidfd,
    identity: ProcessIdentity,
}

impl Pin {
    pub(crate) fn open(expected: &ProcessIdentity) -> io::Result<Option<Pin>> {
        if expected.boot_id != procfs::boot_id() {
            return Ok(None);
        }
        let pidfd = match Pidfd::open(expected.pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
            Err(e) => return Err(e),
        };
        match identity_with_pidfd(expected.pid, &pidfd) {
            Ok(now) if now.matches(expected) => Ok(Some(Pin {
                pidfd,
                identity: now,
            })),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn identity(&self) -> &ProcessIdentity {
        &self.identity
    }

    pub(crate) fn spawn_tag(&self) -> Option<SpawnTag> {
        let tag = match procfs::read_tag(self.identity.pid) {
            TagRead::Tag(tag) => Some(tag),
            _ => None,
        };
        if self.pidfd.has_exited() { None } else { tag }
    }

    pub(crate) fn signal(&self, sig: i32) -> io::Result<bool> {
        if self.pidfd.has_exited() {
            return Ok(false);
        }
        match self.pidfd.send_signal(sig) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
            Err(e) => Err(e),
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

    pub(crate) fn has_exited(&self) -> bool {
        self.pidfd.has_exited()
    }

    pub(crate) fn pidfd(&self) -> &Pidfd {
        &self.pidfd
    }
}

pub(crate) fn wait_exited(pins: &[&Pin], bound: Duration) {
    let fds: Vec<&Pidfd> = pins.iter().map(|p| p.pidfd()).collect();
    wait_all_exited(&fds, bound)
}

/// Start time and pidfs inode of a process that cannot go away yet (our
/// unreaped child, or one held at a gate).
pub(crate) fn identify_unreaped(pid: u32) -> io::Result<(u64, Option<u64>)> {
    let pidfd = Pidfd::open(pid)?;
    let start_time = procfs::read_stat(pid)?.start_time;
    Ok((start_time, pidfd.inode()))
}
