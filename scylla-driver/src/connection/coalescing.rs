//! When the writer writes: the coalescing policy, as a pure decision.
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
//!   completes responses and so wakes more requesters), then looks again.
//!   It writes as soon as a round brings no new frame, the buffer reaches
//!   `max_bytes`, or `max_delay` has passed since the first pending frame.
//!
//! The wait is measured in scheduler rounds and checked against a monotonic
//! clock, never slept on, so sub-millisecond bounds do not depend on tokio's
//! 1 ms timer wheel. [`Coalescing::Off`] (one write per request) and
//! [`Coalescing::Fixed`] (hold every write for a fixed time) reproduce the
//! behaviours of other drivers, for benchmarks.

use std::time::Duration;

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

    /// Decides what the writer does with the frames pending now. A yield
    /// after an idle round (under an idle-round limit) goes through the I/O
    /// driver, so that responses that arrived meanwhile get their turn.
    pub(crate) fn decide(&self, p: &PendingWrites) -> Decision {
        match self.decide_step(p) {
            Decision::Yield if p.idle_rounds > 0 && p.max_idle_rounds != u32::MAX => {
                Decision::YieldToDriver
            }
            d => d,
        }
    }

    fn decide_step(&self, p: &PendingWrites) -> Decision {
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
                // Rounds without a new frame: every task queued ahead of the
                // writer has run and added nothing, so the next frames wait
                // for responses, which the writer would only spin for.
                // Frames that other workers add meanwhile go with the next
                // write. (The idle round before this one was a turn of the
                // I/O driver: see `decide`.)
                if p.idle_rounds >= p.max_idle_rounds {
                    return Decision::Write;
                }
                // Busy: wait for the next frame only if it is expected soon,
                // i.e. frames have been arriving at most `arrival_gap` apart
                // and that gap still fits in the budget. Frames that trickle
                // in one per scheduler round (a server answering one response
                // at a time) are gathered too; a pause of two gaps without a
                // new frame means the burst is over.
                let gap = p.arrival_gap;
                let expect_more = !gap.is_zero()
                    && p.quiet < gap.saturating_mul(2)
                    && p.waited + gap <= max_delay;
                if expect_more || (p.rounds == 0 && gap.is_zero()) {
                    Decision::Yield
                } else {
                    Decision::Write
                }
            }
        }
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
    /// Time since a frame was last added (or since the first look).
    pub quiet: Duration,
    /// Recent typical time between two frames being submitted (an average
    /// kept by the connection; zero when unknown).
    pub arrival_gap: Duration,
    /// Rounds in a row (since the last growth) that brought no new frame.
    pub idle_rounds: u32,
    /// After this many idle rounds the adaptive wait ends (`u32::MAX`: no
    /// limit, only the time bounds). The writer sets it from its runtime.
    pub max_idle_rounds: u32,
}

/// The writer's next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Write everything pending now.
    Write,
    /// Let the tasks already queued on this worker go first, then decide
    /// again (no I/O driver poll in between).
    Yield,
    /// Let the worker poll the I/O driver once (responses that arrived
    /// meanwhile wake more requesters), then decide again.
    YieldToDriver,
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
            quiet: if grew {
                Duration::ZERO
            } else {
                Duration::from_micros(waited_us)
            },
            arrival_gap: Duration::from_micros(10),
            idle_rounds: 0,
            max_idle_rounds: u32::MAX,
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
        assert_eq!(a.decide(&p(10, 0, false, 0, 100)), Decision::Yield);
        assert_eq!(a.decide(&p(10, 1, true, 20, 500)), Decision::Yield);
        // Quiet for two arrival gaps: the burst is over.
        assert_eq!(a.decide(&p(10, 2, false, 30, 500)), Decision::Write);
        // Frames trickling in one per round: a round without one is not yet
        // the end, while the next is expected within the budget.
        let mut trickle = p(10, 3, false, 40, 500);
        trickle.quiet = Duration::from_micros(5);
        assert_eq!(a.decide(&trickle), Decision::Yield);
        // ... but not past the budget.
        trickle.waited = Duration::from_micros(245);
        assert_eq!(a.decide(&trickle), Decision::Write);
        // Rare arrivals (gap beyond the budget): write at once.
        let mut rare = p(10, 0, false, 0, 100);
        rare.arrival_gap = Duration::from_millis(1);
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
}
