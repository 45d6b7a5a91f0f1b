//! A restarted node has forgotten every prepared statement: the requests
//! that meet UNPREPARED there share one PREPARE per statement (per session),
//! and no request fails for it. Counted by the test cluster (PREPAREs the
//! restarted node received in its new lifetime).
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use scylla_driver::statement::{Consistency, Statement};
use scylla_driver::SessionBuilder;
use scylla_testbed::TestCluster;

const RESTARTED: usize = 1;
const STATEMENTS: usize = 4;
const WORKERS: usize = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_gets_one_prepare_per_statement() {
    let cluster = TestCluster::builder()
        .nodes(3)
        .shards(2)
        .start()
        .await
        .unwrap();
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    session
        .query_unpaged(
            "CREATE KEYSPACE rp WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}",
            (),
        )
        .await
        .unwrap();
    let mut statements = Vec::new();
    for i in 0..STATEMENTS {
        session
            .query_unpaged(
                format!("CREATE TABLE rp.t{i} (k bigint PRIMARY KEY, v bigint)"),
                (),
            )
            .await
            .unwrap();
        let s = session
            .prepare(
                Statement::new(format!("INSERT INTO rp.t{i} (k, v) VALUES (?, ?)"))
                    .with_consistency(Consistency::One)
                    .with_idempotent(true),
            )
            .await
            .unwrap();
        statements.push(s);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..WORKERS {
        let (session, statements) = (session.clone(), statements.clone());
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        workers.spawn(async move {
            let mut k = w as i64;
            while !stop.load(Ordering::Relaxed) {
                let s = &statements[k as usize % STATEMENTS];
                match session.execute_unpaged(s, (k, k)).await {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        eprintln!("failed: {e}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
                k += WORKERS as i64;
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.restart_node(RESTARTED).await.unwrap();
    // Until the pool is back and requests reached the node again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let served = cluster.node_stats(RESTARTED).unwrap().node.requests_served;
        if served > 2_000 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the node got no load back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    while workers.join_next().await.is_some() {}
    let prepares = cluster.node_stats(RESTARTED).unwrap().node.prepares;
    println!(
        "after the restart: {prepares} PREPAREs at the restarted node for {STATEMENTS} statements; \
         {} requests ok, {} failed",
        ok.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    );
    assert_eq!(failed.load(Ordering::Relaxed), 0);
    assert_eq!(prepares, STATEMENTS as u64, "one PREPARE per statement");
}
