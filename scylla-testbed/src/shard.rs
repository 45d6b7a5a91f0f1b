//! Which shard a new connection belongs to, exactly as ScyllaDB decides it.
//!
//! - On the regular port ScyllaDB's listener balances connections: a new one
//!   goes to the shard with the fewest connections now (ties: lowest shard).
//! - On the shard-aware port the client chooses: the shard is
//!   `source_port % shards`, with the source port *as the node sees it*
//!   (after any NAT rewrite, see [`crate::faults`]).
//!
//! A [`ShardConnection`] is the connection's membership of its shard: it
//! counts in the shard's "current connections" (which the balancing reads)
//! until dropped.

use std::sync::Arc;

use scylla_cql::sharding::{Shard, Sharder};

use crate::handler::PortKind;
use crate::stats::{bump_both, NodeStats};

/// The shard with the fewest current connections (ties: the lowest).
pub(crate) fn least_loaded(stats: &NodeStats) -> Shard {
    let mut best: (u64, usize) = (u64::MAX, 0);
    for (i, s) in stats.shards.iter().enumerate() {
        let n = s.connections.current();
        if n < best.0 {
            best = (n, i);
        }
    }
    // There are at most u16::MAX shards (the config is a u16).
    best.1 as Shard
}

/// The shard a connection lands on.
pub(crate) fn assign(
    stats: &NodeStats,
    sharder: &Sharder,
    kind: PortKind,
    seen_port: u16,
) -> Shard {
    match kind {
        // ScyllaDB's maintenance socket listens on every shard, like the
        // regular port: the client has no say.
        PortKind::Regular | PortKind::MaintenanceSocket => least_loaded(stats),
        PortKind::ShardAware => sharder.shard_of_source_port(seen_port),
    }
}

/// A connection's place on its shard; counted until dropped.
#[derive(Debug)]
pub(crate) struct ShardConnection {
    stats: Arc<NodeStats>,
    shard: Shard,
}

impl ShardConnection {
    /// Joins `shard`, counting the accept on `kind`'s counter.
    pub(crate) fn join(stats: Arc<NodeStats>, shard: Shard, kind: PortKind) -> Self {
        let idx = shard as usize;
        match kind {
            PortKind::Regular => bump_both(&stats, idx, |s| &s.accepted_regular),
            PortKind::ShardAware => bump_both(&stats, idx, |s| &s.accepted_shard_aware),
            PortKind::MaintenanceSocket => {
                bump_both(&stats, idx, |s| &s.accepted_maintenance_socket)
            }
        }
        stats.node.connections.inc();
        if let Some(s) = stats.shards.get(idx) {
            s.connections.inc();
        }
        ShardConnection { stats, shard }
    }

    pub(crate) fn shard(&self) -> Shard {
        self.shard
    }
}

impl Drop for ShardConnection {
    fn drop(&mut self) {
        self.stats.node.connections.dec();
        if let Some(s) = self.stats.shards.get(self.shard as usize) {
            s.connections.dec();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU16;

    #[test]
    fn regular_port_fills_the_emptiest_shard_first() {
        let stats = Arc::new(NodeStats::new(4));
        let sharder = Sharder::new(NonZeroU16::new(4).unwrap(), 12);
        let mut held = Vec::new();
        let mut shards = Vec::new();
        for _ in 0..6 {
            let s = assign(&stats, &sharder, PortKind::Regular, 0);
            shards.push(s);
            held.push(ShardConnection::join(stats.clone(), s, PortKind::Regular));
        }
        assert_eq!(shards, vec![0, 1, 2, 3, 0, 1]);
        // Free a connection of shard 3: it is the emptiest again.
        held.remove(3);
        assert_eq!(assign(&stats, &sharder, PortKind::Regular, 0), 3);
        drop(held);
        assert_eq!(stats.node.connections.current(), 0);
        assert_eq!(stats.node.connections.peak(), 6);
    }

    #[test]
    fn maintenance_socket_balances_like_the_regular_port() {
        let stats = Arc::new(NodeStats::new(2));
        let sharder = Sharder::new(NonZeroU16::new(2).unwrap(), 12);
        let a = assign(&stats, &sharder, PortKind::MaintenanceSocket, 0);
        let _a = ShardConnection::join(stats.clone(), a, PortKind::MaintenanceSocket);
        let b = assign(&stats, &sharder, PortKind::MaintenanceSocket, 0);
        let _b = ShardConnection::join(stats.clone(), b, PortKind::MaintenanceSocket);
        assert_eq!((a, b), (0, 1));
        let snap = stats.snapshot(true);
        assert_eq!(snap.node.accepted_maintenance_socket, 2);
        assert_eq!(snap.node.accepted_regular, 0);
        assert_eq!(snap.shards[1].accepted_maintenance_socket, 1);
    }

    #[test]
    fn shard_aware_port_uses_the_source_port() {
        let stats = NodeStats::new(8);
        let sharder = Sharder::new(NonZeroU16::new(8).unwrap(), 12);
        assert_eq!(assign(&stats, &sharder, PortKind::ShardAware, 50005), 5);
    }
}
