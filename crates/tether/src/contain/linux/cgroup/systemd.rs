//! A delegated cgroup from systemd, for an owner whose own cgroup cannot
//! give a session's leaf controllers: the usual case on a pure cgroup v2
//! host, where a user in a terminal shares the login session's scope with
//! its shell (and cannot write it), and cgroup v2 enables controllers only
//! for cgroups without processes of their own.
//!
//! This process asks the service manager (the user's for a user, the
//! system's for root) for a transient scope with `Delegate=yes` holding
//! only itself — what `systemd-run --user --scope -p Delegate=yes` does for
//! a new command, done for the running owner — and the routing then
//! proceeds from there as in any delegated cgroup (`route.rs`: the owner
//! moves aside into `tether-owner`, the sessions' leaves go beside it).
//! The call is `busctl` (systemd's own D-Bus client, shipped wherever a
//! service manager runs): one short-lived process, once per owner, only
//! when limits were asked for and could not be routed. A D-Bus library
//! would add ~0.5 MiB to a binary held to 8 MiB for one call per process;
//! `busctl` speaks the same `StartTransientUnit` call.
//!
//! Without a reachable manager — containers, CI, WSL without systemd, a
//! shell without a user bus — nothing is started (no bus socket: no
//! process) and the limits are `none` with the reason, as before.
//! `TETHER_SYSTEMD_SCOPE=0` turns this off.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The outcome of this process's one attempt: the scope it moved into, or
/// why it did not.
static ATTEMPT: Mutex<Option<Result<String, String>>> = Mutex::new(None);

/// The transient scope this process moved into, if it did.
pub(crate) fn scope() -> Option<String> {
    match &*lock() {
        Some(Ok(unit)) => Some(unit.clone()),
        _ => None,
    }
}

/// Moves this process into a new delegated transient scope of its service
/// manager, once per process: `Ok(unit)` when it is there (now or from an
/// earlier call), else why not (also remembered: a manager that refused
/// once is not asked again for every session).
pub(crate) fn move_self() -> Result<String, String> {
    let mut attempt = lock();
    if let Some(done) = &*attempt {
        return done.clone();
    }
    let outcome = try_move();
    *attempt = Some(outcome.clone());
    outcome
}

fn try_move() -> Result<String, String> {
    if std::env::var_os("TETHER_SYSTEMD_SCOPE").is_some_and(|v| v == "0") {
        return Err("TETHER_SYSTEMD_SCOPE=0".into());
    }
    let user = !nix::unistd::getuid().is_root();
    if !bus_reachable(user) {
        return Err(format!(
            "no {} service manager bus here",
            if user { "user" } else { "system" }
        ));
    }
    let me = std::process::id();
    // Unique per process: a pid and its start (a reused pid gets a new
    // name; systemd refuses a name that exists).
    let start = super::super::procfs::read_stat(me).map_or(0, |info| info.start_time);
    let unit = format!("tether-owner-{me}-{start}.scope");
    let mut busctl = Command::new("busctl");
    if user {
        busctl.arg("--user");
    }
    busctl
        .args([
            "--quiet",
            "--timeout=5",
            "call",
            "org.freedesktop.systemd1",
            "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager",
            "StartTransientUnit",
            "ssa(sv)a(sa(sv))",
            &unit,
            "fail",
            "3",
            "PIDs",
            "au",
            "1",
            &me.to_string(),
            "Delegate",
            "b",
            "true",
            "CollectMode",
            "s",
            "inactive-or-failed",
            "0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let out = busctl
        .output()
        .map_err(|e| format!("busctl (systemd's D-Bus client): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "systemd refused a delegated scope: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    // The call returns when the job is queued; the scope's cgroup and our
    // move into it follow when the job runs (microseconds later on an idle
    // manager). Nothing to wait on without a bus connection of our own, so
    // /proc/self/cgroup is polled, bounded: a manager that takes longer
    // than 5 s is treated as having refused.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if own_v2_cgroup().is_some_and(|path| path.ends_with(&unit)) {
            return Ok(unit);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "systemd accepted {unit} but did not move this process there within 5 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether the manager's bus can be reached at all (so that hosts without
/// one never start a process for this).
fn bus_reachable(user: bool) -> bool {
    let address = if user {
        std::env::var("DBUS_SESSION_BUS_ADDRESS").ok()
    } else {
        std::env::var("DBUS_SYSTEM_BUS_ADDRESS").ok()
    };
    if let Some(address) = address {
        return match address.strip_prefix("unix:path=") {
            Some(path) => socket_exists(Path::new(path.split(',').next().unwrap_or(path))),
            // Abstract sockets and other transports: let busctl try.
            None => !address.is_empty(),
        };
    }
    let default = if user {
        match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(dir) => PathBuf::from(dir).join("bus"),
            None => return false,
        }
    } else {
        PathBuf::from("/run/dbus/system_bus_socket")
    };
    socket_exists(&default)
}

fn socket_exists(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// This process's cgroup v2 path (`0::/…` of `/proc/self/cgroup`).
fn own_v2_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_owned)
}

fn lock() -> std::sync::MutexGuard<'static, Option<Result<String, String>>> {
    ATTEMPT.lock().unwrap_or_else(|e| e.into_inner())
}
