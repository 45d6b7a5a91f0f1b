//! A session through ScyllaDB's maintenance socket
//! (`SessionBuilder::maintenance_socket`): a 3-node cluster that requires
//! credentials, with each node also listening on a Unix-domain socket. The
//! session through node 1's socket logs in without credentials, creates a
//! keyspace and a table, writes and reads (prepared, paged), and the
//! cluster's counters show that all of its connections came through that
//! socket: none over TCP, none to the other nodes. A path where nothing
//! listens fails `build` with the typed error naming it.
#![cfg(unix)]

use std::time::Duration;

use scylla_driver::cluster::UNIX_SOCKET_NODE_ADDRESS;
use scylla_driver::errors::{ConnectionError, ContactError, ControlError, OpenError};
use scylla_driver::statement::Statement;
use scylla_driver::{NewSessionError, SessionBuilder};
use scylla_testbed::TestCluster;

use crate::common;

const ROWS: i64 = 250;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_through_one_nodes_maintenance_socket() {
    let cluster = TestCluster::builder()
        .nodes(3)
        .shards(4)
        .password_auth("cassandra", "secret")
        .maintenance_socket(true)
        .start()
        .await
        .unwrap();
    let path = cluster.maintenance_socket(1).unwrap();
    let node1 = cluster.node(1).unwrap().host_id;

    // Without the socket, the cluster wants credentials.
    let Err(refused) = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[1].to_string())
        .build()
        .await
    else {
        panic!("the regular port requires credentials");
    };
    assert!(
        refused.to_string().contains("requires authentication"),
        "{refused}"
    );
    let before = cluster.stats();

    let session = SessionBuilder::new()
        .maintenance_socket(&path)
        .connections_per_shard(2)
        .build()
        .await
        .unwrap();
    // One node, unsharded for pooling: its 2 connections, wherever the
    // node put them (no chase after 4 shards).
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    let nodes = session.cluster().nodes();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert_eq!(nodes[0].host_id, node1);
    assert_eq!(nodes[0].address, UNIX_SOCKET_NODE_ADDRESS);
    assert_eq!(nodes[0].connections, 2);

    common::create_keyspace(&session, "ms", 3).await;
    session
        .query_unpaged(
            "CREATE TABLE ms.t (pk bigint, c bigint, v text, PRIMARY KEY (pk, c))",
            (),
        )
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO ms.t (pk, c, v) VALUES (?, ?, ?)")
        .await
        .unwrap();
    for c in 0..ROWS {
        session
            .execute_unpaged(&insert, (7_i64, c, format!("v{c}")))
            .await
            .unwrap();
    }
    // Prepared and paged: 250 rows in pages of 100.
    let select = session
        .prepare(Statement::new("SELECT c, v FROM ms.t WHERE pk = ?").with_page_size(100))
        .await
        .unwrap();
    let mut rows = session
        .execute_iter(&select, (7_i64,))
        .await
        .unwrap()
        .rows_stream::<(i64, String)>()
        .unwrap();
    let mut seen = Vec::new();
    while let Some(row) = rows.next().await {
        let (c, v) = row.unwrap();
        assert_eq!(v, format!("v{c}"));
        seen.push(c);
    }
    assert_eq!(seen, (0..ROWS).collect::<Vec<_>>());
    assert_eq!(rows.pages_fetched(), 3);
    // Unprepared, paged by hand.
    let (first, state) = session
        .query_single_page(
            Statement::new("SELECT c FROM ms.t WHERE pk = 7").with_page_size(100),
            (),
            None,
        )
        .await
        .unwrap();
    assert_eq!(first.rows_count(), 100);
    assert!(state.is_some());

    // Every connection of the session came through node 1's socket: the
    // control connection and the pool's 2, no TCP accept anywhere, and the
    // other nodes saw nothing (their peers' rows were read, never dialled).
    let after = cluster.stats();
    for (i, (b, a)) in before.nodes.iter().zip(&after.nodes).enumerate() {
        let tcp = (a.node.accepted_regular - b.node.accepted_regular)
            + (a.node.accepted_shard_aware - b.node.accepted_shard_aware);
        assert_eq!(tcp, 0, "node {i}: TCP connections");
        let socket = a.node.accepted_maintenance_socket - b.node.accepted_maintenance_socket;
        assert_eq!(socket, if i == 1 { 3 } else { 0 }, "node {i}: socket");
        if i != 1 {
            assert_eq!(
                a.node.requests_served - b.node.requests_served,
                0,
                "node {i}: requests"
            );
        }
    }
    assert_eq!(after.nodes[1].node.connections, 3);
    // No credentials were asked for: each handshake finished at READY.
    assert_eq!(
        after.nodes[1].node.handshakes_finished - before.nodes[1].node.handshakes_finished,
        3
    );
    session.close(Duration::from_secs(1)).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_socket_fails_with_an_error_naming_it() {
    let dir = std::env::temp_dir().join(format!("no-maintenance-socket-{}", std::process::id()));
    let path = dir.join("cql.m");
    let Err(err) = SessionBuilder::new()
        .maintenance_socket(&path)
        .connect_timeout(Duration::from_secs(2))
        .build()
        .await
    else {
        panic!("nothing listens at {}", path.display());
    };
    // The message and its sources, as an application would log them.
    let text = common::error_chain(&err);
    assert!(text.contains(&*path.to_string_lossy()), "{text}");
    assert!(text.contains("maintenance_socket"), "{text}");
    let NewSessionError::Control(ControlError::Unreachable(failures)) = &err else {
        panic!("unexpected {err:?}");
    };
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].address, UNIX_SOCKET_NODE_ADDRESS);
    match &failures[0].error {
        ContactError::Connect(ConnectionError::Open(OpenError::UnixSocket { path: p, source })) => {
            assert_eq!(p, &path);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("unexpected {other:?}"),
    }
}
