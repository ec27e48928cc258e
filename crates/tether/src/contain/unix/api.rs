//! Unix-only abilities: signals, raw descriptors, sessions.
//!
//! ```standalone_crate
//! # #[cfg(unix)]
//! # fn main() -> tether::Result<()> {
//! # tether::keeper::run_if_requested();
//! use tether::unix::{ChildExt, ExitStatusExt};
//!
//! let mut child = tether::Command::new("sleep").arg("1000").spawn()?;
//! child.signal_group(libc::SIGINT)?; // what a terminal's Ctrl-C would do
//! let status = child.wait()?;
//! assert_eq!(status.signal(), Some(libc::SIGINT));
//! assert_eq!(status.shell_code(), 128 + libc::SIGINT);
//! # #[cfg(target_os = "linux")]
//! # tether_testkit::assert_nothing_left();
//! # Ok(())
//! # }
//! # #[cfg(not(unix))]
//! # fn main() {}
//! ```

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use crate::child::{Child, ChildHandle};
use crate::command::Command;
use crate::contain::unix::protocol::Scope;
use crate::contain::{Ladder, Termination};
use crate::error::Result;
use crate::exit::ExitStatus;
use crate::stdio::{ChildStderr, ChildStdin, ChildStdout, OsStdio, Stdio};

/// Signals for a [`Child`] or [`ChildHandle`].
pub trait ChildExt {
    /// Sends `signal` to every process of the tree (SIGCONT follows any
    /// signal but SIGKILL and the stop signals, so stopped processes act
    /// on it), through the keeper: each process pinned and verified a
    /// tree member first.
    ///
    /// # Errors
    /// [`Error::Keeper`](crate::Error::Keeper) once the keeper is gone (the
    /// tree is empty); [`Error::InheritedAcrossFork`](crate::Error::InheritedAcrossFork)
    /// in a forked child.
    fn signal(&self, signal: i32) -> Result<()>;

    /// Sends `signal` to the main process's process group only — what a
    /// terminal's Ctrl-C would reach (while the main process is unreaped,
    /// so the group id cannot have been reused).
    ///
    /// # Errors
    /// As [`signal`](ChildExt::signal).
    fn signal_group(&self, signal: i32) -> Result<()>;

    /// Forwards `signal`, then kills the whole tree after the grace unless
    /// it ended by itself: how `tether run` passes on SIGINT, SIGTERM and
    /// SIGHUP. `SIGINT` and `SIGQUIT` (a terminal's keys reach only its
    /// foreground job) go to the main process's process group; any other
    /// signal to every process of the tree at once. When the main process
    /// exits, what it left behind gets the kill's gentle signals at once
    /// (it does not wait for the grace).
    ///
    /// # Errors
    /// As [`signal`](ChildExt::signal).
    fn interrupt(&self, signal: i32) -> Result<()>;
}

impl ChildExt for ChildHandle {
    fn signal(&self, signal: i32) -> Result<()> {
        self.tree.signal(signal, Scope::Tree)
    }

    fn signal_group(&self, signal: i32) -> Result<()> {
        self.tree.signal(signal, Scope::Group)
    }

    fn interrupt(&self, signal: i32) -> Result<()> {
        self.tree.interrupt(signal, self.grace)
    }
}

impl ChildExt for Child {
    fn signal(&self, signal: i32) -> Result<()> {
        self.handle().signal(signal)
    }

    fn signal_group(&self, signal: i32) -> Result<()> {
        self.handle().signal_group(signal)
    }

    fn interrupt(&self, signal: i32) -> Result<()> {
        self.handle().interrupt(signal)
    }
}

/// The readiness of a [`Child`]'s events, for a host that waits in an
/// event loop of its own (a `select` over the child's pipes, Python's
/// `selectors`) rather than in [`Child::wait`].
///
/// Reading a child's pipes to their end is not enough to follow it: if
/// its keeper is `SIGKILL`ed, processes of its tree may hold the pipes
/// open as long as they live, unsupervised. Poll [`events`](Self::events)
/// beside the pipes; when it is readable, call [`Child::try_wait`]: it
/// takes the events in — a lost keeper is [`Error::KeeperLost`], its
/// orphans killed by then, which ends the pipes they held.
///
/// [`Error::KeeperLost`]: crate::Error::KeeperLost
///
/// ```standalone_crate
/// # #[cfg(target_os = "linux")]
/// # fn main() -> tether::Result<()> {
/// # tether::keeper::run_if_requested();
/// use std::io::Read;
/// use std::os::fd::AsRawFd;
/// use tether::unix::ChildEventsExt;
/// use tether::{Command, Error, Stdio};
///
/// // A background sleep holds stdout open after the keeper is gone.
/// let mut child = Command::new("sh")
///     .args(["-c", "sleep 1000 & echo ready; wait"])
///     .stdout(Stdio::Piped)
///     .spawn()?;
/// let mut stdout = child.stdout.take().unwrap();
/// let mut ready = [0u8; 6];
/// stdout.read_exact(&mut ready)?;
/// let events = child.events().expect("a live tree has events");
/// // SAFETY: kill(2) of our own keeper, unreaped until its socket's EOF.
/// unsafe { libc::kill(child.keeper_pid().unwrap() as i32, libc::SIGKILL) };
/// let mut fds = [
///     libc::pollfd { fd: stdout.as_raw_fd(), events: libc::POLLIN, revents: 0 },
///     libc::pollfd { fd: events.as_raw_fd(), events: libc::POLLIN, revents: 0 },
/// ];
/// let lost = loop {
///     // SAFETY: two valid pollfds.
///     unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
///     if fds[1].revents != 0 {
///         break child.try_wait();
///     }
///     fds[0].revents = 0;
/// };
/// // The main `sh` and its sleep, killed the moment the loss was seen.
/// assert!(matches!(lost, Err(Error::KeeperLost { orphans_killed: 2 })));
/// let mut rest = Vec::new();
/// stdout.read_to_end(&mut rest)?; // at its end: no writer is left
/// # tether_testkit::assert_nothing_left();
/// # Ok(())
/// # }
/// # #[cfg(not(target_os = "linux"))]
/// # fn main() {}
/// ```
pub trait ChildEventsExt {
    /// A descriptor that is readable when the child has events to take in
    /// with [`Child::try_wait`] (the end of its main process, of its tree,
    /// its keeper's death). `None` once the tree is settled (nothing more
    /// will come) or when no descriptor can be had. Keep it no longer
    /// than the child; drop it when done polling.
    fn events(&self) -> Option<Events>;
}

impl ChildEventsExt for Child {
    fn events(&self) -> Option<Events> {
        self.event_source().map(Events)
    }
}

/// A [`Registry`](crate::registry::Registry) session's output as a
/// descriptor to wait on with `poll`/`select` (Unix).
pub trait RegistryOutputExt {
    /// The number of a descriptor that is readable once the session's
    /// output has bytes past what [`output_seen`] last acknowledged (from
    /// 0), or has ended — made on the first call, one per session (Linux:
    /// an `eventfd`; elsewhere a pipe, two descriptors). The registry owns
    /// it: never close it; it is closed when the session is closed or
    /// evicted. Read the output itself with
    /// [`read`](crate::registry::Registry::read), then call
    /// [`output_seen`].
    ///
    /// [`output_seen`]: crate::registry::Registry::output_seen
    ///
    /// # Errors
    /// An unknown session; the descriptor could not be made.
    fn output_fd(&self, id: &str) -> Result<RawFd>;
}

impl RegistryOutputExt for crate::registry::Registry {
    fn output_fd(&self, id: &str) -> Result<RawFd> {
        self.output_doorbell(id, |doorbell| doorbell.raw())
    }
}

/// See [`ChildEventsExt::events`]: a copy of the keeper's socket, to poll
/// for readability only (reading it would take the child's events).
#[derive(Debug)]
pub struct Events(crate::contain::EventSource);

impl AsFd for Events {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl AsRawFd for Events {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Unix-only settings of a [`Command`].
pub trait CommandExt {
    /// Start the command in a new session (`setsid`) rather than only its
    /// own process group (default: its own group).
    fn new_session(&mut self, yes: bool) -> &mut Command;

    /// The signals a kill sends first (default `[SIGTERM]`; PTY sessions
    /// `[SIGHUP, SIGTERM]`): all of them, in this order, to every process
    /// of the tree at once; `SIGKILL` follows for whatever is still alive
    /// when the grace ends. The kill is over as soon as the tree is empty.
    /// An empty list: `SIGKILL` at once.
    ///
    /// ```standalone_crate
    /// # #[cfg(unix)]
    /// # fn main() -> tether::Result<()> {
    /// # tether::keeper::run_if_requested();
    /// use tether::unix::{CommandExt, ExitStatusExt};
    ///
    /// // Ask like Ctrl-C first; `SIGKILL` follows after the grace if needed.
    /// let mut child = tether::Command::new("sleep").arg("1000").kill_signals(&[libc::SIGINT]).spawn()?;
    /// child.kill()?;
    /// assert_eq!(child.wait()?.signal(), Some(libc::SIGINT));
    /// # #[cfg(target_os = "linux")]
    /// # tether_testkit::assert_nothing_left();
    /// # Ok(())
    /// # }
    /// # #[cfg(not(unix))]
    /// # fn main() {}
    /// ```
    fn kill_signals(&mut self, signals: &[i32]) -> &mut Command;

    /// The command's `argv[0]`, when it should not be the program as given
    /// (`subprocess`'s `executable=`: the program runs, `argv[0]` stays).
    fn arg0(&mut self, arg0: impl AsRef<std::ffi::OsStr>) -> &mut Command;

    /// Passes `fd` on to the command as its descriptor `target` (3 or
    /// above), inheritable there (`subprocess`'s `pass_fds`). `fd` is
    /// duplicated for each spawn.
    ///
    /// # Errors
    /// At spawn: [`Error::InvalidInput`](crate::Error::InvalidInput) for a
    /// `target` below 3 or given twice.
    fn pass_fd(&mut self, target: RawFd, fd: OwnedFd) -> &mut Command;

    /// The command's umask (default: the owner's).
    fn umask(&mut self, mask: u32) -> &mut Command;

    /// Run the command as user `uid` (`setreuid` before exec; needs the
    /// privilege to).
    fn uid(&mut self, uid: u32) -> &mut Command;

    /// Run the command with group `gid` (`setregid` before exec).
    fn gid(&mut self, gid: u32) -> &mut Command;

    /// The command's supplementary groups (`setgroups` before exec).
    fn groups(&mut self, groups: &[u32]) -> &mut Command;

    /// Signals the command starts with ignored (default: none — every
    /// disposition at its default, whatever the owner ignores).
    fn ignore_signals(&mut self, signals: &[i32]) -> &mut Command;

    /// Runs `hook` in the process that becomes this command's keeper,
    /// between its fork from the owner and its exec of the keeper program
    /// (`subprocess`'s `preexec_fn`, one process up): what it changes there
    /// — a new session, resource limits, the umask, credentials, the
    /// working directory of the keeper — the keeper passes on to the
    /// command, as an exec would. The command gets a fresh keeper of its own
    /// (never a warm one, nor kept warm after). An `Err` from `hook` fails
    /// the spawn with [`Error::Keeper`](crate::Error::Keeper) carrying that
    /// error's `raw_os_error` (the only part that crosses the exec).
    ///
    /// # Safety
    /// `hook` runs in a child forked from a possibly multi-threaded owner:
    /// as `std::os::unix::process::CommandExt::pre_exec`'s closure, it must
    /// not take a lock another thread may hold (no allocation, in general).
    unsafe fn pre_exec_keeper<F>(&mut self, hook: F) -> &mut Command
    where
        F: FnMut() -> std::io::Result<()> + Send + 'static;
}

impl CommandExt for Command {
    fn new_session(&mut self, yes: bool) -> &mut Command {
        self.new_session = yes;
        self
    }

    fn kill_signals(&mut self, signals: &[i32]) -> &mut Command {
        self.ladder = Ladder::Signals(signals.to_vec());
        self
    }

    fn arg0(&mut self, arg0: impl AsRef<std::ffi::OsStr>) -> &mut Command {
        self.arg0 = Some(arg0.as_ref().to_owned());
        self
    }

    fn pass_fd(&mut self, target: RawFd, fd: OwnedFd) -> &mut Command {
        self.setup
            .fds
            .push((target, std::sync::Arc::new(std::fs::File::from(fd))));
        self
    }

    fn umask(&mut self, mask: u32) -> &mut Command {
        self.setup.umask = Some(mask);
        self
    }

    fn uid(&mut self, uid: u32) -> &mut Command {
        self.setup.uid = Some(uid);
        self
    }

    fn gid(&mut self, gid: u32) -> &mut Command {
        self.setup.gid = Some(gid);
        self
    }

    fn groups(&mut self, groups: &[u32]) -> &mut Command {
        self.setup.groups = Some(groups.to_vec());
        self
    }

    fn ignore_signals(&mut self, signals: &[i32]) -> &mut Command {
        self.setup.ignore_signals = signals.to_vec();
        self
    }

    unsafe fn pre_exec_keeper<F>(&mut self, hook: F) -> &mut Command
    where
        F: FnMut() -> std::io::Result<()> + Send + 'static,
    {
        self.keeper_hook = Some(crate::contain::KeeperHook(std::sync::Arc::new(
            std::sync::Mutex::new(hook),
        )));
        self
    }
}

/// How a process ended, the Unix way.
pub trait ExitStatusExt {
    /// The signal that killed it, if one did.
    fn signal(&self) -> Option<i32>;
}

impl ExitStatusExt for ExitStatus {
    fn signal(&self) -> Option<i32> {
        match self.termination {
            Termination::Signal(s) => Some(s),
            Termination::Code(_) => None,
        }
    }
}

impl From<OwnedFd> for Stdio {
    /// This descriptor (duplicated for each spawn).
    fn from(fd: OwnedFd) -> Stdio {
        Stdio::Os(OsStdio(fd))
    }
}

macro_rules! fd_access {
    ($name:ident) => {
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

        impl From<$name> for OwnedFd {
            fn from(handle: $name) -> OwnedFd {
                handle.0.into()
            }
        }

        impl From<OwnedFd> for $name {
            fn from(fd: OwnedFd) -> $name {
                $name(std::fs::File::from(fd))
            }
        }
    };
}

fd_access!(ChildStdin);
fd_access!(ChildStdout);
fd_access!(ChildStderr);

/// The owner's handle is a descriptor: readable once the owner exited
/// (Linux: a pidfd; macOS: a kqueue with the owner's `NOTE_EXIT` filter).
impl AsFd for crate::watchdog::OwnerWatch {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.handle.as_fd()
    }
}

impl AsRawFd for crate::watchdog::OwnerWatch {
    fn as_raw_fd(&self) -> RawFd {
        self.handle.as_fd().as_raw_fd()
    }
}

/// A descriptor of this process known only by its number (say, one a
/// Python caller passed), duplicated into one the caller owns — for
/// [`CommandExt::pass_fd`], which takes ownership. The caller keeps (and
/// may close) its own.
///
/// # Errors
/// `EBADF` for a negative number or one that is not an open descriptor:
/// it is checked before anything borrows it.
pub fn duplicate_fd(fd: RawFd) -> std::io::Result<OwnedFd> {
    crate::contain::unix::duplicate_descriptor(fd)
}
