//! Per-node load as one session sees it, and how plans use it to keep
//! requests away from slow replicas.
//!
//! # What is measured
//! A [`NodeLoad`] per node holds two atomics, updated lock-free by the
//! session around every attempt ([`NodeLoad::start`] returns an
//! [`InFlight`] guard; dropping it ends the attempt, including an attempt
//! abandoned by speculative execution or by a dropped request future):
//! - the **requests in flight** to the node;
//! - a **decaying latency average** (EWMA) of its attempts: each attempt's
//!   time moves the average by at least 1/8 of the difference, and by more
//!   after a quiet period; after one second without a sample the node starts
//!   over (its next sample is the average), so a node that was down, or not
//!   chosen for a while, is judged by how it answers now. A node's first
//!   [`WARM_UP`] samples only keep their minimum (a node's first request is
//!   often not a typical one: a statement's first execution, a cold JVM),
//!   and until then only a node more than 4 times dearer than the other is
//!   passed over on them (a slow replica from its first answer: a session's
//!   first requests must not find it by trying it four times; an untypical
//!   first answer is replaced by its probe's, see below); nearer ones are
//!   compared by their requests in flight. After that a sample counts as at most 3 times
//!   the average: one stall (the client descheduled, say) moves the average
//!   by at most 1/4, which does not push a node out, while a node that stays
//!   slow is passed over from its second slow answer on; and after two such
//!   outliers in a row it gets only its probes (see below), not the turns a
//!   stale average gets, until a normal answer, so that a replica that turns
//!   slow costs a session two or three slow answers, not the ten its capped
//!   average would take to grow 4 times. Answers of any kind and timeouts count with the time they took,
//!   abandoned attempts with the time until they were abandoned (a lower
//!   bound of the node's latency); attempts whose connection failed do not
//!   count (a node going down would otherwise look fast, or slow after its
//!   restart), nor do schema changes (a DDL statement's answer waits for the
//!   node's schema update, far longer than a request takes).
//!
//! # The policy: power of two choices
//! When a plan ([`Plan::with_loads`](super::Plan::with_loads)) starts a step
//! (the local replicas, say), it looks at two of the step's candidates that
//! are up: the one the plain rotation by the request's seed would put first,
//! and a second one picked pseudo-randomly from the seed (a few multiplies,
//! no allocation). The expected cost of a candidate is its latency average
//! times one plus its requests in flight; the second candidate goes first if
//! its cost is lower by more than a quarter, otherwise the first keeps its
//! place (smaller differences are noise, and nodes within them keep taking
//! turns).
//! While either has no latency sample yet, only the requests in flight are
//! compared. The rest of the step follows in rotation order from the chosen
//! candidate, so the plan is still a permutation of the same targets, and
//! the steps keep their order and meaning (local datacenter first, replicas
//! before the other nodes, each target's shard). LWT replica steps keep their
//! fixed order and are never reordered.
//!
//! # Never starving a node
//! One request in [`PROBE_EVERY`] (by seed) skips the comparison and walks
//! its steps in rotation order, the rotation advancing by one per such
//! probe: among any `PROBE_EVERY * n` consecutive seeds of a session (a
//! session's seeds are consecutive), every up candidate of the first step
//! is first at least once, however slow it looks. So a slow node keeps
//! receiving a small share (about `1 / (PROBE_EVERY * replicas)` of the
//! requests, 0.26 % with three replicas), its average stays current, and it
//! wins its share back as soon as it is fast again. That share is far below
//! 1 %, so it does not reach the 99th percentile.
//!
//! An average is only refreshed when its node is tried, so one unlucky
//! sample could keep a node out until the next probe. Hence a candidate
//! whose average is older than [`STALE_AFTER`] and at most 4 times the
//! other's keeps its place: nodes that differ by noise keep taking turns,
//! while a node more than 4 times slower waits for its probes, however old
//! its average. (It used to get turns once its average was a second old,
//! and to warm up again after a second without samples: a session sending
//! 100 requests per second, whose probes reach a slow node every few
//! seconds, then sent it 4 % of its requests, and 20 such sessions had the
//! slow node's latency as their p99; `tests/slow_replica.rs`.)
//!
//! # Cost
//! Per request, when the first step starts: two reads of `is_up`, two
//! candidates' atomics (three loads each), a multiply-and-compare, and a
//! clock read when the second candidate is cheaper but within 4x. Per
//! attempt: a clock read and a few atomic operations, one of them a
//! compare-and-swap. Measured (`cargo bench --bench routing`, best batch,
//! load average about 8): the first target of a plan in 114 ns instead of
//! 29 ns (3 nodes, RF 3), 161 ns instead of 37 ns (100 nodes, 3 DCs), with
//! every node's average stale so that each choice reads the clock; no
//! allocation.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One request in this many (by seed) is a probe: its plan ignores load and
/// follows the plain rotation, so that no node is starved.
pub const PROBE_EVERY: u32 = 128;

/// A candidate whose average is older than this (and at most
/// `STALE_RATIO` times the other's) keeps its place.
pub const STALE_AFTER: Duration = Duration::from_millis(100);
const STALE_RATIO: u64 = 4;

/// Milliseconds from the first call in this process to `now`, truncated to
/// 32 bits (only differences are used, with wrapping arithmetic).
fn ms_at(now: Instant) -> u32 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    now.saturating_duration_since(*EPOCH.get_or_init(Instant::now))
        .as_millis() as u32
}

/// The least weight of a new sample in the average, in 1/1024 (1/8).
const MIN_WEIGHT: u64 = 128;
/// Samples a node needs before its average is compared (their minimum starts
/// the average).
pub const WARM_UP: u32 = 4;

/// Outliers in a row after which a node gets no turns for a stale average.
const OUTLIERS_IN_A_ROW: u8 = 2;

/// After this long without a sample, the next sample replaces the average
/// and the node warms up again ([`WARM_UP`] samples).
const RESET_MS: u64 = 1000;

/// The load of one node as seen by one session: requests in flight and a
/// decaying average of attempt latencies; see the [module documentation](self).
///
/// Shared (`Arc`) between the session's attempts and its plans, and kept
/// across topology refreshes for as long as the node exists.
#[derive(Debug)]
pub struct NodeLoad {
    in_flight: AtomicU32,
    /// Samples recorded, counted up to `WARM_UP`.
    samples: AtomicU32,
    /// How many of the last samples in a row were more than 3 times the
    /// average (and counted as 3 times), up to 2: from the second on, until
    /// a normal one comes, the node gets no turns for being stale.
    outliers: AtomicU8,
    /// The average in microseconds (high 32 bits, 0: no sample yet) and the
    /// time of its last update (`ms_at`, low 32 bits).
    latency: AtomicU64,
}

impl Default for NodeLoad {
    fn default() -> Self {
        Self::new()
    }
}

impl NodeLoad {
    /// No request in flight, no latency sample.
    pub fn new() -> Self {
        Self {
            in_flight: AtomicU32::new(0),
            samples: AtomicU32::new(0),
            outliers: AtomicU8::new(0),
            latency: AtomicU64::new(0),
        }
    }

    /// Starts an attempt that began at `started`: one more request in flight
    /// until the guard drops, which records the attempt's latency.
    #[inline]
    pub fn start(&self, started: Instant) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight {
            load: self,
            started,
            ended: false,
        }
    }

    /// Requests in flight now.
    #[inline]
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Whether the average counts in comparisons ([`WARM_UP`] samples).
    #[inline]
    fn warm(&self) -> bool {
        self.samples.load(Ordering::Relaxed) >= WARM_UP
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// The latency average, `None` before the first sample.
    pub fn latency(&self) -> Option<Duration> {
        match self.latency.load(Ordering::Relaxed) >> 32 {
            0 => None,
            us => Some(Duration::from_micros(us)),
        }
    }

    /// Adds one latency sample (clamped to 1 µs ..= 71 minutes).
    pub fn record(&self, latency: Duration) {
        self.record_at(latency, Instant::now());
    }

    /// [`record`](Self::record) with the current time already read.
    fn record_at(&self, latency: Duration, at: Instant) {
        let sample = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, u64::from(u32::MAX));
        let now = ms_at(at);
        // Counted apart from the average: racing updates may keep the minimum
        // for a sample more or less, which does not matter.
        let warming = self.samples.load(Ordering::Relaxed) < WARM_UP;
        if warming {
            self.samples.fetch_add(1, Ordering::Relaxed);
        }
        // A node not heard from for `RESET_MS` (stopped and restarted, say,
        // or not chosen for a while) starts over: its average is this
        // sample and it warms up again, compared by requests in flight only
        // for its next samples. Without this, the first answer of a
        // restarted node (a cold JVM: tens of ms) set its average, and it
        // got only probes afterwards: on a real 3-node Cassandra, 60 reads
        // after a restart did not reach it once.
        let mut restarted = false;
        let mut outlier = false;
        let update = |old: u64| {
            let (avg, at) = (old >> 32, old as u32);
            restarted = avg != 0 && u64::from(now.wrapping_sub(at)) >= RESET_MS;
            outlier = false;
            let avg = if avg == 0 || restarted {
                sample
            } else if warming {
                avg.min(sample)
            } else {
                outlier = sample > avg.saturating_mul(3);
                let sample = sample.min(avg.saturating_mul(3));
                let quiet = u64::from(now.wrapping_sub(at));
                let w = (quiet.saturating_mul(1024) / RESET_MS).clamp(MIN_WEIGHT, 1024);
                // Both terms fit: averages and samples are below 2^32.
                (avg * (1024 - w) + sample * w) / 1024
            };
            Some((avg.max(1) << 32) | u64::from(now))
        };
        // The closure always returns `Some`, so the update cannot fail.
        let _ = self
            .latency
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, update);
        // Racing updates may miscount a row by one, which does not matter.
        let row = self.outliers.load(Ordering::Relaxed);
        let next = if outlier {
            (row + 1).min(OUTLIERS_IN_A_ROW)
        } else {
            0
        };
        if row != next {
            self.outliers.store(next, Ordering::Relaxed);
        }
        if restarted {
            tracing::trace!(
                sample_us = sample,
                "latency average restarted after a quiet second"
            );
        }
    }

    /// Whether a request to this node is expected to be answered sooner than
    /// one to `other`, clearly (a quarter cheaper): the latency average times
    /// one plus the requests in flight, or only the requests in flight while
    /// either node has no sample, or fewer than [`WARM_UP`] and the two costs
    /// are within 4 times of each other, or `other`'s average is more than a
    /// second old and at most 4 times this one's. Never when `other`'s
    /// average is older than [`STALE_AFTER`] and at most 4 times this one's
    /// (it gets its turn, to refresh it), unless its last two answers were
    /// outliers (it waits for its probes).
    pub fn better_than(&self, other: &NodeLoad) -> bool {
        self.better_than_at(other, Instant::now)
    }

    /// [`better_than`](Self::better_than) with the clock given: `now` is
    /// read only when the age of `other`'s average decides (most
    /// comparisons do not read the clock).
    fn better_than_at(&self, other: &NodeLoad, now: impl FnOnce() -> Instant) -> bool {
        let (mine, theirs) = (self.in_flight(), other.in_flight());
        let (a, other_word) = (
            self.latency.load(Ordering::Relaxed) >> 32,
            other.latency.load(Ordering::Relaxed),
        );
        let b = other_word >> 32;
        if a == 0 || b == 0 {
            return mine < theirs;
        }
        let cost = a.saturating_mul(u64::from(mine) + 1);
        let other_cost = b.saturating_mul(u64::from(theirs) + 1);
        if !self.warm() || !other.warm() {
            // The minimum of a few samples: decisive only when far apart.
            if other_cost <= cost.saturating_mul(STALE_RATIO) {
                return mine < theirs && cost <= other_cost.saturating_mul(STALE_RATIO);
            }
            // Far dearer: passed over from its first answer, so that a
            // session's first requests do not find a slow replica by trying
            // it four times. Like a warm node far slower, it waits for its
            // probes: an untypical first answer (a cold JVM) gives way to the
            // probe's (the minimum is kept), while a turn on a timer would
            // cost every session one more slow answer.
            return true;
        }
        if cost >= other_cost - other_cost / 4 {
            return false;
        }
        // Cheaper, by averages. Far slower (more than `STALE_RATIO`
        // times): it waits for its probes, however old its average (turns
        // given to old averages grow, as a share of the requests, as the
        // session's request rate falls). Otherwise the clock is read, to see
        // how old the other's average is: older than `RESET_MS`, it says
        // little about the node now (its next answer starts it over, see
        // `record_at`), and the two are compared by requests in flight;
        // older than `STALE_AFTER`, the other keeps its place. But a node
        // whose last two answers were outliers turned slow (or stalled
        // across several requests): each turn would move its capped average
        // by a quarter only, and a turn a second would cost every session a
        // slow answer a second; like a node far slower, it waits for its
        // probes (a normal answer clears it). One outlier alone, a stall,
        // takes none of its turns.
        if b > a.saturating_mul(STALE_RATIO)
            || other.outliers.load(Ordering::Relaxed) >= OUTLIERS_IN_A_ROW
        {
            return true;
        }
        let age = u64::from(ms_at(now()).wrapping_sub(other_word as u32));
        if age >= RESET_MS {
            return mine < theirs;
        }
        u128::from(age) < STALE_AFTER.as_millis()
    }
}

/// One attempt in flight to a node (see [`NodeLoad::start`]). It ends with
/// [`finish`](Self::finish) (an answer: its latency is recorded),
/// [`discard`](Self::discard) (the connection failed: nothing about the
/// node's latency is learnt), or by being dropped (the attempt was abandoned:
/// the time until then is recorded, a lower bound of the node's latency).
#[derive(Debug)]
#[must_use = "the attempt ends when the guard drops"]
pub struct InFlight<'a> {
    load: &'a NodeLoad,
    started: Instant,
    ended: bool,
}

impl InFlight<'_> {
    /// The node answered at `now`, `latency` after the attempt started (an
    /// answer of any kind, or a timeout): records that latency.
    #[inline]
    pub fn finish(mut self, latency: Duration, now: Instant) {
        self.ended = true;
        self.load.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.load.record_at(latency, now);
    }

    /// The attempt ended without telling anything about the node's latency:
    /// a broken or refused connection (a node that went down must not look
    /// fast, nor slow once it is back), or a schema change's answer.
    #[inline]
    pub fn discard(mut self) {
        self.ended = true;
        self.load.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.load.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.load.record(self.started.elapsed());
        }
    }
}

/// A well-mixed 64-bit function of `seed` (SplitMix64's finalizer): picks
/// the second candidate, uncorrelated with the rotation `seed % n`.
#[inline]
pub(crate) fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A load past its warm-up, at `d`.
    fn warmed(d: Duration) -> NodeLoad {
        let load = NodeLoad::new();
        for _ in 0..WARM_UP {
            load.record(d);
        }
        load
    }

    /// A load past its warm-up, at `d`, every sample taken at `at`.
    fn warmed_at(d: Duration, at: Instant) -> NodeLoad {
        let load = NodeLoad::new();
        for _ in 0..WARM_UP {
            load.record_at(d, at);
        }
        load
    }

    /// An instant after the process's clock epoch (`ms_at` counts from its
    /// first call): differences of whole milliseconds from it are exact.
    /// The tests that compare ages build every instant from one of these,
    /// so that a test thread run late changes nothing.
    fn t0() -> Instant {
        ms_at(Instant::now());
        Instant::now()
    }

    #[test]
    fn a_node_not_heard_from_for_a_second_starts_over() {
        let t0 = t0();
        let fast = warmed_at(Duration::from_millis(1), t0);
        let node = warmed_at(Duration::from_millis(1), t0);
        // Its first answer after a long silence (a restarted node's cold
        // start, say) is slow: that becomes its average, uncapped, and it
        // waits for its probes...
        let later = t0 + Duration::from_millis(1500);
        node.record_at(Duration::from_millis(50), later);
        assert_eq!(node.latency(), Some(Duration::from_millis(50)));
        assert!(node.warm(), "no second warm-up: it would earn turns");
        assert!(fast.better_than_at(&node, || later));
        // ... whose answer, after another silence, starts it over again.
        let probe = later + Duration::from_millis(1500);
        node.record_at(Duration::from_millis(1), probe);
        assert_eq!(node.latency(), Some(Duration::from_millis(1)));
    }

    #[test]
    fn an_old_average_counts_only_when_it_is_not_far_off() {
        let t0 = t0();
        let fast = warmed_at(Duration::from_millis(1), t0);
        let near = warmed_at(Duration::from_micros(3000), t0);
        let slow = warmed_at(Duration::from_millis(40), t0);
        assert!(fast.better_than_at(&near, || t0) && fast.better_than_at(&slow, || t0));
        // 2 s later, with no sample since: within 4x, the old average no
        // longer counts, and with equal requests in flight neither is
        // better. 40x slower: it waits for its probes.
        let later = t0 + Duration::from_secs(2);
        assert!(!fast.better_than_at(&near, || later));
        assert!(fast.better_than_at(&slow, || later));
    }

    #[test]
    fn the_average_follows_samples_and_in_flight_counts_attempts() {
        let load = NodeLoad::new();
        assert_eq!(load.latency(), None);
        // One instant for every sample: the weight of a sample grows with the
        // silence before it, which a loaded machine would lengthen.
        let t0 = Instant::now();
        // Warm-up keeps the minimum.
        load.record_at(Duration::from_millis(30), t0);
        assert_eq!(load.latency(), Some(Duration::from_millis(30)));
        load.record_at(Duration::from_millis(8), t0);
        load.record_at(Duration::from_millis(9), t0);
        load.record_at(Duration::from_millis(50), t0);
        assert_eq!(load.latency(), Some(Duration::from_millis(8)));
        // Samples in quick succession move it by 1/8 of the difference.
        load.record_at(Duration::ZERO, t0);
        let after = load.latency().unwrap();
        assert_eq!(after, Duration::from_millis(7));
        // An outlier counts as 3 times the average: +1/4 at most.
        let before = load.latency().unwrap();
        load.record_at(Duration::from_secs(1), t0);
        assert_eq!(load.latency().unwrap(), before + before / 4);
        for _ in 0..200 {
            load.record_at(Duration::from_micros(100), t0);
        }
        let settled = load.latency().unwrap();
        assert!(settled < Duration::from_micros(150), "{settled:?}");

        let start = Instant::now();
        let a = load.start(start);
        let b = load.start(start);
        assert_eq!(load.in_flight(), 2);
        drop(a);
        drop(b);
        assert_eq!(load.in_flight(), 0);
    }

    #[test]
    fn cost_compares_latency_times_load_with_a_margin() {
        // No samples: fewer requests in flight wins, ties keep the order.
        let (x, y) = (NodeLoad::new(), NodeLoad::new());
        assert!(!x.better_than(&y));
        let busy = y.start(Instant::now());
        assert!(x.better_than(&y) && !y.better_than(&x));
        drop(busy);
        // Still warming up: within 4x of each other, requests in flight
        // decide; farther apart, the averages (their minimum so far).
        let fast = NodeLoad::new();
        let near = NodeLoad::new();
        let slow = warmed(Duration::from_millis(20));
        fast.record(Duration::from_micros(500));
        near.record(Duration::from_micros(1500));
        assert!(!fast.better_than(&near) && !near.better_than(&fast));
        let busy = near.start(Instant::now());
        assert!(fast.better_than(&near) && !near.better_than(&fast));
        drop(busy);
        assert!(fast.better_than(&slow) && !slow.better_than(&fast));
        for _ in 1..WARM_UP {
            fast.record(Duration::from_micros(500));
        }
        assert!(fast.better_than(&slow));
        assert!(!slow.better_than(&fast));
        // 10 requests in flight at 0.5 ms cost less than an idle 20 ms node.
        let busy: Vec<_> = (0..10).map(|_| fast.start(Instant::now())).collect();
        assert!(fast.better_than(&slow));
        drop(busy);
        // Within a quarter of each other: neither is clearly better.
        let a = warmed(Duration::from_micros(1000));
        let b = warmed(Duration::from_micros(1300));
        assert!(!a.better_than(&b) && !b.better_than(&a));
    }

    /// At a session's start a slow replica is passed over from its first
    /// answer, even with nothing in flight against the others' requests: the
    /// session does not send it the four requests a warm-up would.
    #[test]
    fn a_slow_node_is_passed_over_from_its_first_answer() {
        let (fast, slow) = (NodeLoad::new(), NodeLoad::new());
        fast.record(Duration::from_micros(300));
        slow.record(Duration::from_millis(20));
        let busy: Vec<_> = (0..3).map(|_| fast.start(Instant::now())).collect();
        assert!(fast.better_than(&slow) && !slow.better_than(&fast));
        // (Dropped, an attempt would record its time as a sample.)
        busy.into_iter().for_each(InFlight::discard);
        // A first answer that was not typical (a cold JVM, say) stops
        // counting once a normal one comes: the minimum is kept.
        slow.record(Duration::from_micros(400));
        assert!(!fast.better_than(&slow) && !slow.better_than(&fast));
    }

    /// A node that turns slow: its capped average passes it over from its
    /// second slow answer, and two outliers in a row keep it from the turns
    /// a stale average gets, until a normal answer (a probe's) comes.
    #[test]
    fn a_node_that_turned_slow_waits_for_its_probes() {
        let t0 = t0();
        let fast = warmed_at(Duration::from_millis(1), t0);
        let node = warmed_at(Duration::from_millis(1), t0);
        let ms = |ms: u64| t0 + Duration::from_millis(ms);
        // One outlier (a stall): +1/4, within noise; a stale average keeps
        // its turns.
        node.record_at(Duration::from_millis(20), t0);
        assert!(!fast.better_than_at(&node, || t0));
        assert!(!fast.better_than_at(&node, || ms(200)));
        // Two in a row: it turned slow; a stale average (200 ms old) within
        // 4x of the other's gets no turn...
        node.record_at(Duration::from_millis(20), t0);
        assert_eq!(node.outliers.load(Ordering::Relaxed), OUTLIERS_IN_A_ROW);
        assert!(fast.better_than_at(&node, || t0));
        assert!(fast.better_than_at(&node, || ms(200)));
        // ... however old (a turn a second is a slow answer a second for
        // every session)...
        assert!(fast.better_than_at(&node, || ms(1200)));
        // ... until a normal answer (a probe's) clears it.
        node.record_at(Duration::from_millis(1), ms(1200));
        assert_eq!(node.outliers.load(Ordering::Relaxed), 0);
        assert!(!fast.better_than_at(&node, || ms(1400)));
    }

    #[test]
    fn a_stale_average_within_4x_keeps_its_place() {
        let t0 = t0();
        let stale = warmed_at(Duration::from_micros(2000), t0);
        let slow = warmed_at(Duration::from_millis(20), t0);
        let fresh = warmed_at(Duration::from_micros(500), t0);
        assert!(fresh.better_than_at(&stale, || t0) && fresh.better_than_at(&slow, || t0));
        let later = t0 + STALE_AFTER + Duration::from_millis(20);
        fresh.record_at(Duration::from_micros(500), later);
        // 4x slower and stale: its turn; 40x slower: still passed over.
        assert!(!fresh.better_than_at(&stale, || later));
        assert!(fresh.better_than_at(&slow, || later));
        // Once tried, the new sample counts again.
        stale.record_at(Duration::from_micros(2000), later);
        assert!(fresh.better_than_at(&stale, || later));
    }

    #[test]
    fn mix_spreads_consecutive_seeds() {
        let picks: std::collections::BTreeSet<u64> = (0..64u64).map(|s| mix(s) % 7).collect();
        assert_eq!(picks.len(), 7);
    }
}
