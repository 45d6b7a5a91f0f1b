//! When the writer writes: the coalescing policy, its decisions, and the state
//! they read (one [`Coalescer`] per connection).
//!
//! A syscall per request is the main cost of a CQL connection under load;
//! holding writes for a fixed window (ScyllaDB's Go driver: 1 ms; gocql:
//! 200 µs, about 1 ms in practice once rounded to the runtime's timer)
//! amortises it but taxes every request when the load is low. The default
//! [`Coalescing::Adaptive`] policy does neither:
//!
//! - **Idle connection** (no response outstanding): write at once. A lone
//!   request pays no delay at all.
//! - **Busy connection** (responses outstanding, so more requests are likely
//!   to follow as those responses wake their tasks): let the tasks that are
//!   already runnable add their frames first. The writer yields to the
//!   scheduler, which runs every task that is ready (and the reader, which
//!   completes responses and so wakes more requesters), then looks again,
//!   until a round brings no new frame.
//! - **A small batch on a busy connection** (fewer frames pending than an
//!   eighth of the requests awaiting responses, and frames arriving often):
//!   the writer parks until the requester whose frame makes the batch large
//!   enough wakes it. Requests in flight come back and are followed by new ones, so
//!   the batch grows in proportion to the load, without the writer spinning
//!   through scheduler rounds while nothing is runnable.
//!
//! Either way it writes as soon as the buffer reaches `max_bytes` or
//! `max_delay` has passed since the first pending frame.
//!
//! The wait is measured in scheduler rounds and submitted frames and checked
//! against a monotonic clock, with no timer of its own: when frames stop
//! arriving while the writer waits for them, the connection's reader (on
//! the next response) or its tick (while the server answers nothing) ends
//! the wait once the bound has passed. [`Coalescing::Off`] (one write per request) and
//! [`Coalescing::Fixed`] (hold every write for a fixed time) reproduce the
//! behaviours of other drivers, for benchmarks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How the connection writer groups frames into writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Coalescing {
    /// One write (syscall) per request frame, no waiting.
    Off,
    /// Hold every write until the given time has passed since the first
    /// pending frame (or the byte cap is reached).
    Fixed(Duration),
    /// Write at once when idle; while busy, gather frames for at most
    /// `max_delay` or `max_bytes`, stopping as soon as no new frame arrives.
    Adaptive {
        /// Upper bound on how long a frame may wait.
        max_delay: Duration,
        /// Write once this many bytes are pending.
        max_bytes: usize,
    },
}

impl Default for Coalescing {
    fn default() -> Self {
        Coalescing::ADAPTIVE
    }
}

/// Byte cap for [`Coalescing::Fixed`] and the default adaptive policy.
pub(super) const DEFAULT_MAX_BYTES: usize = 64 * 1024;

impl Coalescing {
    /// The default adaptive policy: at most 250 µs and 64 KiB.
    pub const ADAPTIVE: Coalescing = Coalescing::Adaptive {
        max_delay: Duration::from_micros(250),
        max_bytes: DEFAULT_MAX_BYTES,
    };

    /// Whether every frame gets its own write.
    pub fn one_frame_per_write(&self) -> bool {
        matches!(self, Coalescing::Off)
    }

    /// Whether a frame submitted to an idle connection (nothing in flight,
    /// nothing pending) is written at once. Then the requester writes it
    /// itself, sparing the writer task's wake-up; `Fixed` always waits.
    pub fn writes_when_idle(&self) -> bool {
        !matches!(self, Coalescing::Fixed(_))
    }

    /// The byte cap of a write's batch.
    pub(crate) fn max_bytes(&self) -> usize {
        match *self {
            Coalescing::Adaptive { max_bytes, .. } => max_bytes,
            _ => DEFAULT_MAX_BYTES,
        }
    }

    /// How often (in rounds) the writer's wait reads the clock: every 4th
    /// round for the adaptive policy (its bounds are hundreds of rounds
    /// long, and a clock read in a VM costs as much as a round), every round
    /// for a fixed window, which sleeps on the timer.
    pub fn clock_every_rounds(&self) -> u32 {
        match self {
            Coalescing::Fixed(_) => 1,
            _ => 4,
        }
    }

    /// Decides what the writer does with the frames pending now.
    pub(crate) fn decide(&self, p: &PendingWrites) -> Decision {
        match *self {
            Coalescing::Off => Decision::Write,
            Coalescing::Fixed(delay) => {
                if p.waited >= delay || p.bytes >= DEFAULT_MAX_BYTES {
                    Decision::Write
                } else {
                    let left = delay - p.waited;
                    // The timer wheel (1 ms ticks, rounding up) is trusted for
                    // waits of more than half a tick; only the sub-tick rest is
                    // yielded away. (With `>= 1 ms` here, a `Fixed(1 ms)`
                    // window never slept: at the first look `waited` is
                    // already a few ns, so the whole window was spent
                    // spinning through `yield_now`, a full core per busy
                    // connection.)
                    if left > Duration::from_micros(500) {
                        Decision::Sleep(left)
                    } else {
                        Decision::Yield
                    }
                }
            }
            Coalescing::Adaptive {
                max_delay,
                max_bytes,
            } => {
                // Idle (nothing outstanding, so nothing is about to trigger
                // more requests), full, or out of time: write.
                if p.awaiting_responses == 0 || p.bytes >= max_bytes || p.waited >= max_delay {
                    return Decision::Write;
                }
                // The tasks queued ahead of the writer may be requesters
                // about to add frames: let them (again while they do).
                if p.rounds == 0 || p.grew {
                    return Decision::Yield;
                }
                // A round without a new frame: everything runnable has run.
                // The next frames come as responses wake their requesters.
                // Wait for them (parked, not spinning) while the batch is
                // small for the load, and frames have been arriving often
                // enough that the next is expected well within the budget.
                let small = !batch_is_large(p.frames, p.awaiting_responses);
                let gap = p.arrival_gap;
                let frequent = !gap.is_zero() && gap.saturating_mul(4) <= max_delay - p.waited;
                if small && frequent {
                    Decision::WaitForFrames(max_delay - p.waited)
                } else {
                    Decision::Write
                }
            }
        }
    }
}

/// The adaptive policy waits for more frames while fewer than one in
/// `BATCH_FRACTION` of the requests awaiting responses are pending. Measured
/// with compare-ours against the testbed (2 workers, SELECT, medians of 4-6
/// interleaved runs, load 1.5-2.2): at concurrency 64, 7.24 us of client CPU
/// per request with 8, 7.56 with 16 and 8.00 without waiting; at 512, 4.96
/// with 8, 5.65 with 4 and 6.21 without.
const BATCH_FRACTION: usize = 8;

/// Whether `frames` pending are a large enough batch for `awaiting`
/// responses outstanding: the adaptive wait ends there. The requester whose
/// frame completes such a batch wakes the waiting writer (one wake-up per
/// write, not one per frame: waking it for every frame cost more CPU than
/// Off at concurrency 1024 on two workers).
pub(crate) fn batch_is_large(frames: usize, awaiting: usize) -> bool {
    frames.saturating_mul(BATCH_FRACTION) >= awaiting
}

/// One connection's coalescing: its policy, and the state the policy's
/// decisions read, shared by the requesters (who submit frames), the writer
/// (who waits for more of them), and the reader and the tick (who end a wait
/// whose time bound has passed).
///
/// The writer's wait for more frames has no timer of its own: while it
/// waits, [`wait_until`](Self::begin_wait) holds the time by which it must
/// write anyway, and whoever ends the wait takes it (swaps in 0) and wakes
/// the writer: the requester whose frame completes the batch
/// ([`frame_ends_wait`](Self::frame_ends_wait)), or, once the time has
/// passed, the reader after each read or the tick
/// ([`take_overdue`](Self::take_overdue)). Requesters set and take it under
/// the pending lock, so a frame added after the writer looked is never
/// missed. (Registering a timer per wait woke a parked worker thread through
/// the runtime's driver: measured 0.04 extra eventfd writes and 15% more
/// client CPU per request at concurrency 64.)
#[derive(Debug)]
pub(crate) struct Coalescer {
    policy: Coalescing,
    /// Whether idle requesters write their frame themselves (see
    /// [`Coalescing::writes_when_idle`]; only where the socket allows it).
    direct_writes: bool,
    epoch: Instant,
    /// Nanoseconds after `epoch` of the last frame submitted.
    last_arrival: AtomicU64,
    /// Moving average of the time between submissions, in nanoseconds: how
    /// soon the writer can expect the next frame.
    arrival_gap: AtomicU64,
    /// While the writer waits for more frames: nanoseconds after `epoch` by
    /// which it must write anyway (0 otherwise).
    wait_until: AtomicU64,
}

impl Coalescer {
    /// `direct_socket`: whether requesters can write to the socket
    /// themselves (plain TCP).
    pub(crate) fn new(policy: Coalescing, direct_socket: bool) -> Self {
        Self {
            policy,
            direct_writes: direct_socket && policy.writes_when_idle(),
            epoch: Instant::now(),
            last_arrival: AtomicU64::new(0),
            arrival_gap: AtomicU64::new(0),
            wait_until: AtomicU64::new(0),
        }
    }

    pub(crate) fn policy(&self) -> Coalescing {
        self.policy
    }

    /// Whether a requester submitting to an idle connection writes its
    /// frame itself.
    #[inline]
    pub(crate) fn writes_direct(&self) -> bool {
        self.direct_writes
    }

    /// Records a submission and updates the average gap between them
    /// (weight 1/8; a single long pause counts as at most 1 ms, so one idle
    /// spell does not make the writer impatient for long).
    #[inline]
    pub(crate) fn note_arrival(&self, now: Instant) {
        let now = self.nanos_at(now);
        let prev = self.last_arrival.swap(now, Ordering::Relaxed);
        if prev == 0 {
            return;
        }
        let gap = now.saturating_sub(prev).min(1_000_000);
        let old = self.arrival_gap.load(Ordering::Relaxed);
        let new = if old == 0 {
            gap
        } else {
            old - old / 8 + gap / 8
        };
        self.arrival_gap.store(new, Ordering::Relaxed);
    }

    /// The recent typical time between two submissions (zero when unknown).
    pub(crate) fn arrival_gap(&self) -> Duration {
        Duration::from_nanos(self.arrival_gap.load(Ordering::Relaxed))
    }

    /// Called by a requester under the pending lock after adding its frame,
    /// with the frames and bytes pending and the requests in flight: whether
    /// this frame ends the writer's wait (the batch is now large enough for
    /// the load, or its bytes reach the cap). If so the wait is taken, and
    /// the caller wakes the writer.
    #[inline]
    pub(crate) fn frame_ends_wait(&self, frames: usize, in_flight: usize, bytes: usize) -> bool {
        self.wait_until.load(Ordering::Relaxed) != 0
            && (batch_is_large(frames, in_flight.saturating_sub(frames))
                || bytes >= self.policy.max_bytes())
            && self.wait_until.swap(0, Ordering::Relaxed) != 0
    }

    /// Called by the reader after each read and by the tick: whether the
    /// writer waits for frames past its bound. If so the wait is taken, and
    /// the caller wakes the writer. Reads the clock only while the writer
    /// waits.
    #[inline]
    pub(crate) fn take_overdue(&self) -> bool {
        let until = self.wait_until.load(Ordering::Relaxed);
        until != 0
            && self.nanos_at(Instant::now()) >= until
            && self.wait_until.swap(0, Ordering::Relaxed) != 0
    }

    /// The writer starts waiting for more frames, until `until` at most.
    /// Call under the pending lock, after checking no frame came meanwhile.
    pub(crate) fn begin_wait(&self, until: Instant) {
        self.wait_until
            .store(self.nanos_at(until).max(1), Ordering::Relaxed);
    }

    /// The writer woke: the wait is over (already taken, unless a wake-up
    /// stored earlier ended it, which only costs one extra look).
    pub(crate) fn end_wait(&self) {
        self.wait_until.store(0, Ordering::Relaxed);
    }

    /// What the writer does with the frames pending now.
    #[inline]
    pub(crate) fn decide(&self, p: &PendingWrites) -> Decision {
        self.policy.decide(p)
    }

    fn nanos_at(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }
}

/// What the writer knows about its pending frames when it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PendingWrites {
    /// Bytes encoded and not yet written.
    pub bytes: usize,
    /// Frames encoded and not yet written.
    pub frames: usize,
    /// Requests written to the socket whose responses have not arrived.
    pub awaiting_responses: usize,
    /// Time since the writer first saw these frames.
    pub waited: Duration,
    /// How many times the writer has already yielded for them.
    pub rounds: u32,
    /// Whether frames were added during the last yield.
    pub grew: bool,
    /// Recent typical time between two frames being submitted (an average
    /// kept by the connection; zero when unknown).
    pub arrival_gap: Duration,
}

/// The writer's next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Write everything pending now.
    Write,
    /// Let the tasks already queued on this worker go first, then decide
    /// again (no I/O driver poll in between).
    Yield,
    /// Park until a requester submits the next frame, or the reader or the
    /// tick finds this much time passed, then decide again.
    WaitForFrames(Duration),
    /// Sleep (on the runtime timer), then decide again.
    Sleep(Duration),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(awaiting: usize, rounds: u32, grew: bool, waited_us: u64, bytes: usize) -> PendingWrites {
        PendingWrites {
            bytes,
            frames: 1,
            awaiting_responses: awaiting,
            waited: Duration::from_micros(waited_us),
            rounds,
            grew,
            arrival_gap: Duration::from_micros(10),
        }
    }

    #[test]
    fn adaptive_writes_at_once_when_idle() {
        assert_eq!(
            Coalescing::ADAPTIVE.decide(&p(0, 0, false, 0, 100)),
            Decision::Write
        );
    }

    #[test]
    fn adaptive_gathers_while_busy_and_growing() {
        let a = Coalescing::ADAPTIVE;
        // First look, and rounds that brought frames: let the runnable
        // requesters go first.
        assert_eq!(a.decide(&p(10, 0, false, 0, 100)), Decision::Yield);
        assert_eq!(a.decide(&p(10, 1, true, 20, 500)), Decision::Yield);
        // A round without a new frame, one frame for ten awaiting responses:
        // wait (parked) for the next frame, within the budget.
        assert_eq!(
            a.decide(&p(10, 2, false, 30, 500)),
            Decision::WaitForFrames(Duration::from_micros(220))
        );
        // ... but not with a batch that is large for the load.
        let mut large = p(10, 2, false, 30, 500);
        large.frames = 2;
        assert_eq!(a.decide(&large), Decision::Write);
        // Rare arrivals (four gaps do not fit in what is left of the
        // budget): write.
        let mut rare = p(10, 2, false, 30, 500);
        rare.arrival_gap = Duration::from_micros(60);
        assert_eq!(a.decide(&rare), Decision::Write);
        // No arrival statistics yet: write.
        rare.arrival_gap = Duration::ZERO;
        assert_eq!(a.decide(&rare), Decision::Write);
    }

    #[test]
    fn adaptive_is_bounded_in_time_and_bytes() {
        let a = Coalescing::ADAPTIVE;
        assert_eq!(a.decide(&p(10, 5, true, 250, 500)), Decision::Write);
        assert_eq!(
            a.decide(&p(10, 5, true, 10, DEFAULT_MAX_BYTES)),
            Decision::Write
        );
    }

    #[test]
    fn fixed_waits_its_window() {
        let f = Coalescing::Fixed(Duration::from_millis(2));
        assert_eq!(
            f.decide(&p(0, 0, false, 0, 10)),
            Decision::Sleep(Duration::from_millis(2))
        );
        assert_eq!(f.decide(&p(0, 3, false, 1_500, 10)), Decision::Yield);
        assert_eq!(f.decide(&p(0, 3, false, 2_000, 10)), Decision::Write);
        let sub_ms = Coalescing::Fixed(Duration::from_micros(200));
        assert_eq!(sub_ms.decide(&p(0, 0, false, 0, 10)), Decision::Yield);
        // The first look always comes a little after the first frame: a
        // 1 ms window must still sleep, not spin.
        let one_ms = Coalescing::Fixed(Duration::from_millis(1));
        assert_eq!(
            one_ms.decide(&p(0, 0, false, 3, 10)),
            Decision::Sleep(Duration::from_micros(997))
        );
    }

    #[test]
    fn off_always_writes() {
        assert_eq!(
            Coalescing::Off.decide(&p(100, 0, true, 0, 1)),
            Decision::Write
        );
        assert!(Coalescing::Off.one_frame_per_write());
    }

    #[test]
    fn only_a_waiting_writer_is_woken_and_only_once() {
        let c = Coalescer::new(Coalescing::ADAPTIVE, true);
        // No wait in progress: no frame ends one, nothing is overdue.
        assert!(!c.frame_ends_wait(100, 100, 1 << 20));
        assert!(!c.take_overdue());
        let later = Instant::now() + Duration::from_secs(3600);
        c.begin_wait(later);
        // 2 pending for 30 awaiting is small (one in 8 ends the wait);
        // 4 for 28 is large, and the wait is taken by that frame alone.
        assert!(!c.frame_ends_wait(2, 32, 100));
        assert!(!c.take_overdue(), "the bound is an hour away");
        assert!(c.frame_ends_wait(4, 32, 100));
        assert!(!c.frame_ends_wait(5, 32, 100), "taken already");
        // The byte cap ends a wait whatever the batch's size.
        c.begin_wait(later);
        assert!(c.frame_ends_wait(1, 1000, DEFAULT_MAX_BYTES));
        // A bound that has passed is taken by the reader or the tick, once.
        c.begin_wait(Instant::now());
        assert!(c.take_overdue());
        assert!(!c.take_overdue());
        c.begin_wait(later);
        c.end_wait();
        assert!(!c.frame_ends_wait(100, 100, 1 << 20));
    }

    #[test]
    fn direct_writes_need_a_shared_socket_and_a_policy_that_writes_when_idle() {
        assert!(Coalescer::new(Coalescing::ADAPTIVE, true).writes_direct());
        assert!(Coalescer::new(Coalescing::Off, true).writes_direct());
        assert!(!Coalescer::new(Coalescing::ADAPTIVE, false).writes_direct());
        let fixed = Coalescing::Fixed(Duration::from_millis(1));
        assert!(!Coalescer::new(fixed, true).writes_direct());
    }

    #[test]
    fn the_arrival_gap_is_a_bounded_moving_average() {
        let c = Coalescer::new(Coalescing::ADAPTIVE, true);
        let t0 = Instant::now();
        c.note_arrival(t0);
        assert_eq!(c.arrival_gap(), Duration::ZERO, "one arrival has no gap");
        c.note_arrival(t0 + Duration::from_micros(80));
        assert_eq!(c.arrival_gap(), Duration::from_micros(80));
        // A long pause counts as 1 ms: 80 - 10 + 125 = 195 us.
        c.note_arrival(t0 + Duration::from_secs(10));
        assert_eq!(c.arrival_gap(), Duration::from_micros(195));
    }
}
