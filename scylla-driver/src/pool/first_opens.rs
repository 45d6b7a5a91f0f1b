//! A session's first connections to its nodes, started a few at a time.
//!
//! A pool that holds no connection asks the session's [`FirstOpens`] before
//! it opens its first: one such open may be in flight, plus one per pool of
//! the session that holds a connection (the rule is
//! [`FirstOpenFacts::admits`], which `storm_sim` calls too). At a cold start
//! the session's first opens go 1, 2, 4... at a time as its nodes answer;
//! when one node of a connected cluster restarts, its pool goes at once. An
//! open still in flight after [`FIRST_OPEN_STALL`] stops counting, so that a
//! silent node holds the others back for no longer than that.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::pacing::FirstOpenFacts;
#[cfg(doc)]
use super::pacing::FIRST_OPEN_STALL;

/// The first opens of one session's pools (shared by its pools).
#[derive(Debug, Default)]
pub(crate) struct FirstOpens {
    counts: Mutex<Counts>,
    changed: Notify,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    /// First opens let through and still counted.
    in_flight: usize,
    /// Pools of the session holding a connection.
    connected: usize,
}

/// A first open let through; it counts until released or dropped.
#[derive(Debug)]
pub(crate) struct FirstOpenPass {
    gate: Option<Arc<FirstOpens>>,
}

impl FirstOpenPass {
    /// The open stops counting (it ended, or stalled).
    pub(crate) fn release(&mut self) {
        if let Some(gate) = self.gate.take() {
            gate.update(|c| c.in_flight = c.in_flight.saturating_sub(1));
        }
    }
}

impl Drop for FirstOpenPass {
    fn drop(&mut self) {
        self.release();
    }
}

impl FirstOpens {
    /// Waits until the session's rule admits one more first open.
    pub(crate) async fn enter(self: &Arc<Self>) -> FirstOpenPass {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the look: a change after it wakes this wait.
            changed.as_mut().enable();
            {
                let mut c = self.lock();
                let facts = FirstOpenFacts {
                    in_flight: c.in_flight,
                    connected: c.connected,
                };
                if facts.admits() {
                    c.in_flight += 1;
                    return FirstOpenPass {
                        gate: Some(self.clone()),
                    };
                }
            }
            changed.await;
        }
    }

    /// A pool of the session gained its first connection (`true`) or lost
    /// its last.
    pub(crate) fn connected_changed(&self, connected: bool) {
        self.update(|c| {
            if connected {
                c.connected += 1;
            } else {
                c.connected = c.connected.saturating_sub(1);
            }
        });
    }

    fn update(&self, f: impl FnOnce(&mut Counts)) {
        f(&mut self.lock());
        self.changed.notify_waiters();
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        // The counts stay consistent whatever panicked while holding them.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::time::Duration;

    fn admitted_now(gate: &Arc<FirstOpens>) -> Option<FirstOpenPass> {
        let mut enter = Box::pin(gate.enter());
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match enter.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(pass) => Some(pass),
            std::task::Poll::Pending => None,
        }
    }

    #[test]
    fn one_first_open_then_one_more_per_node_that_answered() {
        let gate = Arc::new(FirstOpens::default());
        let mut a = admitted_now(&gate).expect("the first goes at once");
        assert!(admitted_now(&gate).is_none(), "a second waits");
        // The first ended and its pool holds a connection: two may go.
        gate.connected_changed(true);
        a.release();
        let b = admitted_now(&gate).expect("one per connected pool");
        let c = admitted_now(&gate).expect("plus one");
        assert!(admitted_now(&gate).is_none());
        // A dropped pass counts no more; a pool that lost its last
        // connection no longer widens the window.
        drop(b);
        gate.connected_changed(false);
        assert!(admitted_now(&gate).is_none());
        drop(c);
        assert!(admitted_now(&gate).is_some());
    }

    /// A node that accepts connections and never answers; yields the
    /// news of each accept.
    async fn silent_node() -> (
        std::net::SocketAddr,
        tokio::sync::mpsc::UnboundedReceiver<()>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback listener");
        let addr = listener.local_addr().expect("its address");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
                if tx.send(()).is_err() || held.len() > 8 {
                    return;
                }
            }
        });
        (addr, rx)
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_node_holds_the_sessions_next_first_open_until_it_stalls() {
        use crate::metrics::Metrics;
        use crate::pool::pacing::FIRST_OPEN_STALL;
        use crate::pool::{NodePool, PoolConfig};

        let config = PoolConfig {
            first_opens: Some(Arc::new(FirstOpens::default())),
            ..PoolConfig::default()
        };
        let metrics = Arc::new(Metrics::default());
        let (silent, mut silent_accepts) = silent_node().await;
        let (other, mut other_accepts) = silent_node().await;
        let start = tokio::time::Instant::now();
        let _a = NodePool::new(silent, config.clone(), metrics.clone());
        silent_accepts.recv().await.expect("the first pool dials");
        let _b = NodePool::new(other, config, metrics);
        other_accepts.recv().await.expect("the second pool dials");
        // The second pool's first open waited for the first's to stall,
        // not for its handshake timeout.
        let waited = start.elapsed();
        assert!(
            waited >= FIRST_OPEN_STALL && waited < FIRST_OPEN_STALL * 2,
            "dialled after {waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_first_open_starts_when_another_ends() {
        let gate = Arc::new(FirstOpens::default());
        let first = gate.enter().await;
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move { gate.enter().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            !waiting.is_finished(),
            "held back while the first is in flight"
        );
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("let through once the first ended")
            .expect("the waiting task");
        drop(second);
    }
}
