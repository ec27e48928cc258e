//! The holder's doorway on Unix: a socket in the user's state directory,
//! whose every connection is judged by the uid the kernel reports for the
//! connecting process (`SO_PEERCRED` on Linux, `getpeereid` on macOS —
//! never a file's owner, which says who made the file, not who is
//! calling), and the detaching that starts a holder outside its
//! requester's process group, session and terminal.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Who is at the other end of a connection, as the kernel says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Effective uid of the process that connected, when it connected.
    pub uid: u32,
    /// Its pid where the platform tells (Linux); `None` elsewhere.
    pub pid: Option<u32>,
}

/// A connected, blocking client stream.
#[derive(Debug)]
pub struct LocalStream {
    inner: UnixStream,
}

impl LocalStream {
    /// Connects to the socket at `path`.
    ///
    /// # Errors
    /// `NotFound`/`ConnectionRefused` when nobody listens there;
    /// `PermissionDenied` when the path is another user's.
    pub fn connect(path: &Path) -> io::Result<LocalStream> {
        Ok(LocalStream {
            inner: UnixStream::connect(path)?,
        })
    }

    /// A second handle on the same connection (one reads, one writes).
    pub fn try_clone(&self) -> io::Result<LocalStream> {
        Ok(LocalStream {
            inner: self.inner.try_clone()?,
        })
    }

    /// Bounds each read (`None`: reads block until data or EOF).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.set_read_timeout(timeout)
    }
}

impl Read for LocalStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf)
    }
}

impl Write for LocalStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A listening socket only this user can reach (see [`bind_private`](LocalListener::bind_private)).
#[derive(Debug)]
pub struct LocalListener {
    inner: tokio::net::UnixListener,
}

impl LocalListener {
    /// Binds a socket at `path` (a stale one there is replaced: call this
    /// only while holding the [`HolderLock`] of its directory) and makes
    /// it 0600. Must be called within a tokio runtime.
    ///
    /// The directory must already be private (0700, ours): then nobody
    /// else can reach the socket between `bind` and `chmod`.
    pub fn bind_private(path: &Path) -> io::Result<LocalListener> {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let inner = tokio::net::UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        Ok(LocalListener { inner })
    }

    /// The next connection and who made it.
    pub async fn accept(&self) -> io::Result<(AsyncLocalStream, Peer)> {
        let (stream, _) = self.inner.accept().await?;
        let cred = stream.peer_cred()?;
        let peer = Peer {
            uid: cred.uid(),
            pid: cred.pid().and_then(|p| u32::try_from(p).ok()),
        };
        Ok((AsyncLocalStream { inner: stream }, peer))
    }
}

/// A connection accepted by a [`LocalListener`].
#[derive(Debug)]
pub struct AsyncLocalStream {
    inner: tokio::net::UnixStream,
}

impl AsyncRead for AsyncLocalStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for AsyncLocalStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// An exclusive `flock` on a file: at most one holder per state directory.
/// Released by the kernel when the process ends, however it ends.
#[derive(Debug)]
pub struct HolderLock {
    _file: File,
}

impl HolderLock {
    /// Takes the lock on `path` (created 0600) and writes this process's
    /// pid into it, or `Ok(None)` when another process holds it.
    pub fn try_take(path: &Path) -> io::Result<Option<HolderLock>> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        // SAFETY: a valid open descriptor; flock touches no memory.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            // The holder's pid, for people and tests that want to find it
            // (its identity is still checked before any signal).
            let mut file = file;
            let _ = file.set_len(0);
            let _ = writeln!(file, "{}", std::process::id());
            return Ok(Some(HolderLock { _file: file }));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Ok(None);
        }
        Err(err)
    }
}

/// Which side of [`detach`] this is.
#[derive(Debug)]
pub enum Detached {
    /// The process that called `detach`: read the holder's readiness
    /// report from `ready` (EOF without one: it died starting), then exit.
    Parent {
        /// Read end of the readiness pipe.
        ready: File,
    },
    /// The detached process: write the readiness report to `ready` and
    /// close it.
    Holder {
        /// Write end of the readiness pipe.
        ready: File,
    },
}

/// Detaches this process's work from its parent: a new session (no
/// controlling terminal, its own process group — a `killpg` or terminal
/// hang-up aimed at the requester never reaches the holder), then a fork,
/// whose child goes on as the holder while the parent reports its
/// readiness and exits. The grandchild is re-parented to the nearest
/// subreaper, or init. Call it before any thread exists.
pub fn detach() -> io::Result<Detached> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe to fill.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe just returned these two descriptors, owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    for fd in [&read, &write] {
        // SAFETY: a valid descriptor; sets a flag only.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: setsid has no memory effects; it fails only for a group leader.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: called before any thread exists (documented contract), so
    // the child is a faithful single-threaded copy.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            drop(read);
            Ok(Detached::Holder {
                ready: File::from(write),
            })
        }
        _ => {
            drop(write);
            Ok(Detached::Parent {
                ready: File::from(read),
            })
        }
    }
}

/// This process's effective uid.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Points this process's stdin, stdout and stderr at `/dev/null` (stderr
/// at `log` when given), so a holder holds none of its requester's pipes
/// or terminal open.
pub fn redirect_stdio(log: Option<&Path>) -> io::Result<()> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    let err = match log {
        Some(path) => {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(path)?
        }
        None => null.try_clone()?,
    };
    for (src, dst) in [(&null, 0), (&null, 1), (&err, 2)] {
        // SAFETY: both descriptors are valid; dup2 replaces `dst` atomically.
        if unsafe { libc::dup2(src.as_raw_fd(), dst) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Tells this process that `pid` is a durable-session holder: if it is a
/// child of ours (adopted because this process is a subreaper), it is never
/// taken for a lost keeper's orphan, and it is reaped when it exits.
pub fn holder_started(pid: u32) {
    super::spare_holder(pid);
}
