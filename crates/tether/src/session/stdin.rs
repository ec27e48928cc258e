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

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};

use tokio::sync::{mpsc, oneshot};

use super::{Session, lock};
use crate::error::{Error, Result};

/// Default [`RegistryConfig::stdin_queue_limit`](crate::registry::RegistryConfig::stdin_queue_limit):
/// 16 MiB of queued, not yet written stdin bytes per session.
pub const DEFAULT_STDIN_QUEUE_LIMIT: usize = 16 << 20;

/// The queue of one session.
#[derive(Default)]
pub(crate) struct StdinQueue {
    state: Mutex<QueueState>,
    /// Bytes queued and not yet written.
    queued: Arc<AtomicUsize>,
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
    done: oneshot::Sender<Result<()>>,
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
        let sender = state.sender.get_or_insert_with(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            tokio::spawn(write_queue(
                Arc::downgrade(session),
                Arc::clone(&self.queued),
                receiver,
            ));
            sender
        });
        let (done, answer) = oneshot::channel();
        self.queued.fetch_add(data.len(), Ordering::SeqCst);
        let pending = Pending { data, close, done };
        if let Err(mpsc::error::SendError(pending)) = sender.send(pending) {
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
        queued.fetch_sub(pending.data.len(), Ordering::SeqCst);
        let _ = pending.done.send(result);
    }
}
