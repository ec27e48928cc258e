//! The async task that runs one session: reads its output pipes into the
//! [`OutputBuffer`]s, turns keeper events into state, carries out kills and
//! the idle timeout, and publishes the completion — once.
//!
//! # Why one task owns everything
//!
//! Every event of a session (a chunk of output, a keeper message, a kill
//! request, a timer) arrives at this one task, and only it writes the
//! session's state. So the completion is published exactly once, a kill's
//! reason is set before the exit it causes is seen, and there is no lock
//! order between a reader, a reaper and a killer to get wrong. No thread per
//! session: the pipes and the keeper socket are registered with the tokio
//! reactor (through `contain`'s async pipe ends and tree watcher), so an
//! idle session costs a parked future.
//!
//! # When the output is complete
//!
//! * At the main process's exit, every byte *it* wrote is already in the
//!   pipe (a `write` to a pipe completes before the writer can exit), and a
//!   pipe holds at most its capacity. So the driver reads up to one pipe
//!   capacity without waiting and publishes: nothing of the main process
//!   is missed, and no guessed "idle after exit" window is involved.
//! * Descendants the main process left keep writing; their bytes keep
//!   flowing into the same stream. The read end is closed at EOF — when the
//!   last writer is gone — and never before, so we never make a writer
//!   fail with `EPIPE`/`SIGPIPE`.
//! * A kill (or timeout) is answered only after the keeper verified the
//!   tree empty *and* the reader drained the pipes to EOF (imminent then:
//!   every writer is dead), so bytes written before the kill are never lost
//!   to the race.

use std::cell::RefCell;
use std::io;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{mpsc, oneshot};

use super::{Control, KillOutcome, KillReason, Session, SessionState, Stream, lock};
use crate::contain::{AsyncReader, TreeEvent, TreeWatcher};
use crate::error::{Error, Result};
use crate::exit::ExitStatus;
use crate::limits::LimitHit;
use crate::session_id::SessionId;

/// Size of one read from an output pipe: the pipe capacity asked for (one
/// buffer per worker thread, not per session).
const READ_CHUNK: usize = 256 << 10;
/// Reads per wake-up before the driver looks at its other events, so a
/// child writing flat out cannot starve a kill request.
const READS_PER_WAKE: usize = 8;

/// What the driver tells the registry.
pub(crate) trait Owner: Send + Sync + 'static {
    /// The session settled: it now counts as finished for retention.
    fn settled(&self, id: &SessionId);
    /// The session's retention time passed: evict it.
    fn expired(&self, id: &SessionId);
}

/// One output pipe's read end.
struct Pipe {
    fd: AsyncReader,
    stream: Stream,
}

/// The task's state. Fields are the driver's alone; the session's shared
/// state is written only from here.
pub(crate) struct Driver {
    session: Arc<Session>,
    owner: Weak<dyn Owner>,
    keeper: Option<TreeWatcher>,
    pipes: [Option<Pipe>; 2],
    /// A PTY's master, read to EOF while the main process still runs: held
    /// (not read) until it has exited. Closing the last master fd hangs
    /// the terminal up — `SIGHUP` to its session — and EOF comes as soon as
    /// no process holds the slave, which a program reaches *before* it
    /// exits when it closes its terminal first (GNU `cat` and every tool
    /// using gnulib's `close_stdout`): it was then killed by `SIGHUP`
    /// instead of exiting 0 (2 runs in 25 under load).
    held_master: Option<AsyncReader>,
    control: mpsc::UnboundedReceiver<Control>,
    idle: Option<Duration>,
    last_output: Instant,
    grace: Duration,
    retention: Duration,
    /// What became of the main process.
    main: Main,
    /// Whether anything of the tree is left.
    tree: TreeState,
    /// The first kill asked for while the main process ran: its reason wins.
    killing: Option<KillReason>,
    /// The completion has been published (exactly once).
    published: bool,
    waiting_kills: Vec<(oneshot::Sender<Result<KillOutcome>>, bool)>,
}

/// What the driver knows of the main process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Main {
    /// It runs (as far as the keeper has said).
    Running,
    /// It ended so.
    Exited(ExitStatus),
    /// The keeper died before saying how it ended (its orphans killed).
    Lost,
}

impl Main {
    fn ended(self) -> bool {
        self != Main::Running
    }

    fn exit(self) -> Option<ExitStatus> {
        match self {
            Main::Exited(status) => Some(status),
            Main::Running | Main::Lost => None,
        }
    }
}

/// Whether anything of the session's tree is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TreeState {
    /// Processes may be alive.
    Live,
    /// Nothing is left (the keeper said so, or was lost and its orphans
    /// killed); `killed` descendants were killed on the way.
    Empty { killed: u32 },
}

impl TreeState {
    fn killed(self) -> u32 {
        match self {
            TreeState::Live => 0,
            TreeState::Empty { killed } => killed,
        }
    }
}

impl Driver {
    /// A driver for `session`. `keeper` is the readiness of the child's
    /// events (the `Child` itself stays in the session), `output`/`stderr`
    /// the pipe read ends.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        session: Arc<Session>,
        owner: Weak<dyn Owner>,
        control: mpsc::UnboundedReceiver<Control>,
        keeper: TreeWatcher,
        output: AsyncReader,
        stderr: Option<AsyncReader>,
        idle: Option<Duration>,
        grace: Duration,
        retention: Duration,
    ) -> Driver {
        Driver {
            session,
            owner,
            keeper: Some(keeper),
            pipes: [
                Some(Pipe {
                    fd: output,
                    stream: Stream::Output,
                }),
                stderr.map(|fd| Pipe {
                    fd,
                    stream: Stream::Stderr,
                }),
            ],
            held_master: None,
            control,
            idle,
            last_output: Instant::now(),
            grace,
            retention,
            main: Main::Running,
            tree: TreeState::Live,
            killing: None,
            published: false,
            waiting_kills: Vec::new(),
        }
    }

    /// Runs the session to its end, then keeps it for the retention time.
    pub(crate) async fn run(mut self) {
        // Events may already sit in the link's buffer: `spawn` reads the
        // socket for `Started` and can take a fast command's `MainExited`
        // with it. No readiness edge will announce those, so take them now.
        let buffered = drain_keeper(&self.session).0;
        self.on_keeper(buffered);
        loop {
            let settled = self.tree != TreeState::Live;
            if self.main.ended() && !self.published {
                // A kill's (or timeout's) result waits for the drained
                // tree; a natural exit with nothing left behind too, since
                // EOF is then imminent and the completion is whole.
                let wait_for_eof = self.killing.is_some() || settled;
                if !wait_for_eof || self.pipes_done() {
                    self.publish();
                }
            }
            if settled && self.pipes_done() {
                break;
            }
            let idle_deadline = match (self.idle, self.main.ended() || self.killing.is_some()) {
                (Some(idle), false) => Some(self.last_output + idle),
                _ => None,
            };
            let [out, err] = &self.pipes;
            tokio::select! {
                biased;
                Some(request) = self.control.recv() => self.on_control(request),
                events = keeper_events(&self.session, self.keeper.as_ref()), if self.keeper.is_some() => {
                    self.on_keeper(events)
                }
                read = read_ready(&self.session, out.as_ref()), if out.is_some() => {
                    self.on_read(0, read)
                }
                read = read_ready(&self.session, err.as_ref()), if err.is_some() => {
                    self.on_read(1, read)
                }
                _ = sleep_until(idle_deadline), if idle_deadline.is_some() => {
                    self.start_kill(self.grace, KillReason::IdleTimeout, None);
                }
            }
        }
        self.finish();
        // Retention: kept (for reads and listings) until the TTL counted
        // from the exit, unless the registry evicts it earlier.
        let exited = self
            .session
            .shared()
            .exited_at
            .map_or_else(Instant::now, |(_, at)| at);
        let id = self.session.id.clone();
        let owner = self.owner.clone();
        let retention = self.retention;
        // Hold nothing but the id while sleeping: eviction drops the session.
        drop(self);
        tokio::time::sleep_until((exited + retention).into()).await;
        if let Some(owner) = owner.upgrade() {
            owner.expired(&id);
        }
    }

    fn pipes_done(&self) -> bool {
        self.pipes.iter().all(Option::is_none)
    }

    fn on_control(&mut self, request: Control) {
        match request {
            Control::Kill {
                grace,
                reason,
                reply,
            } => self.start_kill(grace, reason, reply),
        }
    }

    fn start_kill(
        &mut self,
        grace: Duration,
        reason: KillReason,
        reply: Option<oneshot::Sender<Result<KillOutcome>>>,
    ) {
        if self.tree != TreeState::Live {
            if let Some(reply) = reply {
                let _ = reply.send(Ok(self.outcome(true)));
            }
            return;
        }
        if !self.main.ended() && self.killing.is_none() {
            self.killing = Some(reason);
        }
        if let Some(child) = lock(&self.session.child).as_ref() {
            child.start_kill_with_grace(grace);
        }
        if let Some(reply) = reply {
            self.waiting_kills.push((reply, self.main.ended()));
        }
    }

    fn on_keeper(&mut self, events: Vec<Result<TreeEvent>>) {
        for event in events {
            match event {
                Ok(TreeEvent::MainExited {
                    termination,
                    timed_out,
                    limit_hit,
                    oom_outside,
                    usage,
                }) => {
                    let earlier = self.session.shared().limit_hit;
                    self.main = Main::Exited(ExitStatus {
                        termination,
                        timed_out,
                        descendants_killed: 0,
                        limit_hit: LimitHit::worst(earlier, limit_hit),
                        oom_outside,
                        limits_escaped: 0,
                        usage,
                    });
                    self.note_limit_hit(limit_hit);
                    if timed_out && self.killing.is_none() {
                        self.killing = Some(KillReason::Timeout);
                    }
                    self.session.shared().exited_at = Some((SystemTime::now(), Instant::now()));
                    self.held_master = None;
                    self.drain_after_exit();
                }
                Ok(TreeEvent::Settled {
                    killed,
                    limit_hit,
                    escaped,
                    usage,
                    ..
                }) => {
                    if !escaped.is_empty() {
                        self.session.shared().limits_escaped = escaped;
                    }
                    self.note_usage(usage);
                    self.note_limit_hit(limit_hit);
                    self.tree = TreeState::Empty { killed };
                    self.keeper = None;
                    self.held_master = None;
                }
                Ok(TreeEvent::KillFailed { survivors }) => {
                    for (reply, _) in self.waiting_kills.drain(..) {
                        let _ = reply.send(Err(Error::KillIncomplete {
                            survivors: survivors.clone(),
                        }));
                    }
                }
                Err(e) => {
                    // The keeper is gone (its orphans were killed) or its
                    // socket failed: nothing more will come from it.
                    self.keeper = None;
                    self.held_master = None;
                    // Count what the cleanup killed; the main process was
                    // among them if it had not exited.
                    let killed = match &e {
                        Error::KeeperLost { orphans_killed } => {
                            let main = u32::from(!self.main.ended());
                            (*orphans_killed as u32).saturating_sub(main)
                        }
                        _ => 0,
                    };
                    self.tree = TreeState::Empty {
                        killed: self.tree.killed().max(killed),
                    };
                    if !self.main.ended() {
                        self.main = Main::Lost;
                        self.session.shared().exited_at = Some((SystemTime::now(), Instant::now()));
                    }
                    let message = e.to_string();
                    for (reply, _) in self.waiting_kills.drain(..) {
                        let _ = reply.send(Err(Error::Protocol(message.clone())));
                    }
                }
            }
        }
    }

    /// Takes in a limit the keeper reports hit: the session's (and, once
    /// published, its exit status's) `limit_hit` is the worst seen.
    fn note_limit_hit(&mut self, hit: Option<LimitHit>) {
        if hit.is_none() {
            return;
        }
        let mut shared = self.session.shared();
        shared.limit_hit = LimitHit::worst(shared.limit_hit, hit);
        let worst = shared.limit_hit;
        if let Some(exit) = shared.exit.as_mut() {
            exit.limit_hit = worst;
        }
        drop(shared);
        if let Main::Exited(status) = &mut self.main {
            status.limit_hit = worst;
        }
        self.session.notify();
    }

    /// Takes in what the whole tree used, reported with its end: the exit
    /// status (published already, or to be) says so from now on.
    fn note_usage(&mut self, usage: Option<crate::exit::ResourceUsage>) {
        if usage.is_none() {
            return;
        }
        if let Some(exit) = self.session.shared().exit.as_mut() {
            exit.usage = usage;
        }
        if let Main::Exited(status) = &mut self.main {
            status.usage = usage;
        }
    }

    /// Reads what the pipes hold right now, at most one pipe capacity each:
    /// that includes every byte the main process wrote before exiting.
    fn drain_after_exit(&mut self) {
        for slot in 0..self.pipes.len() {
            let Some(pipe) = &self.pipes[slot] else {
                continue;
            };
            let capacity = pipe.fd.capacity();
            let per_read = pipe.fd.read_size().min(READ_CHUNK);
            let read = read_now(&self.session, pipe, capacity.div_ceil(per_read) + 1);
            self.on_read(slot, read);
        }
    }

    fn on_read(&mut self, slot: usize, read: io::Result<ReadStatus>) {
        match read {
            Ok(ReadStatus { bytes, eof, .. }) => {
                if bytes > 0 {
                    self.last_output = Instant::now();
                }
                if eof {
                    let stream = self.pipes[slot].as_ref().map(|p| p.stream);
                    // Closing the read end here, at EOF: no writer is left
                    // (a PTY's master waits for the main process's exit).
                    let pipe = self.pipes[slot].take();
                    if self.session.is_terminal() && !self.main.ended() {
                        self.held_master = pipe.map(|p| p.fd);
                    }
                    // The master's other copies go with it: nobody holds
                    // the terminal, so nothing could read input.
                    lock(&self.session.terminal).take();
                    if self.session.is_terminal() {
                        lock(&self.session.stdin).take();
                    }
                    let mut shared = self.session.shared();
                    if let Some(captured) = stream.and_then(|s| shared.stream_mut(s)) {
                        captured.eof = true;
                    }
                }
                if bytes > 0 || eof {
                    // The doorbell first: whoever the notification wakes
                    // finds it rung.
                    self.session.ring();
                    self.session.notify();
                }
            }
            // A read error other than EAGAIN on a pipe we own means the
            // descriptor is unusable; treat it as the end of the stream.
            Err(_) => {
                self.pipes[slot] = None;
                let mut shared = self.session.shared();
                let stream = if slot == 0 {
                    Stream::Output
                } else {
                    Stream::Stderr
                };
                if let Some(captured) = shared.stream_mut(stream) {
                    captured.eof = true;
                }
            }
        }
    }

    /// The one place the completion is published.
    fn publish(&mut self) {
        self.published = true;
        let state = if self.main == Main::Lost {
            SessionState::Lost
        } else {
            match self.killing {
                Some(KillReason::Timeout | KillReason::IdleTimeout) => SessionState::TimedOut,
                Some(KillReason::Requested | KillReason::Shutdown) => SessionState::Killed,
                None => SessionState::Exited,
            }
        };
        {
            let mut shared = self.session.shared();
            shared.state = state;
            shared.exit = self.main.exit();
            shared.kill_reason = self.killing;
        }
        // The command is done: our end of its stdin goes (a write now is a
        // clear error rather than bytes nobody will read).
        lock(&self.session.stdin).take();
        self.session.notify();
    }

    fn outcome(&self, already_exited: bool) -> KillOutcome {
        KillOutcome {
            state: self.session.shared().state,
            already_exited,
            descendants_killed: self.tree.killed(),
        }
    }

    /// Settled: tree empty, pipes at EOF. Releases the child (and with it
    /// the keeper socket) and answers pending kills.
    fn finish(&mut self) {
        if !self.published {
            self.publish();
        }
        self.keeper = None;
        self.held_master = None;
        drop(lock(&self.session.child).take());
        // The registry counts it finished (frees its live slot, applies
        // retention) before anyone can see it settled, so a caller that
        // saw it settled can start another session at once.
        if let Some(owner) = self.owner.upgrade() {
            owner.settled(&self.session.id);
        }
        {
            let mut shared = self.session.shared();
            shared.settled = true;
            shared.descendants_killed = self.tree.killed();
        }
        for (reply, already_exited) in std::mem::take(&mut self.waiting_kills) {
            let _ = reply.send(Ok(self.outcome(already_exited)));
        }
        self.session.ring();
        self.session.notify();
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Waits for the child's events and takes every one available.
async fn keeper_events(session: &Session, watcher: Option<&TreeWatcher>) -> Vec<Result<TreeEvent>> {
    let Some(watcher) = watcher else {
        return std::future::pending().await;
    };
    let mut events = Vec::new();
    let waited = watcher
        .wait(|| {
            let (taken, drained) = drain_keeper(session);
            events = taken;
            drained
        })
        .await;
    if let Err(e) = waited {
        events.push(Err(e.into()));
    }
    events
}

/// Every event available without blocking (buffered or on the socket);
/// `true` if the source was found empty.
fn drain_keeper(session: &Session) -> (Vec<Result<TreeEvent>>, bool) {
    let mut events = Vec::new();
    let mut child = lock(&session.child);
    let Some(child) = child.as_mut() else {
        // Released by the registry's teardown.
        return (
            vec![Err(Error::Protocol("session torn down".into()))],
            false,
        );
    };
    loop {
        match child.poll_event() {
            Ok(Some(event)) => {
                let settled = matches!(event, TreeEvent::Settled { .. });
                events.push(Ok(event));
                if settled {
                    // The keeper's last word; it has been released.
                    return (events, false);
                }
            }
            Ok(None) => return (events, true),
            Err(e) => {
                events.push(Err(e));
                return (events, false);
            }
        }
    }
}

/// The result of reading a pipe for a while.
struct ReadStatus {
    bytes: usize,
    eof: bool,
    /// The pipe is empty for now (`EAGAIN`).
    drained: bool,
}

/// Waits until the pipe is readable, then reads what it holds (bounded).
async fn read_ready(session: &Arc<Session>, pipe: Option<&Pipe>) -> io::Result<ReadStatus> {
    let Some(pipe) = pipe else {
        return std::future::pending().await;
    };
    let mut status = Ok(ReadStatus {
        bytes: 0,
        eof: false,
        drained: false,
    });
    pipe.fd
        .wait(|| {
            status = read_now(session, pipe, READS_PER_WAKE);
            status.as_ref().is_ok_and(|s| s.drained)
        })
        .await?;
    status
}

/// Up to `max_reads` non-blocking reads into the session's buffer (and a
/// PTY session's screen, whose answers to terminal queries go back to the
/// command through its stdin: a program that asked waits for them, and
/// nobody else is attached to answer; in order with other input, bounded
/// like it — see `stdin.rs`).
fn read_now(session: &Arc<Session>, pipe: &Pipe, max_reads: usize) -> io::Result<ReadStatus> {
    thread_local! {
        // One read buffer per worker thread, not per session: an idle
        // session must not cost a read buffer.
        static BUF: RefCell<Vec<u8>> = RefCell::new(vec![0; READ_CHUNK]);
    }
    BUF.with_borrow_mut(|buf| {
        let mut status = ReadStatus {
            bytes: 0,
            eof: false,
            drained: false,
        };
        for _ in 0..max_reads {
            match pipe.fd.read_now(buf)? {
                Some(0) => {
                    status.eof = true;
                    break;
                }
                Some(n) => {
                    status.bytes += n;
                    let terminal = session.is_terminal();
                    if terminal {
                        keep_screen_close(session, n);
                    }
                    let lines = count_newlines(&buf[..n]);
                    let mut guard = session.shared();
                    let shared = &mut *guard;
                    let captured = shared
                        .stream_mut(pipe.stream)
                        .expect("every pipe has its stream");
                    captured.lines += lines;
                    let start = captured.buffer.end_offset();
                    if let Err(e) = captured.buffer.append(&buf[..n]) {
                        shared.spill_error.get_or_insert_with(|| e.to_string());
                    }
                    if !terminal {
                        continue;
                    }
                    // The last query in what was read: the screen is parsed
                    // up to its end (and every query before it answered).
                    let mut at = 0;
                    let mut query_end = None;
                    while let Some(end) = shared.query_scan.next_query_end(&buf[at..n]) {
                        at += end;
                        query_end = Some(start + at as u64);
                    }
                    drop(guard);
                    match query_end {
                        Some(upto) => session.parse_for_reader(upto),
                        None => session.parse_behind(start + n as u64),
                    }
                }
                None => {
                    status.drained = true;
                    break;
                }
            }
        }
        Ok(status)
    })
}

/// Parses a PTY session's screen now, before `more` bytes of output are
/// appended: all of what would otherwise leave the session's buffer
/// unparsed; or, if its `screen_lag` waits already (the background parse
/// fell behind a flood), one piece more than the excess — a look at the
/// screen must never have more than the lag to catch up on, and a program
/// that prints faster than the screen is built is then read no faster
/// than that, as a terminal reads no faster than it draws. One piece per
/// read, not the whole lag at once: the reader runs on the async runtime
/// (and what must be parsed at once runs in `block_in_place` there, see
/// `parse_for_reader`).
fn keep_screen_close(session: &Arc<Session>, more: usize) {
    let parsed = session
        .screen_parsed
        .load(std::sync::atomic::Ordering::SeqCst);
    let (keeps, end) = {
        let shared = session.shared();
        let buffer = &shared.output.buffer;
        (buffer.keeps(parsed, more), buffer.end_offset())
    };
    if !keeps {
        session.parse_for_reader(end);
    } else if end.saturating_sub(parsed) >= session.screen_lag {
        session.parse_for_reader(end - session.screen_lag + super::screen::PIECE as u64);
    }
}

/// Newlines in `bytes`, for the line counts progress reports show. Summed
/// in `u8` lanes over runs of 255 bytes (which cannot overflow them), so
/// the compiler vectorises it: a plain `filter().count()` (one `usize` add
/// per byte) cut the capture of 1 GiB from 3.56 to 2.37 GiB/s here.
fn count_newlines(bytes: &[u8]) -> u64 {
    bytes
        .chunks(255)
        .map(|run| {
            u64::from(
                run.iter()
                    .fold(0u8, |n, &b| n.wrapping_add(u8::from(b == b'\n'))),
            )
        })
        .sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn newlines_are_counted_across_runs() {
        let mut bytes = vec![b'\n'; 1000];
        bytes.extend_from_slice(b"abc\ndef");
        assert_eq!(super::count_newlines(&bytes), 1001);
        assert_eq!(super::count_newlines(b""), 0);
    }
}
