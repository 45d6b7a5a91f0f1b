//! The schema model (`ClusterState::get_keyspace`) against the test
//! cluster: every column of a table with collections, frozen and non-frozen
//! ones, user-defined types (one nested in another), static and clustering
//! columns, and an index; a change to one keyspace re-reads that keyspace
//! only (a recording layer around the default handler sees which schema
//! queries reach the node); `fetch_schema_metadata(false)` and
//! `keyspaces_to_fetch`.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use scylla_cql::frame::header::{Flags, Opcode};
use scylla_cql::frame::request::{Request as Decoded, RequestContext};
use scylla_cql::types::{ColumnType, NativeType};
use scylla_driver::cluster::metadata::{ClusteringOrder, ColumnKind, Keyspace, Strategy};
use scylla_driver::{Session, SessionBuilder};
use scylla_testbed::{ConnCtx, CqlHandler, HandlerFuture, Request, RequestHandler, TestCluster};

/// The default handler, recording the `system_schema` queries it serves
/// (the text, and the keyspace bound to it if any).
struct Recorder {
    inner: CqlHandler,
    seen: Mutex<Vec<(String, Option<String>)>>,
}

impl Recorder {
    fn record(&self, ctx: &ConnCtx, request: &Request) {
        if request.header.opcode != Opcode::Query
            || request.header.flags.contains(Flags::COMPRESSION)
        {
            return;
        }
        let rctx = RequestContext {
            version: ctx.protocol_version(),
            use_metadata_id: ctx.use_metadata_id(),
            tablets_routing_v2: false,
        };
        let Ok(Decoded::Query(q)) = Decoded::decode_in(request.header.opcode, &request.body, &rctx)
        else {
            return;
        };
        if !q.contents.contains("system_schema.") {
            return;
        }
        let keyspace = q.params.values.iter().next().and_then(|(_, v)| match v {
            scylla_cql::frame::wire::RawValue::Value(b) => String::from_utf8(b.to_vec()).ok(),
            _ => None,
        });
        self.seen
            .lock()
            .unwrap()
            .push((q.contents.to_string(), keyspace));
    }

    fn take(&self) -> Vec<(String, Option<String>)> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl RequestHandler for Recorder {
    fn handle<'a>(&'a self, ctx: &'a ConnCtx, request: Request) -> HandlerFuture<'a> {
        self.record(ctx, &request);
        self.inner.handle(ctx, request)
    }
}

async fn cluster() -> (TestCluster, Arc<Recorder>) {
    let recorder = Arc::new(Recorder {
        inner: CqlHandler::new(),
        seen: Mutex::new(Vec::new()),
    });
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(1)
        .handler(recorder.clone())
        .start()
        .await
        .unwrap();
    (cluster, recorder)
}

async fn run(session: &Session, cql: &str) {
    session.query_unpaged(cql, ()).await.unwrap();
}

/// The keyspace once `ready` holds for it (bounded wait: the model follows
/// the server's events).
async fn keyspace_when(
    session: &Session,
    name: &str,
    ready: impl Fn(&Keyspace) -> bool,
) -> Keyspace {
    for _ in 0..200 {
        if let Some(ks) = session.get_cluster_state().get_keyspace(name) {
            if ready(ks) {
                return ks.clone();
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "keyspace {name} never reached the expected state: {:?}",
        session.get_cluster_state().get_keyspace(name)
    );
}

const SCHEMA: &[&str] = &[
    "CREATE KEYSPACE sm WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    "CREATE TYPE sm.point (x double, y double)",
    "CREATE TYPE sm.address (street text, at frozen<point>)",
    "CREATE TABLE sm.t (a int, b text, c1 int, c2 timeuuid, s text static, tags set<text>, \
     nums frozen<list<int>>, m map<text, int>, home frozen<address>, \
     PRIMARY KEY ((a, b), c1, c2))",
    "CREATE CUSTOM INDEX t_s ON sm.t (s) USING 'StorageAttachedIndex'",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_column_type_and_index_of_a_table() {
    let (cluster, _) = cluster().await;
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();
    for cql in SCHEMA {
        run(&session, cql).await;
    }
    let ks = keyspace_when(&session, "sm", |ks| {
        ks.tables.get("t").is_some_and(|t| !t.indexes.is_empty())
    })
    .await;
    assert_eq!(
        ks.strategy,
        Strategy::SimpleStrategy {
            replication_factor: 1
        }
    );
    let t = &ks.tables["t"];
    assert_eq!(t.partition_key, ["a", "b"]);
    assert_eq!(t.clustering_key, ["c1", "c2"]);
    let mut names: Vec<&str> = t.columns.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["a", "b", "c1", "c2", "home", "m", "nums", "s", "tags"]
    );
    let col = |n: &str| &t.columns[n];
    assert_eq!(col("a").kind, ColumnKind::PartitionKey);
    assert_eq!(col("c2").kind, ColumnKind::Clustering);
    assert_eq!(col("c2").clustering_order, Some(ClusteringOrder::Ascending));
    assert_eq!(col("s").kind, ColumnKind::Static);
    assert_eq!(col("tags").kind, ColumnKind::Regular);
    assert_eq!(col("c2").typ, ColumnType::Native(NativeType::Timeuuid));
    assert_eq!(
        col("tags").typ,
        ColumnType::set(ColumnType::Native(NativeType::Text))
    );
    // The schema model keeps what `frozen<...>` says.
    assert_eq!(
        col("nums").typ,
        ColumnType::list(ColumnType::Native(NativeType::Int)).into_frozen()
    );
    assert!(!col("tags").typ.is_frozen() && col("home").typ.is_frozen());
    assert_eq!(
        col("m").typ,
        ColumnType::map(
            ColumnType::Native(NativeType::Text),
            ColumnType::Native(NativeType::Int)
        )
    );
    // The UDT column carries its definition, the nested type included.
    let ColumnType::UserDefinedType { definition, .. } = &col("home").typ else {
        panic!("not a UDT: {:?}", col("home").typ);
    };
    let fields = &definition.field_types;
    assert_eq!(
        (definition.keyspace.as_str(), definition.name.as_str()),
        ("sm", "address")
    );
    assert_eq!(
        fields[0],
        ("street".to_owned(), ColumnType::Native(NativeType::Text))
    );
    assert!(
        matches!(&fields[1].1, ColumnType::UserDefinedType { definition, .. }
        if definition.name == "point" && definition.field_types.len() == 2)
    );
    let mut udts: Vec<&str> = ks.user_defined_types.keys().map(String::as_str).collect();
    udts.sort_unstable();
    assert_eq!(udts, ["address", "point"]);
    assert_eq!(t.indexes["t_s"].target(), Some("s"));
    // System keyspaces are there too; iteration is by name.
    let state = session.get_cluster_state();
    let names: Vec<&str> = state.keyspaces_iter().map(|(n, _)| n).collect();
    assert!(
        names.contains(&"sm") && names.contains(&"system_schema"),
        "{names:?}"
    );
    assert!(names.windows(2).all(|w| w[0] < w[1]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_re_reads_only_its_keyspace() {
    let (cluster, recorder) = cluster().await;
    // The two keyspaces are made by another session, gone (its connections
    // closed on the node, so every query it sent was recorded) before the
    // one observed starts: no refresh that their events started, however
    // late, can fall among the observed session's reads.
    let admin = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();
    run(&admin, SCHEMA[0]).await;
    run(
        &admin,
        "CREATE KEYSPACE other WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    )
    .await;
    run(&admin, "CREATE TABLE other.kv (k int PRIMARY KEY, v text)").await;
    admin.close(Duration::from_secs(5)).await;
    drop(admin);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while cluster.node_stats(0).unwrap().node.connections > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first session's connections outlived it"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();
    // Read in full at the start.
    keyspace_when(&session, "other", |ks| ks.tables.contains_key("kv")).await;
    recorder.take();

    run(&session, "CREATE TABLE sm.late (k int PRIMARY KEY, v int)").await;
    let ks = keyspace_when(&session, "sm", |ks| ks.tables.contains_key("late")).await;
    assert_eq!(ks.tables["late"].partition_key, ["k"]);
    let seen = recorder.take();
    assert!(!seen.is_empty());
    // Every schema query since was narrowed to `sm`.
    for (query, keyspace) in &seen {
        assert!(
            query.ends_with("WHERE keyspace_name = ?") && keyspace.as_deref() == Some("sm"),
            "{query} for {keyspace:?}: {seen:?}"
        );
    }
    // The other keyspace is as it was.
    assert!(session
        .get_cluster_state()
        .get_keyspace("other")
        .is_some_and(|ks| ks.tables.contains_key("kv")));

    // A dropped keyspace leaves the model.
    run(&session, "DROP KEYSPACE other").await;
    for _ in 0..200 {
        if session.get_cluster_state().get_keyspace("other").is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(session.get_cluster_state().get_keyspace("other").is_none());
    assert!(session.get_cluster_state().get_keyspace("sm").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_options_narrow_what_is_read() {
    let (cluster, recorder) = cluster().await;
    let admin = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();
    for cql in SCHEMA {
        run(&admin, cql).await;
    }

    // Off: routing still knows the keyspace, the model is empty.
    recorder.take();
    let off = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .fetch_schema_metadata(false)
        .build()
        .await
        .unwrap();
    assert!(off.get_cluster_state().get_keyspace("sm").is_none());
    assert_eq!(off.get_cluster_state().keyspaces_iter().count(), 0);
    assert_eq!(off.cluster().keyspaces().get("sm"), Some(&false));
    let read = recorder.take();
    assert!(
        !read.iter().any(|(q, _)| q.contains("system_schema.types")),
        "{read:?}"
    );

    // One keyspace: only it is read, and only it is known.
    let one = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .keyspaces_to_fetch(["sm"])
        .build()
        .await
        .unwrap();
    let state = one.get_cluster_state();
    let names: Vec<&str> = state.keyspaces_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["sm"]);
    assert_eq!(
        state.get_keyspace("sm").unwrap().tables["t"].columns.len(),
        9
    );
}
