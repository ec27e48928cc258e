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
//!    main process's zombie, see `keeper.rs`) until the tree is empty: the
//!    kernel hands out no pid that is a live group's or session's id, and
//!    none that a zombie holds, so no other process can form a group or
//!    session with that id meanwhile;
//! 4. its spawn tag (`TETHER_SPAWN`, read through `kern.procargs2`) names
//!    the session — reparented daemons that left the group still carry it.
//!
//! So a descendant escapes only if, before any scan sees it, it both
//! leaves the group and session (`setsid`, or `setpgid` into another
//! group) *and* runs with an environment without the tag (`env -i`, or an
//! exec that drops it) — or if the kernel withholds its environment
//! (a process it marks restricted, `CS_RESTRICT`) after it left the group.

use std::collections::{HashMap, HashSet};

use super::records::{Environment, Kinfo, parse_procargs, tag_in};
use super::sysctl;

/// A process named by pid and start time: what a member is remembered by.
pub(crate) type Identity = (u32, u64);

fn identity(k: &Kinfo) -> Identity {
    (k.pid, k.start_us)
}

/// What one session's scans have learnt, so later scans neither lose a
/// member nor read every process's arguments again (a kill sweeps every
/// 5 ms; an environment read copies pages of the target's stack).
#[derive(Debug, Default)]
pub(crate) struct Memo {
    /// Every member seen so far.
    members: HashSet<Identity>,
    /// Whether the spawn tag of a process names the session, by identity.
    tagged: HashMap<Identity, bool>,
    /// Whether the main process leads a session of its own, once seen
    /// alive (`getsid` fails for a zombie). Until known, every process's
    /// session is looked at; once known not to, none is: then no process
    /// can be in a session with the group's id.
    leads_session: Option<bool>,
}

/// The bounds of one session's tree.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds<'a> {
    /// The keeper: the root of the parent chain.
    pub keeper: u32,
    /// The command's process group (and, if it leads one, session) id: the
    /// main process's pid, held by the keeper.
    pub group: u32,
    /// The session id in the spawn tag.
    pub session: &'a str,
}

/// The live members of the tree in `procs` (a snapshot of the whole
/// table), by the rules in the module docs. The keeper itself is never
/// one. `memo` carries what earlier scans of the same session learnt.
pub(crate) fn members(procs: &[Kinfo], bounds: &Bounds<'_>, memo: &mut Memo) -> Vec<Kinfo> {
    let me_uid = nix::unistd::getuid().as_raw();
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
        memo.leads_session = sysctl::session_of(bounds.group).map(|sid| sid == bounds.group);
    }
    let check_session = memo.leads_session != Some(false);
    let mut buf = Vec::new();
    let mut found = Vec::new();
    for p in procs {
        if p.pid == bounds.keeper || p.pid == 0 || p.has_exited() {
            continue;
        }
        let id = identity(p);
        let member = memo.members.contains(&id)
            || below_keeper.contains(&p.pid)
            || p.pgrp == bounds.group
            || (check_session && sysctl::session_of(p.pid) == Some(bounds.group))
            || tag_names_session(p, bounds.session, me_uid, memo, &mut buf);
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

/// Whether `p`'s spawn tag names `session`, read once per identity. Only
/// our own processes' arguments can be read (root reads everyone's).
fn tag_names_session(
    p: &Kinfo,
    session: &str,
    me_uid: u32,
    memo: &mut Memo,
    buf: &mut Vec<u8>,
) -> bool {
    if session.is_empty() || (p.ruid != me_uid && me_uid != 0) {
        return false;
    }
    if let Some(&known) = memo.tagged.get(&identity(p)) {
        return known;
    }
    let tagged = match sysctl::procargs(p.pid, buf) {
        Ok(area) => match parse_procargs(area).map(|args| args.env) {
            Some(Environment::Strings(env)) => tag_in(&env).is_some_and(|t| t.session == session),
            _ => false,
        },
        Err(_) => false,
    };
    // The read is of whatever has this pid now: only if it still is `p`
    // (same start time) is the answer `p`'s.
    let same =
        sysctl::proc_of(p.pid).is_ok_and(|now| now.is_some_and(|n| n.start_us == p.start_us));
    if same {
        memo.tagged.insert(identity(p), tagged);
    }
    tagged && same
}
