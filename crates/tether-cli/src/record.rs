//! `tether run`'s entry in the ledger: its owner and its one session.
//!
//! Best effort: a run whose ledger cannot be written still runs (its
//! processes carry spawn tags, which is what `tether ps` and `tether reap`
//! need most), and says why once on stderr.

use std::ffi::OsString;
use std::path::Path;

use tether::{Child, ExitStatus, Install, SessionId};
use tether_ledger::{Ledger, LedgerError, Outcome, OwnerId, OwnerRecord, SessionStart};

/// Owner purpose recorded for `tether run`.
const OWNER_PURPOSE: &str = "run";

/// The ledger rows of one `tether run`, to be finished when it ends.
pub struct RunRecord(Option<(Ledger, OwnerId, SessionId)>);

impl RunRecord {
    /// Registers this process as owner and `child` as its session.
    pub fn start(
        child: &Child,
        purpose: &str,
        command: &[OsString],
        cwd: Option<&Path>,
    ) -> RunRecord {
        let command: Vec<String> = command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let started = (|| -> Result<_, LedgerError> {
            let install = Install::from_env();
            let mut ledger = Ledger::open(&install)?;
            let owner = OwnerRecord::current(&install, OWNER_PURPOSE).map_err(|source| {
                LedgerError::Io {
                    path: "/proc/self".into(),
                    source,
                }
            })?;
            let owner = ledger.register_owner(&owner)?;
            let mut session = SessionStart::of_child(child, purpose, &command);
            session.cwd = cwd.map(Path::to_path_buf);
            ledger.record_session_start(owner, &session)?;
            Ok((ledger, owner, child.session_id().clone()))
        })();
        match started {
            Ok(rows) => RunRecord(Some(rows)),
            Err(e) => {
                warn(&e);
                RunRecord(None)
            }
        }
    }

    /// Records how the session ended and that the owner is done.
    pub fn finish(self, status: &ExitStatus) {
        let Some((mut ledger, owner, session)) = self.0 else {
            return;
        };
        let done = ledger
            .record_session_end(&session, Outcome::of_status(status))
            .and_then(|_| ledger.record_owner_end(owner));
        if let Err(e) = done {
            warn(&e);
        }
    }
}

fn warn(e: &LedgerError) {
    eprintln!("tether: warning: this run is not in the ledger: {e}");
}
