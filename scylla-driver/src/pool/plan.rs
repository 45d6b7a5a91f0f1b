//! The refill task's decisions, without sockets or clocks.
//!
//! The pool's refill task (`refill`) works in rounds: it opens what the pool
//! lacks, sees how the round went ([`Round`]) and decides what to wait for
//! before the next one ([`Next`]). Those decisions (which backoff delay, when
//! to reset it, when to spread the opens of a round over the reconnect window
//! and how much, each open's draws in order ([`RefillPlan::orders`]), how a
//! round's opens add up to its outcome ([`RoundTally`]), how long to pause
//! after an unlucky round) live here, in a
//! [`RefillPlan`] that takes durations and outcomes and returns durations, so
//! that the refill task and a simulation in virtual time (the
//! `storm_sim` tool) drive the very same code: the task waits on tokio's
//! clock, the simulation on its own event queue.
//!
//! What a round opens and how a failed open is classified stay with their
//! owners: the missing shards in `refill`, shed handshakes in [`super::shed`],
//! the shard-aware port's health in [`super::nat`] (all callable without I/O).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use scylla_cql::sharding::Shard;

use super::backoff::{spread, ReconnectSchedule};
use super::pacing::OpenPacer;
use super::shed::OpenFailure;

/// How a refill round went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// Every wanted connection is open and every shard covered.
    Complete,
    /// Some connections opened; more are missing: go on at once.
    Progress,
    /// Every connection opened, but all landed on shards already covered
    /// (regular port, other clients competing for the same shards). The node
    /// is fine: try again soon, without growing the backoff.
    Unlucky,
    /// An open failed (the node is unreachable, or shed the handshake): back
    /// off.
    Failed,
    /// Every wanted connection is open, but some shards have none (the
    /// regular port decides where connections land): cover them in the
    /// background, one rate-limited attempt at a time.
    Partial,
}

/// What a finished round of opens found, to classify it with [`Round::of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundFacts {
    /// No connection is missing any more.
    pub complete: bool,
    /// At least one open failed.
    pub failed: bool,
    /// The pool holds as many connections as it wants in total (or the round
    /// was a background coverage attempt), but not one on every shard.
    pub partial: bool,
    /// At least one opened connection was kept.
    pub progress: bool,
}

/// One open a round starts (see [`RefillPlan::orders`]): for which shard,
/// through which port (`P`, the caller's own description of it), after
/// which delay within the round's window, and with which source-port seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOrder<P> {
    /// The shard the open is for.
    pub shard: Shard,
    /// The port it goes through, as the caller chose it.
    pub port: P,
    /// Its random delay within the round's window.
    pub delay: Duration,
    /// The seed of its source-port choice.
    pub seed: u64,
}

/// The bookkeeping of one round of opens, as its opens end: whether one was
/// kept (and covered a shard that had no connection), whether one failed,
/// and how many the node shed. [`RoundTally::round`] turns it into the
/// round's outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundTally {
    progress: bool,
    covered_new: bool,
    failed: bool,
    shed: u32,
}

impl RoundTally {
    /// An opened connection was kept; `covers`: on a shard that had none.
    pub fn kept(&mut self, covers: bool) {
        self.progress = true;
        self.covered_new |= covers;
    }

    /// An open failed as `failure` says.
    pub fn failed(&mut self, failure: OpenFailure) {
        self.failed = true;
        if failure == OpenFailure::Shed {
            self.shed += 1;
        }
    }

    /// Whether a kept connection covered a shard that had none.
    pub fn covered_new(&self) -> bool {
        self.covered_new
    }

    /// Handshakes of this round the node shed.
    pub fn shed(&self) -> u32 {
        self.shed
    }

    /// The round's outcome, given whether the pool now lacks nothing
    /// (`complete`) and whether it is at its wanted total without every
    /// shard covered (`partial`, see [`RoundFacts::partial`]).
    pub fn round(&self, complete: bool, partial: bool) -> Round {
        Round::of(RoundFacts {
            complete,
            failed: self.failed,
            partial,
            progress: self.progress,
        })
    }
}

impl Round {
    /// The outcome of a round of opens: complete first, then failed, then
    /// partial, then unlucky (nothing kept), else progress.
    pub fn of(facts: RoundFacts) -> Round {
        if facts.complete {
            Round::Complete
        } else if facts.failed {
            Round::Failed
        } else if facts.partial {
            Round::Partial
        } else if !facts.progress {
            Round::Unlucky
        } else {
            Round::Progress
        }
    }
}

/// What the refill task waits for after a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Start the next round at once.
    Now,
    /// Sleep this long, then start the next round.
    Pause(Duration),
    /// The node answers: wait until a connection closes or the node is
    /// reported up (after [`Round::Partial`], also until the next background
    /// coverage attempt is due). The backoff was reset.
    Idle,
    /// Back off: wait this long (or until woken), then ask
    /// [`RefillPlan::after_backoff`] whether to pause before the next round.
    Backoff(Duration),
}

/// One decision of a refill task, as [`DecisionLog`] keeps it: how a round
/// went, whether it tried the pool's first connection, how many opens it
/// ordered ([`RefillPlan::orders`]; the first connection is not an order),
/// and what the task waits for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// How the round went.
    pub round: Round,
    /// The round tried the pool's first connection.
    pub first: bool,
    /// Opens the round ordered.
    pub opens: usize,
    /// The window those opens were spread over (zero: none, or no opens).
    pub window: Duration,
    /// What the task waits for next.
    pub next: Next,
}

/// Where a pool's refill decisions are appended, in order, when one is set
/// ([`super::PoolConfig::decision_log`]): for comparing the refill task with
/// a simulation of it, which appends its own.
pub type DecisionLog = Arc<Mutex<Vec<Decision>>>;

/// Bound of the random pause after an [`Round::Unlucky`] round.
pub const UNLUCKY_PAUSE: Duration = Duration::from_millis(50);

/// The refill task's decisions for one pool: its backoff schedule, whether the
/// node just came back, and the random source that spreads its opens.
#[derive(Debug)]
pub struct RefillPlan {
    schedule: Box<dyn ReconnectSchedule>,
    reconnect_spread: Duration,
    rng: fastrand::Rng,
    /// Set after the node was unreachable: spread the next round's opens.
    recovering: bool,
    /// Opens ordered since the last decision, and their window.
    ordered: usize,
    window: Duration,
    pacer: OpenPacer,
    log: Option<DecisionLog>,
}

impl RefillPlan {
    /// A plan with the pool's backoff `schedule`, its reconnect spread window
    /// ([`super::PoolConfig::reconnect_spread`]) and a random source.
    pub fn new(
        schedule: Box<dyn ReconnectSchedule>,
        reconnect_spread: Duration,
        rng: fastrand::Rng,
    ) -> Self {
        RefillPlan {
            schedule,
            reconnect_spread,
            rng,
            recovering: false,
            ordered: 0,
            window: Duration::ZERO,
            pacer: OpenPacer::new(1),
            log: None,
        }
    }

    /// Paces the round's opens with at most `max_concurrent_opens` in flight
    /// (see [`OpenPacer`]).
    #[must_use]
    pub fn with_max_concurrent_opens(mut self, max_concurrent_opens: usize) -> Self {
        self.pacer = OpenPacer::new(max_concurrent_opens);
        self
    }

    /// The pacing of the pool's opens.
    pub fn pacer(&mut self) -> &mut OpenPacer {
        &mut self.pacer
    }

    /// Appends every decision of [`after_round`](Self::after_round) to `log`.
    #[must_use]
    pub fn with_log(mut self, log: Option<DecisionLog>) -> Self {
        self.log = log;
        self
    }

    /// The window over which this round's opens are spread (the pool has a
    /// connection already). Only the first round after the node came back is
    /// spread out, and only by a pool that has no handshake time to pace by
    /// yet ([`OpenPacer`]): it is the one every client starts at the same
    /// moment. Later rounds, and a pool with a pacer that has seen
    /// handshakes, are paced instead.
    pub fn fill_window(&mut self) -> Duration {
        if std::mem::take(&mut self.recovering) && self.pacer.least().is_none() {
            self.reconnect_spread
        } else {
            Duration::ZERO
        }
    }

    /// The opens of a round, one per shard of `wanted`, in a random order
    /// (drawn first): each with
    /// the port `port` chooses for it (asked first, in the same order), a
    /// random delay within `window`, and a source-port seed (drawn in that
    /// order, so that a simulation with the same seed draws the same
    /// numbers as the refill task).
    pub fn orders<P>(
        &mut self,
        wanted: impl IntoIterator<Item = Shard>,
        window: Duration,
        mut port: impl FnMut(Shard) -> P,
    ) -> Vec<OpenOrder<P>> {
        self.window = window;
        let mut wanted: Vec<Shard> = wanted.into_iter().collect();
        // Each pool opens its missing shards in its own random order: in the
        // same order, every pool's opens would queue at the lowest shard
        // together, then the next. Not a rotation from a random start either:
        // then the pools leaving a shard all go on to the next one, each
        // shard's queue is fed by the one before it, and a queue that grew
        // by chance stays long while the pools pace themselves by all their
        // shards' queues (at 6,000 sessions x 9 nodes x 7 shards and 20 ms
        // handshakes, `storm_sim` seeds 1 to 30: shed in 16 cold starts and
        // 9 restarts, 425 and 440 handshakes, rotated; in 11 and 4, 253 and
        // 96, shuffled).
        self.rng.shuffle(&mut wanted);
        let orders: Vec<_> = wanted
            .into_iter()
            .map(|shard| {
                let port = port(shard);
                let delay = spread(window, &mut self.rng);
                let seed = self.rng.u64(..);
                OpenOrder {
                    shard,
                    port,
                    delay,
                    seed,
                }
            })
            .collect();
        self.ordered += orders.len();
        orders
    }

    /// The random source, for the round's other draws (source-port seeds,
    /// background coverage intervals).
    pub fn rng(&mut self) -> &mut fastrand::Rng {
        &mut self.rng
    }

    /// Decides what to wait for after a round. `first` says the round tried
    /// the pool's first connection (the pool was empty): if that failed, the
    /// node was unreachable, and the round after it comes back is spread.
    pub fn after_round(&mut self, round: Round, first: bool) -> Next {
        let next = self.decide(round, first);
        let opens = std::mem::take(&mut self.ordered);
        let window = std::mem::take(&mut self.window);
        if let Some(log) = &self.log {
            if let Ok(mut log) = log.lock() {
                log.push(Decision {
                    round,
                    first,
                    opens,
                    window: if opens == 0 { Duration::ZERO } else { window },
                    next,
                });
            }
        }
        next
    }

    fn decide(&mut self, round: Round, first: bool) -> Next {
        if first && round == Round::Failed {
            self.recovering = true;
            self.pacer.on_outage();
        }
        match round {
            Round::Progress => Next::Now,
            Round::Unlucky => Next::Pause(spread(UNLUCKY_PAUSE, &mut self.rng)),
            Round::Partial | Round::Complete => {
                self.schedule.reset();
                self.pacer.on_filled();
                self.recovering = false;
                Next::Idle
            }
            // After a shed, at least the pacer's pause (the node's queue is
            // long), drawn from half to one and a half times it: the pools a
            // node shed together measured about the same queue, and would
            // otherwise come back together, as the next wave.
            Round::Failed => {
                let gap = self.pacer.gap();
                let pause = gap / 2 + spread(gap, &mut self.rng);
                Next::Backoff(self.schedule.next_delay().max(pause))
            }
        }
    }

    /// Whether a wake during a backoff wait ends it. Only the node being
    /// reported up (`up_hint`) does: the other wakes are the closes of
    /// connections (after an outage, one per connection the pool had, noticed
    /// one by one), and they say nothing new about a node the pool is backing
    /// off from; letting each end the wait would turn one backoff into as
    /// many immediate retries as the pool had connections.
    pub fn wake_ends_backoff(&self, up_hint: bool) -> bool {
        up_hint
    }

    /// After a backoff wait: if the node was reported up meanwhile
    /// (`up_hint`), every client heard it at once, so the backoff restarts
    /// and the next round waits a random moment of the spread window first
    /// (returned); otherwise the next round starts at once.
    pub fn after_backoff(
        &mut self,
        up_hint: bool,
        quickest_setup: Option<Duration>,
    ) -> Option<Duration> {
        if up_hint {
            self.schedule.reset();
            let window = self
                .pacer
                .restart_spread(self.reconnect_spread, quickest_setup);
            Some(spread(window, &mut self.rng))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::backoff::{Backoff, ExponentialBackoff, Jitter};

    fn plan(seed: u64) -> RefillPlan {
        let cfg = ExponentialBackoff::new(Duration::from_millis(100), Duration::from_secs(1))
            .with_jitter(Jitter::None);
        RefillPlan::new(
            Box::new(Backoff::with_rng(cfg, fastrand::Rng::with_seed(seed))),
            Duration::from_secs(1),
            fastrand::Rng::with_seed(seed),
        )
    }

    #[test]
    fn outcome_order() {
        let f = |complete, failed, partial, progress| {
            Round::of(RoundFacts {
                complete,
                failed,
                partial,
                progress,
            })
        };
        assert_eq!(f(true, true, true, false), Round::Complete);
        assert_eq!(f(false, true, true, true), Round::Failed);
        assert_eq!(f(false, false, true, false), Round::Partial);
        assert_eq!(f(false, false, false, false), Round::Unlucky);
        assert_eq!(f(false, false, false, true), Round::Progress);
    }

    #[test]
    fn a_tally_gives_the_rounds_outcome() {
        let mut t = RoundTally::default();
        assert_eq!(t.round(false, false), Round::Unlucky);
        t.kept(false);
        assert!(!t.covered_new());
        assert_eq!(t.round(false, false), Round::Progress);
        t.kept(true);
        assert!(t.covered_new());
        assert_eq!(t.round(false, true), Round::Partial);
        t.failed(OpenFailure::Other);
        assert_eq!((t.round(false, true), t.shed()), (Round::Failed, 0));
        t.failed(OpenFailure::Shed);
        t.failed(OpenFailure::Shed);
        assert_eq!(t.shed(), 2);
        assert_eq!(t.round(true, false), Round::Complete);
    }

    /// The orders of a round are the wanted shards shuffled; they draw, per
    /// open and in order: the port, the delay, the seed; the same seed gives
    /// the same orders, and the delays stay within the window.
    #[test]
    fn orders_draw_port_delay_and_seed_in_order() {
        let window = Duration::from_secs(1);
        let mut asked = Vec::new();
        let a = plan(7).orders([3, 1, 4], window, |shard| {
            asked.push(shard);
            shard * 10
        });
        let mut rng = fastrand::Rng::with_seed(7);
        let mut expected = vec![3, 1, 4];
        rng.shuffle(&mut expected);
        assert_eq!(asked, expected);
        assert_eq!(
            a.iter().map(|o| (o.shard, o.port)).collect::<Vec<_>>(),
            expected.iter().map(|&s| (s, s * 10)).collect::<Vec<_>>()
        );
        assert!(a.iter().all(|o| o.delay < window));
        for o in &a {
            assert_eq!(o.delay, spread(window, &mut rng));
            assert_eq!(o.seed, rng.u64(..));
        }
        assert_eq!(plan(7).orders([3, 1, 4], window, |s| s * 10), a);
        // No window: no delay, the seeds still drawn.
        let b = plan(7).orders([3], Duration::ZERO, |_| ());
        assert_eq!(b[0].delay, Duration::ZERO);
        // Every pool starts somewhere: over many seeds, at every shard.
        let firsts: std::collections::BTreeSet<_> = (0..64)
            .map(|seed| plan(seed).orders([0, 1, 2, 3], window, |_| ())[0].shard)
            .collect();
        assert_eq!(firsts.len(), 4);
        // And goes on anywhere: the pools that open one shard first do not
        // all open the same one next.
        let after_0: std::collections::BTreeSet<_> = (0..256)
            .map(|seed| plan(seed).orders([0, 1, 2, 3], window, |_| ()))
            .filter(|o| o[0].shard == 0)
            .map(|o| o[1].shard)
            .collect();
        assert_eq!(after_0.len(), 3);
    }

    #[test]
    fn a_failed_round_backs_off_at_least_the_pacers_pause() {
        let times = crate::connection::SetupTimes {
            options: Duration::from_millis(1),
            startup: Duration::from_millis(3),
        };
        let mut seen = Vec::new();
        for seed in 0..64 {
            let mut p = plan(seed);
            p.pacer()
                .on_opened(Duration::from_millis(10), times, std::time::Instant::now());
            // A pause of 1.5 s (factor 2 after the shed).
            p.pacer().on_failed(
                OpenFailure::Shed,
                Duration::from_millis(1000),
                std::time::Instant::now(),
            );
            let Next::Backoff(d) = p.after_round(Round::Failed, false) else {
                panic!("a failed round backs off");
            };
            assert!(
                d >= Duration::from_millis(750) && d < Duration::from_millis(2250),
                "{d:?}"
            );
            seen.push(d);
        }
        // Drawn, not the same for every pool: pools shed together do not
        // come back together.
        seen.sort();
        assert!(seen[63] - seen[0] > Duration::from_millis(1000), "{seen:?}");
    }

    #[test]
    fn backoff_grows_until_a_round_completes() {
        let mut p = plan(1);
        let delays: Vec<Next> = (0..3).map(|_| p.after_round(Round::Failed, true)).collect();
        assert_eq!(
            delays,
            vec![
                Next::Backoff(Duration::from_millis(100)),
                Next::Backoff(Duration::from_millis(200)),
                Next::Backoff(Duration::from_millis(400)),
            ]
        );
        assert_eq!(p.after_round(Round::Complete, false), Next::Idle);
        assert_eq!(
            p.after_round(Round::Failed, false),
            Next::Backoff(Duration::from_millis(100))
        );
    }

    #[test]
    fn only_the_round_after_an_outage_is_spread() {
        let mut p = plan(2);
        assert_eq!(p.fill_window(), Duration::ZERO);
        // A failed open of a non-empty pool is no outage.
        let _ = p.after_round(Round::Failed, false);
        assert_eq!(p.fill_window(), Duration::ZERO);
        let _ = p.after_round(Round::Failed, true);
        assert_eq!(p.fill_window(), Duration::from_secs(1));
        assert_eq!(p.fill_window(), Duration::ZERO);
    }

    #[test]
    fn an_up_hint_resets_and_spreads() {
        let mut p = plan(3);
        for _ in 0..4 {
            let _ = p.after_round(Round::Failed, true);
        }
        assert!(!p.wake_ends_backoff(false));
        assert!(p.wake_ends_backoff(true));
        assert_eq!(p.after_backoff(false, None), None);
        let pause = p
            .after_backoff(true, None)
            .expect("spread after an up hint");
        assert!(pause < Duration::from_secs(1));
        assert_eq!(
            p.after_round(Round::Failed, true),
            Next::Backoff(Duration::from_millis(100))
        );
        match p.after_round(Round::Unlucky, false) {
            Next::Pause(d) => assert!(d < UNLUCKY_PAUSE),
            other => panic!("expected a pause, got {other:?}"),
        }
    }
}
