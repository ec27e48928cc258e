//! The owner's half: for each limit a session asks for, where it can be
//! enforced — a cgroup v2 controller, a cgroup v1 hierarchy, or nowhere
//! and why — always below the owner's own cgroup, never elsewhere in a
//! hierarchy (a session must stay inside every limit its owner is under).
//! The keeper does the rest (`leaf.rs`).
//!
//! cgroup v2 gives a child a controller only if its parent has it in
//! `cgroup.subtree_control`, and a non-root cgroup with controllers there
//! may hold no process of its own ("no internal processes"). So when our
//! cgroup has the controller available but not enabled, we enable it — and
//! if we ourselves are in it, and nothing else is, we first move this
//! process into a leaf of its own, `tether-owner`, beside the sessions'
//! leaves (what a process does in a delegated systemd scope:
//! `systemd-run --user --scope -p Delegate=yes`). Anything else in our
//! cgroup (a shell, other programs, keepers started earlier) is never
//! moved, and nothing is enabled there: the limit is then `none`, with
//! that reason, and the command runs in a plain leaf below (for
//! `cgroup.kill`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::hierarchy::{Hierarchies, Place, writable};
use super::systemd;
use crate::contain::unix::protocol::{LimitSpec, Route};
use crate::limits::{Limits, cpu_millis};

/// The leaf this process moves into to free its cgroup for controllers.
pub(crate) const OWNER_LEAF: &str = "tether-owner";

/// Our v2 cgroup before we moved into [`OWNER_LEAF`]: sessions' leaves go
/// there, beside ours.
static MOVED_FROM: Mutex<Option<PathBuf>> = Mutex::new(None);

/// The resources a limit is about, and the controller of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resource {
    Memory,
    Pids,
    Cpu,
}

impl Resource {
    fn controller(self) -> &'static str {
        match self {
            Resource::Memory => "memory",
            Resource::Pids => "pids",
            Resource::Cpu => "cpu",
        }
    }
}

/// Where each of `limits` can be enforced, and the v2 cgroup the session's
/// own leaf goes below. Empty for no limits: a session without limits gets
/// no cgroup.
pub(crate) fn plan(limits: &Limits) -> LimitSpec {
    if limits.is_empty() {
        return LimitSpec::default();
    }
    let mut found = Hierarchies::of_self();
    let mut v2 = v2_base(&found);
    let wanted = limits_wanted(limits);
    // A cgroup v2 that cannot give a session's leaf its controllers (shared
    // with a shell, not ours to write): a delegated scope from systemd,
    // once per process (systemd.rs), then the routing from there.
    if v2.is_some()
        && systemd::scope().is_none()
        && wanted
            .iter()
            .any(|&r| matches!(route(&found, v2.as_ref(), r).0, Route::Unavailable(_)))
        && systemd::move_self().is_ok()
    {
        found = Hierarchies::of_self();
        v2 = v2_base(&found);
    }
    let route = |resource: Resource| route(&found, v2.as_ref(), resource).0;
    LimitSpec {
        memory: limits.memory.map(|m| (m, route(Resource::Memory))),
        pids: limits.pids.map(|p| (p, route(Resource::Pids))),
        cpu_millis: limits.cpu.map(|c| (cpu_millis(c), route(Resource::Cpu))),
        v2_base: leaf_base(&found, v2.as_ref()).ok().map(|dir| bytes(&dir)),
        require: limits.require,
    }
}

/// The resources `limits` asks for.
fn limits_wanted(limits: &Limits) -> Vec<Resource> {
    let mut wanted = Vec::new();
    if limits.memory.is_some() {
        wanted.push(Resource::Memory);
    }
    if limits.pids.is_some() {
        wanted.push(Resource::Pids);
    }
    if limits.cpu.is_some() {
        wanted.push(Resource::Cpu);
    }
    wanted
}

/// The transient systemd scope this process moved into for its sessions'
/// limits (`systemd.rs`), if it did.
pub(crate) fn systemd_scope() -> Option<String> {
    systemd::scope()
}

/// Why each limit a session would be given is not routed to cgroup v2
/// (`tether doctor`'s "why cgroup1"): the reasons [`plan`] passed v2 over,
/// empty for a limit that gets v2 or gets nothing (its `none` reason then
/// says it all). Routes exactly as [`plan`] does, with the same effects (a
/// controller enabled in our cgroup, this process moved aside into
/// [`OWNER_LEAF`]), so a session started next routes the same way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PassedOver {
    /// For the memory limit.
    pub memory: Vec<String>,
    /// For the process-count limit.
    pub pids: Vec<String>,
    /// For the CPU limit.
    pub cpu: Vec<String>,
}

/// See [`PassedOver`].
pub(crate) fn passed_over() -> PassedOver {
    let found = Hierarchies::of_self();
    let v2 = v2_base(&found);
    let why = |resource: Resource| route(&found, v2.as_ref(), resource).1;
    PassedOver {
        memory: why(Resource::Memory),
        pids: why(Resource::Pids),
        cpu: why(Resource::Cpu),
    }
}

/// The cgroup v2 directory a session's own leaf goes below (for
/// `cgroup.kill`, and its v2 controllers), or why a session gets none.
pub(crate) fn session_v2_base() -> Result<PathBuf, String> {
    let found = Hierarchies::of_self();
    leaf_base(&found, v2_base(&found).as_ref())
}

fn leaf_base(found: &Hierarchies, v2: Option<&Place>) -> Result<PathBuf, String> {
    let Some(place) = v2 else {
        return Err(if found.v2_mounted() {
            "this process's cgroup v2 is outside every cgroup2 mount it can see".to_owned()
        } else {
            "no cgroup2 filesystem is mounted here (/proc/self/mountinfo)".to_owned()
        });
    };
    hosts_leaves(&place.dir)?;
    match writable(&place.dir) {
        Ok(()) => Ok(place.dir.clone()),
        Err(e) => Err(format!(
            "{} is not writable ({}){}",
            place.dir.display(),
            short(&e),
            delegation_hint(&e)
        )),
    }
}

/// Our v2 cgroup — or the one we left for [`OWNER_LEAF`], whose children
/// the sessions' leaves are.
fn v2_base(found: &Hierarchies) -> Option<Place> {
    let place = found.v2()?;
    let moved = lock(&MOVED_FROM).clone();
    match moved {
        Some(base) if place.dir == base.join(OWNER_LEAF) => Some(Place { dir: base, ..place }),
        _ => Some(place),
    }
}

/// Where `resource` goes, and the reasons cgroup v2 was passed over (empty
/// for `Cgroup2`, and for `Unavailable`, whose reason holds them).
fn route(found: &Hierarchies, v2: Option<&Place>, resource: Resource) -> (Route, Vec<String>) {
    let controller = resource.controller();
    let mut why = Vec::new();
    match v2 {
        Some(place) => match v2_controller(place, controller) {
            Ok(()) => return (Route::Cgroup2, why),
            Err(reason) => why.push(reason),
        },
        None if found.any() => why.push("this process is in no cgroup v2 it can see".to_owned()),
        None => {}
    }
    match found.v1(controller) {
        Some(place) => match writable(&place.dir) {
            Ok(()) => return (Route::Cgroup1(bytes(&place.dir)), why),
            Err(e) => why.push(format!(
                "its cgroup v1 hierarchy: {} is not writable ({}){}",
                place.dir.display(),
                short(&e),
                delegation_hint(&e),
            )),
        },
        None if found.v1_has(controller) => {
            why.push("its cgroup v1 hierarchy does not contain this process's cgroup".to_owned())
        }
        None if found.any() => why.push("no cgroup v1 hierarchy has it".to_owned()),
        None => {}
    }
    if !found.any() {
        return (
            unavailable("no cgroup filesystem is mounted here (/proc/self/mountinfo)".into()),
            Vec::new(),
        );
    }
    (
        unavailable(format!("{controller}: {}", why.join("; "))),
        Vec::new(),
    )
}

/// Makes `controller` available to children of `place` (enabling it in
/// `cgroup.subtree_control`, moving ourselves out of the way if we alone
/// hold the cgroup), or says why it cannot be.
fn v2_controller(place: &Place, controller: &str) -> Result<(), String> {
    let dir = &place.dir;
    let listed = |file: &str| {
        std::fs::read_to_string(dir.join(file))
            .map(|text| text.split_whitespace().any(|c| c == controller))
            .unwrap_or(false)
    };
    hosts_leaves(dir)?;
    if listed("cgroup.subtree_control") {
        return Ok(());
    }
    if !listed("cgroup.controllers") {
        let available = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        return Err(format!(
            "cgroup v2 has no {controller} controller for {} (its cgroup.controllers: {})",
            dir.display(),
            match available.trim() {
                "" => "none",
                list => list,
            }
        ));
    }
    if let Err(e) = writable(dir) {
        return Err(format!(
            "{} is not writable ({}){}",
            dir.display(),
            short(&e),
            delegation_hint(&e)
        ));
    }
    // Only the real root may hold processes and give its children
    // controllers ("mixable"; it alone has no cgroup.type). Anywhere else
    // nothing is enabled while the cgroup holds a process: the kernel
    // refuses the domain controllers (memory: EBUSY) but accepts the
    // threaded ones (cpu, pids) — and a cgroup with processes and a
    // threaded controller enabled becomes a thread root, whose children no
    // process can join (EOPNOTSUPP): every session's leaf there, with or
    // without limits, would fail to start (measured on 6.1 and 6.12 in
    // .ci/linux-vm: `--pids 16` from a shell's cgroup left it "domain
    // threaded" and every later `tether run --memory` failed).
    if dir.join("cgroup.type").exists() {
        let others = others_in(dir);
        if !others.is_empty() {
            return Err(format!(
                "{} holds {} other process(es) besides this one, and cgroup v2 enables \
                 controllers only for cgroups without processes of their own: run tether in \
                 a cgroup of its own (e.g. systemd-run --user --scope -p Delegate=yes tether …)",
                dir.display(),
                others.len()
            ));
        }
        if holds_self(dir) {
            if place.at_mount_root {
                return Err(format!(
                    "{} is the root of the cgroup hierarchy this process sees and holds this \
                     process, and cgroup v2 enables controllers only for cgroups without \
                     processes of their own: run tether in a cgroup of its own (e.g. a \
                     sub-cgroup of the container's)",
                    dir.display()
                ));
            }
            move_self_aside(dir).map_err(|e| {
                format!(
                    "moving this process to {}/{OWNER_LEAF} to enable {controller} in {}: {}",
                    dir.display(),
                    dir.display(),
                    short(&e)
                )
            })?;
        }
    }
    enable(dir, controller).map_err(|e| {
        format!(
            "enabling {controller} in {}/cgroup.subtree_control: {}",
            dir.display(),
            short(&e)
        )
    })
}

/// Whether a process can join a new cgroup below `dir`: `dir` is a domain
/// cgroup (or the root), not part of a threaded subtree.
fn hosts_leaves(dir: &Path) -> Result<(), String> {
    match std::fs::read_to_string(dir.join("cgroup.type")) {
        Ok(kind) if kind.trim() != "domain" => Err(format!(
            "{} is a {} cgroup (its cgroup.type): no process can join a cgroup below it \
             (a cgroup that holds processes and has a threaded controller such as cpu or pids \
             enabled for its children becomes a thread root): run tether in a cgroup of its \
             own (e.g. systemd-run --user --scope -p Delegate=yes tether …)",
            dir.display(),
            kind.trim()
        )),
        // A domain cgroup; or the root, which has no cgroup.type.
        _ => Ok(()),
    }
}

/// Whether this process is in `dir` itself.
fn holds_self(dir: &Path) -> bool {
    let me = std::process::id();
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .any(|p| p.parse() == Ok(me))
}

fn enable(dir: &Path, controller: &str) -> io::Result<()> {
    std::fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}"))
}

/// Processes in `dir` other than this one.
fn others_in(dir: &Path) -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|&p| p != me)
        .collect()
}

/// Moves this process (all its threads) into `dir/tether-owner`, so that
/// `dir` holds no process and can give its children controllers.
fn move_self_aside(dir: &Path) -> io::Result<()> {
    let leaf = dir.join(OWNER_LEAF);
    match std::fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    std::fs::write(leaf.join("cgroup.procs"), std::process::id().to_string())?;
    *lock(&MOVED_FROM) = Some(dir.to_owned());
    Ok(())
}

fn unavailable(reason: String) -> Route {
    Route::Unavailable(reason.into_bytes())
}

/// How to get a delegated cgroup, for a permission error.
pub(crate) fn delegation_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => {
            ": no cgroup is delegated to this user (run tether as root, or in a delegated \
             cgroup: systemd-run --user --scope -p Delegate=yes tether …)"
        }
        Some(libc::EROFS) => ": the cgroup filesystem is mounted read-only here",
        _ => "",
    }
}

/// An I/O error without the "(os error N)" tail.
pub(crate) fn short(e: &io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

fn bytes(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().to_vec()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
