//! Cluster metadata: an immutable snapshot of what the system tables say
//! about the cluster, read through one connection (the control connection).
//!
//! - `topology.rs`: the nodes, from `system.local` and
//!   `system.peers_v2` / `system.peers` ([`NodeMeta`]), translated and
//!   filtered as [`NodeOptions`] say.
//! - `schema.rs`: keyspaces with their replication and tables with their
//!   partition keys, from `system_schema` ([`KeyspaceMeta`], [`TableMeta`]).
//! - `tablets.rs`: the tablets of tablet tables, from `system.tablets`
//!   (read by the tablet warm-up, not part of the snapshot).
//! - [`agreement`]: waiting until every node reports the same schema version.
//! - `query.rs`: paged SELECTs with a timeout per page ([`QueryOptions`]).
//!
//! A [`Metadata`] is never modified: a refresh reads a new one, which the
//! control connection publishes with one atomic swap. Malformed rows are
//! skipped with a warning; only failures of the queries themselves (and a
//! missing `system.local` row) fail a read.

pub mod agreement;
mod query;
mod routes;
mod schema;
mod schema_model;
pub(crate) mod tablets;
#[cfg(test)]
mod test_rows;
mod topology;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use scylla_cql::frame::response::error::ErrorResponse;
use scylla_cql::sharding::Sharder;
use scylla_cql::token::Token;
use scylla_cql::types::{ColumnType, TypeCheckError};
use uuid::Uuid;

pub use self::agreement::{
    check_schema_agreement, local_schema_version, wait_for_schema_agreement, Agreement,
    AgreementOptions,
};
pub(crate) use self::query::for_each_page;
pub use self::query::QueryOptions;

use super::host_filter::{HostFilter, HostInfo};
use super::translation::{AddressTranslator, IdentityTranslator, UntranslatedPeer};
use crate::connection::{Connection, ConnectionRequestError};
use crate::routing::{NodeInfo, ReplicationStrategy, TopologyInput};

/// One node, as `system.local` / `system.peers` describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeMeta {
    /// The node's host id: its identity, stable across address changes.
    pub host_id: Uuid,
    /// Where the driver connects to it: its `rpc_address` (or its `peer`
    /// address when `rpc_address` is a wildcard) and the control
    /// connection's port (`system.peers_v2`: its `native_address` and
    /// `native_port`), passed through the
    /// [`AddressTranslator`]; for the
    /// control connection's node, the address the control connection reached.
    pub address: SocketAddr,
    /// Its datacenter (`data_center`; empty if null).
    pub datacenter: String,
    /// Its rack (empty if null).
    pub rack: String,
    /// Its tokens, sorted (empty for a zero-token or joining node).
    pub tokens: Vec<Token>,
    /// The schema version it reported, if any.
    pub schema_version: Option<Uuid>,
    /// Its server version (`release_version`), if reported.
    pub release_version: Option<String>,
    /// Whether `address` is the node's client route (`system.client_routes`,
    /// see [`ClientRoutes`](crate::ClientRoutes)) rather than its own address.
    pub via_client_route: bool,
    /// With a client route: the node's own (translated) address, by which
    /// events (`STATUS_CHANGE`) still name it.
    pub own_address: Option<SocketAddr>,
}

/// A table (or materialized view), as routing needs it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TableMeta {
    /// The partition-key columns, in key order, with their types.
    pub partition_key: Vec<(String, ColumnType)>,
}

/// A keyspace: its replication and its tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyspaceMeta {
    /// How it places replicas.
    pub strategy: ReplicationStrategy,
    /// Its tables and views, by name.
    pub tables: BTreeMap<String, TableMeta>,
    /// Whether it uses tablets (ScyllaDB): its tables are then routed by
    /// their tablets, not by the token ring.
    pub tablets: bool,
    /// Whether its tables are strongly consistent (ScyllaDB's keyspace
    /// option `consistency = 'global'` or `'local'`, read from
    /// `system_schema.scylla_keyspaces`): each tablet is a Raft group, and
    /// requests go to its leader first.
    pub strongly_consistent: bool,
    /// The keyspace as the full schema model describes it (`None` when the
    /// session does not read the full schema, or could not read it).
    pub schema: Option<Arc<crate::cluster::metadata::Keyspace>>,
}

/// An immutable snapshot of the cluster's topology and schema.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Metadata {
    /// Every node, sorted by host id, one entry per host id.
    pub nodes: Vec<NodeMeta>,
    /// Every keyspace whose replication could be parsed, by name.
    pub keyspaces: BTreeMap<String, KeyspaceMeta>,
}

impl Metadata {
    /// The input of a [`RoutingTable`](crate::routing::RoutingTable): node
    /// `i` of the result is `self.nodes[i]`. `sharders` gives the sharding
    /// of a node (from a connection to it, for ScyllaDB); `None` where
    /// unknown.
    pub fn to_topology_input(&self, sharders: &dyn Fn(&Uuid) -> Option<Sharder>) -> TopologyInput {
        TopologyInput {
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeInfo {
                    datacenter: n.datacenter.clone(),
                    rack: n.rack.clone(),
                    tokens: n.tokens.clone(),
                    sharder: sharders(&n.host_id),
                })
                .collect(),
            keyspaces: self
                .keyspaces
                .iter()
                .map(|(name, ks)| (name.clone(), ks.strategy.clone()))
                .collect(),
        }
    }

    /// The node with host id `host_id`.
    pub fn node(&self, host_id: &Uuid) -> Option<&NodeMeta> {
        self.nodes
            .binary_search_by_key(host_id, |n| n.host_id)
            .ok()
            .and_then(|i| self.nodes.get(i))
    }

    /// The node whose address has IP `ip` (events name nodes by address):
    /// the address the driver dials, or a routed node's own address.
    pub fn node_by_ip(&self, ip: IpAddr) -> Option<&NodeMeta> {
        self.nodes
            .iter()
            .find(|n| n.address.ip() == ip || n.own_address.is_some_and(|a| a.ip() == ip))
    }

    /// The table `keyspace.table`.
    pub fn table(&self, keyspace: &str, table: &str) -> Option<&TableMeta> {
        self.keyspaces.get(keyspace)?.tables.get(table)
    }
}

/// Reading metadata failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    /// The request got no response (connection broken, timeout).
    #[error("metadata query `{query}` got no response")]
    Request {
        /// The query.
        query: &'static str,
        /// Why.
        #[source]
        source: ConnectionRequestError,
    },
    /// The server answered with an error.
    #[error("metadata query `{query}` was refused: {error}")]
    Server {
        /// The query.
        query: &'static str,
        /// The server's error.
        error: ErrorResponse,
    },
    /// The server answered with something other than rows.
    #[error("metadata query `{query}`: unexpected {got} response")]
    UnexpectedResponse {
        /// The query.
        query: &'static str,
        /// What came instead.
        got: &'static str,
    },
    /// The rows came without column metadata.
    #[error("metadata query `{query}`: rows without column metadata")]
    NoColumnSpecs {
        /// The query.
        query: &'static str,
    },
    /// A column has a type this driver does not expect there.
    #[error("metadata query `{query}`: a column has an unexpected type")]
    TypeCheck {
        /// The query.
        query: &'static str,
        /// Which column and type.
        #[source]
        source: TypeCheckError,
    },
    /// The server kept sending pages.
    #[error("metadata query `{query}`: too many pages")]
    TooManyPages {
        /// The query.
        query: &'static str,
    },
    /// `system.local` has no usable row.
    #[error("system.local: {0}")]
    LocalRow(String),
}

impl MetadataError {
    /// Whether the connection failed (rather than the server or its data):
    /// the control connection should move to another node.
    pub fn is_connection_failure(&self) -> bool {
        matches!(
            self,
            MetadataError::Request {
                source: ConnectionRequestError::NotSent(_) | ConnectionRequestError::Broken(_),
                ..
            }
        )
    }
}

/// How the nodes read from the system tables become the driver's nodes:
/// address translation, host filter, and which peers table to read.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NodeOptions {
    /// Maps each peer's reported address to the one to connect to.
    pub translator: Arc<dyn AddressTranslator>,
    /// Which nodes to keep (`None`: all).
    pub filter: Option<Arc<dyn HostFilter>>,
    /// Client routes to dial the nodes through (`None`: none).
    pub client_routes: Option<crate::cluster::client_routes::ClientRoutes>,
    /// Whether the session uses TLS (client routes then use `tls_port`).
    pub(crate) tls: bool,
    /// Set once `system.peers_v2` turned out not to exist on this cluster
    /// (ScyllaDB, Cassandra 3): `system.peers` is read from then on.
    peers_v2_missing: Arc<AtomicBool>,
    /// The host ids the filter rejected at the latest read (tablet replicas
    /// on them are expected, not a sign of a stale topology).
    rejected: Arc<ArcSwap<HashSet<Uuid>>>,
    /// Each routed host's route and the address it resolved to, as of the
    /// latest read: an unchanged route keeps its address (a DNS name that
    /// resolves to another IP of the same endpoint at each read must not
    /// replace the node's pool every time) and is not resolved again.
    resolved_routes: Arc<ArcSwap<HashMap<Uuid, (routes::Route, SocketAddr)>>>,
    /// Each peer's reported address and its translation, as of the latest
    /// read: STATUS_CHANGE events name nodes by the reported address.
    translations: Arc<ArcSwap<HashMap<SocketAddr, SocketAddr>>>,
}

impl NodeOptions {
    /// Keeps the translations of a metadata read (reported address to the
    /// address used), for [`translated`](Self::translated).
    pub(crate) fn record_translations(&self, translations: HashMap<SocketAddr, SocketAddr>) {
        self.translations.store(Arc::new(translations));
    }

    /// The address the driver uses for a node that reports `reported`, as
    /// translated at the latest metadata read (`reported` itself for an
    /// address not seen there).
    pub fn translated(&self, reported: SocketAddr) -> SocketAddr {
        self.translations
            .load()
            .get(&reported)
            .copied()
            .unwrap_or(reported)
    }
}

impl Default for NodeOptions {
    /// No translation, no filter.
    fn default() -> Self {
        Self {
            translator: Arc::new(IdentityTranslator),
            filter: None,
            client_routes: None,
            tls: false,
            peers_v2_missing: Arc::new(AtomicBool::new(false)),
            rejected: Arc::new(ArcSwap::from_pointee(HashSet::new())),
            resolved_routes: Arc::new(ArcSwap::from_pointee(HashMap::new())),
            translations: Arc::new(ArcSwap::from_pointee(HashMap::new())),
        }
    }
}

impl NodeOptions {
    /// Whether `node` passes the filter.
    pub fn accepts(&self, node: &NodeMeta) -> bool {
        self.filter.as_ref().is_none_or(|f| {
            f.accept(&HostInfo {
                address: node.address,
                datacenter: &node.datacenter,
                rack: &node.rack,
                host_id: node.host_id,
            })
        })
    }

    /// Records the host ids the filter rejected.
    pub(crate) fn set_rejected(&self, hosts: HashSet<Uuid>) {
        self.rejected.store(Arc::new(hosts));
    }

    /// Whether the host filter rejected node `host` at the latest read.
    pub fn is_rejected(&self, host: &Uuid) -> bool {
        self.rejected.load().contains(host)
    }

    /// Whether `system.peers_v2` is known to be missing (and `system.peers`
    /// is read instead).
    pub fn peers_v2_missing(&self) -> bool {
        self.peers_v2_missing.load(Ordering::Relaxed)
    }
}

/// The nodes read by [`read_topology`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodesRead {
    /// The accepted nodes, sorted by host id.
    pub nodes: Vec<NodeMeta>,
    /// Whether the host filter rejected the node `conn` is connected to.
    pub local_rejected: bool,
    /// The host id of the node `conn` is connected to.
    pub local: Uuid,
}

/// Reads the nodes: `system.local` (the node `conn` is connected to) and
/// `system.peers_v2` or `system.peers`; translates the peers' addresses and
/// applies the host filter. Peers of `system.peers` are addressed on `conn`'s
/// port.
pub(crate) async fn read_topology(
    conn: &Connection,
    opts: &QueryOptions,
    node_opts: &NodeOptions,
) -> Result<NodesRead, MetadataError> {
    let address = conn.info().peer;
    let local = query::select_all(conn, topology::LOCAL_QUERY, opts).await?;
    let local = topology::parse_local(&local, address)?;
    let mut peers = None;
    if !node_opts.peers_v2_missing() {
        match query::select_all(conn, topology::PEERS_V2_QUERY, opts).await {
            Ok(pages) => peers = Some(topology::parse_peers_v2(&pages, address.port())?),
            Err(MetadataError::Server { error, .. }) => {
                tracing::debug!(%error, "no system.peers_v2; reading system.peers from now on");
                node_opts.peers_v2_missing.store(true, Ordering::Relaxed);
            }
            Err(e) => return Err(e),
        }
    }
    let peers = match peers {
        Some(p) => p,
        None => {
            let pages = query::select_all(conn, topology::PEERS_QUERY, opts).await?;
            topology::parse_peers(&pages, address.port())?
        }
    };
    let mut translated = Vec::with_capacity(peers.len());
    let mut translations = HashMap::with_capacity(peers.len());
    for mut node in peers {
        let peer = UntranslatedPeer::new(
            node.host_id,
            node.address,
            Some(node.datacenter.as_str()).filter(|s| !s.is_empty()),
            Some(node.rack.as_str()).filter(|s| !s.is_empty()),
        );
        match node_opts.translator.translate_address(&peer).await {
            Ok(to) => {
                if to != node.address {
                    tracing::trace!(host_id = %node.host_id, from = %node.address, %to, "address translated");
                }
                translations.insert(node.address, to);
                node.address = to;
                translated.push(node);
            }
            Err(error) => {
                tracing::warn!(host_id = %node.host_id, %error, "peer left out: its address does not translate");
            }
        }
    }
    node_opts.record_translations(translations);
    let peers = translated;
    let local_id = local.host_id;
    let mut local_rejected = false;
    let mut rejected = HashSet::new();
    let mut nodes = topology::join_nodes(local, peers);
    if let Some(cr) = &node_opts.client_routes {
        let found = routes::read_routes(conn, opts, cr, node_opts.tls).await?;
        let before = node_opts.resolved_routes.load_full();
        let mut now = HashMap::new();
        for node in &mut nodes {
            let Some(route) = found.get(&node.host_id) else {
                tracing::debug!(host_id = %node.host_id, address = %node.address, "no client route for this node; using its own address");
                continue;
            };
            let to = match before.get(&node.host_id) {
                Some((r, addr)) if r == route => Some(*addr),
                _ => routes::resolve(route).await,
            };
            if let Some(to) = to {
                tracing::trace!(host_id = %node.host_id, from = %node.address, %to, "client route");
                node.own_address = Some(node.address);
                node.address = to;
                node.via_client_route = true;
                now.insert(node.host_id, (route.clone(), to));
            }
        }
        node_opts.resolved_routes.store(Arc::new(now));
    }
    let nodes = nodes
        .into_iter()
        .filter(|n| {
            let keep = node_opts.accepts(n);
            if !keep {
                rejected.insert(n.host_id);
                if n.host_id == local_id {
                    local_rejected = true;
                }
                tracing::trace!(host_id = %n.host_id, address = %n.address, "node rejected by the host filter");
            }
            keep
        })
        .collect();
    if node_opts.filter.is_some() {
        node_opts.set_rejected(rejected);
    }
    Ok(NodesRead {
        nodes,
        local_rejected,
        local: local_id,
    })
}

/// Which schema the control connection reads.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchemaFetch {
    /// Read the full schema model (every column, user-defined types,
    /// views, indexes) besides what routing needs (replication, partition
    /// keys, tablets).
    pub full: bool,
    /// Only these keyspaces (`None`: all of them).
    pub keyspaces: Option<Vec<String>>,
}

impl Default for SchemaFetch {
    /// The full schema of every keyspace.
    fn default() -> Self {
        SchemaFetch {
            full: true,
            keyspaces: None,
        }
    }
}

/// Reads the pages of schema query `q`: over every keyspace, or over each
/// of `only`.
async fn read_pages(
    conn: &Connection,
    q: schema::SchemaQuery,
    only: Option<&[String]>,
    opts: &QueryOptions,
) -> Result<Vec<scylla_cql::frame::response::result::Rows>, MetadataError> {
    match only {
        None => query::select_all(conn, q.all, opts).await,
        Some(keyspaces) => {
            let mut pages = Vec::new();
            for ks in keyspaces {
                pages.extend(query::select_keyspace(conn, q.one, ks, opts).await?);
            }
            Ok(pages)
        }
    }
}

/// Reads the keyspaces with their replication and tables: every keyspace
/// `fetch` names, or only those of `only` among them (a refresh of the
/// keyspaces that changed). A keyspace of `only` that no longer exists is
/// absent from the result.
pub async fn read_schema(
    conn: &Connection,
    opts: &QueryOptions,
    fetch: &SchemaFetch,
    only: Option<&[String]>,
) -> Result<BTreeMap<String, KeyspaceMeta>, MetadataError> {
    let narrowed: Option<Vec<String>>;
    let only = match (only, fetch.keyspaces.as_deref()) {
        (None, wanted) => wanted,
        (Some(only), None) => Some(only),
        (Some(only), Some(wanted)) => {
            narrowed = Some(
                only.iter()
                    .filter(|k| wanted.contains(k))
                    .cloned()
                    .collect(),
            );
            narrowed.as_deref()
        }
    };
    let keyspace_pages = read_pages(conn, schema::KEYSPACES_QUERY, only, opts).await?;
    let table_pages = read_pages(conn, schema::TABLES_QUERY, only, opts).await?;
    let column_pages = read_pages(conn, schema::COLUMNS_QUERY, only, opts).await?;
    let mut keyspaces = schema::keyspaces(&keyspace_pages)?;
    schema::tables(&mut keyspaces, &table_pages, &column_pages)?;
    // ScyllaDB only: elsewhere the table is missing (a server error), and
    // every keyspace uses vnodes. Only a broken connection fails the read.
    match read_pages(conn, schema::SCYLLA_KEYSPACES_QUERY, only, opts).await {
        Ok(pages) => {
            if let Err(e) = schema::mark_tablet_keyspaces(&mut keyspaces, &pages) {
                tracing::warn!(error = %e, "system_schema.scylla_keyspaces unusable; assuming no tablets");
            }
        }
        Err(e @ MetadataError::Request { .. }) => return Err(e),
        Err(e) => {
            tracing::debug!(error = %e, "no system_schema.scylla_keyspaces; assuming no tablets")
        }
    }
    // Strongly consistent keyspaces (tablets only): a separate read, since
    // the `consistency` column exists only on servers with the
    // `strongly-consistent-tables` feature; elsewhere it fails and every
    // keyspace is eventually consistent. Skipped without tablet keyspaces.
    if keyspaces.values().any(|k| k.tablets) {
        match read_pages(conn, schema::SCYLLA_CONSISTENCY_QUERY, only, opts).await {
            Ok(pages) => {
                if let Err(e) = schema::mark_strongly_consistent(&mut keyspaces, &pages) {
                    tracing::debug!(error = %e, "system_schema.scylla_keyspaces.consistency unusable; assuming eventual consistency");
                }
            }
            Err(e @ MetadataError::Request { .. }) => return Err(e),
            Err(e) => {
                tracing::debug!(error = %e, "no system_schema.scylla_keyspaces.consistency; assuming eventual consistency")
            }
        }
    }
    if fetch.full {
        // The model's own tables; a server without one (views or indexes
        // on a server that has none) leaves the model without them. Only a
        // broken connection fails the read.
        let extra = |pages: Result<Vec<_>, MetadataError>, what: &str| match pages {
            Ok(p) => Ok(p),
            Err(e @ MetadataError::Request { .. }) => Err(e),
            Err(e) => {
                tracing::debug!(error = %e, table = what, "schema model: table unreadable; left out");
                Ok(Vec::new())
            }
        };
        let types = extra(
            read_pages(conn, schema_model::TYPES_QUERY, only, opts).await,
            "system_schema.types",
        )?;
        let views = extra(
            read_pages(conn, schema_model::VIEWS_QUERY, only, opts).await,
            "system_schema.views",
        )?;
        let indexes = extra(
            read_pages(conn, schema_model::INDEXES_QUERY, only, opts).await,
            "system_schema.indexes",
        )?;
        let pages = schema_model::SchemaPages {
            keyspaces: &keyspace_pages,
            tables: &table_pages,
            columns: &column_pages,
            types: &types,
            views: &views,
            indexes: &indexes,
        };
        let tablets = |ks: &str| keyspaces.get(ks).is_some_and(|k| k.tablets);
        let models = schema_model::build(&pages, &tablets)?;
        for (name, model) in models {
            if let Some(ks) = keyspaces.get_mut(&name) {
                ks.schema = Some(Arc::new(model));
            }
        }
    }
    Ok(keyspaces)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_input_follows_node_order() {
        let node = |id: u128, dc: &str, t: i64| NodeMeta {
            host_id: Uuid::from_u128(id),
            address: SocketAddr::from(([127, 0, 0, id as u8], 9042)),
            datacenter: dc.into(),
            rack: "r".into(),
            tokens: vec![Token(t)],
            schema_version: None,
            release_version: None,
            via_client_route: false,
            own_address: None,
        };
        let mut keyspaces = BTreeMap::new();
        keyspaces.insert(
            "ks".to_owned(),
            KeyspaceMeta {
                strategy: ReplicationStrategy::Simple { rf: 1 },
                tables: BTreeMap::new(),
                tablets: false,
                strongly_consistent: false,
                schema: None,
            },
        );
        let md = Metadata {
            nodes: vec![node(1, "a", -10), node(2, "b", 10)],
            keyspaces,
        };
        let sharder = Sharder::new(std::num::NonZeroU16::MIN, 12);
        let input = md.to_topology_input(&|id| (id.as_u128() == 2).then_some(sharder));
        assert_eq!(input.nodes.len(), 2);
        assert_eq!(input.nodes[0].datacenter, "a");
        assert_eq!(input.nodes[0].sharder, None);
        assert_eq!(input.nodes[1].sharder, Some(sharder));
        assert_eq!(input.keyspaces["ks"], ReplicationStrategy::Simple { rf: 1 });
        assert_eq!(
            md.node(&Uuid::from_u128(2)).map(|n| n.tokens[0]),
            Some(Token(10))
        );
        assert!(md.node(&Uuid::from_u128(3)).is_none());
        assert_eq!(
            md.node_by_ip("127.0.0.1".parse().unwrap())
                .map(|n| n.host_id),
            Some(Uuid::from_u128(1))
        );
    }
}
