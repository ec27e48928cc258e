//! What to run: the `Command` builder, mirroring `std::process::Command`.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::child::Child;
use crate::contain::Ladder;
use crate::containment::ContainmentPolicy;
use crate::error::Result;
use crate::exit::{ExitStatus, Output};
use crate::install::Install;
use crate::limits::Limits;
use crate::session_id::SessionId;
use crate::stdio::Stdio;
use crate::terminal::PtySize;

/// Default grace between the first signal of a kill and the forced end.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// A command to run contained: what, where, with which environment, and
/// how its tree is held and ended.
///
/// Like `std::process::Command`, plus: a purpose (written into the spawn
/// tag), a grace period for kills (default 2 s), an optional timeout, a
/// containment policy, and what becomes of descendants when the main process
/// exits (killed, by default). Spawning never forks the calling process: a
/// keeper does all per-child setup (see [`crate::keeper`]).
///
/// Unlike `std::process::Command`, the command gets no descriptor of this
/// process besides its three stdio streams — as Python's `subprocess`
/// with `close_fds=True`, and as on Windows: one left inheritable (a make
/// jobserver's, systemd's `LISTEN_FDS`) is not passed on. The keeper closes
/// them as it starts, so it holds none either (a warm keeper lives as long
/// as its owner).
#[derive(Debug)]
pub struct Command {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    pub(crate) env_clear: bool,
    pub(crate) env: BTreeMap<OsString, Option<OsString>>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) stdin: Option<Stdio>,
    pub(crate) stdout: Option<Stdio>,
    pub(crate) stderr: Option<Stdio>,
    pub(crate) purpose: String,
    pub(crate) grace: Duration,
    pub(crate) timeout: Option<Duration>,
    pub(crate) containment: ContainmentPolicy,
    pub(crate) keep_descendants: bool,
    pub(crate) new_session: bool,
    pub(crate) ladder: Ladder,
    pub(crate) foreground: bool,
    pub(crate) session: Option<SessionId>,
    pub(crate) install: Option<Install>,
    pub(crate) pty: Option<PtySize>,
    pub(crate) limits: Limits,
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
            ladder: Ladder::Standard,
            foreground: false,
            session: None,
            install: None,
            pty: None,
            limits: Limits::default(),
        }
    }

    /// A command running `script` with the platform's shell: `/bin/sh -c`
    /// on Unix, `cmd.exe /d /s /c` on Windows (the script passed verbatim,
    /// with cmd's own quoting). See [`SHELL`](crate::registry::SHELL).
    pub fn shell(script: &str) -> Command {
        let argv = crate::contain::shell::argv(script);
        let mut command = Command::new(&argv[0]);
        command.args(&argv[1..]);
        command
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

    /// Time between the rungs of a kill (default 2 s): the polite request
    /// (`SIGTERM`), then the forced end (`SIGKILL`).
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

    /// How to hold the tree (default [`ContainmentPolicy::Standard`]).
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

    /// Run as the foreground job of this process's terminal, as a shell
    /// runs one (default: off). When stdin is a terminal and this process
    /// holds its foreground, the command's process group gets it — so the
    /// command can read it, and Ctrl-C and Ctrl-Z reach it directly — a
    /// job-control stop of the command stops this process's job too (the
    /// shell's `fg` resumes both), and the terminal comes back when the
    /// command exits or is killed, whatever the way out. Unix; a no-op
    /// elsewhere. Not with a PID namespace (its stops are not seen).
    pub fn foreground(&mut self, yes: bool) -> &mut Command {
        self.foreground = yes;
        self
    }

    /// Run on a new pseudo-terminal of `size` instead of the configured
    /// stdio (default: off). The command becomes the leader of a session of
    /// its own with the PTY as its controlling terminal and as stdin,
    /// stdout and stderr; it is contained exactly like any other command.
    /// The owner's end is [`Child::pty`]. Kills climb `SIGHUP` → `SIGTERM`
    /// → `SIGKILL` (a hang-up first, as when a terminal closes), unless
    /// [`kill_signals`](crate::unix::CommandExt::kill_signals) says
    /// otherwise. `foreground` does not apply. The environment is the
    /// owner's: set `TERM` if the owner has none.
    ///
    /// Windows: a pseudoconsole (ConPTY) of `size`, attached in the same
    /// `CreateProcessW` that creates the command inside its job; the
    /// command is not a console process group of its own (so the Ctrl-C
    /// typed into its console reaches it), and kills begin by closing the
    /// pseudoconsole (`CTRL_CLOSE_EVENT` to its processes), then
    /// `TerminateJobObject` after the grace.
    pub fn pty(&mut self, size: PtySize) -> &mut Command {
        self.pty = Some(size);
        if self.ladder == Ladder::Standard {
            self.ladder = Ladder::Terminal;
        }
        self
    }

    /// Memory, process-count and CPU limits for the whole session — the
    /// command and everything it starts (default: none). Enforced by the
    /// strongest mechanism available here (Linux: a cgroup of the
    /// session's own, v2 or v1; Windows: the session's job) and never
    /// pretended: [`Child::limits`](crate::Child::limits) says per limit how
    /// it is enforced, or `none` and why. A limit the session runs into is
    /// [`ExitStatus::limit_hit`](crate::ExitStatus::limit_hit). Invalid
    /// values fail at spawn with [`Error::InvalidInput`](crate::Error::InvalidInput).
    pub fn limits(&mut self, limits: Limits) -> &mut Command {
        self.limits = limits;
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
}
