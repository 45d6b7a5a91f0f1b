//! Counting permits for a connection's stream ids: one per id not in use.
//!
//! Every request takes a permit and gives it back, so both ends are on the
//! hot path. Taking one is a compare-and-swap and returning one an atomic add
//! and a load; only when tasks wait for a permit does a return touch the
//! [`Notify`] that wakes them. (A `tokio::sync::Semaphore` locks its waiter
//! list on every return: about a hundred instructions per request, and a
//! lock that the workers' requesters pass between them.)
//!
//! Waiters go first: while any task waits, [`IdPermits::try_acquire`] fails
//! and newcomers queue behind them (a `Notify` wakes its waiters in order),
//! so a burst of new requests cannot starve one that has been waiting.
//!
//! No lost wake-up: a returner adds to `available` and then reads `waiting`;
//! a waiter adds to `waiting`, registers with the `Notify`, and then tries
//! `available`. All four are sequentially consistent, so either the returner
//! sees the waiter (and notifies it) or the waiter sees the permit.

use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// The permits were closed: no more will be handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Closed;

pub(super) struct IdPermits {
    /// Permits not held by anyone.
    available: AtomicUsize,
    /// Tasks inside [`IdPermits::acquire`]'s wait.
    waiting: AtomicUsize,
    closed: AtomicBool,
    notify: Notify,
}

impl IdPermits {
    pub(super) fn new(permits: usize) -> Self {
        Self {
            available: AtomicUsize::new(permits),
            waiting: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            notify: Notify::new(),
        }
    }

    /// Takes a permit if one is free, the permits are open, and no task is
    /// waiting for one (then the caller waits in line: [`IdPermits::acquire`]).
    pub(super) fn try_acquire(&self) -> bool {
        !self.closed.load(Ordering::Acquire)
            && self.waiting.load(Ordering::SeqCst) == 0
            && self.take()
    }

    /// One permit out of `available`, if there is one.
    fn take(&self) -> bool {
        let mut n = self.available.load(Ordering::SeqCst);
        while n > 0 {
            match self
                .available
                .compare_exchange_weak(n, n - 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
        false
    }

    /// Waits for a permit; `Err` once the permits are closed.
    pub(super) async fn acquire(&self) -> Result<(), Closed> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = WaitingGuard(&self.waiting);
        loop {
            let mut notified = pin!(self.notify.notified());
            notified.as_mut().enable();
            if self.closed.load(Ordering::Acquire) {
                return Err(Closed);
            }
            if self.take() {
                // A permit returned while others wait woke only one of
                // them: if more are free, pass the turn on.
                if self.available.load(Ordering::SeqCst) > 0 {
                    self.notify.notify_one();
                }
                return Ok(());
            }
            notified.await;
        }
    }

    /// Returns a permit.
    pub(super) fn release(&self) {
        self.available.fetch_add(1, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.notify.notify_one();
        }
    }

    /// No permit is handed out from now on; every waiter gets `Err`.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }
}

/// Counts a task out of `waiting` however its wait ends (a permit, closing,
/// or the future dropped by a timeout).
struct WaitingGuard<'a>(&'a AtomicUsize);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn permits_are_counted() {
        let p = IdPermits::new(2);
        assert!(p.try_acquire());
        assert!(p.try_acquire());
        assert!(!p.try_acquire());
        p.release();
        assert!(p.try_acquire());
    }

    #[test]
    fn closed_permits_are_not_handed_out() {
        let p = IdPermits::new(2);
        p.close();
        assert!(!p.try_acquire());
    }

    #[tokio::test]
    async fn a_waiter_gets_the_returned_permit_before_newcomers() {
        let p = Arc::new(IdPermits::new(1));
        assert!(p.try_acquire());
        let waiter = tokio::spawn({
            let p = p.clone();
            async move { p.acquire().await }
        });
        // Let the waiter register.
        while p.waiting.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        p.release();
        // A newcomer does not overtake the waiter.
        assert!(!p.try_acquire());
        let got = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the return wakes the waiter");
        assert_eq!(got.unwrap(), Ok(()));
        assert_eq!(p.waiting.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn close_ends_every_wait() {
        let p = Arc::new(IdPermits::new(0));
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let p = p.clone();
                tokio::spawn(async move { p.acquire().await })
            })
            .collect();
        while p.waiting.load(Ordering::SeqCst) < 3 {
            tokio::task::yield_now().await;
        }
        p.close();
        for w in waiters {
            let got = tokio::time::timeout(Duration::from_secs(10), w)
                .await
                .expect("closing wakes every waiter");
            assert_eq!(got.unwrap(), Err(Closed));
        }
    }

    #[tokio::test]
    async fn a_dropped_wait_leaves_the_line() {
        let p = IdPermits::new(0);
        let timed_out = tokio::time::timeout(Duration::from_millis(10), p.acquire()).await;
        assert!(timed_out.is_err());
        assert_eq!(p.waiting.load(Ordering::SeqCst), 0);
        p.release();
        assert!(p.try_acquire());
    }

    /// Many tasks on two workers take and return permits, half of them
    /// through the wait: every one finishes (no lost wake-up) and the count
    /// comes back whole.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_wake_up_is_lost_under_contention() {
        const PERMITS: usize = 3;
        let p = Arc::new(IdPermits::new(PERMITS));
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let p = p.clone();
                tokio::spawn(async move {
                    for _ in 0..500 {
                        let fast = i % 2 == 0 && p.try_acquire();
                        if !fast {
                            p.acquire().await.unwrap();
                        }
                        tokio::task::yield_now().await;
                        p.release();
                    }
                })
            })
            .collect();
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(30), t)
                .await
                .expect("no task waits forever")
                .unwrap();
        }
        assert_eq!(p.available.load(Ordering::SeqCst), PERMITS);
        assert_eq!(p.waiting.load(Ordering::SeqCst), 0);
    }
}
