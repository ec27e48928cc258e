//! Starting a command on Unix: a keeper (warm or fresh) gets the spec and
//! the three stdio descriptors, and answers with the command's identity or
//! why it could not start.

use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::discovery::keeper_path;
use super::link::KeeperLink;
use super::protocol::{Event, Request, Rung, Scope, SetupSpec, SpawnSpec, SpawnStage};
use super::tree::{Tree, millis};
use crate::contain::{ChildIo, Ladder, SpawnPlan, Spawned};
use crate::error::{Error, Result};
use crate::identity::ProcessIdentity;
use crate::spawn_tag::SpawnTag;

/// Starts a keeper for this process's next spawn now, tagged as
/// `install`'s and `session`'s (see [`crate::start_keeper_ahead`]).
pub(crate) fn start_keeper_ahead(
    install: &crate::install::Install,
    session: &crate::session_id::SessionId,
) -> Result<()> {
    let keeper = keeper_path()?;
    let (owner_pid, owner_start) = super::owner_identity();
    let tag = SpawnTag::new(
        install.id(),
        "keeper",
        owner_pid,
        owner_start,
        session.as_str(),
    )?;
    super::pool::start_ahead(&keeper, &tag.to_string())
}

/// Starts `plan` with stdio `[stdin, stdout, stderr]`. Returns once the
/// command's exec succeeded, or the precise reason it did not.
pub(crate) fn spawn(plan: SpawnPlan, stdio: [&ChildIo; 3]) -> Result<Spawned> {
    if plan.containment == crate::containment::ContainmentPolicy::Uncontained {
        return Err(Error::ContainmentUnavailable {
            requested: "none",
            reason:
                "on Unix the keeper always contains the tree (uncontained runs are Windows-only)"
                    .into(),
        });
    }
    let mut keeper = keeper_path()?;
    let spec = spec_of(&plan)?;
    let (pty, [(stdin_fd, stdin), (stdout_fd, stdout), (stderr_fd, stderr)]) = match plan.pty {
        // The slave is all three streams; the keeper's child makes it the
        // controlling terminal (see `pty.rs` for why it is opened here).
        Some(size) => {
            let (pty, slave) = super::pty::Pty::open(size)?;
            let copy = || slave.try_clone().map(|fd| (fd, None));
            let streams = [copy()?, copy()?, (slave, None)];
            (Some(pty), streams)
        }
        None => (
            None,
            [
                super::stdio::open(stdio[0], 0)?,
                super::stdio::open(stdio[1], 1)?,
                super::stdio::open(stdio[2], 2)?,
            ],
        ),
    };
    let keeper_tag = SpawnTag {
        purpose: "keeper".to_owned(),
        ..plan.tag.clone()
    }
    .to_string();
    let (mut link, warm) = match &plan.keeper_hook {
        Some(hook) => (KeeperLink::start_hooked(&keeper, &keeper_tag, hook)?, false),
        None => super::pool::take(&keeper, &keeper_tag)?,
    };
    // The three streams, then the descriptors passed on (`SetupSpec`).
    let fds: Vec<std::os::fd::RawFd> = [
        stdin_fd.as_raw_fd(),
        stdout_fd.as_raw_fd(),
        stderr_fd.as_raw_fd(),
    ]
    .into_iter()
    .chain(plan.setup.fds.iter().map(|(_, fd)| fd.as_raw_fd()))
    .collect();
    let ladder = spec.ladder.clone();
    let take_terminal = spec.take_terminal;
    let request = Request::Spawn(Box::new(spec));
    // A keeper that could not set itself up says why before it exits
    // (`Event::Unusable`): that reason is the error, not the reset
    // connection or broken pipe its exit leaves.
    let ask = |link: &mut KeeperLink| {
        let reply = match link.send(&request, &fds) {
            Ok(()) => link.recv(None),
            Err(e) => Err(e),
        };
        match reply {
            Ok(Some(Event::Unusable { reason })) => Err(unusable(reason)),
            Err(e) => Err(link.last_word().map_or(e, unusable)),
            reply => reply,
        }
    };
    let mut reply = ask(&mut link);
    // Asked once: it reaps the keeper, and a second ask finds none to ask
    // (a stale keeper beside this program then failed every spawn with
    // "connection reset" instead of the fallback below).
    let refused = reply.is_err() && link.refused_other_build();
    if refused && plan.keeper_hook.is_some() {
        // Once more would run the hook twice.
        return Err(other_build(&keeper));
    } else if refused {
        // A keeper program of another build of tether (a stale
        // `tether-keeper` beside this program) exits before reading
        // anything: the command never started. Once more with the
        // program discovery finds instead.
        if !super::discovery::refuse(&keeper) {
            return Err(other_build(&keeper));
        }
        keeper = keeper_path().map_err(|_| other_build(&keeper))?;
        link = super::pool::fresh(&keeper, &keeper_tag)?;
        reply = ask(&mut link);
        if reply.is_err() && link.refused_other_build() {
            return Err(other_build(&keeper));
        }
    } else if warm && reply.as_ref().is_err_and(|e| !said_unusable(e)) {
        // The warm keeper died while idle (killed, OOM): not the
        // command's fault. Once more with a fresh keeper — unless it died
        // after it started the command (it reports the start only after
        // the command's exec, so a kill can fall in between): then the
        // command is running, as a dead keeper's orphan, and is killed
        // like one, never started a second time.
        link.reap();
        let orphans_killed = super::orphans::kill_orphans(&plan.tag.session);
        if orphans_killed > 0 {
            if take_terminal {
                super::foreground::reclaim_after_failed_spawn();
            }
            return Err(Error::KeeperLost { orphans_killed });
        }
        link = super::pool::fresh(&keeper, &keeper_tag)?;
        reply = ask(&mut link);
    }
    // The keeper has its copies now; ours must go, or a pipe would never
    // see EOF.
    drop((stdin_fd, stdout_fd, stderr_fd));
    match reply {
        Ok(Some(Event::Started {
            pid,
            start_time,
            pidfs_inode,
            containment,
            mut limits,
        })) => {
            limits.via = crate::contain::os::limits_via(&limits);
            let identity = ProcessIdentity {
                boot_id: crate::contain::sys::boot_id().to_owned(),
                pid,
                start_time,
                pidfs_inode,
            };
            let mut tree = Tree::new(
                link,
                identity,
                containment,
                plan.tag.session,
                ladder,
                limits,
            );
            if plan.foreground && plan.pty.is_none() {
                tree.take_foreground();
            }
            Ok(Spawned {
                tree,
                stdin,
                stdout,
                stderr,
                pty,
            })
        }
        Ok(Some(Event::SpawnFailed { errno, stage })) => {
            link.reap();
            if take_terminal {
                super::foreground::reclaim_after_failed_spawn();
            }
            Err(spawn_error(&plan, errno, stage))
        }
        Ok(_) => Err(Error::Protocol(
            "keeper answered Spawn with an unexpected event".into(),
        )),
        Err(e) => {
            link.reap();
            // A keeper that died before it answered may have started the
            // command (see above): what it left is killed as a lost
            // keeper's orphans, and said so.
            let orphans_killed = super::orphans::kill_orphans(&plan.tag.session);
            if take_terminal {
                super::foreground::reclaim_after_failed_spawn();
            }
            if orphans_killed > 0 {
                return Err(Error::KeeperLost { orphans_killed });
            }
            Err(Error::Keeper(e))
        }
    }
}

/// The error of a keeper that could not start, in its own words.
fn unusable(reason: Vec<u8>) -> std::io::Error {
    std::io::Error::other(Unusable(String::from_utf8_lossy(&reason).into_owned()))
}

/// Whether `e` is a keeper's own account of why it could not start: then
/// a fresh keeper would fail the same way (a warm one that did is not
/// replaced, or the owner's error would be the replacement's).
fn said_unusable(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Unusable>())
}

/// Why a keeper could not start, as it said.
#[derive(Debug)]
struct Unusable(String);

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unusable {}

/// The error of a keeper program that refused as of another build.
fn other_build(keeper: &Path) -> Error {
    Error::Keeper(std::io::Error::other(format!(
        "the keeper program {} is of another build of tether (it refused this one): \
         install the tether-keeper of this build, or set TETHER_KEEPER to it",
        keeper.display()
    )))
}

/// The plan in the keeper's terms: raw bytes, milliseconds, signals.
fn spec_of(plan: &SpawnPlan) -> Result<SpawnSpec> {
    let bytes = |s: &std::ffi::OsStr| s.as_bytes().to_vec();
    let argv: Vec<Vec<u8>> = plan.argv.iter().map(|a| bytes(a)).collect();
    let envp: Vec<Vec<u8>> = plan
        .env
        .iter()
        .map(|(k, v)| {
            let mut entry = Vec::with_capacity(k.len() + 1 + v.len());
            entry.extend_from_slice(k.as_bytes());
            entry.push(b'=');
            entry.extend_from_slice(v.as_bytes());
            entry
        })
        .collect();
    for (what, item) in argv
        .iter()
        .map(|a| ("argument", a))
        .chain(envp.iter().map(|e| ("environment", e)))
    {
        if item.contains(&0) {
            return Err(Error::InvalidInput {
                what,
                reason: format!("contains a NUL byte: {:?}", String::from_utf8_lossy(item)),
            });
        }
    }
    let limits = crate::contain::os::limit_spec(&plan.limits);
    if limits.require {
        // Refused here, with the whole reason, rather than by the keeper
        // (which can say only which limit and the errno).
        let unavailable = [
            ("memory", &limits.memory),
            ("pids", &limits.pids),
            ("cpu", &limits.cpu_millis),
        ]
        .into_iter()
        .find_map(|(limit, route)| match route {
            Some((_, super::protocol::Route::Unavailable(why))) => Some((limit, why)),
            _ => None,
        });
        if let Some((limit, why)) = unavailable {
            return Err(Error::LimitNotApplied {
                limit,
                reason: format!(
                    "enforcement is required and it would be none: {}",
                    String::from_utf8_lossy(why)
                ),
            });
        }
    }
    Ok(SpawnSpec {
        program: bytes(plan.program.as_os_str()),
        argv,
        envp,
        cwd: plan.cwd.as_ref().map(|c| bytes(c.as_os_str())),
        containment: plan.containment,
        leftovers: plan.leftovers,
        ladder: rungs(&plan.ladder),
        grace_ms: millis(plan.grace),
        timeout_ms: plan.timeout.map(millis),
        new_session: plan.new_session || plan.pty.is_some(),
        report_stops: plan.foreground && plan.pty.is_none(),
        controlling_tty: plan.pty.is_some(),
        take_terminal: plan.foreground && plan.pty.is_none() && super::foreground::holds_terminal(),
        limits,
        setup: setup_of(&plan.setup)?,
    })
}

/// The wire form of a plan's `ChildSetup`, checked.
fn setup_of(setup: &crate::contain::ChildSetup) -> Result<SetupSpec> {
    let invalid = |reason: String| Error::InvalidInput {
        what: "descriptor passed on",
        reason,
    };
    let mut targets: Vec<i32> = Vec::with_capacity(setup.fds.len());
    for &(target, _) in &setup.fds {
        if target < 3 {
            return Err(invalid(format!(
                "{target}: the command's stdin, stdout and stderr are set as streams"
            )));
        }
        if targets.contains(&target) {
            return Err(invalid(format!("{target} is given twice")));
        }
        targets.push(target);
    }
    if targets.len() > super::channel::MAX_PASSED_FDS {
        return Err(invalid(format!(
            "{} descriptors; at most {} can be passed on",
            targets.len(),
            super::channel::MAX_PASSED_FDS
        )));
    }
    let mut ignore = 0u32;
    for &signal in &setup.ignore_signals {
        if !(1..32).contains(&signal) || signal == libc::SIGKILL || signal == libc::SIGSTOP {
            return Err(Error::InvalidInput {
                what: "ignored signal",
                reason: format!("{signal} cannot be ignored"),
            });
        }
        ignore |= 1 << signal;
    }
    Ok(SetupSpec {
        fds: targets,
        umask: setup.umask,
        uid: setup.uid,
        gid: setup.gid,
        groups: setup.groups.clone(),
        ignore,
        keeper_env: setup.keeper_env,
    })
}

/// The signals of a ladder, each to the whole tree.
fn rungs(ladder: &Ladder) -> Vec<Rung> {
    let signals = match ladder {
        Ladder::Standard => vec![libc::SIGTERM],
        Ladder::Terminal => vec![libc::SIGHUP, libc::SIGTERM],
        Ladder::Signals(signals) => signals.clone(),
    };
    signals
        .into_iter()
        .map(|signal| Rung {
            signal,
            scope: Scope::Tree,
        })
        .collect()
}

fn spawn_error(plan: &SpawnPlan, errno: i32, stage: SpawnStage) -> Error {
    let program = plan
        .argv
        .first()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let path = plan.program.as_path();
    let source = std::io::Error::from_raw_os_error(errno);
    match (stage, errno) {
        // The file is there but exec says ENOENT: its `#!` interpreter is
        // missing — say so rather than "not found".
        (SpawnStage::Exec, libc::ENOENT) if path.exists() => Error::NotExecutable {
            path: path.to_owned(),
            reason: "its interpreter (the #! line) was not found".into(),
        },
        (SpawnStage::Exec, libc::ENOENT) => Error::ProgramNotFound {
            program,
            path_searched: String::new(),
        },
        (SpawnStage::Exec, libc::EACCES | libc::ENOEXEC | libc::EISDIR | libc::ETXTBSY) => {
            Error::NotExecutable {
                path: path.to_owned(),
                reason: source.to_string(),
            }
        }
        (SpawnStage::Chdir, _) => Error::BadCwd {
            cwd: plan.cwd.clone().unwrap_or_default(),
            reason: source.to_string(),
        },
        (SpawnStage::MemoryLimit | SpawnStage::PidsLimit | SpawnStage::CpuLimit, _) => {
            let (limit, value) = match stage {
                SpawnStage::MemoryLimit => {
                    ("memory", plan.limits.memory.map(crate::limits::format_size))
                }
                SpawnStage::PidsLimit => ("pids", plan.limits.pids.map(|n| n.to_string())),
                _ => ("cpu", plan.limits.cpu.map(|c| format!("{c} cores"))),
            };
            let value = value.unwrap_or_default();
            let reason = match errno {
                libc::EINVAL | libc::ERANGE => {
                    format!("the kernel refused the value {value} ({source})")
                }
                _ => format!("{value} is required but could not be enforced here ({source})"),
            };
            Error::LimitNotApplied { limit, reason }
        }
        (SpawnStage::Cgroup, _) => Error::Spawn {
            program,
            stage: "entering the session's cgroup",
            source,
        },
        (SpawnStage::PidNamespace, _) => Error::ContainmentUnavailable {
            requested: "pidns",
            reason: source.to_string(),
        },
        _ => Error::Spawn {
            program,
            stage: stage.name(),
            source,
        },
    }
}

/// Program search and executability, the Unix way.
pub(crate) mod resolve {
    use super::*;

    /// Search path used when the command's environment has no `PATH`.
    pub(crate) const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

    /// Whether `program` names a path (has a `/`) rather than a name to
    /// search for.
    pub(crate) fn is_path(program: &std::ffi::OsStr) -> bool {
        program.as_bytes().contains(&b'/')
    }

    /// Whether `key` is the search-path variable.
    pub(crate) fn is_path_var(key: &std::ffi::OsStr) -> bool {
        key == "PATH"
    }

    /// The files a program given as `path` may be (just itself on Unix).
    pub(crate) fn path_candidates(path: &Path) -> Vec<std::path::PathBuf> {
        vec![path.to_owned()]
    }

    /// The files a search of `dir` for `program` tries, in order.
    pub(crate) fn candidates(dir: &Path, program: &std::ffi::OsStr) -> Vec<std::path::PathBuf> {
        vec![dir.join(program)]
    }

    /// `Ok` if `path` is an executable file; `Err(None)` if it does not
    /// exist; `Err(Some(reason))` if it exists but cannot be executed.
    pub(crate) fn executable(path: &Path) -> std::result::Result<(), Option<String>> {
        let meta = std::fs::metadata(path).map_err(|_| None)?;
        if meta.is_dir() {
            return Err(Some("is a directory".into()));
        }
        nix::unistd::access(path, nix::unistd::AccessFlags::X_OK)
            .map_err(|e| Some(e.desc().to_lowercase()))
    }
}
