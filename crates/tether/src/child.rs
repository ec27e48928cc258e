//! A running contained command: waiting, killing, its stdio, its status.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout};

use crate::command::Containment;
use crate::contain::link::{KeeperLink, Sender};
use crate::contain::protocol::{Event, Request, Scope, Termination};
use crate::error::{Error, Result, Survivor};
use crate::identity::ProcessIdentity;
use crate::session_id::SessionId;

/// How a command's main process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitStatus {
    termination: Termination,
    timed_out: bool,
    descendants_killed: u32,
}

impl ExitStatus {
    /// The exit code, if the process exited normally.
    pub fn code(&self) -> Option<i32> {
        match self.termination {
            Termination::Code(c) => Some(c),
            Termination::Signal(_) => None,
        }
    }

    /// The signal that killed it, if one did (always `None` on Windows).
    pub fn signal(&self) -> Option<i32> {
        match self.termination {
            Termination::Signal(s) => Some(s),
            Termination::Code(_) => None,
        }
    }

    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.code() == Some(0)
    }

    /// Whether the command was killed because its timeout passed.
    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// How many descendants (not the main process) a kill signalled before
    /// the tree was empty — e.g. the leftovers killed after the main
    /// process exited.
    pub fn descendants_killed(&self) -> u32 {
        self.descendants_killed
    }
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.termination {
            Termination::Code(c) => write!(f, "exit code {c}")?,
            Termination::Signal(s) => write!(f, "signal {s}")?,
        }
        if self.timed_out {
            write!(f, " (timed out)")?;
        }
        Ok(())
    }
}

/// Everything a finished command wrote, and how it ended.
#[derive(Clone, Debug)]
pub struct Output {
    /// How it ended.
    pub status: ExitStatus,
    /// All of its standard output.
    pub stdout: Vec<u8>,
    /// All of its standard error.
    pub stderr: Vec<u8>,
    /// Bytes of stdout dropped from the front to stay within a limit
    /// ([`Child::wait_with_output_limited`]); 0 otherwise.
    pub stdout_dropped: u64,
    /// Bytes of stderr dropped from the front likewise.
    pub stderr_dropped: u64,
}

macro_rules! stdio_handle {
    ($name:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug)]
        pub struct $name(File);

        impl From<OwnedFd> for $name {
            fn from(fd: OwnedFd) -> $name {
                $name(File::from(fd))
            }
        }

        impl From<$name> for OwnedFd {
            fn from(handle: $name) -> OwnedFd {
                handle.0.into()
            }
        }

        impl AsFd for $name {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.0.as_fd()
            }
        }

        impl AsRawFd for $name {
            fn as_raw_fd(&self) -> RawFd {
                self.0.as_raw_fd()
            }
        }
    };
}

stdio_handle!(ChildStdin, "The owner's end of a child's piped stdin.");
stdio_handle!(ChildStdout, "The owner's end of a child's piped stdout.");
stdio_handle!(ChildStderr, "The owner's end of a child's piped stderr.");

impl Write for ChildStdin {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Read for ChildStdout {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Read for ChildStderr {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

/// A contained command started by [`Command::spawn`](crate::Command::spawn).
///
/// Dropping a `Child` cuts its lifeline: its keeper kills the whole tree
/// (with the grace) and exits. Call [`wait`](Child::wait) or
/// [`kill`](Child::kill) to know how it ended.
#[derive(Debug)]
pub struct Child {
    link: KeeperLink,
    identity: ProcessIdentity,
    containment: Containment,
    session: SessionId,
    program: String,
    grace: Duration,
    main: Option<(Termination, bool)>,
    settled: Option<u32>,
    keep_descendants: bool,
    /// The child's stdin, if piped.
    pub stdin: Option<ChildStdin>,
    /// The child's stdout, if piped.
    pub stdout: Option<ChildStdout>,
    /// The child's stderr, if piped.
    pub stderr: Option<ChildStderr>,
}

impl Child {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        link: KeeperLink,
        identity: ProcessIdentity,
        containment: Containment,
        session: SessionId,
        program: String,
        stdin: Option<ChildStdin>,
        stdout: Option<ChildStdout>,
        stderr: Option<ChildStderr>,
        grace: Duration,
        keep_descendants: bool,
    ) -> Child {
        Child {
            link,
            identity,
            containment,
            session,
            program,
            grace,
            main: None,
            settled: None,
            keep_descendants,
            stdin,
            stdout,
            stderr,
        }
    }

    /// The main process's pid (in tether's pid namespace).
    pub fn id(&self) -> u32 {
        self.identity.pid
    }

    /// The main process's full identity.
    pub fn identity(&self) -> &ProcessIdentity {
        &self.identity
    }

    /// Which mechanism holds this child's tree.
    pub fn containment(&self) -> Containment {
        self.containment
    }

    /// The session id written into every process's spawn tag.
    pub fn session_id(&self) -> &SessionId {
        &self.session
    }

    /// The keeper's pid (for diagnostics and tests).
    pub fn keeper_pid(&self) -> Option<u32> {
        self.link.keeper_pid()
    }

    /// A handle that can signal or start killing this child from another
    /// thread while this one waits.
    pub fn handle(&self) -> ChildHandle {
        ChildHandle {
            sender: self.link.sender(),
            grace: self.grace,
        }
    }

    /// Waits for the main process to exit — and, unless descendants are
    /// kept, for the descendants it left to be killed — and returns its
    /// status. Closes stdin first so a child reading it sees EOF.
    pub fn wait(&mut self) -> Result<ExitStatus> {
        drop(self.stdin.take());
        loop {
            if let Some(status) = self.finished() {
                return Ok(status);
            }
            self.next_event(None)?;
        }
    }

    /// The status if the child has finished (see [`wait`](Child::wait)),
    /// without blocking.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        while self.finished().is_none() {
            if !self.next_event(Some(Duration::ZERO))? {
                break;
            }
        }
        Ok(self.finished())
    }

    /// Kills the whole tree with the grace given to the command: SIGTERM
    /// (and SIGCONT) to every process, SIGKILL to whatever is left after
    /// the grace, repeated until nothing of the session remains. Returns
    /// only once the tree is verified empty; otherwise
    /// [`Error::KillIncomplete`] lists the survivors and the child stays
    /// killable. Also works after the main process exited (kills leftovers).
    pub fn kill(&mut self) -> Result<()> {
        self.kill_with_grace(self.grace)
    }

    /// [`kill`](Child::kill) with an explicit grace (zero: SIGKILL at once).
    pub fn kill_with_grace(&mut self, grace: Duration) -> Result<()> {
        self.start_kill_with_grace(grace);
        self.finish_kill()
    }

    /// Asks the keeper to start the kill ladder, without waiting. No-op
    /// once the tree is known to be empty.
    pub(crate) fn start_kill_with_grace(&self, grace: Duration) {
        if self.settled.is_some() {
            return;
        }
        let request = Request::Kill {
            signal: libc::SIGTERM,
            scope: Scope::Tree,
            grace_ms: grace.as_millis() as u64,
        };
        // A send error means the keeper already finished; its last events
        // are still in the socket and tell how.
        let _ = self.link.send(&request, &[]);
    }

    /// Blocks until a kill started with
    /// [`start_kill_with_grace`](Child::start_kill_with_grace) verified the
    /// tree empty, or reports the survivors.
    pub(crate) fn finish_kill(&mut self) -> Result<()> {
        loop {
            if self.settled.is_some() {
                return Ok(());
            }
            match self.link.recv(None) {
                Ok(Some(Event::KillFailed { survivors })) => {
                    let survivors = survivors
                        .into_iter()
                        .map(|(pid, cmd)| Survivor {
                            pid,
                            command: String::from_utf8_lossy(&cmd).into_owned(),
                        })
                        .collect();
                    return Err(Error::KillIncomplete { survivors });
                }
                Ok(Some(event)) => self.absorb(event),
                Ok(None) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Err(self.keeper_lost());
                }
                Err(e) => return Err(Error::Keeper(e)),
            }
        }
    }

    /// Waits for the child, reading all of its piped stdout and stderr.
    pub fn wait_with_output(self) -> Result<Output> {
        self.wait_with_output_limited(usize::MAX)
    }

    /// Like [`wait_with_output`](Child::wait_with_output), keeping only the
    /// last `max_per_stream` bytes of each stream in memory (the rest is
    /// read and counted in `stdout_dropped` / `stderr_dropped`).
    pub fn wait_with_output_limited(mut self, max_per_stream: usize) -> Result<Output> {
        drop(self.stdin.take());
        let (stdout, stderr) = read_both(self.stdout.take(), self.stderr.take(), max_per_stream)?;
        let status = self.wait()?;
        Ok(Output {
            status,
            stdout: stdout.0,
            stderr: stderr.0,
            stdout_dropped: stdout.1,
            stderr_dropped: stderr.1,
        })
    }

    fn finished(&self) -> Option<ExitStatus> {
        let (termination, timed_out) = self.main?;
        if self.settled.is_none() && !self.keep_descendants {
            return None;
        }
        Some(ExitStatus {
            termination,
            timed_out,
            descendants_killed: self.settled.unwrap_or(0),
        })
    }

    /// Reads one event (waiting at most `timeout`); `false` if none came.
    fn next_event(&mut self, timeout: Option<Duration>) -> Result<bool> {
        match self.link.recv(timeout) {
            Ok(Some(event)) => {
                self.absorb(event);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(self.keeper_lost()),
            Err(e) => Err(Error::Keeper(e)),
        }
    }

    fn absorb(&mut self, event: Event) {
        match event {
            Event::MainExited {
                termination,
                timed_out,
            } => self.main = Some((termination, timed_out)),
            Event::TreeEmpty { killed } => {
                self.settled = Some(killed);
                // The keeper waits for another command: recycle or release it.
                self.link.finish(self.containment == Containment::Subreaper);
            }
            Event::Started { .. } | Event::SpawnFailed { .. } | Event::KillFailed { .. } => {}
        }
    }

    /// The keeper died without reporting an empty tree. With a PID
    /// namespace the kernel took the tree down with it. Otherwise its
    /// orphans went to the nearest subreaper (or init): find every process
    /// carrying this session's tag and kill it.
    fn keeper_lost(&mut self) -> Error {
        self.link.reap();
        let orphans_killed = crate::contain::kill_tagged(self.session.as_str());
        Error::KeeperLost { orphans_killed }
    }

    /// The keeper socket, for an event loop to wait on (readable = call
    /// [`poll_progress`](Child::poll_progress)).
    pub(crate) fn event_fd(&self) -> BorrowedFd<'_> {
        self.link.event_fd()
    }

    /// Reads one keeper event if one is ready, without blocking, and says
    /// what it changed. `Ok(None)`: nothing ready. A lost keeper is
    /// [`Error::KeeperLost`] (its orphans already killed), as in `wait`.
    pub(crate) fn poll_progress(&mut self) -> Result<Option<Progress>> {
        let event = match self.link.recv(Some(Duration::ZERO)) {
            Ok(Some(event)) => event,
            Ok(None) => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(self.keeper_lost()),
            Err(e) => return Err(Error::Keeper(e)),
        };
        let progress = match &event {
            Event::MainExited {
                termination,
                timed_out,
            } => Progress::MainExited(ExitStatus {
                termination: *termination,
                timed_out: *timed_out,
                descendants_killed: 0,
            }),
            Event::TreeEmpty { killed } => Progress::Settled { killed: *killed },
            Event::KillFailed { survivors } => Progress::KillFailed(
                survivors
                    .iter()
                    .map(|(pid, cmd)| Survivor {
                        pid: *pid,
                        command: String::from_utf8_lossy(cmd).into_owned(),
                    })
                    .collect(),
            ),
            Event::Started { .. } | Event::SpawnFailed { .. } => Progress::Other,
        };
        self.absorb(event);
        Ok(Some(progress))
    }

    /// The program as given (for reports).
    pub fn program(&self) -> &str {
        &self.program
    }
}

/// What one keeper event changed (see [`Child::poll_progress`]).
#[derive(Debug)]
pub(crate) enum Progress {
    /// The main process ended.
    MainExited(ExitStatus),
    /// Nothing of the session is left; `killed` descendants were killed.
    Settled { killed: u32 },
    /// A kill gave up on these survivors; the child stays killable.
    KillFailed(Vec<Survivor>),
    /// Nothing a caller needs to act on.
    Other,
}

/// Signals or starts killing a [`Child`] from any thread. Events (the
/// exit, the empty tree) still arrive at the `Child`'s `wait`.
#[derive(Clone, Debug)]
pub struct ChildHandle {
    sender: Arc<Sender>,
    grace: Duration,
}

impl ChildHandle {
    /// Starts the kill ladder on the whole tree without waiting for it.
    pub fn start_kill(&self) -> Result<()> {
        let grace_ms = self.grace.as_millis() as u64;
        self.send(&Request::Kill {
            signal: libc::SIGTERM,
            scope: Scope::Tree,
            grace_ms,
        })
    }

    pub(crate) fn send(&self, request: &Request) -> Result<()> {
        self.sender.send(request, &[]).map_err(Error::Keeper)
    }

    pub(crate) fn grace(&self) -> Duration {
        self.grace
    }
}

/// The last `max` bytes of a stream, and how many came before them.
#[derive(Default)]
struct Tail {
    buf: std::collections::VecDeque<u8>,
    dropped: u64,
}

impl Tail {
    fn push(&mut self, bytes: &[u8], max: usize) {
        self.buf.extend(bytes);
        if self.buf.len() > max {
            let excess = self.buf.len() - max;
            self.buf.drain(..excess);
            self.dropped += excess as u64;
        }
    }
}

/// A stream's kept bytes and how many were dropped before them.
type Kept = (Vec<u8>, u64);

/// Reads two pipes to EOF at once, so neither can fill up and block the
/// child while the other is being read.
fn read_both(
    out: Option<ChildStdout>,
    err: Option<ChildStderr>,
    max: usize,
) -> Result<(Kept, Kept)> {
    let mut streams: [(Option<File>, Tail); 2] = [
        (out.map(|o| o.0), Tail::default()),
        (err.map(|e| e.0), Tail::default()),
    ];
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let open: Vec<RawFd> = streams
            .iter()
            .filter_map(|(f, _)| f.as_ref())
            .map(|f| f.as_raw_fd())
            .collect();
        if open.is_empty() {
            break;
        }
        let ready = {
            let files: Vec<&File> = streams.iter().filter_map(|(f, _)| f.as_ref()).collect();
            let mut pfds: Vec<PollFd> = files
                .iter()
                .map(|f| PollFd::new(f.as_fd(), PollFlags::POLLIN))
                .collect();
            match nix::poll::poll(&mut pfds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(io::Error::from(e).into()),
            }
            let ready: Vec<RawFd> = pfds
                .iter()
                .zip(&open)
                .filter(|(p, _)| p.revents().is_some_and(|r| !r.is_empty()))
                .map(|(_, fd)| *fd)
                .collect();
            ready
        };
        for fd in ready {
            let (file, tail) = streams
                .iter_mut()
                .find(|(f, _)| f.as_ref().is_some_and(|f| f.as_raw_fd() == fd))
                .expect("polled descriptors come from `streams`");
            match file.as_mut().map(|f| f.read(&mut chunk)) {
                Some(Ok(0)) | None => *file = None,
                Some(Ok(n)) => tail.push(&chunk[..n], max),
                Some(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Some(Err(e)) => return Err(e.into()),
            }
        }
    }
    let [(_, out), (_, err)] = streams;
    Ok(((out.buf.into(), out.dropped), (err.buf.into(), err.dropped)))
}
