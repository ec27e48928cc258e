//! A contained tree on Unix: the owner's view of one keeper's session.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::foreground::Terminal;
use super::link::{KeeperLink, Sender};
use super::protocol::{Event, Request, Rung, Scope};
use super::watcher::TreeWatcher;
use crate::contain::Descendant;
use crate::contain::TreeEvent;
use crate::containment::Containment;
use crate::error::{Error, Result, Survivor};
use crate::identity::ProcessIdentity;
use crate::limits::LimitReport;

/// A running, contained command and everything it starts.
#[derive(Debug)]
pub(crate) struct Tree {
    link: KeeperLink,
    identity: ProcessIdentity,
    containment: Containment,
    session: String,
    ladder: Arc<[Rung]>,
    settled: bool,
    /// The terminal, for a foreground command.
    terminal: Option<Terminal>,
    /// The limits as the keeper applied them.
    limits: LimitReport,
    /// The keeper died without reporting the tree empty, and this many
    /// orphans were killed: every later wait says so again (the cleanup
    /// ran once; a second would find nothing and report 0).
    lost: Option<usize>,
}

impl Tree {
    pub(super) fn new(
        link: KeeperLink,
        identity: ProcessIdentity,
        containment: Containment,
        session: String,
        ladder: Vec<Rung>,
        limits: LimitReport,
    ) -> Tree {
        Tree {
            link,
            identity,
            containment,
            session,
            ladder: ladder.into(),
            settled: false,
            terminal: None,
            limits,
            lost: None,
        }
    }

    /// Makes the command the foreground job of this process's terminal
    /// (see [`Terminal`]). A command that read the terminal before it was
    /// handed over was stopped by `SIGTTIN`: it is continued.
    pub(super) fn take_foreground(&mut self) {
        self.terminal = Terminal::new(self.identity.pid);
        if self.terminal.as_ref().is_some_and(Terminal::handed_late) {
            let _ = self.handle().signal(libc::SIGCONT, Scope::Group);
        }
    }

    /// The main process.
    pub(crate) fn identity(&self) -> &ProcessIdentity {
        &self.identity
    }

    /// What holds the tree.
    pub(crate) fn containment(&self) -> Containment {
        self.containment
    }

    /// The limits as applied, each with its enforcement.
    pub(crate) fn limits(&self) -> &LimitReport {
        &self.limits
    }

    /// The keeper's pid (diagnostics, the ledger).
    pub(crate) fn keeper_pid(&self) -> Option<u32> {
        self.link.keeper_pid()
    }

    /// A handle for starting kills (and, on Unix, signalling) from other
    /// threads.
    pub(crate) fn handle(&self) -> TreeHandle {
        TreeHandle {
            sender: self.link.sender(),
            ladder: Arc::clone(&self.ladder),
        }
    }

    /// The next event, waiting at most `timeout` (`None` = forever);
    /// `Ok(None)` when none came. A keeper that died without reporting the
    /// tree empty is [`Error::KeeperLost`], its orphans already killed.
    ///
    /// With a `timeout`, a signal that interrupts the wait ends it early
    /// (`Ok(None)`), so the caller can run its handlers.
    pub(crate) fn recv(&mut self, timeout: Option<Duration>) -> Result<Option<TreeEvent>> {
        if let Some(owner) = self.link.inherited_from() {
            return Err(Error::InheritedAcrossFork { owner });
        }
        if let Some(orphans_killed) = self.lost {
            return Err(Error::KeeperLost { orphans_killed });
        }
        loop {
            let event = match self.link.recv(timeout) {
                Ok(Some(event)) => event,
                Ok(None) => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(self.lost()),
                Err(e) => return Err(Error::Keeper(e)),
            };
            let event = match event {
                Event::MainExited {
                    termination,
                    timed_out,
                    limit_hit,
                    oom_outside,
                    usage,
                } => {
                    // The terminal goes back the moment the command is done.
                    self.terminal = None;
                    TreeEvent::MainExited {
                        termination,
                        timed_out,
                        limit_hit,
                        oom_outside,
                        usage,
                    }
                }
                Event::MainStopped { signal } => {
                    if let Some(terminal) = self.terminal.as_mut() {
                        if !terminal.is_stale_stop(signal) {
                            terminal.stop_job(signal);
                        }
                        let _ = self.handle().signal(libc::SIGCONT, Scope::Group);
                    }
                    continue;
                }
                Event::MainContinued => continue,
                Event::TreeEmpty {
                    killed,
                    limit_hit,
                    oom_outside,
                    escaped,
                    usage,
                } => {
                    self.settled = true;
                    // The keeper waits for another command: back to the
                    // warm pool if it wants one (a PID namespace is spent),
                    // else told to go (EOF), to be reaped with the link.
                    let reusable = self.containment != Containment::PidNamespace;
                    if !(reusable && super::pool::recycle(&mut self.link)) {
                        self.link.finish();
                    }
                    TreeEvent::Settled {
                        killed,
                        limit_hit,
                        oom_outside,
                        usage,
                        escaped: escaped
                            .into_iter()
                            .map(|(pid, cgroup, moved_back)| crate::limits::LimitEscape {
                                pid,
                                cgroup: String::from_utf8_lossy(&cgroup).into_owned(),
                                moved_back,
                            })
                            .collect(),
                    }
                }
                Event::KillFailed { survivors } => TreeEvent::KillFailed {
                    survivors: survivors
                        .into_iter()
                        .map(|(pid, cmd)| Survivor {
                            pid,
                            command: String::from_utf8_lossy(&cmd).into_owned(),
                        })
                        .collect(),
                },
                // Only answers to a spawn: not expected here.
                Event::Started { .. } | Event::SpawnFailed { .. } | Event::Unusable { .. } => {
                    continue;
                }
            };
            return Ok(Some(event));
        }
    }

    /// Starts the kill ladder on the whole tree, without waiting. No-op once
    /// the tree is known to be empty.
    pub(crate) fn start_kill(&self, grace: Duration) {
        if self.settled {
            return;
        }
        // A send error means the keeper already finished; its last events
        // are still in the socket and tell how.
        let _ = self.handle().start_kill(grace);
    }

    /// Live processes of the tree other than the main process (and the
    /// PID-namespace init, which is tether's, not the command's).
    pub(crate) fn descendants(&self) -> Vec<Descendant> {
        if self.settled {
            return Vec::new();
        }
        let Some(keeper) = self.link.keeper_pid() else {
            return Vec::new();
        };
        crate::contain::os::descendants(keeper, &self.identity, self.containment, &self.session)
    }

    /// Readiness of this tree's events for an async event loop: wait on it,
    /// then call [`recv`](Self::recv) with a zero timeout until `Ok(None)`.
    pub(crate) fn watcher(&self) -> io::Result<TreeWatcher> {
        TreeWatcher::new(self.link.event_lifeline()?)
    }

    /// What to poll, beside the output pipes, for this tree's events (see
    /// [`read_both`](super::read_both)): a copy of the keeper socket, whose
    /// EOF is the keeper's death. `None` once the tree is settled (the
    /// keeper may serve another session by then).
    pub(crate) fn event_source(&self) -> io::Result<Option<super::EventSource>> {
        if self.settled {
            return Ok(None);
        }
        self.link.event_lifeline().map(Some)
    }

    /// The keeper died without reporting an empty tree. With a PID
    /// namespace the kernel took the tree down with it. Otherwise its
    /// orphans went to the nearest subreaper (this process, if it is one)
    /// or to init: find and kill them.
    fn lost(&mut self) -> Error {
        // Reaped first: once the keeper's exit is reported, the kernel has
        // reparented its orphans, so none is missed below.
        self.link.reap();
        self.settled = true;
        self.terminal = None;
        let orphans_killed = super::orphans::kill_orphans(&self.session);
        // The keeper cannot remove the session's cgroups any more: the
        // empty ones go now (the rest is `tether reap`'s).
        crate::contain::os::remove_leftover_cgroups(&self.limits.cgroups);
        self.lost = Some(orphans_killed);
        Error::KeeperLost { orphans_killed }
    }
}

/// Starts kills of a [`Tree`] from any thread. Events (the exit, the empty
/// tree) still arrive at the tree's `recv`.
#[derive(Clone, Debug)]
pub(crate) struct TreeHandle {
    sender: Arc<Sender>,
    ladder: Arc<[Rung]>,
}

/// How long a dropped foreground tree waits for its main process to die
/// before giving the terminal back all the same: a SIGKILLed process is
/// reaped and reported in milliseconds; this bounds a stuck keeper.
const FOREGROUND_DROP_WAIT: Duration = Duration::from_secs(5);

impl Drop for Tree {
    /// A foreground command dropped while it runs (its handle collected,
    /// an interrupt raised before the caller could keep it) holds the
    /// terminal. It is given back only once the main process is dead:
    /// given back at once, the command — still blocked in a read of the
    /// terminal, which a process put in the background mid-read finishes —
    /// took the next line typed there (test_terminal, 4 in 100 runs under
    /// load: "world" read as "orld" by the next command). So the tree gets
    /// the forced end now (a dropped tree is killed in any case; the
    /// keeper would have started its ladder at the link's EOF) and its
    /// `MainExited` is awaited, bounded.
    fn drop(&mut self) {
        if self.terminal.is_none() || self.settled || self.lost.is_some() {
            return;
        }
        self.start_kill(Duration::ZERO);
        let deadline = std::time::Instant::now() + FOREGROUND_DROP_WAIT;
        while self.terminal.is_some() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            match self.recv(Some(left)) {
                Ok(Some(_)) => {}
                // Interrupted by a signal: wait on.
                Ok(None) => {}
                Err(_) => break,
            }
        }
    }
}

impl TreeHandle {
    /// Starts the kill ladder on the whole tree (the command's own gentle
    /// signals at once, SIGKILL for what is alive `grace` later) without
    /// waiting for it.
    pub(crate) fn start_kill(&self, grace: Duration) -> Result<()> {
        self.send(&Request::Kill {
            ladder: self.ladder.to_vec(),
            grace_ms: millis(grace),
        })
    }

    /// Sends `signal` to `scope` now.
    pub(crate) fn signal(&self, signal: i32, scope: Scope) -> Result<()> {
        self.send(&Request::Signal { signal, scope })
    }

    /// Passes `signal` on, then kills the whole tree after `grace` unless
    /// it ended by itself. `SIGINT` and `SIGQUIT` — what a terminal's
    /// keys send to its foreground job only — go to the main process's
    /// group; any other signal (`SIGTERM`, `SIGHUP`: the whole program is
    /// asked to end) to every process of the tree at once, as a kill's
    /// first rung does. Either way, what the main process leaves when it
    /// exits gets the session's gentle signals at once.
    pub(crate) fn interrupt(&self, signal: i32, grace: Duration) -> Result<()> {
        let scope = match signal {
            libc::SIGINT | libc::SIGQUIT => Scope::Group,
            _ => Scope::Tree,
        };
        self.send(&Request::Kill {
            ladder: vec![Rung { signal, scope }],
            grace_ms: millis(grace),
        })
    }

    /// Sends `signal` to the main process's process group now.
    pub(crate) fn signal_group(&self, signal: i32) -> Result<()> {
        self.signal(signal, Scope::Group)
    }

    fn send(&self, request: &Request) -> Result<()> {
        if let Some(owner) = self.sender.inherited_from() {
            return Err(Error::InheritedAcrossFork { owner });
        }
        self.sender.send(request, &[]).map_err(Error::Keeper)
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}
