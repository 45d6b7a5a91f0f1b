//! Session properties users rely on: `Send + Sync` handles and futures, and
//! speculative execution of idempotent statements around a slow node.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;
use common::{cluster_and_session, create_keyspace};

use std::time::Duration;

use scylla_driver::policy::speculative::SpeculativeExecution;
use scylla_driver::statement::Statement;
use scylla_driver::{PreparedStatement, Session};
use scylla_testbed::Faults;

fn assert_send_sync<T: Send + Sync>(_: &T) {}
fn assert_send<T: Send>(_: &T) {}

/// Compile-time: the session and the futures of its methods can move between
/// threads (e.g. into `tokio::spawn`).
#[allow(dead_code)]
fn futures_are_send(session: &Session, prepared: &PreparedStatement) {
    assert_send_sync(session);
    assert_send_sync(prepared);
    assert_send(&session.query_unpaged("SELECT 1", ()));
    assert_send(&session.prepare("SELECT 1"));
    assert_send(&session.execute_unpaged(prepared, (1, "a")));
    assert_send(&session.query_iter("SELECT 1", ()));
    assert_send(&session.batch(
        &scylla_driver::Batch::new(scylla_driver::BatchType::Logged),
        (),
    ));
    assert_send(&session.batch(
        &scylla_driver::Batch::new(scylla_driver::BatchType::Logged),
        ((1, "a"), (2i64,)),
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speculative_execution_routes_around_a_slow_node() {
    let (cluster, session) = cluster_and_session(3, 1, |b| {
        b.speculative_execution(SpeculativeExecution::new(3, Duration::from_millis(30)))
    })
    .await;
    create_keyspace(&session, "s", 3).await;
    session
        .query_unpaged("CREATE TABLE s.t (k int PRIMARY KEY, v int)", ())
        .await
        .unwrap();
    let read = session
        .prepare(Statement::new("SELECT v FROM s.t WHERE k = ?").with_idempotent(true))
        .await
        .unwrap();
    // Every node but one answers after 2 s; the speculative attempt after
    // 30 ms finds a fast replica.
    for i in [1, 2] {
        cluster
            .set_faults(i, Faults::none().with_latency(Duration::from_secs(2)))
            .await
            .unwrap();
    }
    let started = std::time::Instant::now();
    for k in 0..20 {
        session.execute_unpaged(&read, (k,)).await.unwrap();
    }
    let per_request = started.elapsed() / 20;
    assert!(
        per_request < Duration::from_millis(500),
        "{per_request:?} per request"
    );
    assert!(session.metrics().snapshot().speculative_attempts > 0);
}
