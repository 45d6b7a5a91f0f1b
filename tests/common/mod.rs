//! Set-up shared by the integration tests that run a session against the
//! in-process test cluster.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::time::Duration;

use scylla_driver::{Session, SessionBuilder};
use scylla_testbed::TestCluster;

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
