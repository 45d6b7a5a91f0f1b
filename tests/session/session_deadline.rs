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
        matches!(outcome, Err(ExecutionError::RequestTimeout(_))),
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

/// Pages of 2 rows, every answer 250 ms late, a 600 ms request timeout:
/// each page alone fits, but the stream's deadline (its creation plus the
/// timeout) passes during the third fetch, which fails as a timeout of
/// page 2. Without a stream deadline the same stream completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_holds_across_a_paging_fetch() {
    let timeout = Duration::from_millis(600);
    let (cluster, session) = cluster_and_session(1, 1, |b| b.request_timeout(timeout)).await;
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
    cluster
        .set_faults(0, Faults::none().with_latency(Duration::from_millis(250)))
        .await
        .unwrap();

    let started = Instant::now();
    let mut rows = session
        .query_iter(select.clone(), ())
        .await
        .unwrap()
        .rows_stream::<(i64, i64)>()
        .unwrap();
    assert!(rows.deadline().is_some());
    let mut delivered = 0;
    let err = loop {
        match rows.next().await {
            Some(Ok(_)) => delivered += 1,
            Some(Err(e)) => break e,
            None => panic!("the stream outlived its deadline: {delivered} rows"),
        }
        assert!(delivered <= 10, "more rows than the table has");
    };
    let took = started.elapsed();
    assert_eq!(delivered, 4, "two pages fit in 600 ms, {err}");
    assert!(
        matches!(&err, ExecutionError::Page(p) if p.page == 2 && matches!(p.source, ExecutionError::RequestTimeout(_))),
        "{err:?}"
    );
    assert!(err.is_timeout());
    // The deadline plus timer ticks; the third page alone would end at 750 ms.
    assert!(took < Duration::from_millis(740), "took {took:?}");

    // Each page with its own timeout: all five pages arrive.
    let mut rows = session
        .query_iter(select, ())
        .await
        .unwrap()
        .rows_stream::<(i64, i64)>()
        .unwrap()
        .with_deadline(None);
    let mut n = 0;
    while let Some(row) = rows.next().await {
        row.unwrap();
        n += 1;
        assert!(n <= 10, "more rows than the table has");
    }
    assert_eq!(n, 10);
    assert_eq!(rows.pages_fetched(), 5);
}
