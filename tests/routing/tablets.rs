//! Tablet routing end to end against the in-process test cluster serving
//! tablets: the cluster's own `requests_tablet_misrouted` counter (requests
//! that reached a node or shard not holding the token's tablet) is the judge.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use scylla_driver::{Session, TabletWarmup};
use scylla_testbed::TestCluster;

use common::{run_inserts as run, tablet_session as session};

const KS: &str = "tk";
const TABLETS: usize = 64;

async fn tablet_cluster() -> TestCluster {
    TestCluster::builder()
        .nodes(3)
        .shards(8)
        .tablets(TABLETS)
        .start()
        .await
        .unwrap()
}

async fn create_schema(s: &Session, table: &str) {
    s.query_unpaged(
        format!(
            "CREATE KEYSPACE IF NOT EXISTS {KS} WITH replication = {{'class': 'NetworkTopologyStrategy', \
             'replication_factor': 3}} AND tablets = {{'enabled': true, 'initial': {TABLETS}}}"
        ),
        (),
    )
    .await
    .unwrap();
    s.query_unpaged(
        format!("CREATE TABLE {KS}.{table} (pk bigint PRIMARY KEY, v bigint)"),
        (),
    )
    .await
    .unwrap();
}

fn misrouted(cluster: &TestCluster) -> u64 {
    cluster.stats().total(|c| c.requests_tablet_misrouted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_warm_up_nothing_is_misrouted() {
    let cluster = tablet_cluster().await;
    let s = session(&cluster, TabletWarmup::UsedKeyspaces, None).await;
    create_schema(&s, "t").await;
    let insert = s
        .prepare(format!("INSERT INTO {KS}.t (pk, v) VALUES (?, ?)"))
        .await
        .unwrap();
    assert_eq!(insert.table(), Some("t"));
    let rows = s.warm_up_tablets().await.unwrap();
    assert!(rows >= TABLETS as u64, "warm-up read {rows} rows");
    assert_eq!(s.tablets().tablets_known(), TABLETS);

    let before = misrouted(&cluster);
    run(&s, &insert, 0, 10_000, 32).await;
    let after = misrouted(&cluster);
    println!("after warm-up: {} of 10000 misrouted", after - before);
    assert_eq!(after - before, 0);
    let m = s.metrics().snapshot();
    assert_eq!(m.tablet_payloads, 0);
    assert_eq!(m.request_errors, 0);
    assert_eq!(m.tablets_known, TABLETS as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eager_warm_up_routes_the_first_requests() {
    let cluster = tablet_cluster().await;
    let setup = session(&cluster, TabletWarmup::Off, None).await;
    create_schema(&setup, "t").await;
    let text = format!("INSERT INTO {KS}.t (pk, v) VALUES (?, ?)");

    // Fresh sessions, requests right after `prepare`.
    let mut measured = Vec::new();
    for (name, warmup, keyspace) in [
        (
            "warm-up used keyspaces (USE tk)",
            TabletWarmup::UsedKeyspaces,
            Some(KS),
        ),
        (
            "warm-up used keyspaces (at the first prepare)",
            TabletWarmup::UsedKeyspaces,
            None,
        ),
        ("warm-up all", TabletWarmup::All, None),
        ("lazy only (warm-up off)", TabletWarmup::Off, None),
    ] {
        let s = session(&cluster, warmup, keyspace).await;
        let insert = s.prepare(text.as_str()).await.unwrap();
        let before = misrouted(&cluster);
        run(&s, &insert, 0, 10_000, 32).await;
        let n = misrouted(&cluster) - before;
        let m = s.metrics().snapshot();
        println!(
            "{name}: {n} of 10000 misrouted ({:.2}%), {} payloads, {} warm-up rows, {} tablets known",
            n as f64 / 100.0,
            m.tablet_payloads,
            m.tablet_warmup_rows,
            m.tablets_known
        );
        assert_eq!(m.request_errors, 0);
        measured.push(n);
    }
    assert!(measured[0] <= 100, "{measured:?}");
    assert!(measured[1] <= 100, "{measured:?}");
    assert!(measured[2] <= 100, "{measured:?}");
    // Without warm-up the first request to every tablet is a guess: the
    // counter does see misroutes (the judge can fail).
    assert!(measured[3] > 0, "{measured:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrating_tablets_under_load() {
    let cluster = Arc::new(tablet_cluster().await);
    let setup = session(&cluster, TabletWarmup::Off, None).await;
    create_schema(&setup, "t").await;
    const SESSIONS: usize = 2;
    const CONCURRENCY: i64 = 4;
    const MOVED: usize = 8;
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        let s = session(&cluster, TabletWarmup::UsedKeyspaces, None).await;
        let insert = s
            .prepare(format!("INSERT INTO {KS}.t (pk, v) VALUES (?, ?)"))
            .await
            .unwrap();
        s.warm_up_tablets().await.unwrap();
        sessions.push((s, insert));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut load = tokio::task::JoinSet::new();
    for (s, insert) in &sessions {
        for w in 0..CONCURRENCY {
            let (s, insert, stop, done) = (s.clone(), insert.clone(), stop.clone(), done.clone());
            load.spawn(async move {
                let mut rng = fastrand::Rng::with_seed(w as u64);
                // Bounded: the test stops it long before.
                for _ in 0..10_000_000u64 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    s.execute_unpaged(&insert, (rng.i64(..), w)).await.unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let payloads_before: Vec<u64> = sessions
        .iter()
        .map(|(s, _)| s.metrics().snapshot().tablet_payloads)
        .collect();
    let misrouted_before = misrouted(&cluster);
    let tablets = cluster.tablets(KS, "t").unwrap();
    assert_eq!(tablets.len(), TABLETS);
    for i in 0..MOVED {
        let index = i * (TABLETS / MOVED);
        let (host, shard) = tablets[index].replicas[0];
        let node = cluster
            .nodes()
            .iter()
            .position(|n| n.host_id == host)
            .unwrap();
        cluster
            .migrate_tablet(KS, "t", index, 0, (node, (shard + 1) % 8))
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    while let Some(r) = load.join_next().await {
        r.unwrap();
    }
    let total_misrouted = misrouted(&cluster) - misrouted_before;
    let per_session: Vec<u64> = sessions
        .iter()
        .zip(&payloads_before)
        .map(|((s, _), b)| s.metrics().snapshot().tablet_payloads - b)
        .collect();
    println!(
        "migrating {MOVED} tablets under load ({} requests): {total_misrouted} misrouted, per session {per_session:?}",
        done.load(Ordering::Relaxed)
    );
    for (s, _) in &sessions {
        assert_eq!(s.metrics().snapshot().request_errors, 0);
    }
    // Each in-flight request to a moved tablet may miss once before the
    // payload teaches the move: a few per moved tablet and session.
    for n in &per_session {
        assert!(
            *n <= (MOVED as u64) * (CONCURRENCY as u64 + 2),
            "{per_session:?}"
        );
    }
    assert!(total_misrouted > 0, "the moves were observed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_and_recreate_leaves_no_stale_routing() {
    let cluster = tablet_cluster().await;
    let s = session(&cluster, TabletWarmup::UsedKeyspaces, None).await;
    create_schema(&s, "t").await;
    let text = format!("INSERT INTO {KS}.t (pk, v) VALUES (?, ?)");
    let insert = s.prepare(text.as_str()).await.unwrap();
    s.warm_up_tablets().await.unwrap();
    run(&s, &insert, 0, 500, 8).await;
    assert_eq!(s.tablets().tablets_known(), TABLETS);

    s.query_unpaged(format!("DROP TABLE {KS}.t"), ())
        .await
        .unwrap();
    assert_eq!(
        s.tablets().tablets_known(),
        0,
        "DROP TABLE forgets the tablets"
    );
    s.query_unpaged(
        format!("CREATE TABLE {KS}.t (pk bigint PRIMARY KEY, v bigint)"),
        (),
    )
    .await
    .unwrap();
    let insert = s.prepare(text.as_str()).await.unwrap();
    s.warm_up_tablets().await.unwrap();
    // The recreated table's tablets are placed afresh; routing follows them.
    let fresh = cluster.tablets(KS, "t").unwrap();
    let known = s.tablets().table(KS, "t").snapshot();
    assert_eq!(known.map.len(), fresh.len());
    for (k, t) in known.map.to_tablets().iter().zip(&fresh) {
        assert_eq!(
            (k.first_token.0, k.last_token.0),
            (t.first_token, t.last_token)
        );
        assert_eq!(k.replicas, t.replicas);
    }
    let before = misrouted(&cluster);
    run(&s, &insert, 0, 2_000, 16).await;
    let n = misrouted(&cluster) - before;
    println!("after DROP TABLE and CREATE TABLE: {n} of 2000 misrouted");
    assert_eq!(n, 0);

    // DROP KEYSPACE too.
    s.query_unpaged(format!("DROP KEYSPACE {KS}"), ())
        .await
        .unwrap();
    assert_eq!(s.tablets().tablets_known(), 0);
}

/// A request that reaches a shard not holding its tablet comes back with the
/// tablet's placement in the result's custom payload (ScyllaDB's
/// `tablets-routing-v1`); the session learns it, and the same key then goes
/// to the right shard, with no payload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misrouted_result_carries_the_tablet_payload() {
    let cluster = tablet_cluster().await;
    let s = session(&cluster, TabletWarmup::Off, None).await;
    create_schema(&s, "payload").await;
    let insert = s
        .prepare(format!("INSERT INTO {KS}.payload (pk, v) VALUES (?, ?)"))
        .await
        .unwrap();
    // Nothing is known about the tablets: the first requests guess. Bounded:
    // 64 tablets on 3 nodes x 8 shards, so a wrong guess comes early.
    let mut misrouted_key = None;
    for pk in 0..500i64 {
        let r = s.execute_unpaged(&insert, (pk, pk)).await.unwrap();
        if let Some(payload) = r.custom_payload() {
            assert!(
                payload.contains_key("tablets-routing-v1"),
                "{:?}",
                payload.keys().collect::<Vec<_>>()
            );
            misrouted_key = Some(pk);
            break;
        }
    }
    let pk = misrouted_key.expect("no result carried a tablet payload in 500 guesses");
    let before = misrouted(&cluster);
    let r = s.execute_unpaged(&insert, (pk, pk + 1)).await.unwrap();
    assert_eq!(r.custom_payload(), None, "the tablet was learnt");
    assert_eq!(r.warnings().len(), 0);
    assert_eq!(misrouted(&cluster), before);
}
