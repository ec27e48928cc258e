//! The owner's end of a keeper: starting it, exchanging requests and
//! events with it, reaping it, and keeping it running.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use super::channel::{recv_into, send_frame};
use super::keeper::DEBUG_VAR;
use super::keeper_entry::KEEPER_ARG;
use super::protocol::{Event, FrameBuffer, Request};
use crate::error::{Error, Result};

/// The sending half, shareable across threads (a `ChildHandle` forwards
/// signals while another thread waits).
#[derive(Debug)]
pub(crate) struct Sender {
    sock: OwnedFd,
    keeper: u32,
    /// Held while sending; `false` once the keeper was handed to another
    /// session, so a stale handle can never reach the new session's tree.
    open: Mutex<bool>,
}

impl Sender {
    fn new(sock: &UnixStream, keeper: u32) -> io::Result<Arc<Sender>> {
        Ok(Arc::new(Sender {
            sock: sock.try_clone()?.into(),
            keeper,
            open: Mutex::new(true),
        }))
    }

    fn close(&self) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = false;
    }

    pub(crate) fn send(&self, request: &Request, fds: &[RawFd]) -> io::Result<()> {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if !*open {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the session is over",
            ));
        }
        // A keeper stopped by its own command (`kill -STOP $PPID`) would sit
        // on this request: resume it first.
        resume(self.keeper);
        send_frame(self.sock.as_fd(), &request.encode(), fds)
    }
}

/// A running keeper and the socket to it.
#[derive(Debug)]
pub(crate) struct KeeperLink {
    /// The socket; `None` once the keeper moved to another link.
    sock: Option<UnixStream>,
    sender: Arc<Sender>,
    frames: FrameBuffer,
    process: Option<std::process::Child>,
    eof: bool,
    /// The keeper program, so a recycled keeper goes back to the right pool.
    path: PathBuf,
    /// The keeper now serves another session through another link; this one
    /// is inert (reads nothing, sends nothing, closes nothing).
    detached: bool,
    /// The keeper was told to go (its tree is empty); it is reaped when
    /// the link is dropped.
    draining: bool,
}

impl KeeperLink {
    /// Starts a keeper. Its stdin is its end of the socket; it inherits
    /// nothing else (stdout/stderr are /dev/null unless
    /// `TETHER_KEEPER_DEBUG` is set) and carries `keeper_tag` as its spawn
    /// tag (and `TETHER_KEEPER_DEBUG`, when the owner has it, which
    /// makes it report each kill's phases). No `pre_exec`: the owner stays on std's posix_spawn path.
    ///
    /// The keeper gets a process group of its own from its first
    /// instruction (`POSIX_SPAWN_SETPGROUP`): a signal aimed at the owner's
    /// group — GNU `timeout` signals its whole group, a job-control shell's
    /// `kill -9 %1`, the official MCP Python SDK's `killpg` on its server —
    /// must never take owner and keeper down together, or the tree would
    /// outlive both. It stays in the owner's *session* on purpose: then the
    /// kernel's orphaned-process-group rule sends `SIGHUP` + `SIGCONT` to a
    /// keeper its own command stopped (`kill -STOP $PPID`) the moment the
    /// owner dies, and the keeper (which ignores `SIGHUP`) sees the lifeline
    /// EOF and kills the tree. A session of its own would lose that.
    pub(crate) fn start(keeper: &Path, keeper_tag: &str) -> Result<KeeperLink> {
        let (ours, theirs) = UnixStream::pair().map_err(Error::Keeper)?;
        crate::contain::os::prepare_socket(&ours);
        crate::contain::os::prepare_socket(&theirs);
        let debug = std::env::var_os(DEBUG_VAR).is_some();
        let mut command = std::process::Command::new(keeper);
        command
            .arg(KEEPER_ARG)
            .env_clear()
            .env(crate::spawn_tag::SPAWN_TAG_VAR, keeper_tag);
        if debug {
            command.env(DEBUG_VAR, "1");
        }
        let process = command
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(if debug {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .process_group(0)
            .spawn()
            .map_err(Error::Keeper)?;
        let pid = process.id();
        guard().watch(pid);
        Ok(KeeperLink {
            sender: Sender::new(&ours, pid).map_err(Error::Keeper)?,
            sock: Some(ours),
            frames: FrameBuffer::default(),
            process: Some(process),
            eof: false,
            path: keeper.to_owned(),
            detached: false,
            draining: false,
        })
    }

    /// The keeper program this link runs.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Moves the keeper to a new link, leaving this one inert. Handles of
    /// the old session lose their way to the keeper.
    pub(crate) fn detach(&mut self) -> io::Result<KeeperLink> {
        let Some(sock) = self.sock.take() else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        self.sender.close();
        self.detached = true;
        Ok(KeeperLink {
            sender: Sender::new(&sock, self.sender.keeper)?,
            sock: Some(sock),
            frames: std::mem::take(&mut self.frames),
            process: self.process.take(),
            eof: false,
            path: self.path.clone(),
            detached: false,
            draining: false,
        })
    }

    pub(crate) fn sender(&self) -> Arc<Sender> {
        Arc::clone(&self.sender)
    }

    pub(crate) fn send(&self, request: &Request, fds: &[RawFd]) -> io::Result<()> {
        self.sender.send(request, fds)
    }

    /// The next event, waiting at most `timeout` (`None` = forever).
    /// `Ok(None)`: the timeout passed. `UnexpectedEof`: the keeper is gone.
    pub(crate) fn recv(&mut self, timeout: Option<Duration>) -> io::Result<Option<Event>> {
        if self.detached {
            return Ok(None);
        }
        let Some(sock) = self.sock.as_ref() else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(payload) = self.frames.next_payload()? {
                return Event::decode(&payload).map(Some);
            }
            if self.eof {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let wait_ms = match deadline {
                None => -1,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() && timeout != Some(Duration::ZERO) {
                        return Ok(None);
                    }
                    left.as_millis().min(i32::MAX as u128) as i32
                }
            };
            let mut pfd = [libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(pfd.as_mut_ptr(), 1, wait_ms) };
            if rc < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            if rc == 0 {
                return Ok(None);
            }
            let (n, _fds) = recv_into(sock.as_fd(), &mut self.frames)?;
            if n == 0 {
                self.eof = true;
            }
        }
    }

    /// The socket's descriptor, for an event loop that waits for it to
    /// become readable and then calls [`recv`](Self::recv) with a zero
    /// timeout (the registry does this instead of a thread per session).
    pub(crate) fn event_fd(&self) -> io::Result<BorrowedFd<'_>> {
        self.sock
            .as_ref()
            .map(|s| s.as_fd())
            .ok_or_else(|| io::ErrorKind::NotConnected.into())
    }

    /// The keeper's pid.
    pub(crate) fn keeper_pid(&self) -> Option<u32> {
        self.process.as_ref().map(|p| p.id())
    }

    /// Tells a keeper whose tree is empty to go (EOF), without waiting for
    /// it: it exits while the owner goes on (a `tether run` records the
    /// end in the ledger meanwhile), and is reaped when the link is
    /// dropped — by then, normally, without a wait.
    pub(crate) fn finish(&mut self) {
        if self.detached {
            return;
        }
        if let Some(sock) = &self.sock {
            let _ = sock.shutdown(std::net::Shutdown::Both);
        }
        self.draining = true;
    }

    /// Waits for the keeper process to exit and reaps it. Call once the
    /// keeper said its last word (or the socket hit EOF). Once this
    /// returns, everything the keeper's exit reparented has been
    /// reparented (the kernel does that before the exit is reported).
    pub(crate) fn reap(&mut self) {
        if self.detached {
            return;
        }
        // An idle keeper waits for the next command: the EOF tells it to go.
        if let Some(sock) = &self.sock {
            let _ = sock.shutdown(std::net::Shutdown::Both);
        }
        if let Some(mut process) = self.process.take() {
            guard().forget(process.id());
            resume(process.id());
            let _ = process.wait();
        }
    }
}

impl Drop for KeeperLink {
    fn drop(&mut self) {
        // Closing our end is the lifeline EOF: the keeper kills the tree and
        // exits. It must still be reaped, without blocking the dropper.
        if self.detached {
            return;
        }
        if let Some(sock) = &self.sock {
            let _ = sock.shutdown(std::net::Shutdown::Both);
        }
        if let Some(process) = self.process.take() {
            if self.draining {
                // Its tree is empty and it was told to go a while ago:
                // reap it here rather than wake the reaper thread (or
                // start it, in a one-shot `tether run`).
                guard().forget(process.id());
                reap_resuming(process.id());
            } else {
                reaper().send(process).ok();
            }
        }
    }
}

/// Reaps our child `pid`, blocking until it exits — and resuming it each
/// time it stops meanwhile (a stopped keeper would never act on its EOF).
/// Event-driven: `waitid` returns on the stop as on the exit.
fn reap_resuming(pid: u32) {
    resume(pid);
    loop {
        // SAFETY: waitid fills a zeroed siginfo we own.
        let (rc, code) = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let rc = libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WSTOPPED,
            );
            (rc, info.si_code)
        };
        if rc != 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return; // ECHILD: already reaped
        }
        if code == libc::CLD_STOPPED {
            resume(pid);
            continue;
        }
        return;
    }
}

/// Whether `pid` is a live keeper of ours.
pub(crate) fn is_keeper(pid: u32) -> bool {
    guard()
        .live
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&pid)
}

/// Sends `SIGCONT` to our keeper `pid`. Safe by construction: the keeper is
/// our child and is not reaped before it leaves the guard, so its pid
/// cannot name anything else while we still call this.
fn resume(pid: u32) {
    // SAFETY: kill(2) with a pid we own (see above).
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
}

/// One thread that reaps keepers whose links were dropped (G5: every child
/// is reaped). Keepers exit soon after the EOF, after at most their grace.
fn reaper() -> &'static mpsc::Sender<std::process::Child> {
    static REAPER: OnceLock<mpsc::Sender<std::process::Child>> = OnceLock::new();
    REAPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<std::process::Child>();
        std::thread::Builder::new()
            .name("tether-reaper".into())
            .spawn(move || {
                for process in rx {
                    let pid = process.id();
                    // From here on only this thread signals it, and it
                    // reaps it itself.
                    guard().forget(pid);
                    reap_resuming(pid);
                    drop(process);
                }
            })
            .expect("spawn tether-reaper thread");
        tx
    })
}

/// How often the guard looks for stopped keepers while the owner lives.
const GUARD_PERIOD: Duration = Duration::from_millis(200);

/// Resumes keepers that their own command stopped (`kill -STOP $PPID`):
/// a stopped keeper serves no kill, timeout or lifeline EOF. While the
/// owner lives, this thread looks at each live keeper's state every
/// [`GUARD_PERIOD`] and sends `SIGCONT` to a stopped one; once the owner is
/// gone, the kernel's orphaned-process-group rule does it (see
/// [`KeeperLink::start`]). A defence against an adversarial command, not
/// the owner-death path: no guarantee waits on this thread.
struct Guard {
    live: Mutex<HashSet<u32>>,
    started: OnceLock<()>,
}

fn guard() -> &'static Guard {
    static GUARD: OnceLock<Guard> = OnceLock::new();
    GUARD.get_or_init(|| Guard {
        live: Mutex::new(HashSet::new()),
        started: OnceLock::new(),
    })
}

impl Guard {
    fn watch(&'static self, pid: u32) {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pid);
        self.started.get_or_init(|| {
            let _ = std::thread::Builder::new()
                .name("tether-guard".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(GUARD_PERIOD);
                        let live: Vec<u32> = self
                            .live
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .iter()
                            .copied()
                            .collect();
                        for pid in live {
                            let stopped = crate::contain::sys::process(pid).is_ok_and(|p| {
                                matches!(
                                    p.state,
                                    crate::contain::sys::ProcessState::Stopped
                                        | crate::contain::sys::ProcessState::Traced
                                )
                            });
                            // Under the lock: a pid leaves `live` before
                            // its keeper is reaped, so it is still ours.
                            let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
                            if stopped && live.contains(&pid) {
                                resume(pid);
                            }
                        }
                    }
                });
        });
    }

    fn forget(&self, pid: u32) {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pid);
    }
}
