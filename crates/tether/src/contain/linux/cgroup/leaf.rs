//! The keeper's half: the session's own cgroups — a v2 leaf (for
//! `cgroup.kill`, and the v2 controllers) and a leaf in each v1 hierarchy
//! a limit is routed to — made before the command starts, entered by the
//! command before its first instruction, read for the limits it ran into,
//! and removed once its tree is empty.
//!
//! Every leaf is `tether-<session>.<install>.<owner pid>.<owner start>`
//! (`super::LeafName`) directly below the directory the owner named (its own cgroup there); an existing directory of that name
//! is never adopted.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use super::super::keeper::Member;
use crate::contain::unix::protocol::{LimitSpec, Route, SpawnStage};
use crate::limits::{Enforcement, LimitHit, LimitReport};
use crate::spawn_tag::SpawnTag;

/// The period of CPU quotas: 100 ms, the kernel's default (a quota is
/// cores × period).
const CPU_PERIOD_US: u64 = 100_000;
/// Smallest quota the kernel takes per period: 1 ms.
const CPU_MIN_QUOTA_US: u64 = 1_000;

/// Which version of cgroups a leaf is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    /// The unified hierarchy.
    V2,
    /// A v1 hierarchy.
    V1,
}

/// One directory made for the session.
#[derive(Debug)]
struct Leaf {
    dir: PathBuf,
    version: Version,
    /// v1: the controller it was made for, which names its hierarchy's
    /// line in `/proc/<pid>/cgroup`.
    controller: Option<&'static str>,
    /// `cgroup.procs`, open for writing: the command writes `0` to it
    /// before exec.
    procs: OwnedFd,
}

impl Leaf {
    /// Makes `base/name`. An existing directory is an error, never adopted.
    fn make(
        base: &Path,
        name: &str,
        version: Version,
        controller: Option<&'static str>,
    ) -> io::Result<Leaf> {
        let dir = base.join(name);
        std::fs::create_dir(&dir)?;
        let procs = match std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
        {
            Ok(f) => OwnedFd::from(f),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        };
        Ok(Leaf {
            dir,
            version,
            controller,
            procs,
        })
    }

    fn write(&self, file: &str, value: &str) -> Result<(), Refusal> {
        std::fs::write(self.dir.join(file), value).map_err(|e| Refusal {
            why: format!("writing {value} to {}: {e}", self.dir.join(file).display()),
            errno: e.raw_os_error().unwrap_or(libc::EIO),
        })
    }

    /// The number a single-value file such as `memory.failcnt` holds.
    fn number(&self, file: &str) -> Option<u64> {
        std::fs::read_to_string(self.dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// `key N` from a flat-keyed file such as `memory.events`.
    fn counter(&self, file: &str, key: &str) -> Option<u64> {
        let mut text = String::new();
        File::open(self.dir.join(file))
            .ok()?
            .read_to_string(&mut text)
            .ok()?;
        text.lines().find_map(|line| {
            let (k, v) = line.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok())?
        })
    }
}

/// Why a limit could not be written, and the kernel's error.
#[derive(Debug)]
struct Refusal {
    why: String,
    errno: i32,
}

/// Where a limit ended up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holder {
    V2,
    /// `v1[i]`.
    V1(usize),
}

/// The cgroups of one session, from its start to its end.
#[derive(Debug, Default)]
pub(crate) struct SessionCgroups {
    v2: Option<Leaf>,
    v1: Vec<Leaf>,
    memory: Option<Holder>,
    pids: Option<Holder>,
    /// `cgroup.kill` of the v2 leaf, opened at the first kill.
    kill: Option<File>,
    /// Writes to `cgroup.kill` so far.
    kills: u32,
    /// Why the command must not start: a limit whose value the kernel
    /// refused (`EINVAL`/`ERANGE`), or, when enforcement is required, a
    /// limit that is not enforced — the stage naming the limit, and the
    /// error.
    refused: Option<(SpawnStage, Errno)>,
    /// Processes found outside the session's cgroups, and where each was.
    escaped: Vec<Escape>,
}

/// A process found outside the session's cgroups.
#[derive(Debug)]
struct Escape {
    pid: u32,
    /// Where it was, as [`outside`] spells it (the last time found out).
    place: String,
    /// How many times the keeper moved it back into the leaves it left.
    moved_back: u32,
}

impl SessionCgroups {
    /// Makes the session's leaves as `spec` routes its limits and applies
    /// them; a step that fails makes that limit `none`, with the error.
    /// Returns the cgroups and the report of what was applied.
    /// Each leaf is named after the session and its owner, from `tag`,
    /// the command's spawn tag ([`LeafName`](super::LeafName)); without
    /// one, the session gets no leaf.
    pub(crate) fn create(
        spec: &LimitSpec,
        tag: Option<&SpawnTag>,
    ) -> (SessionCgroups, LimitReport) {
        let mut cgroups = SessionCgroups::default();
        let mut report = LimitReport::default();
        if spec.is_empty() {
            return (cgroups, report);
        }
        let valid_name = tag.is_some();
        let name = tag
            .map(|t| super::LeafName::of(t).to_string())
            .unwrap_or_default();
        let mut v2_error = None;
        if let Some(base) = &spec.v2_base {
            if !valid_name {
                v2_error = Some("the session has no id to name its cgroup by".to_owned());
            } else {
                match Leaf::make(&path(base), &name, Version::V2, None) {
                    Ok(leaf) => cgroups.v2 = Some(leaf),
                    Err(e) => {
                        v2_error = Some(format!("making {}: {e}", path(base).join(&name).display()))
                    }
                }
            }
        }
        let mut refused = None;
        let mut apply = |value: u64, route: &Route, kind: Kind| -> (Enforcement, Option<Holder>) {
            let holder = match route {
                Route::Unavailable(reason) => {
                    if spec.require {
                        refused.get_or_insert((kind.stage(), Errno::ENOTSUP));
                    }
                    return (none(String::from_utf8_lossy(reason).into_owned()), None);
                }
                Route::Cgroup2 => match &cgroups.v2 {
                    Some(_) => Holder::V2,
                    None => {
                        if spec.require {
                            refused.get_or_insert((kind.stage(), Errno::ENOTSUP));
                        }
                        let why = v2_error
                            .clone()
                            .unwrap_or_else(|| "no cgroup v2 leaf for the session".into());
                        return (none(why), None);
                    }
                },
                Route::Cgroup1(base) if valid_name => {
                    let base = path(base);
                    match cgroups
                        .v1
                        .iter()
                        .position(|l| l.dir.parent() == Some(&base))
                    {
                        Some(i) => Holder::V1(i),
                        None => {
                            match Leaf::make(&base, &name, Version::V1, Some(kind.controller())) {
                                Ok(leaf) => {
                                    cgroups.v1.push(leaf);
                                    Holder::V1(cgroups.v1.len() - 1)
                                }
                                Err(e) => {
                                    if spec.require {
                                        refused.get_or_insert((kind.stage(), errno_of(&e)));
                                    }
                                    return (
                                        none(format!("making {}: {e}", base.join(&name).display())),
                                        None,
                                    );
                                }
                            }
                        }
                    }
                }
                Route::Cgroup1(_) => {
                    if spec.require {
                        refused.get_or_insert((kind.stage(), Errno::ENOTSUP));
                    }
                    return (
                        none("the session has no id to name its cgroup by".into()),
                        None,
                    );
                }
            };
            let leaf = cgroups.leaf(holder);
            match kind.apply(leaf, value) {
                Ok(()) => (
                    match leaf.version {
                        Version::V2 => Enforcement::Cgroup2,
                        Version::V1 => Enforcement::Cgroup1,
                    },
                    Some(holder),
                ),
                Err(Refusal { why, errno }) => {
                    // A value the kernel refuses is the caller's error,
                    // never a silent `none` (`pids.max` 4194305 stayed `max`).
                    if spec.require || matches!(errno, libc::EINVAL | libc::ERANGE) {
                        refused.get_or_insert((kind.stage(), Errno::from_raw(errno)));
                    }
                    (none(why), None)
                }
            }
        };
        let (mut memory, mut pids) = (None, None);
        if let Some((bytes, route)) = &spec.memory {
            let (how, holder) = apply(*bytes, route, Kind::Memory);
            report.memory = Some((*bytes, how));
            memory = holder;
        }
        if let Some((n, route)) = &spec.pids {
            let (how, holder) = apply(*n, route, Kind::Pids);
            report.pids = Some((*n, how));
            pids = holder;
        }
        if let Some((millis, route)) = &spec.cpu_millis {
            let (how, _) = apply(*millis, route, Kind::Cpu);
            report.cpu_millis = Some((*millis, how));
        }
        cgroups.memory = memory;
        cgroups.pids = pids;
        cgroups.refused = refused;
        report.cgroup = cgroups.v2.as_ref().map(|l| l.dir.clone());
        report.cgroups = cgroups.dirs();
        (cgroups, report)
    }

    /// Why the command must not start (see `refused`), if it must not:
    /// the caller removes the cgroups and reports the start as failed.
    pub(crate) fn refused(&self) -> Option<(SpawnStage, Errno)> {
        self.refused
    }

    fn leaf(&self, holder: Holder) -> &Leaf {
        match holder {
            Holder::V2 => self.v2.as_ref().expect("a v2 holder has a v2 leaf"),
            Holder::V1(i) => &self.v1[i],
        }
    }

    fn dirs(&self) -> Vec<PathBuf> {
        self.v2
            .iter()
            .chain(&self.v1)
            .map(|l| l.dir.clone())
            .collect()
    }

    /// The `cgroup.procs` descriptors the command (or the namespace init)
    /// writes `0` to before its first instruction.
    pub(crate) fn procs(&self) -> Vec<RawFd> {
        self.v2
            .iter()
            .chain(&self.v1)
            .map(|l| l.procs.as_raw_fd())
            .collect()
    }

    /// `SIGKILL` to every process in the session's v2 leaf, in one write
    /// (`cgroup.kill`, Linux 5.14+). `false` if there is no v2 leaf or the
    /// kernel has no `cgroup.kill` (the caller's per-process sweep then
    /// does the work).
    pub(crate) fn kill(&mut self) -> bool {
        use std::io::Write;
        let Some(leaf) = &self.v2 else { return false };
        if self.kill.is_none() {
            self.kill = std::fs::OpenOptions::new()
                .write(true)
                .open(leaf.dir.join("cgroup.kill"))
                .ok();
        }
        let killed = self
            .kill
            .as_mut()
            .is_some_and(|f| f.write_all(b"1").is_ok());
        self.kills += u32::from(killed);
        killed
    }

    /// How many times [`kill`](Self::kill) has written `cgroup.kill`.
    pub(crate) fn kills(&self) -> u32 {
        self.kills
    }

    /// The processes in the session's v2 leaf now (`None`: no v2 leaf, or
    /// unreadable): one read, where walking the tree opens every process.
    pub(crate) fn members(&self) -> Option<Vec<u32>> {
        let text = std::fs::read_to_string(self.v2.as_ref()?.dir.join("cgroup.procs")).ok()?;
        Some(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }

    /// The v2 leaf's id: its directory's inode number, which is what the
    /// kernel reports as a process's cgroup id (`None`: no v2 leaf).
    pub(crate) fn v2_id(&self) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        Some(std::fs::metadata(&self.v2.as_ref()?.dir).ok()?.ino())
    }

    /// Whether any process is still in the v2 leaf (`None`: no v2 leaf, or
    /// unreadable).
    pub(crate) fn populated(&self) -> Option<bool> {
        self.v2
            .as_ref()?
            .counter("cgroup.events", "populated")
            .map(|n| n != 0)
    }

    /// The limit the session has run into so far: the OOM kills its memory
    /// limit caused (memory first: it killed processes), else the forks its
    /// process limit refused.
    ///
    /// An OOM kill is the session's limit only if the session's own limit
    /// was reached: the kill counters (`oom_kill`) count every OOM kill of
    /// the leaf's processes, also those an ancestor's limit (the owner's
    /// cgroup at 200 MiB, the session's at 1 GiB) or the whole machine ran
    /// out for — reported as the session's limit before. cgroup v2: the
    /// leaf's `memory.events` `oom` counts the times its own limit (or one
    /// below it) was reached with the OOM killer next, never an ancestor's.
    /// cgroup v1 has no such counter: there the leaf's own limit was
    /// reached if its peak (`memory.max_usage_in_bytes`, and the `memsw`
    /// one) came within [`ONE_CHARGE`] of its limit — a charge that fails
    /// at an ancestor's counter leaves the leaf below its own — or if its
    /// `failcnt` counted a charge that failed at its own counter (6.18
    /// here counts none for `memsw`, and none for `memory` while a `memsw`
    /// limit fails first: 0 and 0 for a 500 MiB allocation under 100 MiB,
    /// whose peak read exactly 100 MiB). A leaf that once reached its limit
    /// and reclaimed, then lost a process to an ancestor's OOM, still reads
    /// as its own: v1 keeps no finer record.
    pub(crate) fn hit(&self) -> Option<LimitHit> {
        let memory = self
            .oom_kills()
            .and_then(|(kills, own)| (kills > 0 && own).then_some(kills))
            .map(|kills| LimitHit::Memory {
                victims: kills.min(u32::MAX as u64) as u32,
            });
        let pids = self.pids.and_then(|h| {
            let refused = self.leaf(h).counter("pids.events", "max")?;
            (refused > 0).then_some(LimitHit::Pids { refused })
        });
        LimitHit::worst(memory, pids)
    }

    /// Processes of the session OOM-killed so far for memory its own limit
    /// did not run out of: its owner's cgroup limit (an ancestor's) or the
    /// machine's (see [`hit`](Self::hit)). 0 without a memory leaf.
    pub(crate) fn oom_outside(&self) -> u32 {
        match self.oom_kills() {
            Some((kills, false)) => kills.min(u32::MAX as u64) as u32,
            _ => 0,
        }
    }

    /// The OOM kills of the memory leaf's processes so far, and whether
    /// its own limit was reached (see [`hit`](Self::hit)).
    fn oom_kills(&self) -> Option<(u64, bool)> {
        let leaf = self.leaf(self.memory?);
        Some(match leaf.version {
            Version::V2 => (
                leaf.counter("memory.events", "oom_kill")?,
                leaf.counter("memory.events", "oom").unwrap_or(0) > 0,
            ),
            Version::V1 => (leaf.counter("memory.oom_control", "oom_kill")?, {
                let reached =
                    |peak: &str, limit: &str| match (leaf.number(peak), leaf.number(limit)) {
                        (Some(peak), Some(limit)) => peak.saturating_add(ONE_CHARGE) >= limit,
                        _ => false,
                    };
                reached("memory.max_usage_in_bytes", "memory.limit_in_bytes")
                    || reached(
                        "memory.memsw.max_usage_in_bytes",
                        "memory.memsw.limit_in_bytes",
                    )
                    || leaf.number("memory.failcnt").unwrap_or(0) > 0
                    || leaf.number("memory.memsw.failcnt").unwrap_or(0) > 0
            }),
        })
    }

    /// Notes which of `pids` (members of the session's tree, listed by a
    /// walk) are outside the session's cgroups: moved out of their limits.
    /// One read of each leaf's subtree's `cgroup.procs` says who is in;
    /// only a pid in none of them costs a read of its `/proc/<pid>/cgroup`
    /// (which also rules out a zombie: `cgroup.procs` lists none, its
    /// `/proc` file still names its cgroup).
    pub(crate) fn note_escapes(&mut self, pids: &[u32]) {
        let leaves: Vec<&Leaf> = self.v2.iter().chain(&self.v1).collect();
        if leaves.is_empty() || pids.is_empty() {
            return;
        }
        let inside: Vec<std::collections::HashSet<u32>> = leaves
            .iter()
            .map(|l| super::subtree::members(&l.dir))
            .collect();
        let mut found = Vec::new();
        for &pid in pids {
            if !inside.iter().any(|set| !set.contains(&pid))
                || self.escaped.iter().any(|e| e.pid == pid)
            {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
                continue;
            };
            if let Some(place) = outside(&leaves, &text) {
                found.push(Escape {
                    pid,
                    place,
                    moved_back: 0,
                });
            }
        }
        self.escaped.extend(found);
    }

    /// Whether the session has a leaf whose membership the keeper
    /// watches while the tree runs ([`move_back`](Self::move_back)).
    pub(crate) fn watched(&self) -> bool {
        self.v2.is_some() || !self.v1.is_empty()
    }

    /// Moves each of `members` (the tree, walked just before: each pinned
    /// and proven) that left one of the session's leaves back into every
    /// leaf it left, and notes it (as [`note_escapes`](Self::note_escapes),
    /// with the moves counted). One read of each leaf's subtree's
    /// `cgroup.procs` says who is in (read after the walk: a process forked
    /// since is in its parent's cgroup); only a member missing from one
    /// costs more.
    ///
    /// Each move is a write of the pid, so it is made only for a member
    /// whose held pidfd shows it alive before, and checked after: alive
    /// after the write, the pid named it during the write (a pid is not
    /// reused before its process is reaped). Found exited after, the pid
    /// may have named another process by the time of the write — the
    /// member reaped (by its own parent, a member) and the pid reused
    /// within those microseconds: whatever now has that pid in the leaf is
    /// not the session's (the member cannot be listed there: a process
    /// that exited leaves its cgroup's `cgroup.procs`), so it is moved
    /// out again, to the leaf's parent (the owner's cgroup, where an
    /// escape goes), before any `cgroup.kill` could reach it; the escape
    /// is then reported as not moved back.
    pub(crate) fn move_back(&mut self, members: &[Member]) {
        let leaves: Vec<&Leaf> = self.v2.iter().chain(&self.v1).collect();
        if leaves.is_empty() || members.is_empty() {
            return;
        }
        let inside: Vec<std::collections::HashSet<u32>> = leaves
            .iter()
            .map(|l| super::subtree::members(&l.dir))
            .collect();
        let mut found = Vec::new();
        for member in members {
            let pid = member.pid;
            let left: Vec<&Leaf> = leaves
                .iter()
                .zip(&inside)
                .filter(|(_, set)| !set.contains(&pid))
                .map(|(l, _)| *l)
                .collect();
            if left.is_empty() || member.has_exited() {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
                continue;
            };
            // Read by pid: it describes the member only if alive after.
            if member.has_exited() {
                continue;
            }
            let Some(place) = outside(&leaves, &text) else {
                continue;
            };
            let mut moved = true;
            for leaf in &left {
                if std::fs::write(leaf.dir.join("cgroup.procs"), pid.to_string()).is_err() {
                    moved = false;
                }
            }
            if member.has_exited() {
                moved = false;
                for leaf in &left {
                    if super::subtree::members(&leaf.dir).contains(&pid)
                        && let Some(parent) = leaf.dir.parent()
                    {
                        let _ = std::fs::write(parent.join("cgroup.procs"), pid.to_string());
                    }
                }
            }
            found.push((pid, place, moved));
        }
        for (pid, place, moved) in found {
            match self.escaped.iter_mut().find(|e| e.pid == pid) {
                Some(e) => {
                    e.place = place;
                    e.moved_back += moved as u32;
                }
                None => self.escaped.push(Escape {
                    pid,
                    place,
                    moved_back: moved as u32,
                }),
            }
        }
    }

    /// The processes [`note_escapes`](Self::note_escapes) and
    /// [`move_back`](Self::move_back) found, where, and how many times
    /// each was moved back.
    pub(crate) fn escaped(&self) -> Vec<(u32, Vec<u8>, u32)> {
        self.escaped
            .iter()
            .map(|e| (e.pid, e.place.clone().into_bytes(), e.moved_back))
            .collect()
    }

    /// Removes every leaf (the tree is empty), each with the cgroups the
    /// command made below it, deepest first (`subtree.rs`). A leaf the
    /// kernel still counts a dying process in is tried again for a moment;
    /// one that stays busy is left for `tether reap`.
    ///
    /// All of it within [`REMOVE_BOUND`]: the keeper's loop waits on it
    /// (the leaves are gone before the owner hears the tree is empty), and
    /// a process someone moved into the session's cgroup that outlives
    /// `SIGKILL` (uninterruptible sleep; a frozen v1 freezer cgroup) held
    /// it for up to 5 s for the v2 leaf, then 5 s more per leaf — 20 s
    /// with three leaves — deaf to its owner all the while.
    pub(crate) fn remove(mut self) {
        let deadline = std::time::Instant::now() + REMOVE_BOUND;
        // The keeper's tree is empty, but a process someone moved into the
        // session's cgroup is no descendant of the keeper: it is the
        // session's all the same, so it goes too, before the leaf does.
        if self.populated() == Some(true) && self.kill() {
            self.wait_unpopulated(deadline.saturating_duration_since(std::time::Instant::now()));
        }
        self.kill = None;
        for leaf in self.v2.take().into_iter().chain(self.v1.drain(..)) {
            let Leaf { dir, procs, .. } = leaf;
            drop(procs);
            let _ = super::subtree::remove_path_by(&dir, deadline);
        }
    }
}

/// The largest single memory charge that can fail: a transparent huge
/// page (2 MiB on x86-64). A cgroup whose limit an allocation failed at
/// peaked within this of it.
const ONE_CHARGE: u64 = 2 << 20;

/// How long [`SessionCgroups::remove`] may take in all: killing what is
/// in the session's cgroups but not in its tree, waiting for it to be
/// gone, and removing the leaves. A killed process is normally gone in
/// well under a millisecond (200 of 200 leaves here went at the first
/// `rmdir`); what outlives this is left, with its leaf, to the owner's
/// `tether reap` (which waits the full 5 s verification window).
const REMOVE_BOUND: std::time::Duration = std::time::Duration::from_secs(1);

impl SessionCgroups {
    /// Waits until the v2 leaf holds no process, at most `bound`: woken by
    /// the kernel's notification on `cgroup.events` (`POLLPRI` on every
    /// change of `populated`), never by a sleep. `false` if it still does.
    fn wait_unpopulated(&self, bound: std::time::Duration) -> bool {
        use std::io::Seek;
        let Some(leaf) = &self.v2 else { return true };
        let Ok(mut events) = File::open(leaf.dir.join("cgroup.events")) else {
            return false;
        };
        let deadline = std::time::Instant::now() + bound;
        loop {
            let mut text = String::new();
            if events.rewind().is_err() || events.read_to_string(&mut text).is_err() {
                return false;
            }
            if text.lines().any(|l| l == "populated 0") {
                return true;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            let mut pfd = libc::pollfd {
                fd: events.as_raw_fd(),
                events: libc::POLLPRI,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the call's duration.
            unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        }
    }
}

/// The kinds of limit, and how each is written.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Memory,
    Pids,
    Cpu,
}

impl Kind {
    /// The cgroup controller of this limit.
    fn controller(self) -> &'static str {
        match self {
            Kind::Memory => "memory",
            Kind::Pids => "pids",
            Kind::Cpu => "cpu",
        }
    }

    /// The spawn stage that names this limit in a refusal.
    fn stage(self) -> SpawnStage {
        match self {
            Kind::Memory => SpawnStage::MemoryLimit,
            Kind::Pids => SpawnStage::PidsLimit,
            Kind::Cpu => SpawnStage::CpuLimit,
        }
    }

    fn apply(self, leaf: &Leaf, value: u64) -> Result<(), Refusal> {
        match (self, leaf.version) {
            (Kind::Memory, Version::V2) => {
                leaf.write("memory.max", &value.to_string())?;
                // RAM only, no swap: "a 256 MiB limit" means it. Absent
                // without swap accounting, which is fine.
                let _ = leaf.write("memory.swap.max", "0");
                Ok(())
            }
            (Kind::Memory, Version::V1) => {
                leaf.write("memory.limit_in_bytes", &value.to_string())?;
                let _ = leaf.write("memory.memsw.limit_in_bytes", &value.to_string());
                Ok(())
            }
            (Kind::Pids, _) => leaf.write("pids.max", &value.to_string()),
            (Kind::Cpu, version) => {
                // Thousandths of a core × 100 ms period = µs per period.
                let quota = (value * (CPU_PERIOD_US / 1000)).max(CPU_MIN_QUOTA_US);
                match version {
                    Version::V2 => leaf.write("cpu.max", &format!("{quota} {CPU_PERIOD_US}")),
                    Version::V1 => {
                        leaf.write("cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
                        leaf.write("cpu.cfs_quota_us", &quota.to_string())
                    }
                }
            }
        }
    }
}

/// Where the process whose `/proc/<pid>/cgroup` is `text` is instead of
/// in (or below) each of `leaves` it left: `hierarchy:path`, one per
/// hierarchy, the v1 ones (the limits) first; `None` if it left none.
fn outside(leaves: &[&Leaf], text: &str) -> Option<String> {
    let mut places = Vec::new();
    let v1_first = leaves
        .iter()
        .filter(|l| l.controller.is_some())
        .chain(leaves.iter().filter(|l| l.controller.is_none()));
    for leaf in v1_first {
        let name = leaf.dir.file_name()?.to_str()?;
        let line = text.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let ours = match leaf.controller {
                None => id == "0" && controllers.is_empty(),
                Some(c) => controllers.split(',').any(|x| x == c),
            };
            ours.then_some((controllers, path))
        });
        if let Some((controllers, path)) = line
            && !path.split('/').any(|component| component == name)
        {
            let hierarchy = if controllers.is_empty() {
                "cgroup2"
            } else {
                controllers
            };
            places.push(format!("{hierarchy}:{path}"));
        }
    }
    (!places.is_empty()).then(|| places.join(" "))
}

fn errno_of(e: &io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

fn none(reason: String) -> Enforcement {
    Enforcement::None(reason)
}

fn path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(std::ffi::OsString::from_vec(bytes.to_vec()))
}
