//! `tether doctor` on Linux: the kernel, the keeper as subreaper, pidfds
//! and pidfs, PID namespaces, cgroups and session limits (`limits.rs`) and
//! the descriptor limit — each probed with the code tether runs, never
//! inferred from a kernel version.

mod limits;

use super::pidfd::Pidfd;
use crate::contain::unix::doctor as unix;
use crate::doctor::{Finding, Status, Topic};
use crate::{Containment, ContainmentPolicy};

/// Every Linux finding, in report order. `spawn` runs `exit 0` in a
/// session under a policy and says which containment it got.
pub(crate) fn probe(
    spawn: &dyn Fn(ContainmentPolicy) -> crate::Result<Containment>,
) -> Vec<Finding> {
    let standard = spawn(ContainmentPolicy::Standard);
    let pidfd = Pidfd::open(std::process::id());
    let mut findings = vec![
        system(),
        unix::keeper(&standard),
        subreaper(&standard),
        pidfd_finding(&pidfd),
        pidfs(&pidfd),
        pid_namespace(spawn(ContainmentPolicy::PidNamespace)),
    ];
    findings.extend(limits::findings());
    findings.push(unix::open_files());
    findings
}

/// Kernel release, distribution and architecture.
fn system() -> Finding {
    let kernel = match unix::uname() {
        Some((name, release, machine)) => format!("{name} {release}, {machine}"),
        None => "uname failed".to_owned(),
    };
    let distribution = ["/etc/os-release", "/usr/lib/os-release"]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_owned())
        });
    let found = match distribution {
        Some(d) => format!("{kernel} ({d})"),
        None => kernel,
    };
    Finding::new(
        Topic::System,
        Status::Info,
        found,
        "Linux is tether's primary platform: every guarantee is tested on it",
    )
}

/// The keeper as child subreaper (it refuses to start without it).
fn subreaper(standard: &crate::Result<Containment>) -> Finding {
    match standard {
        Ok(Containment::Subreaper) => Finding::new(
            Topic::Subreaper,
            Status::Available,
            "PR_SET_CHILD_SUBREAPER: the keeper is the subreaper of its session's tree",
            "setsid, double-fork and daemonizing escapes reparent to the keeper and stay in the \
             session (G1); if the keeper itself is SIGKILLed, tether run and tether mcp — \
             subreapers too — kill what it leaves",
        ),
        Ok(other) => Finding::new(
            Topic::Subreaper,
            Status::Unavailable,
            format!("the standard containment came back as {other}, not subreaper"),
            "sessions are not held by a subreaper here",
        ),
        Err(e) => Finding::new(
            Topic::Subreaper,
            Status::Unavailable,
            format!("not probed: no session could start ({e})"),
            "the keeper does not run without being a subreaper: tether cannot start commands here",
        ),
    }
}

fn pidfd_finding(pidfd: &std::io::Result<Pidfd>) -> Finding {
    match pidfd {
        Ok(_) => Finding::new(
            Topic::Pidfd,
            Status::Available,
            "pidfd_open works (Linux 5.3 or later)",
            "every signal tether sends goes through a pidfd held since the process was \
             identified, so a process that took over a reused pid is never signalled (G4)",
        ),
        Err(e) => Finding::new(
            Topic::Pidfd,
            Status::Unavailable,
            format!("pidfd_open: {e}"),
            "no fallback: tether pins every process it identifies or signals with a pidfd, so \
             without them it cannot hold or kill sessions (Linux 5.3 or later is needed)",
        ),
    }
}

fn pidfs(pidfd: &std::io::Result<Pidfd>) -> Finding {
    let inode = match pidfd {
        Ok(fd) => fd.inode(),
        Err(_) => {
            return Finding::new(
                Topic::PidfsIdentity,
                Status::Unavailable,
                "not probed: no pidfd",
                "identities fall back to (boot id, pid, start time)",
            );
        }
    };
    match inode {
        Some(inode) => Finding::new(
            Topic::PidfsIdentity,
            Status::Available,
            format!("pidfds live on pidfs (Linux 6.9 or later): this process is inode {inode}"),
            "identities written to disk (ledger, spawn proofs) carry the pidfs inode, unique per \
             process for the boot: a reused pid never matches a recorded identity",
        ),
        None => Finding::new(
            Topic::PidfsIdentity,
            Status::Unavailable,
            "pidfds are anonymous inodes here (kernel before 6.9)",
            "identities on disk fall back to (boot id, pid, start time); start time has 10 ms \
             resolution and collided in 295 of 300 forced immediate pid reuses, so a dead owner \
             whose pid is reused within one tick looks alive and its orphans are listed, not \
             reaped; kills of live sessions still go through held pidfds",
        ),
    }
}

/// A private PID namespace, as the keeper enters it for `--containment
/// pidns`.
fn pid_namespace(result: crate::Result<Containment>) -> Finding {
    match result {
        Ok(Containment::PidNamespace) => {
            let how = if has_cap_sys_admin() {
                "directly (this process has CAP_SYS_ADMIN)"
            } else {
                "inside an unprivileged user namespace"
            };
            Finding::new(
                Topic::PidNamespace,
                Status::Available,
                format!("a session ran in a private PID namespace, entered {how}"),
                "--containment pidns (and auto) hold the tree in a namespace whose init dies with \
                 the keeper: airtight even if the keeper is SIGKILLed",
            )
        }
        Ok(other) => Finding::new(
            Topic::PidNamespace,
            Status::Unavailable,
            format!("a pidns session came back as {other}"),
            "--containment auto gives the subreaper keeper",
        ),
        Err(e) => {
            let settings = userns_settings();
            let found = if settings.is_empty() {
                e.to_string()
            } else {
                format!("{e} ({})", settings.join(", "))
            };
            Finding::new(
                Topic::PidNamespace,
                Status::Unavailable,
                found,
                "--containment auto falls back to the subreaper keeper (pidns is an error): if \
                 the keeper itself is SIGKILLed, its tree reparents to the owner — tether run and \
                 tether mcp kill it; a library owner kills it by spawn tag",
            )
        }
    }
}

/// Whether this process holds `CAP_SYS_ADMIN` (bit 21 of `CapEff`).
fn has_cap_sys_admin() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

/// The sysctls that allow or forbid unprivileged user namespaces, where
/// this kernel has them.
fn userns_settings() -> Vec<String> {
    [
        (
            "kernel.unprivileged_userns_clone",
            "/proc/sys/kernel/unprivileged_userns_clone",
        ),
        (
            "user.max_user_namespaces",
            "/proc/sys/user/max_user_namespaces",
        ),
        (
            "kernel.apparmor_restrict_unprivileged_userns",
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        ),
    ]
    .iter()
    .filter_map(|(name, path)| {
        let value = std::fs::read_to_string(path).ok()?;
        Some(format!("{name}={}", value.trim()))
    })
    .collect()
}
