//! One deadline per request: the keyspace switch, the attempts, and a
//! re-preparation on UNPREPARED all end by the deadline computed when the
//! request started; a `USE` the server refuses fails the request instead of
//! being skipped; a paged stream's fetches all end by the stream's deadline.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_driver::errors::{RequestAttemptError, UseKeyspaceError};
use scylla_driver::{ExecutionError, SessionBuilder, Statement};
use scylla_testbed::{CqlHandler, Faults, TestCluster};

use crate::common;
use common::{cluster_and_session, create_keyspace};

/// EXECUTE, UNPREPARED, PREPARE again, EXECUTE again: with every answer
/// 1 s late that is 3 s of work, and the request's 1.5 s deadline must cut
/// it (each step used to get the whole timeout again, and each fits in
/// it). The deadline passes 1.5 s before the last answer would come: a
/// loaded machine running the timer late does not let that answer win.
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
    let timeout = Duration::from_millis(1500);
    let latency = Duration::from_secs(1);
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
        .set_faults(0, Faults::none().with_latency(latency))
        .await
        .unwrap();
    let started = Instant::now();
    let outcome = session.execute_unpaged(&select, (1i64,)).await;
    let took = started.elapsed();
    assert!(
        matches!(outcome, Err(ExecutionError::RequestTimeout(_))),
        "expected the deadline to cut the re-preparation: {outcome:?} after {took:?}"
    );
    // Ended by the deadline, before the third answer (3 s) would have come.
    assert!(took >= timeout, "took {took:?}");
    assert!(took < latency * 3, "took {took:?}");
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
    session.use_keyspace("ks1", false).await.unwrap();
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
        ExecutionError::UseKeyspaceError(UseKeyspaceError::RequestError(
            RequestAttemptError::DbError(_, message),
        )) => assert!(message.contains("ks1"), "{err}"),
        other => panic!("expected the server's refusal of USE ks1, got {other:?}"),
    }
}

/// Pages of 2 rows, a 3 s request timeout: the first two pages come at
/// once, then every answer is 10 s late, and the third fetch starts 1 s
/// before the stream's deadline (its creation plus the timeout). The
/// deadline ends it after 1 s, as a timeout of page 2; a timeout of its
/// own would after 3 s, its answer after 10 s: a margin of seconds, not of
/// the few hundred milliseconds a loaded machine may run a task late.
/// Without a stream deadline, the fetches after the would-be deadline
/// complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_holds_across_a_paging_fetch() {
    let (cluster, session) = cluster_and_session(1, 1, |b| b).await;
    create_keyspace(&session, "ks", 1).await;
    session
        .query_unpaged("CREATE TABLE ks.t (pk bigint PRIMARY KEY, v bigint)", ())
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO ks.t (pk, v) VALUES (?, ?)")
        .await
        .unwrap();
    for k in 0..10i64 {
        session.execute_unpaged(&insert, (k, k)).await.unwrap();
    }
    let select = Statement::new("SELECT pk, v FROM ks.t").with_page_size(2);
    let timeout = Duration::from_secs(3);

    let mut rows = session
        .query_iter(select.clone().with_timeout(timeout), ())
        .await
        .unwrap()
        .rows_stream::<(i64, i64)>()
        .unwrap();
    let deadline = rows.deadline().unwrap();
    // Two pages (the stream fetches a page when its rows run out).
    for _ in 0..4 {
        rows.next().await.unwrap().unwrap();
    }
    assert_eq!(rows.pages_fetched(), 2);
    cluster
        .set_faults(0, Faults::none().with_latency(Duration::from_secs(10)))
        .await
        .unwrap();
    tokio::time::sleep_until((deadline - Duration::from_secs(1)).into()).await;
    let fetch = Instant::now();
    let err = match rows.next().await {
        Some(Err(e)) => e,
        other => panic!("the stream outlived its deadline: {other:?}"),
    };
    let took = fetch.elapsed();
    assert!(
        matches!(&err, ExecutionError::Page(p) if p.page == 2 && matches!(p.source, ExecutionError::RequestTimeout(_))),
        "{err:?}"
    );
    assert!(err.is_timeout());
    assert!(Instant::now() >= deadline);
    // Ended by the stream's deadline (1 s), not by a timeout of its own.
    assert!(took < Duration::from_secs(2), "the fetch took {took:?}");
    cluster.set_faults(0, Faults::none()).await.unwrap();

    // Without a stream deadline, each page gets a timeout of its own (here
    // 1 s, for a shorter wait): the pages fetched after the stream's
    // would-be deadline arrive.
    let rows = session
        .query_iter(select.with_timeout(Duration::from_secs(1)), ())
        .await
        .unwrap()
        .rows_stream::<(i64, i64)>()
        .unwrap();
    let would_be = rows.deadline().unwrap();
    let mut rows = rows.with_deadline(None);
    for _ in 0..4 {
        rows.next().await.unwrap().unwrap();
    }
    tokio::time::sleep_until(would_be.into()).await;
    let mut n = 4;
    while let Some(row) = rows.next().await {
        row.unwrap();
        n += 1;
        assert!(n <= 10, "more rows than the table has");
    }
    assert_eq!(n, 10);
    assert_eq!(rows.pages_fetched(), 5);
}
