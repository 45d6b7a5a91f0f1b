//! The nodes of the cluster, read from `system.local` (the node the control
//! connection is on) and `system.peers` (every other node, as that node sees
//! them).
//!
//! Both ScyllaDB and Cassandra have the columns read here in both tables.
//! Cassandra 4+ also has `system.peers_v2`, with each peer's native port
//! (`native_address`, `native_port`): it is read first where it exists, and
//! `system.peers` (whose peers are addressed on the control connection's
//! port) otherwise. A peer row that cannot be used (no host id, no address,
//! a token that is not a number, a value that does not deserialize) is skipped
//! with a warning: one bad row must not hide the rest of the cluster.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};

use scylla_cql::frame::response::result::Rows;
use scylla_cql::token::Token;
use uuid::Uuid;

use super::query::for_each_row;
use super::{MetadataError, NodeMeta};

/// The query for the control connection's own node.
pub(crate) const LOCAL_QUERY: &str = "SELECT host_id, rpc_address, data_center, rack, tokens, \
     schema_version, release_version FROM system.local WHERE key = 'local'";

/// The query for every other node.
pub(crate) const PEERS_QUERY: &str = "SELECT host_id, peer, rpc_address, data_center, rack, \
     tokens, schema_version, release_version FROM system.peers";

/// The query for every other node, with their native ports (Cassandra 4+).
pub(crate) const PEERS_V2_QUERY: &str = "SELECT host_id, peer, native_address, native_port, \
     data_center, rack, tokens, schema_version, release_version FROM system.peers_v2";

/// A `system.local` row; every column may be null.
#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
struct LocalRow {
    host_id: Option<Uuid>,
    rpc_address: Option<IpAddr>,
    data_center: Option<String>,
    rack: Option<String>,
    tokens: Option<Vec<String>>,
    schema_version: Option<Uuid>,
    release_version: Option<String>,
}

/// A `system.peers` row; every column may be null.
#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
struct PeerRow {
    host_id: Option<Uuid>,
    peer: Option<IpAddr>,
    rpc_address: Option<IpAddr>,
    data_center: Option<String>,
    rack: Option<String>,
    tokens: Option<Vec<String>>,
    schema_version: Option<Uuid>,
    release_version: Option<String>,
}

/// A `system.peers_v2` row; every column may be null.
#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
struct PeerV2Row {
    host_id: Option<Uuid>,
    peer: Option<IpAddr>,
    native_address: Option<IpAddr>,
    native_port: Option<i32>,
    data_center: Option<String>,
    rack: Option<String>,
    tokens: Option<Vec<String>>,
    schema_version: Option<Uuid>,
    release_version: Option<String>,
}

impl PeerV2Row {
    /// The same peer as a `system.peers` row, and its native port (`None`
    /// if null or out of range: the caller's default port applies).
    fn into_v1(self) -> (PeerRow, Option<u16>) {
        let port = self
            .native_port
            .and_then(|p| u16::try_from(p).ok())
            .filter(|&p| p != 0);
        (
            PeerRow {
                host_id: self.host_id,
                peer: self.peer,
                rpc_address: self.native_address,
                data_center: self.data_center,
                rack: self.rack,
                tokens: self.tokens,
                schema_version: self.schema_version,
                release_version: self.release_version,
            },
            port,
        )
    }
}

/// Why a peer row was skipped (logged, never returned).
#[derive(Debug, PartialEq, Eq)]
enum BadRow {
    MissingHostId,
    MissingAddress,
    BadToken(String),
}

/// Parses a token as written in the `tokens` column: a decimal `i64`
/// (Murmur3Partitioner; other partitioners are not supported).
fn parse_tokens(texts: Option<Vec<String>>) -> Result<Vec<Token>, BadRow> {
    let mut tokens = texts
        .unwrap_or_default()
        .into_iter()
        .map(|t| match t.trim().parse::<i64>() {
            Ok(v) => Ok(Token(v)),
            Err(_) => Err(BadRow::BadToken(t)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    tokens.sort_unstable();
    Ok(tokens)
}

/// The node the control connection is connected to, from `system.local`.
///
/// `address` is the control connection's peer: we reached the node there, so
/// it is the best address for it whatever its `rpc_address` says. Fails with
/// [`MetadataError::LocalRow`] if the row is missing or unusable: without it
/// the snapshot would lack the one node known to be reachable.
pub(crate) fn parse_local(pages: &[Rows], address: SocketAddr) -> Result<NodeMeta, MetadataError> {
    let mut first: Option<Result<LocalRow, String>> = None;
    for_each_row::<LocalRow>(pages, LOCAL_QUERY, |row| {
        if first.is_none() {
            first = Some(row.map_err(|e| e.to_string()));
        }
    })?;
    let row = match first {
        None => {
            return Err(MetadataError::LocalRow(
                "system.local returned no row".into(),
            ))
        }
        Some(Err(e)) => return Err(MetadataError::LocalRow(e)),
        Some(Ok(row)) => row,
    };
    let host_id = row
        .host_id
        .ok_or_else(|| MetadataError::LocalRow("host_id is null".into()))?;
    let tokens = parse_tokens(row.tokens).map_err(|e| MetadataError::LocalRow(format!("{e:?}")))?;
    // Kept for logs: a node whose rpc_address differs from where we reached it
    // is behind address translation (or listens on a wildcard).
    tracing::trace!(%host_id, rpc_address = ?row.rpc_address, %address, "local node");
    Ok(NodeMeta {
        host_id,
        address,
        datacenter: row.data_center.unwrap_or_default(),
        rack: row.rack.unwrap_or_default(),
        tokens,
        schema_version: row.schema_version,
        release_version: row.release_version,
        via_client_route: false,
        own_address: None,
    })
}

/// The other nodes, from `system.peers`; `port` is the CQL port the driver
/// connects to (the control connection's), since `system.peers` has none.
/// Unusable rows are skipped with a warning. Addresses are as reported
/// (before translation).
pub(crate) fn parse_peers(pages: &[Rows], port: u16) -> Result<Vec<NodeMeta>, MetadataError> {
    let mut nodes = Vec::new();
    let mut index = 0usize;
    for_each_row::<PeerRow>(pages, PEERS_QUERY, |row| {
        index += 1;
        push_peer(
            &mut nodes,
            index,
            row.map(|r| (r, None)),
            port,
            "system.peers",
        );
    })?;
    Ok(nodes)
}

/// The other nodes, from `system.peers_v2`: each on its own `native_port`
/// (`port` where that is null).
pub(crate) fn parse_peers_v2(pages: &[Rows], port: u16) -> Result<Vec<NodeMeta>, MetadataError> {
    let mut nodes = Vec::new();
    let mut index = 0usize;
    for_each_row::<PeerV2Row>(pages, PEERS_V2_QUERY, |row| {
        index += 1;
        push_peer(
            &mut nodes,
            index,
            row.map(PeerV2Row::into_v1),
            port,
            "system.peers_v2",
        );
    })?;
    Ok(nodes)
}

fn push_peer(
    nodes: &mut Vec<NodeMeta>,
    index: usize,
    row: Result<(PeerRow, Option<u16>), scylla_cql::types::deserialize::DeserializationError>,
    default_port: u16,
    table: &'static str,
) {
    match row {
        Err(e) => {
            tracing::warn!(row = index, error = %e, table, "skipping a peer row that does not deserialize")
        }
        Ok((row, port)) => {
            let peer = row.peer;
            match peer_to_node(row, port.unwrap_or(default_port)) {
                Ok(node) => nodes.push(node),
                Err(reason) => tracing::warn!(
                    row = index,
                    ?peer,
                    ?reason,
                    table,
                    "skipping an unusable peer row"
                ),
            }
        }
    }
}

fn peer_to_node(row: PeerRow, port: u16) -> Result<NodeMeta, BadRow> {
    let host_id = row.host_id.ok_or(BadRow::MissingHostId)?;
    // A node whose native transport listens on a wildcard reports
    // rpc_address 0.0.0.0 (or ::); its gossip address (`peer`) is then the
    // best guess of where clients reach it.
    let ip = match row.rpc_address {
        Some(ip) if ip.is_unspecified() => row.peer.ok_or(BadRow::MissingAddress)?,
        Some(ip) => ip,
        None => return Err(BadRow::MissingAddress),
    };
    Ok(NodeMeta {
        host_id,
        address: SocketAddr::new(ip, port),
        datacenter: row.data_center.unwrap_or_default(),
        rack: row.rack.unwrap_or_default(),
        tokens: parse_tokens(row.tokens)?,
        schema_version: row.schema_version,
        release_version: row.release_version,
        via_client_route: false,
        own_address: None,
    })
}

/// Joins the local node and the peers: sorted by host id (so node indices are
/// stable while the membership is), one entry per host id (a peer row that
/// repeats a host id, seen during node replacement, is dropped with a warning).
pub(crate) fn join_nodes(local: NodeMeta, peers: Vec<NodeMeta>) -> Vec<NodeMeta> {
    let mut seen = HashSet::with_capacity(peers.len() + 1);
    let mut nodes = Vec::with_capacity(peers.len() + 1);
    for node in std::iter::once(local).chain(peers) {
        if seen.insert(node.host_id) {
            nodes.push(node);
        } else {
            tracing::warn!(host_id = %node.host_id, address = %node.address, "duplicate host id in system.peers; row ignored");
        }
    }
    nodes.sort_by_key(|n| n.host_id);
    nodes
}

#[cfg(test)]
mod tests {
    use super::super::test_rows::{build, cell};
    use super::*;
    use scylla_cql::types::{ColumnType, NativeType};

    fn peer_specs() -> Vec<(&'static str, ColumnType)> {
        vec![
            ("host_id", ColumnType::Native(NativeType::Uuid)),
            ("peer", ColumnType::Native(NativeType::Inet)),
            ("rpc_address", ColumnType::Native(NativeType::Inet)),
            ("data_center", ColumnType::Native(NativeType::Text)),
            ("rack", ColumnType::Native(NativeType::Text)),
            (
                "tokens",
                ColumnType::set(ColumnType::Native(NativeType::Text)),
            ),
            ("schema_version", ColumnType::Native(NativeType::Uuid)),
            ("release_version", ColumnType::Native(NativeType::Text)),
        ]
    }

    fn peer_row(
        host: Option<u128>,
        peer: &str,
        rpc: Option<&str>,
        tokens: &[&str],
    ) -> Vec<Option<Vec<u8>>> {
        let specs = peer_specs();
        let ip = |s: &str| s.parse::<IpAddr>().ok();
        vec![
            host.and_then(|h| cell(&Uuid::from_u128(h), &specs[0].1)),
            ip(peer).and_then(|p| cell(&p, &specs[1].1)),
            rpc.and_then(ip).and_then(|r| cell(&r, &specs[2].1)),
            cell(&"dc1".to_owned(), &specs[3].1),
            cell(&"r1".to_owned(), &specs[4].1),
            cell(
                &tokens.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>(),
                &specs[5].1,
            ),
            cell(&Uuid::from_u128(7), &specs[6].1),
            cell(&"5.0.6".to_owned(), &specs[7].1),
        ]
    }

    #[test]
    fn malformed_peer_rows_are_skipped() {
        let rows = build(
            &peer_specs(),
            vec![
                peer_row(Some(1), "10.0.0.1", Some("10.1.0.1"), &["-5", "100"]),
                peer_row(None, "10.0.0.2", Some("10.1.0.2"), &["1"]), // no host id
                peer_row(Some(3), "10.0.0.3", Some("10.1.0.3"), &["x"]), // bad token
                peer_row(Some(4), "10.0.0.4", None, &["2"]),          // null rpc address
                peer_row(Some(5), "10.0.0.5", Some("0.0.0.0"), &["3"]), // wildcard: use peer
                // A uuid cell of the wrong length: does not deserialize.
                {
                    let mut r = peer_row(Some(6), "10.0.0.6", Some("10.1.0.6"), &["4"]);
                    r[0] = Some(vec![1, 2, 3]);
                    r
                },
            ],
        );
        let nodes = parse_peers(&[rows], 9042).unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[0].host_id, Uuid::from_u128(1));
        assert_eq!(nodes[0].address, "10.1.0.1:9042".parse().unwrap());
        assert_eq!(nodes[0].tokens, vec![Token(-5), Token(100)]);
        assert_eq!(nodes[0].datacenter, "dc1");
        assert_eq!(nodes[0].schema_version, Some(Uuid::from_u128(7)));
        assert_eq!(nodes[1].host_id, Uuid::from_u128(5));
        assert_eq!(nodes[1].address, "10.0.0.5:9042".parse().unwrap());
    }

    #[test]
    fn peers_v2_rows_carry_their_native_ports() {
        let specs = vec![
            ("host_id", ColumnType::Native(NativeType::Uuid)),
            ("peer", ColumnType::Native(NativeType::Inet)),
            ("native_address", ColumnType::Native(NativeType::Inet)),
            ("native_port", ColumnType::Native(NativeType::Int)),
            ("data_center", ColumnType::Native(NativeType::Text)),
            ("rack", ColumnType::Native(NativeType::Text)),
            (
                "tokens",
                ColumnType::set(ColumnType::Native(NativeType::Text)),
            ),
            ("schema_version", ColumnType::Native(NativeType::Uuid)),
            ("release_version", ColumnType::Native(NativeType::Text)),
        ];
        let row = |host: u128, peer: &str, native: &str, port: Option<i32>| {
            let ip = |s: &str| s.parse::<IpAddr>().unwrap();
            vec![
                cell(&Uuid::from_u128(host), &specs[0].1),
                cell(&ip(peer), &specs[1].1),
                cell(&ip(native), &specs[2].1),
                port.and_then(|p| cell(&p, &specs[3].1)),
                cell(&"dc2".to_owned(), &specs[4].1),
                cell(&"r2".to_owned(), &specs[5].1),
                cell(&vec!["7".to_owned()], &specs[6].1),
                None,
                None,
            ]
        };
        let rows = build(
            &specs,
            vec![
                row(1, "10.0.0.1", "10.1.0.1", Some(19142)),
                row(2, "10.0.0.2", "10.1.0.2", None), // null: the default port
                row(3, "10.0.0.3", "0.0.0.0", Some(9043)), // wildcard: use peer
                row(4, "10.0.0.4", "10.1.0.4", Some(70000)), // not a port
            ],
        );
        let nodes = parse_peers_v2(&[rows], 9042).unwrap();
        let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.address).collect();
        assert_eq!(
            addrs,
            vec![
                "10.1.0.1:19142".parse().unwrap(),
                "10.1.0.2:9042".parse().unwrap(),
                "10.0.0.3:9043".parse().unwrap(),
                "10.1.0.4:9042".parse().unwrap(),
            ]
        );
        assert_eq!(nodes[0].datacenter, "dc2");
        assert_eq!(nodes[0].rack, "r2");
        assert_eq!(nodes[0].tokens, vec![Token(7)]);
    }

    #[test]
    fn wrong_column_type_fails_the_query() {
        let mut specs = peer_specs();
        specs[0].1 = ColumnType::Native(NativeType::Text);
        let rows = build(&specs, Vec::<Vec<Option<Vec<u8>>>>::new());
        assert!(matches!(
            parse_peers(&[rows], 9042),
            Err(MetadataError::TypeCheck { .. })
        ));
    }

    #[test]
    fn local_row_uses_the_connection_address() {
        let specs: Vec<_> = peer_specs()
            .into_iter()
            .filter(|(n, _)| *n != "peer")
            .collect();
        let mut row = peer_row(Some(9), "10.0.0.9", Some("0.0.0.0"), &["8", "-8"]);
        row.remove(1);
        let rows = build(&specs, vec![row]);
        let addr: SocketAddr = "192.168.0.1:19042".parse().unwrap();
        let local = parse_local(&[rows], addr).unwrap();
        assert_eq!(local.address, addr);
        assert_eq!(local.tokens, vec![Token(-8), Token(8)]);

        let empty = build(&specs, Vec::<Vec<Option<Vec<u8>>>>::new());
        assert!(matches!(
            parse_local(&[empty], addr),
            Err(MetadataError::LocalRow(_))
        ));
    }

    #[test]
    fn join_dedups_and_sorts() {
        let node = |id: u128, port: u16| NodeMeta {
            host_id: Uuid::from_u128(id),
            address: SocketAddr::from(([127, 0, 0, 1], port)),
            datacenter: String::new(),
            rack: String::new(),
            tokens: vec![],
            schema_version: None,
            release_version: None,
            via_client_route: false,
            own_address: None,
        };
        let nodes = join_nodes(node(5, 1), vec![node(2, 2), node(5, 3), node(1, 4)]);
        let ids: Vec<_> = nodes.iter().map(|n| n.host_id.as_u128()).collect();
        assert_eq!(ids, vec![1, 2, 5]);
        assert_eq!(nodes[2].address.port(), 1);
    }
}
