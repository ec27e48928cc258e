//! Processes that tether did not start, registered by themselves: a
//! long-lived backend a desktop launcher started, a server a script left
//! running. Each records its identity, its purpose and its *spawner* — the
//! process it belongs to — so that `tether ps` lists it and `tether reap`
//! can prove it orphaned once the spawner is dead.
//!
//! Two ways in: `tether exec --purpose P -- PROGRAM ARGS…` registers and
//! then `exec`s into the program (same pid, so the registration names the
//! program), stamping a spawn tag that names the spawner on it; and
//! [`register_self`] from inside a program.
//!
//! # What proves a registered process orphaned
//!
//! Only kernel facts of the live process, as everywhere in tether: its
//! **spawn tag** (its environment, fixed at `exec`) must name the spawner,
//! and the spawner must be provably dead by the process table
//! ([`crate::proof`]). The ledger row adds the purpose (an interactive one
//! vetoes reaping), the exact identity (pidfs inode included) and the
//! command and working directory for listings — it never proves anything
//! on its own. So:
//!
//! - `tether exec` processes carry such a tag (it sets one), and are
//!   reaped once the spawner is dead and the purpose is reapable;
//! - a process that calls [`register_self`] carries one if its launcher
//!   stamped it (`TETHER_SPAWN`, e.g. from `tether spawn-tag`); one without
//!   a tag is **listed, never reaped** (its spawner is known only from the
//!   ledger, which is attacker-shaped input);
//! - a process whose tag names another owner than its registration is
//!   reaped only when *both* are provably dead.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;
use tether::{Install, ProcessIdentity, SessionId, SpawnTag};

use crate::clock::Clock;
use crate::error::{LedgerError, Result};
use crate::proof::{OwnerKey, OwnerStatus, Prover, is_interactive};
use crate::records::bounded_argv;
use crate::scan::{Scan, argv_of};

/// Who a registering process belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spawner {
    /// The owner its spawn tag (`TETHER_SPAWN`) names, if it has a valid
    /// one; otherwise its parent process.
    Auto,
    /// The owner its spawn tag names (an error without a valid tag).
    Tag,
    /// Its parent process, as of registration.
    Parent,
    /// This process (identified by whoever passes it on).
    Process(ProcessIdentity),
}

/// Where the recorded spawner came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpawnerSource {
    /// The registered process's spawn tag.
    Tag,
    /// Its parent at registration.
    Parent,
    /// Named by the caller.
    Given,
    /// None could be determined.
    None,
}

impl SpawnerSource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SpawnerSource::Tag => "tag",
            SpawnerSource::Parent => "parent",
            SpawnerSource::Given => "given",
            SpawnerSource::None => "none",
        }
    }

    pub(crate) fn parse(s: &str) -> SpawnerSource {
        match s {
            "tag" => SpawnerSource::Tag,
            "parent" => SpawnerSource::Parent,
            "given" => SpawnerSource::Given,
            _ => SpawnerSource::None,
        }
    }
}

/// A registration as written: one process, its purpose and spawner.
#[derive(Clone, Debug)]
pub struct RegistrationRecord {
    /// The registered process.
    pub identity: ProcessIdentity,
    /// The install whose ledger it is written to.
    pub install: String,
    /// What it is for (`serve`, `backend`, `chat`, …; interactive purposes
    /// are never reaped).
    pub purpose: String,
    /// Its first arguments (bounded).
    pub argv: Vec<String>,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// Its real uid.
    pub uid: u32,
    /// The process it belongs to.
    pub spawner: Option<ProcessIdentity>,
    /// Where that came from.
    pub spawner_source: SpawnerSource,
    /// The session of the spawn tag it carries (or will carry, after
    /// `tether exec`'s `exec`).
    pub session: Option<String>,
}

/// A registration as read back.
#[derive(Clone, Debug)]
pub struct RegistrationRow {
    /// Row id.
    pub id: i64,
    /// Install id.
    pub install: String,
    /// The registered process.
    pub identity: ProcessIdentity,
    /// Real uid.
    pub uid: u32,
    /// Purpose.
    pub purpose: String,
    /// Leading arguments.
    pub argv: Vec<String>,
    /// Working directory.
    pub cwd: Option<String>,
    /// Its spawner.
    pub spawner: Option<ProcessIdentity>,
    /// Where that came from.
    pub spawner_source: SpawnerSource,
    /// Its tag's session.
    pub session: Option<String>,
    /// When it registered, Unix ms.
    pub registered_at_ms: u64,
}

/// What [`register_self`] recorded.
#[derive(Clone, Debug)]
pub struct Registration {
    /// The record written.
    pub record: RegistrationRecord,
    /// Whether `tether reap` can act on it: it carries a spawn tag of this
    /// install naming its spawner (see the module docs). `false` means it
    /// is listed, never reaped.
    pub reapable: bool,
}

/// Registers the calling process in the ledger of the install the
/// environment names, with `purpose` and `spawner`. Idempotent: registering
/// again replaces the row. Rows of processes that are gone are pruned.
///
/// # Errors
/// [`LedgerError::Spawner`] if the spawner cannot be determined as asked
/// (no valid tag for [`Spawner::Tag`], the parent vanished), or
/// [`LedgerError::InvalidPurpose`]; and the ledger's own errors.
pub fn register_self(purpose: &str, spawner: Spawner) -> Result<Registration> {
    let install = Install::from_env();
    let record = RegistrationRecord::current(&install, purpose, &spawner)?;
    let tag = own_tag();
    let reapable = tag.as_ref().is_some_and(|t| {
        t.install == install.id()
            && record
                .spawner
                .as_ref()
                .is_some_and(|s| s.pid == t.owner_pid && s.start_time == t.owner_start)
    });
    let mut ledger = crate::Ledger::open_to_record(&install)?;
    ledger.register_process(&record)?;
    Ok(Registration { record, reapable })
}

/// This process's spawn tag (`TETHER_SPAWN`), if valid.
fn own_tag() -> Option<SpawnTag> {
    std::env::var(tether::SPAWN_TAG_VAR).ok()?.parse().ok()
}

impl RegistrationRecord {
    /// The calling process, registering with `purpose`, its spawner
    /// resolved as `spawner` says. The session is the one of its spawn tag,
    /// if it has one.
    ///
    /// # Errors
    /// As [`register_self`].
    pub fn current(
        install: &Install,
        purpose: &str,
        spawner: &Spawner,
    ) -> Result<RegistrationRecord> {
        // The purpose goes into the program's spawn tag: validated as the
        // tag validates it.
        if SpawnTag::new(install.id(), purpose, 1, 1, "x").is_err() {
            return Err(LedgerError::InvalidPurpose {
                purpose: purpose.to_owned(),
            });
        }
        let identity = ProcessIdentity::current().map_err(|source| LedgerError::Io {
            path: "(this process)".into(),
            source,
        })?;
        let (spawner, spawner_source) = resolve(spawner, &identity)?;
        Ok(RegistrationRecord {
            install: install.id().to_owned(),
            purpose: purpose.to_owned(),
            argv: bounded_argv(std::env::args_os().map(|a| a.to_string_lossy().into_owned())),
            cwd: std::env::current_dir().ok(),
            uid: tether::sys::current_uid(),
            spawner,
            spawner_source,
            session: own_tag().map(|t| t.session),
            identity,
        })
    }

    /// Records `command` as the process's command line (bounded like an
    /// owner's): what `tether exec` is about to become.
    pub fn set_command(&mut self, command: impl IntoIterator<Item = String>) {
        self.argv = bounded_argv(command.into_iter());
    }

    /// The spawn tag a program exec'd into this registration should carry:
    /// this install, the purpose, the spawner as owner, and `session` —
    /// what `tether exec` stamps on the program. `None` without a spawner.
    pub fn tag(&self, session: &SessionId) -> Option<SpawnTag> {
        let spawner = self.spawner.as_ref()?;
        SpawnTag::new(
            &self.install,
            &self.purpose,
            spawner.pid,
            spawner.start_time,
            session.as_str(),
        )
        .ok()
    }
}

/// Resolves a [`Spawner`] for the process `me`.
fn resolve(
    spawner: &Spawner,
    me: &ProcessIdentity,
) -> Result<(Option<ProcessIdentity>, SpawnerSource)> {
    let err = |reason: String| LedgerError::Spawner { reason };
    match spawner {
        Spawner::Process(identity) => Ok((Some(identity.clone()), SpawnerSource::Given)),
        Spawner::Tag => match own_tag() {
            Some(tag) => Ok((Some(tag_owner(&tag, me)?), SpawnerSource::Tag)),
            None => Err(err(format!(
                "{} is not set to a valid spawn tag",
                tether::SPAWN_TAG_VAR
            ))),
        },
        Spawner::Parent => parent(me).map(|p| (Some(p), SpawnerSource::Parent)),
        Spawner::Auto => match own_tag() {
            Some(tag) => Ok((Some(tag_owner(&tag, me)?), SpawnerSource::Tag)),
            None => parent(me).map(|p| (Some(p), SpawnerSource::Parent)),
        },
    }
}

/// The owner a tag names: the live process with its pid and start time,
/// read through a pidfd (so with its pidfs inode where the kernel has one).
///
/// A tag naming an owner that is not alive is refused, as `--spawner` with
/// a gone pid is: a registration under a dead spawner is an orphan from its
/// first instruction, and the next `tether reap` would kill the program
/// just started (issue 16: `TETHER_SPAWN` from `$(sh -c 'tether
/// spawn-tag …')` names the subshell, gone before `tether exec` runs); so
/// is owner pid 0, which names no process. Inside a pid
/// namespace that cannot see the owner the tag's pid cannot be checked
/// either: pass the spawner explicitly there.
fn tag_owner(tag: &SpawnTag, me: &ProcessIdentity) -> Result<ProcessIdentity> {
    let named = ProcessIdentity {
        boot_id: me.boot_id.clone(),
        pid: tag.owner_pid,
        start_time: tag.owner_start,
        pidfs_inode: None,
    };
    let refuse = |why: String| LedgerError::Spawner {
        reason: format!(
            "{} names owner {} (started at {}), which {why}; set it to a live owner's tag or \
             name the spawner with --spawner",
            tether::SPAWN_TAG_VAR,
            tag.owner_pid,
            tag.owner_start
        ),
    };
    match ProcessIdentity::of_pid(named.pid) {
        Ok(live) if live.matches(&named) => Ok(live),
        Ok(live) => Err(refuse(format!(
            "is gone: its pid now names a process started at {}",
            live.start_time
        ))),
        Err(e) => Err(refuse(format!("is gone ({e})"))),
    }
}

/// The parent of `me` ([`ProcessIdentity::parent`]).
fn parent(_me: &ProcessIdentity) -> Result<ProcessIdentity> {
    ProcessIdentity::parent().map_err(|e| LedgerError::Spawner {
        reason: format!("cannot identify the parent: {e}"),
    })
}

/// A registration that names a live process of this user, and what `tether
/// reap` would make of it — what `tether ps` lists.
#[derive(Clone, Debug, Serialize)]
pub struct RegisteredEntry {
    /// Pid.
    pub pid: u32,
    /// Start time, clock ticks since boot.
    pub start_time: u64,
    /// Age in milliseconds.
    pub age_ms: u64,
    /// Purpose as registered.
    pub purpose: String,
    /// Command line (live).
    pub command: String,
    /// Working directory when it registered.
    pub cwd: Option<String>,
    /// Its spawner, and whether that is alive.
    pub spawner: Option<SpawnerEntry>,
    /// The session of the spawn tag it carries, if it carries one.
    pub session: Option<String>,
    /// What `tether reap` would do with it.
    pub reap: RegisteredReap,
}

/// A registered process's spawner.
#[derive(Clone, Debug, Serialize)]
pub struct SpawnerEntry {
    /// Pid.
    pub pid: u32,
    /// Start time.
    pub start_time: u64,
    /// Alive, dead (with the proof) or unknown — from the live process
    /// table.
    pub status: OwnerStatus,
    /// Where it was taken from at registration.
    pub source: SpawnerSource,
}

/// What `tether reap` makes of a registered process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RegisteredReap {
    /// Its spawner is provably dead and its purpose reapable: an orphan.
    Orphan,
    /// Its spawner lives.
    SpawnerAlive,
    /// Its spawner's death cannot be proven.
    SpawnerUnknown {
        /// Why not.
        reason: String,
    },
    /// Its purpose is interactive: never reaped.
    Interactive,
    /// It carries no spawn tag of this install naming its spawner: its
    /// spawner is known only from the ledger, which never proves an
    /// orphan. Listed, never reaped.
    NoTag,
    /// `tether exec` registered it and has not yet become the program: the
    /// tag arrives with that exec (a fraction of a millisecond later).
    /// Listed, never reaped.
    Starting,
    /// It registered without a spawner.
    NoSpawner,
}

impl std::fmt::Display for RegisteredReap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegisteredReap::Orphan => f.write_str("orphaned: `tether reap` kills it"),
            RegisteredReap::SpawnerAlive => f.write_str("spawner alive"),
            RegisteredReap::SpawnerUnknown { reason } => write!(f, "spawner unknown: {reason}"),
            RegisteredReap::Interactive => f.write_str("interactive purpose: never reaped"),
            RegisteredReap::NoTag => f.write_str(
                "no spawn tag naming its spawner: listed, never reaped (start it with `tether exec`)",
            ),
            RegisteredReap::Starting => {
                f.write_str("starting: `tether exec` has not yet become the program")
            }
            RegisteredReap::NoSpawner => f.write_str("no spawner recorded: never reaped"),
        }
    }
}

/// The registrations of `install` whose process is alive now (exact
/// identity, this user), with what `tether reap` would make of each.
pub(crate) fn live_entries(
    install: &str,
    rows: &[RegistrationRow],
    scan: &Scan,
    prover: &mut Prover,
) -> Vec<RegisteredEntry> {
    let uid = tether::sys::current_uid();
    let mut out = Vec::new();
    for row in rows.iter().filter(|r| r.install == install && r.uid == uid) {
        if !is_live(row) {
            continue;
        }
        let tag = scan.get(row.identity.pid).map(|p| &p.tag);
        let spawner = row.spawner.as_ref().map(|s| SpawnerEntry {
            pid: s.pid,
            start_time: s.start_time,
            status: if s.boot_id == prover.boot_id() {
                prover.owner_status(key(s))
            } else {
                OwnerStatus::Dead {
                    proof: crate::DeathProof::EarlierBoot,
                }
            },
            source: row.spawner_source,
        });
        let argv = argv_of(row.identity.pid);
        // The scan may have read the environment just before `tether exec`
        // became the program (no tag yet) and `argv`, read after it, be
        // the program's: read the tag again, after `argv`, from that very
        // process (still alive as the row's identity once read).
        let fresh =
            if !tag.is_some_and(|t| names_spawner(row, t)) && !is_exec_not_yet_done(row, &argv) {
                tether::sys::spawn_tag(row.identity.pid).filter(|_| row.identity.is_alive())
            } else {
                None
            };
        let tag = fresh.as_ref().or(tag);
        let reap = judge(row, tag, spawner.as_ref(), &argv);
        out.push(RegisteredEntry {
            pid: row.identity.pid,
            start_time: row.identity.start_time,
            age_ms: Clock::now().age_ms(row.identity.start_time),
            purpose: row.purpose.clone(),
            command: argv.join(" "),
            cwd: row.cwd.clone(),
            spawner,
            session: tag.map(|t| t.session.clone()),
            reap,
        });
    }
    out.sort_by_key(|e| (e.start_time, e.pid));
    out
}

/// `argv` is the process's live command line.
fn judge(
    row: &RegistrationRow,
    tag: Option<&SpawnTag>,
    spawner: Option<&SpawnerEntry>,
    argv: &[String],
) -> RegisteredReap {
    if is_interactive(&row.purpose) {
        return RegisteredReap::Interactive;
    }
    let Some(spawner) = spawner else {
        return RegisteredReap::NoSpawner;
    };
    if !tag.is_some_and(|t| names_spawner(row, t)) {
        return if is_exec_not_yet_done(row, argv) {
            RegisteredReap::Starting
        } else {
            RegisteredReap::NoTag
        };
    }
    if tag.is_some_and(|t| is_interactive(&t.purpose)) {
        return RegisteredReap::Interactive;
    }
    match &spawner.status {
        OwnerStatus::Alive => RegisteredReap::SpawnerAlive,
        OwnerStatus::Unknown { reason } => RegisteredReap::SpawnerUnknown {
            reason: reason.clone(),
        },
        OwnerStatus::Dead { .. } => RegisteredReap::Orphan,
    }
}

/// Whether `tag` is of the row's install and names the row's spawner.
fn names_spawner(row: &RegistrationRow, tag: &SpawnTag) -> bool {
    row.spawner.as_ref().is_some_and(|spawner| {
        tag.install == row.install
            && tag.owner_pid == spawner.pid
            && tag.owner_start == spawner.start_time
    })
}

/// Whether `argv` is still the `tether exec` that registered the row, not
/// yet the program it recorded: `tether exec` writes the row, then execs
/// the program with its tag, so between the two the process runs
/// `tether … exec … PROGRAM ARGS` without a tag. (Once the program runs,
/// its argv is the recorded one; the test is on the live process's own
/// command line, so it can only ever turn "no tag" into "starting", both
/// of which are listed and never reaped.)
fn is_exec_not_yet_done(row: &RegistrationRow, argv: &[String]) -> bool {
    let Some(exec) = argv.iter().skip(1).position(|a| a == "exec") else {
        return false;
    };
    (exec + 2..argv.len())
        .any(|i| crate::records::bounded_argv(argv[i..].iter().cloned()) == row.argv)
}

/// Whether the row's process is alive and is that very process (pid, start
/// time and — when recorded — pidfs inode), running as this user.
fn is_live(row: &RegistrationRow) -> bool {
    row.identity.is_alive() && tether::sys::real_uid(row.identity.pid).is_ok_and(|u| u == row.uid)
}

fn key(identity: &ProcessIdentity) -> OwnerKey {
    OwnerKey {
        pid: identity.pid,
        start_time: identity.start_time,
    }
}

/// What the reaper must also respect for a tagged process that registered:
/// its registered purpose and spawner, by `(pid, start time)`.
pub(crate) fn by_process(rows: &[RegistrationRow]) -> HashMap<(u32, u64), &RegistrationRow> {
    rows.iter()
        .map(|r| ((r.identity.pid, r.identity.start_time), r))
        .collect()
}

/// Registrations of live processes with no spawn tag naming their spawner,
/// as what the reaper left alone: listed, never signalled.
pub(crate) fn untagged_skips(install: &str, rows: &[RegistrationRow]) -> Vec<crate::Skipped> {
    let uid = tether::sys::current_uid();
    rows.iter()
        .filter(|r| r.install == install && r.uid == uid && is_live(r))
        .filter(|r| {
            let tag = tether::sys::spawn_tag(r.identity.pid);
            !tag.is_some_and(|t| {
                t.install == r.install
                    && r.spawner
                        .as_ref()
                        .is_some_and(|s| t.owner_pid == s.pid && t.owner_start == s.start_time)
            })
        })
        .map(|r| crate::Skipped {
            pid: r.identity.pid,
            session: r.session.clone().unwrap_or_default(),
            purpose: r.purpose.clone(),
            command: argv_of(r.identity.pid).join(" "),
            reason: crate::SkipReason::RegisteredWithoutTag,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(argv: &[&str]) -> RegistrationRow {
        let process = |pid| ProcessIdentity {
            boot_id: "boot".into(),
            pid,
            start_time: 7,
            pidfs_inode: None,
        };
        RegistrationRow {
            id: 1,
            install: "install".into(),
            identity: process(200),
            uid: 1000,
            purpose: "backend".into(),
            argv: argv.iter().map(|a| a.to_string()).collect(),
            cwd: None,
            spawner: Some(process(100)),
            spawner_source: SpawnerSource::Parent,
            session: None,
            registered_at_ms: 0,
        }
    }

    fn spawner_alive() -> SpawnerEntry {
        SpawnerEntry {
            pid: 100,
            start_time: 7,
            status: OwnerStatus::Alive,
            source: SpawnerSource::Parent,
        }
    }

    fn strings(argv: &[&str]) -> Vec<String> {
        argv.iter().map(|a| a.to_string()).collect()
    }

    /// Caught by a fresh-clone CI run: the scan (taken first) read the
    /// environment of a `tether exec` that had not yet become the program
    /// (no tag), and its argv, read after, was the program's: "no tag",
    /// for a process started exactly as it should be. Here the scan is
    /// empty, as it was then; the real process carries the tag.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_scan_taken_before_the_exec_does_not_hide_the_tag() {
        let me = ProcessIdentity::of_pid(std::process::id()).unwrap();
        let install = "0123456789abcdef";
        let tag = SpawnTag::new(install, "backend", me.pid, me.start_time, "registered-0").unwrap();
        /// Killed and reaped however the test ends.
        struct Killed(std::process::Child);
        impl Drop for Killed {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let child = Killed(
            std::process::Command::new("sleep")
                .arg("1000")
                .env(tether::SPAWN_TAG_VAR, tag.to_string())
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        let pid = child.0.id();
        // Its exec is done (the environment in place) once its argv says
        // `sleep`: nothing to wait on for that, so looked at again, bounded.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while argv_of(pid) != ["sleep", "1000"] {
            assert!(std::time::Instant::now() < deadline, "{:?}", argv_of(pid));
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let registered = RegistrationRow {
            install: install.into(),
            identity: ProcessIdentity::of_pid(pid).unwrap(),
            uid: tether::sys::current_uid(),
            spawner: Some(me),
            ..row(&["sleep", "1000"])
        };
        let before_the_exec = Scan {
            processes: Vec::new(),
            unattributable: Vec::new(),
            scanned: 0,
            clock: Clock::now(),
        };
        let entries = live_entries(
            install,
            &[registered],
            &before_the_exec,
            &mut Prover::new(&[]),
        );
        drop(child);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].session.as_deref(), Some("registered-0"));
        assert_ne!(entries[0].reap, RegisteredReap::NoTag);
    }

    /// Caught by a fresh-clone CI run: `ps` read a registration `tether
    /// exec` had just written, before it became the program (no tag yet),
    /// and called it "no tag" — a registered process's only state that
    /// says "start it with `tether exec`", which it was.
    #[test]
    fn a_registration_before_tether_exec_became_the_program_is_starting() {
        let row = row(&["sleep", "1000"]);
        let spawner = spawner_alive();
        let before = strings(&[
            "tether",
            "exec",
            "--purpose",
            "backend",
            "--",
            "sleep",
            "1000",
        ]);
        assert_eq!(
            judge(&row, None, Some(&spawner), &before),
            RegisteredReap::Starting
        );
        // Without `--`, and with a path to tether.
        let before = strings(&[
            "/usr/bin/tether",
            "exec",
            "--purpose=backend",
            "sleep",
            "1000",
        ]);
        assert_eq!(
            judge(&row, None, Some(&spawner), &before),
            RegisteredReap::Starting
        );
        // After the exec, a program without the tag is what it always was.
        let after = strings(&["sleep", "1000"]);
        assert_eq!(
            judge(&row, None, Some(&spawner), &after),
            RegisteredReap::NoTag
        );
        // Another `tether exec` (another program) is not this one starting.
        let other = strings(&[
            "tether",
            "exec",
            "--purpose",
            "backend",
            "--",
            "sleep",
            "2000",
        ]);
        assert_eq!(
            judge(&row, None, Some(&spawner), &other),
            RegisteredReap::NoTag
        );
    }

    #[test]
    fn a_long_command_line_is_compared_as_it_was_recorded() {
        let long: Vec<String> = (0..40).map(|i| format!("a{i}")).collect();
        let mut row = row(&[]);
        row.argv = crate::records::bounded_argv(long.iter().cloned());
        let mut before = strings(&["tether", "exec", "--purpose", "backend", "--"]);
        before.extend(long);
        assert_eq!(
            judge(&row, None, Some(&spawner_alive()), &before),
            RegisteredReap::Starting
        );
    }
}
