//! What a [`Registry`](crate::registry::Registry) session runs: the command, its
//! environment and the limits it runs under.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::command::DEFAULT_GRACE;
use crate::limits::Limits;
use crate::output::{DEFAULT_MAX_MEMORY, DEFAULT_SPILL_CAP};
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

    /// The command.
    pub fn command(&self) -> &CommandLine {
        &self.command
    }
}
