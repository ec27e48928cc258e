//! The tag scan: every live process of this user that carries a spawn tag,
//! read straight from the process table.
//!
//! This is what finds processes the ledger never saw (it was lost, or they
//! escaped), and what a quarantined ledger is rebuilt from. It reads
//! `/proc/<pid>/environ` of every process — the environment a process was
//! exec'd with, inherited by every descendant, even a daemon that closed
//! all its descriptors — and `/proc/<pid>/stat` of the tagged ones.
//! Processes of other users are never included: their environment is
//! unreadable to a normal user, and even root only ever reaps its own.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;

use tether::{SPAWN_TAG_VAR, SpawnTag};

use crate::clock::Clock;
use crate::proof::OwnerKey;

/// One live process carrying a valid spawn tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaggedProcess {
    /// Its pid (in the pid namespace `/proc` shows).
    pub pid: u32,
    /// Its parent's pid (1, or a subreaper, once orphaned).
    pub ppid: u32,
    /// Start time, clock ticks since boot.
    pub start_time: u64,
    /// `/proc` state letter: `R`, `S`, `D`, `T`, … (zombies are excluded).
    pub state: u8,
    /// The tag from its environment.
    pub tag: SpawnTag,
}

/// A snapshot of the tagged processes on the machine.
#[derive(Clone, Debug)]
pub struct Scan {
    /// Tagged live processes of this user, by pid.
    pub processes: Vec<TaggedProcess>,
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
        let pids = tether::procs::all_pids();
        // SAFETY: getuid cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        // Reading another process's environment goes through its memory
        // map (~5–10 µs each); with thousands of processes two threads
        // halve the wall time of `tether ps`.
        let threads = if pids.len() >= 2_000 {
            std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
        } else {
            1
        };
        let mut processes: Vec<TaggedProcess> = if threads <= 1 {
            scan_pids(&pids, uid)
        } else {
            let chunk = pids.len().div_ceil(threads);
            std::thread::scope(|s| {
                let handles: Vec<_> = pids
                    .chunks(chunk)
                    .map(|part| s.spawn(move || scan_pids(part, uid)))
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| h.join().unwrap_or_default())
                    .collect()
            })
        };
        processes.sort_by_key(|p| p.pid);
        Scan {
            processes,
            scanned: pids.len(),
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

/// Reads an open `/proc/<pid>/{environ,cmdline}` file into the scratch
/// buffer `buf` (grown as needed, never shrunk) and returns how many bytes
/// it holds, with as few syscalls as possible: `File::read_to_end` would add
/// a statx, an lseek and a final empty read to each of the 10,000 files a
/// scan of a busy machine opens. These files fill a read as far as their
/// content goes, so a short read is the end.
fn read_proc_file(mut file: &File, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    if buf.is_empty() {
        buf.resize(16 * 1024, 0);
    }
    let mut len = 0;
    loop {
        let n = file.read(&mut buf[len..])?;
        len += n;
        if len < buf.len() {
            return Ok(len);
        }
        buf.resize(buf.len() * 2, 0);
    }
}

/// Opens `rel` (`<pid>/environ`) relative to the open `/proc`: no walk
/// from `/` for each of thousands of files.
fn open_in_proc(proc_dir: &File, rel: &str) -> Option<File> {
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;
    openat(
        proc_dir,
        rel,
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()
    .map(File::from)
}

/// The command line of `pid` as arguments (empty if unreadable).
pub fn argv_of(pid: u32) -> Vec<String> {
    let mut buf = vec![0; 4096];
    let len = File::open(format!("/proc/{pid}/cmdline")).and_then(|f| read_proc_file(&f, &mut buf));
    let Ok(len) = len else {
        return Vec::new();
    };
    buf[..len]
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect()
}

fn scan_pids(pids: &[u32], uid: u32) -> Vec<TaggedProcess> {
    let mut out = Vec::new();
    let Ok(proc_dir) = File::open("/proc") else {
        return out;
    };
    let mut path = String::with_capacity(32);
    let mut buf = Vec::new();
    for &pid in pids {
        if let Some(p) = scan_one(&proc_dir, pid, uid, &mut path, &mut buf) {
            out.push(p);
        }
    }
    out
}

fn scan_one(
    proc_dir: &File,
    pid: u32,
    uid: u32,
    path: &mut String,
    buf: &mut Vec<u8>,
) -> Option<TaggedProcess> {
    use std::fmt::Write;
    path.clear();
    let _ = write!(path, "{pid}/environ");
    let file = open_in_proc(proc_dir, path)?;
    let len = read_proc_file(&file, buf).ok()?;
    let tag = find_tag(&buf[..len])?;
    // Only now the (rarer) tagged process costs more syscalls. The
    // environ file is owned by the process's (effective) uid.
    if file.metadata().ok()?.uid() != uid {
        return None;
    }
    let stat = tether::procs::read_stat(pid).ok()?;
    if matches!(stat.state, b'Z' | b'X') {
        return None;
    }
    Some(TaggedProcess {
        pid,
        ppid: stat.ppid,
        start_time: stat.start_time,
        state: stat.state,
        tag,
    })
}

/// The first `TETHER_SPAWN=` entry of a NUL-separated environment block,
/// parsed; a malformed tag is no tag.
pub(crate) fn find_tag(environ: &[u8]) -> Option<SpawnTag> {
    let name = SPAWN_TAG_VAR.as_bytes();
    environ
        .split(|&b| b == 0)
        .find_map(|entry| entry.strip_prefix(name)?.strip_prefix(b"="))
        .and_then(|value| std::str::from_utf8(value).ok()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_well_formed_tag_entry() {
        let tag = "v1:0123456789abcdef:run:42:7:abc";
        let env = format!("A=1\0XTETHER_SPAWN=nope\0TETHER_SPAWN={tag}\0TETHER_SPAWN=v1:x\0");
        assert_eq!(find_tag(env.as_bytes()).unwrap().to_string(), tag);
        assert!(find_tag(b"TETHER_SPAWN=garbage\0").is_none());
        assert!(find_tag(b"TETHER_SPAWNX=v1:0123456789abcdef:run:42:7:abc\0").is_none());
        assert!(find_tag(b"").is_none());
    }

    /// A `sh` that has said it is running (so its exec, and with it its
    /// environment, is complete — the parent of a `posix_spawn` resumes
    /// before the child's new environment is in place) and exits when its
    /// stdin closes.
    fn ready_sh(tag: Option<&str>) -> std::process::Child {
        tether_testkit::spawn_ready(SPAWN_TAG_VAR, tag)
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
