//! `tether doctor` on macOS: what the keeper gets here, what macOS lacks
//! (subreaper, pidfds, PID namespaces) and what that costs, and that none
//! of it has been tested on a Mac.

use crate::contain::unix::doctor as unix;
use crate::doctor::{Finding, Status, Topic};
use crate::{Containment, ContainmentPolicy};

/// Every macOS finding, in report order. `spawn` runs `exit 0` in a
/// session under a policy and says which containment it got.
pub(crate) fn probe(
    spawn: &dyn Fn(ContainmentPolicy) -> crate::Result<Containment>,
) -> Vec<Finding> {
    let standard = spawn(ContainmentPolicy::Standard);
    let system = match unix::uname() {
        Some((name, release, machine)) => format!("{name} {release}, {machine}"),
        None => "uname failed".to_owned(),
    };
    vec![
        Finding::new(
            Topic::System,
            Status::Info,
            system,
            "macOS is built and type-checked in CI, never run there (see `untested`)",
        ),
        unix::keeper(&standard),
        Finding::new(
            Topic::Subreaper,
            Status::Unavailable,
            "macOS has no child subreaper",
            "the keeper kills its command's process group and session; escaped descendants \
             reparent to launchd and are found by their spawn tag (sysctl KERN_PROCARGS2) and \
             killed; a descendant that leaves the group and session and clears its environment \
             escapes (G1)",
        ),
        Finding::new(
            Topic::Pidfd,
            Status::Unavailable,
            "macOS has no pidfds",
            "a process's pid and start time are re-read right before each kill(2): a window of \
             microseconds remains in which a reused pid could be signalled (G4); exits are \
             watched with kqueue",
        ),
        Finding::new(
            Topic::PidNamespace,
            Status::Unavailable,
            "macOS has no PID namespaces",
            "--containment auto gives pgroup+tag; --containment pidns is an error",
        ),
        unix::open_files(),
        Finding::new(
            Topic::Untested,
            Status::Untested,
            "tether's tests have never run on macOS: CI builds and type-checks it only",
            "the keeper, its kqueue lifeline, the spawn-tag scan, kills, PTY sessions and the \
             terminal foreground job are the same code as Linux or its macOS counterpart, but \
             unverified here: report what you see",
        ),
    ]
}
