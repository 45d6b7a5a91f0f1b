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
//! At most `max_concurrent_opens` connections are opened at a time. After the
//! node was unreachable, each waits a random delay within `reconnect_spread`
//! first, so a restarted node does not get every shard's handshake at the same
//! instant.
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

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_cql::frame::response::supported::ShardingInfo;
use scylla_cql::sharding::{Shard, Sharder};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::backoff::spread;
use super::plan::{Next, RefillPlan, Round, RoundFacts};
use super::nat::{FallbackReason, PortChoice, Transition};
use super::shard_port::{PortLease, SourcePortAllocator};
use super::shed::OpenFailure;
use super::{PoolInner, PoolSnapshot, ShardAwareTarget};
use crate::connection::{self, Connection, ConnectionError, SetupStep};
use crate::metrics::record::{PortKind, ShardTag};
use crate::metrics::Metrics;

/// A pooled connection and the source port it holds, if it chose one.
struct Held {
    conn: Connection,
    /// `Some` for a connection through the shard-aware port.
    lease: Option<PortLease>,
}

/// What the pool holds, by shard.
struct Slots {
    shards: Vec<Vec<Held>>,
    sharding: Option<ShardingInfo>,
    /// First-connection setups still running, tagged with their race
    /// ([`race_first`]); aborted when the pool stops.
    late: JoinSet<(u64, Result<Connection, ConnectionError>)>,
    /// The last race's tag.
    race: u64,
}

impl Slots {
    fn total(&self) -> usize {
        self.shards.iter().map(Vec::len).sum()
    }

    fn prune(&mut self) -> usize {
        let mut removed = 0;
        for s in &mut self.shards {
            let before = s.len();
            s.retain(|h| h.conn.is_usable());
            removed += before - s.len();
        }
        removed
    }
}

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

/// Closes `held` once no request is on it (after [`RETIRE_GRACE`], at most
/// [`RETIRE_DRAIN`] later).
async fn drain_then_close(held: Held) {
    tokio::time::sleep(RETIRE_GRACE).await;
    let until = Instant::now() + RETIRE_DRAIN;
    while held.conn.is_usable() && held.conn.in_flight() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    held.conn.close();
    drop(held.lease);
}

async fn refill_loop(inner: &Arc<PoolInner>, slots: &mut Slots) {
    let mut plan = RefillPlan::new(
        inner.config.reconnect.new_schedule(),
        inner.config.reconnect_spread,
        fastrand::Rng::new(),
    );
    let mut coverage = Coverage {
        next: Instant::now(),
        via_regular: true,
        slowdown: 1,
    };
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
            let r = open_first(inner, slots).await;
            if !matches!(r, Round::Failed) {
                first_opened(inner);
            }
            r
        } else {
            let window = plan.fill_window();
            fill_missing(inner, slots, window, &mut plan, &mut coverage).await
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
                if let Some(pause) = plan.after_backoff(inner.up_hint.swap(false, Ordering::Relaxed)) {
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

fn watch_close(inner: &Arc<PoolInner>, conn: &Connection) {
    let token = conn.close_token();
    let wake_target = inner.cancel.clone();
    // The watcher must not keep the pool alive: it holds only tokens and a
    // weak reference to the wake-up.
    let wake = Arc::downgrade(inner);
    tokio::spawn(async move {
        tokio::select! {
            _ = token.cancelled() => {
                if let Some(inner) = wake.upgrade() {
                    inner.wake.notify_one();
                }
            }
            _ = wake_target.cancelled() => {}
        }
    });
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
        + inner.metrics.connects_shard_aware_ok.load(Ordering::Relaxed)
}

/// Counts a setup in flight (see [`race_due`]) until dropped.
struct InFlight<'a>(&'a Metrics);

impl<'a> InFlight<'a> {
    fn new(metrics: &'a Metrics) -> Self {
        metrics.setups_in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(metrics)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.setups_in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Records how long a successful setup took (see [`race_due`]).
fn note_setup(inner: &PoolInner, took: Duration) {
    let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
    // `fetch_update` with a closure that always returns `Some` cannot fail.
    let _ = inner.metrics.slowest_recent_setup_micros.fetch_update(
        Ordering::Relaxed,
        Ordering::Relaxed,
        |old| Some(us.max(old - old / 8)),
    );
}

/// Starts one setup of a first connection, tagged with its race.
fn spawn_setup(inner: &Arc<PoolInner>, late: &mut JoinSet<(u64, Result<Connection, ConnectionError>)>, race: u64) {
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

async fn open_first(inner: &Arc<PoolInner>, slots: &mut Slots) -> Round {
    match race_first(inner, slots).await {
        Ok(conn) => {
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
            if missing(inner, slots).is_empty() {
                Round::Complete
            } else {
                Round::Progress
            }
        }
        Err(e) => {
            note_shed(inner, &e);
            tracing::debug!(node = %inner.addr, error = %e, "cannot connect");
            note_failure(inner, e);
            Round::Failed
        }
    }
}

/// Whether the pool treats its node as unsharded whatever the node says:
/// over a Unix-domain socket the client cannot choose a shard.
fn unsharded(inner: &PoolInner) -> bool {
    inner.config.connection.unix_socket.is_some()
}

/// The slot a connection goes to: its shard, or the one slot of a node
/// pooled as unsharded.
fn slot_of(slots: &Slots, conn: &Connection) -> Shard {
    if slots.sharding.is_none() {
        0
    } else {
        conn.shard().unwrap_or(0)
    }
}

/// One entry per missing connection: the shard it is for.
fn missing(inner: &PoolInner, slots: &Slots) -> Vec<Shard> {
    let want = inner.config.size.per_shard(slots.shards.len());
    slots
        .shards
        .iter()
        .enumerate()
        .flat_map(|(shard, held)| {
            std::iter::repeat_n(shard as Shard, want.saturating_sub(held.len()))
        })
        .collect()
}

struct Opened {
    wanted: Shard,
    result: Result<(Connection, Option<PortLease>), ConnectionError>,
}

/// How a round fills the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// Through a working shard-aware port: a connection for every missing
    /// slot, exactly.
    Strict,
    /// Without a usable shard-aware port and below the wanted total: as many
    /// connections as are missing in total, wherever the node puts them.
    Total,
    /// At the wanted total with shards still uncovered: one background
    /// coverage attempt now and then.
    Background,
}

async fn fill_missing(
    inner: &Arc<PoolInner>,
    slots: &mut Slots,
    window: Duration,
    plan: &mut RefillPlan,
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
    let fill = if shard_aware.is_some() && lock_health(inner).fallback().is_none() {
        Fill::Strict
    } else if slots.total() < target {
        Fill::Total
    } else {
        Fill::Background
    };
    let wanted: Vec<Shard> = match fill {
        Fill::Strict => deficit,
        Fill::Total => deficit.into_iter().take(target - slots.total()).collect(),
        Fill::Background => match coverage.attempt_due(inner, plan, slots.shards.len()) {
            Some(shard) => vec![shard],
            None => return Round::Partial,
        },
    };
    // Behind a NAT the shard-aware port still connects, and the NAT's port
    // choice puts the connection on a random shard: a fair chance at a
    // missing one, where the regular port gives every client the same least
    // loaded shard. So background attempts go there (without counting as
    // evidence or probes), unless the port itself failed.
    let behind_nat = fill == Fill::Background
        && !coverage.via_regular
        && lock_health(inner).fallback() == Some(FallbackReason::ShardMismatch);
    let mut set = spawn_opens(inner, wanted, shard_aware, behind_nat, window, plan);

    let mut progress = false;
    let mut covered_new = false;
    let mut failed = false;
    // Background attempts that land on a covered shard are kept too, up to a
    // few beyond the wanted total: each raises its shard's load, so the
    // node's least-loaded choice moves on to other shards for the next
    // attempts (of this client and others) instead of handing everyone the
    // same shard again.
    let room = if fill == Fill::Background {
        target + surplus_bound(slots.shards.len())
    } else {
        target
    };
    let bounds = Bounds { want, target, room };
    while let Some(joined) = set.join_next().await {
        let Ok(opened) = joined else {
            failed = true;
            continue;
        };
        match opened.result {
            Ok((conn, lease)) => match place(inner, slots, conn, lease, opened.wanted, fill, bounds) {
                Placement::Kept { covers } => {
                    progress = true;
                    covered_new |= covers;
                }
                Placement::Rotated | Placement::Closed => {}
            },
            Err(e) => {
                note_shed(inner, &e);
                tracing::debug!(node = %inner.addr, shard = opened.wanted, error = %e, "opening a shard connection failed");
                note_failure(inner, e);
                failed = true;
            }
        }
    }
    if fill == Fill::Total {
        // Filling: the first background attempt waits one interval.
        coverage.next = Instant::now() + coverage_delay(inner.config.coverage_interval, plan.rng());
    }
    let nat = lock_health(inner).fallback() == Some(FallbackReason::ShardMismatch);
    coverage.after_round(fill, covered_new, shard_aware.is_some() && nat);
    let complete = missing(inner, slots).is_empty();
    if complete {
        trim_surplus(inner, slots, want, target);
    }
    Round::of(RoundFacts {
        complete,
        failed,
        partial: fill != Fill::Strict && (fill == Fill::Background || slots.total() >= target),
        progress,
    })
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

/// Starts one open per shard in `wanted`, each after its delay in the
/// refill window and within the pool's limit of concurrent opens, on the
/// port the node's shard-aware health chooses (`behind_nat`: background
/// attempts through the shard-aware port of a node behind a NAT).
fn spawn_opens(
    inner: &Arc<PoolInner>,
    wanted: Vec<Shard>,
    shard_aware: Option<(Sharder, SocketAddr)>,
    behind_nat: bool,
    window: Duration,
    plan: &mut RefillPlan,
) -> JoinSet<Opened> {
    let permits = Arc::new(Semaphore::new(inner.config.max_concurrent_opens.max(1)));
    let mut set = JoinSet::new();
    for shard in wanted {
        let port = match shard_aware {
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
        };
        let delay = plan.open_delay(window);
        let permits = permits.clone();
        let shared = inner.clone();
        let seed = plan.rng().u64(..);
        set.spawn(async move {
            tokio::time::sleep(delay).await;
            let _permit = permits.acquire_owned().await;
            // Over TLS: wait (bounded) for a ticket of the node while other
            // opens are about to bring one; held until this open is done.
            #[cfg(feature = "tls")]
            let _pass = match &shared.tickets {
                Some(g) => Some(g.enter().await),
                None => None,
            };
            let result = match port {
                Some((sharder, sa_addr, judgement)) => {
                    open_for_shard(&shared, sharder, shard, sa_addr, seed, judgement).await
                }
                None => open_regular(&shared).await.map(|c| (c, None)),
            };
            Opened {
                wanted: shard,
                result,
            }
        });
    }
    set
}

/// How many connections a round may keep: `want` per shard, `target` in
/// all, `room` in all while covering shards in the background.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    want: usize,
    target: usize,
    room: usize,
}

/// What became of an opened connection.
enum Placement {
    /// Kept; `covers`: it fills a missing slot of its shard.
    Kept { covers: bool },
    /// Kept in place of an older surplus connection, retired.
    Rotated,
    /// Closed: its shard has all it wants and the pool all it may hold.
    Closed,
}

/// Puts an opened connection where it landed, or closes it.
fn place(
    inner: &Arc<PoolInner>,
    slots: &mut Slots,
    conn: Connection,
    lease: Option<PortLease>,
    wanted: Shard,
    fill: Fill,
    b: Bounds,
) -> Placement {
    let landed = slot_of(slots, &conn);
    if lease.is_some() && landed != wanted {
        Metrics::inc(&inner.metrics.wrong_shard_landings);
        tracing::debug!(node = %inner.addr, wanted, landed, "shard-aware connection landed on another shard");
    }
    let total = slots.total();
    let Some(held) = slots.shards.get(landed as usize).map(Vec::len) else {
        Metrics::inc(&inner.metrics.excess_connections_closed);
        conn.close();
        return Placement::Closed;
    };
    let covers = held < b.want;
    if fill == Fill::Background && !covers && total >= b.room {
        // At the bound: rotate, keeping the new connection and retiring an
        // older surplus one elsewhere. Closing the new one would hand its
        // shard's slot straight back, and the node would give the next
        // attempt (of anyone) the same shard: coverage would stall.
        watch_close(inner, &conn);
        if let Some(s) = slots.shards.get_mut(landed as usize) {
            s.push(Held { conn, lease });
        }
        retire_surplus(inner, slots, b.want, Some(landed as usize));
        Placement::Rotated
    } else if covers || total < b.room {
        // A missing slot, or extra capacity on a covered shard (while fewer
        // than `room` are open).
        watch_close(inner, &conn);
        if let Some(s) = slots.shards.get_mut(landed as usize) {
            s.push(Held { conn, lease });
        }
        if covers && total >= b.target {
            retire_surplus(inner, slots, b.want, None);
        }
        Placement::Kept { covers }
    } else {
        Metrics::inc(&inner.metrics.excess_connections_closed);
        conn.close();
        Placement::Closed
    }
}

/// The background coverage attempts of a pool without a usable shard-aware
/// port.
struct Coverage {
    /// The earliest moment of the next attempt.
    next: Instant,
    /// Whether the next attempt goes to the regular port (else, behind a
    /// NAT, to the shard-aware port).
    via_regular: bool,
    /// Intervals between attempts: doubled by each miss when only the
    /// regular port is usable, back to 1 when an attempt covers a shard.
    slowdown: u32,
}

impl Coverage {
    /// The shard a background attempt aims at, if one is due now (and then
    /// the next one is scheduled). Through the shard-aware port, a source
    /// port for any shard: the NAT decides where it lands (a NAT that
    /// shifts ports by a constant would otherwise never reach the one
    /// missing shard).
    fn attempt_due(
        &mut self,
        inner: &PoolInner,
        plan: &mut RefillPlan,
        shards: usize,
    ) -> Option<Shard> {
        let now = Instant::now();
        if now < self.next {
            return None;
        }
        let interval = inner.config.coverage_interval.saturating_mul(self.slowdown);
        self.next = now + coverage_delay(interval, plan.rng());
        Metrics::inc(&inner.metrics.coverage_attempts);
        Some(plan.rng().u16(..shards as u16))
    }

    /// After a round: `covered`, whether it covered a shard;
    /// `nat_via_shard_aware`, whether the node's shard-aware port is usable
    /// behind a NAT.
    fn after_round(&mut self, fill: Fill, covered: bool, nat_via_shard_aware: bool) {
        if covered {
            self.slowdown = 1;
            return;
        }
        if fill != Fill::Background {
            return;
        }
        // Missed: the other port next time. The regular port gives every
        // client the same least loaded shard (ties: the lowest), so many
        // clients behind a NAT miss there; one client alone hits its missing
        // shard there at once.
        self.via_regular = !self.via_regular;
        // With the regular port alone, misses are what many clients get:
        // try less often (up to MAX_SLOWDOWN intervals apart) rather than
        // churn connections at full rate for long.
        if !nat_via_shard_aware {
            self.slowdown = (self.slowdown * 2).min(MAX_SLOWDOWN);
        }
    }
}

/// The longest gap between background attempts, in coverage intervals.
const MAX_SLOWDOWN: u32 = 16;

/// Most connections a pool keeps beyond its wanted total while covering
/// shards in the background: a quarter of the shards, at least one.
fn surplus_bound(shards: usize) -> usize {
    (shards / 4).max(1)
}

/// Every shard is covered: retires what the pool holds beyond its wanted
/// total.
fn trim_surplus(inner: &PoolInner, slots: &mut Slots, want: usize, target: usize) {
    while slots.total() > target {
        if !retire_surplus(inner, slots, want, None) {
            return;
        }
    }
}

/// A delay uniformly drawn from `[interval / 2, 3 * interval / 2)`: pools
/// that filled at the same moment do not try to cover shards in step.
fn coverage_delay(interval: Duration, rng: &mut fastrand::Rng) -> Duration {
    interval / 2 + spread(interval, rng)
}

/// Keeps `e` as the pool's latest connection failure (see
/// [`super::NodePool::last_error`]).
fn note_failure(inner: &PoolInner, e: ConnectionError) {
    *inner
        .last_error
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(e));
}

/// Counts a handshake the node shed (see [`super::shed`]); the caller's
/// round fails, which backs this node's reconnects off.
fn note_shed(inner: &PoolInner, e: &ConnectionError) {
    if OpenFailure::of(e) == OpenFailure::Shed {
        Metrics::inc(&inner.metrics.handshakes_shed);
        tracing::debug!(node = %inner.addr, error = %e, "the node shed a handshake; backing off");
    }
}

/// The pool holds more than it wants: closes one connection of the shard
/// with the most (beyond `want`; another shard than `not` if there is one,
/// its oldest connection), once the requests already on it are done.
fn retire_surplus(inner: &PoolInner, slots: &mut Slots, want: usize, not: Option<usize>) -> bool {
    let surplus = |skip: Option<usize>| {
        slots
            .shards
            .iter()
            .enumerate()
            .filter(|&(i, held)| held.len() > want && Some(i) != skip)
            .max_by_key(|(_, held)| held.len())
            .map(|(i, _)| i)
    };
    let Some(shard) = surplus(not).or_else(|| surplus(None)) else {
        return false;
    };
    let oldest_first = Some(shard) != not;
    let Some(held) = slots.shards.get_mut(shard).and_then(|h| {
        if oldest_first && !h.is_empty() {
            Some(h.remove(0))
        } else {
            h.pop()
        }
    }) else {
        return false;
    };
    Metrics::inc(&inner.metrics.surplus_connections_retired);
    tracing::debug!(node = %inner.addr, shard, "retiring a surplus connection");
    let cancel = inner.cancel.clone();
    tokio::spawn(async move {
        // The next snapshot no longer offers it; a request that took it
        // from the previous one gets a moment to start, then the ones in
        // flight get up to RETIRE_DRAIN to finish.
        let wait = async {
            tokio::time::sleep(RETIRE_GRACE).await;
            let until = Instant::now() + RETIRE_DRAIN;
            while held.conn.is_usable() && held.conn.in_flight() > 0 && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            _ = wait => {}
            _ = cancel.cancelled() => {}
        }
        held.conn.close();
        drop(held.lease);
    });
    true
}

/// How long a retired connection stays open before its drain starts.
const RETIRE_GRACE: Duration = Duration::from_millis(100);
/// Longest wait for a retired connection's requests.
const RETIRE_DRAIN: Duration = Duration::from_secs(10);

async fn open_regular(inner: &PoolInner) -> Result<Connection, ConnectionError> {
    let started = Instant::now();
    let in_flight = InFlight::new(&inner.metrics);
    let r = connection::open(inner.addr, None, &inner.config.connection).await;
    drop(in_flight);
    if r.is_ok() {
        note_setup(inner, started.elapsed());
    }
    let shard = match &r {
        Ok(conn) => ShardTag::of(conn.shard()),
        Err(_) => ShardTag::Unknown,
    };
    inner
        .labels
        .connection_attempt(PortKind::Regular, shard, r.is_ok());
    Metrics::inc(if r.is_ok() {
        &inner.metrics.connects_regular_ok
    } else {
        &inner.metrics.connects_regular_failed
    });
    if r.as_ref().err().is_some_and(timed_out) {
        Metrics::inc(&inner.metrics.connect_timeouts);
    }
    if let Ok(conn) = &r {
        count_tls(inner, conn);
    }
    r
}

/// Counts how an opened connection's TLS handshake ran (nothing without
/// TLS): full, or resumed with a session ticket.
fn count_tls(inner: &PoolInner, conn: &Connection) {
    let info = conn.info();
    if !info.tls {
        return;
    }
    Metrics::inc(if info.tls_resumed {
        &inner.metrics.tls_handshakes_resumed
    } else {
        &inner.metrics.tls_handshakes_full
    });
    inner.labels.tls_handshake(info.tls_resumed);
}

/// Whether a connection attempt failed by timing out.
fn timed_out(e: &ConnectionError) -> bool {
    matches!(e, ConnectionError::Timeout { .. })
        || matches!(e, ConnectionError::Open(o) if o.timed_out())
}

/// What an attempt through the shard-aware port may conclude about the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortJudgement {
    /// The port's health follows the outcome (where the connection landed,
    /// why the port failed), and a refusal right after the pool lost its
    /// connections does not fall back.
    Judge,
    /// A background coverage attempt on a node behind a NAT: the pool
    /// already falls back for its port, so where the attempt lands says
    /// nothing new and the port's health is left alone.
    BehindNat,
}

/// Opens a connection to `shard` through the shard-aware port, falling back to
/// the regular port (at once) when that port fails for this connection.
async fn open_for_shard(
    inner: &PoolInner,
    sharder: Sharder,
    shard: Shard,
    sa_addr: SocketAddr,
    seed: u64,
    judgement: PortJudgement,
) -> Result<(Connection, Option<PortLease>), ConnectionError> {
    let judged = judgement == PortJudgement::Judge;
    let started = Instant::now();
    let in_flight = InFlight::new(&inner.metrics);
    let opened = open_shard_aware(inner, sharder, shard, sa_addr, seed).await;
    drop(in_flight);
    match opened {
        Ok((conn, lease)) => {
            note_setup(inner, started.elapsed());
            let landed = conn.shard().unwrap_or(shard);
            count_shard_aware(inner, ShardTag::Shard(landed), true);
            count_tls(inner, &conn);
            if judged {
                let t = lock_health(inner).on_landed(shard, landed, Instant::now());
                report(inner, t);
            }
            Ok((conn, Some(lease)))
        }
        Err(ShardAwareError::Fallback(FallbackReason::Refused, Some(error)))
            if judged && lock_health(inner).in_restart_grace(Instant::now()) =>
        {
            // Refused right after the pool lost its connections: the node
            // is most likely stopping (its listeners close one after
            // another), so the regular port would give at best a connection
            // about to break, or one to the restarted node on a shard of
            // its choosing. A failed attempt; the round backs off.
            count_shard_aware(inner, ShardTag::Shard(shard), false);
            tracing::debug!(node = %inner.addr, error = %error, "shard-aware port refused right after lost connections; not falling back");
            Err(error)
        }
        Err(ShardAwareError::Fallback(reason, error)) => {
            if reason != FallbackReason::PortsExhausted {
                count_shard_aware(inner, ShardTag::Shard(shard), false);
                if reason == FallbackReason::TimedOut {
                    Metrics::inc(&inner.metrics.connect_timeouts);
                }
            }
            tracing::debug!(node = %inner.addr, %reason, error = ?error, "shard-aware port failed; trying the regular port");
            let regular = open_regular(inner).await;
            // Blame the shard-aware port only if the regular port works: a
            // node that is down refuses both, and that is no reason to stop
            // using its shard-aware port once it is back.
            if judged && (regular.is_ok() || reason == FallbackReason::PortsExhausted) {
                let t = lock_health(inner).on_failure(reason, Instant::now());
                report(inner, t);
            }
            regular.map(|c| (c, None))
        }
        Err(ShardAwareError::Other(e)) => {
            count_shard_aware(inner, ShardTag::Shard(shard), false);
            if timed_out(&e) {
                Metrics::inc(&inner.metrics.connect_timeouts);
            }
            Err(e)
        }
    }
}

/// Counts an attempt through the shard-aware port (the metric and the
/// labelled attempt): by the shard it landed on when it succeeded, by the
/// shard it aimed at when it failed.
fn count_shard_aware(inner: &PoolInner, shard: ShardTag, ok: bool) {
    Metrics::inc(if ok {
        &inner.metrics.connects_shard_aware_ok
    } else {
        &inner.metrics.connects_shard_aware_failed
    });
    inner
        .labels
        .connection_attempt(PortKind::ShardAware, shard, ok);
}

fn lock_health(inner: &PoolInner) -> std::sync::MutexGuard<'_, super::nat::ShardAwareHealth> {
    inner.health.lock().unwrap_or_else(|e| e.into_inner())
}

fn report(inner: &PoolInner, t: Option<Transition>) {
    match t {
        Some(Transition::Disabled { reason, probation }) => {
            Metrics::inc(&inner.metrics.shard_aware_fallbacks);
            inner.labels.shard_aware_fallback(reason.name());
            tracing::warn!(node = %inner.addr, %reason, ?probation, "not using the shard-aware port for this node");
        }
        Some(Transition::Restored) => {
            Metrics::inc(&inner.metrics.shard_aware_restored);
            inner.labels.shard_aware_restored();
            tracing::info!(node = %inner.addr, "using the shard-aware port again");
        }
        None => {}
    }
}

enum ShardAwareError {
    /// The port itself failed: fall back (with this reason).
    Fallback(FallbackReason, Option<ConnectionError>),
    /// Something else failed (handshake refused, ...): no fallback.
    Other(ConnectionError),
}

async fn open_shard_aware(
    inner: &PoolInner,
    sharder: Sharder,
    shard: Shard,
    sa_addr: SocketAddr,
    seed: u64,
) -> Result<(Connection, PortLease), ShardAwareError> {
    let allocator = SourcePortAllocator::global();
    let mut rng = fastrand::Rng::with_seed(seed);
    let local_ip = match sa_addr.ip() {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let candidates: Vec<u16> = allocator
        .candidates(
            &sharder,
            shard,
            inner.config.source_ports,
            sa_addr,
            &mut rng,
        )
        .take(inner.config.max_source_port_attempts)
        .collect();
    for port in candidates {
        let Some(lease) = allocator.try_lease(port, sa_addr) else {
            continue;
        };
        let source = SocketAddr::new(local_ip, port);
        match connection::open(sa_addr, Some(source), &inner.config.connection).await {
            Ok(conn) => return Ok((conn, lease)),
            Err(ConnectionError::Open(e)) if e.port_taken() => {
                Metrics::inc(&inner.metrics.source_port_retries);
                continue;
            }
            // The port answered; the node shed the handshake under load.
            Err(e) if super::shed::is_shed(&e) => return Err(ShardAwareError::Other(e)),
            Err(ConnectionError::Open(e)) if e.refused() => {
                return Err(ShardAwareError::Fallback(
                    FallbackReason::Refused,
                    Some(ConnectionError::Open(e)),
                ))
            }
            Err(e @ ConnectionError::Open(_)) | Err(e @ ConnectionError::Timeout { .. }) => {
                // A connect timeout, or a handshake that never gets an answer:
                // the port is silently dropping us.
                return Err(if timed_out(&e) {
                    ShardAwareError::Fallback(FallbackReason::TimedOut, Some(e))
                } else {
                    ShardAwareError::Other(e)
                });
            }
            Err(e) => return Err(ShardAwareError::Other(e)),
        }
    }
    Err(ShardAwareError::Fallback(
        FallbackReason::PortsExhausted,
        None,
    ))
}
