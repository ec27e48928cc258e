//! Who belongs to a session's tree on macOS, which has no subreaper: an
//! orphan reparents to launchd, so descent from the keeper alone loses it.
//!
//! A live process is a member when any of these holds (cheapest first):
//!
//! 1. it was a member in an earlier scan of this session (the same pid
//!    *and* start time): leaving the group or clearing the environment
//!    later does not make a process any less the command's;
//! 2. its parent chain leads to the keeper (the command and everything
//!    below it whose parents live);
//! 3. it is in the command's process group, or in its session when the
//!    command leads one (`new_session`) — the group's and session's id is
//!    the main process's pid, which the keeper does not free (it holds the
//!    main process's zombie, see `keeper.rs`) until the tree is empty. A
//!    zombie stays in the pid hash and in its group until it is reaped
//!    (XNU `reap_child_locked`), and the kernel hands out no pid that is
//!    in use as a pid, group or session id (`forkproc`), so meanwhile no
//!    other process can get that pid or form a group or session with it;
//! 4. its spawn tag (`TETHER_SPAWN`, read through `kern.procargs2`) names
//!    the session — reparented daemons that left the group still carry it.
//!
//! So a descendant escapes only if, before any scan sees it, it both
//! leaves the group and session (`setsid`, or `setpgid` into another
//! group) *and* runs with an environment without the tag (`env -i`, or an
//! exec that drops it) — or if the kernel withholds its environment
//! (a process it marks restricted, `CS_RESTRICT`) after it left the group.
//!
//! The rules work on a snapshot and ask a [`Probe`] for what a snapshot
//! does not hold (session ids, spawn tags); this file calls no kernel, so
//! it is compiled on every platform and its tests run on Linux too.

use std::collections::{HashMap, HashSet};

use super::macos_records::Kinfo;

/// A process named by pid and start time: what a member is remembered by.
pub(crate) type Identity = (u32, u64);

fn identity(k: &Kinfo) -> Identity {
    (k.pid, k.start_us)
}

/// What the process table snapshot does not say.
pub(crate) trait Probe {
    /// The session id of `pid` now (`None` once it is gone or a zombie).
    fn session_of(&mut self, pid: u32) -> Option<u32>;
    /// Whether the spawn tag in `p`'s environment names `session`: `None`
    /// when that cannot be known now (not ours to read, withheld, a read
    /// that raced with exec or with the pid changing hands).
    fn tag_names(&mut self, p: &Kinfo, session: &str) -> Option<bool>;
}

/// What one session's scans have learnt, so later scans neither lose a
/// member nor read every process's environment again (a kill sweeps every
/// 5 ms; an environment read copies pages of the target's stack).
#[derive(Debug, Default)]
pub(crate) struct Memo {
    /// Every member seen so far.
    members: HashSet<Identity>,
    /// Whether the spawn tag of a process names the session, by identity
    /// (known answers only).
    tagged: HashMap<Identity, bool>,
    /// Whether the main process leads a session of its own, once seen
    /// alive (a zombie has no session to ask about). Until known, every
    /// process's session is looked at; once known not to, none is: no
    /// process can then be in a session with the group's id.
    leads_session: Option<bool>,
}

/// The bounds of one session's tree.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds<'a> {
    /// The keeper: the root of the parent chain, never a member.
    pub keeper: u32,
    /// The command's process group (and, if it leads one, session) id: the
    /// main process's pid, held by the keeper.
    pub group: u32,
    /// The session id in the spawn tag (empty: no tag to look for).
    pub session: &'a str,
}

/// The live members of the tree in `procs` (a snapshot of the whole
/// table), by the rules in the module docs. `memo` carries what earlier
/// scans of the same session learnt.
pub(crate) fn members(
    procs: &[Kinfo],
    bounds: &Bounds<'_>,
    memo: &mut Memo,
    probe: &mut impl Probe,
) -> Vec<Kinfo> {
    let mut children: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, p) in procs.iter().enumerate() {
        if p.pid != p.ppid {
            children.entry(p.ppid).or_default().push(i);
        }
    }
    let mut below_keeper = HashSet::new();
    let mut frontier = vec![bounds.keeper];
    while let Some(parent) = frontier.pop() {
        for &i in children.get(&parent).into_iter().flatten() {
            if below_keeper.insert(procs[i].pid) {
                frontier.push(procs[i].pid);
            }
        }
    }
    if memo.leads_session.is_none() {
        memo.leads_session = probe
            .session_of(bounds.group)
            .map(|sid| sid == bounds.group);
    }
    let check_session = memo.leads_session != Some(false);
    let mut found = Vec::new();
    for p in procs {
        if p.pid == bounds.keeper || p.pid == 0 || p.has_exited() {
            continue;
        }
        let id = identity(p);
        let member = memo.members.contains(&id)
            || below_keeper.contains(&p.pid)
            || p.pgrp == bounds.group
            || (check_session && probe.session_of(p.pid) == Some(bounds.group))
            || tag_names_session(p, bounds.session, memo, probe);
        if member {
            found.push(*p);
        }
    }
    // Forget what is gone; remember every member for the next scan.
    let live: HashSet<Identity> = procs.iter().map(identity).collect();
    memo.members.retain(|id| live.contains(id));
    memo.tagged.retain(|id, _| live.contains(id));
    memo.members.extend(found.iter().map(identity));
    found
}

/// Whether `p`'s spawn tag names `session`, asked once per identity until
/// the probe knows.
fn tag_names_session(p: &Kinfo, session: &str, memo: &mut Memo, probe: &mut impl Probe) -> bool {
    if session.is_empty() {
        return false;
    }
    if let Some(&known) = memo.tagged.get(&identity(p)) {
        return known;
    }
    match probe.tag_names(p, session) {
        Some(tagged) => {
            memo.tagged.insert(identity(p), tagged);
            tagged
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contain::macos_records::test_kinfo;

    const KEEPER: u32 = 100;
    const MAIN: u32 = 200;

    /// Answers from tables; counts the tag reads.
    #[derive(Default)]
    struct Table {
        sessions: HashMap<u32, u32>,
        tags: HashMap<u32, Option<bool>>,
        tag_reads: usize,
    }

    impl Probe for Table {
        fn session_of(&mut self, pid: u32) -> Option<u32> {
            self.sessions.get(&pid).copied()
        }
        fn tag_names(&mut self, p: &Kinfo, _session: &str) -> Option<bool> {
            self.tag_reads += 1;
            self.tags.get(&p.pid).copied().flatten()
        }
    }

    fn bounds() -> Bounds<'static> {
        Bounds {
            keeper: KEEPER,
            group: MAIN,
            session: "abc",
        }
    }

    fn pids(found: &[Kinfo]) -> Vec<u32> {
        let mut pids: Vec<u32> = found.iter().map(|k| k.pid).collect();
        pids.sort();
        pids
    }

    /// The keeper (in its own group), the main process, and processes that
    /// are nothing to the session: launchd's and another group's.
    fn base() -> Vec<Kinfo> {
        vec![
            test_kinfo(1, 0, 1, 1),
            test_kinfo(KEEPER, 50, KEEPER, 10),
            test_kinfo(MAIN, KEEPER, MAIN, 20),
            test_kinfo(900, 1, 900, 5),
            test_kinfo(901, 900, 900, 6),
        ]
    }

    #[test]
    fn descendants_and_the_group_are_members_the_keeper_is_not() {
        let mut procs = base();
        // A child that moved to a group of its own, its child, and an
        // orphan that stayed in the command's group.
        procs.push(test_kinfo(201, MAIN, 201, 30));
        procs.push(test_kinfo(202, 201, 201, 31));
        procs.push(test_kinfo(300, 1, MAIN, 32));
        let mut probe = Table::default();
        let found = members(&procs, &bounds(), &mut Memo::default(), &mut probe);
        assert_eq!(pids(&found), [MAIN, 201, 202, 300]);
    }

    #[test]
    fn escapes_are_found_by_tag_or_session_unless_both_are_gone() {
        let mut procs = base();
        // Orphans in groups of their own: tagged, untagged, unreadable,
        // and one in the command's session.
        procs.push(test_kinfo(400, 1, 400, 40));
        procs.push(test_kinfo(401, 1, 401, 41));
        procs.push(test_kinfo(402, 1, 402, 42));
        procs.push(test_kinfo(403, 1, 403, 43));
        let mut probe = Table::default();
        probe.tags.insert(400, Some(true));
        probe.tags.insert(401, Some(false));
        probe.tags.insert(402, None);
        probe.sessions.insert(MAIN, MAIN);
        probe.sessions.insert(403, MAIN);
        let found = members(&procs, &bounds(), &mut Memo::default(), &mut probe);
        assert_eq!(pids(&found), [MAIN, 400, 403]);
    }

    #[test]
    fn sessions_are_not_asked_about_when_the_command_leads_none() {
        let mut procs = base();
        procs.push(test_kinfo(403, 1, 403, 43));
        let mut probe = Table::default();
        // The main process is in the owner's session; a process claiming
        // the group's id as its session cannot exist, and is not looked at.
        probe.sessions.insert(MAIN, 7);
        probe.sessions.insert(403, MAIN);
        let found = members(&procs, &bounds(), &mut Memo::default(), &mut probe);
        assert_eq!(pids(&found), [MAIN]);
    }

    #[test]
    fn a_member_stays_one_until_its_pid_names_another_process() {
        let mut memo = Memo::default();
        let mut probe = Table::default();
        let mut procs = base();
        procs.push(test_kinfo(500, MAIN, MAIN, 50));
        assert_eq!(
            pids(&members(&procs, &bounds(), &mut memo, &mut probe)),
            [MAIN, 500]
        );
        // It leaves the group, is orphaned and clears its environment.
        procs.pop();
        procs.push(test_kinfo(500, 1, 500, 50));
        probe.tags.insert(500, Some(false));
        assert_eq!(
            pids(&members(&procs, &bounds(), &mut memo, &mut probe)),
            [MAIN, 500]
        );
        // It exits and the pid goes to an unrelated process.
        procs.pop();
        procs.push(test_kinfo(500, 1, 500, 51));
        assert_eq!(
            pids(&members(&procs, &bounds(), &mut memo, &mut probe)),
            [MAIN]
        );
    }

    #[test]
    fn exited_processes_are_not_members() {
        let mut procs = base();
        let mut zombie = test_kinfo(600, 1, MAIN, 60);
        zombie.stat = 5; // SZOMB
        procs.push(zombie);
        let mut exiting = test_kinfo(601, MAIN, MAIN, 61);
        exiting.flag = 0x2000; // P_WEXIT
        procs.push(exiting);
        let found = members(
            &procs,
            &bounds(),
            &mut Memo::default(),
            &mut Table::default(),
        );
        assert_eq!(pids(&found), [MAIN]);
    }

    #[test]
    fn tags_are_read_once_per_process_until_known() {
        let mut memo = Memo::default();
        let mut probe = Table::default();
        let mut procs = base();
        procs.push(test_kinfo(700, 1, 700, 70));
        for pid in [1, 900, 901] {
            probe.tags.insert(pid, Some(false));
        }
        probe.tags.insert(700, None);
        // Launchd, the unrelated pair and 700 are asked (the main process
        // is a member by descent, the keeper never one); then only 700,
        // whose answer is still unknown.
        members(&procs, &bounds(), &mut memo, &mut probe);
        members(&procs, &bounds(), &mut memo, &mut probe);
        assert_eq!(probe.tag_reads, 4 + 1);
        probe.tags.insert(700, Some(true));
        assert_eq!(
            pids(&members(&procs, &bounds(), &mut memo, &mut probe)),
            [MAIN, 700]
        );
        members(&procs, &bounds(), &mut memo, &mut probe);
        assert_eq!(
            probe.tag_reads,
            4 + 1 + 1,
            "known answers are not asked again"
        );
    }
}
