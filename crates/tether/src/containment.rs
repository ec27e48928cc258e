//! How a process tree is held: what a caller asks for, and what it got.

/// Which mechanism holds a session's process tree. Always reported, never
/// silently weaker than asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Containment {
    /// Linux: a keeper process that is the tree's child subreaper, so
    /// setsid and double-fork escapes reparent to it. If the keeper itself
    /// is SIGKILLed, the tree reparents to the nearest subreaper above it.
    Subreaper,
    /// Linux: a private PID namespace whose init dies with the keeper:
    /// airtight even against a SIGKILLed keeper. Tools inside see host pids
    /// in the process table (it is not remounted), but the command's children cannot
    /// signal processes outside the namespace.
    PidNamespace,
    /// macOS: a keeper that kills the command's process group and session,
    /// and finds escaped descendants (which reparent to launchd: macOS has
    /// no subreaper) by their spawn tag. A descendant that both leaves the
    /// group and clears its environment escapes it.
    ProcessGroupAndTag,
    /// Windows: a job object with kill-on-close, held only by the owner;
    /// the kernel kills every member when the owner goes.
    Job,
    /// Not contained: only where the caller asked for it explicitly.
    None,
}

impl Containment {
    /// Short name used in reports: `subreaper`, `pidns`, `pgroup+tag`,
    /// `job`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            Containment::Subreaper => "subreaper",
            Containment::PidNamespace => "pidns",
            Containment::ProcessGroupAndTag => "pgroup+tag",
            Containment::Job => "job",
            Containment::None => "none",
        }
    }

    /// Whether the kernel takes the whole tree down even if tether's own
    /// helper (the keeper) is killed: a PID namespace or a job.
    pub fn survives_keeper_death(self) -> bool {
        matches!(self, Containment::PidNamespace | Containment::Job)
    }
}

impl std::fmt::Display for Containment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which containment to ask for ([`Command::containment`](crate::Command::containment),
/// [`RunSpec`](crate::registry::RunSpec)). What was had is reported as a
/// [`Containment`]; it is never silently weaker than asked for.
///
/// ```standalone_crate
/// # #[cfg(unix)]
/// # fn main() -> tether::Result<()> {
/// # tether::keeper::run_if_requested();
/// use tether::{Command, Containment, ContainmentPolicy};
///
/// // The strongest holder this machine allows (a PID namespace as root or
/// // with unprivileged user namespaces; else the keeper's subreaper).
/// let mut child = Command::new("sleep")
///     .arg("1000")
///     .containment(ContainmentPolicy::Auto)
///     .spawn()?;
/// # #[cfg(target_os = "linux")]
/// assert!(matches!(child.containment(), Containment::PidNamespace | Containment::Subreaper));
/// println!("held by {}", child.containment()); // `pidns` or `subreaper`
/// child.kill()?;
/// # #[cfg(target_os = "linux")]
/// # tether_testkit::assert_nothing_left();
/// # Ok(())
/// # }
/// # #[cfg(not(unix))]
/// # fn main() {}
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContainmentPolicy {
    /// The platform's standard holder (the default): a subreaper keeper on
    /// Linux (a PID namespace changes what `ps` and `kill` mean inside the
    /// command), process group + tag on macOS, a job object on Windows.
    #[default]
    Standard,
    /// The strongest holder the kernel allows here: on Linux a PID
    /// namespace where one can be had (root, or unprivileged user
    /// namespaces), else the standard one. The child reports which it got.
    Auto,
    /// A PID namespace or an error — never silently something weaker.
    PidNamespace,
    /// No containment at all (Windows only): the command runs in no job of
    /// tether's, so it does *not* die with its owner, and its descendants
    /// are found and killed only by their spawn tag. Reported as
    /// [`Containment::None`]. For the rare program that must manage jobs
    /// itself; on Unix the keeper always contains the tree, and asking for
    /// this is [`Error::ContainmentUnavailable`](crate::Error::ContainmentUnavailable).
    Uncontained,
}

/// What happens to descendants still alive when the main process exits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Leftovers {
    /// Kill them with the ladder; the session ends when the tree is empty.
    #[default]
    Kill,
    /// Leave them running, still contained, until killed or the owner goes.
    Keep,
}
