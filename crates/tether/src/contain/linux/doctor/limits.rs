//! `tether doctor` on Linux, the limits half: the cgroup hierarchies as
//! the limits code finds them, then what a session with
//! [`PROBE_LIMITS`](crate::doctor::PROBE_LIMITS) actually got — per limit
//! the mechanism (`cgroup2`, `cgroup1`, or `none` and why), whether its
//! kill is one write to `cgroup.kill`, and the OOM order of its processes.
//! Nothing here decides a route: the session's own [`LimitReport`] does,
//! and the reasons come from the router that made it.

use std::path::Path;

use super::super::cgroup::{self, Hierarchies, delegation_hint, short, writable};
use super::super::oom::SESSION_OOM_SCORE_ADJ;
use crate::doctor::{Finding, Status, Topic, limit_findings, limited_probe};
use crate::limits::{Enforcement, LimitReport};

/// The controllers session limits use, in report order.
const CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];

/// What was seen of the probe session while it ran.
struct Seen {
    /// `oom_score_adj` of its command.
    oom_score_adj: Option<i32>,
    /// Whether its cgroup v2 leaf has `cgroup.kill` (`None`: no v2 leaf).
    cgroup_kill: Option<bool>,
}

/// The cgroups, memory/pids/cpu limit, `cgroup.kill` and OOM-order
/// findings, in report order.
pub(super) fn findings() -> Vec<Finding> {
    // Described before anything routes: routing may move this process
    // into a `tether-owner` leaf, and the report says where it was.
    let found = Hierarchies::of_self();
    let hierarchies = cgroups(&found);
    let passed_over = cgroup::passed_over();
    let probe = limited_probe("read _", |child| Seen {
        oom_score_adj: read_oom_score_adj(&format!("/proc/{}/oom_score_adj", child.id())),
        cgroup_kill: child
            .limits()
            .cgroup
            .as_ref()
            .map(|leaf| leaf.join("cgroup.kill").exists()),
    });
    let (report, seen) = match probe {
        Ok((report, seen)) => (Ok(report), Some(seen)),
        Err(e) => (Err(e), None),
    };
    let mut findings = vec![hierarchies];
    findings.extend(limit_findings(&report, &|topic, how| {
        let resource = Resource::of(topic);
        let why_not_v2 = match resource {
            Resource::Memory => &passed_over.memory,
            Resource::Pids => &passed_over.pids,
            Resource::Cpu => &passed_over.cpu,
        };
        describe(resource, how, report.as_ref().ok(), why_not_v2, &found)
    }));
    findings.push(cgroup_kill(&report, seen.as_ref()));
    findings.push(oom_order(report.as_ref().err(), seen.as_ref()));
    findings
}

/// The hierarchies: cgroup v2 (where, our cgroup in it, its controllers,
/// whether this user may write there) and the v1 hierarchies of the
/// controllers limits use.
fn cgroups(found: &Hierarchies) -> Finding {
    if !found.any() {
        return Finding::new(
            Topic::Cgroups,
            Status::Unavailable,
            "no cgroup filesystem is mounted here (/proc/self/mountinfo)",
            "no session limits (each is none, with this reason) and no cgroup.kill: kills go by \
             the signal ladder",
        );
    }
    let mut hint = None;
    let mut access = |dir: &Path| match writable(dir) {
        Ok(()) => "writable by this user".to_owned(),
        Err(e) => {
            hint = hint
                .take()
                .or(Some(delegation_hint(&e)).filter(|h| !h.is_empty()));
            format!("not writable by this user: {}", short(&e))
        }
    };
    let mut parts = Vec::new();
    let v2_points: Vec<String> = found
        .mounts()
        .iter()
        .filter(|m| m.v2)
        .map(|m| m.point.display().to_string())
        .collect();
    if v2_points.is_empty() {
        parts.push("cgroup v2: not mounted".to_owned());
    } else {
        let place = match found.v2() {
            Some(place) => {
                let list = |file: &str| {
                    let text = std::fs::read_to_string(place.dir.join(file)).unwrap_or_default();
                    match text.split_whitespace().collect::<Vec<_>>().join(" ") {
                        empty if empty.is_empty() => "none".to_owned(),
                        names => names,
                    }
                };
                format!(
                    "this process's cgroup {} ({}) has controllers: {}, enabled for its children: {}",
                    place.dir.display(),
                    access(&place.dir),
                    list("cgroup.controllers"),
                    list("cgroup.subtree_control"),
                )
            }
            None => "this process's cgroup is outside every mount it can see".to_owned(),
        };
        parts.push(format!("cgroup v2 at {}: {place}", v2_points.join(", ")));
    }
    let v1: Vec<String> = CONTROLLERS
        .iter()
        .filter_map(|&controller| match found.v1(controller) {
            Some(place) => Some(format!(
                "{controller} at {} ({})",
                place.dir.display(),
                access(&place.dir)
            )),
            None if found.v1_has(controller) => Some(format!(
                "{controller} (its hierarchy does not contain this process's cgroup)"
            )),
            None => None,
        })
        .collect();
    if v1.is_empty() {
        parts.push("cgroup v1: none of memory, pids, cpu".to_owned());
    } else {
        parts.push(format!("cgroup v1: {}", v1.join(", ")));
    }
    let mut found_text = parts.join("; ");
    if let Some(hint) = hint {
        found_text.push_str(hint);
    }
    Finding::new(
        Topic::Cgroups,
        Status::Info,
        found_text,
        "a session's limits go to cgroup v2 controllers this process's cgroup gives its children, \
         else to the cgroup v1 hierarchy with the controller (hybrid hosts), else nowhere (none, \
         with the reason); its leaves are made directly below this process's cgroup in each, never \
         elsewhere, so it stays inside every limit this process is under",
    )
}

/// The limits, and what each means.
#[derive(Clone, Copy, Debug)]
enum Resource {
    Memory,
    Pids,
    Cpu,
}

impl Resource {
    fn of(topic: Topic) -> Resource {
        match topic {
            Topic::MemoryLimit => Resource::Memory,
            Topic::PidsLimit => Resource::Pids,
            _ => Resource::Cpu,
        }
    }

    fn controller(self) -> &'static str {
        match self {
            Resource::Memory => "memory",
            Resource::Pids => "pids",
            Resource::Cpu => "cpu",
        }
    }

    /// The files a leaf's limit is written to.
    fn files(self, v2: bool) -> &'static str {
        match (self, v2) {
            (Resource::Memory, true) => "memory.max (and memory.swap.max 0)",
            (Resource::Memory, false) => "memory.limit_in_bytes (and memory.memsw.limit_in_bytes)",
            (Resource::Pids, _) => "pids.max",
            (Resource::Cpu, true) => "cpu.max",
            (Resource::Cpu, false) => "cpu.cfs_quota_us per cpu.cfs_period_us",
        }
    }

    /// What an enforced limit holds.
    fn holds(self) -> &'static str {
        match self {
            Resource::Memory => {
                "tether run --memory caps the RAM of all a session's processes together, no swap: \
                 past it the kernel's OOM killer kills inside the session, reported as limit_hit \
                 memory, and the owner lives on (G9)"
            }
            Resource::Pids => {
                "tether run --pids caps a session's processes at once: a fork past it fails \
                 (EAGAIN), reported as limit_hit pids, so a fork bomb stays inside its session (G9)"
            }
            Resource::Cpu => {
                "tether run --cpu throttles a session to its share of CPU time per 100 ms period; \
                 it is never killed for it (G9)"
            }
        }
    }

    /// What the guarantee falls back to without the limit.
    fn fallback(self) -> &'static str {
        match self {
            Resource::Memory => {
                "tether run --memory is reported none with this reason and not enforced: a session \
                 may use what its owner may, and its processes still go before their owner in an \
                 OOM (the oom line)"
            }
            Resource::Pids => {
                "tether run --pids is reported none with this reason and not enforced: a fork bomb \
                 is bounded only by the owner's own limits (RLIMIT_NPROC, its cgroup's pids.max); \
                 a kill still ends every process it made (G3)"
            }
            Resource::Cpu => {
                "tether run --cpu is reported none with this reason and not enforced: a session \
                 competes for CPU like any process of its owner"
            }
        }
    }
}

/// What was found for one limit, and what it means.
fn describe(
    resource: Resource,
    how: &Enforcement,
    report: Option<&LimitReport>,
    why_not_v2: &[String],
    found: &Hierarchies,
) -> (String, String) {
    match how {
        Enforcement::Cgroup2 => {
            let base = report
                .and_then(|r| r.cgroup.as_deref())
                .and_then(Path::parent)
                .map_or_else(|| "?".to_owned(), |p| p.display().to_string());
            let via = report
                .and_then(|r| r.via.as_deref())
                .map_or_else(String::new, |via| {
                    format!(
                        " (via {via}: this process's own cgroup could not host the leaf, so it \
                         asked systemd for a delegated one)"
                    )
                });
            (
                format!(
                    "cgroup2: {} in the session's own leaf below {base}{via}",
                    resource.files(true)
                ),
                resource.holds().to_owned(),
            )
        }
        Enforcement::Cgroup1 => {
            let base = found
                .v1(resource.controller())
                .map_or_else(|| "?".to_owned(), |p| p.dir.display().to_string());
            let mut text = format!(
                "cgroup1: {} in the session's own leaf below {base}",
                resource.files(false)
            );
            if !why_not_v2.is_empty() {
                text.push_str(&format!(" (not cgroup v2: {})", why_not_v2.join("; ")));
            }
            (text, resource.holds().to_owned())
        }
        Enforcement::None(reason) => (reason.clone(), resource.fallback().to_owned()),
        other => (other.name().to_owned(), resource.holds().to_owned()),
    }
}

/// `cgroup.kill` in the probe session's own cgroup v2 leaf.
fn cgroup_kill(report: &crate::Result<LimitReport>, seen: Option<&Seen>) -> Finding {
    const ONE_WRITE: &str = "a session with limits gets a cgroup v2 leaf of its own (even where \
                             v2 has no controllers), and its kill's SIGKILL rung is one write to \
                             cgroup.kill: every process in it dies, forks racing the kill \
                             included (a 3,000-process fork storm in tether's benchmark: p50 \
                             287 ms, against 931 ms by the per-process sweep); sessions without \
                             limits, and anything that left the cgroup, go by the signal ladder \
                             (G3)";
    const LADDER: &str = "kills go by the signal ladder: every process of the tree signalled \
                          through its pidfd, round after round until the tree is empty — the same \
                          guarantee (G3), slower for fork storms (3,000 processes in tether's \
                          benchmark: p50 931 ms, against 287 ms with cgroup.kill)";
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            return Finding::new(
                Topic::CgroupKill,
                Status::Unavailable,
                format!("not probed: a session with limits could not start ({e})"),
                LADDER,
            )
            .with_mechanism("signals");
        }
    };
    match (&report.cgroup, seen.and_then(|s| s.cgroup_kill)) {
        (Some(leaf), Some(true)) => Finding::new(
            Topic::CgroupKill,
            Status::Available,
            format!(
                "cgroup.kill in the session's own cgroup v2 leaf below {} (Linux 5.14 or later)",
                leaf.parent().unwrap_or(leaf).display()
            ),
            ONE_WRITE,
        )
        .with_mechanism("cgroup.kill"),
        (Some(leaf), _) => Finding::new(
            Topic::CgroupKill,
            Status::Unavailable,
            format!(
                "the session's cgroup v2 leaf below {} has no cgroup.kill (a kernel before 5.14)",
                leaf.parent().unwrap_or(leaf).display()
            ),
            LADDER,
        )
        .with_mechanism("signals"),
        (None, _) => {
            let why = match cgroup::session_v2_base() {
                Err(why) => format!("no cgroup v2 leaf for a session: {why}"),
                Ok(base) => format!(
                    "no cgroup v2 leaf for a session: making one below {} failed",
                    base.display()
                ),
            };
            Finding::new(Topic::CgroupKill, Status::Unavailable, why, LADDER)
                .with_mechanism("signals")
        }
    }
}

/// `oom_score_adj` of the probe session's command, against this process's.
fn oom_order(error: Option<&crate::Error>, seen: Option<&Seen>) -> Finding {
    let own = read_oom_score_adj("/proc/self/oom_score_adj");
    let own = own.map_or_else(|| "unreadable".to_owned(), |v| v.to_string());
    match (error, seen.and_then(|s| s.oom_score_adj)) {
        (_, Some(adj)) if adj >= SESSION_OOM_SCORE_ADJ => Finding::new(
            Topic::OomOrder,
            Status::Available,
            format!("oom_score_adj {adj} for session processes (this process: {own})"),
            "the kernel's OOM killer, machine-wide or in a cgroup, takes a session's processes \
             before their owner, with or without limits (G9); it needs no privilege",
        )
        .with_mechanism("oom_score_adj"),
        (error, adj) => Finding::new(
            Topic::OomOrder,
            Status::Unavailable,
            match (error, adj) {
                (Some(e), _) => format!("not probed: the probe session could not start ({e})"),
                (None, Some(adj)) => format!(
                    "the probe session's command had oom_score_adj {adj} (this process: {own})"
                ),
                (None, None) => "the probe session's oom_score_adj could not be read".to_owned(),
            },
            "in an OOM the kernel may pick the owner before a runaway session",
        )
        .with_mechanism("none"),
    }
}

fn read_oom_score_adj(path: &str) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}
