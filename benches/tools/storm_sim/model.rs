//! The simulation: a discrete-event loop in virtual time (nanoseconds on an
//! event queue; nothing sleeps), the server's handshake admission, and the
//! two drivers' pools.
//!
//! Ours is driven by the driver's own decision code: `pool::plan::RefillPlan`
//! (backoff, spread, what to wait for after a round, and a round's opens with
//! their port, delay and seed drawn in the refill task's order: the same type
//! the pool's refill task uses), `pool::plan::RoundTally` (a round's
//! bookkeeping and outcome), `pool::fill` (what a round aims at, where a
//! landed connection goes, which surplus connection is retired),
//! `pool::coverage::Coverage` (when a background coverage attempt is due and
//! through which port), `pool::backoff::Backoff` with the pool's default
//! policy, `pool::shed::OpenFailure` (what a failed open means, counted in
//! `PhaseResult::shed_seen`), `pool::nat::ShardAwareHealth` (which port the
//! next open uses, what a landing or a refusal says) and
//! `pool::pacing::OpenPacer` (how many opens in flight, the pause after
//! each), `pool::pacing::FirstOpenFacts` and `pool::pacing::SessionWindow`
//! (which of a session's opens may start now, `pool::session_opens`; a
//! session starts its pools in a random order, as `cluster::state` spawns
//! them) and, over TLS,
//! `pool::pacing::TicketGateFacts` (the ticket gate's rule,
//! `pool::tickets`). What the refill task does between those calls (start
//! the opens the pacer allows, fed each open's time from dialling to its
//! end; apply the placement to what the pool holds) is re-enacted here, for
//! the model's network: loopback-like, optionally behind a NAT that
//! rewrites source ports ([`Nat`], as the test cluster's `NatMode`), and
//! optionally over TLS ([`Tls`]: a full or a resumed handshake's cost by
//! the ticket offered).
//!
//! The official driver (crate `scylla` 1.9.0) is modelled from its source:
//! `src/network/connection_pool.rs` (`PoolRefiller::run`, `start_filling`,
//! `handle_ready_connection`, `excess_connection_limit`,
//! `EXCESS_CONNECTION_BOUND_PER_SHARD_MULTIPLIER = 10`) and
//! `src/policies/reconnect.rs` (`ExponentialReconnectPolicy::new`: 50 ms
//! doubling to 10 s, each delay multiplied by a uniform draw in
//! 0.85..=1.15 and clamped to those bounds); see [`OfficialBackoff`].
//!
//! The server (one per node, `shards` shards each), as the test cluster's
//! `scylla-testbed/src/admission.rs` models ScyllaDB: a connection through the
//! shard-aware port lands on the shard its source port asks for, one through
//! the regular port on the shard with the fewest connections (ties: the
//! lowest, `scylla-testbed/src/shard.rs`); its STARTUP waits for one of
//! `cpu_concurrency` permits of that shard, at most `shed_after` (then the
//! node closes it: shed), and holds the permit for `cost`.

use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use std::net::SocketAddr;

use scylla_driver::connection::{
    ConnectionConfig, ConnectionError, OpenError, OpenStep, SetupStep, SetupTimes,
};
use scylla_driver::pool::backoff::{spread, Backoff, ExponentialBackoff};
use scylla_driver::pool::coverage::Coverage;
use scylla_driver::pool::fill::{placement, surplus_shard, Fill, Placement};
use scylla_driver::pool::nat::{FallbackConfig, FallbackReason, PortChoice, ShardAwareHealth};
use scylla_driver::pool::pacing::{
    pick_waiting, FirstOpenFacts, SessionWindow, TicketGateFacts, OPEN_STALL, TICKET_WAIT,
};
use scylla_driver::pool::plan::{DecisionLog, Next, RefillPlan, Round, RoundTally};
use scylla_driver::pool::shed::OpenFailure;
use scylla_driver::pool::PoolConfig;

/// Whose reconnect policy the pools follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// This driver's pool (its own decision code).
    Ours,
    /// The official driver's pool refiller, as its source defines it.
    Official,
}

impl Policy {
    /// The name used on the command line and in the outputs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Policy::Ours => "ours",
            Policy::Official => "official",
        }
    }
}

/// What to simulate.
#[derive(Debug, Clone)]
pub(crate) struct Params {
    /// Client sessions (each with one pool per node).
    pub sessions: usize,
    /// Nodes.
    pub nodes: usize,
    /// Shards per node.
    pub shards: usize,
    /// Whose pools.
    pub policy: Policy,
    /// Handshakes in their CPU stage at once, per shard (ScyllaDB: 8).
    pub cpu_concurrency: usize,
    /// CPU cost of one handshake (the permit is held this long).
    pub cost: Duration,
    /// Longest wait for a permit before the node sheds the handshake.
    pub shed_after: Duration,
    /// Client bound on the handshake (ours: `ConnectionConfig::handshake_timeout`;
    /// the official driver bounds only the TCP connect, which the model's
    /// node answers at once, so it has none here).
    pub handshake_timeout: Option<Duration>,
    /// Network time of TCP connect plus OPTIONS/SUPPORTED, and of a refusal.
    pub rtt: Duration,
    /// How long the restarted node is down.
    pub down: Duration,
    /// Over how long a pool notices the closes of its connections to the
    /// stopped node (one wake each).
    pub close_spread: Duration,
    /// From the node's start to the UP event every session hears.
    pub up_event_after: Duration,
    /// Bound of each phase (cold start, then the restart).
    pub horizon: Duration,
    /// Sampling interval of the timeline.
    pub sample: Duration,
    /// Seed of every random draw.
    pub seed: u64,
    /// Where our pools append their refill decisions, if anywhere (the
    /// agreement test compares them with a real pool's).
    pub decision_log: Option<DecisionLog>,
    /// A NAT between the clients and the nodes, rewriting source ports, if
    /// any.
    pub nat: Option<Nat>,
    /// TLS between the clients and the nodes, if any.
    pub tls: Option<Tls>,
}

/// TLS between the clients and the nodes: a handshake's CPU stage costs
/// [`Params::cost`] when full, `resumed_cost` when the client offered a
/// session ticket the node accepts. Each completed handshake brings the
/// client two tickets of the node (its current life, the shard it landed
/// on); a client offers its newest ticket of the node first, each at most
/// once (rustls, with the driver's `TicketStore`: one per session and node
/// here, since a session has one pool per node).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tls {
    /// The CPU stage of a resumed handshake.
    pub resumed_cost: Duration,
    /// Every shard of the issuing node accepts a ticket (ScyllaDB's
    /// default), else only the shard that issued it.
    pub node_wide_tickets: bool,
    /// Ours: a node's opens wait for tickets (`PoolConfig::tls_ticket_pacing`,
    /// the rule of `pool::pacing::TicketGateFacts`).
    pub ticket_pacing: bool,
}

/// A TLS session ticket the client holds: when it arrived, and which life
/// and shard of the node issued it.
#[derive(Debug, Clone, Copy)]
struct Ticket {
    at: u64,
    node_epoch: u32,
    shard: u16,
}

/// Tickets a client keeps per node (`TicketStore::TICKETS_PER_SERVER`).
const TICKETS_PER_SERVER: usize = 32;

/// How a NAT rewrites the source ports, as the test cluster's `NatMode`
/// does: where a connection through the shard-aware port lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nat {
    /// On a random shard.
    Random,
    /// On the shard its source port asks for, plus this many (wrapping):
    /// the port shifted by a constant.
    Offset(u16),
}

impl Params {
    /// The defaults of `storm_reconnect` at the given scale: admission of 8
    /// per shard, 1 ms per handshake, shed after 1 s; node down 1.2 s, UP
    /// event 50 ms after its start; our driver's default handshake timeout.
    pub(crate) fn new(sessions: usize, nodes: usize, shards: usize, policy: Policy) -> Params {
        Params {
            sessions,
            nodes,
            shards,
            policy,
            cpu_concurrency: 8,
            cost: Duration::from_millis(1),
            shed_after: Duration::from_secs(1),
            handshake_timeout: match policy {
                Policy::Ours => Some(ConnectionConfig::default().handshake_timeout),
                Policy::Official => None,
            },
            rtt: Duration::from_micros(200),
            down: Duration::from_millis(1200),
            close_spread: Duration::from_millis(2),
            up_event_after: Duration::from_millis(50),
            horizon: Duration::from_secs(600),
            sample: Duration::from_millis(100),
            seed: 1,
            decision_log: None,
            nat: None,
            tls: None,
        }
    }
}

/// One sampling interval of a phase (counts within it, peaks within it,
/// coverage at its end), at the node that matters: every node at cold
/// start, the restarted node after the restart.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sample {
    /// End of the interval, from the phase's start (ms).
    pub t_ms: u64,
    /// Connection attempts the clients started (refused ones included).
    pub attempts: u64,
    /// Connections the node(s) accepted (TCP).
    pub accepted: u64,
    /// Handshakes that completed.
    pub completed: u64,
    /// Handshakes the node(s) shed.
    pub shed: u64,
    /// Handshakes the clients gave up on (their timeout).
    pub timed_out: u64,
    /// Most handshakes in their CPU stage at once (summed over the node's
    /// shards; at cold start the most at any one node).
    pub peak_in_progress: u64,
    /// Most handshakes waiting for a permit at once (same sum).
    pub peak_waiting: u64,
    /// Most handshakes waiting at one shard.
    pub peak_waiting_shard: u64,
    /// Most handshakes in their CPU stage at one shard.
    pub peak_in_progress_shard: u64,
    /// Sessions with every shard covered (of the phase's nodes) at the end.
    pub covered_sessions: u64,
}

/// What one phase gave.
#[derive(Debug, Clone, Default)]
pub(crate) struct PhaseResult {
    /// Connections the phase needs: sessions x shards x its nodes.
    pub ideal: u64,
    /// Attempts started by the clients (refused ones included).
    pub attempts: u64,
    /// Attempts refused (the node was down).
    pub refused: u64,
    /// Connections accepted by the node(s).
    pub accepted: u64,
    /// Accepted when every session was covered (or at the horizon).
    pub accepted_at_coverage: u64,
    /// Handshakes shed.
    pub shed: u64,
    /// Handshakes the clients timed out.
    pub timed_out: u64,
    /// Failed opens our pools' rounds counted as shed (`RoundTally::shed`,
    /// from `OpenFailure::of`): the node's sheds and the client's timeouts.
    pub shed_seen: u64,
    /// Handshakes that completed but were closed by the client (excess).
    pub closed_excess: u64,
    /// Over TLS: completed handshakes that were full, and resumed.
    pub tls_full: u64,
    pub tls_resumed: u64,
    /// Peak handshakes in their CPU stage at one node.
    pub peak_in_progress: u64,
    /// Peak handshakes waiting at one node.
    pub peak_waiting: u64,
    /// Peak handshakes waiting at one shard.
    pub peak_waiting_shard: u64,
    /// Peak handshakes in their CPU stage at one shard.
    pub peak_in_progress_shard: u64,
    /// From the phase's start (restart: the node's start) until every
    /// session covered every shard; `None`: not within the horizon.
    pub covered_after: Option<Duration>,
    /// The timeline.
    pub samples: Vec<Sample>,
}

/// Both phases.
#[derive(Debug, Clone)]
pub(crate) struct SimResult {
    /// The parameters.
    pub params: Params,
    /// Every pool starting at once.
    pub cold: PhaseResult,
    /// Node 0 stopped, down for `down`, started again.
    pub restart: PhaseResult,
    /// Events processed (a measure of the work done).
    pub events: u64,
}

// ---------------------------------------------------------------------------

type AttemptId = u32;
type PoolId = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A pool's timer (ours: next round / backoff end; official: scheduled refill).
    PoolTimer(PoolId, u32),
    /// Ours: an open's spread delay passed; it queues for a permit.
    OpenReady(AttemptId),
    /// Ours: the pause between a pool's opens passed.
    Pump(PoolId),
    /// Ours, over TLS: an open waiting at the ticket gate reached its
    /// deadline.
    GateWake(PoolId),
    /// Ours: an open was in flight for `OPEN_STALL`.
    Stall(AttemptId),
    /// The TCP connect and OPTIONS are done: STARTUP reaches the shard.
    Arrive(AttemptId),
    /// The CPU stage of a handshake ends.
    CpuDone(AttemptId),
    /// A waiting handshake's wait bound passed.
    ShedCheck(AttemptId),
    /// The client's handshake timeout passed.
    ClientTimeout(AttemptId),
    /// Node 0 stops.
    NodeStop,
    /// Node 0 starts.
    NodeStart,
    /// Every session hears node 0 is up.
    UpEvent,
    /// A pool notices that its connection to a shard closed.
    Closed(PoolId, u16),
    /// Take a sample.
    Sample,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AState {
    Connecting,
    Waiting,
    InCpu,
    Done,
}

#[derive(Debug, Clone)]
struct Attempt {
    pool: PoolId,
    /// `Some` through the shard-aware port.
    wanted: Option<u16>,
    landed: u16,
    state: AState,
    /// The client stopped waiting (timeout): the server's work is wasted.
    abandoned: bool,
    /// The node's life this attempt reached (a restart invalidates it).
    epoch: u32,
    /// Ours: the first connection of an empty pool.
    first: bool,
    /// Ours: a regular-port retry after the shard-aware port failed.
    fallback_of: Option<FallbackReason>,
    /// When the client dialled.
    dialled: u64,
    /// Ours: its landing (or the port's failure) is evidence for the
    /// shard-aware port's health (not a background attempt behind a NAT).
    judged: bool,
    /// Ours, over TLS with ticket pacing: let through the ticket gate (and
    /// whether it claimed a ticket there); released when the open ends.
    gated: bool,
    claimed: bool,
    /// Ours: an open that counts against its session's others
    /// (`OpenPass`); released when it ends or stalls.
    pass: bool,
    /// Ours: when its pass stops counting if the open has not ended.
    stall_at: u64,
    /// Over TLS: the ticket the client offered.
    ticket: Option<Ticket>,
    /// The CPU stage of its handshake (full or resumed).
    cost: Duration,
}

struct Shard {
    conns: u64,
    in_cpu: u64,
    waiting: u64,
    queue: VecDeque<AttemptId>,
}

struct Node {
    up: bool,
    epoch: u32,
    shards: Vec<Shard>,
    in_cpu: u64,
    waiting: u64,
}

/// Phase-wide and interval counters.
#[derive(Default, Clone)]
struct Counters {
    attempts: u64,
    refused: u64,
    accepted: u64,
    completed: u64,
    shed: u64,
    timed_out: u64,
    shed_seen: u64,
    closed_excess: u64,
    tls_full: u64,
    tls_resumed: u64,
    peak_in_progress: u64,
    peak_waiting: u64,
    peak_waiting_shard: u64,
    peak_in_progress_shard: u64,
}

enum OursWait {
    /// In a round: opens outstanding.
    Round,
    /// Waiting for a wake (`Next::Idle`).
    Idle,
    /// Backing off until the timer (or a wake).
    Backoff,
    /// Sleeping until the timer; wakes are stored.
    Sleep,
}

struct OursPool {
    plan: RefillPlan,
    health: ShardAwareHealth,
    /// Ours: the wake permit of `Notify::notify_one`.
    wake: bool,
    up_hint: bool,
    wait: OursWait,
    first: bool,
    pending: u32,
    /// The round's bookkeeping, as the refill task keeps it.
    tally: RoundTally,
    queued: VecDeque<AttemptId>,
    active: usize,
    /// No open starts before this moment (the pacer's pause).
    next_start: u64,
    /// The ticket gate (`pool::tickets::TicketGate`): its epoch (tickets
    /// before it do not count), opens let through and not ended, whether
    /// one ended (or a first connection opened) since the epoch, and the
    /// opens waiting with their deadline.
    gate_epoch: u64,
    gate_in_flight: usize,
    gate_finished: bool,
    gate_waiting: VecDeque<(AttemptId, u64)>,
    /// How the current round fills the pool.
    fill: Fill,
    /// The background coverage attempts.
    coverage: Coverage,
}

/// The official driver's `HostExponentialReconnectPolicy` (scylla 1.9.0,
/// `src/policies/reconnect.rs`): `get_delay` = `current_delay` times a
/// uniform draw in `0.85..=1.15`, clamped to `[50 ms, 10 s]`;
/// `on_successful_fill` sets `current_delay` to 50 ms; `on_fill_error`
/// doubles it up to 10 s.
#[derive(Debug, Clone)]
pub(crate) struct OfficialBackoff {
    current: Duration,
}

impl OfficialBackoff {
    /// `min_fill_backoff` of `ExponentialReconnectPolicy::new`.
    pub(crate) const MIN: Duration = Duration::from_millis(50);
    /// `max_fill_backoff` of `ExponentialReconnectPolicy::new`.
    pub(crate) const MAX: Duration = Duration::from_secs(10);

    fn new() -> Self {
        OfficialBackoff { current: Self::MIN }
    }
    fn get_delay(&self, rng: &mut fastrand::Rng) -> Duration {
        let jitter = 0.85 + 0.30 * rng.f64();
        self.current.mul_f64(jitter).clamp(Self::MIN, Self::MAX)
    }
    fn on_successful_fill(&mut self) {
        self.current = Self::MIN;
    }
    fn on_fill_error(&mut self) {
        self.current = (self.current.saturating_mul(2)).min(Self::MAX);
    }
}

struct OfficialPool {
    backoff: OfficialBackoff,
    rng: fastrand::Rng,
    had_error: bool,
    scheduled: bool,
    /// Opens in flight (`ready_connections` not empty: `is_filling`).
    filling: u32,
    /// Excess connections, by the shard they sit on.
    excess: Vec<u16>,
}

enum PoolKind {
    Ours(Box<OursPool>),
    Official(OfficialPool),
}

struct Pool {
    node: usize,
    /// Connections per shard (0 or 1: one wanted per shard).
    held: Vec<u8>,
    sharding_known: bool,
    timer_gen: u32,
    kind: PoolKind,
    /// Over TLS: the session's tickets of this pool's node, oldest first.
    tickets: VecDeque<Ticket>,
    /// Opens that claimed one of them and have not ended.
    claims: usize,
    /// When the last ticket arrived.
    last_ticket: Option<u64>,
}

impl Pool {
    fn total(&self) -> u64 {
        self.held.iter().map(|&h| u64::from(h)).sum()
    }
    fn full(&self) -> bool {
        self.sharding_known && self.held.iter().all(|&h| h >= 1)
    }
    fn missing(&self) -> Vec<u16> {
        self.held
            .iter()
            .enumerate()
            .filter(|(_, &h)| h == 0)
            .map(|(i, _)| i as u16)
            .collect()
    }
}

struct Sim {
    p: Params,
    now: u64,
    seq: u64,
    queue: BinaryHeap<std::cmp::Reverse<(u64, u64, Ev)>>,
    nodes: Vec<Node>,
    pools: Vec<Pool>,
    attempts: Vec<Attempt>,
    base: Instant,
    rng: fastrand::Rng,
    /// Per session: its quickest first connection to any node (ours).
    quickest: Vec<Option<Duration>>,
    /// Nodes the current phase watches.
    watched: Vec<bool>,
    phase: Counters,
    interval: Counters,
    /// Pools of watched nodes not yet full.
    uncovered_pools: u64,
    /// Per session: how many of its watched pools are not full.
    session_missing: Vec<u32>,
    covered_at: Option<u64>,
    accepted_at_coverage: u64,
    phase_start: u64,
    samples: Vec<Sample>,
    events: u64,
    /// Ours, per session (`pool::session_opens`): its first opens let
    /// through and still counted, and the pools waiting to open theirs;
    /// all its opens still counted, its window, and the pools waiting for
    /// room in it.
    first_in_flight: Vec<usize>,
    first_waiting: Vec<VecDeque<PoolId>>,
    in_flight: Vec<usize>,
    window: Vec<SessionWindow>,
    window_waiting: Vec<VecDeque<PoolId>>,
    /// Draws the waiting pools a session's window chooses between (one
    /// generator for all sessions: `pool::session_opens` has one each).
    window_rng: fastrand::Rng,
}

const NS: u64 = 1;

/// `EXCESS_CONNECTION_BOUND_PER_SHARD_MULTIPLIER` of scylla 1.9.0's
/// `src/network/connection_pool.rs`.
const EXCESS_CONNECTION_BOUND_PER_SHARD_MULTIPLIER: usize = 10;

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Sim {
    fn new(p: Params) -> Sim {
        let pool_cfg = PoolConfig::default();
        let base = Instant::now();
        let mut rng = fastrand::Rng::with_seed(p.seed);
        let nodes = (0..p.nodes)
            .map(|_| Node {
                up: true,
                epoch: 0,
                shards: (0..p.shards)
                    .map(|_| Shard {
                        conns: 0,
                        in_cpu: 0,
                        waiting: 0,
                        queue: VecDeque::new(),
                    })
                    .collect(),
                in_cpu: 0,
                waiting: 0,
            })
            .collect();
        let mut pools = Vec::with_capacity(p.sessions * p.nodes);
        for _session in 0..p.sessions {
            for node in 0..p.nodes {
                let kind = match p.policy {
                    Policy::Ours => {
                        let schedule = Backoff::with_rng(
                            ExponentialBackoff::default(),
                            fastrand::Rng::with_seed(rng.u64(..)),
                        );
                        PoolKind::Ours(Box::new(OursPool {
                            plan: RefillPlan::new(
                                Box::new(schedule),
                                pool_cfg.reconnect_spread,
                                fastrand::Rng::with_seed(rng.u64(..)),
                            )
                            .with_max_concurrent_opens(pool_cfg.max_concurrent_opens)
                            .with_log(p.decision_log.clone()),
                            health: ShardAwareHealth::new(FallbackConfig::default()),
                            wake: false,
                            up_hint: false,
                            wait: OursWait::Sleep,
                            first: false,
                            pending: 0,
                            tally: RoundTally::default(),
                            queued: VecDeque::new(),
                            active: 0,
                            next_start: 0,
                            gate_epoch: 0,
                            gate_in_flight: 0,
                            gate_finished: false,
                            gate_waiting: VecDeque::new(),
                            fill: Fill::Strict,
                            coverage: Coverage::new(base, pool_cfg.coverage_interval),
                        }))
                    }
                    Policy::Official => PoolKind::Official(OfficialPool {
                        backoff: OfficialBackoff::new(),
                        rng: fastrand::Rng::with_seed(rng.u64(..)),
                        had_error: false,
                        scheduled: false,
                        filling: 0,
                        excess: Vec::new(),
                    }),
                };
                pools.push(Pool {
                    node,
                    held: vec![0; 1],
                    sharding_known: false,
                    timer_gen: 0,
                    kind,
                    tickets: VecDeque::new(),
                    claims: 0,
                    last_ticket: None,
                });
            }
        }
        Sim {
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            nodes,
            pools,
            attempts: Vec::new(),
            base,
            rng,
            watched: vec![true; p.nodes],
            phase: Counters::default(),
            interval: Counters::default(),
            uncovered_pools: 0,
            session_missing: vec![0; p.sessions],
            quickest: vec![None; p.sessions],
            covered_at: None,
            accepted_at_coverage: 0,
            phase_start: 0,
            samples: Vec::new(),
            events: 0,
            first_in_flight: vec![0; p.sessions],
            first_waiting: vec![VecDeque::new(); p.sessions],
            in_flight: vec![0; p.sessions],
            window: vec![SessionWindow::default(); p.sessions],
            window_waiting: vec![VecDeque::new(); p.sessions],
            window_rng: fastrand::Rng::with_seed(p.seed ^ 0x5e55_1075),
            p,
        }
    }

    fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.queue.push(std::cmp::Reverse((t, self.seq, ev)));
    }

    fn after(&mut self, d: Duration, ev: Ev) {
        self.at(self.now.saturating_add(ns(d)), ev);
    }

    fn instant(&self) -> Instant {
        self.base + Duration::from_nanos(self.now)
    }

    fn set_timer(&mut self, pool: PoolId, d: Duration) {
        let gen = {
            let p = &mut self.pools[pool as usize];
            p.timer_gen += 1;
            p.timer_gen
        };
        self.after(d, Ev::PoolTimer(pool, gen));
    }

    fn cancel_timer(&mut self, pool: PoolId) {
        self.pools[pool as usize].timer_gen += 1;
    }

    // ----- coverage bookkeeping ---------------------------------------

    fn session_of(&self, pool: PoolId) -> usize {
        pool as usize / self.p.nodes
    }

    /// Call around every change of a pool's holdings.
    fn coverage_change(&mut self, pool: PoolId, was_full: bool) {
        let (node, full) = {
            let p = &self.pools[pool as usize];
            (p.node, p.full())
        };
        if !self.watched[node] || was_full == full {
            return;
        }
        let s = self.session_of(pool);
        if full {
            self.uncovered_pools -= 1;
            self.session_missing[s] -= 1;
            if self.uncovered_pools == 0 && self.covered_at.is_none() {
                self.covered_at = Some(self.now);
                self.accepted_at_coverage = self.phase.accepted;
            }
        } else {
            self.uncovered_pools += 1;
            self.session_missing[s] += 1;
        }
    }

    // ----- counters -----------------------------------------------------

    fn bump(&mut self, f: impl Fn(&mut Counters)) {
        f(&mut self.phase);
        f(&mut self.interval);
    }

    fn peaks(&mut self, node: usize, shard: usize) {
        if !self.watched[node] {
            return;
        }
        let n = &self.nodes[node];
        let s = &n.shards[shard];
        let (ip, w, ws, ips) = (n.in_cpu, n.waiting, s.waiting, s.in_cpu);
        for c in [&mut self.phase, &mut self.interval] {
            c.peak_in_progress = c.peak_in_progress.max(ip);
            c.peak_waiting = c.peak_waiting.max(w);
            c.peak_waiting_shard = c.peak_waiting_shard.max(ws);
            c.peak_in_progress_shard = c.peak_in_progress_shard.max(ips);
        }
    }

    // ----- the client's side of an open ---------------------------------

    fn start_attempt(&mut self, pool: PoolId, wanted: Option<u16>, first: bool) -> AttemptId {
        let id = self.attempts.len() as AttemptId;
        self.attempts.push(Attempt {
            pool,
            wanted,
            landed: 0,
            state: AState::Connecting,
            abandoned: false,
            epoch: 0,
            first,
            fallback_of: None,
            dialled: 0,
            judged: wanted.is_some(),
            gated: false,
            claimed: false,
            pass: false,
            stall_at: 0,
            ticket: None,
            cost: self.p.cost,
        });
        id
    }

    /// The client dials now.
    fn dial(&mut self, a: AttemptId) {
        self.attempts[a as usize].dialled = self.now;
        let at = &mut self.attempts[a as usize];
        if at.pass && at.stall_at == 0 {
            // `until_stalled`: from the moment the open starts.
            at.stall_at = self.now + ns(OPEN_STALL);
            let stall_at = at.stall_at;
            self.at(stall_at, Ev::Stall(a));
        }
        if self.p.tls.is_some() {
            // rustls offers the newest ticket held for the node, once.
            let pool = self.attempts[a as usize].pool as usize;
            self.attempts[a as usize].ticket = self.pools[pool].tickets.pop_back();
        }
        let node = self.pools[self.attempts[a as usize].pool as usize].node;
        if self.watched[node] {
            self.bump(|c| c.attempts += 1);
        }
        self.after(self.p.rtt, Ev::Arrive(a));
    }

    fn arrive(&mut self, a: AttemptId) {
        let pool = self.attempts[a as usize].pool;
        let node = self.pools[pool as usize].node;
        if !self.nodes[node].up {
            // Refused: the node's port is closed.
            if self.watched[node] {
                self.bump(|c| c.refused += 1);
            }
            let err = ConnectionError::Open(refused(node));
            self.finish(a, Err(err));
            return;
        }
        if self.watched[node] {
            self.bump(|c| c.accepted += 1);
        }
        let shard = match self.attempts[a as usize].wanted {
            Some(s) => match self.p.nat {
                None => s as usize,
                Some(Nat::Random) => self.rng.usize(..self.p.shards),
                Some(Nat::Offset(k)) => (s as usize + k as usize) % self.p.shards,
            },
            None => least_loaded(&self.nodes[node]),
        };
        let epoch = self.nodes[node].epoch;
        let resumed = match (self.p.tls, self.attempts[a as usize].ticket) {
            (Some(tls), Some(t)) => {
                t.node_epoch == epoch && (tls.node_wide_tickets || usize::from(t.shard) == shard)
            }
            _ => false,
        };
        {
            let at = &mut self.attempts[a as usize];
            at.landed = shard as u16;
            at.epoch = epoch;
            if let (true, Some(tls)) = (resumed, self.p.tls) {
                at.cost = tls.resumed_cost;
            }
        }
        self.nodes[node].shards[shard].conns += 1;
        if let Some(t) = self.p.handshake_timeout {
            self.after(t, Ev::ClientTimeout(a));
        }
        let limit = self.p.cpu_concurrency.max(1) as u64;
        if self.nodes[node].shards[shard].in_cpu < limit {
            self.enter_cpu(a, node, shard);
        } else {
            self.attempts[a as usize].state = AState::Waiting;
            let n = &mut self.nodes[node];
            n.shards[shard].queue.push_back(a);
            n.shards[shard].waiting += 1;
            n.waiting += 1;
            self.after(self.p.shed_after, Ev::ShedCheck(a));
            self.peaks(node, shard);
        }
    }

    fn enter_cpu(&mut self, a: AttemptId, node: usize, shard: usize) {
        self.attempts[a as usize].state = AState::InCpu;
        let n = &mut self.nodes[node];
        n.shards[shard].in_cpu += 1;
        n.in_cpu += 1;
        let cost = self.attempts[a as usize].cost;
        self.after(cost, Ev::CpuDone(a));
        self.peaks(node, shard);
    }

    /// Admits the next waiting handshake of a shard, if a permit is free.
    fn admit_next(&mut self, node: usize, shard: usize) {
        let limit = self.p.cpu_concurrency.max(1) as u64;
        while self.nodes[node].shards[shard].in_cpu < limit {
            let Some(next) = self.nodes[node].shards[shard].queue.pop_front() else {
                return;
            };
            if self.attempts[next as usize].state != AState::Waiting {
                continue;
            }
            let n = &mut self.nodes[node];
            n.shards[shard].waiting -= 1;
            n.waiting -= 1;
            if self.attempts[next as usize].abandoned {
                // The client left: the node finds the socket closed.
                self.attempts[next as usize].state = AState::Done;
                self.nodes[node].shards[shard].conns -= 1;
                continue;
            }
            self.enter_cpu(next, node, shard);
        }
    }

    fn cpu_done(&mut self, a: AttemptId) {
        let (pool, shard, epoch, abandoned) = {
            let at = &self.attempts[a as usize];
            (at.pool, at.landed as usize, at.epoch, at.abandoned)
        };
        let node = self.pools[pool as usize].node;
        if self.attempts[a as usize].state != AState::InCpu || epoch != self.nodes[node].epoch {
            return;
        }
        let n = &mut self.nodes[node];
        n.shards[shard].in_cpu -= 1;
        n.in_cpu -= 1;
        self.attempts[a as usize].state = AState::Done;
        if abandoned {
            self.nodes[node].shards[shard].conns -= 1;
        } else {
            if self.watched[node] {
                self.bump(|c| c.completed += 1);
            }
            if self.p.tls.is_some() {
                let resumed = self.attempts[a as usize].cost != self.p.cost;
                if self.watched[node] {
                    if resumed {
                        self.bump(|c| c.tls_resumed += 1);
                    } else {
                        self.bump(|c| c.tls_full += 1);
                    }
                }
                // Two tickets of this life of the node, this shard.
                let now = self.now;
                let p = &mut self.pools[pool as usize];
                for _ in 0..2 {
                    if p.tickets.len() >= TICKETS_PER_SERVER {
                        p.tickets.pop_front();
                    }
                    p.tickets.push_back(Ticket {
                        at: now,
                        node_epoch: epoch,
                        shard: shard as u16,
                    });
                }
                p.last_ticket = Some(now);
            }
            self.finish(a, Ok(shard as u16));
        }
        self.admit_next(node, shard);
    }

    fn shed_check(&mut self, a: AttemptId) {
        let (pool, shard, epoch) = {
            let at = &self.attempts[a as usize];
            (at.pool, at.landed as usize, at.epoch)
        };
        let node = self.pools[pool as usize].node;
        if self.attempts[a as usize].state != AState::Waiting || epoch != self.nodes[node].epoch {
            return;
        }
        // Shed: the node closes the connection during STARTUP.
        self.attempts[a as usize].state = AState::Done;
        let n = &mut self.nodes[node];
        n.shards[shard].waiting -= 1;
        n.waiting -= 1;
        n.shards[shard].conns -= 1;
        if self.watched[node] {
            self.bump(|c| c.shed += 1);
        }
        if !self.attempts[a as usize].abandoned {
            self.finish(
                a,
                Err(ConnectionError::Closed {
                    step: SetupStep::Startup,
                }),
            );
        }
    }

    fn client_timeout(&mut self, a: AttemptId) {
        let st = self.attempts[a as usize].state;
        if !matches!(st, AState::Waiting | AState::InCpu) || self.attempts[a as usize].abandoned {
            return;
        }
        let pool = self.attempts[a as usize].pool;
        let node = self.pools[pool as usize].node;
        if self.attempts[a as usize].epoch != self.nodes[node].epoch {
            return;
        }
        self.attempts[a as usize].abandoned = true;
        if self.watched[node] {
            self.bump(|c| c.timed_out += 1);
        }
        let after = self.p.handshake_timeout.unwrap_or_default();
        self.finish(
            a,
            Err(ConnectionError::Timeout {
                step: SetupStep::Startup,
                after,
            }),
        );
    }

    /// An open ended, for the client: `Ok(landed shard)` or the error.
    fn finish(&mut self, a: AttemptId, r: Result<u16, ConnectionError>) {
        let pool = self.attempts[a as usize].pool;
        match self.p.policy {
            Policy::Ours => self.ours_opened(pool, a, r),
            Policy::Official => self.official_opened(pool, a, r),
        }
    }

    /// The client closes a connection it does not keep.
    fn close_conn(&mut self, node: usize, shard: u16, epoch: u32) {
        if self.nodes[node].epoch == epoch {
            self.nodes[node].shards[shard as usize].conns -= 1;
        }
        if self.watched[node] {
            self.bump(|c| c.closed_excess += 1);
        }
    }

    fn learn_sharding(&mut self, pool: PoolId) {
        let shards = self.p.shards;
        let p = &mut self.pools[pool as usize];
        if !p.sharding_known {
            p.sharding_known = true;
            p.held = vec![0; shards];
        }
    }

    // ----- ours ---------------------------------------------------------

    fn ours(&mut self, pool: PoolId) -> &mut OursPool {
        match &mut self.pools[pool as usize].kind {
            PoolKind::Ours(o) => o,
            PoolKind::Official(_) => unreachable!("an official pool in an ours run"),
        }
    }

    /// The refill loop's round start (`refill_loop`: the first connection of
    /// an empty pool, else every missing shard).
    fn ours_round(&mut self, pool: PoolId) {
        let total = self.pools[pool as usize].total();
        let missing = self.pools[pool as usize].missing();
        let now = self.instant();
        let o = self.ours(pool);
        o.wait = OursWait::Round;
        o.tally = RoundTally::default();
        if total == 0 {
            o.first = true;
            o.pending = 1;
            // `new_ticket_epoch`; the first connection is not paced by the
            // ticket gate, but by the session's other first opens.
            self.gate_new_epoch(pool);
            let s = self.session_of(pool);
            if self.first_admits(s) {
                self.first_open(pool);
            } else {
                self.first_waiting[s].push_back(pool);
            }
            return;
        }
        o.first = false;
        if missing.is_empty() {
            // `fill_missing` with nothing missing: trims the surplus.
            self.ours_trim(pool);
            self.ours_after_round(pool, Round::Complete, false);
            return;
        }
        let window = o.plan.fill_window();
        // `fill_missing`: the round's aim and its opens, by the pool's own
        // rules (`pool::fill`); the model's nodes always advertise their
        // shard-aware port, and each pool wants one connection per shard.
        let shards = self.p.shards;
        let o = self.ours(pool);
        let strict = o.health.fallback().is_none();
        let fill = Fill::choose(strict, total as usize, shards);
        o.fill = fill;
        let wanted = match fill {
            Fill::Strict | Fill::Total => fill.wanted(missing, total as usize, shards),
            Fill::Background => match o.coverage.attempt_due(now, &mut o.plan, shards) {
                Some(shard) => vec![shard],
                None => {
                    self.ours_after_round(pool, Round::Partial, false);
                    return;
                }
            },
        };
        let behind_nat = fill == Fill::Background
            && !o.coverage.via_regular
            && o.health.fallback() == Some(FallbackReason::ShardMismatch);
        o.pending = wanted.len() as u32;
        // The refill task's own draws, in its order (the source-port seed
        // is not needed: the model's shard-aware port lands where asked, or
        // where its NAT puts it).
        let health = &mut o.health;
        let orders = o.plan.orders(wanted, window, |shard| {
            if behind_nat {
                return Some((shard, false));
            }
            match health.choose(now) {
                PortChoice::ShardAware | PortChoice::Probe => Some((shard, true)),
                PortChoice::Regular(_) => None,
            }
        });
        for order in orders {
            let a = self.start_attempt(pool, order.port.map(|(s, _)| s), false);
            self.attempts[a as usize].judged = order.port.is_some_and(|(_, judged)| judged);
            self.after(order.delay, Ev::OpenReady(a));
        }
    }

    /// `retire_surplus`: the pool gives up a connection of the shard with the
    /// most beyond one (another than `not` if there is one). Whether it did.
    fn ours_retire(&mut self, pool: PoolId, not: Option<usize>) -> bool {
        let node = self.pools[pool as usize].node;
        let held: Vec<usize> = self.pools[pool as usize]
            .held
            .iter()
            .map(|&h| h as usize)
            .collect();
        let Some(shard) = surplus_shard(&held, 1, not) else {
            return false;
        };
        self.pools[pool as usize].held[shard] -= 1;
        let epoch = self.nodes[node].epoch;
        self.close_conn(node, shard as u16, epoch);
        true
    }

    /// `trim_surplus`: every shard is covered; what is beyond one per shard
    /// goes.
    fn ours_trim(&mut self, pool: PoolId) {
        while self.pools[pool as usize].total() > self.p.shards as u64 {
            if !self.ours_retire(pool, None) {
                return;
            }
        }
    }

    /// An open's spread delay passed: it takes one of the pool's
    /// `max_concurrent_opens` permits, or queues for one.
    fn ours_open_ready(&mut self, a: AttemptId) {
        let pool = self.attempts[a as usize].pool;
        self.ours(pool).queued.push_back(a);
        self.ours_pump(pool);
    }

    /// Starts the queued opens the pacer allows now; if it holds one back
    /// for its pause, comes back when the pause ends.
    fn ours_pump(&mut self, pool: PoolId) {
        let now = self.now;
        loop {
            let o = self.ours(pool);
            if o.queued.is_empty() || o.active >= o.plan.pacer().window() {
                return;
            }
            if o.next_start > now {
                let at = o.next_start;
                self.at(at, Ev::Pump(pool));
                return;
            }
            // `SessionOpens::enter`: within the session's window.
            let s = self.session_of(pool);
            if !self.window[s].admits(self.in_flight[s]) {
                if !self.window_waiting[s].contains(&pool) {
                    self.window_waiting[s].push_back(pool);
                }
                return;
            }
            let o = self.ours(pool);
            let Some(a) = o.queued.pop_front() else {
                return;
            };
            o.active += 1;
            self.in_flight[s] += 1;
            self.attempts[a as usize].pass = true;
            if self.p.tls.is_some_and(|t| t.ticket_pacing) {
                self.gate_enter(pool, a);
            } else {
                self.dial(a);
            }
        }
    }

    /// An open asks the ticket gate to start (`TicketGate::enter`): it
    /// dials now, or waits for a ticket, an open's end or the gate's
    /// deadline.
    fn gate_enter(&mut self, pool: PoolId, a: AttemptId) {
        if !self.gate_try(pool, a, false) {
            let deadline = self.now + ns(TICKET_WAIT);
            self.ours(pool).gate_waiting.push_back((a, deadline));
            self.at(deadline, Ev::GateWake(pool));
        }
    }

    /// The gate's rule for one open (`TicketGateFacts::admits`); lets it
    /// through (and dials) if it admits it.
    fn gate_try(&mut self, pool: PoolId, a: AttemptId, waited_out: bool) -> bool {
        let (epoch, in_flight, finished) = {
            let o = self.ours(pool);
            (o.gate_epoch, o.gate_in_flight, o.gate_finished)
        };
        let p = &mut self.pools[pool as usize];
        // `TicketStore::try_claim`: more tickets held since the epoch than
        // claims.
        let held = p.tickets.iter().rev().take_while(|t| t.at >= epoch).count();
        let claimed = held > p.claims;
        if claimed {
            p.claims += 1;
        }
        let facts = TicketGateFacts {
            claimed,
            in_flight,
            finished_since_epoch: finished,
            received_since_epoch: p.last_ticket.is_some_and(|t| t >= epoch),
            waited_out,
        };
        if !facts.admits() {
            return false;
        }
        self.ours(pool).gate_in_flight += 1;
        let at = &mut self.attempts[a as usize];
        at.gated = true;
        at.claimed = claimed;
        self.dial(a);
        true
    }

    /// Tickets arrived, a claim or an open ended, or a deadline passed: the
    /// waiting opens look again.
    fn gate_wake(&mut self, pool: PoolId) {
        let waiting = std::mem::take(&mut self.ours(pool).gate_waiting);
        let now = self.now;
        let mut left = VecDeque::new();
        for (a, deadline) in waiting {
            if !self.gate_try(pool, a, now >= deadline) {
                left.push_back((a, deadline));
            }
        }
        self.ours(pool).gate_waiting = left;
    }

    /// An open let through the gate ended (`Pass` dropped).
    fn gate_leave(&mut self, pool: PoolId, a: AttemptId) {
        let at = &mut self.attempts[a as usize];
        if !std::mem::take(&mut at.gated) {
            return;
        }
        if std::mem::take(&mut at.claimed) {
            let p = &mut self.pools[pool as usize];
            p.claims = p.claims.saturating_sub(1);
        }
        let o = self.ours(pool);
        o.gate_in_flight = o.gate_in_flight.saturating_sub(1);
        o.gate_finished = true;
        self.gate_wake(pool);
    }

    /// `new_ticket_epoch`: tickets from now on count.
    fn gate_new_epoch(&mut self, pool: PoolId) {
        let now = self.now;
        let o = self.ours(pool);
        o.gate_epoch = now;
        o.gate_finished = false;
    }

    fn ours_opened(&mut self, pool: PoolId, a: AttemptId, r: Result<u16, ConnectionError>) {
        let (first, wanted, fallback_of, epoch, judged) = {
            let at = &self.attempts[a as usize];
            (at.first, at.wanted, at.fallback_of, at.epoch, at.judged)
        };
        let node = self.pools[pool as usize].node;
        let now = self.instant();
        // The shard-aware port refused (the node is down): the refill task
        // tries the regular port at once, within the same permit, unless the
        // pool lost its connections moments ago (`open_for_shard`: then the
        // open fails).
        if let (Some(_), Err(ConnectionError::Open(_))) = (wanted, &r) {
            if !(judged && self.ours(pool).health.in_restart_grace(now)) {
                let b = self.start_attempt(pool, None, false);
                if judged {
                    self.attempts[b as usize].fallback_of = Some(FallbackReason::Refused);
                }
                // Within the same pass of the ticket gate.
                let (gated, claimed) = {
                    let at = &mut self.attempts[a as usize];
                    (
                        std::mem::take(&mut at.gated),
                        std::mem::take(&mut at.claimed),
                    )
                };
                self.attempts[b as usize].gated = gated;
                self.attempts[b as usize].claimed = claimed;
                // The same open, within the same session pass.
                let (pass, stall_at) = {
                    let at = &mut self.attempts[a as usize];
                    (std::mem::take(&mut at.pass), at.stall_at)
                };
                if pass {
                    self.attempts[b as usize].pass = true;
                    self.attempts[b as usize].stall_at = stall_at;
                    self.at(stall_at.max(self.now), Ev::Stall(b));
                }
                self.dial(b);
                return;
            }
        }
        self.gate_leave(pool, a);
        if let (Some(reason), Ok(_)) = (fallback_of, &r) {
            // The regular port worked where the shard-aware one did not.
            let _ = self.ours(pool).health.on_failure(reason, now);
        }
        let took = Duration::from_nanos(self.now - self.attempts[a as usize].dialled);
        // What a failed open means, as the refill task classifies it: once,
        // for the pacer and for the round.
        let r = r.map_err(|e| OpenFailure::of(&e));
        // The model's STARTUP has no network time (the connect and OPTIONS
        // take `rtt`): all of it is the node's (queue and CPU stage).
        let times = SetupTimes {
            options: Duration::ZERO,
            startup: took.saturating_sub(self.p.rtt),
        };
        // `OpenPass::opened` / `failed`: the session's window learns of the
        // open's end; its pass stops counting.
        let s = self.session_of(pool);
        match r {
            Ok(_) => self.window[s].on_opened(times),
            Err(failure) => self.window[s].on_failed(failure),
        }
        self.release_pass(a);
        match r {
            Ok(_) => {
                if first {
                    // `note_first_setup`: the session's quickest first
                    // connection.
                    self.quickest[s] = Some(self.quickest[s].map_or(took, |q| q.min(took)));
                }
                self.ours(pool).plan.pacer().on_opened(took, times, now)
            }
            Err(failure) => self.ours(pool).plan.pacer().on_failed(failure, took, now),
        }
        // The refill task's next opens wait the pacer's pause after this
        // one, a first connection or not.
        let now_ns = self.now;
        let o = self.ours(pool);
        o.next_start = now_ns + ns(o.plan.pacer().gap());
        if first {
            let was_full = self.pools[pool as usize].full();
            let mut tally = RoundTally::default();
            let complete = match r {
                Ok(landed) => {
                    // `first_opened`: the gate lets opens through when no
                    // ticket comes.
                    self.ours(pool).gate_finished = true;
                    self.learn_sharding(pool);
                    self.pools[pool as usize].held[landed as usize] += 1;
                    tally.kept(true);
                    self.pools[pool as usize].missing().is_empty()
                }
                Err(failure) => {
                    tally.failed(failure);
                    false
                }
            };
            self.shed_seen(pool, tally);
            let round = tally.round(complete, false);
            self.coverage_change(pool, was_full);
            self.ours(pool).pending = 0;
            self.ours_after_round(pool, round, true);
            self.first_wake(s);
            return;
        }
        match r {
            Ok(landed) => {
                if let (Some(w), true) = (wanted, judged) {
                    let _ = self.ours(pool).health.on_landed(w, landed, now);
                }
                // `place`, by the pool's own rule.
                let was_full = self.pools[pool as usize].full();
                let fill = self.ours(pool).fill;
                let shards = self.p.shards;
                let held: Vec<usize> = self.pools[pool as usize]
                    .held
                    .iter()
                    .map(|&h| h as usize)
                    .collect();
                let decision = placement(
                    &held,
                    landed as usize,
                    fill.bounds(1, shards, shards),
                    fill == Fill::Background,
                );
                match decision {
                    Placement::Closed => self.close_conn(node, landed, epoch),
                    Placement::Kept { covers, retire } => {
                        self.pools[pool as usize].held[landed as usize] += 1;
                        self.ours(pool).tally.kept(covers);
                        if retire {
                            self.ours_retire(pool, None);
                        }
                    }
                    Placement::Rotated => {
                        self.pools[pool as usize].held[landed as usize] += 1;
                        self.ours_retire(pool, Some(landed as usize));
                    }
                }
                self.coverage_change(pool, was_full);
            }
            Err(failure) => {
                self.ours(pool).tally.failed(failure);
            }
        }
        let o = self.ours(pool);
        o.active -= 1;
        o.pending -= 1;
        if o.pending > 0 {
            self.ours_pump(pool);
        }
        if self.ours(pool).pending == 0 {
            self.ours_round_end(pool);
        }
    }

    /// `FirstOpens::enter`'s look: whether the session's rule admits one
    /// more first open.
    fn first_admits(&self, s: usize) -> bool {
        let nodes = self.p.nodes;
        let connected = self.pools[s * nodes..(s + 1) * nodes]
            .iter()
            .filter(|p| p.total() > 0)
            .count();
        FirstOpenFacts {
            in_flight: self.first_in_flight[s],
            connected,
        }
        .admits()
    }

    /// A pool's first open let through: it counts until it ends or stalls.
    fn first_open(&mut self, pool: PoolId) {
        let s = self.session_of(pool);
        self.first_in_flight[s] += 1;
        self.in_flight[s] += 1;
        let a = self.start_attempt(pool, None, true);
        self.attempts[a as usize].pass = true;
        self.dial(a);
    }

    /// The session's counts changed: its waiting first opens look again.
    fn first_wake(&mut self, s: usize) {
        while !self.first_waiting[s].is_empty() && self.first_admits(s) {
            if let Some(pool) = self.first_waiting[s].pop_front() {
                self.first_open(pool);
            }
        }
    }

    /// An open's pass stops counting (it stalled or ended): the session's
    /// waiting opens look again.
    fn release_pass(&mut self, a: AttemptId) {
        if std::mem::take(&mut self.attempts[a as usize].pass) {
            let s = self.session_of(self.attempts[a as usize].pool);
            self.in_flight[s] -= 1;
            if self.attempts[a as usize].first {
                self.first_in_flight[s] -= 1;
            }
            self.first_wake(s);
            self.window_wake(s);
        }
    }

    /// Pools waiting for room in the session's window start their opens
    /// while it has some.
    fn window_wake(&mut self, s: usize) {
        while self.window[s].admits(self.in_flight[s]) {
            // `SessionOpens::let_through`: the better of two by how soon
            // their nodes drain.
            let waiting: Vec<PoolId> = self.window_waiting[s].iter().copied().collect();
            let drains_at: Vec<_> = waiting
                .iter()
                .map(|&p| self.ours(p).plan.pacer().drains_at())
                .collect();
            let pick = pick_waiting(&mut self.window_rng, waiting.len(), |i| drains_at[i]);
            let Some(pool) = pick.and_then(|i| self.window_waiting[s].remove(i)) else {
                return;
            };
            self.ours_pump(pool);
        }
    }

    fn ours_round_end(&mut self, pool: PoolId) {
        let now = self.instant();
        let shards = self.p.shards;
        let o = self.ours(pool);
        let (fill, tally) = (o.fill, o.tally);
        let nat = o.health.fallback() == Some(FallbackReason::ShardMismatch);
        o.coverage
            .after_round(now, fill, tally.covered_new(), nat, &mut o.plan, shards);
        let complete = self.pools[pool as usize].missing().is_empty();
        if complete {
            self.ours_trim(pool);
        }
        let total = self.pools[pool as usize].total() as usize;
        let round = tally.round(complete, fill.partial(total, self.p.shards));
        self.shed_seen(pool, tally);
        self.ours_after_round(pool, round, false);
    }

    /// Counts the sheds a finished round saw, for a watched node.
    fn shed_seen(&mut self, pool: PoolId, tally: RoundTally) {
        if self.watched[self.pools[pool as usize].node] {
            self.bump(|c| c.shed_seen += u64::from(tally.shed()));
        }
    }

    fn ours_after_round(&mut self, pool: PoolId, round: Round, first: bool) {
        let now = self.instant();
        let o = self.ours(pool);
        match o.plan.after_round(round, first) {
            Next::Now => {
                o.wait = OursWait::Sleep;
                self.set_timer(pool, Duration::ZERO);
            }
            Next::Pause(d) => {
                o.wait = OursWait::Sleep;
                self.set_timer(pool, d);
            }
            Next::Idle if round == Round::Partial => {
                // Until the next background attempt is due, or a wake.
                o.up_hint = false;
                let due = o.coverage.next.saturating_duration_since(now);
                if std::mem::take(&mut o.wake) {
                    o.wait = OursWait::Sleep;
                    self.set_timer(pool, Duration::ZERO);
                } else {
                    o.wait = OursWait::Idle;
                    self.set_timer(pool, due);
                }
            }
            Next::Idle => {
                o.up_hint = false;
                if std::mem::take(&mut o.wake) {
                    o.wait = OursWait::Sleep;
                    self.set_timer(pool, Duration::ZERO);
                } else {
                    o.wait = OursWait::Idle;
                    self.cancel_timer(pool);
                }
            }
            Next::Backoff(d) => {
                o.wait = OursWait::Backoff;
                // A stored wake is taken at once; it ends the wait only if
                // the plan says so.
                if std::mem::take(&mut o.wake) && o.plan.wake_ends_backoff(o.up_hint) {
                    self.set_timer(pool, Duration::ZERO);
                } else {
                    self.set_timer(pool, d);
                }
            }
        }
    }

    fn ours_timer(&mut self, pool: PoolId) {
        let o = self.ours(pool);
        match o.wait {
            OursWait::Backoff => {
                let up = std::mem::take(&mut o.up_hint);
                let s = pool as usize / self.p.nodes;
                let quickest = self.quickest[s];
                let o = self.ours(pool);
                let pause = o.plan.after_backoff(up, quickest);
                let o = self.ours(pool);
                if let Some(pause) = pause {
                    o.wait = OursWait::Sleep;
                    self.set_timer(pool, pause);
                } else {
                    self.ours_round(pool);
                }
            }
            OursWait::Sleep | OursWait::Idle => self.ours_round(pool),
            OursWait::Round => {}
        }
    }

    /// `Notify::notify_one` on the pool's wake.
    fn ours_wake(&mut self, pool: PoolId) {
        let o = self.ours(pool);
        match o.wait {
            OursWait::Idle => {
                // A waiter is there: it runs now.
                self.set_timer(pool, Duration::ZERO);
            }
            OursWait::Backoff => {
                // The backoff's waiter takes the wake; the plan decides
                // whether it ends the wait.
                if o.plan.wake_ends_backoff(o.up_hint) {
                    self.set_timer(pool, Duration::ZERO);
                }
            }
            OursWait::Round | OursWait::Sleep => o.wake = true,
        }
    }

    // ----- official -----------------------------------------------------

    fn official(&mut self, pool: PoolId) -> &mut OfficialPool {
        match &mut self.pools[pool as usize].kind {
            PoolKind::Official(o) => o,
            PoolKind::Ours(_) => unreachable!("an ours pool in an official run"),
        }
    }

    /// The tail of `PoolRefiller::run`'s loop: schedule a refill if none is
    /// and the pool needs filling (not filling, not full).
    fn official_schedule(&mut self, pool: PoolId) {
        let full = self.pools[pool as usize].full();
        let o = self.official(pool);
        let need = o.filling == 0 && !full;
        let mut delay = None;
        if !o.scheduled && need {
            if o.had_error {
                o.backoff.on_fill_error();
            } else {
                o.backoff.on_successful_fill();
            }
            o.scheduled = true;
            delay = Some(o.backoff.get_delay(&mut o.rng));
        }
        if let Some(d) = delay {
            self.set_timer(pool, d);
        }
    }

    /// `start_filling`.
    fn official_refill(&mut self, pool: PoolId) {
        let total = self.pools[pool as usize].total();
        let missing = self.pools[pool as usize].missing();
        let known = self.pools[pool as usize].sharding_known;
        let o = self.official(pool);
        o.scheduled = false;
        o.had_error = false;
        if total == 0 {
            o.filling += 1;
            let a = self.start_attempt(pool, None, true);
            self.dial(a);
            return;
        }
        o.filling += missing.len() as u32;
        for shard in missing {
            // `can_use_shard_aware_port`: the sharder and the port are known.
            let wanted = if known { Some(shard) } else { None };
            let a = self.start_attempt(pool, wanted, false);
            self.dial(a);
        }
        self.official_schedule(pool);
    }

    /// `handle_ready_connection`, then the loop's scheduling.
    fn official_opened(&mut self, pool: PoolId, a: AttemptId, r: Result<u16, ConnectionError>) {
        let (wanted, epoch) = {
            let at = &self.attempts[a as usize];
            (at.wanted, at.epoch)
        };
        let node = self.pools[pool as usize].node;
        self.official(pool).filling -= 1;
        match r {
            Err(_) if wanted.is_some() => {
                // Shard-aware port failed: the regular port, at once, and
                // no error noted.
                self.official(pool).filling += 1;
                let b = self.start_attempt(pool, None, false);
                self.dial(b);
            }
            Err(_) => self.official(pool).had_error = true,
            Ok(landed) => {
                self.learn_sharding(pool);
                let was_full = self.pools[pool as usize].full();
                if self.pools[pool as usize].held[landed as usize] == 0 {
                    self.pools[pool as usize].held[landed as usize] = 1;
                    self.coverage_change(pool, was_full);
                } else if wanted.is_some() {
                    // Missed its shard: dropped, and the regular port tried.
                    self.close_conn(node, landed, epoch);
                    self.official(pool).filling += 1;
                    let b = self.start_attempt(pool, None, false);
                    self.dial(b);
                } else {
                    // Kept as an excess connection, up to 10 per shard.
                    let limit = EXCESS_CONNECTION_BOUND_PER_SHARD_MULTIPLIER * self.p.shards;
                    let o = self.official(pool);
                    o.excess.push(landed);
                    if o.excess.len() > limit {
                        for shard in std::mem::take(&mut o.excess) {
                            self.close_conn(node, shard, epoch);
                        }
                    }
                }
                if self.pools[pool as usize].full() {
                    for shard in std::mem::take(&mut self.official(pool).excess) {
                        self.close_conn(node, shard, epoch);
                    }
                }
            }
        }
        self.official_schedule(pool);
    }

    // ----- events -------------------------------------------------------

    fn node_stop(&mut self, node: usize) {
        let epoch = self.nodes[node].epoch;
        let in_flight: Vec<AttemptId> = (0..self.attempts.len() as AttemptId)
            .filter(|&a| {
                let at = &self.attempts[a as usize];
                matches!(at.state, AState::Waiting | AState::InCpu)
                    && at.epoch == epoch
                    && self.pools[at.pool as usize].node == node
            })
            .collect();
        let n = &mut self.nodes[node];
        n.up = false;
        n.epoch += 1;
        for s in &mut n.shards {
            s.conns = 0;
            s.in_cpu = 0;
            s.waiting = 0;
            s.queue.clear();
        }
        n.in_cpu = 0;
        n.waiting = 0;
        for a in in_flight {
            self.attempts[a as usize].state = AState::Done;
            if !self.attempts[a as usize].abandoned {
                self.finish(
                    a,
                    Err(ConnectionError::Closed {
                        step: SetupStep::Startup,
                    }),
                );
            }
        }
        // Every connection to it breaks; its pools notice each close within
        // `close_spread` (each connection's reader sees its own socket end),
        // and until then count the connection as theirs.
        for pool in 0..self.pools.len() as PoolId {
            if self.pools[pool as usize].node != node {
                continue;
            }
            if let PoolKind::Official(o) = &mut self.pools[pool as usize].kind {
                o.excess.clear();
            }
            // One close per connection held (behind a NAT, a shard may hold
            // a few).
            let held: Vec<u16> = self.pools[pool as usize]
                .held
                .iter()
                .enumerate()
                .flat_map(|(i, &h)| std::iter::repeat_n(i as u16, h as usize))
                .collect();
            for shard in held {
                let d = spread(self.p.close_spread, &mut self.rng);
                self.after(d, Ev::Closed(pool, shard));
            }
        }
    }

    fn up_event(&mut self, node: usize) {
        for pool in 0..self.pools.len() as PoolId {
            if self.pools[pool as usize].node != node {
                continue;
            }
            match self.p.policy {
                Policy::Ours => {
                    // `NodePool::node_up_hint`.
                    self.ours(pool).up_hint = true;
                    self.ours_wake(pool);
                }
                Policy::Official => {
                    // `refill_now_notify`: reset the backoff, unschedule,
                    // then the loop's scheduling.
                    let o = self.official(pool);
                    o.backoff.on_successful_fill();
                    o.had_error = false;
                    o.scheduled = false;
                    self.cancel_timer(pool);
                    self.official_schedule(pool);
                }
            }
        }
    }

    fn sample(&mut self) {
        let covered = self.session_missing.iter().filter(|&&m| m == 0).count() as u64;
        let c = std::mem::take(&mut self.interval);
        self.samples.push(Sample {
            t_ms: (self.now - self.phase_start) / 1_000_000,
            attempts: c.attempts,
            accepted: c.accepted,
            completed: c.completed,
            shed: c.shed,
            timed_out: c.timed_out,
            peak_in_progress: c.peak_in_progress,
            peak_waiting: c.peak_waiting,
            peak_waiting_shard: c.peak_waiting_shard,
            peak_in_progress_shard: c.peak_in_progress_shard,
            covered_sessions: covered,
        });
        // Peaks carry over: what is waiting now is still waiting.
        let watched: Vec<usize> = (0..self.nodes.len()).filter(|&n| self.watched[n]).collect();
        for n in watched {
            for s in 0..self.p.shards {
                self.peaks_interval_only(n, s);
            }
        }
    }

    fn peaks_interval_only(&mut self, node: usize, shard: usize) {
        let n = &self.nodes[node];
        let s = &n.shards[shard];
        let c = &mut self.interval;
        c.peak_in_progress = c.peak_in_progress.max(n.in_cpu);
        c.peak_waiting = c.peak_waiting.max(n.waiting);
        c.peak_waiting_shard = c.peak_waiting_shard.max(s.waiting);
        c.peak_in_progress_shard = c.peak_in_progress_shard.max(s.in_cpu);
    }

    fn step(&mut self, ev: Ev) {
        self.events += 1;
        match ev {
            Ev::PoolTimer(pool, gen) => {
                if self.pools[pool as usize].timer_gen != gen {
                    return;
                }
                match self.p.policy {
                    Policy::Ours => self.ours_timer(pool),
                    Policy::Official => self.official_refill(pool),
                }
            }
            Ev::OpenReady(a) => self.ours_open_ready(a),
            Ev::Pump(pool) => self.ours_pump(pool),
            Ev::Arrive(a) => self.arrive(a),
            Ev::CpuDone(a) => self.cpu_done(a),
            Ev::GateWake(pool) => self.gate_wake(pool),
            Ev::Stall(a) => self.release_pass(a),
            Ev::ShedCheck(a) => self.shed_check(a),
            Ev::ClientTimeout(a) => self.client_timeout(a),
            Ev::NodeStop => self.node_stop(0),
            Ev::NodeStart => {
                self.nodes[0].up = true;
                self.nodes[0].epoch += 1;
            }
            Ev::UpEvent => self.up_event(0),
            Ev::Closed(pool, shard) => {
                let was_full = self.pools[pool as usize].full();
                if let Some(h) = self.pools[pool as usize].held.get_mut(shard as usize) {
                    *h = h.saturating_sub(1);
                }
                self.coverage_change(pool, was_full);
                match self.p.policy {
                    // Each connection's close watcher notifies the pool's
                    // wake (the refill round prunes what it sees closed,
                    // and the port's health learns connections were lost).
                    Policy::Ours => {
                        let now = self.instant();
                        self.ours(pool).health.on_connections_lost(now);
                        self.gate_new_epoch(pool);
                        self.ours_wake(pool);
                    }
                    // `connection_errors` -> `remove_connection`, then the
                    // loop's scheduling.
                    Policy::Official => self.official_schedule(pool),
                }
            }
            Ev::Sample => {
                self.sample();
                self.after(self.p.sample, Ev::Sample);
            }
        }
    }

    /// Runs events until `until` (virtual ns) or until `stop` holds.
    fn run_until(&mut self, until: u64, stop: impl Fn(&Sim) -> bool) {
        while let Some(std::cmp::Reverse((t, _, ev))) = self.queue.peek().copied() {
            if stop(self) {
                return;
            }
            if t > until {
                break;
            }
            self.queue.pop();
            self.now = t;
            self.step(ev);
        }
        self.now = self.now.max(until);
    }

    fn begin_phase(&mut self, watched: Vec<bool>) {
        self.watched = watched;
        self.phase = Counters::default();
        self.interval = Counters::default();
        self.samples.clear();
        self.covered_at = None;
        self.accepted_at_coverage = 0;
        self.phase_start = self.now;
        self.uncovered_pools = 0;
        self.session_missing = vec![0; self.p.sessions];
        for pool in 0..self.pools.len() {
            let p = &self.pools[pool];
            if self.watched[p.node] && !p.full() {
                self.uncovered_pools += 1;
                self.session_missing[pool / self.p.nodes] += 1;
            }
        }
    }

    fn end_phase(&mut self, ideal: u64, covered_from: u64) -> PhaseResult {
        let c = self.phase.clone();
        PhaseResult {
            ideal,
            attempts: c.attempts,
            refused: c.refused,
            accepted: c.accepted,
            accepted_at_coverage: if self.covered_at.is_some() {
                self.accepted_at_coverage
            } else {
                c.accepted
            },
            shed: c.shed,
            timed_out: c.timed_out,
            shed_seen: c.shed_seen,
            closed_excess: c.closed_excess,
            tls_full: c.tls_full,
            tls_resumed: c.tls_resumed,
            peak_in_progress: c.peak_in_progress,
            peak_waiting: c.peak_waiting,
            peak_waiting_shard: c.peak_waiting_shard,
            peak_in_progress_shard: c.peak_in_progress_shard,
            covered_after: self
                .covered_at
                .map(|t| Duration::from_nanos(t.saturating_sub(covered_from))),
            samples: std::mem::take(&mut self.samples),
        }
    }
}

fn least_loaded(node: &Node) -> usize {
    let mut best = (u64::MAX, 0usize);
    for (i, s) in node.shards.iter().enumerate() {
        if s.conns < best.0 {
            best = (s.conns, i);
        }
    }
    best.1
}

/// What a connect to a stopped node's closed port gives (loopback: at once).
fn refused(node: usize) -> OpenError {
    OpenError::Io {
        step: OpenStep::Connect,
        addr: SocketAddr::from(([127, 0, 0, 1], 9042 + node as u16)),
        source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
    }
}

/// Runs both phases: every pool starting at once (cold start), then, once
/// every session is covered (or at the horizon) and a quiet second later,
/// node 0 stopped for `down` and started again, with the UP event
/// `up_event_after` its start.
pub(crate) fn run(p: Params) -> SimResult {
    let mut sim = Sim::new(p.clone());
    let ideal_cold = (p.sessions * p.nodes * p.shards) as u64;
    let ideal_restart = (p.sessions * p.shards) as u64;

    // Phase 1: cold start.
    sim.begin_phase(vec![true; p.nodes]);
    // Each session starts its pools in a random order, as the cluster layer
    // spawns them (`cluster::state`).
    let mut order: Vec<PoolId> = (0..sim.pools.len() as PoolId).collect();
    if p.policy == Policy::Ours {
        for session in order.chunks_mut(p.nodes) {
            sim.rng.shuffle(session);
        }
    }
    for pool in order {
        match p.policy {
            Policy::Ours => {
                sim.ours(pool).wait = OursWait::Sleep;
                sim.set_timer(pool, Duration::ZERO);
            }
            Policy::Official => {
                // `PoolRefiller::run` starts with a refill scheduled now.
                sim.official(pool).scheduled = true;
                sim.set_timer(pool, Duration::ZERO);
            }
        }
    }
    sim.after(p.sample, Ev::Sample);
    let horizon = ns(p.horizon);
    let start = sim.now;
    sim.run_until(start + horizon, |s| s.covered_at.is_some());
    // Let the last samples of the phase be taken (a quiet second).
    let settle = sim.now + ns(Duration::from_secs(1));
    sim.run_until(settle, |_| false);
    let cold = sim.end_phase(ideal_cold, start);

    // Phase 2: node 0 restarts.
    let mut watched = vec![false; p.nodes];
    watched[0] = true;
    sim.begin_phase(watched);
    let t_stop = sim.now + NS;
    sim.at(t_stop, Ev::NodeStop);
    let t_start = t_stop + ns(p.down);
    sim.at(t_start, Ev::NodeStart);
    sim.at(t_start + ns(p.up_event_after), Ev::UpEvent);
    // Coverage counts from the node's start.
    sim.run_until(t_start, |_| false);
    sim.run_until(t_start + horizon, |s| {
        s.covered_at.is_some() && s.now > t_start
    });
    let settle = sim.now + ns(Duration::from_secs(1));
    sim.run_until(settle, |_| false);
    let restart = sim.end_phase(ideal_restart, t_start);

    SimResult {
        params: p,
        cold,
        restart,
        events: sim.events,
    }
}
