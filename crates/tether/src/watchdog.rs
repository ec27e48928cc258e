//! Helper processes that end when their owner dies.
//!
//! A helper — a worker a gateway starts per session, a language server, an
//! MCP server a client spawned — should not outlive the process it serves.
//! Call this first thing in the helper, before heavy initialization (not
//! run as a test, `no_run`: it sketches a helper that serves forever and
//! needs an owner in `TETHER_SPAWN`; [`Builder`] has one that runs):
//!
//! ```no_run
//! fn main() {
//!     // Owner from TETHER_SPAWN (set by tether, or by a launcher through
//!     // `tether spawn-tag`); exits the process the moment it dies.
//!     let watchdog = tether::watchdog::exit_when_orphaned().expect("an owner to watch");
//!     loop {
//!         let request = read_request();
//!         let _busy = watchdog.in_flight(); // finish this one, within the grace
//!         serve(request);
//!     }
//! }
//! # fn read_request() {}
//! # fn serve(_: ()) {}
//! ```
//!
//! # How it works
//!
//! The owner is pinned by a handle that names that one process for as long
//! as it is held — a pidfd on Linux, a kqueue `EVFILT_PROC`/`NOTE_EXIT`
//! filter on macOS, a process handle (`SYNCHRONIZE`) on Windows — opened
//! *first* and checked against the owner's identity (pid and start time,
//! and the pidfs inode when the identity carries one) *after*. A thread
//! sleeps on that handle; the kernel wakes it when the owner exits, by any
//! cause. Nothing polls `getppid()`: that needs a timer (the seed system
//! checked every 2 s), never fires on Windows (no reparenting), and fires
//! wrongly when an intermediate parent exits.
//!
//! So a recycled pid can neither keep the helper alive (the handle is the
//! dead owner's, not the pid's) nor end it early (a process that took over
//! the owner's pid *before* the helper started watching has another start
//! time, so the owner counts as gone at once — exactly right, because it
//! is). The one case tether cannot tell apart from the process table: an
//! owner that started, had the helper started, died, and had its pid taken
//! again, all within one clock tick (10 ms on Linux) *before* the helper
//! began watching. A tag carries only pid and start time; give the owner
//! explicitly ([`Builder::owner`] with a [`ProcessIdentity`] read by the
//! owner itself, pidfs inode included) where that matters.
//!
//! # In-flight requests
//!
//! [`Watchdog::in_flight`] marks a request being served. When the owner
//! dies with requests in flight, the watchdog waits until they are all done
//! or the grace ([`DEFAULT_GRACE`], [`Builder::grace`]) passes, whichever
//! comes first, then acts. Check [`Watchdog::is_orphaned`] before taking
//! new work: a request started after the owner died does not extend the
//! grace.
//!
//! # What dies with the helper
//!
//! - **Started through tether** (`tether::Command`, `tether run`, a `tether
//!   mcp` session): the helper and everything it starts are one session of
//!   the owner, and the keeper kills that whole tree when the owner dies —
//!   setsid and double-fork escapes included — whether or not the helper
//!   runs a watchdog. The session's kill ladder (its grace) then bounds the
//!   in-flight wait too: the keeper's `SIGTERM` comes at once.
//! - **Started some other way** (a plain `fork`/`Popen` with a stamped tag,
//!   or an explicit owner): the watchdog ends the helper only. Its own
//!   children are not contained by anything: they survive, reparented,
//!   unless the helper started them through tether (then they are sessions
//!   the helper owns, and die with it however it ends), or they run a
//!   watchdog of their own naming the helper, or they carry a spawn tag
//!   naming a dead owner — then `tether reap` proves them orphaned and
//!   kills them.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::contain::{self, OwnerHandle};
pub use crate::error::WatchdogError;
use crate::identity::ProcessIdentity;
use crate::spawn_tag::{SPAWN_TAG_VAR, SpawnTag};

/// How long requests in flight may run on after the owner died, by
/// default (the seed system's 5 s).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// The exit status of a helper the watchdog ends, by default: its owner
/// being gone is the expected way for a helper to end.
pub const DEFAULT_EXIT_CODE: i32 = 0;

/// Starts a watchdog that exits this process (status
/// [`DEFAULT_EXIT_CODE`]) when the owner named by `TETHER_SPAWN` dies,
/// after requests in flight finish or [`DEFAULT_GRACE`] passes. If the
/// owner is already gone, the process exits at once.
///
/// # Errors
/// See [`owner_from_env`]; and [`WatchdogError::Io`] if the owner cannot
/// be watched (descriptor limits, a kernel without pidfds — Linux < 5.3).
pub fn exit_when_orphaned() -> Result<Watchdog, WatchdogError> {
    Builder::new().start()
}

/// The owner named by the spawn tag in this process's `TETHER_SPAWN`, as
/// an identity of this boot (pid and start time; a tag carries no pidfs
/// inode).
///
/// # Errors
/// [`WatchdogError::NoOwner`] when the variable is not set,
/// [`WatchdogError::BadTag`] when it is malformed,
/// [`WatchdogError::Unverifiable`] when it names no start time (`0`), and
/// [`WatchdogError::OwnerIsSelf`] when it names this very process.
pub fn owner_from_env() -> Result<ProcessIdentity, WatchdogError> {
    let value = std::env::var_os(SPAWN_TAG_VAR).ok_or(WatchdogError::NoOwner)?;
    let text = value.to_str().ok_or_else(|| WatchdogError::BadTag {
        value: value.to_string_lossy().into_owned(),
        reason: "not UTF-8".into(),
    })?;
    let tag: SpawnTag = text
        .parse()
        .map_err(|e: crate::TagError| WatchdogError::BadTag {
            value: text.to_owned(),
            reason: e.to_string(),
        })?;
    owner_of_tag(&tag)
}

/// The owner a spawn tag names, as an identity of this boot.
///
/// # Errors
/// As [`owner_from_env`], minus the environment.
pub fn owner_of_tag(tag: &SpawnTag) -> Result<ProcessIdentity, WatchdogError> {
    if tag.owner_start == 0 {
        return Err(WatchdogError::Unverifiable { pid: tag.owner_pid });
    }
    if tag.owner_pid == std::process::id() {
        return Err(WatchdogError::OwnerIsSelf);
    }
    Ok(ProcessIdentity {
        boot_id: contain::sys::boot_id().to_owned(),
        pid: tag.owner_pid,
        start_time: tag.owner_start,
        pidfs_inode: None,
    })
}

/// The owner, pinned: the low-level handle, for a helper with an event loop
/// of its own. It holds the OS handle (on Unix its descriptor is readable
/// once the owner exited: register it with epoll, kqueue or tokio's
/// `AsyncFd` through `AsFd`; on Windows wait on its `AsRawHandle`).
#[derive(Debug)]
pub struct OwnerWatch {
    owner: ProcessIdentity,
    pub(crate) handle: OwnerHandle,
}

impl OwnerWatch {
    /// Pins `owner` (see the module docs for why a recycled pid cannot
    /// fool it).
    ///
    /// # Errors
    /// [`WatchdogError::OwnerGone`] when that process has exited or its pid
    /// now names another process; [`WatchdogError::OwnerIsSelf`];
    /// [`WatchdogError::Io`] when it cannot be watched.
    pub fn new(owner: &ProcessIdentity) -> Result<OwnerWatch, WatchdogError> {
        if owner.pid == std::process::id() {
            return Err(WatchdogError::OwnerIsSelf);
        }
        if owner.boot_id != contain::sys::boot_id() {
            return Err(WatchdogError::OwnerGone {
                owner: owner.clone(),
            });
        }
        match contain::watch_owner(owner) {
            Ok(Some(handle)) => Ok(OwnerWatch {
                owner: owner.clone(),
                handle,
            }),
            Ok(None) => Err(WatchdogError::OwnerGone {
                owner: owner.clone(),
            }),
            Err(e) => Err(WatchdogError::Io(e)),
        }
    }

    /// Pins the owner named by `TETHER_SPAWN` ([`owner_from_env`]).
    ///
    /// # Errors
    /// As [`owner_from_env`] and [`OwnerWatch::new`].
    pub fn from_env() -> Result<OwnerWatch, WatchdogError> {
        OwnerWatch::new(&owner_from_env()?)
    }

    /// The owner watched.
    pub fn owner(&self) -> &ProcessIdentity {
        &self.owner
    }

    /// Whether the owner has exited (without waiting).
    pub fn has_exited(&self) -> bool {
        self.handle.wait(Some(Duration::ZERO)).unwrap_or(false)
    }

    /// Blocks until the owner exits.
    ///
    /// # Errors
    /// Only if the OS refuses to wait on the handle (it does not, for a
    /// valid one).
    pub fn wait(&self) -> std::io::Result<()> {
        while !self.handle.wait(None)? {}
        Ok(())
    }

    /// Blocks until the owner exits (`true`) or `timeout` passes (`false`).
    ///
    /// # Errors
    /// As [`OwnerWatch::wait`].
    pub fn wait_timeout(&self, timeout: Duration) -> std::io::Result<bool> {
        self.handle.wait(Some(timeout))
    }
}

/// What the watchdog found when it acted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Orphaned {
    /// The owner that died.
    pub owner: ProcessIdentity,
    /// Requests in flight when its death was seen.
    pub in_flight: usize,
    /// Requests still in flight when the watchdog acted (the grace ran
    /// out on them).
    pub abandoned: usize,
    /// How long the watchdog waited for requests in flight.
    pub waited: Duration,
}

type Callback = Box<dyn FnOnce(&Orphaned) + Send + 'static>;

/// What to do once the owner is gone.
enum Action {
    /// `std::process::exit` with this status.
    Exit(i32),
    /// Run this on the watchdog's thread.
    Call(Callback),
}

/// Configures a [`Watchdog`]: owner (default: from `TETHER_SPAWN`), grace
/// (default [`DEFAULT_GRACE`]) and action (default: exit with
/// [`DEFAULT_EXIT_CODE`]).
///
/// ```
/// # #[cfg(unix)] {
/// use std::time::Duration;
/// use tether::{ProcessIdentity, watchdog::Builder};
///
/// // Stand-in for an owner: any process; here a `sleep` this example kills.
/// let mut owner = std::process::Command::new("sleep").arg("1000").spawn()?;
/// let (tell, told) = std::sync::mpsc::channel();
/// let watchdog = Builder::new()
///     .owner(ProcessIdentity::of_pid(owner.id())?)
///     .grace(Duration::from_secs(1))
///     .on_orphaned(move |orphaned| tell.send(orphaned.clone()).unwrap())
///     .start()?;
/// assert!(!watchdog.is_orphaned());
///
/// owner.kill()?;
/// owner.wait()?;
/// // The kernel wakes the watchdog's thread: no polling, no timer.
/// let orphaned = told.recv_timeout(Duration::from_secs(10))?;
/// assert_eq!((orphaned.in_flight, orphaned.abandoned), (0, 0));
/// assert!(watchdog.is_orphaned());
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Builder {
    owner: Option<ProcessIdentity>,
    grace: Duration,
    action: Action,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("owner", &self.owner)
            .field("grace", &self.grace)
            .finish_non_exhaustive()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// The defaults: owner from `TETHER_SPAWN`, [`DEFAULT_GRACE`], exit
    /// with [`DEFAULT_EXIT_CODE`].
    pub fn new() -> Builder {
        Builder {
            owner: None,
            grace: DEFAULT_GRACE,
            action: Action::Exit(DEFAULT_EXIT_CODE),
        }
    }

    /// Watches this process instead of the one `TETHER_SPAWN` names (an
    /// identity the owner read itself, `ProcessIdentity::current()`, and
    /// passed on — with its pidfs inode, where the kernel has one).
    pub fn owner(mut self, owner: ProcessIdentity) -> Builder {
        self.owner = Some(owner);
        self
    }

    /// How long requests in flight may run on after the owner died
    /// (default [`DEFAULT_GRACE`], 5 s; zero: act at once).
    pub fn grace(mut self, grace: Duration) -> Builder {
        self.grace = grace;
        self
    }

    /// Exits with this status when the owner is gone (the default action,
    /// with [`DEFAULT_EXIT_CODE`]).
    pub fn exit_code(mut self, code: i32) -> Builder {
        self.action = Action::Exit(code);
        self
    }

    /// Runs `callback` on the watchdog's thread instead of exiting, once,
    /// when the owner is gone and requests in flight are done (or the grace
    /// ran out). The process keeps running unless the callback ends it.
    pub fn on_orphaned(mut self, callback: impl FnOnce(&Orphaned) + Send + 'static) -> Builder {
        self.action = Action::Call(Box::new(callback));
        self
    }

    /// Pins the owner and starts the watchdog's thread. If the owner is
    /// already gone the action runs at once (on that thread).
    ///
    /// # Errors
    /// [`owner_from_env`]'s, when no owner was given; [`WatchdogError::Io`]
    /// if the owner cannot be watched or the thread cannot start.
    pub fn start(self) -> Result<Watchdog, WatchdogError> {
        let owner = match self.owner {
            Some(owner) => owner,
            None => owner_from_env()?,
        };
        let watch = match OwnerWatch::new(&owner) {
            Ok(watch) => Some(watch),
            Err(WatchdogError::OwnerGone { .. }) => None,
            Err(e) => return Err(e),
        };
        let shared = Arc::new(Shared {
            owner,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let thread_shared = Arc::clone(&shared);
        let (grace, action) = (self.grace, self.action);
        std::thread::Builder::new()
            .name("tether-watchdog".into())
            .spawn(move || watch_and_act(&thread_shared, watch, grace, action))
            .map_err(WatchdogError::Io)?;
        Ok(Watchdog { shared })
    }
}

/// A running watchdog (see the module docs). Dropping it does not stop
/// it: it watches for the rest of the process's life.
#[derive(Debug, Clone)]
pub struct Watchdog {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    owner: ProcessIdentity,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    in_flight: usize,
    orphaned: bool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Watchdog {
    /// The owner watched.
    pub fn owner(&self) -> &ProcessIdentity {
        &self.shared.owner
    }

    /// Marks a request in flight until the returned guard is dropped.
    pub fn in_flight(&self) -> InFlight {
        self.shared.lock().in_flight += 1;
        InFlight {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Whether the owner has been seen dead (the watchdog is waiting for
    /// requests in flight, or has acted).
    pub fn is_orphaned(&self) -> bool {
        self.shared.lock().orphaned
    }
}

/// A request in flight (see [`Watchdog::in_flight`]); done when dropped.
#[derive(Debug)]
#[must_use = "the request counts as in flight only while the guard lives"]
pub struct InFlight {
    shared: Arc<Shared>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        self.shared.changed.notify_all();
    }
}

/// The watchdog's thread: sleep on the owner's handle, then give requests
/// in flight their grace, then act.
fn watch_and_act(shared: &Shared, watch: Option<OwnerWatch>, grace: Duration, action: Action) {
    if let Some(watch) = &watch {
        // An error from a wait on a valid handle is not expected; if the
        // OS ever gives one, wait again rather than end the helper.
        while watch.wait().is_err() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let seen = Instant::now();
    let deadline = seen + grace;
    let mut state = shared.lock();
    state.orphaned = true;
    let at_death = state.in_flight;
    while state.in_flight > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        state = shared
            .changed
            .wait_timeout(state, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    let report = Orphaned {
        owner: shared.owner.clone(),
        in_flight: at_death,
        abandoned: state.in_flight,
        waited: seen.elapsed(),
    };
    drop(state);
    match action {
        Action::Exit(code) => std::process::exit(code),
        Action::Call(callback) => callback(&report),
    }
}
