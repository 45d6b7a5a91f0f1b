//! Protocol v5 end to end against the in-process test cluster: negotiation
//! (a v5 cluster, and a v4-only one like ScyllaDB), checksummed segments
//! that catch damage on the wire, and the v4 stall bound.
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use scylla_cql::compression::Compression;
use scylla_cql::frame::request::Query;
use scylla_cql::frame::ProtocolVersion;
use scylla_driver::connection::{
    self, BrokenReason, ConnectionConfig, ConnectionRequestError, ProtocolChoice, RequestOptions,
};
use scylla_driver::SessionBuilder;
use scylla_testbed::{Faults, TestCluster};

use crate::common;
use common::create_keyspace;

async fn cluster(nodes: usize, shards: u16, max: ProtocolVersion) -> TestCluster {
    TestCluster::builder()
        .nodes(nodes)
        .shards(shards)
        .max_protocol_version(max)
        .start()
        .await
        .unwrap()
}

fn refusals(cluster: &TestCluster, nodes: usize) -> u64 {
    (0..nodes)
        .map(|i| cluster.node_stats(i).unwrap().node.version_refusals)
        .sum()
}

fn accepted(cluster: &TestCluster, nodes: usize) -> u64 {
    (0..nodes)
        .map(|i| {
            let s = cluster.node_stats(i).unwrap().node;
            s.accepted_regular + s.accepted_shard_aware
        })
        .sum()
}

/// A v5 cluster: every connection speaks v5, none is refused, and queries
/// work with and without LZ4 (and with Snappy asked for, which v5 segments
/// do not know: uncompressed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v5_cluster_gets_v5_on_every_connection() {
    for compression in [None, Some(Compression::Lz4), Some(Compression::Snappy)] {
        let cluster = cluster(3, 2, ProtocolVersion::V5).await;
        let session = SessionBuilder::new()
            .known_node(cluster.cql_addrs()[0].to_string())
            .compression(compression)
            .build()
            .await
            .unwrap();
        assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
        assert_eq!(session.protocol_version(), Some(ProtocolVersion::V5));
        create_keyspace(&session, "ks", 3).await;
        session
            .query_unpaged("CREATE TABLE ks.t (k int PRIMARY KEY, v text)", ())
            .await
            .unwrap();
        let insert = session
            .prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
            .await
            .unwrap();
        let select = session
            .prepare("SELECT v FROM ks.t WHERE k = ?")
            .await
            .unwrap();
        for k in 0..200i32 {
            session
                .execute_unpaged(
                    &insert,
                    (k, format!("value {k}").repeat(k as usize % 7 + 1)),
                )
                .await
                .unwrap();
        }
        for k in 0..200i32 {
            let r = session.execute_unpaged(&select, (k,)).await.unwrap();
            let (v,): (String,) = r.single_row().unwrap();
            assert_eq!(v, format!("value {k}").repeat(k as usize % 7 + 1));
        }
        let accepted = accepted(&cluster, 3);
        let v5: u64 = (0..3)
            .map(|i| cluster.node_stats(i).unwrap().node.connections_v5)
            .sum();
        assert_eq!(refusals(&cluster, 3), 0);
        assert_eq!(v5, accepted, "{compression:?}: every connection speaks v5");
    }
}

/// Snappy compresses v4 bodies (both ways: large compressible values
/// round-trip); a v5 connection asked for Snappy runs uncompressed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snappy_compresses_v4_and_v5_runs_uncompressed() {
    for (version, expect) in [
        (ProtocolVersion::V4, Some(Compression::Snappy)),
        (ProtocolVersion::V5, None),
    ] {
        let cluster = cluster(1, 2, version).await;
        let session = SessionBuilder::new()
            .known_node(cluster.cql_addrs()[0].to_string())
            .compression(Some(Compression::Snappy))
            .build()
            .await
            .unwrap();
        assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
        let conn = session.cluster_state().nodes[0]
            .pool
            .connection_for(None)
            .expect("a pool connection");
        assert_eq!(conn.info().server.compression, expect, "{version:?}");
        create_keyspace(&session, "ks", 1).await;
        session
            .query_unpaged("CREATE TABLE ks.t (k int PRIMARY KEY, v text)", ())
            .await
            .unwrap();
        let big = "compressible ".repeat(3000);
        for k in 0..10i32 {
            session
                .query_unpaged(
                    "INSERT INTO ks.t (k, v) VALUES (?, ?)",
                    (k, format!("{k}{big}")),
                )
                .await
                .unwrap();
        }
        let rows: Vec<(i32, String)> = session
            .query_unpaged("SELECT k, v FROM ks.t", ())
            .await
            .unwrap()
            .into_rows()
            .unwrap();
        assert_eq!(rows.len(), 10, "{version:?}");
        assert!(rows.iter().all(|(k, v)| *v == format!("{k}{big}")));
    }
}

/// A v4-only cluster (as ScyllaDB): the first connection offers v5, is
/// refused once, and every later connection of the session (control
/// connection, all pools) starts with v4: exactly one extra round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v4_only_cluster_costs_one_refusal_per_session() {
    const NODES: usize = 3;
    const SHARDS: u16 = 4;
    let cluster = cluster(NODES, SHARDS, ProtocolVersion::V4).await;
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    assert_eq!(session.protocol_version(), Some(ProtocolVersion::V4));
    let r = session
        .query_unpaged("SELECT release_version FROM system.local", ())
        .await
        .unwrap();
    assert_eq!(r.rows_count(), 1);
    assert_eq!(
        refusals(&cluster, NODES),
        1,
        "one refusal for the whole session"
    );
    // The refused connection, the control connection, and one per shard.
    assert_eq!(
        accepted(&cluster, NODES),
        1 + 1 + NODES as u64 * SHARDS as u64
    );

    // A pinned session never offers v5.
    let pinned = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .protocol_version(ProtocolVersion::V4)
        .build()
        .await
        .unwrap();
    assert!(pinned.wait_for_all_shards(Duration::from_secs(20)).await);
    assert_eq!(refusals(&cluster, NODES), 1);

    // Pinned to v5 against a v4-only cluster: a clear error, no fallback.
    let err = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .protocol_version(ProtocolVersion::V5)
        .build()
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("does not speak protocol v5"), "{text}");
}

/// One damaged segment: the request whose response it carried fails with
/// a "connection broken" error naming the checksum (it is never answered
/// with damaged bytes), and a new connection succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_segment_is_a_checksum_error_never_a_wrong_value() {
    let cluster = cluster(1, 1, ProtocolVersion::V5).await;
    let addr = cluster.cql_addrs()[0];
    for compression in [None, Some(Compression::Lz4)] {
        let config = {
            let mut built = ConnectionConfig::default();
            built.compression = compression;
            built.protocol = ProtocolChoice::pinned(ProtocolVersion::V5);
            built
        };
        let query = Query {
            contents: "SELECT release_version FROM system.local".into(),
            params: Default::default(),
        };
        let conn = connection::open(addr, None, &config).await.unwrap();
        assert_eq!(conn.protocol_version(), ProtocolVersion::V5);
        conn.request(&query, &RequestOptions::default())
            .await
            .unwrap();
        cluster
            .set_faults(0, Faults::none().with_corrupt_segments(1))
            .await
            .unwrap();
        let err = conn
            .request(&query, &RequestOptions::default())
            .await
            .unwrap_err();
        match &err {
            ConnectionRequestError::Broken(b) => assert!(
                matches!(b.reason(), BrokenReason::Segment(_)),
                "{compression:?}: {err}"
            ),
            other => panic!("{compression:?}: expected a broken connection, got {other}"),
        }
        let chain = common::error_chain(&err);
        assert!(chain.contains("checksum"), "{chain}");
        conn.closed().await;
        let again = connection::open(addr, None, &config).await.unwrap();
        again
            .request(&query, &RequestOptions::default())
            .await
            .unwrap();
    }
    let damaged = cluster.node_stats(0).unwrap().segments_corrupted;
    assert_eq!(damaged, 2);
}

/// Through the session: damaged segments under a steady load of reads on
/// three replicas. A read whose response was damaged fails on its
/// connection with the checksum error and is retried on the next replica
/// (idempotent); every read returns the value written, none a wrong one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damage_under_load_never_reaches_the_caller() {
    const NODES: usize = 3;
    let cluster = cluster(NODES, 2, ProtocolVersion::V5).await;
    // Every replica must take its turn within each round of 100 reads: plans
    // that prefer the replicas measured faster (the default) may leave one
    // out for that long.
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .latency_aware_routing(false)
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    create_keyspace(&session, "ks", 3).await;
    session
        .query_unpaged("CREATE TABLE ks.t (k int PRIMARY KEY, v int)", ())
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
        .await
        .unwrap();
    for k in 0..100i32 {
        session.execute_unpaged(&insert, (k, k * 7)).await.unwrap();
    }
    let select = session
        .prepare("SELECT v FROM ks.t WHERE k = ?")
        .await
        .unwrap()
        .with_idempotent(true);
    let corrupted = |cluster: &TestCluster| -> u64 {
        (0..NODES)
            .map(|i| cluster.node_stats(i).unwrap().segments_corrupted)
            .sum()
    };
    for round in 0..5 {
        let before = corrupted(&cluster);
        // One node per round: the retry then finds an intact replica.
        cluster
            .set_faults(round % NODES, Faults::none().with_corrupt_segments(1))
            .await
            .unwrap();
        for k in 0..100i32 {
            let r = session.execute_unpaged(&select, (k,)).await.unwrap();
            let (v,): (i32,) = r.single_row().unwrap();
            assert_eq!(v, k * 7, "round {round}");
        }
        assert!(
            corrupted(&cluster) > before,
            "round {round}: no segment was damaged"
        );
    }
    assert!(session.metrics().snapshot().retries > 0);
}

/// v4 has no checksums: a damaged length field makes the reader wait for
/// bytes that never come. The stall probe recycles the connection within
/// its bound, and requests succeed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_v4_length_is_recycled_within_the_bound() {
    let cluster = cluster(1, 1, ProtocolVersion::V5).await;
    let addr = cluster.cql_addrs()[0];
    let config = {
        let mut built = ConnectionConfig::default();
        built.protocol = ProtocolChoice::pinned(ProtocolVersion::V4);
        built.stall_probe_after = Some(Duration::from_millis(300));
        built.stall_probe_timeout = Duration::from_millis(300);
        built
    };
    let query = Query {
        contents: "SELECT release_version FROM system.local".into(),
        params: Default::default(),
    };
    let conn = connection::open(addr, None, &config).await.unwrap();
    conn.request(&query, &RequestOptions::default())
        .await
        .unwrap();
    cluster
        .set_faults(0, Faults::none().with_damaged_v4_lengths(1))
        .await
        .unwrap();
    let started = Instant::now();
    let err = conn
        .request(&query, &{
            let mut built = RequestOptions::default();
            built.timeout = Some(Duration::from_secs(10));
            built
        })
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(&err, ConnectionRequestError::Broken(b) if matches!(b.reason(), BrokenReason::ReadStalled { .. })),
        "{err}"
    );
    // probe after + probe timeout + a tick or two (generous for a shared machine).
    assert!(took < Duration::from_secs(3), "recycled after {took:?}");
    let again = connection::open(addr, None, &config).await.unwrap();
    again
        .request(&query, &RequestOptions::default())
        .await
        .unwrap();
}
