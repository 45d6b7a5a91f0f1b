//! The driver over TLS against the in-process test cluster's TLS listeners:
//! shard-aware pools through `SCYLLA_SHARD_AWARE_PORT_SSL` with exactly one
//! attempt per shard (judged by the cluster's accounting and the driver's
//! metrics), shard-exact routing of prepared requests (on both record
//! layers: rustls', the default, and the driver's opt-in), and mutual TLS.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_driver::connection::tls::{RecordLayer, TlsConfig};
use scylla_driver::connection::ConnectionConfig;
use scylla_driver::metrics::{Metrics, MetricsSnapshot};
use scylla_driver::pool::backoff::ExponentialBackoff;
use scylla_driver::pool::{NodePool, PoolConfig};
use scylla_driver::SessionBuilder;
use scylla_testbed::TestCluster;

use crate::common::tls_cluster;

const FULL: Duration = Duration::from_secs(20);

fn client_tls(cluster: &TestCluster, with_cert: bool) -> TlsConfig {
    client_tls_with(cluster, with_cert, RecordLayer::default())
}

fn client_tls_with(cluster: &TestCluster, with_cert: bool, layer: RecordLayer) -> TlsConfig {
    let mut b = TlsConfig::builder()
        .ca_pem(cluster.tls_ca_pem().unwrap().as_bytes())
        .unwrap()
        .record_layer(layer);
    if with_cert {
        b = b
            .client_cert_pem(
                cluster.tls_client_cert_pem().unwrap().as_bytes(),
                cluster.tls_client_key_pem().unwrap().as_bytes(),
            )
            .unwrap();
    }
    b.build().unwrap()
}

fn pool_config(tls: TlsConfig) -> PoolConfig {
    let mut connection = {
        let mut built = ConnectionConfig::default();
        built.handshake_timeout = Duration::from_secs(2);
        built
    };
    connection.tls = Some(tls);
    {
        let mut built = PoolConfig::default();
        built.connection = connection;
        built.reconnect = Arc::new(ExponentialBackoff::new(
            Duration::from_millis(20),
            Duration::from_millis(500),
        ));
        built.reconnect_spread = Duration::from_millis(200);
        built
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shard_of_every_node_through_the_tls_shard_aware_port_in_one_attempt() {
    let cluster = tls_cluster(3, 8, false).await;
    let tls_sa_port = cluster.tls_shard_aware_port().unwrap();
    let tls = client_tls(&cluster, false);
    for (node, addr) in cluster.tls_addrs().into_iter().enumerate() {
        let metrics = Arc::new(Metrics::default());
        let before = cluster.node_stats(node).unwrap().node;
        let pool = NodePool::new(addr, pool_config(tls.clone()), metrics.clone());
        assert!(pool.wait_until_full(FULL).await, "node {node}");
        let snap = pool.snapshot();
        assert_eq!(snap.covered_shards(), 8);
        for (shard, conns) in snap.shards.iter().enumerate() {
            assert_eq!(conns.len(), 1);
            assert_eq!(conns[0].shard(), Some(shard as u16));
            let port = conns[0].info().peer.port();
            assert!(
                port == addr.port() || port == tls_sa_port,
                "shard {shard} on port {port}"
            );
        }
        // Exactly one attempt per shard: 1 on the TLS port, 7 on the TLS
        // shard-aware port, none wasted, no fallback. A first setup that a
        // loaded machine stalls past the race delay is raced by a second
        // one on the TLS port (counted in setup_races): one more attempt
        // there, and one fewer on the shard-aware port if its connection is
        // kept for its shard. Waits (bounded) for a raced setup still
        // running.
        let races = metrics.snapshot().setup_races;
        let deadline = Instant::now() + Duration::from_secs(5);
        let regular_ended = |m: &MetricsSnapshot| m.connects_regular_ok + m.connects_regular_failed;
        while regular_ended(&metrics.snapshot()) < 1 + races && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let m = metrics.snapshot();
        let kept_regular = snap
            .shards
            .iter()
            .filter(|conns| conns[0].info().peer.port() == addr.port())
            .count() as u64;
        assert!((1..=1 + races).contains(&kept_regular), "{kept_regular}");
        assert_eq!(m.connects_regular_ok, 1 + races, "{m:?}");
        assert_eq!(m.connects_shard_aware_ok, 8 - kept_regular, "{m:?}");
        assert_eq!(
            m.connect_attempts(),
            m.connects_regular_ok + m.connects_shard_aware_ok,
            "{m:?}"
        );
        assert_eq!(m.wrong_shard_landings, 0);
        // A raced connection not kept for its shard is closed.
        assert!(m.excess_connections_closed <= races, "{m:?}");
        assert_eq!(pool.fallback(), None);
        // The cluster saw the same on this node: one accepted connection
        // per attempt.
        let after = cluster.node_stats(node).unwrap().node;
        let accepted =
            |s: &scylla_testbed::stats::StatsCounters| s.accepted_regular + s.accepted_shard_aware;
        assert_eq!(
            accepted(&after) - accepted(&before),
            m.connect_attempts(),
            "node {node}"
        );
        assert_eq!(
            after.accepted_shard_aware - before.accepted_shard_aware,
            m.connects_shard_aware_ok,
            "node {node}"
        );
        // All of them over TLS.
        assert_eq!(
            after.accepted_tls - before.accepted_tls,
            m.connect_attempts(),
            "node {node}"
        );
        pool.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_requests_over_tls_land_on_their_shard() {
    let cluster = tls_cluster(3, 8, false).await;
    for layer in [RecordLayer::Rustls, RecordLayer::Driver] {
        prepared_requests_land_on_their_shard(&cluster, layer).await;
    }
}

async fn prepared_requests_land_on_their_shard(cluster: &TestCluster, layer: RecordLayer) {
    let session = SessionBuilder::new()
        .known_node(cluster.tls_addrs()[0].to_string())
        .tls(client_tls_with(cluster, false, layer))
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(FULL).await);
    let m = session.metrics().snapshot();
    assert_eq!(m.wrong_shard_landings, 0, "{m:?}");
    assert_eq!(m.connects_shard_aware_failed, 0, "{m:?}");
    session
        .query_unpaged(
            format!("CREATE KEYSPACE ks_{layer} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"),
            (),
        )
        .await
        .unwrap();
    session
        .query_unpaged(
            format!("CREATE TABLE ks_{layer}.t (pk bigint PRIMARY KEY, v text)"),
            (),
        )
        .await
        .unwrap();
    let insert = session
        .prepare(format!("INSERT INTO ks_{layer}.t (pk, v) VALUES (?, ?)"))
        .await
        .unwrap();
    let select = session
        .prepare(format!("SELECT pk, v FROM ks_{layer}.t WHERE pk = ?"))
        .await
        .unwrap();
    let before = cluster.stats();
    for k in 0..200i64 {
        session
            .execute_unpaged(&insert, (k, format!("v{k}")))
            .await
            .unwrap();
    }
    for k in 0..200i64 {
        let r = session.execute_unpaged(&select, (k,)).await.unwrap();
        let (pk, v): (i64, &str) = r.single_row().unwrap();
        assert_eq!((pk, v), (k, format!("v{k}").as_str()));
    }
    let after = cluster.stats();
    let total = |s: &scylla_testbed::stats::ClusterStats,
                 f: fn(&scylla_testbed::stats::StatsCounters) -> u64| {
        s.nodes.iter().map(|n| f(&n.node)).sum::<u64>()
    };
    let served = total(&after, |c| c.requests_served) - total(&before, |c| c.requests_served);
    assert!(served >= 400, "{layer}: served {served}");
    assert_eq!(
        total(&after, |c| c.requests_wrong_shard) - total(&before, |c| c.requests_wrong_shard),
        0,
        "{layer}: wrong shard"
    );
    assert_eq!(session.metrics().snapshot().shard_fallback_requests, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_session_works_and_no_client_cert_is_refused() {
    let cluster = tls_cluster(1, 2, true).await;
    let session = SessionBuilder::new()
        .known_node(cluster.tls_addrs()[0].to_string())
        .tls(client_tls(&cluster, true))
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(FULL).await);
    session
        .query_unpaged("SELECT key FROM system.local", ())
        .await
        .unwrap();

    let e = SessionBuilder::new()
        .known_node(cluster.tls_addrs()[0].to_string())
        .tls(client_tls(&cluster, false))
        .connect_timeout(Duration::from_secs(2))
        .handshake_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("client certificate"), "{e}");
}
