//! One deadline per request: the keyspace switch, the attempts, and a
//! re-preparation on UNPREPARED all end by the deadline computed when the
//! request started; a `USE` the server refuses fails the request instead of
//! being skipped.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_driver::{ExecutionError, SessionBuilder};
use scylla_testbed::{CqlHandler, Faults, TestCluster};

mod common;
use common::create_keyspace;

/// EXECUTE, UNPREPARED, PREPARE again, EXECUTE again: with every answer
/// 250 ms late that is 750 ms of work, and the request's 600 ms deadline
/// must cut it (each step used to get the whole timeout again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reprepare_and_its_retry_share_the_deadline() {
    let handler = Arc::new(CqlHandler::new());
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(1)
        .handler(handler.clone())
        .start()
        .await
        .unwrap();
    let timeout = Duration::from_millis(600);
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .request_timeout(timeout)
        .build()
        .await
        .unwrap();
    create_keyspace(&session, "ks", 1).await;
    session
        .query_unpaged("CREATE TABLE ks.t (pk bigint PRIMARY KEY, v text)", ())
        .await
        .unwrap();
    let select = session
        .prepare("SELECT v FROM ks.t WHERE pk = ?")
        .await
        .unwrap();
    // Without the delay the same sequence succeeds (the statement is
    // prepared again transparently).
    handler.store().forget_prepared();
    session.execute_unpaged(&select, (1i64,)).await.unwrap();

    handler.store().forget_prepared();
    cluster
        .set_faults(0, Faults::none().with_latency(Duration::from_millis(250)))
        .await
        .unwrap();
    let started = Instant::now();
    let outcome = session.execute_unpaged(&select, (1i64,)).await;
    let took = started.elapsed();
    assert!(
        matches!(outcome, Err(ExecutionError::Timeout { .. })),
        "expected the deadline to cut the re-preparation: {outcome:?} after {took:?}"
    );
    // The deadline plus a tick or two of the connection's timer (10 ms),
    // generous for a shared machine; the three steps take 750 ms.
    assert!(took < Duration::from_millis(740), "took {took:?}");
}

/// A `USE` that fails (the keyspace is gone) fails the request with the
/// server's error, instead of running the statement in another keyspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_use_is_an_error_not_silence() {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(1)
        .start()
        .await
        .unwrap();
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();
    create_keyspace(&session, "ks1", 1).await;
    session.use_keyspace("ks1").await.unwrap();
    session
        .query_unpaged("DROP KEYSPACE ks1", ())
        .await
        .unwrap();
    // The connections forget which keyspace they use (as a reconnected
    // one would): the next request switches them first.
    let state = session.cluster_state();
    let conn = state.nodes[0].pool.connection_for(None).unwrap();
    conn.set_keyspace(None);
    let err = session
        .query_unpaged("SELECT release_version FROM system.local", ())
        .await
        .unwrap_err();
    match &err {
        ExecutionError::Server(_) => assert!(err.to_string().contains("ks1"), "{err}"),
        other => panic!("expected the server's refusal of USE ks1, got {other:?}"),
    }
}
