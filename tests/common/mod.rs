//! Set-up shared by the integration tests that run a session against the
//! in-process test cluster.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::time::Duration;

use scylla_driver::{PreparedStatement, Session, SessionBuilder, TabletWarmup};
use scylla_testbed::{TestCluster, TlsOptions};

/// A cluster of `nodes` x `shards`, and a session with every shard connected.
pub async fn cluster_and_session(
    nodes: usize,
    shards: u16,
    configure: impl FnOnce(SessionBuilder) -> SessionBuilder,
) -> (TestCluster, Session) {
    let cluster = TestCluster::builder()
        .nodes(nodes)
        .shards(shards)
        .start()
        .await
        .unwrap();
    let builder = SessionBuilder::new().known_node(cluster.cql_addrs()[0].to_string());
    let session = configure(builder).build().await.unwrap();
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    (cluster, session)
}

/// Creates keyspace `name` with SimpleStrategy and replication factor `rf`.
pub async fn create_keyspace(session: &Session, name: &str, rf: usize) {
    session
        .query_unpaged(
            format!(
                "CREATE KEYSPACE {name} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {rf}}}"
            ),
            (),
        )
        .await
        .unwrap();
}

/// A session to `cluster` with tablet warm-up `warmup` (and `USE keyspace`),
/// every shard connected.
pub async fn tablet_session(
    cluster: &TestCluster,
    warmup: TabletWarmup,
    keyspace: Option<&str>,
) -> Session {
    let mut b = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .tablet_warmup(warmup);
    if let Some(ks) = keyspace {
        b = b.use_keyspace(ks, true);
    }
    let s = b.build().await.unwrap();
    assert!(s.wait_for_all_shards(Duration::from_secs(20)).await);
    s
}

/// Runs `n` executions of `insert` (a `(bigint, bigint)` statement) with keys
/// `base..base + n`, `concurrency` at a time; panics on any failure.
pub async fn run_inserts(
    s: &Session,
    insert: &PreparedStatement,
    base: i64,
    n: i64,
    concurrency: i64,
) {
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..concurrency {
        let (s, insert) = (s.clone(), insert.clone());
        tasks.spawn(async move {
            let mut k = w;
            while k < n {
                s.execute_unpaged(&insert, (base + k, k)).await.unwrap();
                k += concurrency;
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
}

/// A cluster of `nodes` x `shards` that also serves TLS (its CA and client
/// certificate from `TestCluster::tls_*_pem`), requiring a client
/// certificate when `require_client_cert`.
pub async fn tls_cluster(nodes: usize, shards: u16, require_client_cert: bool) -> TestCluster {
    let mut o = TlsOptions::default();
    o.require_client_cert = require_client_cert;
    TestCluster::builder()
        .nodes(nodes)
        .shards(shards)
        .tls(o)
        .start()
        .await
        .unwrap()
}

/// `e` and its sources, joined as anyhow's `{:#}` joins them.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        text.push_str(": ");
        text.push_str(&s.to_string());
        next = s.source();
    }
    text
}
