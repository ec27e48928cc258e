//! What a [`Registry`](crate::registry::Registry) session runs: the command, its
//! environment and the limits it runs under.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::command::{Command, DEFAULT_GRACE};
use crate::containment::ContainmentPolicy;
use crate::error::{Error, Result};
use crate::install::Install;
use crate::limits::Limits;
use crate::output::{DEFAULT_MAX_MEMORY, DEFAULT_SPILL_CAP};
use crate::stdio::Stdio;
use crate::terminal::PtySize;

/// The shell that runs [`RunSpec::shell`] commands: `/bin/sh -c <script>`
/// on Unix, `cmd.exe /d /s /c <script>` on Windows.
pub const SHELL: &str = crate::contain::shell::SHELL;

/// The command itself: an argv, or a script for `/bin/sh -c`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandLine {
    /// Program and arguments, run as given (no shell).
    Argv(Vec<OsString>),
    /// A script run by `/bin/sh -c`.
    Shell(String),
}

impl CommandLine {
    /// The command as one line of text, for listings.
    pub fn display(&self) -> String {
        match self {
            CommandLine::Shell(script) => script.clone(),
            CommandLine::Argv(argv) => argv
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// Program and arguments to execute.
    pub(crate) fn argv(&self) -> Vec<OsString> {
        match self {
            CommandLine::Argv(argv) => argv.clone(),
            CommandLine::Shell(script) => crate::contain::shell::argv(script),
        }
    }
}

/// The command's standard input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StdinMode {
    /// `/dev/null` (the default): a command that reads stdin sees EOF at
    /// once instead of hanging on input nobody will send.
    #[default]
    Null,
    /// A pipe the caller writes with [`Registry::write`](crate::registry::Registry::write)
    /// and ends with [`Registry::close_stdin`](crate::registry::Registry::close_stdin).
    Piped,
}

/// How stdout and stderr are captured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputMode {
    /// One pipe given to the command as both stdout and stderr (the
    /// default), so the stream holds the bytes in the exact order the
    /// kernel received them — what a terminal would have shown.
    #[default]
    Merged,
    /// Two pipes, two streams, each with its own offsets. The relative
    /// order of stdout and stderr bytes is lost.
    Separate,
}

/// Everything [`Registry::run`](crate::registry::Registry::run) needs to start a
/// session. Built with [`RunSpec::argv`] or [`RunSpec::shell`] and the
/// chained setters; every setter documents its default.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub(crate) command: CommandLine,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) env_clear: bool,
    pub(crate) stdin: StdinMode,
    pub(crate) output: OutputMode,
    pub(crate) timeout: Option<Duration>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) grace: Duration,
    pub(crate) max_memory: usize,
    pub(crate) spill_cap: u64,
    pub(crate) purpose: String,
    pub(crate) pty: Option<PtySize>,
    pub(crate) limits: Limits,
    pub(crate) keep_descendants: bool,
    pub(crate) install: Option<Install>,
}

impl RunSpec {
    /// Runs `argv[0]` (searched on the command's `PATH`, as
    /// [`Command::new`](crate::Command::new)) with the rest as arguments,
    /// no shell.
    /// An empty argv fails at [`run`](crate::registry::Registry::run) with
    /// [`Error::InvalidInput`](crate::Error::InvalidInput).
    pub fn argv<I, S>(argv: I) -> RunSpec
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        RunSpec::new(CommandLine::Argv(
            argv.into_iter().map(Into::into).collect(),
        ))
    }

    /// Runs `script` with the platform's shell ([`SHELL`]: `/bin/sh -c` on
    /// Unix, `cmd.exe /d /s /c` on Windows).
    pub fn shell(script: impl Into<String>) -> RunSpec {
        RunSpec::new(CommandLine::Shell(script.into()))
    }

    fn new(command: CommandLine) -> RunSpec {
        RunSpec {
            command,
            cwd: None,
            env: Vec::new(),
            env_clear: false,
            stdin: StdinMode::Null,
            output: OutputMode::Merged,
            timeout: None,
            idle_timeout: None,
            grace: DEFAULT_GRACE,
            max_memory: DEFAULT_MAX_MEMORY,
            spill_cap: DEFAULT_SPILL_CAP,
            purpose: "session".to_owned(),
            pty: None,
            limits: Limits::default(),
            keep_descendants: true,
            install: None,
        }
    }

    /// Working directory (default: the owner's). A missing directory fails
    /// at `run` with [`Error::BadCwd`](crate::Error::BadCwd).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> RunSpec {
        self.cwd = Some(dir.into());
        self
    }

    /// Sets an environment variable (on top of the owner's environment
    /// unless [`env_clear`](Self::env_clear)).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> RunSpec {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Starts from an empty environment (`TETHER_SPAWN` is set regardless).
    pub fn env_clear(mut self) -> RunSpec {
        self.env_clear = true;
        self
    }

    /// Standard input (default [`StdinMode::Null`]).
    pub fn stdin(mut self, mode: StdinMode) -> RunSpec {
        self.stdin = mode;
        self
    }

    /// Merged or separate output streams (default [`OutputMode::Merged`]).
    pub fn output(mut self, mode: OutputMode) -> RunSpec {
        self.output = mode;
        self
    }

    /// Hard timeout: when the main process has run this long, the whole
    /// tree is killed and the session ends `timed_out` (default: none).
    pub fn timeout(mut self, timeout: Duration) -> RunSpec {
        self.timeout = Some(timeout);
        self
    }

    /// Idle-output timeout: when the main process is running and no output
    /// arrived for this long, the tree is killed and the session ends
    /// `timed_out` (default: none). Catches silent hangs without killing
    /// long builds that keep printing.
    pub fn idle_timeout(mut self, timeout: Duration) -> RunSpec {
        self.idle_timeout = Some(timeout);
        self
    }

    /// Time between SIGTERM and SIGKILL when this session's tree is killed
    /// by a timeout or the owner's teardown (default 2 s). Explicit kills
    /// pass their own.
    pub fn grace(mut self, grace: Duration) -> RunSpec {
        self.grace = grace;
        self
    }

    /// Bytes of each output stream held in memory (default 1 MiB); older
    /// bytes move to the spill file.
    pub fn max_memory(mut self, bytes: usize) -> RunSpec {
        self.max_memory = bytes;
        self
    }

    /// Bytes of each output stream kept in the spill file (default
    /// 256 MiB; 0: none). Bytes evicted beyond it are counted as dropped.
    pub fn spill_cap(mut self, bytes: u64) -> RunSpec {
        self.spill_cap = bytes;
        self
    }

    /// Why this command runs, written into every process's spawn tag
    /// (default `session`; 1–64 of `[A-Za-z0-9._-]`).
    pub fn purpose(mut self, purpose: impl Into<String>) -> RunSpec {
        self.purpose = purpose.into();
        self
    }

    /// Run on a pseudo-terminal of `size` (default: pipes): for prompts,
    /// REPLs, full-screen programs and anything that checks for a terminal.
    /// The command leads a session with the PTY as its controlling terminal
    /// and as stdin, stdout and stderr, contained like any other. Then:
    ///
    /// - one output stream (what the terminal shows: output and echo,
    ///   `\n` as `\r\n`), and a [`Screen`](crate::terminal::Screen) from
    ///   [`Registry::screen`](crate::registry::Registry::screen);
    /// - stdin is always writable (`stdin` is ignored);
    ///   [`Registry::close_stdin`](crate::registry::Registry::close_stdin)
    ///   sends the terminal's end-of-file character instead of closing;
    ///   [`Registry::keys`](crate::registry::Registry::keys) encodes named
    ///   keys; [`Registry::resize`](crate::registry::Registry::resize)
    ///   changes the size;
    /// - `TERM=xterm-256color`, `PAGER=cat` and `GIT_PAGER=cat` unless
    ///   [`env`](Self::env) sets them ([`AGENT_ENV`](crate::terminal::AGENT_ENV));
    /// - kills send `SIGHUP` and `SIGTERM` together to the whole tree, then
    ///   `SIGKILL` to whatever is alive when the grace ends;
    /// - [`OutputMode::Separate`] is refused (a terminal has one stream).
    pub fn pty(mut self, size: PtySize) -> RunSpec {
        self.pty = Some(size);
        self
    }

    /// Memory, process-count and CPU limits for the whole session
    /// (default: none); see [`Command::limits`](crate::Command::limits).
    /// The session's [`SessionInfo::limits`](crate::registry::SessionInfo::limits)
    /// says how each was enforced.
    pub fn limits(mut self, limits: Limits) -> RunSpec {
        self.limits = limits;
        self
    }

    /// Whether descendants the main process leaves behind run on (still
    /// contained, until the session is killed or its owner ends) — the
    /// default, so a script that starts a server in the background and
    /// exits keeps its server — or are killed the moment it exits, as a
    /// [`Command`]'s are by default ([`Command::keep_descendants`]).
    pub fn keep_descendants(mut self, keep: bool) -> RunSpec {
        self.keep_descendants = keep;
        self
    }

    /// Tag the session's processes as this install's (default:
    /// [`Install::from_env`]), as [`Command::install`].
    pub fn install(mut self, install: Install) -> RunSpec {
        self.install = Some(install);
        self
    }

    /// The command.
    pub fn command(&self) -> &CommandLine {
        &self.command
    }

    /// The working directory, if set ([`cwd`](Self::cwd)).
    pub fn get_cwd(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }

    /// The variables set on top of the owner's environment (or of an
    /// empty one), in the order set; a later entry of a name wins.
    pub fn get_envs(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// Whether the environment starts empty ([`env_clear`](Self::env_clear)).
    pub fn get_env_clear(&self) -> bool {
        self.env_clear
    }

    /// Standard input ([`stdin`](Self::stdin)).
    pub fn get_stdin(&self) -> StdinMode {
        self.stdin
    }

    /// Merged or separate output ([`output`](Self::output)).
    pub fn get_output(&self) -> OutputMode {
        self.output
    }

    /// The hard timeout, if any ([`timeout`](Self::timeout)).
    pub fn get_timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The idle-output timeout, if any ([`idle_timeout`](Self::idle_timeout)).
    pub fn get_idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }

    /// The kill grace ([`grace`](Self::grace)).
    pub fn get_grace(&self) -> Duration {
        self.grace
    }

    /// Bytes of output held in memory ([`max_memory`](Self::max_memory)).
    pub fn get_max_memory(&self) -> usize {
        self.max_memory
    }

    /// Bytes of output kept in the spill file ([`spill_cap`](Self::spill_cap)).
    pub fn get_spill_cap(&self) -> u64 {
        self.spill_cap
    }

    /// The purpose in the spawn tags ([`purpose`](Self::purpose)).
    pub fn get_purpose(&self) -> &str {
        &self.purpose
    }

    /// The PTY's size, if the session runs on one ([`pty`](Self::pty)).
    pub fn get_pty(&self) -> Option<PtySize> {
        self.pty
    }

    /// The limits ([`limits`](Self::limits)).
    pub fn get_limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether leftovers of the main process run on
    /// ([`keep_descendants`](Self::keep_descendants)).
    pub fn get_keep_descendants(&self) -> bool {
        self.keep_descendants
    }

    /// The install, if set ([`install`](Self::install)).
    pub fn get_install(&self) -> Option<&Install> {
        self.install.as_ref()
    }
}

/// As `TryFrom<&Command>`, for the end of a builder chain.
impl TryFrom<&mut Command> for RunSpec {
    type Error = Error;

    fn try_from(command: &mut Command) -> Result<RunSpec> {
        RunSpec::try_from(&*command)
    }
}

/// A [`Command`] as a session: what a [`Registry`](crate::registry::Registry)
/// (or a durable session's holder) runs for it.
///
/// Carried: program and arguments, environment (set, removed, cleared),
/// working directory, purpose, grace, timeout, PTY, limits, whether
/// descendants are kept, install. The session's stdin is a pipe its
/// writer feeds ([`StdinMode::Piped`]) unless the command's is
/// [`Stdio::Null`]; its output is merged and kept by the session. On a
/// PTY, a session's terminal defaults apply ([`AGENT_ENV`](crate::terminal::AGENT_ENV):
/// `TERM=xterm-256color`, `PAGER=cat`, `GIT_PAGER=cat`) unless the command
/// sets those names.
///
/// # Errors
/// [`Error::InvalidInput`] (`what: "command"`), naming the setting, for
/// what a session cannot honour rather than have it silently dropped:
/// stdio inherited or given as a file (a session's streams are its own;
/// stdout and stderr may be left unset or [`Stdio::Piped`]), a
/// containment other than [`ContainmentPolicy::Standard`], a session id,
/// `foreground`, and the Unix extensions (`new_session`, `kill_signals`,
/// `arg0`, `pre_exec`-like hooks, descriptors, credentials, umask,
/// ignored signals).
impl TryFrom<&Command> for RunSpec {
    type Error = Error;

    fn try_from(command: &Command) -> Result<RunSpec> {
        let refuse = |setting: &str| {
            Err(Error::InvalidInput {
                what: "command",
                reason: format!("{setting} cannot be carried into a session"),
            })
        };
        if command
            .stdin
            .as_ref()
            .is_some_and(|s| !matches!(s, Stdio::Null | Stdio::Piped))
        {
            return refuse(
                "stdin other than Stdio::Null or Stdio::Piped (a session's stdin is written through it)",
            );
        }
        for (name, stream) in [("stdout", &command.stdout), ("stderr", &command.stderr)] {
            if stream.as_ref().is_some_and(|s| !matches!(s, Stdio::Piped)) {
                return refuse(&format!(
                    "{name} other than Stdio::Piped (a session keeps its output; read it from there)"
                ));
            }
        }
        if command.containment != ContainmentPolicy::Standard {
            return refuse("a containment policy other than Standard");
        }
        if command.session.is_some() {
            return refuse("a session id (the session gets its own)");
        }
        if command.foreground {
            return refuse("foreground (a session has no terminal of its owner's)");
        }
        if command.new_session {
            return refuse("new_session");
        }
        if !matches!(
            command.ladder,
            crate::contain::Ladder::Standard | crate::contain::Ladder::Terminal
        ) {
            return refuse("kill_signals");
        }
        if command.arg0.is_some() {
            return refuse("arg0");
        }
        if command.keeper_hook.is_some() {
            return refuse("a keeper hook");
        }
        let setup = &command.setup;
        if !setup.fds.is_empty()
            || setup.umask.is_some()
            || setup.uid.is_some()
            || setup.gid.is_some()
            || setup.groups.is_some()
            || !setup.ignore_signals.is_empty()
            || setup.keeper_env
        {
            return refuse(
                "a Unix spawn setting (descriptors, umask, uid, gid, groups, ignored signals, keeper environment)",
            );
        }
        let mut argv = vec![command.program.clone()];
        argv.extend(command.args.iter().cloned());
        let mut spec = RunSpec::argv(argv)
            .purpose(command.purpose.clone())
            .grace(command.grace)
            .limits(command.limits)
            .keep_descendants(command.keep_descendants)
            .stdin(match command.stdin {
                Some(Stdio::Null) => StdinMode::Null,
                _ => StdinMode::Piped,
            });
        if command.env.values().any(Option::is_none) && !command.env_clear {
            // A removal: a session's environment is built by adding to
            // the owner's, so the owner's is taken now (the session
            // starts now) without the removed names.
            spec = spec.env_clear();
            for (key, value) in std::env::vars_os() {
                if !command.env.contains_key(&key) {
                    spec = spec.env(key, value);
                }
            }
        } else if command.env_clear {
            spec = spec.env_clear();
        }
        for (key, value) in &command.env {
            if let Some(value) = value {
                spec = spec.env(key.clone(), value.clone());
            }
        }
        if let Some(cwd) = &command.cwd {
            spec = spec.cwd(cwd.clone());
        }
        if let Some(timeout) = command.timeout {
            spec = spec.timeout(timeout);
        }
        if let Some(size) = command.pty {
            spec = spec.pty(size);
        }
        if let Some(install) = &command.install {
            spec = spec.install(install.clone());
        }
        Ok(spec)
    }
}
