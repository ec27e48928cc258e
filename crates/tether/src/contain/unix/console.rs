//! This process's own terminal, for a PTY command attached to it (`tether
//! run --pty`): raw mode that is always undone, the window size, its
//! changes, and the copy loop between the terminal and the command's PTY.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};

use super::pty::{Pty, window_size};
use crate::terminal::PtySize;

/// Window-size changes of this process's terminal (`SIGWINCH`), as bytes
/// on a pipe the copy loop polls. `SIGWINCH` is blocked in the process
/// and taken by one thread's `sigwait`, so no signal handler runs.
#[derive(Debug)]
pub(crate) struct WinchWatcher {
    changes: OwnedFd,
}

impl WinchWatcher {
    /// Blocks `SIGWINCH` and starts the thread that waits for it. Call it
    /// before starting other threads (they inherit the mask), and after
    /// [`Forwarder::install`](super::Forwarder::install), whose signals
    /// this thread must not take.
    pub(crate) fn install() -> io::Result<WinchWatcher> {
        let mut set = SigSet::empty();
        set.add(Signal::SIGWINCH);
        set.thread_block()?;
        let (changes, tell) = super::stdio::pipe()?;
        super::stdio::set_nonblocking(&changes)?;
        super::stdio::set_nonblocking(&tell)?;
        std::thread::Builder::new()
            .name("tether-winch".into())
            .spawn(move || {
                while set.wait().is_ok() {
                    // A full pipe already says "the size changed".
                    let _ = nix::unistd::write(&tell, b"w");
                }
            })?;
        Ok(WinchWatcher { changes })
    }

    /// Takes the pending change notices; whether there were any.
    fn take(&self) -> bool {
        let mut buf = [0u8; 64];
        let mut any = false;
        while let Ok(n @ 1..) = nix::unistd::read(self.changes.as_fd(), &mut buf) {
            any |= n > 0;
        }
        any
    }
}

/// This process's terminal (its stdin), put in raw mode for as long as the
/// value lives: every key, Ctrl-C included, goes to the command's PTY,
/// whose own line discipline then does what a terminal would. Dropping it
/// restores the mode it found — on a normal return, an error, a panic's
/// unwinding alike.
pub(crate) struct Console {
    saved: Option<libc::termios>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("raw", &self.saved.is_some())
            .finish()
    }
}

fn stdin() -> BorrowedFd<'static> {
    // SAFETY: fd 0 stays open for the life of the process (we never close
    // it), and a closed one only makes the calls below fail.
    unsafe { BorrowedFd::borrow_raw(0) }
}

impl Console {
    /// Raw mode on stdin if it is a terminal; nothing otherwise.
    pub(crate) fn raw() -> io::Result<Console> {
        // SAFETY: tcgetattr fills a zeroed termios or fails (not a tty).
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(0, &mut saved) } < 0 {
            return Ok(Console { saved: None });
        }
        let mut raw = saved;
        // SAFETY: cfmakeraw edits the termios we own; tcsetattr reads it.
        unsafe {
            libc::cfmakeraw(&mut raw);
            if libc::tcsetattr(0, libc::TCSANOW, &raw) < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Console { saved: Some(saved) })
    }

    /// The size of this process's terminal (stdin's, else stdout's).
    pub(crate) fn size() -> Option<PtySize> {
        window_size(stdin()).or_else(|| window_size(io::stdout().as_fd()))
    }

    /// Copies this process's stdin to `pty` and `pty` to stdout until the
    /// PTY reaches end of file (every process holding its slave is gone),
    /// and passes window-size changes on. At the end of stdin the PTY gets
    /// its end-of-file character once (a pipe fed into a PTY command ends
    /// as a closed pipe would).
    pub(crate) fn pass_through(
        &self,
        pty: &Pty,
        winch: &WinchWatcher,
        mut events: Option<super::EventSource>,
        mut on_events: impl FnMut() -> bool,
    ) -> io::Result<()> {
        let master = pty.try_clone()?;
        let fd = master.into_fd();
        // Non-blocking, so a command that does not read its input can
        // never block us from reading its output (and so it from writing).
        super::stdio::set_nonblocking(&fd)?;
        let master = Pty::from_fd(fd);
        let out = io::stdout();
        let mut stdin_open = true;
        let mut pending: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; 16 << 10];
        loop {
            let mut fds = vec![
                PollFd::new(
                    master.as_fd(),
                    if pending.is_empty() {
                        PollFlags::POLLIN
                    } else {
                        PollFlags::POLLIN | PollFlags::POLLOUT
                    },
                ),
                PollFd::new(winch.changes.as_fd(), PollFlags::POLLIN),
            ];
            // The tree's events (see `read_both`): a keeper's death is
            // noticed while its orphans hold the terminal open.
            let events_at = events.as_ref().map(|source| {
                fds.push(PollFd::new(source.as_fd(), PollFlags::POLLIN));
                fds.len() - 1
            });
            // Input waits while earlier input is still pending: memory
            // stays bounded by one read.
            let stdin_at = (stdin_open && pending.is_empty()).then(|| {
                fds.push(PollFd::new(stdin(), PollFlags::POLLIN));
                fds.len() - 1
            });
            match nix::poll::poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let ready = |i: usize| {
                fds.get(i)
                    .and_then(PollFd::revents)
                    .is_some_and(|r| !r.is_empty())
            };
            let (master_ready, winch_ready) = (ready(0), ready(1));
            let events_ready = events_at.is_some_and(ready);
            let stdin_ready = stdin_at.is_some_and(ready);
            drop(fds);
            if events_ready && !on_events() {
                events = None;
            }
            // The terminal may be gone already: then nothing is resized.
            if winch_ready
                && winch.take()
                && let Some(size) = Console::size()
            {
                let _ = master.resize(size);
            }
            if master_ready {
                match nix::unistd::read(master.as_fd(), &mut buf) {
                    Ok(0) | Err(nix::errno::Errno::EIO) => return Ok(()),
                    Ok(n) => write_all(out.as_fd(), &buf[..n])?,
                    Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => {}
                    Err(e) => return Err(e.into()),
                }
                if !pending.is_empty() {
                    match nix::unistd::write(master.as_fd(), &pending) {
                        Ok(n) => drop(pending.drain(..n)),
                        Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => {}
                        // Nobody reads the terminal any more: the read
                        // side sees EOF next.
                        Err(_) => pending.clear(),
                    }
                }
            }
            if stdin_ready {
                match nix::unistd::read(stdin(), &mut buf) {
                    Ok(0) | Err(_) => {
                        stdin_open = false;
                        pending.push(master.eof_char());
                    }
                    Ok(n) => pending.extend_from_slice(&buf[..n]),
                }
            }
        }
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            // SAFETY: tcsetattr reads the termios saved at the start.
            unsafe { libc::tcsetattr(0, libc::TCSADRAIN, saved) };
        }
    }
}

fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match nix::unistd::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => {
                let mut p = [PollFd::new(fd, PollFlags::POLLOUT)];
                let _ = nix::poll::poll(&mut p, PollTimeout::NONE);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
