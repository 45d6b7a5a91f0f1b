//! Backpressure: a bound on a session's requests in flight, and a bounded
//! queue of requests waiting for one of them to finish.
//!
//! A request holds a [`RequestPermit`] from its start to its end (every
//! attempt, speculative execution and re-preparation included); a paged read
//! holds one per page fetch. Under the bound, taking a permit is one
//! compare-and-swap on a counter and giving it back another: no lock, no
//! allocation. At the bound, requests queue (first come, first served) behind
//! a mutex; a finishing request hands its permit straight to the first
//! waiter, so a newcomer cannot overtake the queue. A request fails with
//! [`ExecutionError::ClientOverloaded`] only when the queue is full, and with
//! the ordinary [`ExecutionError::Timeout`] when its deadline passes while it
//! waits.
//!
//! The state is one word: the permits held, plus the [`WAITERS`] bit while
//! the queue is in use. The fast paths only act when the bit is clear, and
//! the bit is only set or cleared under the queue's lock, so while it is set
//! every change of the count is made under the lock.
//!
//! Closing (for [`Session::close`](crate::Session::close)) sets the
//! [`CLOSED`] bit: the fast path, which only acts below the bound, then
//! always falls through to the slow path, which refuses the request with
//! [`ExecutionError::SessionClosed`]; the requests queued at that moment
//! are refused too, and those in flight keep their permits until they end.
//!
//! Dropping a waiting request's future leaves the queue (a permit handed to
//! it in that instant is passed on); dropping a permit releases it, so every
//! permit is released exactly once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::error::ExecutionError;

/// The state bit set while requests may be queued.
const WAITERS: usize = 1 << (usize::BITS - 1);
/// The state bit set once the session is closing: no permit is given any
/// more. Above any bound, like [`WAITERS`], so the fast path never acts.
const CLOSED: usize = 1 << (usize::BITS - 2);

/// The bound on requests in flight and the queue behind it.
#[derive(Debug)]
pub(crate) struct RequestLimiter {
    max_in_flight: usize,
    max_queued: usize,
    /// Permits held, plus [`WAITERS`].
    state: AtomicUsize,
    queue: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    /// Waiters in arrival order; some may have given up (their receiver is
    /// closed), and are skipped.
    waiters: VecDeque<oneshot::Sender<()>>,
    /// Waiters still waiting.
    live: usize,
}

/// The right to have one request in flight; released when dropped.
#[derive(Debug)]
pub(crate) struct RequestPermit<'a> {
    limiter: &'a RequestLimiter,
}

impl Drop for RequestPermit<'_> {
    fn drop(&mut self) {
        self.limiter.release();
    }
}

impl RequestLimiter {
    /// At most `max_in_flight` requests in flight (at least 1) and
    /// `max_queued` waiting.
    pub(crate) fn new(max_in_flight: usize, max_queued: usize) -> Self {
        RequestLimiter {
            max_in_flight: max_in_flight.clamp(1, CLOSED - 1),
            max_queued,
            state: AtomicUsize::new(0),
            queue: Mutex::new(Queue::default()),
        }
    }

    /// Permits held now.
    pub(crate) fn in_flight(&self) -> usize {
        self.state.load(Ordering::Relaxed) & !(WAITERS | CLOSED)
    }

    /// Refuses every request from now on, and the queued ones at once
    /// (they see [`ExecutionError::SessionClosed`]); permits held stay held
    /// until their requests end. Idempotent.
    pub(crate) fn close(&self) {
        let mut q = self.lock();
        self.state.fetch_or(CLOSED, Ordering::AcqRel);
        // Dropping a sender wakes its waiter with an error, which it reads
        // as "closed"; each waiter takes itself out of `live` as it goes.
        q.waiters.clear();
    }

    /// Whether [`close`](Self::close) was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(Ordering::Acquire) & CLOSED != 0
    }

    /// Requests waiting for a permit now.
    pub(crate) fn queued(&self) -> usize {
        self.lock().live
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Every update of the queue keeps it consistent at each step (a
        // push, a pop, a count), so a poisoned lock is still usable.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A permit: at once under the bound, else after waiting in the queue
    /// until `deadline` (the request's; `timeout` is what the error reports).
    pub(crate) async fn acquire(
        &self,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<RequestPermit<'_>, ExecutionError> {
        if self.try_acquire() {
            return Ok(RequestPermit { limiter: self });
        }
        // Boxed: the waiting future (with its timer) is only built when the
        // bound is reached, and does not enlarge every request's future.
        Box::pin(self.acquire_slow(deadline, timeout)).await
    }

    /// The fast path: one compare-and-swap while under the bound and nobody
    /// waits (with [`WAITERS`] set, the state is above any bound).
    fn try_acquire(&self) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        while s < self.max_in_flight {
            match self
                .state
                .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    async fn acquire_slow(
        &self,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<RequestPermit<'_>, ExecutionError> {
        let rx = {
            let mut q = self.lock();
            let mut s = self.state.load(Ordering::Relaxed);
            // Set under the lock, so no waiter is queued after `close`
            // drained the queue.
            if s & CLOSED != 0 {
                return Err(ExecutionError::SessionClosed);
            }
            loop {
                if s & WAITERS != 0 {
                    break;
                }
                if s < self.max_in_flight {
                    // A permit came free meanwhile and nobody waits: take it.
                    match self.state.compare_exchange_weak(
                        s,
                        s + 1,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return Ok(RequestPermit { limiter: self }),
                        Err(now) => s = now,
                    }
                    continue;
                }
                if q.live >= self.max_queued {
                    break;
                }
                // Full: from now on releases go through the queue.
                match self.state.compare_exchange_weak(
                    s,
                    s | WAITERS,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(now) => s = now,
                }
            }
            if q.live >= self.max_queued {
                return Err(ExecutionError::ClientOverloaded {
                    max_in_flight: self.max_in_flight,
                    max_queued: self.max_queued,
                });
            }
            let (tx, rx) = oneshot::channel();
            q.waiters.push_back(tx);
            q.live += 1;
            rx
        };
        let mut waiting = Waiting {
            limiter: self,
            rx: Some(rx),
        };
        let Some(rx) = waiting.rx.as_mut() else {
            // Just set above.
            return Err(ExecutionError::timeout(timeout, Vec::new()));
        };
        match tokio::time::timeout_at(deadline.into(), rx).await {
            Ok(Ok(())) => {
                // The permit was handed over: it is ours now.
                waiting.rx = None;
                Ok(RequestPermit { limiter: self })
            }
            // The sender is dropped unsent when the session closes (or,
            // otherwise, only once this waiter gave up, which it has not:
            // then a timeout rather than a panic).
            Ok(Err(_)) if self.is_closed() => Err(ExecutionError::SessionClosed),
            Ok(Err(_)) | Err(_) => Err(ExecutionError::timeout(timeout, Vec::new())),
        }
    }

    /// Gives a permit back: to the first waiter if there is one.
    fn release(&self) {
        let mut s = self.state.load(Ordering::Relaxed);
        while s & WAITERS == 0 {
            match self
                .state
                .compare_exchange_weak(s, s - 1, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
        self.release_slow();
    }

    fn release_slow(&self) {
        let mut q = self.lock();
        while let Some(tx) = q.waiters.pop_front() {
            if tx.send(()).is_ok() {
                // Handed over: the count of permits held does not change.
                q.live -= 1;
                return;
            }
            // That waiter gave up (and took itself out of `live`).
        }
        // Nobody waits: clear the bit and give the permit back, in one step
        // (only holders of the lock change the state while the bit is set).
        self.state.fetch_sub(WAITERS + 1, Ordering::AcqRel);
    }
}

/// A queued request; dropping it before its permit arrived leaves the queue.
struct Waiting<'a> {
    limiter: &'a RequestLimiter,
    /// `None` once the permit was received.
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        // After `close`, no permit can arrive; one that arrived before is
        // still there to take.
        rx.close();
        if rx.try_recv().is_ok() {
            // Handed over just now (the releaser counted it): pass it on.
            self.limiter.release();
            return;
        }
        let mut q = self.limiter.lock();
        q.live -= 1;
        // Given-up entries stay until a release pops them; drop them in bulk
        // when they outnumber the live ones, so the queue stays bounded.
        if q.waiters.len() > 2 * q.live + 16 {
            q.waiters.retain(|tx| !tx.is_closed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[tokio::test]
    async fn under_the_bound_permits_come_at_once_and_go_back() {
        let l = RequestLimiter::new(2, 0);
        let a = l.acquire(far(), Duration::ZERO).await.unwrap();
        let b = l.acquire(far(), Duration::ZERO).await.unwrap();
        assert_eq!(l.in_flight(), 2);
        // No queue: the third is refused at once.
        let e = l.acquire(far(), Duration::ZERO).await.unwrap_err();
        assert!(matches!(e, ExecutionError::ClientOverloaded { .. }), "{e}");
        drop(a);
        drop(b);
        assert_eq!(l.in_flight(), 0);
        assert_eq!(l.state.load(Ordering::Relaxed), 0);
    }

    // The paused clock: the deadline passes when the test is idle, at once
    // and exactly (no real time is slept).
    #[tokio::test(start_paused = true)]
    async fn waiters_are_served_in_order_and_time_out_at_their_deadline() {
        let l = Arc::new(RequestLimiter::new(1, 2));
        let held = l.acquire(far(), Duration::ZERO).await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..2 {
            let (l2, order) = (l.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let p = l2.acquire(far(), Duration::ZERO).await.unwrap();
                order.lock().unwrap().push(i);
                drop(p);
            }));
            // Queue them in a known order.
            while l.queued() < i + 1 {
                tokio::task::yield_now().await;
            }
        }
        // Queue full: the next is refused.
        assert!(matches!(
            l.acquire(far(), Duration::ZERO).await,
            Err(ExecutionError::ClientOverloaded { .. })
        ));
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1]);
        assert_eq!(l.state.load(Ordering::Relaxed), 0);

        // A deadline while waiting is a timeout, and leaves the queue.
        let held = l.acquire(far(), Duration::ZERO).await.unwrap();
        let t = Duration::from_secs(5);
        let before = tokio::time::Instant::now();
        let e = l.acquire(Instant::now() + t, t).await.unwrap_err();
        assert!(before.elapsed() >= t, "{:?}", before.elapsed());
        assert!(
            matches!(e, ExecutionError::Timeout { timeout: d, .. } if d == t),
            "{e}"
        );
        assert_eq!(l.queued(), 0);
        drop(held);
        assert_eq!(l.state.load(Ordering::Relaxed), 0);
    }

    /// The cost of the fast path (take and give back a permit under the
    /// bound), next to a tokio semaphore's. A measurement, not a check:
    /// `cargo test -p scylla-driver --release --lib fast_path_cost -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement; run in release"]
    fn fast_path_cost() {
        const N: u32 = 20_000_000;
        let l = RequestLimiter::new(4096, 0);
        let started = Instant::now();
        for _ in 0..N {
            assert!(std::hint::black_box(&l).try_acquire());
            l.release();
        }
        let ours = started.elapsed() / N;
        let sem = tokio::sync::Semaphore::new(4096);
        let started = Instant::now();
        for _ in 0..N {
            drop(std::hint::black_box(&sem).try_acquire().unwrap());
        }
        let tokio = started.elapsed() / N;
        println!("take + give back a permit: limiter {ours:?}, tokio::sync::Semaphore {tokio:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_bound_holds_under_contention_and_cancellation() {
        const BOUND: usize = 4;
        let l = Arc::new(RequestLimiter::new(BOUND, 1_000));
        let inside = Arc::new(AtomicUsize::new(0));
        let broken = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for i in 0..64u64 {
            let (l, inside, broken) = (l.clone(), inside.clone(), broken.clone());
            tasks.push(tokio::spawn(async move {
                for j in 0..50u64 {
                    let acquire = l.acquire(far(), Duration::ZERO);
                    // Every 7th gives up while (probably) queued.
                    if (i + j) % 7 == 0 {
                        let _ = tokio::time::timeout(Duration::from_micros(50), acquire).await;
                        continue;
                    }
                    let p = acquire.await.unwrap();
                    if inside.fetch_add(1, Ordering::SeqCst) >= BOUND {
                        broken.store(true, Ordering::SeqCst);
                    }
                    tokio::task::yield_now().await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    drop(p);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert!(
            !broken.load(Ordering::SeqCst),
            "more than {BOUND} permits held"
        );
        assert_eq!(l.state.load(Ordering::Relaxed), 0, "a permit leaked");
        assert_eq!(l.queued(), 0);
    }

    #[tokio::test]
    async fn close_refuses_new_and_queued_requests_and_keeps_held_permits() {
        let l = Arc::new(RequestLimiter::new(1, 4));
        let held = l.acquire(far(), Duration::ZERO).await.unwrap();
        let queued = {
            let l = l.clone();
            tokio::spawn(async move { l.acquire(far(), Duration::ZERO).await.map(drop) })
        };
        while l.queued() < 1 {
            tokio::task::yield_now().await;
        }
        l.close();
        l.close(); // idempotent
        let e = queued.await.unwrap().unwrap_err();
        assert!(matches!(e, ExecutionError::SessionClosed), "{e:?}");
        let e = l.acquire(far(), Duration::ZERO).await.unwrap_err();
        assert!(matches!(e, ExecutionError::SessionClosed), "{e:?}");
        assert_eq!(l.in_flight(), 1);
        assert_eq!(l.queued(), 0);
        drop(held);
        assert_eq!(l.in_flight(), 0);
        assert!(l.is_closed());
        assert_eq!(l.state.load(Ordering::Relaxed), CLOSED, "a permit leaked");
    }
}
