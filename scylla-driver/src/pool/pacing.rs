//! How fast a pool opens connections to its node: paced by the handshake
//! times it observes, so that a storm of clients reconnecting at once stays
//! within what the node admits.
//!
//! A node admits handshakes a few at a time per shard (ScyllaDB: 8 in their
//! CPU stage) and sheds those that waited too long; every client of a node
//! that restarts reconnects at once. A client cannot see the node's queue, but
//! it sees how long each handshake's STARTUP took beyond a plain round trip
//! (the OPTIONS exchange before it,
//! [`SetupTimes::startup_excess`]):
//! the node's time on it, queueing included, whatever the network's round
//! trip. [`OpenPacer`] reasons as delay-based congestion control does (TCP
//! Vegas, Brakmo and Peterson 1995: act on the queueing delay, not on loss;
//! LEDBAT, RFC 6817: a target queueing delay):
//!
//! - while that time is short (under [`CALM_QUEUEING`], and under
//!   the quickest whole handshake seen), the node has headroom: the opens in
//!   flight grow by one each time as many opens as are allowed completed so
//!   (from one, up to the pool's `max_concurrent_opens`), with no pause;
//! - longer, the node queues them: one open at a time, each followed by a
//!   pause that a PI controller sets from the queue: it grows by a quarter
//!   of the time the open queued beyond [`PAUSE_TARGET`] (shrinks by a
//!   quarter of the time short of it), and by half of how much longer it
//!   queued than the pool's last open (by half of how much shorter when the
//!   queue drains). A pause proportional to the excess alone settles the
//!   queue where the clients' pauses add up to the node's turn (sessions x
//!   handshake CPU / CPU stage), so its length grows with the number of
//!   clients, which no client knows: at 6,000 sessions and 20 ms handshakes
//!   past the wait at which the node sheds. The integral term settles it at the target whatever their
//!   number (TCP Vegas keeps a few packets queued per flow instead, and its
//!   queue grows with the flows); the derivative term damps the swing of
//!   thousands of clients reacting to the same queue one round late (at
//!   its full gain it overshoots: each pool adds all of the queue's growth
//!   over its last round while the others, a round behind, add theirs);
//! - a shed handshake (or one that timed out) queued about as long as it
//!   took: a pause of that time beyond [`TARGET_QUEUEING`], times a factor
//!   that doubles with each shed (up to [`MAX_GAP_FACTOR`]; each open that
//!   queued no more than [`TARGET_QUEUEING`] halves it back), and the round
//!   fails; the pool's backoff is then at least a draw of half to one and a
//!   half times that pause ([`super::plan::RefillPlan`]: pools shed together
//!   measured the same queue and would come back together).
//!
//! Why not the quickest handshake seen as the base, as Vegas takes the least
//! RTT: a pool whose every handshake so far happened during a storm (all of
//! them, for clients that started together) has only queued samples, and
//! would take a long queue for none.
//!
//! After an outage the pool's first open waits a random moment within
//! [`SPREAD_HANDSHAKES`] times the session's quickest first connection (a
//! pool's first, opened while it held none: over TLS a full handshake, as
//! the first after a node's restart is; [`OpenPacer::restart_spread`]), or
//! within the pool's turn at the node in its last storm: a node whose
//! handshakes are cheap is back at once; the pauses above pace the rest.
//! The pause starts from [`RESTART_PAUSE_TENTHS`] tenths of the pool's
//! cadence in that storm (the mean time between all its opens' ends from its
//! first that queued) rather than from zero (it applies only once an open
//! queued): every client comes back within the same seconds, and a pause
//! that has to grow from zero first lets their second and third opens pile
//! onto the first ones. The cadence rather than the turn: over TLS the opens
//! after a node's first resume, cost a tenth of it and mostly do not queue,
//! and the pool opened them as often as the node served them.
//!
//! The constants were chosen with the `storm_sim` tool (6,000 and 600
//! sessions, 1 to 20 ms of handshake CPU; `docs/performance.md`): at 6,000
//! sessions with 20 ms handshakes (seeds 1 to 3), a restart pause of 8/10
//! of the cadence shed 23, 196 and 0 handshakes at the restart, 9/10 none,
//! 10/10 39, 0, 0 and covered up to 1.1 s later; 7/10 of the turn shed none
//! but covered the 10 ms restart in up to 1.41 times the node's limit (seeds
//! 4 to 6) and the TLS restart 0.34 s later; an integral gain of a half
//! instead of a quarter shed 30 to 92 handshakes at the 20 ms cold start; a
//! target of 400 ms shed 138 at the 20 ms restart (seed 1). Seeds 1 to 30
//! at 20 ms, with shards opened in a random order and the session window
//! cut once per window: the derivative term at its full gain shed in 8 cold
//! starts and 2 restarts, at half in 4 and none (at 0.35 and 0.65 of it:
//! 4 and 5 cold starts; the integral at 0.18 and 0.35: 6 and 4, and 1
//! restart; these with the once-per-window rule not yet applied to sheds,
//! which gave the same figures at half gain); coverage at 10 ms within 1.12
//! times the node's limit either way.

use std::time::{Duration, Instant};

use super::shed::OpenFailure;
use crate::connection::SetupTimes;

/// The pause after a shed handshake, in multiples of the time it waited
/// beyond [`TARGET_QUEUEING`], before sheds doubled it.
pub const GAP_FACTOR: u32 = 1;

/// The most that factor grows to: it doubles with each shed handshake, and
/// halves back (down to [`GAP_FACTOR`]) with each open that queued no more
/// than the target.
pub const MAX_GAP_FACTOR: u32 = 4;

/// The queueing delay the pacer tolerates before it spaces opens out (the
/// role of LEDBAT's target, RFC 6817 section 2.5, which is 100 ms there).
pub const TARGET_QUEUEING: Duration = Duration::from_millis(250);

/// An open that queued less than this (half of [`TARGET_QUEUEING`]) found
/// its node calm: the pacer's and the session's windows may grow, and it
/// does not start a storm.
pub const CALM_QUEUEING: Duration = Duration::from_millis(125);

/// The queueing delay at which the pauses hold steady: each open that
/// queued longer lengthens the pause, each that queued less shortens it
/// ([`OpenPacer`]). Half of the wait after which ScyllaDB sheds.
pub const PAUSE_TARGET: Duration = Duration::from_millis(500);

/// The pause after an outage, before any open measured the node's queue, in
/// tenths of the pool's cadence in its last storm (the mean time between
/// the ends of its opens, from its first that queued until it filled).
pub const RESTART_PAUSE_TENTHS: u32 = 9;

/// The longest pause between two opens.
pub const MAX_PAUSE: Duration = Duration::from_secs(30);

/// The first open after an outage waits a random moment within this many
/// times the quickest first connection (at most the pool's
/// `reconnect_spread`).
pub const SPREAD_HANDSHAKES: u32 = 4;

/// How long an open counts against its session's others
/// ([`FirstOpenFacts`], [`SessionWindow`]): one still in flight after this
/// (a silent node, a slow network) lets the next one start. ScyllaDB sheds
/// a handshake that waited for admission about this long, so in a storm an
/// open counts until it ends.
pub const OPEN_STALL: Duration = Duration::from_secs(1);

/// The most opens a session has in flight to all its nodes at once, however
/// calm the nodes are ([`SessionWindow`]).
pub const MAX_SESSION_OPENS: usize = 64;

/// What a session knows when one of its pools, holding no connection and
/// never having opened one, asks to open its first (`pool::session_opens`).
///
/// Every client of a cluster that starts at once opens a first connection to
/// every node at once: with 6,000 sessions, 6,000 handshakes queue at each
/// node in the same instant, and those beyond what it completes within its
/// admission wait are shed before any pacing has seen a queue. The session
/// starts its nodes as TCP's slow start sends (RFC 5681, section 3.1): one
/// first open in flight, one more for each node that answered, so that its
/// opens in flight double with each round of handshakes. A session's first
/// opens then reach its nodes spread over the time the nodes take to
/// answer, by the rate at which they answer, without knowing how many other
/// sessions start with it; at low load it costs a few handshake times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstOpenFacts {
    /// The session's first opens in flight, started less than
    /// [`OPEN_STALL`] ago.
    pub in_flight: usize,
    /// The session's pools that hold a connection.
    pub connected: usize,
}

impl FirstOpenFacts {
    /// Whether one more first open may start now: fewer are in flight than
    /// one plus the nodes that answered.
    pub fn admits(&self) -> bool {
        self.in_flight <= self.connected
    }
}

/// How many opens a session may have in flight to all its nodes at once
/// (`pool::session_opens`), adapted as TCP Reno adapts its congestion
/// window (RFC 5681, section 3.1; Jacobson 1988): one more for each open
/// that found a node calm (it queued under [`CALM_QUEUEING`]), half as many
/// (at least one) when one queued beyond [`TARGET_QUEUEING`] or was shed,
/// at most once per window of opens: after a cut, the next waits until as
/// many opens ended as the window held before it, as NewReno reduces its
/// window once per window of data however many segments of it were lost
/// (RFC 6582, section 3.2). Those opens were in flight when the queue was
/// seen and saw the same queue; a cut for each of them would leave the
/// session one open in flight for the seconds its nodes take to drain, and
/// its nodes idle meanwhile (at 6,000 sessions x 9 nodes x 7 shards and
/// 20 ms handshakes, `storm_sim` seeds 1 to 30: a cut per open shed 253
/// handshakes in 11 cold starts and 96 in 4 restarts, one per window 135 in
/// 8 and 50 in 2).
///
/// Each pool paces its own node ([`OpenPacer`]), but a pool learns only
/// from its own opens, one round of handshakes late: when every client of
/// a cluster starts at once, each of the 6,000 sessions opening one
/// connection per node puts 6,000 handshakes in every node's queue before
/// any pool has seen one complete, and those beyond what the node completes
/// within its admission wait are shed. With one window over all its nodes,
/// a session's opens in flight track what its nodes answered: a node that
/// queues them halves them, for every node. A session's first opens count
/// here too, and pass by [`FirstOpenFacts`] instead. Which of its waiting
/// opens the window lets through is [`pick_waiting`]'s choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionWindow {
    window: usize,
    /// Opens to end before the window may be cut again.
    hold: usize,
}

impl Default for SessionWindow {
    fn default() -> Self {
        SessionWindow { window: 1, hold: 0 }
    }
}

impl SessionWindow {
    /// Opens allowed in flight now.
    #[cfg(any(test, feature = "unstable-internals"))]
    pub fn window(&self) -> usize {
        self.window
    }

    /// Whether one more open may start while `in_flight` are (those
    /// started less than [`OPEN_STALL`] ago).
    pub fn admits(&self, in_flight: usize) -> bool {
        in_flight < self.window
    }

    /// An open of the session completed; `times`: its handshake's
    /// exchanges, whose STARTUP beyond a round trip bounds the time it
    /// queued at the node.
    pub fn on_opened(&mut self, times: SetupTimes) {
        let queued = times.startup_excess();
        self.hold = self.hold.saturating_sub(1);
        if queued < CALM_QUEUEING {
            self.window = (self.window + 1).min(MAX_SESSION_OPENS);
        } else if queued > TARGET_QUEUEING {
            self.cut();
        }
    }

    /// An open of the session failed: a shed (or timed-out) handshake
    /// queued beyond the target; other failures say nothing of a queue.
    pub fn on_failed(&mut self, failure: OpenFailure) {
        self.hold = self.hold.saturating_sub(1);
        if failure == OpenFailure::Shed {
            self.cut();
        }
    }

    /// Halves the window (at least one), unless it was cut within the last
    /// window of opens.
    fn cut(&mut self) {
        if self.hold == 0 {
            self.hold = self.window;
            self.window = (self.window / 2).max(1);
        }
    }
}

/// Which of `n` opens of a session waiting for room in its
/// [`SessionWindow`] starts next (`pool::session_opens`): of two drawn at
/// random, the one whose node drains its queue first, by what its pool last
/// saw ([`OpenPacer::drains_at`]; a pool that saw none first). `drains_at(i)`
/// is that moment for waiting open `i`; `None` when `n` is 0.
///
/// The window is the session's over all its nodes. Taken in turn, every
/// node gets one of the session's opens per turn of the window whatever
/// its queue, so a queue that grows by chance at one node is not pulled
/// back: the window, halved for it, idles the others while it drains, and
/// the session's opens move on to the next node in a wave (at 6,000
/// sessions x 9 nodes x 7 shards and 20 ms handshakes, `storm_sim` at a
/// cold start: handshakes waited 0.01 s on average at one node and 0.5 s at
/// another, and later 0.7 s at one, 1 s at one of its shards, which shed in
/// 4 of 30 seeds). Weighed by how soon each node drains,
/// a session's opens go where they wait least. Not to the node that drains
/// first of all: what a pool saw is a round of handshakes old, and every
/// session choosing the same node would flood it (Mitzenmacher, "How Useful
/// Is Old Information?", IEEE TPDS 2000); the better of two random choices
/// balances load nearly as well and is robust to stale information
/// (Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing",
/// IEEE TPDS 2001). A node not chosen for a while drains by then: the
/// moment its pool saw passes, and any later sighting of another node's
/// queue is weighed after it.
pub fn pick_waiting(
    rng: &mut fastrand::Rng,
    n: usize,
    drains_at: impl Fn(usize) -> Option<Instant>,
) -> Option<usize> {
    match n {
        0 => None,
        1 => Some(0),
        _ => {
            let a = rng.usize(..n);
            let mut b = rng.usize(..n - 1);
            if b >= a {
                b += 1;
            }
            Some(if drains_at(b) < drains_at(a) { b } else { a })
        }
    }
}

/// Longest an open waits at the TLS ticket gate ([`TicketGateFacts`]).
#[cfg(any(test, feature = "tls", feature = "unstable-internals"))]
pub const TICKET_WAIT: Duration = Duration::from_secs(1);

/// What the TLS ticket gate (`pool::tickets`, feature `tls`) knows when an
/// open asks to start: over TLS a node's opens are paced by the session
/// tickets held for it, so that they resume instead of paying a full
/// handshake. The same rule paces the opens of `storm_sim`'s TLS model.
#[cfg(any(test, feature = "tls", feature = "unstable-internals"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketGateFacts {
    /// The open claimed a ticket: more arrived since the pool's first
    /// connection to the node (its epoch) than opens have claimed and not
    /// finished.
    pub claimed: bool,
    /// Opens of this pool let through and not finished.
    pub in_flight: usize,
    /// An open finished (or a first connection was opened) since the epoch.
    pub finished_since_epoch: bool,
    /// A ticket arrived since the epoch.
    pub received_since_epoch: bool,
    /// The open has waited [`TICKET_WAIT`].
    pub waited_out: bool,
}

#[cfg(any(test, feature = "tls", feature = "unstable-internals"))]
impl TicketGateFacts {
    /// Whether the open may start now: it claimed a ticket; or no open of
    /// the pool is in flight (nothing would bring a ticket); or one
    /// finished and no ticket came (the node issues none: no pacing); or it
    /// waited long enough (a stuck handshake never stalls coverage).
    pub fn admits(&self) -> bool {
        self.claimed
            || self.in_flight == 0
            || (self.finished_since_epoch && !self.received_since_epoch)
            || self.waited_out
    }
}

/// A pool's pacing of its opens (see the [module](self)).
#[derive(Debug, Clone)]
pub struct OpenPacer {
    max: usize,
    window: usize,
    /// Calm opens since the window last grew.
    calm: usize,
    least: Option<Duration>,
    gap: Duration,
    factor: u32,
    /// The pause the queue's excess over [`PAUSE_TARGET`] integrated to.
    pause: Duration,
    /// How long the last open that queued did, since a calm one.
    last_queued: Option<Duration>,
    /// The storm the pool is in: since its first open that queued, until
    /// the pool fills.
    storm: Option<Storm>,
    /// The mean time between the ends of the opens that queued in the
    /// pool's last storm.
    turn: Option<Duration>,
    /// The mean time between the ends of all the opens of the pool's last
    /// storm (from its first that queued): how often the pool opened while
    /// the node worked through the storm.
    cadence: Option<Duration>,
    /// When the node's queue, as the pool's last open found it, drained.
    drains_at: Option<Instant>,
}

/// A pool's opens in a storm: when the first that queued ended, and since
/// then how many queued and how many ended at all, and the last end of each.
#[derive(Debug, Clone, Copy)]
struct Storm {
    first: Instant,
    queued: u32,
    last_queued: Instant,
    opens: u32,
    last: Instant,
}

impl Storm {
    fn new(at: Instant) -> Self {
        Storm {
            first: at,
            queued: 1,
            last_queued: at,
            opens: 1,
            last: at,
        }
    }

    /// The mean interval from the first end to `last` over `n` ends.
    fn mean(first: Instant, last: Instant, n: u32) -> Option<Duration> {
        (n >= 2).then(|| last.saturating_duration_since(first) / (n - 1))
    }
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
            factor: GAP_FACTOR,
            pause: Duration::ZERO,
            last_queued: None,
            storm: None,
            turn: None,
            cadence: None,
            drains_at: None,
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

    /// When the node's queue drains, as far as the pool knows: the end of
    /// its last open (that completed or was shed) plus the time that open
    /// queued; `None` before any. What a session weighs its waiting opens
    /// by ([`pick_waiting`]).
    pub fn drains_at(&self) -> Option<Instant> {
        self.drains_at
    }

    /// An open completed at `at`, after `took` (from dialling to the
    /// connection's readiness); `times`: how long its handshake's exchanges
    /// took, whose STARTUP beyond a round trip bounds the time it queued at
    /// the node.
    pub fn on_opened(&mut self, took: Duration, times: SetupTimes, at: Instant) {
        let queued = times.startup_excess();
        self.drains_at = Some(at + queued);
        let queued_here = queued >= CALM_QUEUEING;
        match &mut self.storm {
            Some(storm) => {
                storm.opens = storm.opens.saturating_add(1);
                storm.last = at;
                if queued_here {
                    storm.queued = storm.queued.saturating_add(1);
                    storm.last_queued = at;
                }
            }
            None if queued_here => self.storm = Some(Storm::new(at)),
            None => {}
        }
        let least = self.least.map_or(took, |l| l.min(took));
        self.least = Some(least);
        if queued < least && !queued_here {
            self.calm += 1;
            if self.calm >= self.window {
                self.calm = 0;
                self.window = (self.window + 1).min(self.max);
            }
            self.gap = Duration::ZERO;
            self.factor = (self.factor / 2).max(GAP_FACTOR);
            self.pause = Duration::ZERO;
            self.last_queued = None;
        } else {
            self.window = 1;
            self.calm = 0;
            if queued <= TARGET_QUEUEING {
                self.factor = (self.factor / 2).max(GAP_FACTOR);
            }
            self.pause = integrate(self.pause, queued, self.last_queued);
            self.last_queued = Some(queued);
            self.gap = self.pause;
        }
    }

    /// The pool holds what it wants (or all it can): its next opens belong
    /// to another storm, whose queue the time since this one's says nothing
    /// of.
    pub fn on_filled(&mut self) {
        if let Some(storm) = self.storm.take() {
            if let Some(turn) = Storm::mean(storm.first, storm.last_queued, storm.queued) {
                self.turn = Some(turn);
                self.cadence = Storm::mean(storm.first, storm.last, storm.opens);
            }
        }
    }

    /// An open failed at `at`, after `took`. A shed handshake (or one that
    /// timed out) queued about as long as it took: one open at a time, the
    /// pause's factor doubled, and a pause as after an open that queued that
    /// long. Other failures say nothing about the node's queue.
    pub fn on_failed(&mut self, failure: OpenFailure, took: Duration, at: Instant) {
        if failure == OpenFailure::Shed {
            self.drains_at = Some(at + took);
            self.window = 1;
            self.calm = 0;
            self.factor = (self.factor * 2).min(MAX_GAP_FACTOR);
            self.gap = took
                .saturating_sub(TARGET_QUEUEING)
                .saturating_mul(self.factor);
        }
    }

    /// The pool lost every connection: start again from one open in flight.
    pub fn on_outage(&mut self) {
        self.window = 1;
        self.calm = 0;
        self.last_queued = None;
        self.pause = self
            .cadence
            .map_or(Duration::ZERO, |t| t * RESTART_PAUSE_TENTHS / 10)
            .min(MAX_PAUSE);
    }

    /// The window over which the first open after an outage is spread: at
    /// most `bound`, less where first connections are quick: `quickest`, the
    /// session's quickest first connection of a pool (one opened while the
    /// pool held none) to any node, as the pools record it
    /// (`pool::open::note_first_setup`). First connections only: the first
    /// after a restart is one (over TLS a full handshake, where the others
    /// may resume and cost a tenth of it).
    ///
    /// Longer for a node that queued the pool's opens in its last storm, up
    /// to [`SPREAD_HANDSHAKES`] times `bound`: the mean time between the
    /// ends of those opens (the pool's turn at the node; one storm ends when
    /// the pool fills). While a node works through a storm, each of its
    /// clients' opens waits its turn among every other client's, so one
    /// client's opens end about once per the time the node takes to serve
    /// one handshake of each client. That is the time over which the
    /// clients' first opens after its restart keep its queue within what it
    /// served before, whatever their number, which no client knows.
    pub fn restart_spread(&self, bound: Duration, quickest: Option<Duration>) -> Duration {
        let by_handshakes = match quickest {
            Some(l) => bound.min(l.saturating_mul(SPREAD_HANDSHAKES)),
            None => bound,
        };
        match self.turn {
            Some(turn) => by_handshakes.max(turn.min(bound.saturating_mul(SPREAD_HANDSHAKES))),
            None => by_handshakes,
        }
    }
}

/// The pause after an open that queued `queued` (not calm), from the
/// pause before it: a quarter of the excess over [`PAUSE_TARGET`] (the
/// integral term: the pauses of every client together settle the node's
/// queue at the target whatever their number) plus half of how much longer
/// it queued than the pool's last open (the derivative term: a queue that
/// grows lengthens the pause before it is long, one that drains shortens
/// it).
fn integrate(pause: Duration, queued: Duration, last: Option<Duration>) -> Duration {
    let mut next = pause.as_secs_f64() + (queued.as_secs_f64() - PAUSE_TARGET.as_secs_f64()) / 4.0;
    if let Some(last) = last {
        next += (queued.as_secs_f64() - last.as_secs_f64()) / 2.0;
    }
    Duration::from_secs_f64(next.clamp(0.0, MAX_PAUSE.as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn t() -> Instant {
        Instant::now()
    }

    /// Exchanges whose STARTUP took `excess` beyond a 1 ms round trip.
    fn st(excess: Duration) -> SetupTimes {
        SetupTimes {
            options: MS,
            startup: MS + excess,
        }
    }

    /// A duration in whole milliseconds, rounded (the pauses are computed
    /// in floating point).
    fn ms(d: Duration) -> u64 {
        (d.as_secs_f64() * 1000.0).round() as u64
    }

    #[test]
    fn headroom_grows_the_window_and_queueing_shrinks_it() {
        let mut p = OpenPacer::new(4);
        assert_eq!((p.window(), p.gap()), (1, Duration::ZERO));
        p.on_opened(10 * MS, st(2 * MS), t());
        assert_eq!(p.window(), 2);
        p.on_opened(12 * MS, st(3 * MS), t());
        assert_eq!(p.window(), 2, "grows once a whole window completed calmly");
        p.on_opened(11 * MS, st(2 * MS), t());
        assert_eq!(p.window(), 3);
        for _ in 0..20 {
            p.on_opened(10 * MS, st(2 * MS), t());
        }
        assert_eq!(p.window(), 4, "never beyond max_concurrent_opens");
        // Queued 40 ms (more than the quickest handshake): one at a time, no
        // pause yet.
        p.on_opened(50 * MS, st(40 * MS), t());
        assert_eq!((p.window(), p.gap()), (1, Duration::ZERO));
        // Queued 900 ms: a quarter of the 400 ms beyond the target, plus
        // half of the 860 ms the queue grew since the last open.
        p.on_opened(910 * MS, st(900 * MS), t());
        assert_eq!((p.window(), ms(p.gap())), (1, 530));
        // As long again: the excess adds up.
        p.on_opened(910 * MS, st(900 * MS), t());
        assert_eq!(ms(p.gap()), 630);
        // Draining: 600 ms shorter (half of it), 50 ms under the target.
        p.on_opened(310 * MS, st(300 * MS), t());
        assert_eq!(ms(p.gap()), 280);
        assert_eq!(p.least(), Some(10 * MS));
        // Calm again: no pause.
        p.on_opened(10 * MS, st(2 * MS), t());
        assert_eq!((p.window(), p.gap()), (2, Duration::ZERO));
    }

    /// Every client pausing by the same law settles the node's queue at the
    /// target: a pause that grows while the queue is longer and shrinks while
    /// it is shorter, whatever the number of clients.
    #[test]
    fn the_pause_grows_until_the_queue_holds_at_the_target() {
        let mut p = OpenPacer::new(4);
        p.on_opened(710 * MS, st(700 * MS), t());
        assert_eq!(ms(p.gap()), 50);
        for expected in [100, 150, 200] {
            p.on_opened(710 * MS, st(700 * MS), t());
            assert_eq!(ms(p.gap()), expected);
        }
        p.on_opened(510 * MS, st(500 * MS), t());
        assert_eq!(
            ms(p.gap()),
            100,
            "the queue shrank by 200 ms: the pause by half of that"
        );
        p.on_opened(510 * MS, st(500 * MS), t());
        assert_eq!(ms(p.gap()), 100, "at the target: held");
        let mut q = OpenPacer::new(4);
        q.on_opened(5 * MS, st(MS), t());
        for _ in 0..4 {
            q.on_opened(510 * MS, st(500 * MS), t());
        }
        q.on_opened(310 * MS, st(300 * MS), t());
        assert_eq!(q.gap(), Duration::ZERO, "never below zero");
    }

    /// A pool whose handshakes all queued knows no quick one: what STARTUP
    /// took still tells the queue.
    #[test]
    fn a_queue_is_seen_without_a_quick_handshake() {
        let mut p = OpenPacer::new(4);
        p.on_opened(910 * MS, st(900 * MS), t());
        assert_eq!((p.window(), ms(p.gap())), (1, 100));
        // Quicker than the quickest whole handshake, but still queued (and
        // much less: the pause goes).
        p.on_opened(600 * MS, st(200 * MS), t());
        assert_eq!((p.window(), p.gap()), (1, Duration::ZERO));
        // A long round trip (a distant node) with a quick STARTUP is calm.
        let mut far = OpenPacer::new(4);
        far.on_opened(400 * MS, st(5 * MS), t());
        assert_eq!((far.window(), far.gap()), (2, Duration::ZERO));
    }

    #[test]
    fn sheds_lengthen_the_pauses_and_calm_opens_shorten_them_again() {
        let mut p = OpenPacer::new(4);
        p.on_opened(20 * MS, st(10 * MS), t());
        p.on_failed(OpenFailure::Shed, 1000 * MS, t());
        assert_eq!(p.gap(), 1500 * MS, "factor 2");
        p.on_failed(OpenFailure::Shed, 1000 * MS, t());
        p.on_failed(OpenFailure::Shed, 1000 * MS, t());
        assert_eq!(p.gap(), 3000 * MS, "factor 4 at most");
        p.on_opened(900 * MS, st(800 * MS), t());
        p.on_failed(OpenFailure::Shed, 1000 * MS, t());
        assert_eq!(p.gap(), 3000 * MS, "a long queue keeps it");
        p.on_opened(210 * MS, st(200 * MS), t());
        p.on_failed(OpenFailure::Shed, 1000 * MS, t());
        assert_eq!(p.gap(), 3000 * MS, "halved by a short queue, doubled again");
        p.on_opened(210 * MS, st(200 * MS), t());
        p.on_opened(10 * MS, st(2 * MS), t());
        p.on_failed(OpenFailure::Shed, 1000 * MS, t());
        assert_eq!(p.gap(), 1500 * MS, "halved twice: back to 1, then 2");
    }

    #[test]
    fn a_shed_pauses_like_a_long_queue_and_other_failures_do_not() {
        let mut p = OpenPacer::new(4);
        p.on_opened(10 * MS, st(2 * MS), t());
        p.on_failed(OpenFailure::Other, 1000 * MS, t());
        assert_eq!((p.window(), p.gap()), (2, Duration::ZERO));
        p.on_failed(OpenFailure::Shed, 1000 * MS, t());
        assert_eq!((p.window(), p.gap()), (1, 1500 * MS));
    }

    #[test]
    fn a_pool_knows_when_its_nodes_queue_drains() {
        let t0 = Instant::now();
        let mut p = OpenPacer::new(4);
        assert_eq!(p.drains_at(), None);
        p.on_opened(310 * MS, st(300 * MS), t0);
        assert_eq!(p.drains_at(), Some(t0 + 300 * MS));
        p.on_failed(OpenFailure::Other, 5 * MS, t0 + 1000 * MS);
        assert_eq!(p.drains_at(), Some(t0 + 300 * MS), "a refusal says nothing");
        p.on_failed(OpenFailure::Shed, 1000 * MS, t0 + 2000 * MS);
        assert_eq!(p.drains_at(), Some(t0 + 3000 * MS), "shed: queued as long");
    }

    /// The better of two random waiting opens: never the one whose node
    /// drains last, the one that drains first most often, but not always
    /// (every session sending its opens to the node that looked best a round
    /// ago would flood it).
    #[test]
    fn the_session_lets_through_the_better_of_two_waiting_opens() {
        let t0 = Instant::now();
        let mut rng = fastrand::Rng::with_seed(7);
        assert_eq!(pick_waiting(&mut rng, 0, |_| None), None);
        assert_eq!(pick_waiting(&mut rng, 1, |_| Some(t0)), Some(0));
        let two = [Some(t0 + 500 * MS), Some(t0 + 100 * MS)];
        for _ in 0..20 {
            assert_eq!(pick_waiting(&mut rng, 2, |i| two[i]), Some(1));
        }
        let unseen = [Some(t0), None];
        assert_eq!(
            pick_waiting(&mut rng, 2, |i| unseen[i]),
            Some(1),
            "a pool that saw no queue first"
        );
        // Nine waiting, the first in line draining last.
        let drains = |i: usize| Some(t0 + (9 - i as u32) * 100 * MS);
        let mut chosen = [0u32; 9];
        for _ in 0..9000 {
            chosen[pick_waiting(&mut rng, 9, drains).expect("nine wait")] += 1;
        }
        assert_eq!(chosen[0], 0, "the latest to drain never goes: {chosen:?}");
        assert!(
            chosen.windows(2).all(|w| w[0] < w[1]),
            "the sooner it drains, the more often: {chosen:?}"
        );
        assert!(chosen[8] < 3000, "the soonest, not always: {chosen:?}");
    }

    #[test]
    fn the_ticket_gate_admits_a_claim_a_lone_open_or_a_node_without_tickets() {
        let wait = TicketGateFacts {
            claimed: false,
            in_flight: 2,
            finished_since_epoch: true,
            received_since_epoch: true,
            waited_out: false,
        };
        assert!(!wait.admits(), "tickets come: wait for one");
        assert!(TicketGateFacts {
            claimed: true,
            ..wait
        }
        .admits());
        assert!(TicketGateFacts {
            in_flight: 0,
            ..wait
        }
        .admits());
        assert!(TicketGateFacts {
            waited_out: true,
            ..wait
        }
        .admits());
        assert!(
            TicketGateFacts {
                received_since_epoch: false,
                ..wait
            }
            .admits(),
            "an open ended and no ticket came: the node issues none"
        );
        assert!(
            !TicketGateFacts {
                received_since_epoch: false,
                finished_since_epoch: false,
                ..wait
            }
            .admits(),
            "nothing ended yet: tickets may still come"
        );
    }

    #[test]
    fn first_opens_grow_with_the_nodes_that_answered() {
        let f = |in_flight, connected| {
            FirstOpenFacts {
                in_flight,
                connected,
            }
            .admits()
        };
        // One at a time until a node answers.
        assert!(f(0, 0));
        assert!(!f(1, 0));
        // Then one more per node that answered: 2, 4, 8... per round.
        assert!(f(1, 1));
        assert!(!f(2, 1));
        assert!(f(3, 4));
        assert!(!f(5, 4));
        // A restart of one node among connected ones goes at once.
        assert!(f(0, 8));
    }

    #[test]
    fn the_session_window_grows_with_calm_opens_and_halves_on_a_queue() {
        let mut w = SessionWindow::default();
        assert_eq!(w.window(), 1);
        assert!(w.admits(0) && !w.admits(1));
        w.on_opened(st(2 * MS));
        w.on_opened(st(2 * MS));
        assert_eq!(w.window(), 3, "one more per calm open");
        w.on_opened(st(200 * MS));
        assert_eq!(w.window(), 3, "queued, within the target: held");
        w.on_failed(OpenFailure::Other);
        assert_eq!(w.window(), 3, "a refusal says nothing of a queue");
        for _ in 0..5 {
            w.on_opened(st(MS));
        }
        assert_eq!(w.window(), 8);
        w.on_opened(st(400 * MS));
        assert_eq!(w.window(), 4, "queued beyond the target: halved");
        // The 8 opens in flight at the cut saw the same queue: one cut.
        for _ in 0..4 {
            w.on_opened(st(400 * MS));
            w.on_failed(OpenFailure::Shed);
        }
        assert_eq!(w.window(), 2, "cut again after a window of opens");
        for _ in 0..20 {
            w.on_failed(OpenFailure::Shed);
        }
        assert_eq!(w.window(), 1, "never under one");
        for _ in 0..100 {
            w.on_opened(st(MS));
        }
        assert_eq!(w.window(), MAX_SESSION_OPENS);
        w.on_failed(OpenFailure::Shed);
        assert_eq!(w.window(), MAX_SESSION_OPENS / 2);
    }

    #[test]
    fn a_storm_spreads_the_restart_over_the_pools_turn_at_the_node() {
        let second = Duration::from_secs(1);
        let t0 = Instant::now();
        let mut p = OpenPacer::new(4);
        let quickest = Some(20 * MS);
        p.on_opened(20 * MS, st(2 * MS), t0);
        assert_eq!(p.restart_spread(second, quickest), 80 * MS);
        // Three opens that queued, ending 1 s, 2 s and 4.5 s in: the node
        // served every client once in 1.75 s on average. One more, calm,
        // 5.5 s in: the pool opened every 1.5 s.
        for at in [1000, 2000, 4500] {
            p.on_opened(600 * MS, st(500 * MS), t0 + at * MS);
        }
        p.on_opened(20 * MS, st(2 * MS), t0 + 5500 * MS);
        assert_eq!(
            p.restart_spread(second, quickest),
            80 * MS,
            "a storm counts once the pool filled"
        );
        p.on_filled();
        assert_eq!(p.restart_spread(second, quickest), 1750 * MS);
        // Bounded by four times the bound.
        assert_eq!(p.restart_spread(400 * MS, quickest), 1600 * MS);
        // After an outage, the first open that queued pauses 9/10 of the
        // pool's cadence in that storm (before any pause grew).
        p.on_outage();
        p.on_opened(510 * MS, st(PAUSE_TARGET), t0 + 9000 * MS);
        assert_eq!(ms(p.gap()), 1350);
        // A calm open says the node has room: no pause.
        p.on_opened(10 * MS, st(2 * MS), t0 + 9100 * MS);
        assert_eq!(p.gap(), Duration::ZERO);
        p.on_filled();
        // A storm of one queued open is no turn: the last one stays.
        p.on_opened(600 * MS, st(500 * MS), t0 + 60_000 * MS);
        p.on_filled();
        assert_eq!(p.restart_spread(second, quickest), 1750 * MS);
        p.on_opened(600 * MS, st(500 * MS), t0 + 70_000 * MS);
        p.on_opened(600 * MS, st(500 * MS), t0 + 70_300 * MS);
        p.on_filled();
        assert_eq!(p.restart_spread(second, quickest), 300 * MS);
    }

    #[test]
    fn the_restart_spread_follows_the_quickest_handshake() {
        let second = Duration::from_secs(1);
        let mut p = OpenPacer::new(4);
        assert_eq!(p.restart_spread(second, None), second);
        assert_eq!(p.restart_spread(second, Some(2 * MS)), 8 * MS);
        assert_eq!(p.restart_spread(second, Some(20 * MS)), 80 * MS);
        assert_eq!(p.restart_spread(50 * MS, Some(20 * MS)), 50 * MS);
        // Quicker opens of the other shards (resumed TLS handshakes) do not
        // shorten it: only first connections count.
        p.on_opened(2 * MS, st(MS), t());
        assert_eq!(p.restart_spread(second, Some(20 * MS)), 80 * MS);
    }
}
