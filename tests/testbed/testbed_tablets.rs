//! The test cluster's tablets, exercised with plain sockets and the protocol
//! crate's codecs: the `tablets` keyspace option and the cluster default,
//! `system_schema.scylla_keyspaces` and `system.tablets`, the
//! `tablets-routing-v1` payload on misrouted requests (and only there, and
//! only to connections that asked for it), the misroute counter, and tablet
//! migration and split.

// Test helpers unwrap on purpose: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use crate::raw_client;

use scylla_cql::frame::response::Response;
use scylla_cql::frame::tablets::{TabletRoutingInfo, TABLETS_ROUTING_V1_KEY};
use scylla_cql::token::murmur3_token;
use scylla_cql::types::deserialize::DeserializeValue;
use scylla_cql::types::{ColumnType, CqlValue, SerializedValues};
use scylla_testbed::{TabletError, TestCluster};
use uuid::Uuid;

use raw_client::{cells, error_code, rows, Client};

const INVALID: i32 = 0x2200;
const SYNTAX: i32 = 0x2000;

fn text(c: &Option<Vec<u8>>) -> Option<String> {
    c.as_ref().map(|b| String::from_utf8(b.clone()).unwrap())
}

fn int(c: &Option<Vec<u8>>) -> Option<i32> {
    c.as_ref()
        .map(|b| i32::from_be_bytes(b[..].try_into().unwrap()))
}

fn bigint(c: &Option<Vec<u8>>) -> i64 {
    i64::from_be_bytes(c.as_ref().unwrap()[..].try_into().unwrap())
}

fn replicas(c: &Option<Vec<u8>>) -> Vec<(Uuid, u16)> {
    let typ = ColumnType::from_cql("frozen<list<frozen<tuple<uuid, int>>>>").unwrap();
    let CqlValue::List(items) = CqlValue::deserialize(&typ, c.as_deref()).unwrap() else {
        panic!("not a list")
    };
    items
        .into_iter()
        .map(|t| match t {
            CqlValue::Tuple(v) => match (&v[0], &v[1]) {
                (Some(CqlValue::Uuid(h)), Some(CqlValue::Int(s))) => (*h, *s as u16),
                other => panic!("bad replica {other:?}"),
            },
            other => panic!("bad replica {other:?}"),
        })
        .collect()
}

/// `keyspace -> initial_tablets` from `system_schema.scylla_keyspaces`.
async fn initial_tablets(cl: &mut Client, ks: &str) -> Option<Option<i32>> {
    let r = rows(
        cl.query("SELECT keyspace_name, initial_tablets FROM system_schema.scylla_keyspaces")
            .await,
    );
    cells(&r)
        .iter()
        .find(|row| text(&row[0]).as_deref() == Some(ks))
        .map(|row| int(&row[1]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyspace_options_and_schema_tables() {
    let c = TestCluster::builder()
        .nodes(3)
        .shards(4)
        .seed(11)
        .tablets(16)
        .start()
        .await
        .unwrap();
    let mut cl = Client::connect(c.node(0).unwrap().cql_addr(), false).await;
    let nts = "{'class': 'NetworkTopologyStrategy', 'replication_factor': 3}";
    // The cluster default: NetworkTopologyStrategy keyspaces use tablets.
    cl.ok(&format!("CREATE KEYSPACE a WITH replication = {nts}"))
        .await;
    cl.ok("CREATE TABLE a.t (pk bigint PRIMARY KEY, v int)")
        .await;
    assert_eq!(initial_tablets(&mut cl, "a").await, Some(Some(0)));
    assert_eq!(c.tablets("a", "t").unwrap().len(), 16);
    // An explicit count (rounded up to a power of two).
    cl.ok(&format!(
        "CREATE KEYSPACE b WITH replication = {nts} AND tablets = {{'enabled': true, 'initial': 5}}"
    ))
    .await;
    cl.ok("CREATE TABLE b.t (pk bigint PRIMARY KEY, v int)")
        .await;
    assert_eq!(initial_tablets(&mut cl, "b").await, Some(Some(5)));
    assert_eq!(c.tablets("b", "t").unwrap().len(), 8);
    // Opting out, and SimpleStrategy: vnodes.
    cl.ok(&format!(
        "CREATE KEYSPACE v WITH replication = {nts} AND tablets = {{'enabled': false}}"
    ))
    .await;
    cl.ok("CREATE TABLE v.t (pk bigint PRIMARY KEY, v int)")
        .await;
    cl.ok(
        "CREATE KEYSPACE s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    )
    .await;
    assert_eq!(initial_tablets(&mut cl, "v").await, Some(None));
    assert_eq!(initial_tablets(&mut cl, "s").await, Some(None));
    assert_eq!(c.tablets("v", "t"), None);
    // Tablets need NetworkTopologyStrategy; options are checked.
    let r = cl
        .query("CREATE KEYSPACE x WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1} AND tablets = {'enabled': true}")
        .await;
    assert_eq!(error_code(&r), INVALID, "{r:?}");
    let r = cl
        .query(&format!(
            "CREATE KEYSPACE x WITH replication = {nts} AND tablets = {{'initial': 'many'}}"
        ))
        .await;
    assert_eq!(error_code(&r), SYNTAX, "{r:?}");
    // `replication_factor` is stored per datacenter, as ScyllaDB does.
    let ks = cells(&rows(
        cl.query("SELECT keyspace_name, replication FROM system_schema.keyspaces")
            .await,
    ));
    let a = ks
        .iter()
        .find(|r| text(&r[0]).as_deref() == Some("a"))
        .unwrap();
    let typ = ColumnType::from_cql("map<text, text>").unwrap();
    let repl = CqlValue::deserialize(&typ, a[1].as_deref()).unwrap();
    assert!(format!("{repl:?}").contains("datacenter1"), "{repl:?}");

    // system.tablets: one row per tablet, as the cluster's own view says.
    let all = cells(&rows(
        cl.query(
            "SELECT keyspace_name, table_name, last_token, replicas, tablet_count FROM system.tablets",
        )
        .await,
    ));
    assert_eq!(all.len(), 16 + 8);
    let of_a: Vec<_> = all
        .iter()
        .filter(|r| text(&r[0]).as_deref() == Some("a"))
        .collect();
    let want = c.tablets("a", "t").unwrap();
    assert_eq!(of_a.len(), want.len());
    for (row, t) in of_a.iter().zip(&want) {
        assert_eq!(text(&row[1]).as_deref(), Some("t"));
        assert_eq!(bigint(&row[2]), t.last_token);
        assert_eq!(replicas(&row[3]), t.replicas);
        assert_eq!(int(&row[4]), Some(16));
        assert_eq!(t.replicas.len(), 3);
    }
    // Paged, as drivers read it.
    let first = rows(
        cl.query_with(
            "SELECT * FROM system.tablets",
            SerializedValues::new(),
            Some(5),
            None,
        )
        .await,
    );
    assert_eq!(first.rows_count(), 5);
    assert!(first.paging_state().is_some());

    // Dropping forgets the tablets.
    cl.ok("DROP TABLE a.t").await;
    assert_eq!(c.tablets("a", "t"), None);
    cl.ok("DROP KEYSPACE b").await;
    assert_eq!(c.tablets("b", "t"), None);
    let all = rows(cl.query("SELECT * FROM system.tablets").await);
    assert_eq!(all.rows_count(), 0);
    c.shutdown().await;
}

/// The `tablets-routing-v1` payload of a response, decoded.
fn payload(env: &scylla_cql::frame::envelope::Envelope) -> Option<TabletRoutingInfo> {
    let p = env.custom_payload.as_ref()?;
    let (_, v) = p
        .iter()
        .find(|(k, _)| k.as_str() == TABLETS_ROUTING_V1_KEY)?;
    Some(TabletRoutingInfo::decode(v.as_deref().unwrap()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misrouted_requests_get_the_routing_payload() {
    let c = TestCluster::builder()
        .nodes(2)
        .shards(2)
        .seed(3)
        .start()
        .await
        .unwrap();
    let n0 = c.node(0).unwrap().clone();
    // LZ4 too: the payload travels inside the compressed body.
    let mut cl = Client::connect_with(n0.cql_addr(), true, &[("TABLETS_ROUTING_V1", "")]).await;
    cl.ok("CREATE KEYSPACE tk WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 1} AND tablets = {'initial': 4}").await;
    cl.ok("CREATE TABLE tk.t (pk bigint PRIMARY KEY, v int)")
        .await;
    // Which shard is each connection on? The one whose counter moved
    // (connections go to the least loaded shard, so the two differ).
    let on = |c: &TestCluster| -> Vec<usize> {
        let stats = c.stats();
        (0..2)
            .filter(|&s| stats.nodes[0].shards[s].connections > 0)
            .collect()
    };
    let mine = on(&c);
    assert_eq!(mine.len(), 1);
    let mine = mine[0];
    let mut plain = Client::connect(n0.cql_addr(), false).await;
    assert_eq!(on(&c).len(), 2, "one connection per shard");
    let plain_shard = 1 - mine;
    let here = |s: usize| (n0.host_id, s as u16);
    let tablets = c.tablets("tk", "t").unwrap();
    let owner = |k: i64| {
        let t = murmur3_token(&k.to_be_bytes()).0;
        tablets
            .iter()
            .find(|x| x.first_token < t && t <= x.last_token)
            .unwrap()
            .clone()
    };
    let good = (0..10_000i64)
        .find(|&k| owner(k).replicas.contains(&here(mine)))
        .unwrap();
    let bad = (0..10_000i64)
        .find(|&k| !owner(k).replicas.contains(&here(mine)))
        .unwrap();
    let misrouted = |c: &TestCluster| c.stats().total(|s| s.requests_tablet_misrouted);

    let insert = |k: i64| format!("INSERT INTO tk.t (pk, v) VALUES ({k}, 1)");
    let q = |text: &str| {
        scylla_cql::frame::request::Request::Query(scylla_cql::frame::request::Query {
            contents: text.to_owned().into(),
            params: Default::default(),
        })
    };
    let (env, r) = cl.send_envelope(&q(&insert(good))).await;
    assert!(matches!(r, Response::Result(_)), "{r:?}");
    assert_eq!(
        payload(&env),
        None,
        "a request at its replica gets no payload"
    );
    assert_eq!(misrouted(&c), 0);

    let (env, r) = cl.send_envelope(&q(&insert(bad))).await;
    assert!(matches!(r, Response::Result(_)), "served anyway: {r:?}");
    let p = payload(&env).expect("a misrouted request gets the payload");
    let want = owner(bad);
    assert_eq!(
        (p.first_token.0, p.last_token.0),
        (want.first_token, want.last_token)
    );
    assert_eq!(p.replicas, want.replicas);
    assert_eq!(misrouted(&c), 1);

    // A connection that did not ask for tablets routing gets no payload,
    // but the misroute is still counted.
    let bad_for_plain = (0..10_000i64)
        .find(|&k| !owner(k).replicas.contains(&here(plain_shard)))
        .unwrap();
    let (env, _) = plain
        .send_envelope(&q(&format!(
            "SELECT * FROM tk.t WHERE pk = {bad_for_plain}"
        )))
        .await;
    assert!(env.custom_payload.is_none());
    assert_eq!(misrouted(&c), 2);

    // Migrating the good key's tablet away from this shard: the next request
    // is misrouted and the payload names the new place.
    let index = tablets
        .iter()
        .position(|t| t.last_token == owner(good).last_token)
        .unwrap();
    let other = 1 - mine as u16;
    c.migrate_tablet("tk", "t", index, 0, (0, other)).unwrap();
    let (env, _) = cl.send_envelope(&q(&insert(good))).await;
    let p = payload(&env).expect("moved away: misrouted");
    assert_eq!(p.replicas, vec![(n0.host_id, other)]);
    assert_eq!(misrouted(&c), 3);

    // A split halves the ranges; the payload shows the narrower tablet.
    c.split_tablets("tk", "t").unwrap();
    let split = c.tablets("tk", "t").unwrap();
    assert_eq!(split.len(), 8);
    let (env, _) = cl.send_envelope(&q(&insert(bad))).await;
    if let Some(p) = payload(&env) {
        let t = murmur3_token(&bad.to_be_bytes()).0;
        assert!(p.first_token.0 < t && t <= p.last_token.0);
        assert!(split.iter().any(|s| s.last_token == p.last_token.0));
    }

    // Refused changes say why.
    assert_eq!(
        c.migrate_tablet("tk", "nope", 0, 0, (0, 0)),
        Err(TabletError::NoSuchTable("tk".into(), "nope".into()))
    );
    assert_eq!(
        c.migrate_tablet("tk", "t", 0, 0, (0, 9)),
        Err(TabletError::NoSuchShard(9))
    );
    assert_eq!(
        c.migrate_tablet("tk", "t", 99, 0, (0, 0)),
        Err(TabletError::NoSuchTablet(99))
    );
    c.shutdown().await;
}
