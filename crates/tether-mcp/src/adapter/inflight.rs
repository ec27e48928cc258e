//! Requests in flight: at most [`MAX_IN_FLIGHT`] at once, each id at most
//! once.
//!
//! Why a bound: rmcp starts a task per request as fast as lines arrive, so
//! a client that pipelines requests (20,000 `list` calls with 60 live
//! sessions) made the server hold all their work and answers at once:
//! 1.18 GB at the peak, 500 MB still resident after. Here the transport
//! takes a permit before it hands a request on, and gives it back when
//! the answer is written (or the request is cancelled); without a permit
//! it stops reading stdin, and the client's writes wait in the pipe —
//! backpressure, nothing dropped. When the last request of a burst is
//! answered, memory the burst used is given back to the system
//! ([`memory::give_back`](super::memory::give_back)).
//!
//! Why ids are checked: rmcp keys its per-request state by id, so a second
//! request with the id of one in flight overwrote the first's, and one of
//! the two never got an answer. The second now gets an error at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::RequestId;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Requests handled at once; more wait in the pipe. High enough that no
/// agent's concurrent calls (a few long `wait`s and the calls beside them)
/// come near it; low enough that a flood's answers stay small (each is at
/// most the output budget, 16 KiB by default, plus a session list).
pub const MAX_IN_FLIGHT: usize = 128;

/// A burst this large is followed by giving memory back.
const BURST: usize = 32;

/// The requests in flight.
#[derive(Debug)]
pub struct InFlight {
    permits: Arc<Semaphore>,
    ids: Mutex<HashMap<RequestId, OwnedSemaphorePermit>>,
    /// Most requests in flight since memory was last given back.
    peak: AtomicUsize,
}

impl Default for InFlight {
    fn default() -> InFlight {
        InFlight::new(MAX_IN_FLIGHT)
    }
}

impl InFlight {
    /// At most `limit` at once.
    pub fn new(limit: usize) -> InFlight {
        InFlight {
            permits: Arc::new(Semaphore::new(limit)),
            ids: Mutex::new(HashMap::new()),
            peak: AtomicUsize::new(0),
        }
    }

    /// Waits for room for one more request (cancel-safe: a dropped wait
    /// takes nothing).
    pub async fn room(&self) -> OwnedSemaphorePermit {
        Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }

    /// Whether a request with `id` is in flight.
    pub fn has(&self, id: &RequestId) -> bool {
        lock(&self.ids).contains_key(id)
    }

    /// Records the request `id`, holding `permit` until it is answered.
    pub fn start(&self, id: RequestId, permit: OwnedSemaphorePermit) {
        let mut ids = lock(&self.ids);
        ids.insert(id, permit);
        self.peak.fetch_max(ids.len(), Ordering::Relaxed);
    }

    /// The request `id` was answered or cancelled: its permit goes back.
    /// The end of a burst gives memory back.
    pub fn finish(&self, id: &RequestId) {
        let idle = {
            let mut ids = lock(&self.ids);
            if ids.remove(id).is_none() {
                return;
            }
            ids.is_empty()
        };
        if idle && self.peak.swap(0, Ordering::Relaxed) >= BURST {
            super::memory::give_back();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn room_runs_out_and_comes_back_when_answered() {
        let inflight = InFlight::new(2);
        for n in 1..=2 {
            let permit = inflight.room().await;
            inflight.start(RequestId::Number(n), permit);
        }
        assert!(inflight.has(&RequestId::Number(1)));
        // Bounded: with both permits out, no room appears within 50 ms.
        let full =
            tokio::time::timeout(std::time::Duration::from_millis(50), inflight.room()).await;
        assert!(full.is_err());
        inflight.finish(&RequestId::Number(1));
        let permit = inflight.room().await;
        inflight.start(RequestId::Number(3), permit);
        assert!(!inflight.has(&RequestId::Number(1)));
    }
}
