//! Opening one connection of a pool: through the regular port, or through
//! the shard-aware port with a chosen source port, falling back to the
//! regular port when that port fails (and telling the node's shard-aware
//! health, `super::nat`, what the attempt showed). Every open is counted:
//! its setup in flight and how long it took (which the refill task's race
//! of first connections reads), its port, shard and outcome.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use scylla_cql::sharding::{Shard, Sharder};

use super::nat::{FallbackReason, Transition};
use super::shard_port::{PortLease, SourcePortAllocator};
use super::PoolInner;
use crate::connection::{self, Connection, ConnectionError};
use crate::metrics::record::{PortKind, ShardTag};
use crate::metrics::Metrics;

/// Counts a setup in flight (see `refill::race_due`) until dropped.
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

/// Records how long a successful setup took (see `refill::race_due`).
fn note_setup(inner: &PoolInner, took: Duration) {
    let us = micros(took);
    // `fetch_update` with a closure that always returns `Some` cannot fail.
    let _ = inner.metrics.slowest_recent_setup_micros.fetch_update(
        Ordering::Relaxed,
        Ordering::Relaxed,
        |old| Some(us.max(old - old / 8)),
    );
}

/// Records how long a pool's first connection (it held none) took: the
/// session's quickest bounds the spread after an outage.
pub(super) fn note_first_setup(inner: &PoolInner, took: Duration) {
    let us = micros(took).max(1);
    // `fetch_update` with a closure that always returns `Some` cannot fail.
    let _ = inner.metrics.quickest_setup_micros.fetch_update(
        Ordering::Relaxed,
        Ordering::Relaxed,
        |old| Some(if old == 0 { us } else { old.min(us) }),
    );
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The session's quickest first connection of a pool so far, if any.
pub(super) fn quickest_setup(inner: &PoolInner) -> Option<Duration> {
    match inner.metrics.quickest_setup_micros.load(Ordering::Relaxed) {
        0 => None,
        us => Some(Duration::from_micros(us)),
    }
}

pub(super) async fn open_regular(inner: &PoolInner) -> Result<Connection, ConnectionError> {
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
pub(super) enum PortJudgement {
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
pub(super) async fn open_for_shard(
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

pub(super) fn lock_health(
    inner: &PoolInner,
) -> std::sync::MutexGuard<'_, super::nat::ShardAwareHealth> {
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
