//! The system tables drivers read, generated from the topology and schema,
//! and the `testbed.stats` virtual table.
//!
//! Column names and types follow ScyllaDB (Cassandra 3 schema tables):
//! drivers look columns up by name and decode them by type. Each node
//! answers `system.local` with its own row and `system.peers` with the
//! other nodes that are up; everyone reports the store's schema version, so
//! schema agreement holds. `system.peers_v2` does not exist (as on
//! ScyllaDB), which makes drivers fall back to `system.peers`, unless the
//! cluster is built with `peers_v2(true)` (as Cassandra 4+). Nodes report
//! their advertised address (`NodeInfo::advertised`) everywhere.
//! `system_schema.scylla_keyspaces` and `system.tablets` tell which
//! keyspaces use tablets and where every tablet is, as ScyllaDB's do.

use std::collections::BTreeMap;

use bytes::Bytes;
use scylla_cql::types::{ColumnType, CqlValue, NativeType};

use super::error::{invalid, CqlError};
use super::select::View;
use super::store::{Schema, Store, Table};
use super::traces;
use crate::handler::ConnCtx;
use crate::supported::CQL_VERSION;

/// The release ScyllaDB reports in `release_version`.
pub(crate) const RELEASE_VERSION: &str = "3.0.8";
/// The keyspace of the testbed's own virtual tables.
pub(crate) const TESTBED_KEYSPACE: &str = "testbed";

/// Whether `ks` is one of the built-in keyspaces served here.
pub(crate) fn is_system(ks: &str) -> bool {
    matches!(
        ks,
        "system" | "system_schema" | "system_traces" | TESTBED_KEYSPACE
    )
}

fn t(s: &str) -> ColumnType {
    // The type strings below are fixed and valid; fall back to blob if not.
    ColumnType::from_cql(s).unwrap_or(ColumnType::Native(NativeType::Blob))
}

fn cell(v: CqlValue, typ: &ColumnType) -> Option<Bytes> {
    let mut out = Vec::new();
    scylla_cql::types::serialize::serialize_bytes(&v, typ, &mut out).ok()?;
    Some(Bytes::from(out))
}

fn text(s: &str) -> CqlValue {
    CqlValue::Text(s.to_owned())
}

fn text_map(m: &[(&str, &str)]) -> CqlValue {
    CqlValue::Map(m.iter().map(|(k, v)| (text(k), text(v))).collect())
}

/// Builds a view from column (name, type) pairs and rows of values.
fn view(ks: &str, name: &str, cols: &[(&str, &str)], rows: Vec<Vec<Option<CqlValue>>>) -> View {
    let columns: Vec<(String, ColumnType)> =
        cols.iter().map(|(n, ty)| (n.to_string(), t(ty))).collect();
    let rows = rows
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let cells = r
                .into_iter()
                .zip(&columns)
                .map(|(v, (_, ty))| v.and_then(|v| cell(v, ty)))
                .collect();
            ((i as u32).to_be_bytes().to_vec(), cells)
        })
        .collect();
    View {
        keyspace: ks.to_owned(),
        name: name.to_owned(),
        columns,
        pk: Vec::new(),
        rows,
        indexes: Vec::new(),
    }
}

const LOCAL_COLS: [(&str, &str); 18] = [
    ("key", "text"),
    ("bootstrapped", "text"),
    ("broadcast_address", "inet"),
    ("cluster_name", "text"),
    ("cql_version", "text"),
    ("data_center", "text"),
    ("gossip_generation", "int"),
    ("host_id", "uuid"),
    ("listen_address", "inet"),
    ("native_protocol_version", "text"),
    ("partitioner", "text"),
    ("rack", "text"),
    ("release_version", "text"),
    ("rpc_address", "inet"),
    ("schema_version", "uuid"),
    ("supported_features", "text"),
    ("thrift_version", "text"),
    ("tokens", "set<text>"),
];

const PEERS_COLS: [(&str, &str); 10] = [
    ("peer", "inet"),
    ("data_center", "text"),
    ("host_id", "uuid"),
    ("preferred_ip", "inet"),
    ("rack", "text"),
    ("release_version", "text"),
    ("rpc_address", "inet"),
    ("schema_version", "uuid"),
    ("supported_features", "text"),
    ("tokens", "set<text>"),
];

fn tokens(n: &crate::topology::NodeInfo) -> CqlValue {
    // Sets are sent sorted; as text, tokens sort as strings.
    let mut v: Vec<String> = n.tokens.iter().map(|t| t.0.to_string()).collect();
    v.sort();
    CqlValue::Set(v.into_iter().map(CqlValue::Text).collect())
}

fn system_local(ctx: &ConnCtx, schema: &Schema) -> View {
    let n = ctx.node();
    let row = vec![
        Some(text("local")),
        Some(text("COMPLETED")),
        Some(CqlValue::Inet(n.advertised)),
        Some(text(ctx.topology().cluster_name())),
        Some(text(CQL_VERSION)),
        Some(text(&n.datacenter)),
        Some(CqlValue::Int(1)),
        Some(CqlValue::Uuid(n.host_id)),
        Some(CqlValue::Inet(n.advertised)),
        Some(text("4")),
        Some(text("org.apache.cassandra.dht.Murmur3Partitioner")),
        Some(text(&n.rack)),
        Some(text(RELEASE_VERSION)),
        Some(CqlValue::Inet(n.advertised)),
        Some(CqlValue::Uuid(schema.version)),
        Some(text("")),
        Some(text("20.1.0")),
        Some(tokens(n)),
    ];
    view("system", "local", &LOCAL_COLS, vec![row])
}

/// Every other member node, up or down: ScyllaDB (like Cassandra) keeps a
/// stopped node in `system.peers` (only gossip says it is down), and drivers
/// rely on that to keep its pool and reconnect when it returns; a
/// decommissioned node leaves it.
fn system_peers(ctx: &ConnCtx, schema: &Schema) -> View {
    let topo = ctx.topology();
    let rows = topo
        .nodes()
        .iter()
        .filter(|p| p.index != ctx.node_index() && topo.is_member(p.index))
        .map(|p| {
            vec![
                Some(CqlValue::Inet(p.advertised)),
                Some(text(&p.datacenter)),
                Some(CqlValue::Uuid(p.host_id)),
                Some(CqlValue::Inet(p.advertised)),
                Some(text(&p.rack)),
                Some(text(RELEASE_VERSION)),
                Some(CqlValue::Inet(p.advertised)),
                Some(CqlValue::Uuid(schema.version)),
                Some(text("")),
                Some(tokens(p)),
            ]
        })
        .collect();
    view("system", "peers", &PEERS_COLS, rows)
}

const PEERS_V2_COLS: [(&str, &str); 13] = [
    ("peer", "inet"),
    ("peer_port", "int"),
    ("data_center", "text"),
    ("host_id", "uuid"),
    ("native_address", "inet"),
    ("native_port", "int"),
    ("preferred_ip", "inet"),
    ("preferred_port", "int"),
    ("rack", "text"),
    ("release_version", "text"),
    ("schema_version", "uuid"),
    ("supported_features", "text"),
    ("tokens", "set<text>"),
];

/// `system.peers_v2` (Cassandra 4+): `system.peers` with ports. Gossip
/// runs on 7000 as on a default node; `native_port` is the node's CQL port.
fn system_peers_v2(ctx: &ConnCtx, schema: &Schema) -> View {
    let topo = ctx.topology();
    let rows = topo
        .nodes()
        .iter()
        .filter(|p| p.index != ctx.node_index() && topo.is_member(p.index))
        .map(|p| {
            vec![
                Some(CqlValue::Inet(p.advertised)),
                Some(CqlValue::Int(7000)),
                Some(text(&p.datacenter)),
                Some(CqlValue::Uuid(p.host_id)),
                Some(CqlValue::Inet(p.advertised)),
                Some(CqlValue::Int(i32::from(p.port))),
                Some(CqlValue::Inet(p.advertised)),
                Some(CqlValue::Int(7000)),
                Some(text(&p.rack)),
                Some(text(RELEASE_VERSION)),
                Some(CqlValue::Uuid(schema.version)),
                Some(text("")),
                Some(tokens(p)),
            ]
        })
        .collect();
    view("system", "peers_v2", &PEERS_V2_COLS, rows)
}

/// Every keyspace with its replication: built-ins first, then the store's.
fn keyspaces(schema: &Schema) -> Vec<(String, bool, BTreeMap<String, String>)> {
    let local: BTreeMap<String, String> = [(
        "class".to_owned(),
        "org.apache.cassandra.locator.LocalStrategy".to_owned(),
    )]
    .into();
    let mut v = vec![
        ("system".to_owned(), true, local.clone()),
        ("system_schema".to_owned(), true, local),
    ];
    v.extend(
        schema
            .keyspaces
            .values()
            .map(|k| (k.name.clone(), k.durable_writes, k.replication.clone())),
    );
    v
}

fn user_tables(schema: &Schema) -> impl Iterator<Item = &Table> {
    schema.keyspaces.values().flat_map(|k| k.tables.values())
}

const TABLES_COLS: [(&str, &str); 19] = [
    ("keyspace_name", "text"),
    ("table_name", "text"),
    ("bloom_filter_fp_chance", "double"),
    ("caching", "map<text, text>"),
    ("comment", "text"),
    ("compaction", "map<text, text>"),
    ("compression", "map<text, text>"),
    ("crc_check_chance", "double"),
    ("dclocal_read_repair_chance", "double"),
    ("default_time_to_live", "int"),
    ("extensions", "map<text, blob>"),
    ("flags", "set<text>"),
    ("gc_grace_seconds", "int"),
    ("id", "uuid"),
    ("max_index_interval", "int"),
    ("memtable_flush_period_in_ms", "int"),
    ("min_index_interval", "int"),
    ("read_repair_chance", "double"),
    ("speculative_retry", "text"),
];

fn schema_tables(schema: &Schema) -> View {
    let rows = user_tables(schema)
        .map(|tb| {
            vec![
                Some(text(&tb.keyspace)),
                Some(text(&tb.name)),
                Some(CqlValue::Double(0.01)),
                Some(text_map(&[("keys", "ALL"), ("rows_per_partition", "ALL")])),
                Some(text("")),
                Some(text_map(&[(
                    "class",
                    "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy",
                )])),
                Some(text_map(&[(
                    "sstable_compression",
                    "org.apache.cassandra.io.compress.LZ4Compressor",
                )])),
                Some(CqlValue::Double(1.0)),
                Some(CqlValue::Double(0.0)),
                Some(CqlValue::Int(0)),
                Some(CqlValue::Map(Vec::new())),
                // Without "compound" drivers take the table for COMPACT STORAGE.
                Some(CqlValue::Set(vec![text("compound")])),
                Some(CqlValue::Int(864_000)),
                Some(CqlValue::Uuid(tb.id)),
                Some(CqlValue::Int(2048)),
                Some(CqlValue::Int(0)),
                Some(CqlValue::Int(128)),
                Some(CqlValue::Double(0.0)),
                Some(text("99.0PERCENTILE")),
            ]
        })
        .collect();
    view("system_schema", "tables", &TABLES_COLS, rows)
}

const COLUMNS_COLS: [(&str, &str); 8] = [
    ("keyspace_name", "text"),
    ("table_name", "text"),
    ("column_name", "text"),
    ("clustering_order", "text"),
    ("column_name_bytes", "blob"),
    ("kind", "text"),
    ("position", "int"),
    ("type", "text"),
];

fn schema_columns(schema: &Schema) -> View {
    let mut rows = Vec::new();
    for tb in user_tables(schema) {
        let mut cols: Vec<_> = tb.columns.iter().collect();
        // The schema table's clustering order: by column name.
        cols.sort_by(|a, b| a.name.cmp(&b.name));
        for c in cols {
            let order = if c.kind == super::store::ColumnKind::Clustering {
                "asc"
            } else {
                "none"
            };
            rows.push(vec![
                Some(text(&tb.keyspace)),
                Some(text(&tb.name)),
                Some(text(&c.name)),
                Some(text(order)),
                Some(CqlValue::Blob(c.name.as_bytes().to_vec())),
                Some(text(c.kind.as_str())),
                Some(CqlValue::Int(c.position)),
                Some(text(&super::types::schema_text(&c.typ, c.frozen))),
            ]);
        }
    }
    view("system_schema", "columns", &COLUMNS_COLS, rows)
}

/// The user-defined types, by keyspace and name (fields in declaration
/// order, their types as Cassandra shows them: `text`, `frozen<other>`).
fn schema_types(schema: &Schema) -> View {
    let mut rows = Vec::new();
    for k in schema.keyspaces.values() {
        for t in k.types.values() {
            let names = t.fields.iter().map(|(n, _)| text(n)).collect();
            let types = t
                .fields
                .iter()
                .map(|(_, ty)| {
                    let frozen = matches!(ty, ColumnType::UserDefinedType { .. });
                    text(&super::types::schema_text(ty, frozen))
                })
                .collect();
            rows.push(vec![
                Some(text(&k.name)),
                Some(text(&t.name)),
                Some(CqlValue::List(names)),
                Some(CqlValue::List(types)),
            ]);
        }
    }
    view(
        "system_schema",
        "types",
        &[
            ("keyspace_name", "text"),
            ("type_name", "text"),
            ("field_names", "list<text>"),
            ("field_types", "list<text>"),
        ],
        rows,
    )
}

/// The indexes (all custom: storage-attached), with Cassandra's options:
/// `class_name`, `target` and the similarity function of vector indexes.
fn schema_indexes(schema: &Schema) -> View {
    let mut rows = Vec::new();
    for tb in user_tables(schema) {
        for i in &tb.indexes {
            let mut options = vec![
                ("class_name", i.class.as_str()),
                ("target", i.column.as_str()),
            ];
            if let Some(s) = i.similarity {
                options.push(("similarity_function", s.as_str()));
            }
            options.sort();
            rows.push(vec![
                Some(text(&tb.keyspace)),
                Some(text(&tb.name)),
                Some(text(&i.name)),
                Some(text("CUSTOM")),
                Some(text_map(&options)),
            ]);
        }
    }
    view(
        "system_schema",
        "indexes",
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("index_name", "text"),
            ("kind", "text"),
            ("options", "map<text, text>"),
        ],
        rows,
    )
}

/// ScyllaDB's per-keyspace extras; `initial_tablets` is set (0 = automatic)
/// exactly for keyspaces that use tablets, which is how drivers tell them
/// apart.
fn scylla_keyspaces(schema: &Schema) -> View {
    let rows = schema
        .keyspaces
        .values()
        .map(|k| {
            vec![
                Some(text(&k.name)),
                k.tablets
                    .map(|n| CqlValue::Int(i32::try_from(n).unwrap_or(i32::MAX))),
                None,
                None,
                // ScyllaDB with the strongly-consistent-tables feature.
                Some(text(if k.strongly_consistent {
                    "global"
                } else {
                    "eventual"
                })),
            ]
        })
        .collect();
    view(
        "system_schema",
        "scylla_keyspaces",
        &[
            ("keyspace_name", "text"),
            ("initial_tablets", "int"),
            ("storage_options", "map<text, text>"),
            ("storage_type", "text"),
            ("consistency", "text"),
        ],
        rows,
    )
}

/// ScyllaDB's `system.tablets` columns (partition key `table_id`, clustering
/// key `last_token`, the per-table columns static), in `SELECT *` order.
const TABLETS_COLS: [(&str, &str); 12] = [
    ("table_id", "uuid"),
    ("last_token", "bigint"),
    ("keyspace_name", "text"),
    ("resize_seq_number", "bigint"),
    ("resize_type", "text"),
    ("table_name", "text"),
    ("tablet_count", "int"),
    ("new_replicas", "frozen<list<frozen<tuple<uuid, int>>>>"),
    ("replicas", "frozen<list<frozen<tuple<uuid, int>>>>"),
    ("session", "uuid"),
    ("stage", "text"),
    ("transition", "text"),
];

/// One row per tablet of every tablet table, a table's rows together in
/// `last_token` order (the tables ordered by id; ScyllaDB orders them by the
/// token of the id, which no reader may rely on either way).
fn system_tablets(ctx: &ConnCtx, schema: &Schema) -> View {
    let topo = ctx.topology();
    let maps = topo.tablets().all();
    let mut tables: Vec<&Table> = user_tables(schema)
        .filter(|t| maps.contains_key(&(t.keyspace.clone(), t.name.clone())))
        .collect();
    tables.sort_by_key(|t| t.id);
    let mut rows = Vec::new();
    for t in tables {
        let Some(map) = maps.get(&(t.keyspace.clone(), t.name.clone())) else {
            continue;
        };
        let count = i32::try_from(map.tablets().len()).unwrap_or(i32::MAX);
        for tablet in map.tablets() {
            let replicas = tablet
                .replicas
                .iter()
                .filter_map(|&(n, shard)| {
                    let host = topo.node(n)?.host_id;
                    Some(CqlValue::Tuple(vec![
                        Some(CqlValue::Uuid(host)),
                        Some(CqlValue::Int(i32::from(shard))),
                    ]))
                })
                .collect();
            rows.push(vec![
                Some(CqlValue::Uuid(t.id)),
                Some(CqlValue::BigInt(tablet.last_token)),
                Some(text(&t.keyspace)),
                Some(CqlValue::BigInt(0)),
                Some(text("none")),
                Some(text(&t.name)),
                Some(CqlValue::Int(count)),
                None,
                Some(CqlValue::List(replicas)),
                None,
                None,
                None,
            ]);
        }
    }
    view("system", "tablets", &TABLETS_COLS, rows)
}

/// ScyllaDB's `system.clients` columns (partition key `address`,
/// clustering `port` and `client_type`, then the rest by name), in
/// `SELECT *` order.
const CLIENTS_COLS: [(&str, &str); 15] = [
    ("address", "inet"),
    ("port", "int"),
    ("client_type", "text"),
    ("client_options", "frozen<map<text, text>>"),
    ("connection_stage", "text"),
    ("driver_name", "text"),
    ("driver_version", "text"),
    ("hostname", "text"),
    ("protocol_version", "int"),
    ("scheduling_group", "text"),
    ("shard_id", "int"),
    ("ssl_cipher_suite", "text"),
    ("ssl_enabled", "boolean"),
    ("ssl_protocol", "text"),
    ("username", "text"),
];

/// One row per open client connection of the answering node (as on
/// ScyllaDB, where the table is node-local), ordered by address and port:
/// where it comes from as the node sees it, its shard, and what its STARTUP
/// said (`client_options` holds every STARTUP option, as ScyllaDB keeps
/// them). Until STARTUP arrives the driver columns are null.
fn system_clients(ctx: &ConnCtx) -> View {
    let mut conns: Vec<_> = ctx
        .node_clients()
        .into_iter()
        .map(|c| {
            let tls = c.tls().then(|| c.tls_session().cloned());
            (c.peer_addr(), c.shard(), tls, c.session())
        })
        .collect();
    conns.sort_by_key(|(peer, ..)| (peer.ip(), peer.port()));
    let rows = conns
        .into_iter()
        .map(|(peer, shard, tls, state)| {
            let opt = |key: &str| state.startup_options.get(key).map(|v| text(v));
            let options = state
                .startup_options
                .iter()
                .map(|(k, v)| (text(k), text(v)))
                .collect();
            vec![
                Some(CqlValue::Inet(peer.ip())),
                Some(CqlValue::Int(i32::from(peer.port()))),
                Some(text("cql")),
                Some(CqlValue::Map(options)),
                Some(text(state.stage.as_str())),
                opt("DRIVER_NAME"),
                opt("DRIVER_VERSION"),
                Some(text(&peer.ip().to_string())),
                Some(CqlValue::Int(i32::from(state.protocol_version.number()))),
                Some(text("sl:default")),
                Some(CqlValue::Int(i32::from(shard))),
                tls.clone().flatten().map(|t| text(&t.cipher_suite)),
                Some(CqlValue::Boolean(tls.is_some())),
                tls.flatten().map(|t| text(t.protocol)),
                Some(text(state.user.as_deref().unwrap_or("anonymous"))),
            ]
        })
        .collect();
    view("system", "clients", &CLIENTS_COLS, rows)
}

/// `system.client_routes` (ScyllaDB's schema, `db/system_keyspace.cc`):
/// one row per (connection id, host id) with the route's endpoint.
fn client_routes(ctx: &ConnCtx) -> View {
    let port = |p: Option<u16>| p.map(|p| CqlValue::Int(i32::from(p)));
    let rows = ctx
        .topology()
        .client_routes()
        .rows()
        .into_iter()
        .map(|r| {
            vec![
                Some(text(&r.connection_id)),
                Some(CqlValue::Uuid(r.host_id)),
                Some(text(&r.address)),
                port(Some(r.port)),
                port(r.tls_port),
                None,
                None,
            ]
        })
        .collect();
    view(
        "system",
        "client_routes",
        &[
            ("connection_id", "text"),
            ("host_id", "uuid"),
            ("address", "text"),
            ("port", "int"),
            ("tls_port", "int"),
            ("alternator_port", "int"),
            ("alternator_https_port", "int"),
        ],
        rows,
    )
}

const STATS_COLS: [(&str, &str); 26] = [
    ("node", "int"),
    ("shard", "int"),
    ("accepted_maintenance_socket", "bigint"),
    ("accepted_regular", "bigint"),
    ("accepted_shard_aware", "bigint"),
    ("accepted_tls", "bigint"),
    ("batch_rows", "bigint"),
    ("batch_rows_misplaced", "bigint"),
    ("connections", "bigint"),
    ("connections_v5", "bigint"),
    ("handshakes_finished", "bigint"),
    ("handshakes_shed", "bigint"),
    ("handshakes_started", "bigint"),
    ("peak_connections", "bigint"),
    ("prepares", "bigint"),
    ("protocol_errors", "bigint"),
    ("requests_non_leader", "bigint"),
    ("requests_non_replica", "bigint"),
    ("requests_served", "bigint"),
    ("requests_tablet_misrouted", "bigint"),
    ("requests_wrong_shard", "bigint"),
    ("segment_checksum_failures", "bigint"),
    ("tls_handshakes_full", "bigint"),
    ("tls_handshakes_resumed", "bigint"),
    ("up", "boolean"),
    ("version_refusals", "bigint"),
];

fn testbed_stats(ctx: &ConnCtx) -> View {
    let stats = ctx.topology().stats_snapshot();
    let mut rows = Vec::new();
    for (n, node) in stats.nodes.iter().enumerate() {
        for (s, c) in node.shards.iter().enumerate() {
            let big = |v: u64| Some(CqlValue::BigInt(i64::try_from(v).unwrap_or(i64::MAX)));
            rows.push(vec![
                Some(CqlValue::Int(n as i32)),
                Some(CqlValue::Int(s as i32)),
                big(c.accepted_maintenance_socket),
                big(c.accepted_regular),
                big(c.accepted_shard_aware),
                big(c.accepted_tls),
                big(c.batch_rows),
                big(c.batch_rows_misplaced),
                big(c.connections),
                big(c.connections_v5),
                big(c.handshakes_finished),
                big(c.handshakes_shed),
                big(c.handshakes_started),
                big(c.peak_connections),
                big(c.prepares),
                big(c.protocol_errors),
                big(c.requests_non_leader),
                big(c.requests_non_replica),
                big(c.requests_served),
                big(c.requests_tablet_misrouted),
                big(c.requests_wrong_shard),
                big(c.segment_checksum_failures),
                big(c.tls_handshakes_full),
                big(c.tls_handshakes_resumed),
                Some(CqlValue::Boolean(node.up)),
                big(c.version_refusals),
            ]);
        }
    }
    view(TESTBED_KEYSPACE, "stats", &STATS_COLS, rows)
}

/// The view of built-in table `ks.table`; an Invalid error for tables that
/// do not exist (as a server says "unconfigured table").
pub(crate) fn system_view(
    ctx: &ConnCtx,
    store: &Store,
    schema: &Schema,
    ks: &str,
    table: &str,
) -> Result<View, CqlError> {
    let empty = |cols: &[(&str, &str)]| view(ks, table, cols, Vec::new());
    Ok(match (ks, table) {
        ("system", "local") => system_local(ctx, schema),
        ("system", "peers") => system_peers(ctx, schema),
        ("system", "peers_v2") if ctx.topology().has_peers_v2() => system_peers_v2(ctx, schema),
        ("system_schema", "keyspaces") => {
            let rows = keyspaces(schema)
                .into_iter()
                .map(|(name, durable, repl)| {
                    let m = repl.iter().map(|(k, v)| (text(k), text(v))).collect();
                    vec![
                        Some(CqlValue::Text(name)),
                        Some(CqlValue::Boolean(durable)),
                        Some(CqlValue::Map(m)),
                    ]
                })
                .collect();
            view(
                ks,
                table,
                &[
                    ("keyspace_name", "text"),
                    ("durable_writes", "boolean"),
                    ("replication", "map<text, text>"),
                ],
                rows,
            )
        }
        ("system_schema", "tables") => schema_tables(schema),
        ("system_schema", "scylla_keyspaces") => scylla_keyspaces(schema),
        ("system", "tablets") => system_tablets(ctx, schema),
        ("system", "clients") => system_clients(ctx),
        ("system", "client_routes") => client_routes(ctx),
        ("system_schema", "columns") => schema_columns(schema),
        ("system_schema", "types") => schema_types(schema),
        ("system_schema", "functions") => empty(&[
            ("keyspace_name", "text"),
            ("function_name", "text"),
            ("argument_types", "list<text>"),
            ("argument_names", "list<text>"),
            ("body", "text"),
            ("called_on_null_input", "boolean"),
            ("language", "text"),
            ("return_type", "text"),
        ]),
        ("system_schema", "aggregates") => empty(&[
            ("keyspace_name", "text"),
            ("aggregate_name", "text"),
            ("argument_types", "list<text>"),
            ("final_func", "text"),
            ("initcond", "text"),
            ("return_type", "text"),
            ("state_func", "text"),
            ("state_type", "text"),
        ]),
        ("system_schema", "views") => empty(&[
            ("keyspace_name", "text"),
            ("view_name", "text"),
            ("base_table_id", "uuid"),
            ("base_table_name", "text"),
            ("include_all_columns", "boolean"),
            ("where_clause", "text"),
        ]),
        ("system_schema", "indexes") => schema_indexes(schema),
        ("system_schema", "triggers") => empty(&[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("trigger_name", "text"),
            ("options", "map<text, text>"),
        ]),
        ("system_schema", "scylla_tables") => empty(&[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("partitioner", "text"),
            ("version", "uuid"),
        ]),
        ("system_schema", "dropped_columns") => empty(&[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("column_name", "text"),
            ("dropped_time", "timestamp"),
            ("type", "text"),
        ]),
        (TESTBED_KEYSPACE, "stats") => testbed_stats(ctx),
        ("system_traces", _) if !ctx.topology().records_traces() => {
            return invalid(super::TRACES_UNSUPPORTED)
        }
        ("system_traces", "sessions") => {
            let rows = traces::session_rows(&store.traces().all());
            view(ks, table, &traces::SESSION_COLUMNS, rows)
        }
        ("system_traces", "events") => {
            let rows = traces::event_rows(&store.traces().all());
            view(ks, table, &traces::EVENT_COLUMNS, rows)
        }
        _ => return invalid(format!("unconfigured table {table}")),
    })
}
