//! What this machine gives tether, and what that means for its guarantees
//! (`tether doctor`).
//!
//! [`probe`] asks the platform about every mechanism tether uses — the
//! kernel, the keeper and its subreaper, pidfds and pidfs, PID namespaces,
//! cgroups, each session limit (memory, processes, CPU) and the kill and
//! OOM order that come with them, the descriptor limit; on Windows job
//! objects and their limits, nested jobs and ConPTY; on macOS what has
//! never been tested — and returns one [`Finding`] per mechanism: available
//! or not, what was found, and what the guarantee falls back to where it
//! is missing. Mechanisms are *probed*, never assumed from a version
//! number: a keeper is started and runs `exit 0` under each containment
//! that is asked about, and a session with [`PROBE_LIMITS`] is started,
//! exactly as `tether run` would; the limits findings say what that
//! session's [`LimitReport`] said.
//!
//! The report is platform-free; the probes live in `contain/<os>/doctor.rs`.
//! A front-end adds what lives above this crate (the state directory and
//! its checks belong to `tether_ledger`) by pushing more findings.

use crate::limits::{Enforcement, LimitReport, Limits};
use crate::{Child, Command, Containment, ContainmentPolicy, Stdio};

/// Which mechanism a [`Finding`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Topic {
    /// The operating system: kernel, release, architecture.
    System,
    /// Unix: the keeper program that holds each session (Linux: as child
    /// subreaper; macOS: by process group and tag).
    Keeper,
    /// Linux: `PR_SET_CHILD_SUBREAPER`, which keeps setsid and double-fork
    /// escapes in the keeper's tree.
    Subreaper,
    /// Linux: pidfds, the handles every signal of tether goes through.
    Pidfd,
    /// Linux: pidfds on pidfs (6.9+), whose inode names a process uniquely
    /// for the boot and is part of a [`ProcessIdentity`](crate::ProcessIdentity).
    PidfsIdentity,
    /// Linux: private PID namespaces (`--containment pidns` / `auto`), as
    /// root or through unprivileged user namespaces.
    PidNamespace,
    /// Linux: the cgroup v2 and v1 hierarchies this process is in, which
    /// controllers its cgroup offers, and whether this user may write there
    /// (what is delegated to it): where session limits and `cgroup.kill`
    /// come from.
    Cgroups,
    /// The memory limit (`tether run --memory`): the mechanism a session
    /// gets here ([`Finding::mechanism`]: `cgroup2`, `cgroup1`, `job` or
    /// `none`, as `tether run --json` reports it), or why none.
    MemoryLimit,
    /// The process-count limit (`--pids`), as [`Topic::MemoryLimit`].
    PidsLimit,
    /// The CPU limit (`--cpu`), as [`Topic::MemoryLimit`].
    CpuLimit,
    /// Linux: `cgroup.kill` in a session's own cgroup v2 leaf, the kill's
    /// `SIGKILL` rung in one write ([`Finding::mechanism`]: `cgroup.kill`),
    /// else the signal ladder (`signals`).
    CgroupKill,
    /// Unix: the OOM killer's order — session processes before their owner
    /// (Linux: `oom_score_adj` 1000).
    OomOrder,
    /// The state directory and its trust checks (the ledger's; a front-end
    /// that has the ledger adds this finding).
    StateDirectory,
    /// Unix: the open-file limit (`ulimit -n`) of this process, which its
    /// sessions' pipes and handles count against.
    OpenFiles,
    /// Windows: a kill-on-close job object per session.
    Job,
    /// Windows: whether a job can be created inside the job this process
    /// already runs in (nested jobs, Windows 8 and later).
    NestedJobs,
    /// Windows: pseudoconsoles (ConPTY, Windows 10 1809 and later) for PTY
    /// sessions.
    ConPty,
    /// macOS: what runs here but has never been tested here.
    Untested,
}

impl Topic {
    /// Short stable name used in JSON and text: `system`, `keeper`,
    /// `subreaper`, `pidfd`, `pidfs`, `pidns`, `cgroups`, `memory_limit`,
    /// `pids_limit`, `cpu_limit`, `cgroup_kill`, `oom`, `state_dir`,
    /// `open_files`, `job`, `nested_jobs`, `conpty`, `untested`.
    pub fn name(self) -> &'static str {
        match self {
            Topic::System => "system",
            Topic::Keeper => "keeper",
            Topic::Subreaper => "subreaper",
            Topic::Pidfd => "pidfd",
            Topic::PidfsIdentity => "pidfs",
            Topic::PidNamespace => "pidns",
            Topic::Cgroups => "cgroups",
            Topic::MemoryLimit => "memory_limit",
            Topic::PidsLimit => "pids_limit",
            Topic::CpuLimit => "cpu_limit",
            Topic::CgroupKill => "cgroup_kill",
            Topic::OomOrder => "oom",
            Topic::StateDirectory => "state_dir",
            Topic::OpenFiles => "open_files",
            Topic::Job => "job",
            Topic::NestedJobs => "nested_jobs",
            Topic::ConPty => "conpty",
            Topic::Untested => "untested",
        }
    }
}

/// How a mechanism stands on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Probed, and it works here.
    Available,
    /// Probed, and it is missing or refused here; the finding says why and
    /// what the guarantee falls back to.
    Unavailable,
    /// A fact about the machine (versions, limits) rather than a mechanism
    /// that works or not.
    Info,
    /// It runs on this platform, but tether's tests have never run here.
    Untested,
}

impl Status {
    /// Short stable name: `available`, `unavailable`, `info`, `untested`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Available => "available",
            Status::Unavailable => "unavailable",
            Status::Info => "info",
            Status::Untested => "untested",
        }
    }
}

/// One mechanism as this machine offers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Which mechanism.
    pub topic: Topic,
    /// Whether it works here.
    pub status: Status,
    /// What was found: versions, settings, the error the kernel gave.
    pub found: String,
    /// What it means: what the guarantee rests on here, or what it falls
    /// back to where the mechanism is missing.
    pub meaning: String,
    /// The mechanism a session gets for this, where the finding is about a
    /// choice of one: for the limits the name `tether run --json` reports
    /// ([`Enforcement::name`](crate::Enforcement::name): `cgroup2`,
    /// `cgroup1`, `job`, `rlimit`, `none`); for [`Topic::CgroupKill`]
    /// `cgroup.kill` or `signals`; for [`Topic::OomOrder`] `oom_score_adj`
    /// or `none`. `None` for every other finding.
    pub mechanism: Option<&'static str>,
}

impl Finding {
    /// A finding from its parts.
    pub fn new(
        topic: Topic,
        status: Status,
        found: impl Into<String>,
        meaning: impl Into<String>,
    ) -> Finding {
        Finding {
            topic,
            status,
            found: found.into(),
            meaning: meaning.into(),
            mechanism: None,
        }
    }

    /// This finding, naming the mechanism a session gets (see
    /// [`Finding::mechanism`]).
    pub fn with_mechanism(mut self, mechanism: &'static str) -> Finding {
        self.mechanism = Some(mechanism);
        self
    }
}

/// Everything [`probe`] found, in a fixed order per platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// One finding per mechanism.
    pub findings: Vec<Finding>,
}

impl Report {
    /// The finding about `topic`, if the report has one.
    pub fn get(&self, topic: Topic) -> Option<&Finding> {
        self.findings.iter().find(|f| f.topic == topic)
    }

    /// Whether tether can run commands here: the probe session ran (the
    /// [`Topic::Keeper`] finding on Unix, [`Topic::Job`] on Windows, is
    /// available). Everything a session needs — on Linux the subreaper and
    /// pidfds — is on that path, so a missing one shows here too.
    pub fn can_run(&self) -> bool {
        self.findings
            .iter()
            .any(|f| matches!(f.topic, Topic::Keeper | Topic::Job) && f.status == Status::Available)
    }
}

/// Probes this machine. Starts a keeper (on Unix) and runs `exit 0` in a
/// session under the standard containment and, on Linux, in a PID
/// namespace, and one session with [`PROBE_LIMITS`] — a few milliseconds
/// each; those sessions carry the purpose `doctor` and end before this
/// returns. The limited session is started as `tether run --memory 64M
/// --pids 16 --cpu 0.5` would start it, with the same effects on Linux: its
/// cgroup leaves are made and removed, and where cgroup v2 needs it a
/// controller is enabled in this process's cgroup, this process first
/// moving into a `tether-owner` leaf if it is alone there. Never fails: a
/// probe that fails is an [`Status::Unavailable`] finding saying why.
///
/// Needs a keeper like any spawn (call
/// [`keeper::run_if_requested`](crate::keeper::run_if_requested) first, or
/// install `tether-keeper`); without one the keeper finding says so.
///
/// ```standalone_crate
/// # #[cfg(unix)]
/// # fn main() -> tether::Result<()> {
/// # tether::keeper::run_if_requested();
/// use tether::doctor::{Status, Topic};
///
/// let report = tether::doctor::probe();
/// for finding in &report.findings {
///     println!("{:<10} {:<11} {}", finding.topic.name(), finding.status.name(), finding.found);
/// }
/// assert!(report.can_run());
/// # #[cfg(target_os = "linux")]
/// assert_eq!(report.get(Topic::Subreaper).map(|f| f.status), Some(Status::Available));
/// # #[cfg(target_os = "linux")]
/// # tether_testkit::assert_nothing_left();
/// # Ok(())
/// # }
/// # #[cfg(not(unix))]
/// # fn main() {}
/// ```
pub fn probe() -> Report {
    Report {
        findings: crate::contain::doctor::probe(&run_probe),
    }
}

/// The limits of the probe session: small enough for any machine, and
/// never reached by the probe (a shell that reads a line or exits): 64 MiB,
/// 16 processes, half a core.
pub const PROBE_LIMITS: Limits = Limits {
    memory: Some(64 << 20),
    pids: Some(16),
    cpu: Some(0.5),
    require: false,
};

/// Runs `script` in a session with [`PROBE_LIMITS`] (purpose `doctor`,
/// stdin piped, output discarded), calls `inspect` on it while it runs —
/// a script that reads a line runs until then — and waits for it (closing
/// its stdin). What the session reported it was given, and what `inspect`
/// returned.
pub(crate) fn limited_probe<T>(
    script: &str,
    inspect: impl FnOnce(&Child) -> T,
) -> crate::Result<(LimitReport, T)> {
    let mut child = Command::shell(script)
        .limits(PROBE_LIMITS)
        .purpose("doctor")
        .stdin(Stdio::Piped)
        .stdout(Stdio::Null)
        .stderr(Stdio::Null)
        .spawn()?;
    let report = child.limits().clone();
    let seen = inspect(&child);
    child.wait()?;
    Ok((report, seen))
}

/// The memory, process and CPU limit findings, in that order, from what
/// the probe session with [`PROBE_LIMITS`] reported: [`Status::Available`]
/// where a limit is enforced, [`Finding::mechanism`] the enforcement's
/// name, and what was found and what it means as `describe` words them for
/// this platform. A limit missing from the report reads as `none`; a probe
/// session that could not start makes every limit
/// [`Status::Unavailable`] (mechanism `none`), saying so.
pub(crate) fn limit_findings(
    probe: &crate::Result<LimitReport>,
    describe: &dyn Fn(Topic, &Enforcement) -> (String, String),
) -> Vec<Finding> {
    let missing = Enforcement::None("the probe session reported nothing for this limit".into());
    [Topic::MemoryLimit, Topic::PidsLimit, Topic::CpuLimit]
        .into_iter()
        .map(|topic| {
            let report = match probe {
                Ok(report) => report,
                Err(e) => {
                    return Finding::new(
                        topic,
                        Status::Unavailable,
                        format!("not probed: a session with limits could not start ({e})"),
                        "tether cannot start sessions with limits here until this is fixed",
                    )
                    .with_mechanism("none");
                }
            };
            let entry = match topic {
                Topic::MemoryLimit => &report.memory,
                Topic::PidsLimit => &report.pids,
                _ => &report.cpu_millis,
            };
            let how = entry.as_ref().map_or(&missing, |(_, how)| how);
            let (found, meaning) = describe(topic, how);
            let status = if how.is_enforced() {
                Status::Available
            } else {
                Status::Unavailable
            };
            Finding::new(topic, status, found, meaning).with_mechanism(how.name())
        })
        .collect()
}

/// Runs `exit 0` in a session under `policy`; the containment it got.
fn run_probe(policy: ContainmentPolicy) -> crate::Result<Containment> {
    let mut child = Command::shell("exit 0")
        .containment(policy)
        .purpose("doctor")
        .stdin(Stdio::Null)
        .stdout(Stdio::Null)
        .stderr(Stdio::Null)
        .spawn()?;
    let containment = child.containment();
    child.wait()?;
    Ok(containment)
}
