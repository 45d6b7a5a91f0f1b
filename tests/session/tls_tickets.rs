//! TLS session tickets and the pools: a node that accepts its tickets on
//! every shard resumes all of a session's shard connections after the first
//! (cold start and after a restart); a node whose tickets resume only on the
//! issuing shard still gets every shard covered.

use std::time::{Duration, Instant};

use scylla_driver::pool::backoff::ExponentialBackoff;
use scylla_driver::tls::TlsConfig;
use scylla_driver::{Session, SessionBuilder};
use scylla_testbed::{StatsCounters, TestCluster, TicketScope, TlsOptions};

const FULL: Duration = Duration::from_secs(20);
const SHARDS: u16 = 8;

async fn cluster(scope: TicketScope) -> TestCluster {
    TestCluster::builder()
        .nodes(2)
        .shards(SHARDS)
        .tls(TlsOptions::default().tickets(scope))
        .start()
        .await
        .unwrap()
}

async fn session(cluster: &TestCluster, pacing: bool) -> Session {
    let tls = TlsConfig::builder()
        .ca_pem(cluster.tls_ca_pem().unwrap().as_bytes())
        .unwrap()
        .build()
        .unwrap();
    // The contact point is node 1: node 0 is the one restarted.
    SessionBuilder::new()
        .known_node(cluster.tls_addrs()[1].to_string())
        .tls(tls)
        .tls_ticket_pacing(pacing)
        .reconnect_policy(std::sync::Arc::new(ExponentialBackoff::new(
            Duration::from_millis(20),
            Duration::from_millis(200),
        )))
        .reconnect_spread(Duration::from_millis(100))
        .build()
        .await
        .unwrap()
}

fn node(cluster: &TestCluster, i: usize) -> StatsCounters {
    cluster.node_stats(i).unwrap().node
}

/// Every accepted TLS connection of node `i` was counted once, as full or
/// resumed; its counters once they agree. A connection is counted as
/// accepted before its TLS handshake and as full or resumed after it, and
/// a first setup that a loaded machine stalls is raced by a second one that
/// may still be in its handshake when the pools are full: waits (bounded)
/// for it.
async fn counted_once(cluster: &TestCluster, i: usize) -> StatsCounters {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut c = node(cluster, i);
    while c.tls_handshakes_full + c.tls_handshakes_resumed != c.accepted_tls
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
        c = node(cluster, i);
    }
    assert_eq!(
        c.tls_handshakes_full + c.tls_handshakes_resumed,
        c.accepted_tls,
        "node {i}: {c:?}"
    );
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_node_tickets_resume_every_shard_connection_after_the_first() {
    let cluster = cluster(TicketScope::Node).await;
    let s = session(&cluster, true).await;
    assert!(s.wait_for_all_shards(FULL).await);
    let shards = u64::from(SHARDS);
    // A first setup that a loaded machine stalls is raced by a second one
    // (counted in setup_races), made before the node issued a ticket: a full
    // handshake, whose connection may be kept for its shard (one resumed
    // shard-aware connection fewer).
    let races = s.metrics().snapshot().setup_races;
    for i in 0..2 {
        let c = counted_once(&cluster, i).await;
        assert!(
            c.tls_handshakes_resumed + races >= shards - 1,
            "node {i} at cold start: {} resumed of {} TLS handshakes ({races} races)",
            c.tls_handshakes_resumed,
            c.accepted_tls
        );
    }

    // The session counts its pool connections' handshakes as the nodes do
    // (the nodes also count the control connection, the session's first
    // connection: a full handshake, no ticket exists yet). The session
    // counts a connection once its setup has ended, after the node counted
    // its TLS handshake: waits (bounded) for a raced setup still running.
    let nodes_count = || {
        (0..2).map(|i| node(&cluster, i)).fold((0, 0), |(f, r), c| {
            (f + c.tls_handshakes_full, r + c.tls_handshakes_resumed)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut m, (mut full, mut resumed)) = (s.metrics().snapshot(), nodes_count());
    while (m.tls_handshakes_full + 1, m.tls_handshakes_resumed) != (full, resumed)
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
        (m, (full, resumed)) = (s.metrics().snapshot(), nodes_count());
    }
    assert_eq!(m.tls_handshakes_resumed, resumed, "{m:?}");
    assert_eq!(m.tls_handshakes_full + 1, full, "{m:?}");

    // A restart: new ticket keys, so the first handshake is a full one, and
    // the others resume with the tickets of the new lifetime.
    // Stopped, and seen gone by the session, before it starts again: a
    // reconnect that falls into the moment the node is stopping (it closes
    // its listeners one after another) gets a connection of the old
    // lifetime and its tickets, which the restarted node refuses (under
    // load, 4 of 8 handshakes after the restart were full ones that way).
    cluster.stop_node(0).await.unwrap();
    let gone = async {
        while s.cluster_state().nodes[..]
            .iter()
            .any(|n| n.host_id == cluster.nodes()[0].host_id && n.pool.is_connected())
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(FULL, gone).await.unwrap();
    let races_before = s.metrics().snapshot().setup_races;
    cluster.start_node(0).await.unwrap();
    let reconnected = async {
        // Bounded by FULL (the timeout around this block).
        loop {
            let c = node(&cluster, 0);
            if c.connections >= shards && s.wait_for_all_shards(FULL).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(FULL, reconnected).await.unwrap();
    let c = counted_once(&cluster, 0).await;
    assert!(c.tls_handshakes_full >= 1, "{c:?}");
    let races = s.metrics().snapshot().setup_races - races_before;
    assert!(
        c.tls_handshakes_resumed + races >= shards - 1,
        "after the restart: {} resumed of {} TLS handshakes ({races} races)",
        c.tls_handshakes_resumed,
        c.accepted_tls
    );
    s.close(Duration::from_secs(1)).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_shard_tickets_still_cover_every_shard() {
    let cluster = cluster(TicketScope::Shard).await;
    let s = session(&cluster, true).await;
    assert!(s.wait_for_all_shards(FULL).await);
    for i in 0..2 {
        let c = counted_once(&cluster, i).await;
        // One connection per shard, and the control connection on node 1.
        assert!(c.connections >= u64::from(SHARDS), "node {i}: {c:?}");
        // Tickets of one shard never resume on another: nearly every
        // handshake is a full one.
        assert!(c.tls_handshakes_full >= u64::from(SHARDS) - 1, "{c:?}");
    }
    s.close(Duration::from_secs(1)).await;
    cluster.shutdown().await;
}
