//! A node stopped under load: idempotent requests keep succeeding (retried on
//! other replicas), non-idempotent ones that were in flight fail with a clear
//! error, nothing hangs, and the node is used again after it comes back.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;
use common::{cluster_and_session, create_keyspace};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_driver::errors::RequestAttemptError;
use scylla_driver::pool::backoff::ExponentialBackoff;
use scylla_driver::routing::load::PROBE_EVERY;
use scylla_driver::statement::Statement;
use scylla_driver::ExecutionError;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_stop_under_load() {
    let (cluster, session) = cluster_and_session(3, 2, |b| {
        b.request_timeout(Duration::from_secs(3))
            .reconnect_policy(Arc::new(ExponentialBackoff::new(
                Duration::from_millis(20),
                Duration::from_millis(200),
            )))
    })
    .await;
    create_keyspace(&session, "f", 3).await;
    session
        .query_unpaged("CREATE TABLE f.t (k bigint PRIMARY KEY, v bigint)", ())
        .await
        .unwrap();
    let idempotent = session
        .prepare(Statement::new("INSERT INTO f.t (k, v) VALUES (?, ?)").with_idempotent(true))
        .await
        .unwrap();
    let plain = session
        .prepare("INSERT INTO f.t (k, v) VALUES (?, ?)")
        .await
        .unwrap();
    assert!(!plain.options.idempotent);

    let ok = Arc::new(AtomicU64::new(0));
    let failed_idempotent = Arc::new(AtomicU64::new(0));
    let failed_plain = Arc::new(AtomicU64::new(0));
    let stop_at = Instant::now() + Duration::from_secs(3);
    let mut workers = Vec::new();
    for w in 0..8i64 {
        let (session, idempotent, plain) = (session.clone(), idempotent.clone(), plain.clone());
        let (ok, fi, fp) = (ok.clone(), failed_idempotent.clone(), failed_plain.clone());
        workers.push(tokio::spawn(async move {
            let mut k = w * 1_000_000;
            while Instant::now() < stop_at {
                k += 1;
                let started = Instant::now();
                let (stmt, failures) = if k % 2 == 0 {
                    (&idempotent, &fi)
                } else {
                    (&plain, &fp)
                };
                match session.execute_unpaged(stmt, (k, k)).await {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        // Failures must be clear errors, never a hang.
                        assert!(
                            matches!(
                                e,
                                ExecutionError::LastAttemptError(
                                    RequestAttemptError::BrokenConnectionError(_)
                                ) | ExecutionError::RequestTimeout(_)
                                    | ExecutionError::ConnectionPoolError(_)
                            ),
                            "{e}"
                        );
                        failures.fetch_add(1, Ordering::Relaxed)
                    }
                };
                assert!(started.elapsed() < Duration::from_secs(4), "a request hung");
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    cluster.stop_node(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(900)).await;
    cluster.start_node(1).await.unwrap();
    for w in workers {
        w.await.unwrap();
    }
    assert_eq!(
        failed_idempotent.load(Ordering::Relaxed),
        0,
        "idempotent requests were retried elsewhere"
    );
    assert!(ok.load(Ordering::Relaxed) > 100);
    eprintln!(
        "ok {} failed non-idempotent {} retries {}",
        ok.load(Ordering::Relaxed),
        failed_plain.load(Ordering::Relaxed),
        session.metrics().snapshot().retries
    );

    // The restarted node is used again.
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    // A restarted node whose first answers were slow (as on a loaded
    // machine) gets only its probes until a normal answer: one request in
    // PROBE_EVERY ignores the load, and within PROBE_EVERY x 3 consecutive
    // requests each of the 3 replicas comes first at least once. So the
    // requests go on until node 1 served one, at most twice that many.
    let served = || cluster.node_stats(1).unwrap().node.requests_served;
    let before = served();
    let bound = 2 * i64::from(PROBE_EVERY) * 3;
    let mut sent = 0;
    while served() == before && sent < bound {
        session
            .execute_unpaged(&idempotent, (sent, sent))
            .await
            .unwrap();
        sent += 1;
    }
    let after = served();
    assert!(
        after > before,
        "node 1 serves again ({before} -> {after} in {sent} requests)"
    );
}
