//! What this machine gives tether, and what that means for its guarantees
//! (`tether doctor`).
//!
//! [`probe`] asks the platform about every mechanism tether uses — the
//! kernel, the keeper and its subreaper, pidfds and pidfs, PID namespaces,
//! the descriptor limit; on Windows job objects, nested jobs and ConPTY; on
//! macOS what has never been tested — and returns one [`Finding`] per
//! mechanism: available or not, what was found, and what the guarantee
//! falls back to where it is missing. Mechanisms are *probed*, never
//! assumed from a version number: a keeper is started and runs
//! `exit 0` under each containment that is asked about, exactly as
//! `tether run` would.
//!
//! The report is platform-free; the probes live in `contain/<os>/doctor.rs`.
//! A front-end adds what lives above this crate (the state directory and
//! its checks belong to `tether_ledger`) by pushing more findings.

use crate::{Command, Containment, ContainmentPolicy, Stdio};

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
    /// Linux: cgroup v2 / v1 and what is delegated to this user, for
    /// memory, process-count and CPU limits. **Slot**: this build does not
    /// probe it yet (see [`cgroups_not_probed`]).
    Cgroups,
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
    /// `subreaper`, `pidfd`, `pidfs`, `pidns`, `cgroups`, `state_dir`,
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
    /// Not probed by this build: the slot is there, the probe is not yet.
    NotProbed,
    /// It runs on this platform, but tether's tests have never run here.
    Untested,
}

impl Status {
    /// Short stable name: `available`, `unavailable`, `info`,
    /// `not_probed`, `untested`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Available => "available",
            Status::Unavailable => "unavailable",
            Status::Info => "info",
            Status::NotProbed => "not_probed",
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
        }
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
/// namespace — a few milliseconds each; those sessions carry the purpose
/// `doctor` and end before this returns. Never fails: a probe that fails
/// is an [`Status::Unavailable`] finding saying why.
///
/// Needs a keeper like any spawn (call
/// [`keeper::run_if_requested`](crate::keeper::run_if_requested) first, or
/// install `tether-keeper`); without one the keeper finding says so.
pub fn probe() -> Report {
    Report {
        findings: crate::contain::doctor::probe(&run_probe),
    }
}

/// The finding for the cgroup slot until the limits work's discovery fills
/// it: [`Status::NotProbed`].
pub fn cgroups_not_probed() -> Finding {
    // SLOT(cgroups): replaced by the cgroup v2/v1 discovery under
    // contain/linux/ (what is mounted, what is delegated to this user, and
    // which of memory/pids/cpu limits that allows) once it lands.
    Finding::new(
        Topic::Cgroups,
        Status::NotProbed,
        "cgroup v2/v1 discovery is not in this build yet",
        "session limits (memory, processes, CPU) and which cgroup v2/v1 controllers are delegated \
         to this user are not reported here yet",
    )
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
