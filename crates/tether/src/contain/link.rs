//! The owner's end of a keeper: finding the keeper program, starting it,
//! and exchanging requests and events with it.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use super::channel::{recv_into, send_frame};
use super::keeper::KEEPER_ARG;
use super::protocol::{Event, FrameBuffer, Request};
use crate::error::{Error, Result};

/// Set by [`run_if_requested`](super::keeper::run_if_requested): this very
/// program can act as its own keeper.
pub(crate) static SELF_IS_KEEPER: AtomicBool = AtomicBool::new(false);

/// Name of the standalone keeper binary.
const KEEPER_BIN: &str = "tether-keeper";

/// Finds the keeper program. Order: `$TETHER_KEEPER`; this program, if it
/// called `run_if_requested()`; `tether-keeper` beside this program or one
/// directory up (where cargo puts test binaries); `tether-keeper` on `PATH`.
pub(crate) fn keeper_path() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("TETHER_KEEPER").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Error::KeeperNotFound {
                searched: vec![path],
            })
        };
    }
    static FOUND: OnceLock<std::result::Result<PathBuf, Vec<PathBuf>>> = OnceLock::new();
    FOUND
        .get_or_init(discover)
        .clone()
        .map_err(|searched| Error::KeeperNotFound { searched })
}

fn discover() -> std::result::Result<PathBuf, Vec<PathBuf>> {
    let exe = std::env::current_exe().ok();
    if SELF_IS_KEEPER.load(Ordering::Relaxed)
        && let Some(exe) = &exe
    {
        return Ok(exe.clone());
    }
    let mut candidates = Vec::new();
    if let Some(dir) = exe.as_deref().and_then(Path::parent) {
        candidates.push(dir.join(KEEPER_BIN));
        if let Some(up) = dir.parent() {
            candidates.push(up.join(KEEPER_BIN));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join(KEEPER_BIN)));
    }
    candidates
        .iter()
        .find(|c| c.is_file())
        .cloned()
        .ok_or(candidates)
}

/// The sending half, shareable across threads (a `ChildHandle` forwards
/// signals while another thread waits).
#[derive(Debug)]
pub(crate) struct Sender {
    sock: OwnedFd,
    /// Held while sending; `false` once the keeper was handed to another
    /// session, so a stale handle can never reach the new session's tree.
    open: Mutex<bool>,
}

impl Sender {
    fn new(sock: &UnixStream) -> io::Result<Arc<Sender>> {
        Ok(Arc::new(Sender {
            sock: sock.try_clone()?.into(),
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
        send_frame(self.sock.as_fd(), &request.encode(), fds)
    }
}

/// A running keeper and the socket to it.
#[derive(Debug)]
pub(crate) struct KeeperLink {
    sock: UnixStream,
    sender: Arc<Sender>,
    frames: FrameBuffer,
    process: Option<std::process::Child>,
    eof: bool,
    /// The keeper program, so a recycled keeper goes back to the right pool.
    path: PathBuf,
    /// The keeper now serves another session through another link; this one
    /// is inert (reads nothing, sends nothing, closes nothing).
    detached: bool,
}

impl KeeperLink {
    /// Starts a keeper. Its stdin is its end of the socket; it inherits
    /// nothing else (stdout/stderr are /dev/null unless
    /// `TETHER_KEEPER_DEBUG` is set) and carries `keeper_tag` as its spawn
    /// tag. No `pre_exec`: the owner stays on std's posix_spawn path.
    pub(crate) fn start(keeper: &Path, keeper_tag: &str) -> Result<KeeperLink> {
        let (ours, theirs) = UnixStream::pair().map_err(Error::Keeper)?;
        let debug = std::env::var_os("TETHER_KEEPER_DEBUG").is_some();
        let process = std::process::Command::new(keeper)
            .arg(KEEPER_ARG)
            .env_clear()
            .env(crate::spawn_tag::SPAWN_TAG_VAR, keeper_tag)
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(if debug {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .map_err(Error::Keeper)?;
        Ok(KeeperLink {
            sender: Sender::new(&ours).map_err(Error::Keeper)?,
            sock: ours,
            frames: FrameBuffer::default(),
            process: Some(process),
            eof: false,
            path: keeper.to_owned(),
            detached: false,
        })
    }

    /// The keeper program this link runs.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Ends this link's session: the tree is empty and the keeper waits for
    /// another command. A reusable keeper (no PID namespace spent) goes
    /// back to the warm pool if the pool wants it; otherwise it is told to
    /// go (EOF) and reaped.
    pub(crate) fn finish(&mut self, reusable: bool) {
        if reusable && crate::pool::recycle(self) {
            return;
        }
        self.reap();
    }

    /// Moves the keeper to a new link, leaving this one inert. Handles of
    /// the old session lose their way to the keeper.
    pub(crate) fn detach(&mut self) -> io::Result<KeeperLink> {
        let (placeholder, _) = UnixStream::pair()?;
        let sock = std::mem::replace(&mut self.sock, placeholder);
        self.sender.close();
        self.detached = true;
        Ok(KeeperLink {
            sender: Sender::new(&sock)?,
            sock,
            frames: std::mem::take(&mut self.frames),
            process: self.process.take(),
            eof: false,
            path: self.path.clone(),
            detached: false,
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
                fd: self.sock.as_raw_fd(),
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
            let (n, _fds) = recv_into(self.sock.as_fd(), &mut self.frames)?;
            if n == 0 {
                self.eof = true;
            }
        }
    }

    /// The socket's descriptor, for an event loop that waits for it to
    /// become readable and then calls [`recv`](Self::recv) with a zero
    /// timeout (the registry does this instead of a thread per session).
    pub(crate) fn event_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.sock.as_fd()
    }

    /// The keeper's pid.
    pub(crate) fn keeper_pid(&self) -> Option<u32> {
        self.process.as_ref().map(|p| p.id())
    }

    /// Waits for the keeper process to exit and reaps it. Call once the
    /// keeper said its last word (or the socket hit EOF).
    pub(crate) fn reap(&mut self) {
        if self.detached {
            return;
        }
        // An idle keeper waits for the next command: the EOF tells it to go.
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        if let Some(mut process) = self.process.take() {
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
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        if let Some(process) = self.process.take() {
            reaper().send(process).ok();
        }
    }
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
                for mut process in rx {
                    let _ = process.wait();
                }
            })
            .expect("spawn tether-reaper thread");
        tx
    })
}
