//! A session's stdin queue: writes handed over without waiting, written in
//! order by one background task as fast as the command reads them.
//!
//! Why a queue: a caller that writes to a command which is slow to read (or
//! not reading at all) must not be blocked for as long as the command
//! takes — an MCP `write` call has to answer within its yield window
//! whatever the command does. [`Registry::write`](crate::registry::Registry::write)
//! waits for the pipe; [`Registry::queue_write`](crate::registry::Registry::queue_write)
//! returns at once with a [`QueuedWrite`] that completes when the bytes are
//! in the pipe. The queue is bounded in bytes (a caller cannot park
//! unbounded memory here) and refuses with
//! [`Error::StdinQueueFull`](crate::Error::StdinQueueFull) beyond it.
//!
//! The writer task holds the session only weakly between writes, so a
//! session that ends (and is evicted) is freed even while its queue exists.
//!
//! A PTY session's answers to its program's terminal queries (cursor
//! position, device attributes) take the same path, in order with the
//! caller's writes, under a bound of their own: [`ANSWERS_LIMIT`] bytes
//! queued and not yet written, as a terminal's own input buffer is
//! bounded. A program that asks faster than it reads its input loses the
//! answers beyond that, counted in
//! [`SessionInfo::terminal_answers_dropped`](crate::registry::SessionInfo::terminal_answers_dropped).
//! Before, each batch of answers was a task of its own blocked on the
//! write: a program printing queries in a loop without reading took
//! `tether mcp` from ~22 MB to 250–285 MB in 30 s (issue 16).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};

use tokio::sync::{mpsc, oneshot};

use super::{Session, lock};
use crate::error::{Error, Result};

/// Default [`RegistryConfig::stdin_queue_limit`](crate::registry::RegistryConfig::stdin_queue_limit):
/// 16 MiB of queued, not yet written stdin bytes per session.
pub const DEFAULT_STDIN_QUEUE_LIMIT: usize = 16 << 20;

/// Answers to terminal queries queued for a PTY session's program and not
/// yet written, at most: 4 KiB, the size of Linux's own terminal input
/// buffer (`N_TTY_BUF_SIZE`) — and 4 KiB of unread answers is hundreds of
/// queries the program never read the answers to.
pub const ANSWERS_LIMIT: usize = 4 << 10;

/// The queue of one session.
#[derive(Default)]
pub(crate) struct StdinQueue {
    state: Mutex<QueueState>,
    /// Bytes queued and not yet written.
    queued: Arc<AtomicUsize>,
    /// Answer bytes queued and not yet written (at most [`ANSWERS_LIMIT`]).
    answers: Arc<AtomicUsize>,
    /// Answers to terminal queries that were never written: the queue of
    /// answers was full, or stdin was closed.
    answers_dropped: AtomicU64,
}

#[derive(Default)]
struct QueueState {
    /// To the writer task, once started.
    sender: Option<mpsc::UnboundedSender<Pending>>,
    /// Stdin was closed (by a queued close, `close_stdin` or the exit):
    /// later writes fail at once.
    closed: bool,
}

/// One write waiting for the writer task.
struct Pending {
    data: Vec<u8>,
    close: bool,
    /// Who learns how it went: a caller's write, or nobody (answers).
    done: Option<oneshot::Sender<Result<()>>>,
}

/// A write accepted by [`Registry::queue_write`](crate::registry::Registry::queue_write).
/// Await it to learn when its bytes are in the pipe (and stdin closed, if
/// asked); dropping it does not cancel the write.
#[must_use = "the write goes on regardless; await it to learn how it went"]
#[derive(Debug)]
pub struct QueuedWrite {
    done: oneshot::Receiver<Result<()>>,
    id: String,
}

impl Future for QueuedWrite {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.done).poll(cx).map(|answer| {
            answer.unwrap_or_else(|_| {
                Err(Error::StdinClosed {
                    id: self.id.clone(),
                    why: "the session was torn down before the write",
                })
            })
        })
    }
}

impl StdinQueue {
    /// Bytes queued and not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    /// Answers to terminal queries dropped so far.
    pub(crate) fn answers_dropped(&self) -> u64 {
        self.answers_dropped.load(Ordering::SeqCst)
    }

    /// Queues the answers to `count` terminal queries, after whatever is
    /// queued already. Dropped (and counted) when [`ANSWERS_LIMIT`] bytes
    /// of answers wait already — the program is not reading them — or
    /// when stdin is closed. Never blocks, never fails.
    pub(crate) fn push_answers(&self, session: &Arc<Session>, data: Vec<u8>, count: u64) {
        let mut state = lock(&self.state);
        let queued = self.answers.load(Ordering::SeqCst);
        if state.closed
            || lock(&session.stdin).is_none()
            || queued.saturating_add(data.len()) > ANSWERS_LIMIT
        {
            self.answers_dropped.fetch_add(count, Ordering::SeqCst);
            return;
        }
        let len = data.len();
        self.answers.fetch_add(len, Ordering::SeqCst);
        let pending = Pending {
            data,
            close: false,
            done: None,
        };
        if self.sender(&mut state, session).send(pending).is_err() {
            // The writer ended (stdin failed).
            self.answers.fetch_sub(len, Ordering::SeqCst);
            self.answers_dropped.fetch_add(count, Ordering::SeqCst);
            state.closed = true;
            state.sender = None;
        }
    }

    /// The writer task's channel, starting the task on first use.
    fn sender<'a>(
        &self,
        state: &'a mut QueueState,
        session: &Arc<Session>,
    ) -> &'a mpsc::UnboundedSender<Pending> {
        state.sender.get_or_insert_with(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            // No runtime: it shut down with the session finished, and the
            // dropped receiver fails what is queued.
            if let Some(runtime) = session.runtime() {
                runtime.spawn(write_queue(
                    Arc::downgrade(session),
                    Arc::clone(&self.queued),
                    Arc::clone(&self.answers),
                    receiver,
                ));
            }
            sender
        })
    }

    /// Stdin is closed: writes still queued fail, later ones at once.
    pub(crate) fn close(&self) {
        let mut state = lock(&self.state);
        state.closed = true;
        state.sender = None;
    }

    /// Queues `data` (then closes stdin if `close`), starting the writer
    /// task on first use. Refuses when stdin is closed or the queue would
    /// hold more than `limit` bytes.
    pub(crate) fn push(
        &self,
        session: &Arc<Session>,
        data: Vec<u8>,
        close: bool,
        limit: usize,
    ) -> Result<QueuedWrite> {
        let id = session.id.to_string();
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        if lock(&session.stdin).is_none() {
            return Err(session.stdin_error());
        }
        if state.closed {
            return Err(Error::StdinClosed {
                id,
                why: "a write queued before this one closes it",
            });
        }
        let queued = self.queued();
        if queued.saturating_add(data.len()) > limit {
            return Err(Error::StdinQueueFull {
                id,
                bytes: data.len(),
                queued,
                limit,
            });
        }
        let (done, answer) = oneshot::channel();
        self.queued.fetch_add(data.len(), Ordering::SeqCst);
        let pending = Pending {
            data,
            close,
            done: Some(done),
        };
        if let Err(mpsc::error::SendError(pending)) = self.sender(state, session).send(pending) {
            // The writer ended (stdin failed): refuse like a closed stdin.
            self.queued.fetch_sub(pending.data.len(), Ordering::SeqCst);
            state.closed = true;
            state.sender = None;
            return Err(session.stdin_error());
        }
        if close {
            // Nothing can follow a close: let the writer end after it.
            state.closed = true;
            state.sender = None;
        }
        Ok(QueuedWrite { done: answer, id })
    }
}

/// The writer task: writes each queued write whole, in order, however long
/// the command takes to read it. Holds the session only while writing.
async fn write_queue(
    session: Weak<Session>,
    queued: Arc<AtomicUsize>,
    answers: Arc<AtomicUsize>,
    mut receiver: mpsc::UnboundedReceiver<Pending>,
) {
    let mut failed = false;
    while let Some(pending) = receiver.recv().await {
        let result = match session.upgrade() {
            None => Err(Error::StdinClosed {
                id: String::new(),
                why: "the session is gone",
            }),
            Some(session) if failed => Err(Error::StdinClosed {
                id: session.id.to_string(),
                why: "an earlier write to it failed",
            }),
            Some(session) => {
                let result = session.write_stdin(&pending.data).await;
                match &result {
                    Ok(()) if pending.close => {
                        session.close_stdin();
                    }
                    Ok(()) => {}
                    Err(_) => {
                        // Nothing more can be written: refuse later writes
                        // at once, fail the ones already queued.
                        failed = true;
                        session.stdin_queue.close();
                    }
                }
                result
            }
        };
        match pending.done {
            Some(done) => {
                queued.fetch_sub(pending.data.len(), Ordering::SeqCst);
                let _ = done.send(result);
            }
            None => {
                answers.fetch_sub(pending.data.len(), Ordering::SeqCst);
            }
        }
    }
}
