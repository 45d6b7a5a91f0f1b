//! `Session::cluster()`: the read-only view applications get. Its nodes,
//! datacenters, racks and shard counts match the test cluster's topology,
//! and the replicas it names for a token match an independent computation:
//! SimpleStrategy's ring walk written here from the cluster's own tokens for
//! a vnode table, and the cluster's own tablet map for a tablet table.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use scylla_cql::sharding::Sharder;
use scylla_cql::token::Token;
use scylla_driver::{Session, SessionBuilder, TabletWarmup};
use scylla_testbed::TestCluster;

async fn session(cluster: &TestCluster) -> Session {
    let s = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .tablet_warmup(TabletWarmup::UsedKeyspaces)
        .build()
        .await
        .unwrap();
    assert!(s.wait_for_all_shards(Duration::from_secs(20)).await);
    s
}

/// SimpleStrategy: the first `rf` distinct nodes walking the ring clockwise
/// from the first token at or after `t` (wrapping), as host ids.
fn simple_strategy_replicas(cluster: &TestCluster, t: Token, rf: usize) -> Vec<uuid::Uuid> {
    let mut ring: Vec<(i64, uuid::Uuid)> = cluster
        .nodes()
        .iter()
        .flat_map(|n| n.tokens.iter().map(move |tok| (tok.0, n.host_id)))
        .collect();
    ring.sort();
    let start = ring.partition_point(|&(tok, _)| tok < t.0);
    let mut out = Vec::new();
    for i in 0..ring.len() {
        let host = ring[(start + i) % ring.len()].1;
        if !out.contains(&host) {
            out.push(host);
        }
        if out.len() == rf {
            break;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_and_vnode_replicas_match_the_cluster() {
    let cluster = TestCluster::builder()
        .nodes(3)
        .shards(4)
        .vnodes(8)
        .start()
        .await
        .unwrap();
    let s = session(&cluster).await;
    common::create_keyspace(&s, "cv", 2).await;
    s.query_unpaged("CREATE TABLE cv.t (pk bigint PRIMARY KEY, v bigint)", ())
        .await
        .unwrap();
    s.refresh_metadata().await.unwrap();

    let view = s.cluster();
    let nodes = view.nodes();
    assert_eq!(nodes.len(), 3);
    for n in &nodes {
        let t = cluster
            .nodes()
            .iter()
            .find(|c| c.host_id == n.host_id)
            .unwrap();
        assert_eq!(n.address, SocketAddr::new(t.address, t.port));
        assert_eq!(
            (n.datacenter.as_str(), n.rack.as_str()),
            (t.datacenter.as_str(), t.rack.as_str())
        );
        assert_eq!(n.shards, Some(4));
        assert!(n.connections >= 4, "{n:?}");
    }
    let dcs = view.datacenters();
    assert_eq!(dcs.len(), 1, "{dcs:?}");
    assert_eq!(view.keyspaces().get("cv"), Some(&false));

    let insert = s
        .prepare("INSERT INTO cv.t (pk, v) VALUES (?, ?)")
        .await
        .unwrap();
    for key in 0..200_i64 {
        let token = insert.token((key, 0_i64)).unwrap().unwrap();
        let got = view.replicas("cv", "t", token);
        let want = simple_strategy_replicas(&cluster, token, 2);
        let hosts: Vec<_> = got.iter().map(|r| r.host_id).collect();
        assert_eq!(hosts, want, "key {key}");
        for r in &got {
            let sharder = Sharder::new(4.try_into().unwrap(), 12);
            assert_eq!(r.shard, Some(sharder.shard_of(token)), "key {key}");
        }
    }
    assert!(view.replicas("no_such_keyspace", "t", Token(0)).is_empty());
    s.close(Duration::from_secs(1)).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tablet_replicas_match_the_clusters_tablet_map() {
    let cluster = TestCluster::builder()
        .nodes(3)
        .shards(4)
        .tablets(16)
        .start()
        .await
        .unwrap();
    let s = session(&cluster).await;
    s.query_unpaged(
        "CREATE KEYSPACE tv WITH replication = {'class': 'NetworkTopologyStrategy', \
         'replication_factor': 2} AND tablets = {'enabled': true, 'initial': 16}",
        (),
    )
    .await
    .unwrap();
    s.query_unpaged("CREATE TABLE tv.t (pk bigint PRIMARY KEY, v bigint)", ())
        .await
        .unwrap();
    let insert = s
        .prepare("INSERT INTO tv.t (pk, v) VALUES (?, ?)")
        .await
        .unwrap();
    // Requests teach the session the tablets they reach.
    for key in 0..400_i64 {
        s.execute_unpaged(&insert, (key, key)).await.unwrap();
    }
    let view = s.cluster();
    assert_eq!(view.keyspaces().get("tv"), Some(&true));
    let tablets = cluster.tablets("tv", "t").unwrap();
    let mut checked = 0;
    for key in 0..400_i64 {
        let token = insert.token((key, 0_i64)).unwrap().unwrap();
        let got = view.replicas("tv", "t", token);
        let tablet = tablets
            .iter()
            .find(|t| t.first_token < token.0 && token.0 <= t.last_token)
            .unwrap();
        let want: BTreeSet<(uuid::Uuid, Option<u16>)> = tablet
            .replicas
            .iter()
            .map(|&(h, sh)| (h, Some(sh)))
            .collect();
        let got: BTreeSet<_> = got.iter().map(|r| (r.host_id, r.shard)).collect();
        if !got.is_empty() {
            assert_eq!(got, want, "key {key}");
            checked += 1;
        }
    }
    // Every key was written, so every tablet it reached is known.
    assert_eq!(checked, 400);
    s.close(Duration::from_secs(1)).await;
    cluster.shutdown().await;
}
