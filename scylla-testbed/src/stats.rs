//! Accounting of what the cluster saw: connections, handshakes, requests.
//!
//! Tests assert on these numbers (did the driver open one connection per
//! shard? did the storm stay under the admission limit? how many requests
//! reached the wrong shard?), so they are kept per shard and per node with
//! plain atomics: bumping a counter never takes a lock, and a
//! [`NodeStatsSnapshot`] is a relaxed read of each one (good enough for tests,
//! which read after the traffic they measure has finished).

use std::sync::atomic::{AtomicU64, Ordering};

/// A current value with its high-water mark (concurrent connections,
/// handshakes waiting, ...).
#[derive(Debug, Default)]
pub(crate) struct Gauge {
    current: AtomicU64,
    peak: AtomicU64,
}

impl Gauge {
    pub(crate) fn inc(&self) {
        let now = self.current.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    pub(crate) fn dec(&self) {
        // Every dec pairs with an earlier inc (guards below), so this never
        // wraps; saturate anyway so a bug shows as a wrong number, not 2^64.
        let _ = self
            .current
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(1))
            });
    }

    pub(crate) fn current(&self) -> u64 {
        self.current.load(Ordering::Relaxed)
    }

    pub(crate) fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

/// Decrements a [`Gauge`] when dropped, so every exit path (errors, shedding,
/// cancellation) gives its unit back.
#[derive(Debug)]
pub(crate) struct GaugeGuard<'a>(&'a Gauge);

impl<'a> GaugeGuard<'a> {
    pub(crate) fn new(g: &'a Gauge) -> Self {
        g.inc();
        GaugeGuard(g)
    }
}

impl Drop for GaugeGuard<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Live counters of one shard (or of a whole node: the same fields).
///
/// The CQL layer bumps the two routing counters through
/// [`crate::ConnCtx::record_wrong_shard`] and [`crate::ConnCtx::record_non_replica`].
#[derive(Debug, Default)]
pub(crate) struct ShardStats {
    pub(crate) accepted_regular: AtomicU64,
    pub(crate) accepted_shard_aware: AtomicU64,
    pub(crate) accepted_tls: AtomicU64,
    pub(crate) accepted_proxy: AtomicU64,
    pub(crate) accepted_maintenance_socket: AtomicU64,
    pub(crate) connections: Gauge,
    pub(crate) handshakes_started: AtomicU64,
    pub(crate) handshakes_finished: AtomicU64,
    pub(crate) handshakes_shed: AtomicU64,
    pub(crate) handshakes_waiting: Gauge,
    pub(crate) handshakes_in_progress: Gauge,
    pub(crate) requests_served: AtomicU64,
    pub(crate) requests_wrong_shard: AtomicU64,
    pub(crate) requests_non_replica: AtomicU64,
    pub(crate) requests_tablet_misrouted: AtomicU64,
    pub(crate) batch_rows: AtomicU64,
    pub(crate) batch_rows_misplaced: AtomicU64,
    pub(crate) prepares: AtomicU64,
    pub(crate) requests_non_leader: AtomicU64,
    pub(crate) protocol_errors: AtomicU64,
    pub(crate) version_refusals: AtomicU64,
    pub(crate) connections_v5: AtomicU64,
    pub(crate) segment_checksum_failures: AtomicU64,
    pub(crate) tls_handshakes_full: AtomicU64,
    pub(crate) tls_handshakes_resumed: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl ShardStats {
    fn snapshot(&self) -> StatsCounters {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsCounters {
            accepted_regular: r(&self.accepted_regular),
            accepted_shard_aware: r(&self.accepted_shard_aware),
            accepted_tls: r(&self.accepted_tls),
            accepted_proxy: r(&self.accepted_proxy),
            accepted_maintenance_socket: r(&self.accepted_maintenance_socket),
            connections: self.connections.current(),
            peak_connections: self.connections.peak(),
            handshakes_started: r(&self.handshakes_started),
            handshakes_finished: r(&self.handshakes_finished),
            handshakes_shed: r(&self.handshakes_shed),
            handshakes_waiting: self.handshakes_waiting.current(),
            peak_handshakes_waiting: self.handshakes_waiting.peak(),
            handshakes_in_progress: self.handshakes_in_progress.current(),
            peak_handshakes_in_progress: self.handshakes_in_progress.peak(),
            requests_served: r(&self.requests_served),
            requests_wrong_shard: r(&self.requests_wrong_shard),
            requests_non_replica: r(&self.requests_non_replica),
            requests_tablet_misrouted: r(&self.requests_tablet_misrouted),
            batch_rows: r(&self.batch_rows),
            batch_rows_misplaced: r(&self.batch_rows_misplaced),
            prepares: r(&self.prepares),
            requests_non_leader: r(&self.requests_non_leader),
            protocol_errors: r(&self.protocol_errors),
            version_refusals: r(&self.version_refusals),
            connections_v5: r(&self.connections_v5),
            segment_checksum_failures: r(&self.segment_checksum_failures),
            tls_handshakes_full: r(&self.tls_handshakes_full),
            tls_handshakes_resumed: r(&self.tls_handshakes_resumed),
        }
    }
}

/// Live counters of one node: its shards, plus node-wide gauges (a node's
/// peak of concurrent handshakes is not the sum of its shards' peaks).
#[derive(Debug)]
pub(crate) struct NodeStats {
    pub(crate) shards: Box<[ShardStats]>,
    /// Node-wide gauges and counters (the same events as the shards', counted
    /// once more for the node).
    pub(crate) node: ShardStats,
    /// Connections whose source port a NAT fault rewrote.
    pub(crate) nat_rewrites: AtomicU64,
    /// Connections accepted and held without an answer (silent port fault).
    pub(crate) silent_held: AtomicU64,
    /// Outgoing v5 segments damaged by the corrupt-segments fault.
    pub(crate) segments_corrupted: AtomicU64,
    /// Outgoing v4 frames whose length the damaged-lengths fault changed.
    pub(crate) v4_lengths_damaged: AtomicU64,
}

impl NodeStats {
    pub(crate) fn new(nr_shards: u16) -> Self {
        NodeStats {
            shards: (0..nr_shards).map(|_| ShardStats::default()).collect(),
            node: ShardStats::default(),
            nat_rewrites: AtomicU64::new(0),
            silent_held: AtomicU64::new(0),
            segments_corrupted: AtomicU64::new(0),
            v4_lengths_damaged: AtomicU64::new(0),
        }
    }

    pub(crate) fn snapshot(&self, up: bool) -> NodeStatsSnapshot {
        NodeStatsSnapshot {
            up,
            node: self.node.snapshot(),
            shards: self.shards.iter().map(ShardStats::snapshot).collect(),
            nat_rewrites: self.nat_rewrites.load(Ordering::Relaxed),
            silent_held: self.silent_held.load(Ordering::Relaxed),
            segments_corrupted: self.segments_corrupted.load(Ordering::Relaxed),
            v4_lengths_damaged: self.v4_lengths_damaged.load(Ordering::Relaxed),
        }
    }
}

/// A point-in-time copy of one shard's (or node's) counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsCounters {
    /// Connections accepted on the regular CQL port.
    pub accepted_regular: u64,
    /// Connections accepted on the shard-aware port.
    pub accepted_shard_aware: u64,
    /// Of the accepts above, those on a TLS port (regular or shard-aware).
    pub accepted_tls: u64,
    /// Connections accepted on a PROXY protocol v2 listener (through a
    /// client-route load balancer), counted on the shard the header's
    /// source port chose.
    pub accepted_proxy: u64,
    /// Connections accepted on the Unix-domain maintenance socket
    /// ([`crate::TestClusterBuilder::maintenance_socket`]).
    pub accepted_maintenance_socket: u64,
    /// Connections open now.
    pub connections: u64,
    /// Most connections open at once.
    pub peak_connections: u64,
    /// Handshakes that reached STARTUP.
    pub handshakes_started: u64,
    /// Handshakes answered with READY or AUTH_SUCCESS.
    pub handshakes_finished: u64,
    /// Handshakes closed because they waited too long for admission.
    pub handshakes_shed: u64,
    /// Handshakes waiting for admission now.
    pub handshakes_waiting: u64,
    /// Most handshakes waiting for admission at once.
    pub peak_handshakes_waiting: u64,
    /// Handshakes in their CPU stage now.
    pub handshakes_in_progress: u64,
    /// Most handshakes in their CPU stage at once.
    pub peak_handshakes_in_progress: u64,
    /// Requests passed to the request handler and answered.
    pub requests_served: u64,
    /// Requests the CQL layer found on a shard that does not own their token.
    pub requests_wrong_shard: u64,
    /// Requests the CQL layer found on a node that is not a replica.
    pub requests_non_replica: u64,
    /// Requests for a tablet table that reached a node which is not one of
    /// the tablet's replicas, or a replica node on a shard other than the
    /// tablet's shard there.
    pub requests_tablet_misrouted: u64,
    /// Statements of BATCH requests that address one partition (each row of
    /// a batch counts, whatever the batch's other rows).
    pub batch_rows: u64,
    /// Of those, the ones whose partition this shard does not own (another
    /// shard's, another node's, or another tablet replica's): rows the
    /// coordinator must forward.
    pub batch_rows_misplaced: u64,
    /// PREPARE requests received.
    pub prepares: u64,
    /// Requests for a strongly consistent table (`consistency = 'global'`)
    /// that reached a node other than the Raft leader of their tablet (a
    /// ScyllaDB node forwards them to the leader).
    pub requests_non_leader: u64,
    /// Malformed frames answered with a protocol error (version refusals
    /// included).
    pub protocol_errors: u64,
    /// Connections whose first frame had a protocol version the cluster
    /// does not serve (a v5 frame on a v4-only cluster, v3, garbage):
    /// answered with a protocol error "Invalid or unsupported protocol
    /// version (N); ..." and closed, as a server does to make a client
    /// negotiate down.
    pub version_refusals: u64,
    /// Connections whose first frame was protocol v5 (and served).
    pub connections_v5: u64,
    /// v5 connections closed because a segment from the client failed its
    /// CRC24 (header) or CRC32 (payload) check.
    pub segment_checksum_failures: u64,
    /// TLS handshakes completed in full (certificate, key exchange).
    pub tls_handshakes_full: u64,
    /// TLS handshakes that resumed a session with a ticket.
    pub tls_handshakes_resumed: u64,
}

/// A point-in-time copy of one node's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatsSnapshot {
    /// Whether the node was running when the snapshot was taken.
    pub up: bool,
    /// Node-wide counters (peaks are node-wide peaks).
    pub node: StatsCounters,
    /// Per-shard counters, indexed by shard.
    pub shards: Vec<StatsCounters>,
    /// Connections whose source port a NAT fault rewrote.
    pub nat_rewrites: u64,
    /// Connections held silently by the silent shard-aware port fault.
    pub silent_held: u64,
    /// Outgoing v5 segments damaged by [`crate::Faults::corrupt_segments`].
    pub segments_corrupted: u64,
    /// Outgoing v4 frames damaged by [`crate::Faults::damage_v4_lengths`].
    pub v4_lengths_damaged: u64,
}

/// A point-in-time copy of every node's counters, indexed by node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterStats {
    /// Per-node snapshots, indexed like the cluster's nodes.
    pub nodes: Vec<NodeStatsSnapshot>,
}

impl ClusterStats {
    /// Sum of `f` over all nodes' node-wide counters.
    pub fn total(&self, f: impl Fn(&StatsCounters) -> u64) -> u64 {
        self.nodes.iter().map(|n| f(&n.node)).sum()
    }
}

/// Bumps a counter on the shard and on its node.
pub(crate) fn bump_both(node: &NodeStats, shard: usize, f: impl Fn(&ShardStats) -> &AtomicU64) {
    bump(f(&node.node));
    if let Some(s) = node.shards.get(shard) {
        bump(f(s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauge_tracks_peak() {
        let g = Gauge::default();
        {
            let _a = GaugeGuard::new(&g);
            let _b = GaugeGuard::new(&g);
            assert_eq!(g.current(), 2);
        }
        assert_eq!(g.current(), 0);
        assert_eq!(g.peak(), 2);
        g.dec();
        assert_eq!(g.current(), 0);
    }

    #[test]
    fn snapshot_sums() {
        let n = NodeStats::new(4);
        bump_both(&n, 2, |s| &s.requests_served);
        bump_both(&n, 9, |s| &s.requests_served);
        let snap = n.snapshot(true);
        assert_eq!(snap.node.requests_served, 2);
        assert_eq!(snap.shards[2].requests_served, 1);
        let c = ClusterStats { nodes: vec![snap] };
        assert_eq!(c.total(|s| s.requests_served), 2);
    }
}
