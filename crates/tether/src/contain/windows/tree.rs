//! A contained tree on Windows: the owner's view of one job.

use std::io;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::Duration;

use tokio::sync::Notify;

use super::job::Job;
use super::monitor::Monitor;
use crate::contain::Descendant;
use crate::contain::TreeEvent;
use crate::containment::Containment;
use crate::error::{Error, Result};
use crate::identity::ProcessIdentity;
use crate::limits::LimitReport;

/// A running, contained command and everything it starts.
///
/// Dropping it asks the job monitor to kill what is left (the ladder, with
/// the command's grace) and then close the job; if this process ends first,
/// the kernel closes the job and kills the tree at once.
#[derive(Debug)]
pub(crate) struct Tree {
    pub(super) key: usize,
    pub(super) monitor: &'static Monitor,
    pub(super) identity: ProcessIdentity,
    pub(super) containment: Containment,
    /// The session's job (shared with the monitor), `None` if uncontained.
    pub(super) job: Option<Arc<Job>>,
    pub(super) session: String,
    pub(super) events: Receiver<TreeEvent>,
    pub(super) notify: Arc<Notify>,
    pub(super) settled: bool,
    /// The limits as the job holds them.
    pub(super) limits: LimitReport,
}

impl Tree {
    /// The main process.
    pub(crate) fn identity(&self) -> &ProcessIdentity {
        &self.identity
    }

    /// What holds the tree: `job`, or `none` when the caller asked for it.
    pub(crate) fn containment(&self) -> Containment {
        self.containment
    }

    /// The limits as applied, each with its enforcement.
    pub(crate) fn limits(&self) -> &LimitReport {
        &self.limits
    }

    /// There is no keeper on Windows.
    pub(crate) fn keeper_pid(&self) -> Option<u32> {
        None
    }

    /// A handle for starting kills from other threads.
    pub(crate) fn handle(&self) -> TreeHandle {
        TreeHandle {
            key: self.key,
            monitor: self.monitor,
        }
    }

    /// The next event, waiting at most `timeout` (`None` = forever);
    /// `Ok(None)` when none came (or none will: the tree settled).
    pub(crate) fn recv(&mut self, timeout: Option<Duration>) -> Result<Option<TreeEvent>> {
        let got = match timeout {
            None => self
                .events
                .recv()
                .map_err(|_| RecvTimeoutError::Disconnected),
            Some(t) if t.is_zero() => self.events.try_recv().map_err(|e| match e {
                TryRecvError::Empty => RecvTimeoutError::Timeout,
                TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
            }),
            Some(t) => self.events.recv_timeout(t),
        };
        match got {
            Ok(event) => {
                if matches!(event, TreeEvent::Settled { .. }) {
                    self.settled = true;
                }
                Ok(Some(event))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) if self.settled => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(Error::Keeper(io::Error::other(
                "the job monitor stopped watching this tree",
            ))),
        }
    }

    /// Starts the kill ladder on the whole tree, without waiting. No-op once
    /// the tree is known to be empty.
    pub(crate) fn start_kill(&self, grace: Duration) {
        if !self.settled {
            let _ = self.monitor.kill(self.key, grace);
        }
    }

    /// Live processes of the tree other than the main process.
    pub(crate) fn descendants(&self) -> Vec<Descendant> {
        if self.settled {
            return Vec::new();
        }
        let pids: Vec<u32> = match &self.job {
            Some(job) => job.process_ids().unwrap_or_default(),
            None => super::sys::session_members(&self.session, self.identity.pid)
                .into_iter()
                .map(|(pid, _)| pid)
                .collect(),
        };
        let mut out: Vec<Descendant> = pids
            .into_iter()
            .filter(|&pid| pid != self.identity.pid)
            .map(|pid| Descendant {
                pid,
                command: crate::contain::sys::describe(pid),
            })
            .collect();
        out.sort_by_key(|d| d.pid);
        out
    }

    /// What to poll beside the output pipes for this tree's events: nothing
    /// on Windows (see [`EventSource`](super::EventSource)).
    pub(crate) fn event_source(&self) -> io::Result<Option<super::EventSource>> {
        Ok(None)
    }

    /// Readiness of this tree's events for an async event loop.
    pub(crate) fn watcher(&self) -> io::Result<TreeWatcher> {
        Ok(TreeWatcher {
            notify: Arc::clone(&self.notify),
        })
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        self.monitor.dropped(self.key);
    }
}

/// Starts kills of a [`Tree`] from any thread.
#[derive(Clone, Debug)]
pub(crate) struct TreeHandle {
    key: usize,
    monitor: &'static Monitor,
}

impl TreeHandle {
    /// Starts the kill ladder (`CTRL_BREAK_EVENT` to the main process's
    /// group, `TerminateJobObject` after `grace`) without waiting for it.
    pub(crate) fn start_kill(&self, grace: Duration) -> Result<()> {
        self.monitor.kill(self.key, grace).map_err(Error::Io)
    }

    /// Windows has no signals to send a group.
    pub(crate) fn signal_group(&self, _signal: i32) -> Result<()> {
        Err(Error::Unsupported {
            what: "sending a signal",
            os: "windows",
        })
    }
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Monitor")
    }
}

/// Readiness of a tree's events: the monitor notifies after each event.
#[derive(Debug)]
pub(crate) struct TreeWatcher {
    notify: Arc<Notify>,
}

impl TreeWatcher {
    /// Waits until events may be ready, then runs `drain`, which takes every
    /// event available and says whether none is left.
    pub(crate) async fn wait(&self, drain: impl FnOnce() -> bool) -> io::Result<()> {
        self.notify.notified().await;
        if !drain() {
            // Some are left: the next wait must not sleep.
            self.notify.notify_one();
        }
        Ok(())
    }
}
