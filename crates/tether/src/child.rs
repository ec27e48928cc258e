//! A running contained command: waiting, killing, its stdio, its status.

use std::time::Duration;

use crate::contain::Descendant;
use crate::contain::{Tree, TreeEvent, TreeHandle};
use crate::containment::Containment;
use crate::error::{Error, Result};
use crate::exit::{Captured, ExitStatus, Output};
use crate::identity::ProcessIdentity;
use crate::limits::{LimitEscape, LimitHit, LimitReport};
use crate::session_id::SessionId;
use crate::stdio::{ChildStderr, ChildStdin, ChildStdout};
use crate::terminal::Pty;

/// A contained command started by [`Command::spawn`](crate::Command::spawn).
///
/// Dropping a `Child` cuts its lifeline: its keeper kills the whole tree
/// (with the grace) and exits. Call [`wait`](Child::wait) or
/// [`kill`](Child::kill) to know how it ended.
///
/// ```standalone_crate
/// # #[cfg(unix)]
/// # fn main() -> tether::Result<()> {
/// # tether::keeper::run_if_requested();
/// use std::io::{BufRead, BufReader};
/// use tether::{Command, Stdio};
///
/// // Two background jobs, then "ready"; the main process waits for them.
/// let mut child = Command::new("sh")
///     .args(["-c", "sleep 1000 & setsid sleep 1000 & echo ready; wait"])
///     .stdout(Stdio::Piped)
///     .spawn()?;
/// let mut line = String::new();
/// BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line)?;
/// assert_eq!(line, "ready\n");
/// assert_eq!(child.descendants().len(), 2); // the setsid'd one included
///
/// // Killed from another thread while this one waits.
/// let handle = child.handle();
/// std::thread::spawn(move || handle.start_kill());
/// let status = child.wait()?;
/// assert!(!status.success());
/// assert_eq!(status.descendants_killed(), 2);
/// # #[cfg(target_os = "linux")]
/// # tether_testkit::assert_nothing_left();
/// # Ok(())
/// # }
/// # #[cfg(not(unix))]
/// # fn main() {}
/// ```
#[derive(Debug)]
pub struct Child {
    pub(crate) tree: Tree,
    session: SessionId,
    program: String,
    grace: Duration,
    keep_descendants: bool,
    progress: Progress,
    /// Processes found outside the session's cgroups, as the keeper
    /// reported when the tree was empty.
    escaped: Vec<LimitEscape>,
    /// The child's stdin, if piped.
    pub stdin: Option<ChildStdin>,
    /// The child's stdout, if piped.
    pub stdout: Option<ChildStdout>,
    /// The child's stderr, if piped.
    pub stderr: Option<ChildStderr>,
    /// The master of the child's terminal, when it was started with
    /// [`Command::pty`](crate::Command::pty).
    pub pty: Option<Pty>,
}

/// What the owner has heard of a child so far.
#[derive(Clone, Copy, Debug, Default)]
struct Progress {
    /// The main process's end, once reported.
    main: Option<ExitStatus>,
    /// The tree is empty; this many descendants were killed.
    settled: Option<u32>,
    /// A limit the session ran into, as last reported.
    limit_hit: Option<LimitHit>,
    /// OOM kills from outside the session's limit, the most reported.
    oom_outside: u32,
    /// What the whole tree used, reported with its end.
    usage: Option<crate::exit::ResourceUsage>,
}

impl Child {
    pub(crate) fn new(
        tree: Tree,
        session: SessionId,
        program: String,
        grace: Duration,
        keep_descendants: bool,
    ) -> Child {
        Child {
            tree,
            session,
            program,
            grace,
            keep_descendants,
            progress: Progress::default(),
            escaped: Vec::new(),
            stdin: None,
            stdout: None,
            stderr: None,
            pty: None,
        }
    }

    /// The main process's pid (in tether's pid namespace; with a PID
    /// namespace of its own the command sees itself as another pid). Valid
    /// while this `Child` lives: the keeper holds the main process's
    /// zombie only until it reported the exit.
    pub fn id(&self) -> u32 {
        self.tree.identity().pid
    }

    /// The main process's full identity.
    pub fn identity(&self) -> &ProcessIdentity {
        self.tree.identity()
    }

    /// Which mechanism holds this child's tree.
    pub fn containment(&self) -> Containment {
        self.tree.containment()
    }

    /// The resource limits applied to this child's session, each with how
    /// it is enforced (see [`Limits`](crate::Limits)).
    pub fn limits(&self) -> &LimitReport {
        self.tree.limits()
    }

    /// The processes of the session found outside its cgroups — out of its
    /// limits — and where each was; known once the tree is empty (after
    /// [`wait`](Self::wait)). Linux: found when the keeper walks the tree
    /// (at a kill, and for what the command left behind when it exited); a
    /// process that left and ended on its own before any walk is not seen.
    pub fn limits_escaped(&self) -> &[LimitEscape] {
        &self.escaped
    }

    /// The session id written into every process's spawn tag.
    pub fn session_id(&self) -> &SessionId {
        &self.session
    }

    /// The keeper's pid (for diagnostics and tests); `None` where there is
    /// no keeper (Windows) or it is gone.
    pub fn keeper_pid(&self) -> Option<u32> {
        self.tree.keeper_pid()
    }

    /// The program as given (for reports).
    pub fn program(&self) -> &str {
        &self.program
    }

    /// Live processes of the tree other than the main process, read now
    /// (Linux: the keeper's descendants; macOS: group, session and tag
    /// members; Windows: the job's processes). Empty once the tree is
    /// empty or the keeper is gone; a snapshot, never something to signal
    /// by pid.
    pub fn descendants(&self) -> Vec<Descendant> {
        self.tree.descendants()
    }

    /// A handle that can start killing this child (and on Unix signal it)
    /// from another thread while this one waits.
    pub fn handle(&self) -> ChildHandle {
        ChildHandle {
            tree: self.tree.handle(),
            grace: self.grace,
        }
    }

    /// Waits for the main process to exit — and, unless descendants are
    /// kept, for the descendants it left to be killed — and returns its
    /// status. Closes stdin first so a child reading it sees EOF. Returns
    /// the same status again when called again.
    ///
    /// # Errors
    /// [`Error::KeeperLost`] if the keeper died without reporting the end
    /// (its orphans are already killed: all of them in a subreaper owner,
    /// the tagged ones otherwise); [`Error::InheritedAcrossFork`] in a
    /// forked child of the owner; [`Error::Keeper`] if reading from the
    /// keeper failed. A non-zero exit, a signal or a timeout is a status,
    /// not an error.
    pub fn wait(&mut self) -> Result<ExitStatus> {
        drop(self.stdin.take());
        loop {
            if let Some(status) = self.finished() {
                return Ok(status);
            }
            self.next_event(None)?;
        }
    }

    /// [`wait`](Child::wait) for at most `timeout`: `Ok(None)` if the child
    /// has not finished by then — or when a signal interrupted the wait, so
    /// a host can run its signal handlers (Python's Ctrl-C) and wait again.
    /// Unlike `wait`, stdin stays open.
    ///
    /// # Errors
    /// As [`wait`](Child::wait).
    /// ```standalone_crate
    /// # #[cfg(unix)]
    /// # fn main() -> tether::Result<()> {
    /// # tether::keeper::run_if_requested();
    /// use std::time::Duration;
    ///
    /// let mut child = tether::Command::new("sleep").arg("1000").spawn()?;
    /// assert_eq!(child.wait_timeout(Duration::from_millis(50))?, None);
    /// child.kill()?;
    /// assert!(child.wait_timeout(Duration::ZERO)?.is_some());
    /// # #[cfg(target_os = "linux")]
    /// # tether_testkit::assert_nothing_left();
    /// # Ok(())
    /// # }
    /// # #[cfg(not(unix))]
    /// # fn main() {}
    /// ```
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.finished() {
                return Ok(Some(status));
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if self.next_event(Some(left))?.is_none() {
                return Ok(self.finished());
            }
        }
    }

    /// Sends `signal` to the main process's process group (the command
    /// and what it started without leaving its group — what a terminal's
    /// Ctrl-C reaches), through the keeper. Unix; on Windows
    /// [`Error::Unsupported`]. To end the whole tree use
    /// [`kill`](Child::kill).
    ///
    /// # Errors
    /// [`Error::Keeper`] once the keeper is gone (the tree is empty).
    pub fn send_signal(&self, signal: i32) -> Result<()> {
        self.handle().send_signal(signal)
    }

    /// The status if the child has finished (see [`wait`](Child::wait)),
    /// without blocking.
    ///
    /// # Errors
    /// As [`wait`](Child::wait).
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        while self.finished().is_none() {
            if self.next_event(Some(Duration::ZERO))?.is_none() {
                break;
            }
        }
        Ok(self.finished())
    }

    /// Kills the whole tree with the grace given to the command: the
    /// command's kill ladder (`SIGTERM`, with `SIGCONT`, on Unix) to every
    /// process, the forced end (`SIGKILL`) to whatever is left after the
    /// grace, repeated until nothing of the session remains. Returns only
    /// once the tree is verified empty; otherwise
    /// [`Error::KillIncomplete`] lists the survivors and the child stays
    /// killable. Also works after the main process exited (kills
    /// leftovers), and on a child already finished (does nothing).
    ///
    /// # Errors
    /// [`Error::KillIncomplete`] with the survivors (a process in
    /// uninterruptible sleep outlives `SIGKILL`; it is reported after a 5 s
    /// verification window); otherwise as [`wait`](Child::wait).
    pub fn kill(&mut self) -> Result<()> {
        self.kill_with_grace(self.grace)
    }

    /// [`kill`](Child::kill) with an explicit grace (zero: the forced end at
    /// once).
    ///
    /// # Errors
    /// As [`kill`](Child::kill).
    pub fn kill_with_grace(&mut self, grace: Duration) -> Result<()> {
        self.start_kill_with_grace(grace);
        self.finish_kill()
    }

    /// Asks the keeper to start the kill ladder, without waiting. No-op
    /// once the tree is known to be empty.
    pub(crate) fn start_kill_with_grace(&self, grace: Duration) {
        if self.progress.settled.is_none() {
            self.tree.start_kill(grace);
        }
    }

    /// Blocks until a kill started with
    /// [`start_kill_with_grace`](Child::start_kill_with_grace) verified the
    /// tree empty, or reports the survivors.
    pub(crate) fn finish_kill(&mut self) -> Result<()> {
        loop {
            if self.progress.settled.is_some() {
                return Ok(());
            }
            if let Some(TreeEvent::KillFailed { survivors }) = self.next_event(None)? {
                return Err(Error::KillIncomplete { survivors });
            }
        }
    }

    /// Waits for the child, reading all of its piped stdout and stderr to
    /// end of file (streams that were not piped come back empty).
    ///
    /// # Errors
    /// [`Error::Io`] if reading a pipe failed; otherwise as
    /// [`wait`](Child::wait).
    pub fn wait_with_output(self) -> Result<Output> {
        self.wait_with_output_limited(usize::MAX)
    }

    /// Like [`wait_with_output`](Child::wait_with_output), keeping only the
    /// last `max_per_stream` bytes of each stream in memory (the rest is
    /// read and counted in `stdout_dropped` / `stderr_dropped`).
    ///
    /// # Errors
    /// As [`wait_with_output`](Child::wait_with_output).
    ///
    /// ```standalone_crate
    /// # #[cfg(unix)]
    /// # fn main() -> tether::Result<()> {
    /// # tether::keeper::run_if_requested();
    /// use tether::{Command, Stdio};
    ///
    /// let child = Command::new("sh")
    ///     .args(["-c", "seq 1 100000"])
    ///     .stdout(Stdio::Piped)
    ///     .spawn()?;
    /// let output = child.wait_with_output_limited(7)?;
    /// assert_eq!(output.stdout, b"100000\n"); // the last 7 bytes
    /// assert_eq!(output.stdout_dropped, 588_888); // the rest, counted
    /// # #[cfg(target_os = "linux")]
    /// # tether_testkit::assert_nothing_left();
    /// # Ok(())
    /// # }
    /// # #[cfg(not(unix))]
    /// # fn main() {}
    /// ```
    pub fn wait_with_output_limited(self, max_per_stream: usize) -> Result<Output> {
        let (captured, status) = self.wait_with_captured_output(max_per_stream);
        Ok(Output {
            status: status?,
            stdout: captured.stdout,
            stderr: captured.stderr,
            stdout_dropped: captured.stdout_dropped,
            stderr_dropped: captured.stderr_dropped,
            limits_escaped: captured.limits_escaped,
        })
    }

    /// Like [`wait_with_output_limited`](Child::wait_with_output_limited),
    /// but what was read is returned however the wait ended — with the
    /// status, or with the error that ended it (a keeper that died:
    /// [`Error::KeeperLost`], its orphans killed and counted).
    ///
    /// The tree's events are followed while the pipes are read: a keeper
    /// that dies while processes of its tree hold the pipes open is
    /// noticed at once, not when they end by themselves — they are killed
    /// then (the owner is their subreaper, or finds them by spawn tag),
    /// which ends the pipes.
    ///
    /// When reading a pipe failed ([`Error::Io`]), the captured bytes are
    /// those read before the failure.
    pub fn wait_with_captured_output(
        mut self,
        max_per_stream: usize,
    ) -> (Captured, Result<ExitStatus>) {
        drop(self.stdin.take());
        // Without a copy of the keeper's socket (no descriptor left), the
        // pipes are read as before: to EOF, then the wait.
        let events = self.event_source();
        let mut ended: Option<Error> = None;
        let (((stdout, stdout_dropped), (stderr, stderr_dropped)), read) =
            crate::contain::read_both(
                self.stdout.take().map(ChildStdout::into_file),
                self.stderr.take().map(ChildStderr::into_file),
                max_per_stream,
                events,
                || self.take_events(&mut ended),
            );
        // A failed read ends the wait without waiting (dropping the child
        // kills the tree); what was read before it is returned all the same.
        let status = match (read, ended) {
            (Err(e), _) => Err(Error::Io(e)),
            (Ok(()), Some(e)) => Err(e),
            (Ok(()), None) => self.wait(),
        };
        let captured = Captured {
            stdout,
            stderr,
            stdout_dropped,
            stderr_dropped,
            limits_escaped: std::mem::take(&mut self.escaped),
        };
        (captured, status)
    }

    /// What to poll for this child's events beside its streams (see
    /// `contain::read_both`); `None` once settled, or without a descriptor
    /// to spare (the streams are then read to their end, as before).
    pub(crate) fn event_source(&self) -> Option<crate::contain::EventSource> {
        self.tree.event_source().ok().flatten()
    }

    /// Takes in every event ready now; says whether to keep watching —
    /// not once the tree is settled (the keeper may serve another session
    /// then) or the wait ended with an error, kept in `ended` (a lost
    /// keeper: its orphans are killed by now, which ends the streams they
    /// held).
    pub(crate) fn take_events(&mut self, ended: &mut Option<Error>) -> bool {
        loop {
            match self.next_event(Some(Duration::ZERO)) {
                Ok(Some(_)) if self.progress.settled.is_some() => return false,
                Ok(Some(_)) => {}
                Ok(None) => return true,
                Err(e) => {
                    *ended = Some(e);
                    return false;
                }
            }
        }
    }

    fn finished(&self) -> Option<ExitStatus> {
        let main = self.progress.main?;
        if self.progress.settled.is_none() && !self.keep_descendants {
            return None;
        }
        Some(ExitStatus {
            descendants_killed: self.progress.settled.unwrap_or(0),
            limit_hit: self.progress.limit_hit,
            oom_outside: self.progress.oom_outside,
            limits_escaped: self.escaped.len() as u32,
            usage: self.progress.usage.or(main.usage),
            ..main
        })
    }

    /// Reads one event (waiting at most `timeout`) and takes it in;
    /// `Ok(None)` if none came.
    fn next_event(&mut self, timeout: Option<Duration>) -> Result<Option<TreeEvent>> {
        let event = self.tree.recv(timeout)?;
        if let Some(event) = &event {
            self.absorb(event);
        }
        Ok(event)
    }

    fn absorb(&mut self, event: &TreeEvent) {
        match event {
            TreeEvent::MainExited {
                termination,
                timed_out,
                limit_hit,
                oom_outside,
                usage,
            } => {
                self.progress.limit_hit = LimitHit::worst(self.progress.limit_hit, *limit_hit);
                self.progress.oom_outside = self.progress.oom_outside.max(*oom_outside);
                self.progress.main = Some(ExitStatus {
                    termination: *termination,
                    timed_out: *timed_out,
                    descendants_killed: 0,
                    limit_hit: *limit_hit,
                    oom_outside: *oom_outside,
                    limits_escaped: 0,
                    usage: *usage,
                })
            }
            TreeEvent::Settled {
                killed,
                limit_hit,
                oom_outside,
                escaped,
                usage,
            } => {
                self.escaped = escaped.clone();
                self.progress.usage = *usage;
                self.progress.limit_hit = LimitHit::worst(self.progress.limit_hit, *limit_hit);
                self.progress.oom_outside = self.progress.oom_outside.max(*oom_outside);
                self.progress.settled = Some(*killed);
            }
            TreeEvent::KillFailed { .. } => {}
        }
    }

    /// Readiness of this child's events, for an async event loop (the
    /// registry's session driver).
    pub(crate) fn watcher(&self) -> std::io::Result<crate::contain::TreeWatcher> {
        self.tree.watcher()
    }

    /// Takes in one event if one is ready, without blocking, and says what
    /// it was. `Ok(None)`: nothing ready. A lost keeper is
    /// [`Error::KeeperLost`] (its orphans already killed), as in `wait`.
    pub(crate) fn poll_event(&mut self) -> Result<Option<TreeEvent>> {
        self.next_event(Some(Duration::ZERO))
    }
}

/// Starts killing a [`Child`] (and, on Unix, signals it) from any thread.
/// Events (the exit, the empty tree) still arrive at the `Child`'s `wait`.
#[derive(Clone, Debug)]
pub struct ChildHandle {
    pub(crate) tree: TreeHandle,
    pub(crate) grace: Duration,
}

impl ChildHandle {
    /// Starts the kill ladder on the whole tree without waiting for it.
    ///
    /// # Errors
    /// [`Error::Keeper`] if the tree's keeper is gone (it finished or died;
    /// the `Child` says which).
    pub fn start_kill(&self) -> Result<()> {
        self.tree.start_kill(self.grace)
    }

    /// [`start_kill`](Self::start_kill) with an explicit grace.
    ///
    /// # Errors
    /// As `start_kill`.
    pub fn start_kill_with_grace(&self, grace: Duration) -> Result<()> {
        self.tree.start_kill(grace)
    }

    /// [`Child::send_signal`] from any thread.
    ///
    /// # Errors
    /// As `Child::send_signal`.
    pub fn send_signal(&self, signal: i32) -> Result<()> {
        self.tree.signal_group(signal)
    }
}
