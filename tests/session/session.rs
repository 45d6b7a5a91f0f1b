//! The Session API end to end against the in-process test cluster, with the
//! cluster's own accounting as the judge of routing.
#![allow(clippy::unwrap_used, missing_docs)]

use scylla_driver::errors::{BadQuery, RequestAttemptError};
use scylla_driver::statement::{Batch, BatchType, Statement};
use scylla_driver::ExecutionError;

use crate::common;
use common::{cluster_and_session, create_keyspace};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovers_nodes_and_routes_to_the_right_shard_and_replica() {
    let (cluster, session) = cluster_and_session(3, 4, |b| b).await;
    let state = session.cluster_state();
    assert_eq!(state.nodes.len(), 3);

    create_keyspace(&session, "ks", 1).await;
    session
        .query_unpaged("CREATE TABLE ks.t (pk bigint PRIMARY KEY, v text)", ())
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO ks.t (pk, v) VALUES (?, ?)")
        .await
        .unwrap();
    assert_eq!(insert.pk_indexes(), &[0]);
    let select = session
        .prepare("SELECT pk, v FROM ks.t WHERE pk = ?")
        .await
        .unwrap();

    let before = cluster.stats();
    for k in 0..300i64 {
        session
            .execute_unpaged(&insert, (k, format!("v{k}")))
            .await
            .unwrap();
    }
    for k in 0..300i64 {
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
    assert!(served >= 600, "served {served}");
    assert_eq!(total(&after, |c| c.requests_wrong_shard), 0, "wrong shard");
    assert_eq!(total(&after, |c| c.requests_non_replica), 0, "non replica");
    assert_eq!(session.metrics().snapshot().shard_fallback_requests, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_batches_and_errors() {
    let (_cluster, session) = cluster_and_session(1, 2, |b| b).await;
    create_keyspace(&session, "p", 1).await;
    session
        .query_unpaged(
            "CREATE TABLE p.t (pk int, c int, v text, PRIMARY KEY (pk, c))",
            (),
        )
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO p.t (pk, c, v) VALUES (?, ?, ?)")
        .await
        .unwrap();
    let mut batch = Batch::new(BatchType::Unlogged);
    for _ in 0..10 {
        batch.append(insert.clone());
    }
    for chunk in 0..25 {
        let rows: Vec<(i32, i32, String)> = (0..10)
            .map(|i| (1, chunk * 10 + i, format!("x{i}")))
            .collect();
        let refs: Vec<&(dyn scylla_cql::types::SerializeRow + Sync)> = rows
            .iter()
            .map(|r| r as &(dyn scylla_cql::types::SerializeRow + Sync))
            .collect();
        session.batch(&batch, &refs).await.unwrap();
    }
    // 250 rows in pages of 100: a stream of typed rows.
    let mut rows = session
        .query_iter(
            Statement::new("SELECT pk, c, v FROM p.t WHERE pk = ?").with_page_size(100),
            (1,),
        )
        .await
        .unwrap()
        .rows_stream::<(i32, i32, String)>()
        .unwrap();
    let mut seen = Vec::new();
    while let Some(row) = rows.next().await {
        seen.push(row.unwrap().1);
    }
    assert_eq!(seen, (0..250).collect::<Vec<_>>());
    assert_eq!(rows.pages_fetched(), 3);

    // Manual paging.
    let select = session
        .prepare(Statement::new("SELECT c FROM p.t WHERE pk = ?").with_page_size(100))
        .await
        .unwrap();
    let (first, state) = session
        .execute_single_page(&select, (1,), None)
        .await
        .unwrap();
    assert_eq!(first.rows_count(), 100);
    let (second, _) = session
        .execute_single_page(&select, (1,), state)
        .await
        .unwrap();
    assert_eq!(second.first_row::<(i32,)>().unwrap(), Some((100,)));

    // Errors carry the server's code and message.
    let err = session
        .query_unpaged("SELEKT nonsense", ())
        .await
        .unwrap_err();
    match &err {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(e, message)) => {
            assert_eq!(e.code(), 0x2000);
            assert!(!message.is_empty());
        }
        other => panic!("unexpected {other:?}"),
    }
    let err = session
        .query_unpaged("SELECT * FROM p.nope", ())
        .await
        .unwrap_err();
    assert_eq!(err.db_error().map(|e| e.code()), Some(0x2200), "{err}");
    // A value count mismatch is caught before sending.
    let err = session.execute_unpaged(&insert, (1,)).await.unwrap_err();
    assert!(
        matches!(
            err,
            ExecutionError::BadQuery(BadQuery::SerializationError(_))
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn use_keyspace_switches_every_connection() {
    let (_cluster, session) = cluster_and_session(2, 2, |b| b).await;
    create_keyspace(&session, "u", 2).await;
    session.use_keyspace("u", false).await.unwrap();
    session
        .query_unpaged("CREATE TABLE t (k int PRIMARY KEY, v int)", ())
        .await
        .unwrap();
    for k in 0..50 {
        session
            .query_unpaged("INSERT INTO t (k, v) VALUES (?, ?)", (k, k * 2))
            .await
            .unwrap();
    }
    for k in 0..50 {
        let r = session
            .query_unpaged("SELECT v FROM t WHERE k = ?", (k,))
            .await
            .unwrap();
        assert_eq!(r.single_row::<(i32,)>().unwrap(), (k * 2,));
    }
}

/// PREPARE goes to every node at once and the first success returns: one
/// slow node does not delay it (sequential preparation waited for each
/// node in turn), and executions on every replica succeed afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_returns_with_the_first_node_not_the_slowest() {
    let (cluster, session) = cluster_and_session(3, 1, |b| b).await;
    create_keyspace(&session, "ks", 3).await;
    session
        .query_unpaged("CREATE TABLE ks.t (pk bigint PRIMARY KEY, v text)", ())
        .await
        .unwrap();
    let slow = std::time::Duration::from_millis(1500);
    cluster
        .set_faults(2, scylla_testbed::Faults::none().with_latency(slow))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let insert = session
        .prepare("INSERT INTO ks.t (pk, v) VALUES (?, ?)")
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(took < slow, "prepare waited for the slow node: {took:?}");
    cluster
        .set_faults(2, scylla_testbed::Faults::none())
        .await
        .unwrap();
    // The slow node's preparation completes in the background meanwhile.
    tokio::time::sleep(slow).await;
    for k in 0..60i64 {
        session
            .execute_unpaged(&insert, (k, format!("v{k}")))
            .await
            .unwrap();
    }
    let r = session
        .query_unpaged("SELECT COUNT(*) FROM ks.t", ())
        .await
        .unwrap();
    assert_eq!(r.single_row::<(i64,)>().unwrap().0, 60);
}

/// The prepared-statement cache keeps at most its configured number of
/// statements under a workload of 10x as many distinct statements (the
/// `query_*` methods with values prepare first), and the statements it
/// evicted still run (they are prepared again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prepared_cache_stays_within_its_bound() {
    const BOUND: usize = 16;
    let (_cluster, session) = cluster_and_session(1, 1, |b| b.prepared_cache_size(BOUND)).await;
    create_keyspace(&session, "ks", 1).await;
    session
        .query_unpaged("CREATE TABLE ks.t (pk bigint PRIMARY KEY, v text)", ())
        .await
        .unwrap();
    for round in 0..2 {
        for n in 0..(10 * BOUND) as i64 {
            let text = format!("INSERT INTO ks.t (pk, v) VALUES (?, 'v{n}')");
            session.query_unpaged(text, (n,)).await.unwrap();
            assert!(
                session.prepared_cache_len() <= BOUND,
                "round {round}: {} cached",
                session.prepared_cache_len()
            );
        }
    }
    assert_eq!(session.prepared_cache_len(), BOUND);
    let r = session
        .query_unpaged("SELECT v FROM ks.t WHERE pk = ?", (7i64,))
        .await
        .unwrap();
    assert_eq!(r.single_row::<(&str,)>().unwrap().0, "v7");
}

/// A batch's values as a tuple of rows of different types, and as a vector
/// of rows of one type: no casts to trait objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_values_of_different_types_need_no_casts() {
    let (_cluster, session) = cluster_and_session(1, 1, |b| b).await;
    create_keyspace(&session, "ks", 1).await;
    session
        .query_unpaged("CREATE TABLE ks.t (pk bigint PRIMARY KEY, v text)", ())
        .await
        .unwrap();
    session
        .query_unpaged("CREATE TABLE ks.n (pk int PRIMARY KEY, n bigint)", ())
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO ks.t (pk, v) VALUES (?, ?)")
        .await
        .unwrap();
    let mut mixed = Batch::new(BatchType::Logged);
    mixed.append(insert.clone());
    mixed.append("INSERT INTO ks.n (pk, n) VALUES (?, ?)");
    mixed.append("INSERT INTO ks.t (pk, v) VALUES (3, 'plain')");
    session
        .batch(&mixed, ((1i64, "one"), (2i32, 20i64), ()))
        .await
        .unwrap();
    let mut many = Batch::new(BatchType::Unlogged);
    let rows: Vec<(i64, String)> = (10..20).map(|k| (k, format!("v{k}"))).collect();
    for _ in &rows {
        many.append(insert.clone());
    }
    session.batch(&many, &rows).await.unwrap();
    // A count that does not match is a clear error.
    let err = session.batch(&mixed, ((1i64, "one"),)).await.unwrap_err();
    assert!(matches!(err, ExecutionError::BadQuery(_)), "{err}");

    let r = session
        .query_unpaged("SELECT v FROM ks.t WHERE pk = ?", (3i64,))
        .await
        .unwrap();
    assert_eq!(r.single_row::<(&str,)>().unwrap().0, "plain");
    let r = session
        .query_unpaged("SELECT n FROM ks.n WHERE pk = ?", (2i32,))
        .await
        .unwrap();
    assert_eq!(r.single_row::<(i64,)>().unwrap().0, 20);
    let r = session
        .query_unpaged("SELECT v FROM ks.t WHERE pk = ?", (15i64,))
        .await
        .unwrap();
    assert_eq!(r.single_row::<(&str,)>().unwrap().0, "v15");
}
