//! Session limits on macOS: none. What Darwin has does not fit, and a
//! limit that is not enforced is reported as `none` with the reason rather
//! than pretended:
//!
//! - memory: `RLIMIT_AS` is enforced (the VM map's size limit), but it
//!   counts every mapping — dyld's shared cache alone is gigabytes, mapped
//!   before `main` — and the kernel refuses a limit below what a process
//!   already maps, so no useful session limit can be stated with it;
//!   `RLIMIT_DATA` does not cover `mmap`, where allocators get memory;
//! - processes: `RLIMIT_NPROC` counts every process of the user, not the
//!   session's;
//! - CPU: `RLIMIT_CPU` is CPU seconds before a `SIGXCPU`, not a share of
//!   cores.
//!
//! There is no `oom_score_adj` either (Darwin's jetsam priorities are not
//! settable by an unprivileged process).

use std::os::fd::RawFd;

use crate::contain::unix::protocol::{LimitSpec, Route};
use crate::limits::{Enforcement, LimitHit, LimitReport, Limits, cpu_millis};

const MEMORY: &str = "macOS has no session memory limit: RLIMIT_AS counts the dyld shared cache \
                      (gigabytes, mapped before main) and cannot be set below it; RLIMIT_DATA does \
                      not cover mmap";
const PIDS: &str = "macOS has no session process limit: RLIMIT_NPROC counts every process of the \
                    user";
const CPU: &str = "macOS has no CPU-share limit: RLIMIT_CPU is CPU seconds, not cores";

/// Every limit of `limits`, routed nowhere, with the reason.
pub(crate) fn limit_spec(limits: &Limits) -> LimitSpec {
    let none = |why: &str| Route::Unavailable(why.as_bytes().to_vec());
    LimitSpec {
        memory: limits.memory.map(|m| (m, none(MEMORY))),
        pids: limits.pids.map(|p| (p, none(PIDS))),
        cpu_millis: limits.cpu.map(|c| (cpu_millis(c), none(CPU))),
        v2_base: None,
        require: limits.require,
    }
}

/// No cgroups here: nothing to remove.
pub(crate) fn remove_leftover_cgroups(_dirs: &[std::path::PathBuf]) {}

/// The keeper's side: nothing is made; the report says why.
#[derive(Debug, Default)]
pub(crate) struct SessionCgroups;

impl SessionCgroups {
    /// Reports every limit of `spec` as not enforced, with its reason.
    pub(crate) fn create(
        spec: &LimitSpec,
        _tag: Option<&crate::spawn_tag::SpawnTag>,
    ) -> (SessionCgroups, LimitReport) {
        let report = |limit: &Option<(u64, Route)>| {
            limit.as_ref().map(|(value, route)| {
                let why = match route {
                    Route::Unavailable(reason) => String::from_utf8_lossy(reason).into_owned(),
                    _ => "no cgroups on macOS".to_owned(),
                };
                (*value, Enforcement::None(why))
            })
        };
        let report = LimitReport {
            memory: report(&spec.memory),
            pids: report(&spec.pids),
            cpu_millis: report(&spec.cpu_millis),
            cgroup: None,
            cgroups: Vec::new(),
            via: None,
        };
        (SessionCgroups, report)
    }

    /// Never: a session that requires its limits is refused by its owner
    /// already (every route here is `Unavailable`).
    pub(crate) fn refused(
        &self,
    ) -> Option<(
        crate::contain::unix::protocol::SpawnStage,
        nix::errno::Errno,
    )> {
        None
    }

    /// Nothing to enter.
    pub(crate) fn procs(&self) -> Vec<RawFd> {
        Vec::new()
    }

    /// No `cgroup.kill`: the sweep does the work.
    pub(crate) fn kill(&mut self) -> bool {
        false
    }

    /// Never written.
    pub(crate) fn kills(&self) -> u32 {
        0
    }

    /// No cgroup to list.
    pub(crate) fn members(&self) -> Option<Vec<u32>> {
        None
    }

    /// No cgroup to be populated.
    pub(crate) fn populated(&self) -> Option<bool> {
        None
    }

    /// No cgroups to leave.
    pub(crate) fn note_escapes(&mut self, _pids: &[u32]) {}

    /// No cgroups to watch.
    pub(crate) fn watched(&self) -> bool {
        false
    }

    /// No cgroups to move back into.
    pub(crate) fn move_back(&mut self, _members: &[super::keeper::Member]) {}

    /// No cgroups to leave.
    pub(crate) fn escaped(&self) -> Vec<(u32, Vec<u8>, u32)> {
        Vec::new()
    }

    /// No cgroup to count OOM kills in.
    pub(crate) fn oom_outside(&self) -> u32 {
        0
    }

    /// Nothing is enforced, so nothing is hit.
    pub(crate) fn hit(&self) -> Option<LimitHit> {
        None
    }

    /// Nothing to remove.
    pub(crate) fn remove(self) {}
}

/// No `oom_score_adj` on macOS.
pub(crate) struct OomPriority;

impl OomPriority {
    /// Does nothing.
    pub(crate) fn raise() -> OomPriority {
        OomPriority
    }
}

/// What gave the limits beyond the owner's own means: nothing on macOS.
pub(crate) fn limits_via(_report: &LimitReport) -> Option<String> {
    None
}
