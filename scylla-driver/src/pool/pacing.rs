//! How fast a pool opens connections to its node: paced by the handshake
//! times it observes, so that a storm of clients reconnecting at once stays
//! within what the node admits.
//!
//! A node admits handshakes a few at a time per shard (ScyllaDB: 8 in their
//! CPU stage) and sheds those that waited too long; every client of a node
//! that restarts reconnects at once. A client cannot see the node's queue, but
//! it sees its own handshakes take longer than the quickest it has seen: the
//! difference is the time spent queued at the node. [`OpenPacer`] reasons as
//! delay-based congestion control does (TCP Vegas, Brakmo and Peterson 1995:
//! the expected against the actual rate, from the base RTT; LEDBAT, RFC 6817:
//! a target queueing delay over the least delay seen):
//!
//! - while its handshakes take less than twice the quickest seen, the node
//!   has headroom: the opens in flight grow by one each time as many opens
//!   as are allowed completed so (from one, up to the pool's
//!   `max_concurrent_opens`), with no pause between them;
//! - once they take longer, the node queues them: one open at a time;
//! - once the time queued passes [`TARGET_QUEUEING`], each open is followed
//!   by a pause of [`GAP_FACTOR`] times the excess. Every client of the node
//!   pauses by the same queue, so together they open about as fast as the
//!   node completes handshakes, and its queue settles short of the wait at
//!   which the node sheds; the node stays busy meanwhile, so the storm ends
//!   about when the node's handshake capacity allows;
//! - a shed handshake (or one that timed out) queued at least as long as it
//!   waited: the same pause, and the round fails; the pool's backoff is then
//!   at least that pause ([`super::plan::RefillPlan`]).
//!
//! After an outage the pool's first open waits a random moment within
//! [`SPREAD_HANDSHAKES`] quickest handshakes of the session
//! ([`OpenPacer::restart_spread`]): a node whose handshakes are cheap is back
//! at once; the pauses above pace the rest.
//!
//! The constants were chosen with the `storm_sim` tool (6,000 and 600
//! sessions, 1 to 20 ms of handshake CPU; `docs/performance.md`): a target of
//! 100 ms or a factor of 2 shed more or covered later.

use std::time::Duration;

use super::shed::OpenFailure;

/// The pause after an open that queued at the node, in multiples of the time
/// it queued beyond [`TARGET_QUEUEING`].
pub const GAP_FACTOR: u32 = 4;

/// The queueing delay the pacer tolerates before it spaces opens out (the
/// role of LEDBAT's target, RFC 6817 section 2.5, which is 100 ms there).
pub const TARGET_QUEUEING: Duration = Duration::from_millis(250);

/// The first open after an outage waits a random moment within this many
/// quickest handshakes (at most the pool's `reconnect_spread`).
pub const SPREAD_HANDSHAKES: u32 = 4;

/// A pool's pacing of its opens (see the [module](self)).
#[derive(Debug, Clone)]
pub struct OpenPacer {
    max: usize,
    window: usize,
    /// Calm opens since the window last grew.
    calm: usize,
    least: Option<Duration>,
    gap: Duration,
}

impl OpenPacer {
    /// A pacer allowing at most `max` opens in flight, starting at one.
    pub fn new(max: usize) -> Self {
        OpenPacer {
            max: max.max(1),
            window: 1,
            calm: 0,
            least: None,
            gap: Duration::ZERO,
        }
    }

    /// Opens allowed in flight now.
    pub fn window(&self) -> usize {
        self.window
    }

    /// The pause between an open's end and the next open's start.
    pub fn gap(&self) -> Duration {
        self.gap
    }

    /// The quickest handshake seen, if any.
    pub fn least(&self) -> Option<Duration> {
        self.least
    }

    /// An open completed after `took` (from dialling to the connection's
    /// readiness).
    pub fn on_opened(&mut self, took: Duration) {
        let least = self.least.map_or(took, |l| l.min(took));
        self.least = Some(least);
        let queued = took.saturating_sub(least);
        if queued < least {
            self.calm += 1;
            if self.calm >= self.window {
                self.calm = 0;
                self.window = (self.window + 1).min(self.max);
            }
            self.gap = Duration::ZERO;
        } else if queued <= TARGET_QUEUEING {
            self.window = 1;
            self.calm = 0;
            self.gap = Duration::ZERO;
        } else {
            self.window = 1;
            self.calm = 0;
            self.gap = (queued - TARGET_QUEUEING).saturating_mul(GAP_FACTOR);
        }
    }

    /// An open failed after `took`. A shed handshake (or one that timed out)
    /// queued at least as long as it waited beyond the quickest handshake:
    /// one open at a time, and a pause as after an open that queued that
    /// long. Other failures say nothing about the node's queue.
    pub fn on_failed(&mut self, failure: OpenFailure, took: Duration) {
        if failure == OpenFailure::Shed {
            self.window = 1;
            self.calm = 0;
            let queued = took.saturating_sub(self.least.unwrap_or(Duration::ZERO));
            self.gap = queued
                .saturating_sub(TARGET_QUEUEING)
                .saturating_mul(GAP_FACTOR);
        }
    }

    /// The pool lost every connection: start again from one open in flight.
    pub fn on_outage(&mut self) {
        self.window = 1;
        self.calm = 0;
    }

    /// The window over which the first open after an outage is spread: at
    /// most `bound`, less for a node whose handshakes are quick: this pool's
    /// quickest, or `elsewhere` (the session's quickest to any node) if
    /// quicker.
    pub fn restart_spread(&self, bound: Duration, elsewhere: Option<Duration>) -> Duration {
        let quickest = match (self.least, elsewhere) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match quickest {
            Some(l) => bound.min(l.saturating_mul(SPREAD_HANDSHAKES)),
            None => bound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn headroom_grows_the_window_and_queueing_shrinks_it() {
        let mut p = OpenPacer::new(4);
        assert_eq!((p.window(), p.gap()), (1, Duration::ZERO));
        p.on_opened(10 * MS);
        assert_eq!(p.window(), 2);
        p.on_opened(12 * MS);
        assert_eq!(p.window(), 2, "grows once a whole window completed calmly");
        p.on_opened(11 * MS);
        assert_eq!(p.window(), 3);
        for _ in 0..20 {
            p.on_opened(10 * MS);
        }
        assert_eq!(p.window(), 4, "never beyond max_concurrent_opens");
        // Queued 40 ms: one at a time, no pause yet.
        p.on_opened(50 * MS);
        assert_eq!((p.window(), p.gap()), (1, Duration::ZERO));
        // Queued 450 ms: a pause of 4 x (450 - 250) ms.
        p.on_opened(460 * MS);
        assert_eq!((p.window(), p.gap()), (1, 800 * MS));
        assert_eq!(p.least(), Some(10 * MS));
        // Calm again: no pause.
        p.on_opened(10 * MS);
        assert_eq!((p.window(), p.gap()), (2, Duration::ZERO));
    }

    #[test]
    fn a_shed_pauses_like_a_long_queue_and_other_failures_do_not() {
        let mut p = OpenPacer::new(4);
        p.on_opened(10 * MS);
        p.on_failed(OpenFailure::Other, 1000 * MS);
        assert_eq!((p.window(), p.gap()), (2, Duration::ZERO));
        p.on_failed(OpenFailure::Shed, 1010 * MS);
        assert_eq!((p.window(), p.gap()), (1, 3000 * MS));
    }

    #[test]
    fn the_restart_spread_follows_the_quickest_handshake() {
        let second = Duration::from_secs(1);
        let mut p = OpenPacer::new(4);
        assert_eq!(p.restart_spread(second, None), second);
        assert_eq!(p.restart_spread(second, Some(2 * MS)), 8 * MS);
        p.on_opened(20 * MS);
        assert_eq!(p.restart_spread(second, None), 80 * MS);
        assert_eq!(p.restart_spread(second, Some(5 * MS)), 20 * MS);
        p.on_opened(400 * MS);
        assert_eq!(p.restart_spread(Duration::from_millis(50), None), 50 * MS);
    }
}
