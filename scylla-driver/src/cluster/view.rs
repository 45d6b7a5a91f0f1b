//! A read-only view of the cluster for applications: its nodes, their
//! datacenters, racks and shards, and where the replicas of a token are
//! (node and shard, from the token ring or from the table's tablets).
//!
//! A [`ClusterView`] is a snapshot: it does not change after it was taken
//! (take another with [`Session::cluster`](crate::Session::cluster) to see
//! later changes), and reading it never blocks requests.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use scylla_cql::token::Token;
use uuid::Uuid;

use super::state::ClusterState;
use super::tablets::TabletStore;

/// A snapshot of the cluster as the session sees it. Cheap to take (two
/// reference counts) and to keep.
///
/// ```no_run
/// # async fn demo(session: scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
/// let cluster = session.cluster();
/// for node in cluster.nodes() {
///     println!(
///         "{} in {}/{}: {:?} shards, {} connections",
///         node.address, node.datacenter, node.rack, node.shards, node.connections
///     );
/// }
/// // Where the row of partition key 42 of ks.t lives.
/// let insert = session.prepare("INSERT INTO ks.t (pk, v) VALUES (?, ?)").await?;
/// if let Some(token) = insert.token((42_i32, "x"))? {
///     for replica in cluster.replicas("ks", "t", token) {
///         println!("replica {} shard {:?}", replica.address, replica.shard);
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ClusterView {
    state: Arc<ClusterState>,
    tablets: Arc<TabletStore>,
}

impl std::fmt::Debug for ClusterView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterView")
            .field("nodes", &self.nodes())
            .finish()
    }
}

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeInfo {
    /// The node's host id (stable across address changes).
    pub host_id: Uuid,
    /// The address the driver connects to (after address translation).
    pub address: SocketAddr,
    /// Its datacenter.
    pub datacenter: String,
    /// Its rack.
    pub rack: String,
    /// Its number of shards, once a connection has told it (`Some(1)` for a
    /// server that does not shard, such as Cassandra).
    pub shards: Option<u16>,
    /// Connections open to it now (all shards).
    pub connections: usize,
}

/// Where one replica of a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Replica {
    /// The node's host id.
    pub host_id: Uuid,
    /// The address the driver connects to.
    pub address: SocketAddr,
    /// The shard of the node that owns the token (ScyllaDB), when known:
    /// from the tablet for tablet tables, from the node's sharding for the
    /// others.
    pub shard: Option<u16>,
}

impl ClusterView {
    pub(crate) fn new(state: Arc<ClusterState>, tablets: Arc<TabletStore>) -> Self {
        ClusterView { state, tablets }
    }

    /// Every node the session uses, sorted by host id.
    pub fn nodes(&self) -> Vec<NodeInfo> {
        self.state
            .nodes
            .iter()
            .map(|n| {
                let pool = n.pool.snapshot();
                NodeInfo {
                    host_id: n.host_id,
                    address: n.address,
                    datacenter: n.datacenter.clone(),
                    rack: n.rack.clone(),
                    shards: pool.sharder.map(|s| s.nr_shards().get()),
                    connections: pool.shards.iter().map(Vec::len).sum(),
                }
            })
            .collect()
    }

    /// The datacenters, each with its racks (sorted).
    pub fn datacenters(&self) -> BTreeMap<String, Vec<String>> {
        let mut dcs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for n in &self.state.nodes {
            let racks = dcs.entry(n.datacenter.clone()).or_default();
            if !racks.contains(&n.rack) {
                racks.push(n.rack.clone());
            }
        }
        for racks in dcs.values_mut() {
            racks.sort();
        }
        dcs
    }

    /// The keyspaces the session knows, with whether each uses tablets.
    pub fn keyspaces(&self) -> BTreeMap<String, bool> {
        self.state
            .metadata
            .keyspaces
            .iter()
            .map(|(name, k)| (name.clone(), k.tablets))
            .collect()
    }

    /// The replicas of `token` in table `keyspace.table`, in the order the
    /// driver prefers them (primary first). For a table that uses tablets,
    /// they come from the tablet holding the token, and are empty until the
    /// session has learned that tablet (from a request to the table, or
    /// the warm-up of [`TabletWarmup`](crate::TabletWarmup)); for the
    /// others, from the token ring and the keyspace's replication. Empty for
    /// an unknown keyspace. A token comes from
    /// [`PreparedStatement::token`](crate::PreparedStatement::token).
    pub fn replicas(&self, keyspace: &str, table: &str, token: Token) -> Vec<Replica> {
        let state = &self.state;
        let Some(ks) = state.metadata.keyspaces.get(keyspace) else {
            return Vec::new();
        };
        let replica = |idx: crate::routing::NodeIdx, shard: Option<u16>| {
            state.node(idx).map(|n| Replica {
                host_id: n.host_id,
                address: n.address,
                shard,
            })
        };
        if ks.tablets {
            let Some(slot) = self.tablets.existing(keyspace, table) else {
                return Vec::new();
            };
            let tablets = slot.snapshot();
            let Some(found) = tablets.lookup(state.layout, token) else {
                return Vec::new();
            };
            return found
                .nodes
                .iter()
                .zip(found.shards)
                .filter_map(|(&n, &s)| replica(n, Some(s)))
                .collect();
        }
        let Some(id) = state.routing.keyspace_id(keyspace) else {
            return Vec::new();
        };
        state
            .routing
            .replicas(id, token)
            .iter()
            .filter_map(|&n| replica(n, state.routing.sharder(n).map(|s| s.shard_of(token))))
            .collect()
    }
}
