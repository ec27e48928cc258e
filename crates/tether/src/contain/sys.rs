//! The process table, the same on every platform: reading a process's
//! state and identity, its command line and spawn tag, its children, every
//! pid, and signalling a process only if it still is the one you mean.
//!
//! This is deliberately small: what tether's own `ps`, `reap`, ledger and
//! tests need, and nothing about any one kernel's files. Every process is
//! named by pid *and* start time (and, on Linux, a pidfd while held): a bare
//! pid is never enough to act on.
//!
//! ```
//! let me = tether::sys::process(std::process::id())?;
//! println!("{} is {} (parent {})", me.pid, me.state.word(), me.ppid);
//! for pid in tether::sys::all_pids() {
//!     if let Some(tag) = tether::sys::spawn_tag(pid) {
//!         println!("{pid} belongs to tether session {}", tag.session);
//!     }
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Platform notes: on Linux everything comes from `/proc` and pins are
//! pidfds. On macOS it comes from `sysctl` (`KERN_PROC_ALL`,
//! `KERN_PROCARGS2`) and a pin is the identity re-checked right before each
//! signal (pid and start time; there is no pidfd). On Windows it comes from
//! the Toolhelp snapshot and the process environment block, and a pin is a
//! process handle.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::os::sys as imp;
use crate::identity::ProcessIdentity;
use crate::spawn_tag::SpawnTag;

/// What the process table says about one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Its pid.
    pub pid: u32,
    /// Its parent's pid (1, or a subreaper, once orphaned).
    pub ppid: u32,
    /// Its process group (0 where the platform has none).
    pub pgrp: u32,
    /// Its session id (0 where the platform has none).
    pub session: u32,
    /// Where it stands.
    pub state: ProcessState,
    /// Live threads (1 where the platform does not say).
    pub threads: u32,
    /// Start time in the platform's unit ([`Clock`] converts it): clock
    /// ticks since boot on Linux, microseconds since the Unix epoch on
    /// macOS (the kernel's fork time, which never moves — macOS shifts its
    /// boot time when the clock is set), 100 ns units on Windows.
    pub start_time: u64,
}

/// A process's scheduling state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProcessState {
    /// Running or runnable.
    Running,
    /// Waiting for an event (interruptible), or idle.
    Sleeping,
    /// Uninterruptible sleep (may outlast `SIGKILL` for a while).
    DiskSleep,
    /// Stopped by a signal (`SIGSTOP`, `SIGTSTP`, …).
    Stopped,
    /// Stopped by a tracer.
    Traced,
    /// Exited, not yet reaped by its parent. A zombie is dead.
    Zombie,
    /// Being torn down.
    Dead,
    /// Anything else the platform reports.
    Other,
}

impl ProcessState {
    /// A word for listings: `running`, `sleeping`, `disk-sleep`, `stopped`,
    /// `traced`, `zombie`, `dead`, `other`.
    pub fn word(self) -> &'static str {
        match self {
            ProcessState::Running => "running",
            ProcessState::Sleeping => "sleeping",
            ProcessState::DiskSleep => "disk-sleep",
            ProcessState::Stopped => "stopped",
            ProcessState::Traced => "traced",
            ProcessState::Zombie => "zombie",
            ProcessState::Dead => "dead",
            ProcessState::Other => "other",
        }
    }

    /// Zombie or dead: the process has exited.
    pub fn has_exited(self) -> bool {
        matches!(self, ProcessState::Zombie | ProcessState::Dead)
    }
}

impl ProcessInfo {
    /// Whether the process has exited. A zombie whose *main thread* exited
    /// while other threads run (`pthread_exit` in `main`) has not: it still
    /// counts threads.
    pub fn has_exited(&self) -> bool {
        self.state.has_exited() && self.threads <= 1
    }
}

/// Removes `dir`, a leftover cgroup of tether session `session` (Linux;
/// elsewhere `Ok(false)`): only if it provably is one — an absolute path
/// whose last component is the session's leaf name (`tether-<session>.…`,
/// or `tether-<session>` as earlier builds named it), every component a
/// directory (no symlink), the leaf on a cgroup filesystem — with the
/// cgroups below it, deepest first, whatever is still in them killed first
/// (it is in the session's cgroup, so it is the session's).
/// `Ok(true)`: removed; `Ok(false)`: already gone.
///
/// # Errors
/// `InvalidInput` for anything that is not such a directory (the ledger
/// that names it is attacker-shaped input); `EBUSY` while it holds a
/// process; other I/O errors as they come.
pub fn remove_session_cgroup(dir: &Path, session: &str) -> io::Result<bool> {
    #[cfg(target_os = "linux")]
    return super::os::cgroup::remove_session_leaf(dir, session);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (dir, session);
        Ok(false)
    }
}

/// A directory named like a session's cgroup leaf, found in a cgroup
/// hierarchy ([`session_cgroup_leaves`]): its name carries the session,
/// the install and the identity of the owner whose keeper made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionCgroupLeaf {
    /// The directory.
    pub path: std::path::PathBuf,
    /// The session it was made for.
    pub session: String,
    /// The install (state directory id) of the owner.
    pub install: String,
    /// The owner's pid (in the owner's PID namespace).
    pub owner_pid: u32,
    /// The owner's start time, in the process table's unit.
    pub owner_start: u64,
    /// The owner was in this process's pid namespace (so its pid can be
    /// read here); `false` also when that is unknown.
    pub owner_in_own_pid_namespace: bool,
}

/// Every directory named like a session's cgroup leaf
/// (`tether-<session>.<install>.<owner pid>.<owner start>.<pid namespace>`)
/// in the cgroup
/// hierarchies mounted here (Linux; elsewhere none), recorded or not: a
/// leaf whose owner, keeper and command were killed together while it
/// started was never recorded anywhere. The cgroups below a leaf are not
/// searched.
pub fn session_cgroup_leaves() -> Vec<SessionCgroupLeaf> {
    #[cfg(target_os = "linux")]
    {
        let own = super::os::cgroup::own_pidns();
        super::os::cgroup::session_leaves()
            .into_iter()
            .map(|(path, name)| SessionCgroupLeaf {
                path,
                owner_in_own_pid_namespace: own != 0 && name.pidns == own,
                session: name.session,
                install: name.install,
                owner_pid: name.owner_pid,
                owner_start: name.owner_start,
            })
            .collect()
    }
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}

/// Removes `leaf` (from [`session_cgroup_leaves`]) and the cgroups below
/// it, deepest first, if none holds a process: nothing is killed through
/// a leaf no record names. The caller proves its owner dead first.
/// `Ok(true)`: removed; `Ok(false)`: already gone.
///
/// # Errors
/// `ResourceBusy` while a process is in it; `InvalidInput` if the
/// directory is not such a leaf on a cgroup filesystem (or a component of
/// its path is a symlink); other I/O errors as they come.
pub fn remove_empty_session_cgroup(leaf: &SessionCgroupLeaf) -> io::Result<bool> {
    #[cfg(target_os = "linux")]
    return super::os::cgroup::remove_empty_leaf(&leaf.path, &leaf.session);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = leaf;
        Ok(false)
    }
}

/// Reads what the process table says about `pid` now.
///
/// # Errors
/// `NotFound` when no process has that pid; other I/O errors (Linux:
/// reading `/proc/<pid>/stat`) as they come.
pub fn process(pid: u32) -> io::Result<ProcessInfo> {
    imp::process(pid)
}

/// Every pid in the process table right now (tether's pid namespace).
pub fn all_pids() -> Vec<u32> {
    imp::all_pids()
}

/// The direct children of `pid` (empty when it has none or is gone).
pub fn children(pid: u32) -> Vec<u32> {
    imp::children(pid)
}

/// The command line of `pid` as arguments (empty when unreadable, or for
/// an instant while the process is inside `execve`).
pub fn command_line(pid: u32) -> Vec<String> {
    imp::command_line(pid)
}

/// The command line of `pid` as one line for reports, or `[name]` while it
/// has none to show.
pub fn describe(pid: u32) -> String {
    let line = command_line(pid).join(" ");
    if line.is_empty() {
        format!("[{}]", imp::short_name(pid))
    } else {
        line
    }
}

/// The spawn tag in `pid`'s environment, if it has a valid one.
pub fn spawn_tag(pid: u32) -> Option<SpawnTag> {
    match imp::read_tag(pid) {
        TagRead::Tag(tag) => Some(tag),
        _ => None,
    }
}

/// What looking for a spawn tag in a process's environment found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TagRead {
    /// A valid tag.
    Tag(SpawnTag),
    /// A readable environment without a valid tag.
    Untagged,
    /// The environment cannot be read: another user's process, or one of
    /// ours that made itself non-dumpable (ssh-agent, gpg-agent, …).
    Unreadable,
    /// The process exited while its environment was being read (a
    /// process that forks holds its memory map, so the read waits for the
    /// fork to finish; a fork-and-exit "pid hopper" is gone by then): it
    /// was there a moment ago, what it carried is unknown.
    Exited,
    /// The process is gone.
    Gone,
    /// The process is still starting and its environment is not in place
    /// yet (Windows: its loader has not run — under Wine a new process
    /// builds its parameters itself, after its creator's `CreateProcessW`
    /// returned). Neither tagged nor untagged: ask again. Never on Linux,
    /// where `execve` installs the environment before the first
    /// instruction.
    Starting,
}

/// Like [`spawn_tag`], saying why there is none.
pub fn read_spawn_tag(pid: u32) -> TagRead {
    imp::read_tag(pid)
}

/// The real uid of `pid`, from the process itself (never from the owner
/// of a file that describes it: a non-dumpable process's `/proc` files
/// belong to root).
///
/// # Errors
/// `NotFound` when it is gone.
pub fn real_uid(pid: u32) -> io::Result<u32> {
    imp::real_uid(pid)
}

/// This process's real uid (0 where the platform has none).
pub fn current_uid() -> u32 {
    imp::current_uid()
}

/// The kernel's boot id: identities from another boot never match.
pub fn boot_id() -> &'static str {
    imp::boot_id()
}

/// How a process holds a file-system object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HeldAs {
    /// It is the process's executable.
    Executable,
    /// It is the process's working directory.
    WorkingDirectory,
    /// It is the process's root directory (after `chroot`).
    Root,
    /// The process has it open (a descriptor).
    OpenFile,
    /// The process has it mapped into memory (a shared library, a
    /// memory-mapped file).
    MappedFile,
}

impl HeldAs {
    /// A word for listings: `exe`, `cwd`, `root`, `open`, `mapped`.
    pub fn word(self) -> &'static str {
        match self {
            HeldAs::Executable => "exe",
            HeldAs::WorkingDirectory => "cwd",
            HeldAs::Root => "root",
            HeldAs::OpenFile => "open",
            HeldAs::MappedFile => "mapped",
        }
    }
}

/// A file-system object's identity: the device it lives on and its inode
/// number there (Unix `st_dev` and `st_ino`). Every spelling of one object
/// — through a symlink, a bind mount, a hard link, another mount namespace
/// — has the same identity; two objects that exist at once never share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    /// The device (`st_dev`; `makedev(major, minor)` of `/proc/<pid>/maps`).
    pub device: u64,
    /// The inode number on that device.
    pub inode: u64,
}

/// One file-system object a process holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Held {
    /// How it holds it.
    pub how: HeldAs,
    /// The object's path as the kernel names it (absolute, links resolved,
    /// the kernel's escapes undone: `\012` in `/proc/<pid>/maps` is a
    /// newline).
    pub path: PathBuf,
    /// The object was deleted or replaced since it was opened (an updater
    /// replaced a library the process still maps): it is still held.
    pub deleted: bool,
    /// The object's identity where the kernel states it with the path
    /// (Linux: the device and inode columns of `/proc/<pid>/maps`); `None`
    /// otherwise — [`HeldUnder`] then looks the path up where the holder
    /// sees it.
    pub id: Option<FileId>,
}

/// What `pid` holds in the file system: its executable, working and root
/// directories, open files and memory-mapped files — each path once per
/// way it is held. Sockets, pipes and anonymous memory are not paths and
/// are left out.
///
/// Platform notes: Linux reads `/proc/<pid>/{exe,cwd,root,fd,maps}`. macOS
/// and Windows are best effort and say so (see their backends); where
/// nothing can be read the call fails with `Unsupported`.
///
/// # Errors
/// `NotFound` when the process is gone; `PermissionDenied` when it cannot
/// be inspected (another user's process, or one of ours that made itself
/// non-dumpable): then nothing is known about what it holds.
pub fn held_paths(pid: u32) -> io::Result<Vec<Held>> {
    super::os::holding::held_paths(pid)
}

/// A path whose holders are wanted, resolved once: what
/// [`HeldUnder::held_by`] compares every object a process holds with.
///
/// An object is held under the path when
/// - its path text lies under the path's canonical spelling, component by
///   component (on Windows without regard to case, as its file systems
///   compare), or
/// - by identity ([`FileId`]): it *is* the path's object, or one of its
///   ancestor directories — as the holder sees them — is. Linux looks
///   those paths up through `/proc/<pid>/root`, so in the holder's own
///   mount namespace.
///
/// So a program run through a bind mount of the path, or in a container
/// that mounts it elsewhere, holds the path; by path text alone such a
/// holder was missed and the path called free (issue 16). Extra matches
/// are on the safe side: a holder wrongly listed is only asked to exit.
///
/// Platform notes: Linux compares identities for every object; macOS for
/// ancestor directories (libproc gives no identities; one mount
/// namespace); Windows compares path text only. Not seen anywhere: a hard
/// link to a file under the path made from outside it, unless the path
/// names that file itself.
#[derive(Debug)]
pub struct HeldUnder {
    path: PathBuf,
    id: Option<FileId>,
    resolver: std::cell::RefCell<super::os::holding::Resolver>,
}

impl HeldUnder {
    /// Resolves `path`: its canonical spelling (on Windows without the
    /// `\\?\` prefix `canonicalize` adds, as [`held_paths`] spells
    /// paths) and its identity.
    ///
    /// # Errors
    /// When `path` cannot be resolved (it does not exist).
    pub fn new(path: &std::path::Path) -> io::Result<HeldUnder> {
        let path = canonical(path)?;
        let id = super::os::holding::file_id(&path)?;
        Ok(HeldUnder {
            path,
            id,
            resolver: Default::default(),
        })
    }

    /// The path, canonical.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// What `pid` holds at or under the path ([`held_paths`], filtered as
    /// the type's docs say).
    ///
    /// # Errors
    /// As [`held_paths`].
    pub fn held_by(&self, pid: u32) -> io::Result<Vec<Held>> {
        let held = held_paths(pid)?;
        let (mut under, rest): (Vec<Held>, Vec<Held>) = held
            .into_iter()
            .partition(|h| is_under(&h.path, &self.path));
        if let Some(id) = self.id
            && !rest.is_empty()
        {
            let mut resolver = self.resolver.borrow_mut();
            let by_id = super::os::holding::under_by_identity(pid, &rest, id, &mut resolver);
            under.extend(
                rest.into_iter()
                    .zip(by_id)
                    .filter_map(|(h, under)| under.then_some(h)),
            );
        }
        Ok(under)
    }
}

/// `path` resolved, in the spelling [`held_paths`] uses: on Windows
/// without the `\\?\` prefix `canonicalize` adds (`C:\work`, not
/// `\\?\C:\work`; `\\?\UNC\host\share` becomes `\\host\share`).
fn canonical(path: &std::path::Path) -> io::Result<PathBuf> {
    let path = std::fs::canonicalize(path)?;
    if cfg!(windows)
        && let Some(text) = path.to_str()
    {
        if let Some(unc) = text.strip_prefix(r"\\?\UNC\") {
            return Ok(PathBuf::from(format!(r"\\{unc}")));
        }
        if let Some(disk) = text.strip_prefix(r"\\?\")
            && disk.as_bytes().get(1) == Some(&b':')
        {
            return Ok(PathBuf::from(disk));
        }
    }
    Ok(path)
}

/// Whether `held` is `path` or lies under it, component by component —
/// and on Windows without regard to case, as its file systems compare.
fn is_under(held: &std::path::Path, path: &std::path::Path) -> bool {
    if cfg!(windows) {
        let lower = |p: &std::path::Path| PathBuf::from(p.to_string_lossy().to_lowercase());
        lower(held).starts_with(lower(path))
    } else {
        held.starts_with(path)
    }
}

/// One tagged process found by [`scan_tagged`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaggedProcess {
    /// The process table's entry.
    pub info: ProcessInfo,
    /// Its real uid.
    pub uid: u32,
    /// The spawn tag in its environment.
    pub tag: SpawnTag,
}

/// Every live process of this user that carries a spawn tag.
#[derive(Clone, Debug, Default)]
pub struct TagScan {
    /// Tagged live processes of this user, by pid.
    pub tagged: Vec<TaggedProcess>,
    /// Live processes of this user whose environment could not be read
    /// (non-dumpable): they may belong to a session and cannot be
    /// attributed. Never a target of anything; reported.
    pub unreadable: Vec<ProcessInfo>,
    /// How many pids were looked at.
    pub scanned: usize,
}

/// Scans the process table for tagged processes of the calling user (by
/// real uid; root sees only its own too). Never fails: a process that
/// vanishes or cannot be read mid-scan is not in `tagged`.
pub fn scan_tagged() -> TagScan {
    imp::scan_tagged(current_uid())
}

/// What [`each_tagged`] met at one pid.
#[derive(Debug)]
pub enum Sighting<'a> {
    /// A tagged live process of the calling user, with a pin on it where
    /// the platform can take one first (Linux): then the pid was pinned
    /// *before* anything of it was read, and the pinned process had not
    /// exited after the last read — every field here is that process's,
    /// and a signal through the pin needs no second read to be sure of it.
    Alive(&'a TaggedProcess, Option<Pinned>),
    /// A process whose environment carried `tag` when it was read, and
    /// which had exited by the next read (its uid may not have been
    /// checked): it was alive, with that tag, a moment ago.
    Vanished {
        /// Its pid.
        pid: u32,
        /// The tag it carried.
        tag: &'a SpawnTag,
    },
    /// A process of the calling user that exited while its environment was
    /// being read ([`TagRead::Exited`]): whether it carried a tag is
    /// unknown; its process table entry (a zombie now) says where it was.
    Exited(&'a ProcessInfo),
}

/// Calls `met` for each tagged process of the calling user as the scan
/// meets it (ascending pid order where the platform lists pids that way),
/// instead of collecting them first: whoever acts on what it finds acts
/// microseconds after reading it. A process created while the scan runs is
/// met if the platform lists it after where the scan stands (Linux: any
/// higher pid — which is where a fork-and-exit "pid hopper" goes next).
/// A process that was tagged when its environment was read and gone right
/// after is reported as [`Sighting::Vanished`].
pub fn each_tagged(met: impl FnMut(Sighting<'_>)) {
    #[cfg(target_os = "linux")]
    {
        imp::each_tagged(current_uid(), met)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let mut met = met;
        for p in &scan_tagged().tagged {
            met(Sighting::Alive(p, None));
        }
    }
}

/// Like [`each_tagged`], for the pids in `pids` only, in ascending order,
/// each looked up directly (Linux) — not only those a listing of the
/// process table shows, so this is the way to meet the pids handed out
/// since [`last_pid`] last said, microseconds after they were. Nothing
/// where pids are not handed out in order (elsewhere than Linux).
pub fn each_tagged_in(pids: std::ops::RangeInclusive<u32>, met: impl FnMut(Sighting<'_>)) {
    #[cfg(target_os = "linux")]
    {
        imp::each_tagged_in(current_uid(), pids, met)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (pids, met);
    }
}

/// The pid most recently handed out in tether's pid namespace, where the
/// kernel says (Linux: `/proc/sys/kernel/ns_last_pid`). Pids are handed
/// out in increasing order until they wrap around at the maximum: a value
/// lower than an earlier one means they wrapped in between.
pub fn last_pid() -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
            .ok()?
            .trim()
            .parse()
            .ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// A process in a pid namespace nested in tether's, seen from tether's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NestedNamespace {
    /// Pid 1 of the outermost nested namespace that holds the process, as
    /// tether's process table shows it (its pid there, its start time).
    pub init: ProcessInfo,
    /// The process and that init share tether's time namespace, so their
    /// start times are on tether's clock and can be compared with a spawn
    /// tag's owner start time.
    pub same_clock: bool,
}

/// Where `pid` sits if it lives in a pid namespace nested in tether's
/// (`None`: it lives in tether's, the platform has no pid namespaces, or
/// that cannot be read).
pub fn nested_namespace(pid: u32) -> Option<NestedNamespace> {
    #[cfg(target_os = "linux")]
    {
        imp::nested_namespace(pid)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// The kernel's clocks, read once, for turning start times into ages and
/// wall-clock times.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// Start-time units per second (clock ticks on Linux, 100 almost
    /// always; 1,000,000 on macOS).
    pub ticks_per_sec: u64,
    /// Time since the start times' origin when this clock was read, in
    /// start-time units: since boot on Linux, since the Unix epoch on macOS.
    pub uptime_ticks: u64,
    /// Wall clock at that origin, Unix milliseconds (now minus uptime; 0 on
    /// macOS).
    pub boot_time_ms: u64,
}

impl Clock {
    /// Reads the clocks now.
    pub fn now() -> Clock {
        imp::clock()
    }

    /// Age in milliseconds of a process that started at `start`.
    pub fn age_ms(&self, start: u64) -> u64 {
        (self.uptime_ticks.saturating_sub(start) as u128 * 1000 / self.ticks_per_sec as u128) as u64
    }

    /// Wall clock (Unix ms) of `start`.
    pub fn wall_ms(&self, start: u64) -> u64 {
        self.boot_time_ms + (start as u128 * 1000 / self.ticks_per_sec as u128) as u64
    }
}

/// What the process table can be trusted to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Visibility {
    /// The table shows tether's own pid namespace (not, say, a `/proc`
    /// mounted for another one): pids read from it are ours.
    pub own_namespace: bool,
    /// Other users' processes are hidden (`hidepid`): a missing pid may
    /// only be hidden.
    pub hides_other_users: bool,
}

/// What the process table shows, now.
pub fn visibility() -> Visibility {
    imp::visibility()
}

/// Whether `pid` lives in tether's own pid namespace (always, where the
/// platform has no pid namespaces). `false` for a process in a nested
/// namespace (or when that cannot be read): its pids mean something else.
pub fn in_own_pid_namespace(pid: u32) -> bool {
    imp::in_own_pid_namespace(pid)
}

/// A process pinned after its identity was verified: whatever is sent
/// through it reaches that very process or nobody, however the pid is
/// recycled afterwards (Linux: a pidfd; Windows: a process handle; macOS:
/// the identity is re-read right before each signal — a race the kernel
/// gives no way to close).
///
/// For code that acts on processes it did not start (`tether reap`): pin,
/// re-read whatever proves the process may be signalled (its spawn tag),
/// then signal.
///
/// ```
/// # #[cfg(unix)] {
/// use tether::{ProcessIdentity, sys::Pinned};
///
/// let mut sleeper = std::process::Command::new("sleep").arg("1000").spawn()?;
/// let identity = ProcessIdentity::of_pid(sleeper.id())?;
/// let pin = Pinned::pin(&identity)?.expect("it is alive");
/// assert!(pin.kill()?); // reaches that process, or nobody
/// sleeper.wait()?;
/// assert!(pin.has_exited());
/// assert!(!pin.kill()?); // gone: nothing is sent
/// # }
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Pinned(pub(crate) imp::Pin);

impl Pinned {
    /// Pins the process `expected` names. `Ok(None)` if that process has
    /// exited or its pid now names another process; `Err` only for other
    /// errors (permission, descriptor limits).
    pub fn pin(expected: &ProcessIdentity) -> io::Result<Option<Pinned>> {
        Ok(imp::Pin::open(expected)?.map(Pinned))
    }

    /// The pinned process's identity as read when pinning.
    pub fn identity(&self) -> &ProcessIdentity {
        self.0.identity()
    }

    /// The spawn tag in the pinned process's environment now; `None` if it
    /// has none or has exited (then nothing read could be trusted to be
    /// its).
    pub fn spawn_tag(&self) -> Option<SpawnTag> {
        self.0.spawn_tag()
    }

    /// Asks the process to end (Unix: `SIGTERM` then `SIGCONT`, so a stopped
    /// process acts on it; Windows: nothing graceful exists for an
    /// arbitrary process, so `false`). `Ok(false)`: nothing was sent (it
    /// had exited, or the platform has no such request).
    ///
    /// # Errors
    /// What the OS says, other than "already exited": `EPERM` for a process
    /// of another user.
    pub fn terminate(&self) -> io::Result<bool> {
        self.0.terminate()
    }

    /// Ends the process at once (`SIGKILL`, `TerminateProcess`).
    /// `Ok(false)` if it had already exited.
    ///
    /// # Errors
    /// As [`terminate`](Self::terminate).
    pub fn kill(&self) -> io::Result<bool> {
        self.0.kill()
    }

    /// Sends the Unix signal `sig`. `Ok(false)` if it had already exited.
    ///
    /// # Errors
    /// As [`terminate`](Self::terminate); `EINVAL` for an invalid signal.
    #[cfg(unix)]
    pub fn signal(&self, sig: i32) -> io::Result<bool> {
        self.0.signal(sig)
    }

    /// Whether the process has exited (zombies included).
    pub fn has_exited(&self) -> bool {
        self.0.has_exited()
    }
}

/// The calling thread's id as the kernel knows it (`gettid`), for
/// [`wait_threads_released`]; `None` where that is not Linux.
pub fn thread_id() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // The system call, not libc's `gettid()`: in a static build with
        // fat LTO, std's weak declaration of it can win and be left at
        // address 0 (`tether run` built for x86_64-unknown-linux-musl
        // crashed in every guard thread calling it).
        // SAFETY: gettid has no preconditions and returns the caller's tid.
        Some(unsafe { libc::syscall(libc::SYS_gettid) } as i32)
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// Waits, at most `bound`, until the kernel has let go of this process's
/// threads `tids` (from [`thread_id`]), each already joined — or exited:
/// tether's own threads only (named `tether-…`; a tid since given to
/// another thread counts as released). No-op where that is not Linux.
///
/// A joined thread is not gone yet: `pthread_join` returns when the kernel
/// clears the thread's tid, early in its exit, and the thread stays in
/// `/proc/self/task` — and in the thread count CPython reads from
/// `/proc/self/stat` before it warns on `fork()` — until the kernel
/// releases it a little later: microseconds, or on a loaded machine long
/// enough for the caller to see it. Nothing announces the release (a pidfd
/// of a thread needs Linux 6.9), so this looks again after pauses that
/// grow from 20 µs to 2 ms.
pub fn wait_threads_released(tids: &[i32], bound: Duration) {
    #[cfg(target_os = "linux")]
    {
        let deadline = std::time::Instant::now() + bound;
        let mut pause = Duration::from_micros(20);
        for tid in tids {
            let comm = format!("/proc/self/task/{tid}/comm");
            while std::fs::read(&comm).is_ok_and(|name| name.starts_with(b"tether-"))
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(2));
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (tids, bound);
}

/// Waits until every pinned process has exited or `bound` passes — on the
/// processes' exits, not by polling where the platform allows (pidfds,
/// process handles).
pub fn wait_exited(pins: &[&Pinned], bound: Duration) {
    let inner: Vec<&imp::Pin> = pins.iter().map(|p| &p.0).collect();
    imp::wait_exited(&inner, bound)
}

/// Signals the process `identity` names, and only it (see [`Pinned`]):
/// `Ok(false)` when that process is gone.
///
/// # Errors
/// As [`Pinned::pin`] and [`Pinned::signal`].
#[cfg(unix)]
pub fn signal_if_identity(identity: &ProcessIdentity, sig: i32) -> io::Result<bool> {
    match Pinned::pin(identity)? {
        Some(pinned) => pinned.signal(sig),
        None => Ok(false),
    }
}

/// The identity of the live process `pid`, read from the kernel now.
pub(crate) fn identity_of(pid: u32) -> io::Result<ProcessIdentity> {
    imp::identity_of(pid)
}

/// Reading identities from the process table (here, so that
/// `identity.rs` stays a plain value type below the platform code).
impl ProcessIdentity {
    /// The identity of the live process `pid`, read from the kernel now
    /// (Linux: `/proc/<pid>/stat`, and a pidfd's pidfs inode where the
    /// kernel has pidfs).
    ///
    /// # Errors
    /// `NotFound` if no such process exists (or it is a zombie that can no
    /// longer be opened); other I/O errors as the process table gives them.
    pub fn of_pid(pid: u32) -> std::io::Result<ProcessIdentity> {
        identity_of(pid)
    }

    /// The identity of the calling process.
    ///
    /// # Errors
    /// As [`of_pid`](Self::of_pid): only where the process table cannot be
    /// read (no `/proc`).
    ///
    /// ```
    /// use tether::ProcessIdentity;
    ///
    /// let me = ProcessIdentity::current()?;
    /// assert_eq!(me.pid, std::process::id());
    /// assert!(me.is_alive());
    /// assert!(me.matches(&ProcessIdentity::of_pid(me.pid)?));
    ///
    /// // The same pid with another start time is another process.
    /// let impostor = ProcessIdentity { start_time: me.start_time + 1, ..me.clone() };
    /// assert!(!impostor.matches(&me));
    /// assert!(!impostor.is_alive());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn current() -> std::io::Result<ProcessIdentity> {
        Self::of_pid(std::process::id())
    }

    /// The identity of the calling process's parent, checked to still be
    /// the parent after it was read — so a parent that exited meanwhile
    /// (replaced by init or a subreaper) is an error, never a wrong answer.
    ///
    /// # Errors
    /// `NotFound` when the parent exited while it was being read.
    pub fn parent() -> std::io::Result<ProcessIdentity> {
        let me = std::process::id();
        let before = process(me)?.ppid;
        let identity = Self::of_pid(before)?;
        if process(me)?.ppid != before {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("the parent {before} exited while it was being identified"),
            ));
        }
        Ok(identity)
    }

    /// Whether the process this identity names is still alive (not reaped).
    ///
    /// `false` also when its pid now belongs to another process. A zombie
    /// counts as dead.
    pub fn is_alive(&self) -> bool {
        if self.boot_id != boot_id() {
            return false;
        }
        match identity_of(self.pid) {
            Ok(now) => now.matches(self),
            Err(_) => false,
        }
    }
}

#[cfg(all(test, windows))]
mod windows_tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn paths_compare_without_case() {
        assert!(is_under(
            Path::new(r"C:\Work\App\x.dll"),
            Path::new(r"c:\work\app")
        ));
        assert!(!is_under(Path::new(r"C:\Workshop"), Path::new(r"C:\Work")));
    }
}
