//! Rebuilding a quarantined ledger's live entries from spawn tags.
//!
//! Every tagged process of the install names its owner and session, so the
//! owners and sessions that still have live processes can be recreated:
//! owner identity from the tag (and the live owner's pidfd, when it is
//! alive), session purpose from its processes' tags, keeper identity from
//! the process tagged `keeper`. What only the lost store knew — exit
//! statuses, commands of sessions that ended — stays in the quarantined
//! file for a person to inspect.

use tether::{ProcessIdentity, SessionId};

use crate::proof::{OwnerStatus, Prover};
use crate::records::{OwnerRecord, SessionStart, bounded_argv};
use crate::scan::{Scan, TaggedProcess, argv_of};

/// Purpose written for a rebuilt owner: tags do not say what kind of owner
/// spawned them.
pub const UNKNOWN_PURPOSE: &str = "unknown";

/// One owner to recreate, with its sessions.
pub(crate) type Rebuilt = (OwnerRecord, Vec<SessionStart>);

/// Scans the process table for the install's live owners and sessions, as
/// records for the store to write.
pub(crate) fn rebuild(install: &str) -> Vec<Rebuilt> {
    let scan = Scan::take();
    let mut prover = Prover::new(&[]);
    let boot = prover.boot_id().to_owned();
    let uid = tether::sys::current_uid();
    let mut out = Vec::new();
    for (key, by_session) in scan.by_owner(install) {
        let alive = prover.owner_status(key) == OwnerStatus::Alive;
        let live = alive
            .then(|| ProcessIdentity::of_pid(key.pid).ok())
            .flatten()
            .filter(|id| id.start_time == key.start_time);
        let record = OwnerRecord {
            identity: live.unwrap_or(ProcessIdentity {
                boot_id: boot.clone(),
                pid: key.pid,
                start_time: key.start_time,
                pidfs_inode: None,
            }),
            install: install.to_owned(),
            purpose: UNKNOWN_PURPOSE.to_owned(),
            argv: if alive {
                bounded_argv(argv_of(key.pid).into_iter())
            } else {
                Vec::new()
            },
            uid,
            started_at_ms: scan.clock.wall_ms(key.start_time),
        };
        let mut sessions = Vec::new();
        for (session, procs) in by_session {
            let Some(id) = SessionId::parse(session) else {
                continue;
            };
            let purpose = procs
                .iter()
                .find(|p| !p.is_keeper())
                .map_or(crate::scan::KEEPER_PURPOSE, |p| p.tag.purpose.as_str());
            let mut start = SessionStart::new(id, purpose);
            start.keeper = procs
                .iter()
                .filter(|p| p.is_keeper())
                .min_by_key(|p| p.start_time)
                .and_then(|p| identity_of(p));
            start.started_at_ms = procs
                .iter()
                .map(|p| scan.clock.wall_ms(p.start_time))
                .min()
                .unwrap_or(start.started_at_ms);
            sessions.push(start);
        }
        out.push((record, sessions));
    }
    out
}

/// The full identity of a scanned process, if it is still the one scanned.
fn identity_of(p: &TaggedProcess) -> Option<ProcessIdentity> {
    ProcessIdentity::of_pid(p.pid)
        .ok()
        .filter(|id| id.start_time == p.start_time)
}
