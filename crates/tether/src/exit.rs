//! How a command ended, and what it wrote.

use crate::contain::Termination;
use crate::limits::LimitHit;

/// How a command's main process ended — and what tether did about the
/// rest of its tree: whether a timeout killed it, how many descendants
/// were killed, which resource limit it ran into. Its `Display` reads
/// `exit code 3`, `signal 9 (timed out)`, `exit code 0 (memory limit …)`.
///
/// ```standalone_crate
/// # #[cfg(unix)]
/// # fn main() -> tether::Result<()> {
/// # tether::keeper::run_if_requested();
/// let status = tether::Command::new("sh").args(["-c", "exit 3"]).status()?;
/// assert_eq!((status.code(), status.shell_code()), (Some(3), 3));
/// assert_eq!(status.to_string(), "exit code 3");
///
/// // Killed by a signal: no code; a shell would say 128 + 15.
/// let status = tether::Command::new("sh").args(["-c", "kill -TERM $$"]).status()?;
/// assert_eq!((status.code(), status.shell_code()), (None, 143));
/// # #[cfg(target_os = "linux")]
/// # tether_testkit::assert_nothing_left();
/// # Ok(())
/// # }
/// # #[cfg(not(unix))]
/// # fn main() {}
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitStatus {
    pub(crate) termination: Termination,
    pub(crate) timed_out: bool,
    pub(crate) descendants_killed: u32,
    pub(crate) limit_hit: Option<LimitHit>,
    pub(crate) oom_outside: u32,
    pub(crate) limits_escaped: u32,
    pub(crate) usage: Option<ResourceUsage>,
}

impl ExitStatus {
    /// The exit code, if the process exited normally (always, on Windows).
    /// On Unix, a process killed by a signal has none:
    /// [`ExitStatusExt::signal`] says which.
    ///
    #[cfg_attr(
        unix,
        doc = "[`ExitStatusExt::signal`]: crate::unix::ExitStatusExt::signal"
    )]
    #[cfg_attr(
        not(unix),
        doc = "[`ExitStatusExt::signal`]: https://docs.rs/process-tether/latest/tether/unix/trait.ExitStatusExt.html#tymethod.signal"
    )]
    pub fn code(&self) -> Option<i32> {
        match self.termination {
            Termination::Code(c) => Some(c),
            Termination::Signal(_) => None,
        }
    }

    /// The exit status as a shell reports it: the code, or 128 + the
    /// signal's number for a process a signal killed.
    pub fn shell_code(&self) -> i32 {
        match self.termination {
            Termination::Code(c) => c,
            Termination::Signal(s) => 128 + s,
        }
    }

    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.code() == Some(0)
    }

    /// Whether the command was killed because its timeout passed.
    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// How many descendants (not the main process) a kill signalled before
    /// the tree was empty — e.g. the leftovers killed after the main
    /// process exited.
    pub fn descendants_killed(&self) -> u32 {
        self.descendants_killed
    }

    /// The resource limit the session ran into, if it did (see
    /// [`Limits`](crate::Limits)): a memory limit whose OOM kills ended
    /// processes of the session — the main process's `SIGKILL` then is
    /// that, not a mystery — or a process limit that refused forks.
    pub fn limit_hit(&self) -> Option<LimitHit> {
        self.limit_hit
    }

    /// How many processes of the session the kernel's OOM killer ended for
    /// memory the session's own limit did not run out of — its owner's
    /// cgroup limit (an ancestor's) or the whole machine's (Linux, for a
    /// session with a memory limit; 0 elsewhere). Such a kill is not
    /// [`limit_hit`](Self::limit_hit): the session stayed within its limit.
    pub fn oom_killed_outside(&self) -> u32 {
        self.oom_outside
    }

    /// How many processes of the session were found outside its cgroups —
    /// out of its limits (Linux; which, and where they were:
    /// [`Child::limits_escaped`](crate::Child::limits_escaped),
    /// [`Output::limits_escaped`]). They died with the session all the
    /// same, and a kill counts them in
    /// [`descendants_killed`](Self::descendants_killed).
    pub fn limits_escaped(&self) -> u32 {
        self.limits_escaped
    }

    /// What the command's processes used (CPU time, largest resident set)
    /// — the whole tree's once it is empty, as far as it was reaped before
    /// (see [`ResourceUsage`]). `None` where it is not measured (macOS,
    /// Windows).
    pub fn resource_usage(&self) -> Option<ResourceUsage> {
        self.usage
    }
}

/// What a command's tree used, as the kernel accounted it when its
/// processes were reaped: on Linux, the sum of the `wait4` reports of every
/// process the keeper reaped for this command (each of which includes what
/// its own reaped children used) — what `RUSAGE_CHILDREN` would show the
/// command's parent, which the owner is not (the keeper is). A process
/// still running is not in it: the tree's whole use is known once it is
/// empty ([`ExitStatus`] of a finished [`Child`](crate::Child) or
/// settled session).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceUsage {
    /// CPU time spent in user mode, all processes together.
    pub user_time: std::time::Duration,
    /// CPU time spent in the kernel on their behalf, all together.
    pub system_time: std::time::Duration,
    /// The largest resident set size of any one of them, in bytes (the
    /// kernel's high-water mark, `ru_maxrss`).
    pub max_rss: u64,
}

/// Both together: the times added, the larger `max_rss` kept.
impl std::ops::Add for ResourceUsage {
    type Output = ResourceUsage;

    fn add(self, other: ResourceUsage) -> ResourceUsage {
        ResourceUsage {
            user_time: self.user_time + other.user_time,
            system_time: self.system_time + other.system_time,
            max_rss: self.max_rss.max(other.max_rss),
        }
    }
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.termination {
            Termination::Code(c) => write!(f, "exit code {c}")?,
            Termination::Signal(s) => write!(f, "signal {s}")?,
        }
        if self.timed_out {
            write!(f, " (timed out)")?;
        }
        if let Some(hit) = self.limit_hit {
            write!(f, " ({hit})")?;
        }
        if self.limits_escaped > 0 {
            write!(
                f,
                " ({} process(es) left the session's limits)",
                self.limits_escaped
            )?;
        }
        if self.oom_outside > 0 {
            write!(
                f,
                " ({} process(es) OOM-killed by a memory limit outside the session)",
                self.oom_outside
            )?;
        }
        Ok(())
    }
}

/// Everything a finished command wrote, and how it ended.
#[derive(Clone, Debug)]
pub struct Output {
    /// How it ended.
    pub status: ExitStatus,
    /// All of its standard output.
    pub stdout: Vec<u8>,
    /// All of its standard error.
    pub stderr: Vec<u8>,
    /// Bytes of stdout dropped from the front to stay within a limit
    /// ([`Child::wait_with_output_limited`](crate::Child::wait_with_output_limited)); 0 otherwise.
    pub stdout_dropped: u64,
    /// Bytes of stderr dropped from the front likewise.
    pub stderr_dropped: u64,
    /// Processes of the session found outside its cgroups (out of its
    /// limits), and where: see [`ExitStatus::limits_escaped`].
    pub limits_escaped: Vec<crate::limits::LimitEscape>,
}

/// What a command wrote to its piped stdout and stderr, as far as it was
/// read: what [`Child::wait_with_captured_output`] returns beside the end
/// of the wait, whatever that was (a keeper's death included).
///
/// [`Child::wait_with_captured_output`]: crate::Child::wait_with_captured_output
#[derive(Clone, Debug, Default)]
pub struct Captured {
    /// Its standard output (the last bytes, within the limit asked for).
    pub stdout: Vec<u8>,
    /// Its standard error likewise.
    pub stderr: Vec<u8>,
    /// Bytes of stdout dropped from the front to stay within the limit.
    pub stdout_dropped: u64,
    /// Bytes of stderr dropped from the front likewise.
    pub stderr_dropped: u64,
    /// Processes of the session found outside its cgroups (out of its
    /// limits), and where: see [`ExitStatus::limits_escaped`].
    pub limits_escaped: Vec<crate::limits::LimitEscape>,
}
