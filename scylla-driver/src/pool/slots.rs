//! What a pool holds, by shard ([`Slots`] of [`Held`] connections), and
//! applying the decisions about it (made on counts in [`super::fill`]): where
//! an opened connection goes ([`place`]), which are missing ([`missing`]),
//! and retiring what is held beyond the wanted total once it drains.

use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_cql::frame::response::supported::ShardingInfo;
use scylla_cql::sharding::Shard;
use tokio::task::JoinSet;

use super::fill::{placement, surplus_shard, Bounds, Placement};
use super::shard_port::PortLease;
use super::PoolInner;
use crate::connection::{Connection, ConnectionError};
use crate::metrics::Metrics;

/// How long a retired connection stays open before its drain starts.
const RETIRE_GRACE: Duration = Duration::from_millis(100);
/// Longest wait for a retired connection's requests.
const RETIRE_DRAIN: Duration = Duration::from_secs(10);

/// A pooled connection and the source port it holds, if it chose one.
pub(super) struct Held {
    pub(super) conn: Connection,
    /// `Some` for a connection through the shard-aware port.
    pub(super) lease: Option<PortLease>,
}

/// What the pool holds, by shard.
pub(super) struct Slots {
    pub(super) shards: Vec<Vec<Held>>,
    pub(super) sharding: Option<ShardingInfo>,
    /// First-connection setups still running, tagged with their race
    /// (`refill::race_first`); aborted when the pool stops.
    pub(super) late: JoinSet<(u64, Result<Connection, ConnectionError>)>,
    /// The last race's tag.
    pub(super) race: u64,
}

impl Slots {
    pub(super) fn total(&self) -> usize {
        self.shards.iter().map(Vec::len).sum()
    }

    pub(super) fn prune(&mut self) -> usize {
        let mut removed = 0;
        for s in &mut self.shards {
            let before = s.len();
            s.retain(|h| h.conn.is_usable());
            removed += before - s.len();
        }
        removed
    }
}

/// Closes `held` once no request is on it (after [`RETIRE_GRACE`], at most
/// [`RETIRE_DRAIN`] later).
pub(super) async fn drain_then_close(held: Held) {
    drained(&held.conn).await;
    held.conn.close();
    drop(held.lease);
}

/// Waits until no request is on `conn`: a request that took it from the
/// previous snapshot gets [`RETIRE_GRACE`] to start, then the ones in flight
/// get up to [`RETIRE_DRAIN`] to finish.
pub(super) async fn drained(conn: &Connection) {
    tokio::time::sleep(RETIRE_GRACE).await;
    let until = Instant::now() + RETIRE_DRAIN;
    while conn.is_usable() && conn.in_flight() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub(super) fn watch_close(inner: &Arc<PoolInner>, conn: &Connection) {
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

/// The slot a connection goes to: its shard, or the one slot of a node
/// pooled as unsharded.
pub(super) fn slot_of(slots: &Slots, conn: &Connection) -> Shard {
    if slots.sharding.is_none() {
        0
    } else {
        conn.shard().unwrap_or(0)
    }
}

/// One entry per missing connection: the shard it is for.
pub(super) fn missing(inner: &PoolInner, slots: &Slots) -> Vec<Shard> {
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

/// Puts an opened connection where it landed, or closes it.
pub(super) fn place(
    inner: &Arc<PoolInner>,
    slots: &mut Slots,
    conn: Connection,
    lease: Option<PortLease>,
    wanted: Shard,
    background: bool,
    b: Bounds,
) -> Placement {
    let landed = slot_of(slots, &conn);
    if lease.is_some() && landed != wanted {
        Metrics::inc(&inner.metrics.wrong_shard_landings);
        tracing::debug!(node = %inner.addr, wanted, landed, "shard-aware connection landed on another shard");
    }
    let held: Vec<usize> = slots.shards.iter().map(Vec::len).collect();
    let decision = placement(&held, landed as usize, b, background);
    match decision {
        Placement::Closed => {
            Metrics::inc(&inner.metrics.excess_connections_closed);
            conn.close();
        }
        Placement::Kept { .. } | Placement::Rotated => {
            watch_close(inner, &conn);
            if let Some(s) = slots.shards.get_mut(landed as usize) {
                s.push(Held { conn, lease });
            }
            match decision {
                Placement::Rotated => {
                    retire_surplus(inner, slots, b.want, Some(landed as usize));
                }
                Placement::Kept { retire: true, .. } => {
                    retire_surplus(inner, slots, b.want, None);
                }
                _ => {}
            }
        }
    }
    decision
}

/// Every shard is covered: retires what the pool holds beyond its wanted
/// total.
pub(super) fn trim_surplus(inner: &PoolInner, slots: &mut Slots, want: usize, target: usize) {
    while slots.total() > target {
        if !retire_surplus(inner, slots, want, None) {
            return;
        }
    }
}

/// The pool holds more than it wants: closes one connection of the shard
/// with the most (beyond `want`; another shard than `not` if there is one,
/// its oldest connection), once the requests already on it are done.
pub(super) fn retire_surplus(
    inner: &PoolInner,
    slots: &mut Slots,
    want: usize,
    not: Option<usize>,
) -> bool {
    let held: Vec<usize> = slots.shards.iter().map(Vec::len).collect();
    let Some(shard) = surplus_shard(&held, want, not) else {
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
        // The next snapshot no longer offers it.
        tokio::select! {
            _ = drained(&held.conn) => {}
            _ = cancel.cancelled() => {}
        }
        held.conn.close();
        drop(held.lease);
    });
    true
}
