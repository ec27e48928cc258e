//! What to run: the `Command` builder, mirroring `std::process::Command`.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use crate::child::{Child, ChildStderr, ChildStdin, ChildStdout, ExitStatus, Output};
use crate::contain::link::{KeeperLink, keeper_path};
use crate::contain::protocol::{ContainmentKind, Event, Leftovers, Request, STAGES, SpawnSpec};
use crate::error::{Error, Result};
use crate::install::Install;
use crate::session_id::SessionId;
use crate::spawn_tag::{SPAWN_TAG_VAR, SpawnTag, validate_purpose};

/// Default grace between the first signal and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// Search path used when the command's environment has no `PATH`.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Which kernel mechanism holds a process tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Containment {
    /// A keeper process that is the tree's child subreaper: setsid and
    /// double-fork escapes reparent to it. If the keeper itself is
    /// SIGKILLed, the tree reparents to the nearest subreaper above it.
    Subreaper,
    /// A private PID namespace whose init dies with the keeper: airtight
    /// even against a SIGKILLed keeper. Tools inside see host pids in
    /// `/proc` (it is not remounted), but the command's children cannot
    /// signal processes outside the namespace.
    PidNamespace,
}

impl Containment {
    /// Short name used in reports: `subreaper` or `pidns`.
    pub fn name(self) -> &'static str {
        match self {
            Containment::Subreaper => "subreaper",
            Containment::PidNamespace => "pidns",
        }
    }
}

impl std::fmt::Display for Containment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<ContainmentKind> for Containment {
    fn from(kind: ContainmentKind) -> Containment {
        match kind {
            ContainmentKind::Subreaper => Containment::Subreaper,
            ContainmentKind::PidNamespace => Containment::PidNamespace,
        }
    }
}

/// Which containment to ask for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContainmentPolicy {
    /// A PID namespace where the kernel allows one (root, or unprivileged
    /// user namespaces), else a subreaper. The child reports which it got.
    Auto,
    /// Always a subreaper (the default: a PID namespace changes what `ps`
    /// and `kill` mean inside the command).
    #[default]
    Subreaper,
    /// A PID namespace or an error — never silently something weaker.
    PidNamespace,
}

/// What a child's standard stream is connected to.
#[derive(Debug)]
pub enum Stdio {
    /// The owner's own stream.
    Inherit,
    /// `/dev/null`.
    Null,
    /// A new pipe; the owner's end is on the [`Child`].
    Piped,
    /// This descriptor (duplicated for each spawn).
    Fd(OwnedFd),
}

impl From<File> for Stdio {
    fn from(file: File) -> Stdio {
        Stdio::Fd(file.into())
    }
}

impl From<OwnedFd> for Stdio {
    fn from(fd: OwnedFd) -> Stdio {
        Stdio::Fd(fd)
    }
}

/// A command to run contained: what, where, with which environment, and
/// how its tree is held and ended.
///
/// Like `std::process::Command`, plus: a purpose (written into the spawn
/// tag), a grace period for kills (default 2 s), an optional timeout, a
/// containment policy, and what becomes of descendants when the main process
/// exits (killed, by default). Spawning never forks the calling process: a
/// keeper does all per-child setup (see [`crate::keeper`]).
#[derive(Debug)]
pub struct Command {
    program: OsString,
    args: Vec<OsString>,
    env_clear: bool,
    env: BTreeMap<OsString, Option<OsString>>,
    cwd: Option<PathBuf>,
    stdin: Option<Stdio>,
    stdout: Option<Stdio>,
    stderr: Option<Stdio>,
    purpose: String,
    grace: Duration,
    timeout: Option<Duration>,
    containment: ContainmentPolicy,
    keep_descendants: bool,
    new_session: bool,
    session: Option<SessionId>,
    install: Option<Install>,
}

impl Command {
    /// A command running `program` (searched on `PATH` if it has no `/`).
    pub fn new(program: impl AsRef<OsStr>) -> Command {
        Command {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env_clear: false,
            env: BTreeMap::new(),
            cwd: None,
            stdin: None,
            stdout: None,
            stderr: None,
            purpose: "run".to_owned(),
            grace: DEFAULT_GRACE,
            timeout: None,
            containment: ContainmentPolicy::default(),
            keep_descendants: false,
            new_session: false,
            session: None,
            install: None,
        }
    }

    /// Adds an argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Command {
        self.env
            .insert(key.as_ref().to_owned(), Some(value.as_ref().to_owned()));
        self
    }

    /// Sets environment variables.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    /// Removes an environment variable (inherited or set earlier).
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Command {
        self.env.insert(key.as_ref().to_owned(), None);
        self
    }

    /// Starts from an empty environment instead of the owner's.
    /// `TETHER_SPAWN` is always set regardless.
    pub fn env_clear(&mut self) -> &mut Command {
        self.env_clear = true;
        self.env.clear();
        self
    }

    /// Sets the working directory (checked before spawning).
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Command {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// Standard input (default: inherit; `output()` defaults to null).
    pub fn stdin(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.stdin = Some(cfg.into());
        self
    }

    /// Standard output (default: inherit; `output()` defaults to piped).
    pub fn stdout(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.stdout = Some(cfg.into());
        self
    }

    /// Standard error (default: inherit; `output()` defaults to piped).
    pub fn stderr(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.stderr = Some(cfg.into());
        self
    }

    /// Why this command is run, written into its spawn tag (default `run`).
    /// 1–64 of `[A-Za-z0-9._-]`; anything else fails at spawn.
    pub fn purpose(&mut self, purpose: &str) -> &mut Command {
        self.purpose = purpose.to_owned();
        self
    }

    /// Time between the first signal of a kill and SIGKILL (default 2 s).
    /// Also used on timeout, when the owner disappears, and for descendants
    /// left behind by the main process.
    pub fn grace(&mut self, grace: Duration) -> &mut Command {
        self.grace = grace;
        self
    }

    /// Kill the whole tree if the main process runs longer than this.
    /// The exit status then reports `timed_out`.
    pub fn timeout(&mut self, timeout: Duration) -> &mut Command {
        self.timeout = Some(timeout);
        self
    }

    /// How to hold the tree (default [`ContainmentPolicy::Subreaper`]).
    pub fn containment(&mut self, policy: ContainmentPolicy) -> &mut Command {
        self.containment = policy;
        self
    }

    /// Keep descendants running after the main process exits (still
    /// contained, killed with the child or its owner) instead of killing
    /// them at once (the default).
    pub fn keep_descendants(&mut self, keep: bool) -> &mut Command {
        self.keep_descendants = keep;
        self
    }

    /// Start the command in a new session (`setsid`) rather than only its
    /// own process group.
    pub fn new_session(&mut self, yes: bool) -> &mut Command {
        self.new_session = yes;
        self
    }

    /// Use this session id in the spawn tag (default: a fresh one).
    pub fn session_id(&mut self, id: SessionId) -> &mut Command {
        self.session = Some(id);
        self
    }

    /// Tag processes as this install's (default: [`Install::from_env`]).
    pub fn install(&mut self, install: Install) -> &mut Command {
        self.install = Some(install);
        self
    }

    /// The program as given.
    pub fn get_program(&self) -> &OsStr {
        &self.program
    }

    /// Starts the command. Returns once its exec succeeded (or failed: the
    /// error says why — not found, not executable, bad cwd, …).
    pub fn spawn(&mut self) -> Result<Child> {
        self.spawn_with(Stdio::Inherit, Stdio::Inherit)
    }

    /// Runs to completion with inherited stdio; returns the exit status.
    pub fn status(&mut self) -> Result<ExitStatus> {
        self.spawn()?.wait()
    }

    /// Runs to completion capturing stdout and stderr (stdin null unless set).
    pub fn output(&mut self) -> Result<Output> {
        let child = self.spawn_with(Stdio::Null, Stdio::Piped)?;
        child.wait_with_output()
    }

    fn spawn_with(&mut self, stdin_default: Stdio, out_default: Stdio) -> Result<Child> {
        validate_purpose(&self.purpose).map_err(|e| Error::InvalidInput {
            what: "purpose",
            reason: e.to_string(),
        })?;
        let keeper = keeper_path()?;
        let install = self.install.clone().unwrap_or_else(Install::from_env);
        let owner = owner_identity();
        let session = self.session.clone().unwrap_or_else(SessionId::generate);
        let tag = SpawnTag::new(
            install.id(),
            &self.purpose,
            owner.0,
            owner.1,
            session.as_str(),
        )?;
        let envp = self.environment(&tag);
        // Always explicit: a warm keeper was started earlier, and its own
        // cwd is the owner's cwd of back then.
        let cwd = match self.checked_cwd()? {
            Some(cwd) => Some(cwd),
            None => std::env::current_dir().ok(),
        };
        let program = resolve_program(&self.program, &envp, cwd.as_deref())?;

        let err_default = match &out_default {
            Stdio::Piped => Stdio::Piped,
            _ => Stdio::Inherit,
        };
        let (stdin_fd, stdin) = open_stdio(self.stdin.as_ref().unwrap_or(&stdin_default), 0, true)?;
        let (stdout_fd, stdout) =
            open_stdio(self.stdout.as_ref().unwrap_or(&out_default), 1, false)?;
        let (stderr_fd, stderr) =
            open_stdio(self.stderr.as_ref().unwrap_or(&err_default), 2, false)?;

        let mut argv = vec![self.program.as_bytes().to_vec()];
        argv.extend(self.args.iter().map(|a| a.as_bytes().to_vec()));
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
        let spec = SpawnSpec {
            program: program.as_os_str().as_bytes().to_vec(),
            argv,
            envp,
            cwd: cwd.as_ref().map(|c| c.as_os_str().as_bytes().to_vec()),
            containment: match self.containment {
                ContainmentPolicy::Auto => None,
                ContainmentPolicy::Subreaper => Some(ContainmentKind::Subreaper),
                ContainmentPolicy::PidNamespace => Some(ContainmentKind::PidNamespace),
            },
            leftovers: if self.keep_descendants {
                Leftovers::Keep
            } else {
                Leftovers::Kill
            },
            grace_ms: millis(self.grace),
            timeout_ms: self.timeout.map(millis),
            new_session: self.new_session,
        };
        let keeper_tag = SpawnTag::new(install.id(), "keeper", owner.0, owner.1, session.as_str())?;
        let keeper_tag = keeper_tag.to_string();
        let (mut link, warm) = crate::pool::take(&keeper, &keeper_tag)?;
        let fds = [
            stdin_fd.as_raw_fd(),
            stdout_fd.as_raw_fd(),
            stderr_fd.as_raw_fd(),
        ];
        let request = Request::Spawn(spec);
        let ask = |link: &mut KeeperLink| {
            link.send(&request, &fds)?;
            link.recv(None)
        };
        let mut reply = ask(&mut link);
        if warm && reply.is_err() {
            // The warm keeper died while idle (killed, OOM): not the
            // command's fault. Once more with a fresh keeper.
            link.reap();
            link = KeeperLink::start(&keeper, &keeper_tag)?;
            reply = ask(&mut link);
        }
        // The keeper has its copies now; ours must go, or a pipe would never
        // see EOF.
        drop((stdin_fd, stdout_fd, stderr_fd));
        let program_name = self.program.to_string_lossy().into_owned();
        match reply {
            Ok(Some(Event::Started {
                pid,
                start_time,
                pidfs_inode,
                containment,
            })) => {
                let identity = crate::ProcessIdentity {
                    boot_id: crate::contain::boot_id().to_owned(),
                    pid,
                    start_time,
                    pidfs_inode,
                };
                Ok(Child::new(
                    link,
                    identity,
                    containment.into(),
                    session,
                    program_name,
                    stdin.map(ChildStdin::from),
                    stdout.map(ChildStdout::from),
                    stderr.map(ChildStderr::from),
                    self.grace,
                    self.keep_descendants,
                ))
            }
            Ok(Some(Event::SpawnFailed { errno, stage })) => {
                link.reap();
                Err(spawn_error(
                    &program_name,
                    &program,
                    cwd.as_deref(),
                    errno,
                    stage,
                ))
            }
            Ok(_) => Err(Error::Protocol(
                "keeper answered Spawn with an unexpected event".into(),
            )),
            Err(e) => {
                link.reap();
                Err(Error::Keeper(e))
            }
        }
    }

    fn environment(&self, tag: &SpawnTag) -> Vec<Vec<u8>> {
        let mut vars: BTreeMap<OsString, OsString> = if self.env_clear {
            BTreeMap::new()
        } else {
            std::env::vars_os().collect()
        };
        for (k, v) in &self.env {
            match v {
                Some(v) => vars.insert(k.clone(), v.clone()),
                None => vars.remove(k),
            };
        }
        vars.insert(SPAWN_TAG_VAR.into(), tag.to_string().into());
        vars.into_iter()
            .map(|(k, v)| {
                let mut entry = k.into_vec();
                entry.push(b'=');
                entry.extend_from_slice(v.as_bytes());
                entry
            })
            .collect()
    }

    fn checked_cwd(&self) -> Result<Option<PathBuf>> {
        let Some(cwd) = &self.cwd else {
            return Ok(None);
        };
        let bad = |reason: &str| Error::BadCwd {
            cwd: cwd.clone(),
            reason: reason.to_owned(),
        };
        match std::fs::metadata(cwd) {
            Ok(m) if m.is_dir() => Ok(Some(
                std::path::absolute(cwd).map_err(|e| bad(&e.to_string()))?,
            )),
            Ok(_) => Err(bad("not a directory")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(bad("does not exist")),
            Err(e) => Err(bad(&e.to_string())),
        }
    }
}

use std::os::unix::ffi::OsStringExt;

fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// The owner's pid and start time, read once (the owner never forks).
fn owner_identity() -> (u32, u64) {
    static OWNER: OnceLock<(u32, u64)> = OnceLock::new();
    *OWNER.get_or_init(|| {
        let pid = std::process::id();
        (
            pid,
            crate::contain::read_stat(pid)
                .map(|s| s.start_time)
                .unwrap_or(0),
        )
    })
}

/// The descriptor the command gets for stream `n`, and the owner's end of a
/// pipe when the stream is piped.
fn open_stdio(cfg: &Stdio, n: i32, is_input: bool) -> Result<(OwnedFd, Option<OwnedFd>)> {
    let null = || -> Result<OwnedFd> {
        let file = std::fs::OpenOptions::new()
            .read(is_input)
            .write(!is_input)
            .open("/dev/null")?;
        Ok(file.into())
    };
    Ok(match cfg {
        Stdio::Null => (null()?, None),
        Stdio::Inherit => {
            use std::os::fd::AsFd;
            let own = match n {
                0 => std::io::stdin().as_fd().try_clone_to_owned(),
                1 => std::io::stdout().as_fd().try_clone_to_owned(),
                _ => std::io::stderr().as_fd().try_clone_to_owned(),
            };
            match own {
                Ok(fd) => (fd, None),
                // Our own stream is closed: give the child /dev/null rather
                // than a random descriptor that later takes that number.
                Err(_) => (null()?, None),
            }
        }
        Stdio::Piped => {
            let (read, write) =
                nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from)?;
            if is_input {
                (read, Some(write))
            } else {
                (write, Some(read))
            }
        }
        Stdio::Fd(fd) => (fd.try_clone()?, None),
    })
}

/// Finds the executable the way `execvp` would, but before spawning, so
/// that "not found" and "not executable" are precise errors.
fn resolve_program(program: &OsStr, envp: &[Vec<u8>], cwd: Option<&Path>) -> Result<PathBuf> {
    if program.is_empty() {
        return Err(Error::InvalidInput {
            what: "program",
            reason: "empty program name".into(),
        });
    }
    let display = program.to_string_lossy().into_owned();
    if program.as_bytes().contains(&b'/') {
        let path = Path::new(program);
        let path = match (path.is_relative(), cwd) {
            (true, Some(cwd)) => cwd.join(path),
            _ => std::path::absolute(path)?,
        };
        return match executable(&path) {
            Ok(()) => Ok(path),
            Err(None) => Err(Error::ProgramNotFound {
                program: display,
                path_searched: String::new(),
            }),
            Err(Some(reason)) => Err(Error::NotExecutable { path, reason }),
        };
    }
    let search = envp
        .iter()
        .find_map(|e| e.strip_prefix(b"PATH="))
        .map(|p| OsStr::from_bytes(p).to_owned())
        .unwrap_or_else(|| DEFAULT_PATH.into());
    let mut not_executable = None;
    for dir in std::env::split_paths(&search) {
        let dir = if dir.as_os_str().is_empty() {
            cwd.map(Path::to_path_buf).unwrap_or_default()
        } else {
            dir
        };
        let candidate = dir.join(program);
        match executable(&candidate) {
            Ok(()) => return Ok(std::path::absolute(candidate)?),
            Err(Some(reason)) if not_executable.is_none() => {
                not_executable = Some((candidate, reason))
            }
            Err(_) => {}
        }
    }
    match not_executable {
        Some((path, reason)) => Err(Error::NotExecutable { path, reason }),
        None => Err(Error::ProgramNotFound {
            program: display,
            path_searched: search.to_string_lossy().into_owned(),
        }),
    }
}

/// `Ok` if `path` is an executable file; `Err(None)` if it does not exist;
/// `Err(Some(reason))` if it exists but cannot be executed.
fn executable(path: &Path) -> std::result::Result<(), Option<String>> {
    let meta = std::fs::metadata(path).map_err(|_| None)?;
    if meta.is_dir() {
        return Err(Some("is a directory".into()));
    }
    nix::unistd::access(path, nix::unistd::AccessFlags::X_OK)
        .map_err(|e| Some(e.desc().to_lowercase()))
}

fn spawn_error(program: &str, path: &Path, cwd: Option<&Path>, errno: i32, stage: u8) -> Error {
    let source = std::io::Error::from_raw_os_error(errno);
    let stage_name = STAGES.get(stage as usize).copied().unwrap_or("setup");
    match (stage_name, errno) {
        // The file is there but exec says ENOENT: its `#!` interpreter is
        // missing — say so rather than "not found".
        ("exec", libc::ENOENT) if path.exists() => Error::NotExecutable {
            path: path.to_owned(),
            reason: "its interpreter (the #! line) was not found".into(),
        },
        ("exec", libc::ENOENT) => Error::ProgramNotFound {
            program: program.to_owned(),
            path_searched: String::new(),
        },
        ("exec", libc::EACCES | libc::ENOEXEC | libc::EISDIR | libc::ETXTBSY) => {
            Error::NotExecutable {
                path: path.to_owned(),
                reason: source.to_string(),
            }
        }
        ("chdir", _) => Error::BadCwd {
            cwd: cwd.map(Path::to_path_buf).unwrap_or_default(),
            reason: source.to_string(),
        },
        ("pid namespace", _) => Error::ContainmentUnavailable {
            requested: "pidns",
            reason: source.to_string(),
        },
        _ => Error::Spawn {
            program: program.to_owned(),
            stage: stage_name,
            source,
        },
    }
}
