//! The pool's task: open what is missing, replace what breaks.
//!
//! Each round looks at what the pool lacks and opens it:
//!
//! 1. With no connection at all, one connection to the regular port. It tells
//!    the shard count and the shard-aware port (SUPPORTED).
//! 2. Otherwise, while the shard-aware port is usable ([`super::nat`]
//!    decides), one connection per missing shard slot through it, with a
//!    chosen source port: exactly one connection per shard.
//! 3. When it is not (a NAT rewrites source ports, the port is refused or
//!    silent, or the pool does not use it), the pool stops chasing exact
//!    coverage with throwaway connections. It opens as many connections as it
//!    wants in total (shards x `connections_per_shard`) through the regular
//!    port, where the node puts each on its least loaded shard, and keeps
//!    them wherever they land: a connection on an already covered shard is
//!    extra capacity, up to that total. Shards still without a connection are
//!    then covered slowly, in the background: at most one extra attempt per
//!    `coverage_interval` (jittered), kept only if it lands on an uncovered
//!    shard, in which case a surplus connection is retired (closed once its
//!    requests are done). Requests for an uncovered shard meanwhile use the
//!    node's least loaded connection ([`super::NodePool::connection_for`]).
//!
//! A first connection whose setup has not completed after a delay that
//! follows the setup times seen (four times the slowest recent one, at least
//! 100 ms) is raced by a second one: one lost message of a setup would
//! otherwise leave the node without a connection for the whole handshake
//! timeout. While other setups of the session are in flight and none has
//! completed since this one started, the race waits (a client whose cores
//! are starved slows every setup; racing them would only add connections).
//! The slower of
//! the two is kept if its shard still lacks a connection when it completes,
//! closed otherwise.
//!
//! The opens of a round start as the pool's pacer allows ([`super::pacing`]):
//! at most its window in flight (at most `max_concurrent_opens`), each after
//! its pause, the missing shards in a random order. After the node
//! was reported up, the first open waits a random moment of the restart
//! spread, so a restarted node does not get every client's first handshake at
//! the same instant.
//!
//! Over TLS each open also waits (briefly, bounded) for a session ticket of
//! the node when others in flight are about to bring one (`super::tickets`),
//! so that a node's shard connections after the first resume.
//!
//! A round that fails (or makes no progress) is followed by a full-jitter
//! backoff delay ([`super::backoff`]); a handshake the node shed under load
//! ([`super::shed`]) is such a failure, never evidence against the port. A
//! round that completes the pool resets the backoff and the task sleeps until
//! a connection closes or the node is reported up.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_cql::frame::response::supported::ShardingInfo;
use scylla_cql::sharding::{Shard, Sharder};
use tokio::task::JoinSet;

use super::coverage::Coverage;
use super::fill::{Fill, Placement};
use super::nat::{FallbackReason, PortChoice};
use super::open::{
    lock_health, note_first_setup, open_for_shard, open_regular, quickest_setup, PortJudgement,
};
use super::pacing::OPEN_STALL;
use super::plan::{Next, OpenOrder, RefillPlan, Round, RoundTally};
use super::session_opens::OpenPass;
use super::shard_port::PortLease;
use super::shed::OpenFailure;
use super::slots::{
    drain_then_close, missing, place, slot_of, trim_surplus, watch_close, Held, Slots,
};
use super::{PoolInner, PoolSnapshot, ShardAwareTarget};
use crate::connection::{Connection, ConnectionError, SetupStep};
use crate::metrics::record::{PortKind, ShardTag};
use crate::metrics::Metrics;

pub(super) async fn run(inner: Arc<PoolInner>) {
    let cancel = inner.cancel.clone();
    let mut slots = Slots {
        shards: Vec::new(),
        sharding: None,
        late: JoinSet::new(),
        race: 0,
    };
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = refill_loop(&inner, &mut slots) => {}
    }
    if inner.retiring.load(Ordering::Relaxed) {
        // Offer nothing from now on; let the requests on each connection end.
        let held = std::mem::take(&mut slots.shards);
        publish(&inner, &slots);
        let n = held.iter().map(Vec::len).sum::<usize>();
        tracing::debug!(node = %inner.addr, connections = n, "pool retired; draining its connections");
        for h in held.into_iter().flatten() {
            tokio::spawn(drain_then_close(h));
        }
        return;
    }
    for h in slots.shards.iter().flatten() {
        h.conn.close();
    }
    publish(&inner, &slots);
}

async fn refill_loop(inner: &Arc<PoolInner>, slots: &mut Slots) {
    let mut plan = RefillPlan::new(
        inner.config.reconnect.new_schedule(),
        inner.config.reconnect_spread,
        fastrand::Rng::new(),
    )
    .with_max_concurrent_opens(inner.config.max_concurrent_opens)
    .with_log(inner.config.decision_log.clone());
    let mut coverage = Coverage::new(Instant::now(), inner.config.coverage_interval);
    // No open starts before this moment: the pacer's pause after the last
    // open ended, kept across rounds.
    let mut next_start = tokio::time::Instant::now();
    loop {
        if slots.prune() > 0 {
            // Connections broke: the node may have restarted, which makes
            // the TLS tickets held for it useless, and may be stopping, when
            // a refused shard-aware port says nothing about the port.
            new_ticket_epoch(inner);
            lock_health(inner).on_connections_lost(Instant::now());
            publish(inner, slots);
        }
        if adopt_late(inner, slots) {
            publish(inner, slots);
        }
        let first = slots.total() == 0;
        let round = if first {
            new_ticket_epoch(inner);
            let r = open_first(inner, slots, &mut plan).await;
            // The next opens wait the pacer's pause after a first
            // connection as after any other: after a restart, the first
            // connection queued among every client's.
            next_start = tokio::time::Instant::now() + plan.pacer().gap();
            if !matches!(r, Round::Failed) {
                first_opened(inner);
            }
            r
        } else {
            let window = plan.fill_window();
            fill_missing(
                inner,
                slots,
                window,
                &mut plan,
                &mut next_start,
                &mut coverage,
            )
            .await
        };
        publish(inner, slots);
        match plan.after_round(round, first) {
            Next::Now => continue,
            Next::Pause(pause) => tokio::time::sleep(pause).await,
            Next::Idle if round == Round::Partial => {
                // The node answers: no backoff. Wait for the next coverage
                // attempt, or for a connection to break.
                inner.up_hint.store(false, Ordering::Relaxed);
                tokio::select! {
                    _ = tokio::time::sleep_until(coverage.next.into()) => {}
                    _ = inner.wake.notified() => {}
                }
            }
            Next::Idle => {
                inner.up_hint.store(false, Ordering::Relaxed);
                // Sleep until a connection breaks or the node is reported up.
                inner.wake.notified().await;
            }
            Next::Backoff(delay) => {
                Metrics::inc(&inner.metrics.reconnect_delays);
                inner
                    .metrics
                    .reconnect_delay_micros_total
                    .fetch_add(delay.as_micros() as u64, Ordering::Relaxed);
                inner.labels.reconnect_delay(delay);
                tracing::debug!(node = %inner.addr, ?delay, "reconnect backoff");
                // Bounded by the deadline: only an UP report ends it sooner.
                let until = tokio::time::Instant::now() + delay;
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep_until(until) => break,
                        _ = inner.wake.notified() => {
                            // A raced setup that completed late ends the
                            // backoff: the node answers.
                            if adopt_late(inner, slots) {
                                publish(inner, slots);
                                break;
                            }
                            if plan.wake_ends_backoff(inner.up_hint.load(Ordering::Relaxed)) {
                                break;
                            }
                        }
                    }
                }
                // Everyone hears the UP event at once: do not all come back
                // at once.
                if let Some(pause) = plan.after_backoff(
                    inner.up_hint.swap(false, Ordering::Relaxed),
                    quickest_setup(inner),
                ) {
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }
}

/// Connections broke, or a first connection is about to be opened: only TLS
/// tickets that arrive from now on count for pacing the node's opens
/// (feature `tls`; older ones may be of an earlier lifetime of the node).
fn new_ticket_epoch(_inner: &PoolInner) {
    #[cfg(feature = "tls")]
    if let Some(g) = &_inner.tickets {
        tracing::trace!(node = %_inner.addr, counted_before = g.available(), "new TLS ticket epoch");
        g.new_epoch();
    }
}

/// The first connection is open: from now on, a node that sent no TLS ticket
/// since the epoch issues none (feature `tls`).
fn first_opened(_inner: &PoolInner) {
    #[cfg(feature = "tls")]
    if let Some(g) = &_inner.tickets {
        g.first_opened();
    }
}

fn publish(inner: &PoolInner, slots: &Slots) {
    let snapshot = PoolSnapshot {
        shards: slots
            .shards
            .iter()
            .map(|s| {
                s.iter()
                    .filter(|h| h.conn.is_usable())
                    .map(|h| h.conn.clone())
                    .collect()
            })
            .collect(),
        sharder: slots.sharding.as_ref().map(ShardingInfo::sharder),
    };
    // The gauges first: whoever waits for the change sees them set.
    record_connections(inner, slots);
    let connected = !snapshot.is_empty();
    let resharded = inner.snapshot.load().sharder != snapshot.sharder;
    inner.snapshot.store(Arc::new(snapshot));
    if resharded {
        if let Some(listener) = &inner.config.sharding_changed {
            listener.notify_one();
        }
    }
    let was_connected = inner.connected.swap(connected, Ordering::Relaxed);
    if was_connected != connected {
        if let Some(gate) = &inner.config.session_opens {
            gate.connected_changed(connected);
        }
        inner.flips.fetch_add(1, Ordering::Release);
        if let Some(listener) = &inner.config.connectivity_changed {
            listener.notify_one();
        }
    }
    inner.changes.send_modify(|v| *v += 1);
}

/// Sets the `metrics` facade's gauges of open connections, per shard and port
/// (zeros included, so a shard that lost its connections shows 0).
fn record_connections(inner: &PoolInner, slots: &Slots) {
    let sharded = slots.sharding.is_some();
    for (shard, held) in slots.shards.iter().enumerate() {
        let tag = if sharded {
            ShardTag::Shard(shard as Shard)
        } else {
            ShardTag::Unsharded
        };
        let usable = held.iter().filter(|h| h.conn.is_usable());
        let shard_aware = usable.clone().filter(|h| h.lease.is_some()).count();
        let regular = usable.count() - shard_aware;
        inner.labels.connections(PortKind::Regular, tag, regular);
        if sharded {
            inner
                .labels
                .connections(PortKind::ShardAware, tag, shard_aware);
        }
    }
}

/// Without a setup time seen yet, a first connection is raced after this long.
const RACE_UNSEEN: Duration = Duration::from_millis(500);
/// The least delay before a race: setups of a healthy node take far less.
const RACE_MIN: Duration = Duration::from_millis(100);
/// A race starts after this many times the slowest recent setup.
const RACE_FACTOR: u32 = 4;

/// How often a running first setup checks whether to race it.
const RACE_CHECK: Duration = Duration::from_millis(25);

/// Whether a first connection's setup running for `running` is raced now.
/// Its delay is [`RACE_FACTOR`] times the slowest recent setup of the session
/// (at least [`RACE_MIN`]; [`RACE_UNSEEN`] before any), read afresh at each
/// check so that setups slowing down for everyone push the race back. Once
/// the delay has passed, the setup is raced if it is the only one in flight
/// or if another setup completed since it started (the node and the client
/// make progress; this one does not); while other setups are in flight and
/// none completes, the client or the network is slow for all of them, and
/// racing would only add connections. In any case at half the handshake
/// timeout.
fn race_due(inner: &PoolInner, running: Duration, completed_at_start: u64) -> bool {
    if running >= inner.config.connection.handshake_timeout / 2 {
        return true;
    }
    let seen = inner
        .metrics
        .slowest_recent_setup_micros
        .load(Ordering::Relaxed);
    let delay = if seen == 0 {
        RACE_UNSEEN
    } else {
        Duration::from_micros(seen)
            .saturating_mul(RACE_FACTOR)
            .max(RACE_MIN)
    };
    running >= delay
        && (inner.metrics.setups_in_flight.load(Ordering::Relaxed) <= 1
            || setups_completed(inner) > completed_at_start)
}

/// Successful connection setups of the session so far.
fn setups_completed(inner: &PoolInner) -> u64 {
    inner.metrics.connects_regular_ok.load(Ordering::Relaxed)
        + inner
            .metrics
            .connects_shard_aware_ok
            .load(Ordering::Relaxed)
}

/// Starts one setup of a first connection, tagged with its race.
fn spawn_setup(
    inner: &Arc<PoolInner>,
    late: &mut JoinSet<(u64, Result<Connection, ConnectionError>)>,
    race: u64,
) {
    let inner = inner.clone();
    late.spawn(async move {
        let r = open_regular(&inner).await;
        // The refill task may be idle or backing off: wake it to adopt or
        // close what a lost race brings (a spurious wake-up costs a round
        // that finds nothing to do).
        inner.wake.notify_one();
        (race, r)
    });
}

/// Opens the node's first connection through the regular port. A setup
/// still running when [`race_due`] says so is raced by a second one, and the
/// first of them to succeed (or of an earlier race still running) is the
/// connection; the other stays in `slots.late` for [`adopt_late`]. Fails
/// when every setup of this race failed; with no race, at the first failure.
async fn race_first(
    inner: &Arc<PoolInner>,
    slots: &mut Slots,
) -> Result<Connection, ConnectionError> {
    slots.race += 1;
    let race = slots.race;
    let completed_at_start = setups_completed(inner);
    spawn_setup(inner, &mut slots.late, race);
    let started = tokio::time::Instant::now();
    let mut running = 1u32;
    let mut raced = false;
    let mut failure = None;
    loop {
        let next = if raced {
            slots.late.join_next().await
        } else {
            tokio::select! {
                next = slots.late.join_next() => next,
                _ = tokio::time::sleep(RACE_CHECK) => {
                    if !race_due(inner, started.elapsed(), completed_at_start) {
                        continue;
                    }
                    raced = true;
                    running += 1;
                    Metrics::inc(&inner.metrics.setup_races);
                    tracing::debug!(node = %inner.addr, "a connection setup is still running; racing a second one");
                    spawn_setup(inner, &mut slots.late, race);
                    continue;
                }
            }
        };
        match next {
            Some(Ok((_, Ok(conn)))) => return Ok(conn),
            Some(Ok((tag, Err(e)))) if tag == race => {
                running -= 1;
                if running == 0 {
                    return Err(e);
                }
                failure = Some(e);
            }
            // An earlier race's setup failed: nothing to learn here.
            Some(Ok(_)) => {}
            // The tasks return their result and are aborted only with the
            // set: a join error or an empty set means this race's setups
            // are gone.
            Some(Err(_)) | None => {
                if slots.late.is_empty() {
                    return Err(failure.unwrap_or_else(setup_lost));
                }
            }
        }
    }
}

/// The error of a setup whose task ended without a result.
fn setup_lost() -> ConnectionError {
    ConnectionError::Io {
        step: SetupStep::Connect,
        source: std::io::Error::other("the connection setup ended without a result"),
    }
}

/// Takes the first-connection setups that completed after their race was
/// decided: a connection is kept if its shard still lacks one, closed
/// otherwise. Whether one was kept.
fn adopt_late(inner: &Arc<PoolInner>, slots: &mut Slots) -> bool {
    let want = inner.config.size.per_shard(slots.shards.len());
    let mut kept = false;
    while let Some(done) = slots.late.try_join_next() {
        let Ok((_, Ok(conn))) = done else { continue };
        let shard = slot_of(slots, &conn) as usize;
        match slots.shards.get_mut(shard) {
            Some(held) if held.len() < want && conn.is_usable() => {
                tracing::debug!(node = %inner.addr, shard, "a raced setup completed late; kept");
                watch_close(inner, &conn);
                held.push(Held { conn, lease: None });
                kept = true;
            }
            _ => {
                Metrics::inc(&inner.metrics.excess_connections_closed);
                conn.close();
            }
        }
    }
    kept
}

async fn open_first(inner: &Arc<PoolInner>, slots: &mut Slots, plan: &mut RefillPlan) -> Round {
    // The session's other pools may be opening their first connections:
    // wait for its rule (`super::session_opens`).
    let mut pass = match &inner.config.session_opens {
        Some(gate) => Some(gate.enter_first().await),
        None => None,
    };
    let started = Instant::now();
    let opened = until_stalled(race_first(inner, slots), pass.as_mut()).await;
    match opened {
        Ok(conn) => {
            let times = conn.info().server.setup_times;
            if let Some(p) = pass {
                p.opened(times);
            }
            let ended = Instant::now();
            let took = ended.saturating_duration_since(started);
            note_first_setup(inner, took);
            plan.pacer().on_opened(took, times, ended);
            // Over a Unix-domain socket (ScyllaDB's maintenance socket) the
            // node picks each connection's shard and no source port can
            // steer it: the node is pooled as unsharded (one slot of
            // `connections_per_shard`), instead of opening connections until
            // chance has covered every shard.
            let sharding = if unsharded(inner) {
                None
            } else {
                conn.sharding().cloned()
            };
            let nr = sharding.as_ref().map_or(1, |s| s.nr_shards.get() as usize);
            if slots.shards.len() != nr || slots.sharding != sharding {
                if slots.sharding.is_some() {
                    tracing::info!(node = %inner.addr, shards = nr, "node sharding changed");
                }
                for h in slots.shards.iter().flatten() {
                    h.conn.close();
                }
                slots.shards = (0..nr).map(|_| Vec::new()).collect();
                slots.sharding = sharding;
            }
            let shard = slot_of(slots, &conn) as usize;
            watch_close(inner, &conn);
            if let Some(s) = slots.shards.get_mut(shard) {
                s.push(Held { conn, lease: None });
            }
            let mut tally = RoundTally::default();
            tally.kept(true);
            tally.round(missing(inner, slots).is_empty(), false)
        }
        Err(e) => {
            let mut tally = RoundTally::default();
            let failure = note_shed(inner, &e);
            if let Some(p) = pass {
                p.failed(failure);
            }
            plan.pacer()
                .on_failed(failure, started.elapsed(), Instant::now());
            tally.failed(failure);
            tracing::debug!(node = %inner.addr, error = %e, "cannot connect");
            note_failure(inner, e);
            tally.round(false, false)
        }
    }
}

/// Whether the pool treats its node as unsharded whatever the node says:
/// over a Unix-domain socket the client cannot choose a shard.
fn unsharded(inner: &PoolInner) -> bool {
    inner.config.connection.unix_socket.is_some()
}

struct Opened {
    wanted: Shard,
    /// From dialling to the connection's readiness (or failure).
    took: Duration,
    result: Result<(Connection, Option<PortLease>), ConnectionError>,
}

async fn fill_missing(
    inner: &Arc<PoolInner>,
    slots: &mut Slots,
    window: Duration,
    plan: &mut RefillPlan,
    next_start: &mut tokio::time::Instant,
    coverage: &mut Coverage,
) -> Round {
    let want = inner.config.size.per_shard(slots.shards.len());
    let target = slots.shards.len() * want;
    let deficit = missing(inner, slots);
    if deficit.is_empty() {
        trim_surplus(inner, slots, want, target);
        return Round::Complete;
    }
    let shard_aware = shard_aware_port(inner, slots.sharding.as_ref());
    // Exact coverage is chased only while the shard-aware port works.
    let strict = shard_aware.is_some() && lock_health(inner).fallback().is_none();
    let fill = Fill::choose(strict, slots.total(), target);
    let wanted: Vec<Shard> = match fill {
        Fill::Strict | Fill::Total => fill.wanted(deficit, slots.total(), target),
        Fill::Background => {
            let due = coverage.attempt_due(Instant::now(), plan, slots.shards.len());
            match due {
                Some(shard) => {
                    Metrics::inc(&inner.metrics.coverage_attempts);
                    vec![shard]
                }
                None => return Round::Partial,
            }
        }
    };
    // Behind a NAT the shard-aware port still connects, and the NAT's port
    // choice puts the connection on a random shard: a fair chance at a
    // missing one, where the regular port gives every client the same least
    // loaded shard. So background attempts go there (without counting as
    // evidence or probes), unless the port itself failed.
    let behind_nat = fill == Fill::Background
        && !coverage.via_regular
        && lock_health(inner).fallback() == Some(FallbackReason::ShardMismatch);
    let wanted_len = wanted.len();
    let mut queue = order_opens(inner, wanted, shard_aware, behind_nat, window, plan);
    let mut set = JoinSet::new();

    let mut tally = RoundTally::default();
    // Background attempts that land on a covered shard are kept too, up to a
    // few beyond the wanted total: each raises its shard's load, so the
    // node's least-loaded choice moves on to other shards for the next
    // attempts (of this client and others) instead of handing everyone the
    // same shard again.
    let bounds = fill.bounds(want, target, slots.shards.len());
    loop {
        // Start what the pacer allows now: each open once its spread delay
        // and the pacer's pause have passed, while fewer than its window are
        // in flight.
        let now = tokio::time::Instant::now();
        while set.len() < plan.pacer().window() {
            match queue.front() {
                Some((at, _)) if *at <= now && *next_start <= now => {
                    if let Some((_, order)) = queue.pop_front() {
                        spawn_open(inner, &mut set, order, plan.pacer().drains_at());
                    }
                }
                _ => break,
            }
        }
        let due = if set.len() < plan.pacer().window() {
            queue.front().map(|(at, _)| (*at).max(*next_start))
        } else {
            None
        };
        if set.is_empty() && due.is_none() {
            break;
        }
        let joined = tokio::select! {
            joined = set.join_next(), if !set.is_empty() => joined,
            _ = tokio::time::sleep_until(due.unwrap_or(now)), if due.is_some() => continue,
        };
        let Some(joined) = joined else { continue };
        let Ok(opened) = joined else {
            // The open's task is gone (it does not panic): a failure that
            // says nothing about the node.
            tally.failed(OpenFailure::Other);
            continue;
        };
        match opened.result {
            Ok((conn, lease)) => {
                let times = conn.info().server.setup_times;
                plan.pacer().on_opened(opened.took, times, Instant::now());
                match place(
                    inner,
                    slots,
                    conn,
                    lease,
                    opened.wanted,
                    fill == Fill::Background,
                    bounds,
                ) {
                    Placement::Kept { covers, .. } => tally.kept(covers),
                    Placement::Rotated | Placement::Closed => {}
                }
            }
            Err(e) => {
                let failure = note_shed(inner, &e);
                plan.pacer().on_failed(failure, opened.took, Instant::now());
                tally.failed(failure);
                tracing::debug!(node = %inner.addr, shard = opened.wanted, error = %e, "opening a shard connection failed");
                note_failure(inner, e);
            }
        }
        *next_start = tokio::time::Instant::now() + plan.pacer().gap();
    }
    let nat = lock_health(inner).fallback() == Some(FallbackReason::ShardMismatch);
    coverage.after_round(
        Instant::now(),
        fill,
        tally.covered_new(),
        shard_aware.is_some() && nat,
        plan,
        slots.shards.len(),
    );
    if tally.shed() > 0 {
        tracing::debug!(node = %inner.addr, shed = tally.shed(), ordered = wanted_len, "the node shed handshakes of this round");
    }
    let complete = missing(inner, slots).is_empty();
    if complete {
        trim_surplus(inner, slots, want, target);
    }
    tally.round(complete, fill.partial(slots.total(), target))
}

/// The node's shard-aware port to open connections through, with its
/// sharder: `None` when the pool does not use one (turned off, an unsharded
/// node, none advertised, or an unknown sharding).
fn shard_aware_port(
    inner: &PoolInner,
    sharding: Option<&ShardingInfo>,
) -> Option<(Sharder, SocketAddr)> {
    let s = sharding?;
    if !inner.config.shard_aware_port || unsharded(inner) {
        return None;
    }
    match inner.config.shard_aware_target {
        ShardAwareTarget::Advertised => {
            // The same selection either way; only the port differs: a TLS
            // connection must reach the node's TLS shard-aware port.
            // `inner.addr` is already translated (address translation
            // applies to the node's address); the port number is the
            // node's own.
            let port = if inner.config.connection.uses_tls() {
                s.shard_aware_port_ssl
            } else {
                s.shard_aware_port
            }?;
            Some((s.sharder(), SocketAddr::new(inner.addr.ip(), port)))
        }
        // A client route through a PROXY v2 balancer: the route's own
        // port is shard-aware (the header carries our source port).
        ShardAwareTarget::Dialled => Some((s.sharder(), inner.addr)),
        ShardAwareTarget::Disabled => None,
    }
}

/// Where an open goes: the shard-aware port (with its sharder, address and
/// how a landing is judged), or the regular port (`None`).
type OpenPort = Option<(Sharder, SocketAddr, PortJudgement)>;

/// The opens of a round, one per shard in `wanted`, each with the moment it
/// may start (its delay in the refill window) and the port the node's
/// shard-aware health chooses (`behind_nat`: background attempts through the
/// shard-aware port of a node behind a NAT), in the order they may start.
fn order_opens(
    inner: &Arc<PoolInner>,
    wanted: Vec<Shard>,
    shard_aware: Option<(Sharder, SocketAddr)>,
    behind_nat: bool,
    window: Duration,
    plan: &mut RefillPlan,
) -> std::collections::VecDeque<(tokio::time::Instant, OpenOrder<OpenPort>)> {
    let now = tokio::time::Instant::now();
    let mut orders = plan.orders(wanted, window, |_| match shard_aware {
        Some((sharder, sa_addr)) if behind_nat => {
            Some((sharder, sa_addr, PortJudgement::BehindNat))
        }
        Some((sharder, sa_addr)) => match lock_health(inner).choose(Instant::now()) {
            PortChoice::ShardAware | PortChoice::Probe => {
                Some((sharder, sa_addr, PortJudgement::Judge))
            }
            PortChoice::Regular(_) => None,
        },
        None => None,
    });
    // Stable: opens with the same delay keep their order.
    orders.sort_by_key(|o| o.delay);
    orders.into_iter().map(|o| (now + o.delay, o)).collect()
}

/// Starts one open in `set`; `drains_at`: when the node's queue drains, as
/// the pool last saw it (the session weighs its waiting opens by it).
fn spawn_open(
    inner: &Arc<PoolInner>,
    set: &mut JoinSet<Opened>,
    order: OpenOrder<OpenPort>,
    drains_at: Option<Instant>,
) {
    let OpenOrder {
        shard, port, seed, ..
    } = order;
    let shared = inner.clone();
    set.spawn(async move {
        // Within the session's window (`super::session_opens`): counted
        // until this open ends or stalls.
        let mut pass = match &shared.config.session_opens {
            Some(gate) => Some(gate.enter(drains_at).await),
            None => None,
        };
        // Over TLS: wait (bounded) for a ticket of the node while other
        // opens are about to bring one; held until this open is done.
        #[cfg(feature = "tls")]
        let _ticket = match &shared.tickets {
            Some(g) => Some(g.enter().await),
            None => None,
        };
        let started = Instant::now();
        let open = async {
            match port {
                Some((sharder, sa_addr, judgement)) => {
                    open_for_shard(&shared, sharder, shard, sa_addr, seed, judgement).await
                }
                None => open_regular(&shared).await.map(|c| (c, None)),
            }
        };
        let result = until_stalled(open, pass.as_mut()).await;
        if let Some(p) = pass {
            match &result {
                Ok((conn, _)) => p.opened(conn.info().server.setup_times),
                Err(e) => p.failed(OpenFailure::of(e)),
            }
        }
        Opened {
            wanted: shard,
            took: started.elapsed(),
            result,
        }
    });
}

/// Runs `open`; if it is still in flight after [`OPEN_STALL`], its session
/// pass stops counting, so that the session's next open may start.
async fn until_stalled<T>(
    open: impl std::future::Future<Output = T>,
    pass: Option<&mut OpenPass>,
) -> T {
    tokio::pin!(open);
    match pass {
        Some(pass) => tokio::select! {
            r = &mut open => r,
            _ = tokio::time::sleep(OPEN_STALL) => {
                pass.release();
                open.await
            }
        },
        None => open.await,
    }
}

/// Keeps `e` as the pool's latest connection failure (see
/// [`super::NodePool::last_error`]).
fn note_failure(inner: &PoolInner, e: ConnectionError) {
    *inner
        .last_error
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(e));
}

/// Classifies a failed open, counting a handshake the node shed (see
/// [`super::shed`]); the caller's round fails, which backs this node's
/// reconnects off.
fn note_shed(inner: &PoolInner, e: &ConnectionError) -> OpenFailure {
    let failure = OpenFailure::of(e);
    if failure == OpenFailure::Shed {
        Metrics::inc(&inner.metrics.handshakes_shed);
        tracing::debug!(node = %inner.addr, error = %e, "the node shed a handshake; backing off");
    }
    failure
}
