//! The kill ladder: where a kill stands, and how a signal reaches every
//! process of the tree exactly once.
//!
//! A kill has two rungs. The *gentle* one sends every signal of the
//! session's ladder (`SIGTERM`; on a PTY `SIGHUP` and `SIGTERM` together,
//! as systemd's `SendSIGHUP` does) to every member of the tree at once;
//! the *forced* one (`SIGKILL`) reaches only what is still alive when the
//! grace ends. The grace is an upper bound for stragglers, never a wait:
//! the kill is over the moment the tree is empty (the keeper looks after
//! every `SIGCHLD` and every [`KILL_SWEEP`]). Before this, the signals of a
//! PTY's ladder went out one grace apart and the gentle signal reached only
//! the command's group first: a `nohup` member cost a whole grace (2 s),
//! and so did a `setsid` child of a `tether run` that was sent `SIGTERM`.
//!
//! Nor does the grace wait for signals nobody will act on: once every
//! member still alive ignores the gentle signals that reached it
//! ([`Delivery::none_will_act`]), the forced rung comes at once.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::contain::os::keeper::{
    Member, SessionCgroups, TreeScope, cgroup_members, walk, walk_signalling,
};
use crate::contain::unix::protocol::{Rung, Scope};

/// How long SIGKILL rounds go on before a kill is reported as incomplete
/// (a process in uninterruptible sleep can ignore SIGKILL for a while).
pub(super) const VERIFY_WINDOW: Duration = Duration::from_secs(5);
/// Re-sweep interval once a kill is under way: processes forked during the
/// kill raise no event, so the keeper walks the tree again at this pace
/// (and no faster, however often a dying tree wakes it) until the tree
/// is empty (measured: a fork-looping tree empties in ~20 ms).
pub(super) const KILL_SWEEP: Duration = Duration::from_millis(5);

/// Where a kill stands.
#[derive(Clone, Debug)]
pub(super) enum Ladder {
    /// Nothing is being killed.
    Idle,
    /// The gentle signals went out to the whole tree at once; whatever is
    /// alive at `deadline` gets the forced end. Until then processes that
    /// join the tree (forked after the first sweep, or reparented to the
    /// keeper) get the gentle signals too.
    Gentle { rungs: Vec<Rung>, deadline: Instant },
    /// SIGKILL rounds until the tree is empty or `give_up` passes.
    Forced { give_up: Instant },
}

impl Ladder {
    /// When the keeper must look again, at the latest.
    pub(super) fn next_wake(&self, now: Instant) -> Option<Instant> {
        match self {
            Ladder::Idle => None,
            Ladder::Gentle { deadline, .. } => Some((*deadline).min(now + KILL_SWEEP)),
            Ladder::Forced { give_up } => Some((*give_up).min(now + KILL_SWEEP)),
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
    /// The namespace init, with a PID namespace: tether's, not the
    /// command's (it ends when the namespace's processes do).
    pub init: Option<u32>,
    pub scope: TreeScope<'a>,
    /// Which signals each descendant got during this kill (the main
    /// process excluded), so that no process gets one twice.
    pub signalled: &'a mut HashSet<(u32, i32)>,
    /// Signals already sent to the main process's whole group.
    pub group_signalled: &'a mut HashSet<i32>,
    /// The session's cgroups: with a v2 one, `SIGKILL` to the tree is
    /// `cgroup.kill`.
    pub cgroups: &'a mut SessionCgroups,
    /// The processes the kill is counted against: the forced rung's walk
    /// after `cgroup.kill` adds what it finds (it left the cgroup).
    pub doomed: &'a mut HashSet<u32>,
}

impl Delivery<'_> {
    /// The tree's live members now, each pinned: one walk of the tree.
    pub(super) fn members(&self) -> Vec<Member> {
        walk(&self.scope, |_| {})
    }

    /// The tree's live members, each pinned (one walk), each member outside
    /// the main process's group sent `rungs` before its own children are
    /// listed (see `walk_signalling`), the group with one `killpg` per
    /// signal once the walk is done. For a kill nobody waits to hear the
    /// count of (the owner is gone): a member's children listed after its
    /// signal are not the count's.
    ///
    /// The group is stopped (`SIGSTOP`, one `killpg`) before the walk and
    /// signalled after it, with `SIGCONT`: stopped, a fork loop in it makes
    /// nothing new for the walk to chase, and none of its members dies
    /// during the walk — one that did would hand its children to the
    /// keeper before the walk lists them, and they would wait for the next
    /// sweep.
    ///
    /// Also says whether the listing is the whole tree: the cgroup's is
    /// not (see below), and "everything listed ignores the gentle signal"
    /// says nothing of what it missed.
    pub(super) fn members_delivering(&mut self, rungs: &[Rung]) -> (Vec<Member>, bool) {
        // A copy: the walk's callback borrows `self`.
        let scope = self.scope;
        let group = self.main;
        if let Some(main) = group {
            // SAFETY: kill(2) with a negative pid signals a group.
            unsafe { libc::kill(-(main as libc::pid_t), libc::SIGSTOP) };
        }
        // With a cgroup v2 of the session's own, its members are listed in
        // one read and proven through their pidfds, no `/proc` walk (see
        // `cgroup_members`; 3,003 processes listed in 15–37 ms under load,
        // where the walk took 300–600 ms), all of them before the first
        // signal: signalled during the listing, each dying member took the
        // CPU the listing needed. What left the leaf is not in it: the
        // next sweep's walk finds that, KILL_SWEEP later.
        let (listed, whole) = match cgroup_members(self.cgroups) {
            Some(listed) => (listed, false),
            // Each member outside the group signalled once all are proven,
            // its children listed after — and not at all if the signal
            // killed it (see `walk_signalling`).
            None => {
                let listed = walk_signalling(&scope, group, |member| {
                    if Some(member.pgrp) != group {
                        self.deliver_to(rungs, member, None);
                    }
                });
                (listed, true)
            }
        };
        self.deliver(rungs, &listed);
        if let Some(main) = group {
            // Whatever the rungs were (a ladder of stop signals sends no
            // `SIGCONT` of its own).
            // SAFETY: as above.
            unsafe { libc::kill(-(main as libc::pid_t), libc::SIGCONT) };
        }
        (listed, whole)
    }

    /// Sends every signal of `rungs`, in order, to its scope — the members
    /// `listed`, all listed before any of these signals went out (so the
    /// kill's count is exact: a member that dies of the first signal
    /// cannot take unlisted descendants with it) — once per process; then
    /// `SIGCONT` where any of them needs it (a stopped process would hold a
    /// pending signal forever). `SIGKILL` and the stop signals are not
    /// followed by `SIGCONT`.
    ///
    /// The main process's group first, with one `killpg` per signal while
    /// its leader is unreaped (the kernel does not reuse the id of a live
    /// group leader): it reaches the whole group at once, which stops a
    /// fork loop in the group far faster than a per-process sweep
    /// (measured: a fork storm dies in ~25 ms with it, ~400 ms without).
    /// Then every other member through its pidfd, in one pass over the
    /// list.
    pub(super) fn deliver(&mut self, rungs: &[Rung], listed: &[Member]) {
        let main = self.main;
        // Signals this call sends the whole group: every member listed in
        // it was reached. (One that joins the group later is not: a fork
        // does not inherit pending signals. It gets its own.)
        let mut to_group: Vec<i32> = Vec::new();
        if let Some(main) = main {
            for rung in rungs {
                if self.group_signalled.insert(rung.signal) {
                    // SAFETY: kill(2) with a negative pid signals a group.
                    unsafe { libc::kill(-(main as libc::pid_t), rung.signal) };
                    to_group.push(rung.signal);
                }
            }
            if to_group.iter().any(|&s| continues(s)) {
                // SAFETY: as above.
                unsafe { libc::kill(-(main as libc::pid_t), libc::SIGCONT) };
            }
        }
        for member in listed {
            let in_group = Some(member.pgrp) == main;
            self.deliver_to(rungs, member, in_group.then_some(&to_group[..]));
        }
    }

    /// Sends `member` each `Tree` signal of `rungs` it has not had yet —
    /// not those its group got (`to_group`, when it is in the main
    /// process's group) — then `SIGCONT` if one of them needs it.
    fn deliver_to(&mut self, rungs: &[Rung], member: &Member, to_group: Option<&[i32]>) {
        if Some(member.pid) == self.main || member.pid == self.child {
            return;
        }
        let mut cont = false;
        for rung in rungs.iter().filter(|r| r.scope == Scope::Tree) {
            if !self.signalled.insert((member.pid, rung.signal)) {
                continue;
            }
            if to_group.is_some_and(|group| group.contains(&rung.signal)) {
                continue;
            }
            if member.signal(rung.signal) {
                cont |= continues(rung.signal);
            }
        }
        if cont {
            member.signal(libc::SIGCONT);
        }
    }

    /// Sends `signal` to the main process's group and to every member of
    /// the tree (the forced end: no `SIGCONT`, none is needed; no memory of
    /// who got it, every round sends it again to whatever is left). With a
    /// cgroup v2 of the session's own, `SIGKILL` is its `cgroup.kill`.
    pub(super) fn force(&mut self, signal: i32) {
        let group = self.main;
        if let Some(main) = group {
            // SAFETY: kill(2) with a negative pid signals a group.
            unsafe { libc::kill(-(main as libc::pid_t), signal) };
        }
        if signal == libc::SIGKILL && self.cgroup_killed() {
            return;
        }
        // After `cgroup.kill`, what the walk finds had left the cgroup:
        // killed here, and counted (the kill's listing was the cgroup's).
        let count = self.cgroups.kills() > 0;
        let (main, child) = (self.main, self.child);
        let doomed = &mut *self.doomed;
        let mut walked = Vec::new();
        walk(&self.scope, |member| {
            if count && Some(member.pid) != main && member.pid != child {
                doomed.insert(member.pid);
            }
            walked.push(member.pid);
            if Some(member.pgrp) != group {
                member.signal(signal);
            }
        });
        // What the walk still finds after `cgroup.kill` had left the
        // cgroup: noted as having left the session's limits.
        if count {
            self.cgroups.note_escapes(&walked);
        }
    }

    /// Sends one signal to the main process's group now, outside any kill
    /// (a `Signal` request), and to the rest of the tree if `scope` says.
    pub(super) fn signal_now(&mut self, signal: i32, scope: Scope) {
        let group = self.main;
        let cont = continues(signal);
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
        if signal == libc::SIGKILL && self.cgroup_killed() {
            return;
        }
        walk(&self.scope, |member| {
            if Some(member.pgrp) != group && member.signal(signal) && cont {
                member.signal(libc::SIGCONT);
            }
        });
    }
}

impl Delivery<'_> {
    /// Whether no process alive in `listed` (the namespace init aside)
    /// will act on the gentle signals of `rungs`: each ignores every one
    /// that reaches it (`SIG_IGN`, read from its status through its
    /// pidfd; a handler or a block is not an ignore). Then waiting out the
    /// grace changes nothing: an interactive `bash` ignores `SIGTERM`, and
    /// every kill of a session running one waited the whole grace (2.0 s
    /// in a port of an agent's registry). A process that sets `SIG_IGN`
    /// after its signal arrived is killed early — it had said it would
    /// not act on it — and one that drops the ignore only gets the grace
    /// back at the next look.
    ///
    /// Only a kill — a gentle rung to the whole tree — is hurried so. An
    /// interrupt (`SIGINT`/`SIGQUIT` to the command's group, a forwarded
    /// Ctrl-C) is not: what ignores it (a shell's background jobs do) gets
    /// `SIGTERM` and its grace when the main process exits; hurried, it got
    /// `SIGKILL` instead (a test's `TERM` handler never ran, 2 of 3 runs).
    /// Nor is a member no gentle signal reached: it has said nothing.
    pub(super) fn none_will_act(&self, rungs: &[Rung], listed: &[Member]) -> bool {
        if !rungs.iter().any(|r| r.scope == Scope::Tree) {
            return false;
        }
        listed
            .iter()
            .filter(|member| Some(member.pid) != self.init)
            .all(|member| {
                let in_group = self.main.is_some() && Some(member.pgrp) == self.main;
                let reached: Vec<i32> = rungs
                    .iter()
                    .filter(|r| r.scope == Scope::Tree || in_group)
                    .map(|r| r.signal)
                    .collect();
                !reached.is_empty() && member.ignores_all(&reached)
            })
    }

    /// `SIGKILL` through the session's own cgroup v2, if it has one: every
    /// process in it in one write, forks racing the kill included (3,000
    /// processes: see the fork-storm bench). `true` when that is all this
    /// round needs: the per-process walk is then only for what left the
    /// cgroup, so it waits until the cgroup is empty (a walk of thousands
    /// of dying processes costs more than their deaths), and the first
    /// kill's dead are reaped before anyone walks (a walk lists every
    /// zombie not reaped yet).
    fn cgroup_killed(&mut self) -> bool {
        self.cgroups.kill()
            && (self.cgroups.kills() == 1 || self.cgroups.populated() != Some(false))
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
