//! The kill ladder: which rung a kill stands on, and how a signal reaches
//! every process of the tree exactly once.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::contain::os::keeper::{Member, SessionCgroups, TreeScope, members};
use crate::contain::unix::protocol::{Rung, Scope};

/// How long SIGKILL rounds go on before a kill is reported as incomplete
/// (a process in uninterruptible sleep can ignore SIGKILL for a while).
pub(super) const VERIFY_WINDOW: Duration = Duration::from_secs(5);
/// Re-sweep interval once a kill is under way: orphans reparented to the
/// keeper raise no event, so the keeper looks again at this pace until the
/// tree is empty (measured: a fork-looping tree empties in ~20 ms).
pub(super) const KILL_SWEEP: Duration = Duration::from_millis(5);

/// Where a kill stands.
#[derive(Clone, Debug)]
pub(super) enum Ladder {
    /// Nothing is being killed.
    Idle,
    /// `rungs[index]` went out; the next rung (or SIGKILL) follows at
    /// `deadline` unless the tree is empty first. Meanwhile processes
    /// forked after the first sweep get the rung's signal too.
    Climbing {
        rungs: Vec<Rung>,
        index: usize,
        deadline: Instant,
        grace: Duration,
    },
    /// SIGKILL rounds until the tree is empty or `give_up` passes.
    Killing { give_up: Instant },
}

impl Ladder {
    /// When the keeper must look again, at the latest.
    pub(super) fn next_wake(&self, now: Instant) -> Option<Instant> {
        match self {
            Ladder::Idle => None,
            Ladder::Climbing { deadline, .. } => Some((*deadline).min(now + KILL_SWEEP)),
            Ladder::Killing { give_up } => Some((*give_up).min(now + KILL_SWEEP)),
        }
    }
}

/// Delivers signals to one session's tree: the main process's group with
/// one `killpg` while its leader is unreaped, every other member through a
/// handle verified to be a member after it was opened.
pub(super) struct Delivery<'a> {
    /// The main process, while unreaped (its pid is then its group's id,
    /// which the kernel cannot reuse).
    pub main: Option<u32>,
    /// The keeper's own child (the command, or the namespace init).
    pub child: u32,
    pub scope: TreeScope<'a>,
    /// Pids of descendants a kill signalled (the main process excluded).
    pub signalled: &'a mut HashSet<u32>,
    /// The session's cgroups: with a v2 one, `SIGKILL` to the tree is
    /// `cgroup.kill`.
    pub cgroups: &'a mut SessionCgroups,
}

impl Delivery<'_> {
    /// Sends `signal` to `scope`, once per process. A stopped process would
    /// hold a pending signal forever, so anything but SIGKILL and the stop
    /// signals is followed by SIGCONT.
    ///
    /// The main process's group gets one `killpg` while its leader is
    /// unreaped (the kernel does not reuse the id of a live group leader):
    /// it reaches the whole group at once, which stops a fork loop in the
    /// group far faster than a per-process sweep (measured: a fork storm
    /// dies in ~25 ms with it, ~400 ms without). Members of that group are
    /// then skipped by the sweep, so no process gets the signal twice.
    pub(super) fn deliver(&mut self, signal: i32, scope: Scope) {
        let cont = continues(signal);
        let group = self.main;
        if let Some(main) = group {
            // SAFETY: kill(2) with a negative pid signals a group.
            unsafe { libc::kill(-(main as libc::pid_t), signal) };
            if cont {
                // SAFETY: as above.
                unsafe { libc::kill(-(main as libc::pid_t), libc::SIGCONT) };
            }
        }
        if scope == Scope::Group {
            return;
        }
        // The session's own cgroup v2: every process in it gets SIGKILL in
        // one write, forks racing the kill included (3,000 processes: see
        // the fork-storm bench). The per-process sweep below is then only
        // for what left the cgroup, so it waits until the cgroup is empty
        // (a sweep of thousands of dying processes costs more than their
        // deaths).
        if signal == libc::SIGKILL && self.cgroups.kill() {
            // The first kill: its dead are reaped before anyone sweeps (a
            // sweep lists every zombie not reaped yet). Later rounds sweep
            // once the cgroup is empty: what is left then is outside it.
            if self.cgroups.kills() == 1 || self.cgroups.populated() != Some(false) {
                return;
            }
        }
        for member in members(&self.scope) {
            let reached = Some(member.pgrp) == group || member.signal(signal);
            if reached {
                self.count(&member);
                if cont && Some(member.pgrp) != group {
                    member.signal(libc::SIGCONT);
                }
            }
        }
    }

    /// Sends `signal` (then SIGCONT) to tree members not signalled yet.
    pub(super) fn deliver_new(&mut self, signal: i32) {
        for member in members(&self.scope) {
            if !self.signalled.contains(&member.pid)
                && Some(member.pid) != self.main
                && member.pid != self.child
                && member.signal(signal)
            {
                self.signalled.insert(member.pid);
                if continues(signal) {
                    member.signal(libc::SIGCONT);
                }
            }
        }
    }

    fn count(&mut self, member: &Member) {
        if Some(member.pid) != self.main && member.pid != self.child {
            self.signalled.insert(member.pid);
        }
    }
}

/// Whether a signal should be followed by SIGCONT: not SIGKILL (acts on
/// stopped processes) and not the stop signals themselves.
fn continues(signal: i32) -> bool {
    !matches!(
        signal,
        libc::SIGKILL | libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
    )
}
