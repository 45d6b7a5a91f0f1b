//! CQL tracing against the in-process test cluster.
//!
//! The test cluster does not trace: a traced request fails at once with a
//! clear Invalid error (never a hang, never a silent untraced answer), and
//! `system_traces` does not exist. A handler that fakes tracing ids (it
//! wraps the CQL handler and stamps every traced response with a fresh id)
//! checks that the ids reach the user: on plain, prepared, batched and paged
//! results.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use scylla_cql::frame::header::Flags;
use scylla_cql::frame::response::DbError;
use scylla_driver::session::{TraceFetchOptions, TracingError};
use scylla_driver::statement::{Batch, BatchType, Statement};
use scylla_driver::{ExecutionError, Session, SessionBuilder};
use scylla_testbed::cql::{TRACES_UNSUPPORTED, TRACING_UNSUPPORTED};
use scylla_testbed::{
    ConnCtx, CqlHandler, HandlerFuture, Reply, Request, RequestHandler, TestCluster,
};
use uuid::Uuid;

use crate::common;
use common::{cluster_and_session, create_keyspace};

/// Long enough for any answer on a busy machine; a hang fails the test.
const NO_HANG: Duration = Duration::from_secs(20);

fn assert_tracing_refused(e: &ExecutionError) {
    assert_eq!(e.db_error(), Some(&DbError::Invalid), "{e}");
    assert!(e.to_string().contains(TRACING_UNSUPPORTED), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traced_requests_fail_with_a_clear_error_and_untraced_ones_still_run() {
    let (_cluster, session) = cluster_and_session(2, 2, |b| b).await;
    create_keyspace(&session, "tr", 1).await;
    session
        .query_unpaged(
            "CREATE TABLE tr.t (pk int, c int, v text, PRIMARY KEY (pk, c))",
            (),
        )
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO tr.t (pk, c, v) VALUES (?, ?, ?)")
        .await
        .unwrap();

    // A traced QUERY.
    let traced = Statement::new("SELECT pk, c, v FROM tr.t WHERE pk = 1").with_tracing(true);
    let e = tokio::time::timeout(NO_HANG, session.query_unpaged(traced.clone(), ()))
        .await
        .expect("a traced query must not hang")
        .unwrap_err();
    assert_tracing_refused(&e);

    // A traced EXECUTE.
    let traced_insert = insert.clone().with_tracing(true);
    let e = tokio::time::timeout(
        NO_HANG,
        session.execute_unpaged(&traced_insert, (1, 1, "a")),
    )
    .await
    .expect("a traced execution must not hang")
    .unwrap_err();
    assert_tracing_refused(&e);

    // A traced BATCH.
    let mut batch = Batch::new(BatchType::Unlogged).with_tracing(true);
    batch.append(insert.clone());
    let e = tokio::time::timeout(NO_HANG, session.batch(&batch, &[&(1, 2, "b")]))
        .await
        .expect("a traced batch must not hang")
        .unwrap_err();
    assert_tracing_refused(&e);

    // A traced paged read: the first page, fetched by `query_iter`, fails.
    let first = tokio::time::timeout(
        NO_HANG,
        session.query_iter(traced.clone().with_page_size(1), ()),
    )
    .await
    .expect("a traced page must not hang")
    .expect_err("the first page fails");
    assert_tracing_refused(&first);
    // Prepared (with values), the first page is fetched by the first row.
    let mut rows = session
        .query_iter(
            Statement::new("SELECT pk, c, v FROM tr.t WHERE pk = ?")
                .with_tracing(true)
                .with_page_size(1),
            (1,),
        )
        .await
        .unwrap()
        .rows_stream::<(i32, i32, String)>()
        .unwrap();
    let first = tokio::time::timeout(NO_HANG, rows.next())
        .await
        .expect("a traced page must not hang")
        .expect("an error, not the end of the rows");
    assert_tracing_refused(&first.unwrap_err());

    // Nothing was written by the refused requests, and untraced ones run on
    // the same connections.
    let r = session
        .query_unpaged("SELECT pk, c, v FROM tr.t WHERE pk = 1", ())
        .await
        .unwrap();
    assert_eq!(r.rows_count(), 0);
    session.execute_unpaged(&insert, (1, 3, "c")).await.unwrap();
    let r = session
        .query_unpaged("SELECT pk, c, v FROM tr.t WHERE pk = 1", ())
        .await
        .unwrap();
    assert_eq!(r.rows_count(), 1);
    assert_eq!(r.tracing_id(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetching_a_trace_fails_at_once_with_system_traces_unsupported() {
    let (_cluster, session) = cluster_and_session(1, 1, |b| b).await;
    let e = session
        .query_unpaged("SELECT * FROM system_traces.sessions", ())
        .await
        .unwrap_err();
    assert_eq!(e.db_error(), Some(&DbError::Invalid), "{e}");
    assert!(e.to_string().contains(TRACES_UNSUPPORTED), "{e}");

    // A failed read is not retried for the whole wait: even with a wait of
    // minutes, the error comes back at once.
    let patient = {
        let mut built = TraceFetchOptions::default();
        built.attempts = 100;
        built.interval = Duration::from_secs(10);
        built.max_interval = Duration::from_secs(10);
        built
    };
    let e = tokio::time::timeout(
        NO_HANG,
        session.get_tracing_info_with(Uuid::from_u128(1), &patient),
    )
    .await
    .expect("the fetch must not wait for a trace the server cannot have")
    .unwrap_err();
    match &e {
        TracingError::Query(q) => assert!(q.to_string().contains(TRACES_UNSUPPORTED), "{q}"),
        other => panic!("expected the read's error, got {other}"),
    }
}

/// The CQL handler, with tracing faked: a traced request is served
/// untraced, and its answer carries a fresh tracing id (1, 2, 3, ...).
struct FakeTracing {
    cql: CqlHandler,
    next: AtomicU64,
}

impl RequestHandler for FakeTracing {
    fn handle<'a>(&'a self, ctx: &'a ConnCtx, mut request: Request) -> HandlerFuture<'a> {
        let traced = request.header.flags.contains(Flags::TRACING);
        request.header.flags = request.header.flags.without(Flags::TRACING);
        Box::pin(async move {
            let reply = self.cql.handle(ctx, request).await;
            match reply {
                Reply::Respond(mut r) if traced => {
                    let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
                    let mut body = BytesMut::with_capacity(16 + r.body.len());
                    body.put_slice(Uuid::from_u128(u128::from(id)).as_bytes());
                    body.put_slice(&r.body);
                    r.body = body.freeze();
                    r.flags = r.flags.with(Flags::TRACING);
                    Reply::Respond(r)
                }
                other => other,
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracing_ids_reach_plain_prepared_batched_and_paged_results() {
    let handler = Arc::new(FakeTracing {
        cql: CqlHandler::new(),
        next: AtomicU64::new(0),
    });
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(2)
        .handler(handler.clone())
        .start()
        .await
        .unwrap();
    let session: Session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();
    let id = |n: u128| Some(Uuid::from_u128(n));
    let traced_so_far = || handler.next.load(Ordering::Relaxed);

    create_keyspace(&session, "ft", 1).await;
    session
        .query_unpaged("CREATE TABLE ft.t (pk int, c int, PRIMARY KEY (pk, c))", ())
        .await
        .unwrap();
    assert_eq!(traced_so_far(), 0, "nothing is traced unless asked");

    let r = session
        .query_unpaged(Statement::new("SELECT * FROM ft.t").with_tracing(true), ())
        .await
        .unwrap();
    assert_eq!(r.tracing_id(), id(1));

    let insert = session
        .prepare(Statement::new("INSERT INTO ft.t (pk, c) VALUES (?, ?)").with_tracing(true))
        .await
        .unwrap();
    // The PREPARE itself was traced (one node: one PREPARE).
    assert_eq!(insert.prepare_tracing_ids, [Uuid::from_u128(2)]);
    let r = session.execute_unpaged(&insert, (1, 1)).await.unwrap();
    assert_eq!(r.tracing_id(), id(3));

    let mut batch = Batch::new(BatchType::Unlogged).with_tracing(true);
    batch.append(insert.clone().with_tracing(false));
    batch.append(insert.clone());
    let r = session.batch(&batch, &[&(1, 2), &(1, 3)]).await.unwrap();
    assert_eq!(r.tracing_id(), id(4));

    // Untraced: no id, whatever the server would do.
    let r = session
        .execute_unpaged(&insert.clone().with_tracing(false), (1, 4))
        .await
        .unwrap();
    assert_eq!(r.tracing_id(), None);

    // Paged, one page at a time: each page is its own traced request.
    let select = Statement::new("SELECT pk, c FROM ft.t WHERE pk = 1")
        .with_tracing(true)
        .with_page_size(2);
    let (page, next) = session
        .query_single_page(select.clone(), (), None)
        .await
        .unwrap();
    assert_eq!(page.tracing_id(), id(5));
    let (page, _) = session
        .query_single_page(select.clone(), (), next)
        .await
        .unwrap();
    assert_eq!(page.tracing_id(), id(6));

    // Paged as a stream: 4 rows in pages of 2 (the last page may be empty).
    let mut rows = session
        .query_iter(select, ())
        .await
        .unwrap()
        .rows_stream::<(i32, i32)>()
        .unwrap();
    let mut n = 0;
    while let Some(row) = rows.next().await {
        row.unwrap();
        n += 1;
    }
    assert_eq!(n, 4);
    let pages = rows.pages_fetched();
    assert!(pages >= 2, "{pages} pages");
    let expected: Vec<Uuid> = (7..7 + pages as u128).map(Uuid::from_u128).collect();
    assert_eq!(rows.tracing_ids(), expected.as_slice());
    assert_eq!(traced_so_far(), 6 + pages as u64);
}
