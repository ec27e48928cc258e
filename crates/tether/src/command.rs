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
///
/// Defaults, as `std::process::Command`'s where it has one: the owner's
/// environment and working directory, inherited stdio (`output` pipes
/// stdout and stderr and gives stdin the null device), no timeout,
/// [`ContainmentPolicy::Standard`], no limits, no PTY, a fresh session id,
/// the install named by the environment ([`Install::from_env`]).
///
/// ```standalone_crate
/// # #[cfg(unix)]
/// # fn main() -> tether::Result<()> {
/// # tether::keeper::run_if_requested();
/// use tether::Command;
///
/// let output = Command::new("sh")
///     .args(["-c", "echo \"$GREETING from $(pwd)\"; echo oops >&2; exit 3"])
///     .env("GREETING", "hello")
///     .current_dir("/")
///     .output()?;
/// assert_eq!(output.stdout, b"hello from /\n");
/// assert_eq!(output.stderr, b"oops\n");
/// assert_eq!(output.status.code(), Some(3));
/// # #[cfg(target_os = "linux")]
/// # tether_testkit::assert_nothing_left();
/// # Ok(())
/// # }
/// # #[cfg(not(unix))]
/// # fn main() {}
/// ```
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
    /// Unix: `argv[0]` when it is not the program as given.
    pub(crate) arg0: Option<OsString>,
    /// Unix: the command's side of the spawn beyond the usual.
    pub(crate) setup: crate::contain::ChildSetup,
    /// Unix: run in a fresh keeper's process before its exec.
    pub(crate) keeper_hook: Option<crate::contain::KeeperHook>,
}

impl Command {
    /// A command running `program`: a path (relative to the working
    /// directory) if it contains a `/` (Windows: a `\` too), else the first
    /// executable of that name on the command's `PATH` — the owner's,
    /// unless [`env`](Self::env) changes it. Nothing is checked until
    /// [`spawn`](Self::spawn).
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
            arg0: None,
            setup: crate::contain::ChildSetup::default(),
            keeper_hook: None,
        }
    }

    /// A command running `script` with the platform's shell: `/bin/sh -c`
    /// on Unix, `cmd.exe /d /s /c` on Windows (the script passed verbatim,
    /// with cmd's own quoting). See [`SHELL`](crate::registry::SHELL).
    ///
    /// ```standalone_crate
    /// # #[cfg(unix)]
    /// # fn main() -> tether::Result<()> {
    /// # tether::keeper::run_if_requested();
    /// let output = tether::Command::shell("echo $((6 * 7))").output()?;
    /// assert_eq!(output.stdout, b"42\n");
    /// # #[cfg(target_os = "linux")]
    /// # tether_testkit::assert_nothing_left();
    /// # Ok(())
    /// # }
    /// # #[cfg(not(unix))]
    /// # fn main() {}
    /// ```
    pub fn shell(script: &str) -> Command {
        let argv = crate::contain::shell::argv(script);
        let mut command = Command::new(&argv[0]);
        command.args(&argv[1..]);
        command
    }

    /// Adds an argument. One containing a NUL byte fails at spawn with
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) (`what:
    /// "argument"`).
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments (as [`arg`](Self::arg), each).
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable, on top of the owner's environment
    /// (unless [`env_clear`](Self::env_clear)). A name or value with a NUL
    /// byte fails at spawn with [`Error::InvalidInput`](crate::Error::InvalidInput)
    /// (`what: "environment"`). `TETHER_SPAWN` cannot be set: the spawn tag
    /// always wins.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Command {
        self.env
            .insert(key.as_ref().to_owned(), Some(value.as_ref().to_owned()));
        self
    }

    /// Sets environment variables (as [`env`](Self::env), each).
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
    /// `TETHER_SPAWN` cannot be removed.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Command {
        self.env.insert(key.as_ref().to_owned(), None);
        self
    }

    /// Starts from an empty environment instead of the owner's.
    /// `TETHER_SPAWN` is always set regardless. Without a `PATH` the
    /// program is searched on the platform's default path.
    pub fn env_clear(&mut self) -> &mut Command {
        self.env_clear = true;
        self.env.clear();
        self
    }

    /// Sets the working directory (default: the owner's). Checked before
    /// anything starts: a path that does not exist or is not a directory
    /// fails [`spawn`](Self::spawn) with [`Error::BadCwd`](crate::Error::BadCwd).
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
    /// 1–64 of `[A-Za-z0-9._-]`; anything else fails at spawn with
    /// [`Error::InvalidInput`](crate::Error::InvalidInput). `tether ps`
    /// shows it, `tether reap --purpose` selects by it, and a purpose a
    /// person may be using (`interactive`, `shell`, `repl`, …) is never
    /// reaped.
    pub fn purpose(&mut self, purpose: &str) -> &mut Command {
        self.purpose = purpose.to_owned();
        self
    }

    /// How long a kill waits for the tree to end after the polite request
    /// (`SIGTERM`) before the forced end (`SIGKILL`) of what is left
    /// (default 2 s). An upper bound: the kill is over the moment the tree
    /// is empty. Also used on timeout, when the owner disappears, and for
    /// descendants left behind by the main process.
    pub fn grace(&mut self, grace: Duration) -> &mut Command {
        self.grace = grace;
        self
    }

    /// Kill the whole tree if the main process runs longer than this
    /// (default: no timeout). The kill climbs the ladder with the
    /// [`grace`](Self::grace), and the exit status then reports
    /// [`timed_out`](crate::ExitStatus::timed_out) — not an error.
    ///
    /// ```standalone_crate
    /// # #[cfg(unix)]
    /// # fn main() -> tether::Result<()> {
    /// # tether::keeper::run_if_requested();
    /// use std::time::Duration;
    ///
    /// let status = tether::Command::new("sleep")
    ///     .arg("1000")
    ///     .timeout(Duration::from_millis(100))
    ///     .grace(Duration::from_millis(100))
    ///     .status()?;
    /// assert!(status.timed_out());
    /// assert!(!status.success());
    /// # #[cfg(target_os = "linux")]
    /// # tether_testkit::assert_nothing_left();
    /// # Ok(())
    /// # }
    /// # #[cfg(not(unix))]
    /// # fn main() {}
    /// ```
    pub fn timeout(&mut self, timeout: Duration) -> &mut Command {
        self.timeout = Some(timeout);
        self
    }

    /// How to hold the tree (default [`ContainmentPolicy::Standard`]).
    /// [`ContainmentPolicy::PidNamespace`] where the kernel refuses one, and
    /// [`ContainmentPolicy::Uncontained`] on Unix, fail at spawn with
    /// [`Error::ContainmentUnavailable`](crate::Error::ContainmentUnavailable);
    /// [`Child::containment`](crate::Child::containment) says what was had.
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
    /// The owner's end is [`Child::pty`]. Kills send `SIGHUP` and `SIGTERM`
    /// together (a hang-up, as when a terminal closes, and the polite
    /// request a `nohup` process still obeys), then `SIGKILL`, unless
    /// [`kill_signals`] says otherwise. `foreground` does not apply. The environment is the
    /// owner's: set `TERM` if the owner has none.
    ///
    /// Windows: a pseudoconsole (ConPTY) of `size`, attached in the same
    /// `CreateProcessW` that creates the command inside its job; the
    /// command is not a console process group of its own (so the Ctrl-C
    /// typed into its console reaches it), and kills begin by closing the
    /// pseudoconsole (`CTRL_CLOSE_EVENT` to its processes), then
    /// `TerminateJobObject` after the grace.
    ///
    /// ```standalone_crate
    /// # #[cfg(unix)]
    /// # fn main() -> tether::Result<()> {
    /// # tether::keeper::run_if_requested();
    /// use std::io::Read;
    /// use tether::terminal::PtySize;
    ///
    /// let mut child = tether::Command::new("tty").pty(PtySize::DEFAULT).spawn()?;
    /// let mut pty = child.pty.take().expect("a PTY child has a master");
    /// // Read to end of file: every process holding the terminal is gone.
    /// let mut seen = Vec::new();
    /// pty.read_to_end(&mut seen)?;
    /// assert!(child.wait()?.success());
    /// assert!(String::from_utf8_lossy(&seen).starts_with("/dev/"));
    /// # #[cfg(target_os = "linux")]
    /// # tether_testkit::assert_nothing_left();
    /// # Ok(())
    /// # }
    /// # #[cfg(not(unix))]
    /// # fn main() {}
    /// ```
    #[cfg_attr(unix, doc = "[`kill_signals`]: crate::unix::CommandExt::kill_signals")]
    #[cfg_attr(
        not(unix),
        doc = "[`kill_signals`]: https://docs.rs/process-tether/latest/tether/unix/trait.CommandExt.html#tymethod.kill_signals"
    )]
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

    /// Use this session id in the spawn tag (default: a fresh one,
    /// [`SessionId::generate`]). Processes are attributed to sessions by
    /// this id: keep it unique.
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

    /// Starts the command. Returns once its exec succeeded, with the tree
    /// contained from the command's first instruction. Dropping the
    /// [`Child`] kills the tree; [`Child::wait`] or [`Child::kill`] say how
    /// it ended.
    ///
    /// # Errors
    /// Nothing is left running when it fails:
    /// - [`Error::ProgramNotFound`](crate::Error::ProgramNotFound) (with the
    ///   `PATH` searched), [`Error::NotExecutable`](crate::Error::NotExecutable),
    ///   [`Error::BadCwd`](crate::Error::BadCwd) — checked before any
    ///   process starts;
    /// - [`Error::InvalidInput`](crate::Error::InvalidInput) for an empty
    ///   program, a bad purpose or limit, or an argument or environment
    ///   entry the OS cannot take (a NUL byte);
    /// - [`Error::ContainmentUnavailable`](crate::Error::ContainmentUnavailable)
    ///   for a containment this system cannot give;
    /// - [`Error::KeeperNotFound`](crate::Error::KeeperNotFound) /
    ///   [`Error::Keeper`](crate::Error::Keeper) when no keeper can be
    ///   started or talked to (see [the crate docs](crate#finding-the-keeper));
    /// - [`Error::Spawn`](crate::Error::Spawn) when a step in the keeper
    ///   failed (`exec`, `chdir`, `fork`, `setup`, `pid namespace`, `stdio`,
    ///   `cgroup`), with the OS error.
    ///
    /// ```standalone_crate
    /// # #[cfg(unix)]
    /// # fn main() -> tether::Result<()> {
    /// # tether::keeper::run_if_requested();
    /// match tether::Command::new("no-such-program-here").spawn() {
    ///     Err(tether::Error::ProgramNotFound { program, path_searched }) => {
    ///         assert_eq!(program, "no-such-program-here");
    ///         assert!(!path_searched.is_empty());
    ///     }
    ///     other => panic!("expected ProgramNotFound, got {other:?}"),
    /// }
    ///
    /// let mut child = tether::Command::new("sleep").arg("1000").spawn()?;
    /// assert!(child.try_wait()?.is_none());
    /// child.kill()?;
    /// # #[cfg(target_os = "linux")]
    /// # tether_testkit::assert_nothing_left();
    /// # Ok(())
    /// # }
    /// # #[cfg(not(unix))]
    /// # fn main() {}
    /// ```
    pub fn spawn(&mut self) -> Result<Child> {
        self.spawn_with(Stdio::Inherit, Stdio::Inherit)
    }

    /// [`spawn`](Self::spawn), for a caller that goes on to
    /// [`wait`](Child::wait) for the child on this same thread, soon
    /// (within tens of milliseconds) and until it finished — what
    /// [`status`](Self::status) does, `tether run`, and Python's
    /// `tether.run`. That wait — whole, in [`wait_timeout`](Child::wait_timeout)
    /// slices, or [`try_wait`](Child::try_wait) polls at least every
    /// 200 ms — then also watches the child's keeper, resuming it if
    /// something stopped it, as a thread of tether's otherwise would; that
    /// thread is not started (~0.15 ms of a spawn). A child spawned this way that is not waited
    /// for on this thread has no such watch until it is; use
    /// [`spawn`](Self::spawn) for a child you hand out, poll with
    /// [`try_wait`](Child::try_wait) or wait for elsewhere.
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn).
    pub fn spawn_attended(&mut self) -> Result<Child> {
        crate::contain::attended(|| self.spawn())
    }

    /// Runs to completion with inherited stdio (unless set); returns the
    /// exit status once the main process exited and the descendants it
    /// left are dead ([`Child::wait`]).
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn), then as [`Child::wait`]. A non-zero exit,
    /// a signal or a timeout is a status, not an error.
    pub fn status(&mut self) -> Result<ExitStatus> {
        // This thread waits at once and the child never leaves here: the
        // wait guards the keeper, no thread need be started for it.
        self.spawn_attended()?.wait()
    }

    /// Runs to completion capturing stdout and stderr (stdin null unless
    /// set). Both are read to end of file — which comes when the last
    /// holder of the pipe is gone, leftovers of the main process included
    /// (they are killed unless [kept](Self::keep_descendants)).
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn), then as [`Child::wait_with_output`].
    pub fn output(&mut self) -> Result<Output> {
        let child = self.spawn_with(Stdio::Null, Stdio::Piped)?;
        child.wait_with_output()
    }
}
