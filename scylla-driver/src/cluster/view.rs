//! A read-only view of the cluster for applications: its nodes, their
//! datacenters, racks and shards, and where the replicas of a token are
//! (node and shard, from the token ring or from the table's tablets).
//!
//! A [`ClusterView`] is a snapshot: it does not change after it was taken
//! (take another with [`Session::cluster`](crate::Session::cluster) to see
//! later changes), and reading it never blocks requests.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use scylla_cql::sharding::{Shard, Sharder};

use scylla_cql::token::Token;
use uuid::Uuid;

use super::state::Snapshot;
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
    state: Arc<Snapshot>,
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
    pub(crate) fn new(state: Arc<Snapshot>, tablets: Arc<TabletStore>) -> Self {
        ClusterView { state, tablets }
    }

    /// The session's cluster state this view was taken from.
    pub(crate) fn snapshot(&self) -> &Arc<Snapshot> {
        &self.state
    }

    /// The session's tablet maps.
    pub(crate) fn tablet_store(&self) -> &TabletStore {
        &self.tablets
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

/// A node's address: where the driver connects to it (after address
/// translation). The official `scylla` crate's name; this crate keeps no
/// untranslated form, so it is one address, not a choice of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeAddr(SocketAddr);

impl NodeAddr {
    /// Its IP address.
    pub fn ip(&self) -> IpAddr {
        self.0.ip()
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.0.port()
    }

    /// The socket address.
    pub fn into_inner(self) -> SocketAddr {
        self.0
    }
}

impl fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<SocketAddr> for NodeAddr {
    fn from(addr: SocketAddr) -> Self {
        NodeAddr(addr)
    }
}

impl From<NodeAddr> for SocketAddr {
    fn from(addr: NodeAddr) -> Self {
        addr.0
    }
}

/// One node, in the official `scylla` crate's shape (see [`NodeInfo`] for
/// this crate's, with shards and connections).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Node {
    /// The node's host id.
    pub host_id: Uuid,
    /// Where the driver connects to it.
    pub address: NodeAddr,
    /// Its datacenter (`None` when the node reports none).
    pub datacenter: Option<String>,
    /// Its rack (`None` when the node reports none).
    pub rack: Option<String>,
    /// Its sharding, once a connection has told it.
    sharder: Option<Sharder>,
}

impl Node {
    /// A node as a result records it: host id, address and location.
    pub(crate) fn recorded(
        host_id: Uuid,
        address: SocketAddr,
        datacenter: Option<String>,
        rack: Option<String>,
    ) -> Self {
        Node {
            host_id,
            address: NodeAddr(address),
            datacenter,
            rack,
            sharder: None,
        }
    }

    /// How the node splits tokens among its shards, once a connection has
    /// told it (`None` before that, and for a node that does not shard,
    /// such as Cassandra).
    pub fn sharder(&self) -> Option<Sharder> {
        self.sharder
    }
}

/// A node as load-balancing policies receive and return it (the official
/// `scylla` crate's name).
pub type NodeRef<'a> = &'a Arc<Node>;

/// The nodes of the cluster grouped for load-balancing policies, from
/// [`ClusterState::replica_locator`] (the official `scylla` crate's shape).
#[derive(Debug, Clone, Default)]
pub struct ReplicaLocator {
    /// Every node, sorted by host id.
    nodes: Vec<Arc<Node>>,
    /// The datacenters' names, sorted, and the nodes of each (sorted by
    /// host id); nodes that report no datacenter are in none.
    datacenters: Vec<(String, Vec<Arc<Node>>)>,
}

impl ReplicaLocator {
    fn new(nodes: &[Arc<Node>]) -> Self {
        let mut by_dc: BTreeMap<&str, Vec<Arc<Node>>> = BTreeMap::new();
        for n in nodes {
            if let Some(dc) = n.datacenter.as_deref() {
                by_dc.entry(dc).or_default().push(Arc::clone(n));
            }
        }
        ReplicaLocator {
            nodes: nodes.to_vec(),
            datacenters: by_dc
                .into_iter()
                .map(|(dc, nodes)| (dc.to_owned(), nodes))
                .collect(),
        }
    }

    /// Every node of the cluster, once each.
    pub fn unique_nodes_in_global_ring(&self) -> &[Arc<Node>] {
        &self.nodes
    }

    /// The nodes of datacenter `datacenter_name`, once each; `None` for a
    /// datacenter no node reports.
    pub fn unique_nodes_in_datacenter_ring<'a>(
        &'a self,
        datacenter_name: &str,
    ) -> Option<&'a [Arc<Node>]> {
        self.datacenters
            .binary_search_by(|(dc, _)| dc.as_str().cmp(datacenter_name))
            .ok()
            .map(|i| self.datacenters[i].1.as_slice())
    }

    /// The names of the datacenters, sorted.
    pub fn datacenter_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.datacenters.iter().map(|(dc, _)| dc.as_str())
    }
}

/// The cluster as the session sees it, in the official `scylla` crate's
/// shape: [`Session::get_cluster_state`](crate::Session::get_cluster_state).
/// A snapshot, like the [`ClusterView`] it wraps ([`view`](Self::view)).
///
/// ```no_run
/// # async fn demo(session: scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
/// use scylla_driver::routing::Token;
///
/// let state = session.get_cluster_state();
/// for node in state.get_nodes_info() {
///     println!("{} {} {:?}", node.host_id, node.address, node.datacenter);
/// }
/// for (node, shard) in state.get_token_endpoints("ks", "t", Token::new(42)) {
///     println!("replica {} shard {shard}", node.address);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ClusterState {
    view: ClusterView,
    /// Sorted by host id.
    nodes: Vec<Arc<Node>>,
    locator: ReplicaLocator,
}

impl ClusterState {
    /// The state of `view`'s snapshot.
    pub fn new(view: ClusterView) -> Self {
        let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        let nodes = view
            .state
            .nodes
            .iter()
            .map(|n| {
                Arc::new(Node {
                    host_id: n.host_id,
                    address: NodeAddr(n.address),
                    datacenter: non_empty(&n.datacenter),
                    rack: non_empty(&n.rack),
                    sharder: n.pool.snapshot().sharder,
                })
            })
            .collect::<Vec<_>>();
        let mut nodes = nodes;
        nodes.sort_by_key(|n| n.host_id);
        let locator = ReplicaLocator::new(&nodes);
        ClusterState {
            view,
            nodes,
            locator,
        }
    }

    /// The nodes grouped by datacenter, for load-balancing policies.
    pub fn replica_locator(&self) -> &ReplicaLocator {
        &self.locator
    }

    /// The node with host id `host_id`.
    pub fn get_node_by_host_id(&self, host_id: Uuid) -> Option<&Arc<Node>> {
        self.nodes
            .binary_search_by_key(&host_id, |n| n.host_id)
            .ok()
            .map(|i| &self.nodes[i])
    }

    /// Keyspace `keyspace` of the schema, as last read (see
    /// [`metadata`](crate::cluster::metadata)); `None` for a keyspace the
    /// session does not know, or when it does not read the full schema
    /// ([`SessionBuilder::fetch_schema_metadata`](crate::SessionBuilder::fetch_schema_metadata)).
    ///
    /// ```no_run
    /// # async fn demo(session: scylla_driver::Session) {
    /// let state = session.get_cluster_state();
    /// if let Some(ks) = state.get_keyspace("shop") {
    ///     for (name, table) in &ks.tables {
    ///         println!("{name}: key {:?}, {} columns", table.partition_key, table.columns.len());
    ///     }
    /// }
    /// # }
    /// ```
    pub fn get_keyspace(
        &self,
        keyspace: impl AsRef<str>,
    ) -> Option<&crate::cluster::metadata::Keyspace> {
        self.view
            .state
            .metadata
            .keyspaces
            .get(keyspace.as_ref())?
            .schema
            .as_deref()
    }

    /// Every keyspace of the schema with its name, in name order (empty
    /// when the session does not read the full schema).
    pub fn keyspaces_iter(
        &self,
    ) -> impl Iterator<Item = (&str, &crate::cluster::metadata::Keyspace)> {
        self.view
            .state
            .metadata
            .keyspaces
            .iter()
            .filter_map(|(name, k)| Some((name.as_str(), k.schema.as_deref()?)))
    }

    /// This crate's view of the same snapshot.
    pub fn view(&self) -> &ClusterView {
        &self.view
    }

    /// Every node the session uses, sorted by host id.
    pub fn get_nodes_info(&self) -> &[Arc<Node>] {
        &self.nodes
    }

    /// The replicas of `token` in table `keyspace.table` with their shards,
    /// in the order the driver prefers them; see [`ClusterView::replicas`]
    /// (empty for an unknown keyspace, or a tablet the session has not
    /// learned). The shard is 0 when the node's sharding is not known (a
    /// node that does not shard, or one the session has no connection to
    /// yet).
    pub fn get_token_endpoints(
        &self,
        keyspace: &str,
        table: &str,
        token: Token,
    ) -> Vec<(Arc<Node>, Shard)> {
        self.view
            .replicas(keyspace, table, token)
            .into_iter()
            .filter_map(|r| {
                let node = self.get_node_by_host_id(r.host_id)?;
                Some((Arc::clone(node), r.shard.unwrap_or(0)))
            })
            .collect()
    }
}

/// Why [`ClusterState::compute_token`] (or [`ClusterView::compute_token`])
/// could not compute a token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterStateTokenError {
    /// The session's schema metadata has no such table.
    #[error(
        "table {keyspace}.{table} is not in the session's schema metadata; check the names \
         (case-sensitive, unquoted) and that the table existed at the last metadata refresh"
    )]
    UnknownTable {
        /// The keyspace asked for.
        keyspace: String,
        /// The table asked for.
        table: String,
    },
    /// The metadata names no partition-key column for the table.
    #[error(
        "the session's schema metadata lists no partition-key column for {keyspace}.{table}; \
         check that the server reports its columns in system_schema.columns"
    )]
    NoPartitionKey {
        /// The keyspace asked for.
        keyspace: String,
        /// The table asked for.
        table: String,
    },
    /// The values do not fit the table's partition-key columns.
    #[error(
        "the partition-key values do not fit the table's partition-key columns; check their \
         number, order and types"
    )]
    Serialization(#[source] scylla_cql::types::SerializationError),
    /// A partition-key value is null or unset: no partition has it.
    #[error("a partition-key value is null or unset; give every partition-key column a value")]
    NullKey,
}

impl ClusterView {
    /// The token of the partition whose partition-key columns of table
    /// `keyspace.table` have `partition_key` (one value per column, in key
    /// order), typed by the session's schema metadata. Allocates (the
    /// column descriptions and the serialized values): for a hot loop,
    /// prefer [`PreparedStatement::token`](crate::PreparedStatement::token).
    pub fn compute_token(
        &self,
        keyspace: &str,
        table: &str,
        partition_key: &dyn scylla_cql::types::SerializeRow,
    ) -> Result<Token, ClusterStateTokenError> {
        let meta = self
            .state
            .metadata
            .keyspaces
            .get(keyspace)
            .and_then(|k| k.tables.get(table))
            .ok_or_else(|| ClusterStateTokenError::UnknownTable {
                keyspace: keyspace.to_owned(),
                table: table.to_owned(),
            })?;
        if meta.partition_key.is_empty() {
            return Err(ClusterStateTokenError::NoPartitionKey {
                keyspace: keyspace.to_owned(),
                table: table.to_owned(),
            });
        }
        let specs: Vec<scylla_cql::types::ColumnSpec> = meta
            .partition_key
            .iter()
            .map(|(name, typ)| scylla_cql::types::ColumnSpec {
                keyspace: keyspace.to_owned(),
                table: table.to_owned(),
                name: name.clone(),
                typ: typ.clone(),
            })
            .collect();
        let mut values = scylla_cql::types::SerializedValues::new();
        partition_key
            .serialize_row(&specs, &mut values)
            .map_err(ClusterStateTokenError::Serialization)?;
        // At most u16::MAX columns fit a statement's values anyway.
        let indexes: Vec<u16> = (0..specs.len())
            .map(|i| u16::try_from(i).unwrap_or(u16::MAX))
            .collect();
        crate::routing::partition_key::token_of(&indexes, &values)
            .ok_or(ClusterStateTokenError::NullKey)
    }
}

impl ClusterState {
    /// The token of the partition with partition-key values `partition_key`
    /// in table `keyspace.table`; see [`ClusterView::compute_token`].
    pub fn compute_token(
        &self,
        keyspace: &str,
        table: &str,
        partition_key: &dyn scylla_cql::types::SerializeRow,
    ) -> Result<Token, ClusterStateTokenError> {
        self.view.compute_token(keyspace, table, partition_key)
    }
}
