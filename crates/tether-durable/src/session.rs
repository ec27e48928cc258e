//! Durable sessions from Rust: started from a [`tether::Command`] or a
//! [`RunSpec`] like any session, driven — and re-adopted by any later
//! process of the same user — through a [`DurableSession`].

use std::ffi::OsStr;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use tether::Install;
use tether::registry::{CommandLine, OutputMode, Registry, RunSpec, StdinMode};

use crate::client::{Client, own_identity};
use crate::error::{DurableError, Result};
use crate::holder_program::HolderProgram;
use crate::protocol::{
    DurableInfo, KillReply, MAX_READ, Request, RunSettings, ScreenReply, StartRequest, WaitReply,
};

/// How a durable session is kept: its name, its TTL, which holder.
///
/// Defaults: no name, a TTL of [`DEFAULT_TTL`](crate::DEFAULT_TTL)
/// (24 h; at most [`MAX_TTL`](crate::MAX_TTL), 7 days), a running session
/// of the same name is an error, and the holder program found by
/// [`HolderProgram::find`] when none runs.
#[derive(Clone, Debug, Default)]
pub struct DurableOptions {
    name: Option<String>,
    ttl: Option<Duration>,
    replace: bool,
    holder: Option<HolderProgram>,
}

impl DurableOptions {
    /// The defaults.
    pub fn new() -> DurableOptions {
        DurableOptions::default()
    }

    /// A name, unique among this user's running durable sessions (1 to
    /// 128 characters, none of them control characters), by which any
    /// later process finds it ([`attach`]).
    pub fn name(mut self, name: impl Into<String>) -> DurableOptions {
        self.name = Some(name.into());
        self
    }

    /// How long it may run before the holder kills it with the verified
    /// ladder (whole seconds, at least 1; at most [`MAX_TTL`](crate::MAX_TTL));
    /// its owner can [`extend`](DurableSession::extend) it.
    pub fn ttl(mut self, ttl: Duration) -> DurableOptions {
        self.ttl = Some(ttl);
        self
    }

    /// Kill a running session of the same name first (default: refuse
    /// with [`DurableError::NameTaken`]).
    pub fn replace(mut self, replace: bool) -> DurableOptions {
        self.replace = replace;
        self
    }

    /// Start this `tether` executable (as `tether holder`) when no holder
    /// runs, instead of finding one ([`HolderProgram::find`]).
    pub fn holder_program(mut self, tether: impl Into<PathBuf>) -> DurableOptions {
        self.holder = Some(HolderProgram::tether(tether));
        self
    }
}

/// Output of a durable session, as [`DurableSession::read`] returns it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DurableRead {
    /// The bytes, exactly as the command wrote them.
    pub data: Vec<u8>,
    /// Offset of `data[0]` (later than asked when bytes were dropped).
    pub offset: u64,
    /// Where to read on.
    pub next_offset: u64,
    /// Bytes lost between the asked offset and `offset` (beyond the
    /// spill cap).
    pub dropped: u64,
    /// The stream is finished and this read reached its end.
    pub eof: bool,
}

/// A durable session, held by this user's holder: this handle is a
/// connection to it, not its owner. Dropping it detaches — the session
/// runs on until it ends, is [killed](Self::kill) or reaches its TTL —
/// and any process of the same user can [`attach`] to it again.
///
/// Its methods block (one request to the holder each); in async code run
/// them with `tokio::task::spawn_blocking`.
#[derive(Debug)]
pub struct DurableSession {
    client: Client,
    info: DurableInfo,
}

impl DurableSession {
    /// Its session id.
    pub fn id(&self) -> &str {
        &self.info.id
    }

    /// Its name, if it has one.
    pub fn name(&self) -> Option<&str> {
        self.info.name.as_deref()
    }

    /// The holder's pid.
    pub fn holder_pid(&self) -> u32 {
        self.client.holder_pid()
    }

    /// The session now: status, pid, TTL left, output so far, limits.
    ///
    /// # Errors
    /// [`DurableError::Protocol`] when the holder is gone (and the session
    /// with it); [`DurableError::UnknownSession`] once the holder forgot it.
    pub fn info(&mut self) -> Result<DurableInfo> {
        let info = self.client.info(&self.info.id)?;
        self.info = info.clone();
        Ok(info)
    }

    /// Output from the absolute `offset` (0: everything it printed, also
    /// while nobody was attached), at most `max_bytes` (and at most
    /// [`MAX_READ`]); waits up to `wait` for some when there is none yet.
    ///
    /// # Errors
    /// As [`info`](Self::info).
    pub fn read(&mut self, offset: u64, max_bytes: usize, wait: Duration) -> Result<DurableRead> {
        let (data, reply) =
            self.client
                .read(&self.info.id, offset, max_bytes.min(MAX_READ), wait)?;
        Ok(DurableRead {
            data,
            offset: reply.offset,
            next_offset: reply.next_offset,
            dropped: reply.dropped,
            eof: reply.eof,
        })
    }

    /// Its stderr from the absolute `offset`, without waiting, for a
    /// session started with [`OutputMode::Separate`] (otherwise stderr is
    /// in [`read`](Self::read)'s output and this reads nothing).
    ///
    /// # Errors
    /// As [`info`](Self::info).
    pub fn read_stderr(&mut self, offset: u64, max_bytes: usize) -> Result<DurableRead> {
        let (data, reply) = self.client.read_stream(
            &self.info.id,
            Some("stderr"),
            offset,
            max_bytes.min(MAX_READ),
        )?;
        Ok(DurableRead {
            data,
            offset: reply.offset,
            next_offset: reply.next_offset,
            dropped: reply.dropped,
            eof: reply.eof,
        })
    }

    /// Closes its stdin (on a terminal: sends the end-of-file character).
    ///
    /// # Errors
    /// As [`info`](Self::info).
    pub fn close_stdin(&mut self) -> Result<()> {
        self.client.close_stdin(&self.info.id)
    }

    /// Writes `data` to its stdin (or its terminal).
    ///
    /// # Errors
    /// As [`info`](Self::info); [`DurableError::Refused`] when its stdin
    /// is closed or the null device.
    pub fn write(&mut self, data: &[u8]) -> Result<()> {
        self.client.write(&self.info.id, data)
    }

    /// Waits up to `timeout` for the main process to exit, or — with
    /// `until`, a regex — for a line of its output to match.
    ///
    /// # Errors
    /// As [`info`](Self::info); [`DurableError::Refused`] for a bad regex.
    pub fn wait(&mut self, timeout: Duration, until: Option<&str>) -> Result<WaitReply> {
        self.client.wait(&self.info.id, timeout, until)
    }

    /// The verified kill of its whole tree: the polite signal, then after
    /// `grace` (default: the session's) the forced end; returns once
    /// nothing of it is left.
    ///
    /// # Errors
    /// As [`info`](Self::info); [`DurableError::Refused`] when the kill
    /// could not be verified (it names the survivors).
    pub fn kill(&mut self, grace: Option<Duration>) -> Result<KillReply> {
        self.client.kill(&self.info.id, grace)
    }

    /// Sets its TTL to `ttl` from now (at most [`MAX_TTL`](crate::MAX_TTL)).
    ///
    /// # Errors
    /// As [`info`](Self::info); [`DurableError::Refused`] for a finished
    /// session or a TTL out of range.
    pub fn extend(&mut self, ttl: Duration) -> Result<DurableInfo> {
        let info = self.client.extend(&self.info.id, ttl)?;
        self.info = info.clone();
        Ok(info)
    }

    /// Its screen, when it runs on a PTY.
    ///
    /// # Errors
    /// As [`info`](Self::info); [`DurableError::Refused`] without a PTY.
    pub fn screen(&mut self) -> Result<ScreenReply> {
        self.client.screen(&self.info.id)
    }
}

/// Starts `spec` as a durable session of `spec`'s install (default
/// [`Install::from_env`]), starting this user's holder first when none
/// runs, and returns once the command runs.
///
/// Everything `spec` says is carried to the holder — program and
/// arguments or shell script, environment (this process's, with the
/// spec's on top, or only the spec's after `env_clear`), working
/// directory (default: this process's), stdin, PTY, limits, timeouts,
/// grace, output retention, descendants kept or not, purpose — so the
/// session runs as it would in a [`Registry`], except that its owner is
/// the holder: it outlives this process. The purpose in its spawn tags is
/// the spec's, except the defaults (`session`, a [`Command`](tether::Command)'s
/// `run`), which become `durable`.
///
/// # Errors
/// [`DurableError::Command`] for what cannot be carried, before anything
/// starts: text that is not UTF-8 (arguments, environment, working directory);
/// [`DurableError::HolderStart`] when no holder runs and none can be
/// started (nothing was started); [`DurableError::NameTaken`];
/// [`DurableError::Refused`] with the holder's reason (`program_not_found`,
/// `not_executable`, `bad_request`, `start_failed`, or a holder that
/// predates these requests).
pub fn start(spec: &RunSpec, options: &DurableOptions) -> Result<DurableSession> {
    let (request, with) = start_request(spec, options)?;
    let install = spec
        .get_install()
        .cloned()
        .unwrap_or_else(Install::from_env);
    // The request carries this process's environment: it goes only to a
    // holder in a state directory that is provably this user's (G7's
    // check), never to whatever listens in one someone else could shape.
    tether_ledger::secure_state_dir(install.state_dir())?;
    let mut client = match Client::connect(&install)? {
        Some(client) => client,
        None => {
            let holder = match &options.holder {
                Some(holder) => holder.clone(),
                None => HolderProgram::find()?,
            };
            Client::connect_or_start_program(&install, &holder)?
        }
    };
    client.speaks("starting a session with all its settings")?;
    let started: Result<DurableInfo> = client.call(&Request::StartWith {
        start: Box::new(request),
        with,
    });
    let info = started.map_err(|e| match e {
        DurableError::Refused { kind, message }
            if kind == "bad_request" && message.contains("unknown variant") =>
        {
            DurableError::Refused {
                kind,
                message: format!(
                    "the running holder (pid {}) is of an older tether and cannot start this \
                     session with all its settings ({message}); it exits 10 minutes after its \
                     last session ends, or kill it",
                    client.holder_pid()
                ),
            }
        }
        other => other,
    })?;
    Ok(DurableSession { client, info })
}

/// Finds this user's durable session `id_or_name` (a name, an id, or an
/// id prefix of 4+ characters) in `install` and returns a handle to it.
/// A name is resolved once, here: a newer session that takes the name
/// later is not followed into.
///
/// # Errors
/// [`DurableError::UnknownSession`] when no such session is held (also
/// when no holder runs); [`DurableError::Unreachable`] for a holder that
/// is not this user's.
pub fn attach(install: &Install, id_or_name: &str) -> Result<DurableSession> {
    let Some(mut client) = Client::connect(install)? else {
        return Err(DurableError::UnknownSession(format!(
            "no durable session {id_or_name:?}: no durable session runs (see `tether sessions`)"
        )));
    };
    let info = client.info(id_or_name)?;
    Ok(DurableSession { client, info })
}

/// Every durable session this user's holder of `install` keeps, running
/// and finished (finished ones until the holder exits), oldest first;
/// empty when no holder runs.
///
/// # Errors
/// [`DurableError::Unreachable`] for a holder that is not this user's;
/// [`DurableError::Protocol`] when it breaks off.
pub fn list(install: &Install) -> Result<Vec<DurableInfo>> {
    match Client::connect(install)? {
        Some(mut client) => client.list(),
        None => Ok(Vec::new()),
    }
}

/// Durable sessions from a [`tether::Command`].
pub trait DurableExt {
    /// Starts the command as a durable session: as
    /// [`Command::spawn`](tether::Command::spawn), except that the session
    /// is held by this user's holder and outlives this process (see
    /// [`start`]). The command is carried whole or not at all: a setting
    /// a session cannot honour — inherited or file stdio, a containment
    /// policy, a session id, `foreground`, the Unix extensions — is
    /// [`DurableError::Command`], never dropped. Stdin is a pipe that
    /// [`DurableSession::write`] feeds, unless it was set to
    /// [`Stdio::Null`](tether::Stdio::Null).
    ///
    /// # Errors
    /// As [`start`], and the above.
    fn spawn_durable(&mut self, options: &DurableOptions) -> Result<DurableSession>;
}

impl DurableExt for tether::Command {
    fn spawn_durable(&mut self, options: &DurableOptions) -> Result<DurableSession> {
        let spec = RunSpec::try_from(&*self).map_err(DurableError::Command)?;
        start(&spec, options)
    }
}

/// Durable sessions beside a [`Registry`]'s own.
pub trait DurableRegistryExt {
    /// Starts `spec` as a durable session ([`start`], off the reactor): as
    /// [`Registry::run`], except that the session is *not* this
    /// registry's — its owner is this user's holder, so it outlives the
    /// registry and this process, and is driven through the returned
    /// handle or re-adopted with [`attach`].
    ///
    /// # Errors
    /// As [`start`].
    fn run_durable(
        &self,
        spec: RunSpec,
        options: DurableOptions,
    ) -> impl Future<Output = Result<DurableSession>> + Send;
}

impl DurableRegistryExt for Registry {
    async fn run_durable(&self, spec: RunSpec, options: DurableOptions) -> Result<DurableSession> {
        tokio::task::spawn_blocking(move || start(&spec, &options))
            .await
            .map_err(|e| DurableError::Io(std::io::Error::other(e)))?
    }
}

/// What the holder is asked for `spec`.
fn start_request(spec: &RunSpec, options: &DurableOptions) -> Result<(StartRequest, RunSettings)> {
    let text = |what: &str, s: &OsStr| {
        s.to_str().map(str::to_owned).ok_or_else(|| {
            invalid(&format!(
                "{what} {s:?} is not UTF-8, which a durable session's request cannot carry"
            ))
        })
    };
    let (argv, shell) = match spec.command() {
        CommandLine::Argv(argv) => (
            argv.iter()
                .map(|a| text("argument", a))
                .collect::<Result<Vec<_>>>()?,
            None,
        ),
        CommandLine::Shell(script) => (Vec::new(), Some(script.clone())),
    };
    let mut env = Vec::new();
    if !spec.get_env_clear() {
        for (key, value) in std::env::vars_os() {
            if key == tether::SPAWN_TAG_VAR {
                continue;
            }
            env.push((
                text("environment variable", &key)?,
                text("environment value", &value)?,
            ));
        }
    }
    if spec.get_pty().is_some() {
        // What a registry sets on a PTY unless the spec does: the owner's
        // own values, sent here, must not hide them.
        for (key, value) in tether::terminal::AGENT_ENV {
            if !spec.get_envs().any(|(k, _)| k == key) {
                env.push((key.to_owned(), value.to_owned()));
            }
        }
    }
    for (key, value) in spec.get_envs() {
        env.push((
            text("environment variable", key)?,
            text("environment value", value)?,
        ));
    }
    let cwd = match spec.get_cwd() {
        Some(dir) => dir.to_owned(),
        None => std::env::current_dir()?,
    };
    let purpose = spec.get_purpose();
    let limits = spec.get_limits();
    let request = StartRequest {
        argv,
        shell,
        cwd: Some(text("working directory", cwd.as_os_str())?),
        env,
        name: options.name.clone(),
        ttl_s: options.ttl.map(crate::client::whole_seconds),
        replace: options.replace,
        purpose: (purpose != "session" && purpose != "run").then(|| purpose.to_owned()),
        pty: spec.get_pty().map(|size| (size.rows(), size.cols())),
        memory: limits.memory,
        pids: limits.pids,
        cpu: limits.cpu,
        require_limits: limits.require,
        grace_ms: Some(spec.get_grace().as_millis() as u64),
        owner: Some(own_identity("rust")),
        separate_stderr: spec.get_output() == OutputMode::Separate,
    };
    let with = RunSettings {
        timeout_ms: spec.get_timeout().map(|t| t.as_millis() as u64),
        idle_timeout_ms: spec.get_idle_timeout().map(|t| t.as_millis() as u64),
        stdin_null: spec.get_stdin() == StdinMode::Null && spec.get_pty().is_none(),
        max_memory: Some(spec.get_max_memory() as u64),
        spill_cap: Some(spec.get_spill_cap()),
        keep_descendants: Some(spec.get_keep_descendants()),
    };
    Ok((request, with))
}

fn invalid(reason: &str) -> DurableError {
    DurableError::Command(tether::Error::InvalidInput {
        what: "command",
        reason: reason.to_owned(),
    })
}
