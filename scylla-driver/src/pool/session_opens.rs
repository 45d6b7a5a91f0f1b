//! A session's opens to all its nodes, started within one window.
//!
//! Every open of a session's pools asks its [`SessionOpens`] before it
//! dials, and counts until it ends (or stalls, [`OPEN_STALL`]):
//!
//! - a pool that holds no connection opens its first when one such open may
//!   be in flight, plus one per pool of the session that holds a connection
//!   ([`FirstOpenFacts::admits`]): at a cold start the session's first
//!   opens go 1, 2, 4... at a time as its nodes answer; when one node of a
//!   connected cluster restarts, its pool goes at once;
//! - the others start while the session's opens in flight, first ones
//!   included, are fewer than its [`SessionWindow`], which each open's end
//!   adapts (wider while nodes answer calmly, halved when one queues); when
//!   several wait, the window lets through the better of two drawn at
//!   random, by how soon their nodes drain their queues ([`pick_waiting`]).
//!
//! Both rules are in `pool::pacing`, which `storm_sim` calls too. An open
//! still in flight after [`OPEN_STALL`] stops counting, so that a silent
//! node holds the others back for no longer than that; its end still
//! adapts the window.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::Notify;

#[cfg(doc)]
use super::pacing::OPEN_STALL;
use super::pacing::{pick_waiting, FirstOpenFacts, SessionWindow};
use super::shed::OpenFailure;
use crate::connection::SetupTimes;

/// The opens of one session's pools (shared by its pools).
#[derive(Debug, Default)]
pub(crate) struct SessionOpens {
    counts: Mutex<Counts>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct Counts {
    /// First opens let through and still counted.
    first_in_flight: usize,
    /// Opens let through and still counted, first ones included (and those
    /// the window let through that have not yet taken their pass).
    in_flight: usize,
    /// Pools of the session holding a connection.
    connected: usize,
    window: SessionWindow,
    /// Opens waiting for room in the window.
    waiting: Vec<Waiting>,
    /// Opens the window let through that have not yet taken their pass
    /// (counted in `in_flight`).
    let_through: Vec<u64>,
    /// The id of the next open to wait.
    next_id: u64,
    /// Draws the waiting opens the window chooses between.
    rng: fastrand::Rng,
}

/// An open waiting for room in the session's window.
#[derive(Debug)]
struct Waiting {
    id: u64,
    /// When its node's queue drains, as its pool last saw it.
    drains_at: Option<Instant>,
}

impl Counts {
    /// Lets waiting opens through while the window has room, each the
    /// better of two by how soon its node drains ([`pick_waiting`]).
    fn let_through(&mut self) {
        while self.window.admits(self.in_flight) {
            let waiting = &self.waiting;
            let Some(pick) = pick_waiting(&mut self.rng, waiting.len(), |i| waiting[i].drains_at)
            else {
                return;
            };
            let id = self.waiting.swap_remove(pick).id;
            self.let_through.push(id);
            self.in_flight += 1;
        }
    }
}

/// An open let through; it counts until released, ended or dropped.
#[derive(Debug)]
pub(crate) struct OpenPass {
    gate: Arc<SessionOpens>,
    first: bool,
    counted: bool,
}

impl OpenPass {
    /// The open stops counting (it stalled).
    pub(crate) fn release(&mut self) {
        if self.counted {
            self.end(|_| {});
        }
    }

    /// The open completed; `times`: its handshake's exchanges.
    pub(crate) fn opened(mut self, times: SetupTimes) {
        self.end(|w| w.on_opened(times));
    }

    /// The open failed.
    pub(crate) fn failed(mut self, failure: OpenFailure) {
        self.end(|w| w.on_failed(failure));
    }

    /// Tells the window what the open's end says (`adapt`) and stops
    /// counting it, in one change of the session's counts.
    fn end(&mut self, adapt: impl FnOnce(&mut SessionWindow)) {
        let counted = std::mem::take(&mut self.counted);
        let first = self.first;
        self.gate.update(|c| {
            adapt(&mut c.window);
            if counted {
                c.in_flight = c.in_flight.saturating_sub(1);
                if first {
                    c.first_in_flight = c.first_in_flight.saturating_sub(1);
                }
            }
        });
    }
}

impl Drop for OpenPass {
    fn drop(&mut self) {
        self.release();
    }
}

/// An open waiting in [`SessionOpens::enter`], until it takes its pass.
struct WaitingGuard<'a> {
    gate: &'a SessionOpens,
    id: Option<u64>,
}

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.gate.update(|c| {
                if let Some(at) = c.waiting.iter().position(|w| w.id == id) {
                    c.waiting.swap_remove(at);
                } else if let Some(at) = c.let_through.iter().position(|&l| l == id) {
                    c.let_through.swap_remove(at);
                    c.in_flight = c.in_flight.saturating_sub(1);
                }
            });
        }
    }
}

impl SessionOpens {
    /// Waits until the session's rule admits one more first open of a pool
    /// that holds no connection.
    pub(crate) async fn enter_first(self: &Arc<Self>) -> OpenPass {
        self.wait_until(|c| {
            let admits = FirstOpenFacts {
                in_flight: c.first_in_flight,
                connected: c.connected,
            }
            .admits();
            if admits {
                c.in_flight += 1;
                c.first_in_flight += 1;
            }
            admits
        })
        .await;
        OpenPass {
            gate: self.clone(),
            first: true,
            counted: true,
        }
    }

    /// Waits until the session's window lets one more open through;
    /// `drains_at`: when the node's queue drains, as the open's pool last saw
    /// it ([`super::pacing::OpenPacer::drains_at`]).
    pub(crate) async fn enter(self: &Arc<Self>, drains_at: Option<Instant>) -> OpenPass {
        let mut id = 0;
        self.update(|c| {
            id = c.next_id;
            c.next_id = c.next_id.wrapping_add(1);
            c.waiting.push(Waiting { id, drains_at });
        });
        // Dropped before it takes its pass (the open was cancelled): it no
        // longer waits, nor counts if it was let through.
        let mut waiting = WaitingGuard {
            gate: self,
            id: Some(id),
        };
        self.wait_until(|c| match c.let_through.iter().position(|&l| l == id) {
            Some(at) => {
                c.let_through.swap_remove(at);
                true
            }
            None => false,
        })
        .await;
        // No await since it took its pass: from here the pass counts it.
        waiting.id = None;
        OpenPass {
            gate: self.clone(),
            first: false,
            counted: true,
        }
    }

    /// Waits until `take` finds its pass in the counts and takes it (`true`),
    /// looking again after every change.
    async fn wait_until(&self, mut take: impl FnMut(&mut Counts) -> bool) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the look: a change after it wakes this wait.
            changed.as_mut().enable();
            if take(&mut self.lock()) {
                return;
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
        {
            let mut c = self.lock();
            f(&mut c);
            c.let_through();
        }
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

    fn admitted_now(gate: &Arc<SessionOpens>) -> Option<OpenPass> {
        now(gate.enter_first())
    }

    fn window_admits_now(gate: &Arc<SessionOpens>) -> Option<OpenPass> {
        now(gate.enter(None))
    }

    fn now(enter: impl Future<Output = OpenPass>) -> Option<OpenPass> {
        let mut enter = Box::pin(enter);
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match enter.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(pass) => Some(pass),
            std::task::Poll::Pending => None,
        }
    }

    #[test]
    fn one_first_open_then_one_more_per_node_that_answered() {
        let gate = Arc::new(SessionOpens::default());
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

    /// Exchanges whose STARTUP queued `queued` beyond a 1 ms round trip.
    fn times(queued: Duration) -> SetupTimes {
        SetupTimes {
            options: Duration::from_millis(1),
            startup: Duration::from_millis(1) + queued,
        }
    }

    #[test]
    fn opens_start_within_the_sessions_window() {
        let gate = Arc::new(SessionOpens::default());
        let a = window_admits_now(&gate).expect("one at first");
        assert!(window_admits_now(&gate).is_none());
        // A calm open widens the window.
        a.opened(times(Duration::from_millis(2)));
        let b = window_admits_now(&gate).expect("two now");
        let c = window_admits_now(&gate).expect("two now");
        assert!(window_admits_now(&gate).is_none());
        // One that queued beyond the target halves it: c alone fills it.
        b.opened(times(Duration::from_millis(400)));
        assert!(window_admits_now(&gate).is_none());
        // A first open passes by its own rule but counts here too.
        let d = admitted_now(&gate).expect("the session's first first open");
        drop(c);
        assert!(window_admits_now(&gate).is_none(), "d fills the window");
        // A stalled open stops counting; its end still adapts the window.
        let mut d = d;
        d.release();
        let e = window_admits_now(&gate).expect("d no longer counts");
        d.failed(OpenFailure::Shed);
        drop(e);
        let f = window_admits_now(&gate).expect("a window of one");
        assert!(window_admits_now(&gate).is_none());
        drop(f);
    }

    /// The pass a waiting task takes within a second (`what` it should be).
    async fn taken(task: tokio::task::JoinHandle<OpenPass>, what: &str) -> OpenPass {
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .unwrap_or_else(|_| panic!("not within a second: {what}"))
            .expect("the waiting task")
    }

    #[tokio::test(start_paused = true)]
    async fn the_window_lets_through_the_open_whose_node_drains_first() {
        let gate = Arc::new(SessionOpens::default());
        let held = gate.enter(None).await;
        let t0 = Instant::now();
        let wait = |drains_in: u64| {
            let gate = gate.clone();
            tokio::spawn(async move {
                gate.enter(Some(t0 + Duration::from_millis(drains_in)))
                    .await
            })
        };
        let late = wait(1000);
        tokio::time::sleep(Duration::from_millis(10)).await;
        let soon = wait(100);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            !late.is_finished() && !soon.is_finished(),
            "the window is full"
        );
        drop(held);
        let pass = taken(soon, "the sooner node's open goes, though it came second").await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!late.is_finished(), "one at a time");
        drop(pass);
        let pass = taken(late, "then the other").await;
        drop(pass);
    }

    #[test]
    fn an_open_cancelled_after_the_window_let_it_through_counts_no_more() {
        let gate = Arc::new(SessionOpens::default());
        let held = window_admits_now(&gate).expect("one at first");
        let mut waiting = Box::pin(gate.enter(None));
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        // The window lets it through; it is dropped before it takes its pass.
        drop(held);
        drop(waiting);
        let next = window_admits_now(&gate).expect("its room is free again");
        assert!(window_admits_now(&gate).is_none());
        drop(next);
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
        use crate::pool::pacing::OPEN_STALL;
        use crate::pool::{NodePool, PoolConfig};

        let config = PoolConfig {
            session_opens: Some(Arc::new(SessionOpens::default())),
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
            waited >= OPEN_STALL && waited < OPEN_STALL * 2,
            "dialled after {waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_first_open_starts_when_another_ends() {
        let gate = Arc::new(SessionOpens::default());
        let first = gate.enter_first().await;
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move { gate.enter_first().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            !waiting.is_finished(),
            "held back while the first is in flight"
        );
        drop(first);
        let second = taken(waiting, "let through once the first ended").await;
        drop(second);
    }
}
