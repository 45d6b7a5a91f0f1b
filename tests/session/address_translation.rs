//! Address translation and host filters against the in-process test cluster.
//!
//! The cluster advertises `127.255.y.n` for nodes listening on `127.x.y.n`
//! (`advertise_unreachable`): nothing listens there, so a connection that
//! misses the translation is refused on loopback. With the translator the
//! session reaches every node, and every shard through the shard-aware port;
//! without it, only the contact point.
#![allow(clippy::unwrap_used, missing_docs)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use scylla_driver::policy::{
    AddressTranslator, DatacenterFilter, MapTranslator, TranslationError, UntranslatedPeer,
};
use scylla_driver::SessionBuilder;
use scylla_testbed::TestCluster;

const SHARDS: u16 = 4;

async fn advertising_cluster(nodes: usize, peers_v2: bool) -> TestCluster {
    TestCluster::builder()
        .nodes(nodes)
        .shards(SHARDS)
        .advertise_unreachable(true)
        .peers_v2(peers_v2)
        .start()
        .await
        .unwrap()
}

/// The translation the cluster needs: each node's advertised IP to the one
/// it listens on (ports kept); counts its calls.
#[derive(Debug)]
struct Counting {
    map: MapTranslator,
    calls: AtomicUsize,
}

#[async_trait::async_trait]
impl AddressTranslator for Counting {
    async fn translate_address(
        &self,
        peer: &UntranslatedPeer,
    ) -> Result<SocketAddr, TranslationError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        assert_eq!(peer.datacenter(), Some("datacenter1"), "{peer:?}");
        self.map.translate(peer.untranslated_address())
    }
}

fn translator(cluster: &TestCluster) -> Arc<Counting> {
    let map = cluster
        .nodes()
        .iter()
        .fold(MapTranslator::new(), |m, n| m.ip(n.advertised, n.address));
    Arc::new(Counting {
        map,
        calls: AtomicUsize::new(0),
    })
}

fn accepted(cluster: &TestCluster, i: usize) -> u64 {
    let s = cluster.node_stats(i).unwrap().node;
    s.accepted_regular + s.accepted_shard_aware
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn translated_nodes_are_reached_on_every_shard_through_the_shard_aware_port() {
    // Both ways of learning the peers: system.peers (ScyllaDB) and
    // system.peers_v2 (Cassandra 4+, with per-peer native ports).
    for peers_v2 in [false, true] {
        let cluster = advertising_cluster(3, peers_v2).await;
        for n in cluster.nodes() {
            assert_ne!(n.advertised, n.address);
            assert_eq!(n.advertised.to_string().split('.').nth(1), Some("255"));
        }
        let t = translator(&cluster);
        let builder = SessionBuilder::new()
            .known_node(cluster.cql_addrs()[0].to_string())
            .address_translator(t.clone());
        // Shares the session's record of whether peers_v2 exists.
        let node_opts = builder.config.control.nodes.clone();
        let session = builder.build().await.unwrap();
        assert_eq!(node_opts.peers_v2_missing(), !peers_v2);
        assert!(
            session.wait_for_all_shards(Duration::from_secs(20)).await,
            "peers_v2={peers_v2}: not every shard connected"
        );
        // The session's nodes are at the listening (translated) addresses.
        let state = session.cluster_state();
        let mut addrs: Vec<SocketAddr> = state.nodes.iter().map(|n| n.address).collect();
        addrs.sort();
        let mut want = cluster.cql_addrs();
        want.sort();
        assert_eq!(addrs, want, "peers_v2={peers_v2}");
        // STATUS_CHANGE events name nodes by their advertised address: the
        // latest read's translations map each peer's to where it listens
        // (the control connection's own node is known by the address it
        // reached, and is not a peer).
        for (n, addr) in cluster.nodes().iter().zip(cluster.cql_addrs()).skip(1) {
            let reported = SocketAddr::new(n.advertised, addr.port());
            assert_eq!(node_opts.translated(reported), addr, "peers_v2={peers_v2}");
        }
        assert!(
            t.calls.load(Ordering::Relaxed) >= 2,
            "the translator was not used"
        );
        // Every shard of every node got a connection through the
        // shard-aware port (on the translated IP).
        for i in 0..cluster.len() {
            let stats = cluster.node_stats(i).unwrap();
            assert_eq!(stats.shards.len(), usize::from(SHARDS));
            println!(
                "peers_v2={peers_v2} node {i} ({} advertised as {}): per shard (regular, shard-aware) = {:?}",
                cluster.nodes()[i].address,
                cluster.nodes()[i].advertised,
                stats
                    .shards
                    .iter()
                    .map(|s| (s.accepted_regular, s.accepted_shard_aware))
                    .collect::<Vec<_>>()
            );
            for (s, shard) in stats.shards.iter().enumerate() {
                // A pool's first connection (and the control connection) is
                // on the regular port and lands on some shard; every other
                // shard is reached through the shard-aware port.
                assert!(
                    shard.accepted_shard_aware >= 1 || shard.accepted_regular >= 1,
                    "peers_v2={peers_v2}: node {i} shard {s} got no connection"
                );
            }
            assert!(
                stats.node.accepted_shard_aware >= u64::from(SHARDS) - 1,
                "peers_v2={peers_v2}: node {i}: only {} shard-aware connections",
                stats.node.accepted_shard_aware
            );
        }
        // Requests work.
        for _ in 0..20 {
            session
                .query_unpaged("SELECT key FROM system.local", ())
                .await
                .unwrap();
        }
        drop(session);
        cluster.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_translator_only_the_contact_point_is_reached() {
    let cluster = advertising_cluster(3, false).await;
    let mut builder = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .connect_timeout(Duration::from_secs(1));
    builder.config.initial_connect_timeout = Duration::from_secs(1);
    let session = builder.build().await.unwrap();
    // The peers are known at their advertised addresses, where nothing
    // listens: their pools stay empty.
    assert!(!session.wait_for_all_shards(Duration::from_secs(2)).await);
    let state = session.cluster_state();
    assert_eq!(state.nodes.len(), 3);
    let advertised: Vec<SocketAddr> = cluster
        .nodes()
        .iter()
        .skip(1)
        .map(|n| SocketAddr::new(n.advertised, n.port))
        .collect();
    for a in &advertised {
        assert!(
            state.nodes.iter().any(|n| n.address == *a),
            "{a} not in the session's nodes"
        );
    }
    for i in 1..cluster.len() {
        assert_eq!(accepted(&cluster, i), 0, "node {i} was reached");
    }
    assert!(accepted(&cluster, 0) > 0);
    drop(session);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_filter_keeps_another_datacenter_out_of_pools_and_the_control_connection() {
    let cluster = TestCluster::builder()
        .nodes(4)
        .shards(2)
        .node_location(2, "dc2", "rack1")
        .node_location(3, "dc2", "rack1")
        .start()
        .await
        .unwrap();
    let dc1 = cluster.config().datacenter.clone();
    // The only contact point is in dc2: the control connection must leave
    // it for a dc1 node it lists.
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[2].to_string())
        .host_filter(Arc::new(DatacenterFilter::new([dc1.clone()])))
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    let state = session.cluster_state();
    let mut addrs: Vec<SocketAddr> = state.nodes.iter().map(|n| n.address).collect();
    addrs.sort();
    let mut want = cluster.cql_addrs()[..2].to_vec();
    want.sort();
    assert_eq!(addrs, want);
    assert!(state.metadata.nodes.iter().all(|n| n.datacenter == dc1));
    for _ in 0..20 {
        session
            .query_unpaged("SELECT key FROM system.local", ())
            .await
            .unwrap();
    }
    let before = (accepted(&cluster, 2), accepted(&cluster, 3));
    // Node 2 had only the first control connection; node 3 nothing.
    assert_eq!(before, (1, 0));
    // A refresh keeps it that way.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!((accepted(&cluster, 2), accepted(&cluster, 3)), before);
    drop(session);
    cluster.shutdown().await;
}
