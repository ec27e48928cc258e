//! `tether doctor` on macOS: what the keeper gets here, what macOS lacks
//! (subreaper, pidfds, PID namespaces, session limits, an OOM order) and
//! what that costs, and that none of it has been tested on a Mac.

use crate::contain::unix::doctor as unix;
use crate::doctor::{Finding, Status, Topic, limit_findings, limited_probe};
use crate::limits::Enforcement;
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
    let mut findings = vec![
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
    ];
    findings.extend(limits());
    findings.push(
        Finding::new(
            Topic::OomOrder,
            Status::Unavailable,
            "macOS has no oom_score_adj, and its jetsam priorities are not settable by an \
         unprivileged process",
            "under memory pressure macOS chooses between an owner and its sessions by its own \
         priorities: a runaway session is not made to go first",
        )
        .with_mechanism("none"),
    );
    findings.extend([
        unix::open_files(),
        Finding::new(
            Topic::Untested,
            Status::Untested,
            "tether's tests have never run on macOS: CI builds and type-checks it only",
            "the keeper, its kqueue lifeline, the spawn-tag scan, kills, PTY sessions, the \
             terminal foreground job and the limits' none reports are the same code as Linux or \
             its macOS counterpart, but unverified here: report what you see",
        ),
    ]);
    findings
}

/// The memory, process and CPU limits as a session with
/// [`PROBE_LIMITS`](crate::doctor::PROBE_LIMITS) reported them: `none`,
/// each with the reason Darwin's rlimits do not fit (`limits.rs`).
fn limits() -> Vec<Finding> {
    let probe = limited_probe("exit 0", |_| ()).map(|(report, ())| report);
    limit_findings(&probe, &|topic, how| {
        let flag = flag(topic);
        match how {
            Enforcement::None(reason) => (
                reason.clone(),
                format!(
                    "tether run {flag} is reported none with this reason and not enforced: a \
                     session may use what its owner may"
                ),
            ),
            how => (
                how.name().to_owned(),
                format!("tether run {flag} is enforced by {}", how.name()),
            ),
        }
    })
}

fn flag(topic: Topic) -> &'static str {
    match topic {
        Topic::MemoryLimit => "--memory",
        Topic::PidsLimit => "--pids",
        _ => "--cpu",
    }
}
