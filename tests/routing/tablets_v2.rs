//! Tablets routing v2 (`TABLETS_ROUTING_V2_EXPERIMENTAL`) end to end against
//! the test cluster: strongly consistent tables (`consistency = 'global'`),
//! whose requests must reach their tablet's Raft leader, and eventually
//! consistent tablet tables on v2 connections. The judges are the cluster's
//! own counters: `requests_non_leader` (a request to a strongly consistent
//! table that reached a node other than its tablet's leader) and
//! `requests_tablet_misrouted`.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use scylla_driver::{PreparedStatement, Session, TabletWarmup};
use scylla_testbed::TestCluster;

use common::{run_inserts as run, tablet_session as session};

const TABLETS: usize = 16;

async fn v2_cluster(v2: bool) -> TestCluster {
    TestCluster::builder()
        .nodes(3)
        .shards(4)
        .tablets(TABLETS)
        .tablets_routing_v2(v2)
        .start()
        .await
        .unwrap()
}

/// Creates `ks.t` (strongly consistent with `consistency = 'global'` when
/// `sc`) and returns its prepared insert.
async fn schema(s: &Session, ks: &str, sc: bool) -> PreparedStatement {
    let consistency = if sc {
        " AND consistency = 'global'"
    } else {
        ""
    };
    s.query_unpaged(
        format!(
            "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{'class': 'NetworkTopologyStrategy', \
             'replication_factor': 3}} AND tablets = {{'initial': {TABLETS}}}{consistency}"
        ),
        (),
    )
    .await
    .unwrap();
    s.query_unpaged(
        format!("CREATE TABLE IF NOT EXISTS {ks}.t (pk bigint PRIMARY KEY, v bigint)"),
        (),
    )
    .await
    .unwrap();
    s.refresh_metadata().await.unwrap();
    s.prepare(format!("INSERT INTO {ks}.t (pk, v) VALUES (?, ?)"))
        .await
        .unwrap()
}

fn non_leader(c: &TestCluster) -> u64 {
    c.stats().total(|s| s.requests_non_leader)
}

fn misrouted(c: &TestCluster) -> u64 {
    c.stats().total(|s| s.requests_tablet_misrouted)
}

/// Every tablet of `ks.t` the session knows has a v2 version.
fn all_versioned(s: &Session, ks: &str) -> bool {
    let tablets = s.tablets().table(ks, "t").snapshot().map.to_tablets();
    tablets.len() == TABLETS && tablets.iter().all(|t| t.version.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strongly_consistent_requests_reach_the_leader_after_the_first_refresh() {
    let cluster = v2_cluster(true).await;
    let s = session(&cluster, TabletWarmup::UsedKeyspaces, None).await;
    let insert = schema(&s, "sc", true).await;
    assert!(s.tablets().table("sc", "t").leader_first());
    s.warm_up_tablets().await.unwrap();

    // The first requests: system.tablets has no leader and no version, so
    // each tablet's first requests may reach a follower until the answer
    // carries the tablet's routing (15 in 16 do, whatever byte was sent).
    let before = non_leader(&cluster);
    run(&s, &insert, 0, 2_000, 8).await;
    let first = non_leader(&cluster) - before;
    let refreshes = s.metrics().snapshot().tablet_payloads;
    assert!(all_versioned(&s, "sc"), "every tablet refreshed");

    // After the first refresh of every tablet: the leader, every time.
    let before = non_leader(&cluster);
    let payloads = s.metrics().snapshot().tablet_payloads;
    const N: i64 = 10_000;
    run(&s, &insert, 2_000, N, 32).await;
    let after = non_leader(&cluster) - before;
    let m = s.metrics().snapshot();
    println!(
        "strongly consistent, v2: first 2000 requests: {first} at a non-leader, {refreshes} \
         refreshes; next {N}: {after} at a non-leader, {} refreshes",
        m.tablet_payloads - payloads
    );
    assert_eq!(after, 0);
    assert_eq!(m.tablet_payloads, payloads, "versions stay current");
    assert_eq!(m.request_errors, 0);
    assert_eq!(misrouted(&cluster), 0, "leaders are replicas");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_changes_under_load_are_learned_from_the_version_mismatch() {
    let cluster = Arc::new(v2_cluster(true).await);
    let s = session(&cluster, TabletWarmup::UsedKeyspaces, None).await;
    let insert = schema(&s, "sc", true).await;
    run(&s, &insert, 0, 2_000, 8).await;
    assert!(all_versioned(&s, "sc"));

    // Writers run while every tablet's leader moves to the next replica.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..8i64 {
        let (s, insert, stop, done) = (s.clone(), insert.clone(), stop.clone(), done.clone());
        writers.spawn(async move {
            let mut k = 1_000_000 + w;
            while !stop.load(Ordering::Relaxed) {
                // Any failure fails the test.
                s.execute_unpaged(&insert, (k, k)).await.unwrap();
                done.fetch_add(1, Ordering::Relaxed);
                k += 8;
            }
        });
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before_change = non_leader(&cluster);
    let leaders = cluster.tablet_leaders("sc", "t").unwrap();
    let tablets = cluster.tablets("sc", "t").unwrap();
    for (i, (t, leader)) in tablets.iter().zip(&leaders).enumerate() {
        let at = t.replicas.iter().position(|r| r == leader).unwrap();
        cluster
            .set_tablet_leader("sc", "t", i, (at + 1) % t.replicas.len())
            .unwrap();
    }
    let changed_at = done.load(Ordering::Relaxed);
    assert_ne!(cluster.tablet_leaders("sc", "t").unwrap(), leaders);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    while let Some(r) = writers.join_next().await {
        r.unwrap();
    }
    let during = non_leader(&cluster) - before_change;
    let requests = done.load(Ordering::Relaxed) - changed_at;

    // Once learned, nothing reaches a follower any more.
    let before = non_leader(&cluster);
    run(&s, &insert, 0, 5_000, 32).await;
    let after = non_leader(&cluster) - before;
    let m = s.metrics().snapshot();
    println!(
        "leader change of {TABLETS} tablets under load: {during} requests at a non-leader \
         (of {requests} after the change, {:.1} per tablet); next 5000: {after}",
        during as f64 / TABLETS as f64
    );
    assert_eq!(after, 0);
    // A stale version is found within a few requests per tablet.
    assert!(during <= 8 * TABLETS as u64, "{during}");
    assert_eq!(m.request_errors, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eventually_consistent_tablets_on_v2_connections() {
    let cluster = v2_cluster(true).await;
    let s = session(&cluster, TabletWarmup::UsedKeyspaces, None).await;
    let insert = schema(&s, "ec", false).await;
    assert!(!s.tablets().table("ec", "t").leader_first());
    s.warm_up_tablets().await.unwrap();

    // Warm-up routing is right already: no misroute, and the first
    // requests only teach the versions.
    let before = misrouted(&cluster);
    run(&s, &insert, 0, 2_000, 8).await;
    assert_eq!(misrouted(&cluster) - before, 0);
    assert!(all_versioned(&s, "ec"));

    let before = misrouted(&cluster);
    let payloads = s.metrics().snapshot().tablet_payloads;
    run(&s, &insert, 2_000, 10_000, 32).await;
    let n = misrouted(&cluster) - before;
    let m = s.metrics().snapshot();
    println!(
        "eventually consistent, v2: {n} of 10000 misrouted, {} refreshes",
        m.tablet_payloads - payloads
    );
    assert_eq!(n, 0);
    assert_eq!(m.tablet_payloads, payloads);
    assert_eq!(m.request_errors, 0);
    assert_eq!(non_leader(&cluster), 0, "no strongly consistent table here");

    // The load still spreads over the replicas (no leader-first order):
    // every node coordinated some of the requests.
    let served: Vec<u64> = cluster
        .stats()
        .nodes
        .iter()
        .map(|n| n.node.requests_served)
        .collect();
    assert!(served.iter().all(|&n| n > 1_000), "{served:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vnode_tables_and_lwt_on_v2_connections() {
    let cluster = v2_cluster(true).await;
    let s = session(&cluster, TabletWarmup::UsedKeyspaces, None).await;
    s.query_unpaged(
        "CREATE KEYSPACE vn WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}",
        (),
    )
    .await
    .unwrap();
    s.query_unpaged("CREATE TABLE vn.t (pk bigint PRIMARY KEY, v bigint)", ())
        .await
        .unwrap();
    let insert = s
        .prepare("INSERT INTO vn.t (pk, v) VALUES (?, ?)")
        .await
        .unwrap();
    let lwt = s
        .prepare("INSERT INTO vn.t (pk, v) VALUES (?, ?) IF NOT EXISTS")
        .await
        .unwrap();
    let stats = || {
        let st = cluster.stats();
        (
            st.total(|c| c.requests_non_replica),
            st.total(|c| c.requests_wrong_shard),
        )
    };
    let before = stats();
    run(&s, &insert, 0, 2_000, 16).await;
    for k in 0..200i64 {
        s.execute_unpaged(&lwt, (10_000 + k, k)).await.unwrap();
    }
    let after = stats();
    assert_eq!(after, before, "token- and shard-aware on v2 connections");
    let m = s.metrics().snapshot();
    assert_eq!((m.request_errors, m.tablet_payloads), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_v2_the_cluster_is_served_over_v1() {
    let cluster = v2_cluster(false).await;
    let s = session(&cluster, TabletWarmup::Off, None).await;
    let insert = schema(&s, "sc", true).await;
    // v1 payloads come only from misroutes, and carry no leader: requests
    // still succeed (a ScyllaDB node forwards them to the leader).
    run(&s, &insert, 0, 2_000, 8).await;
    let m = s.metrics().snapshot();
    assert!(m.tablet_payloads > 0, "v1 payloads teach the tablets");
    assert_eq!(m.request_errors, 0);
    let tablets = s.tablets().table("sc", "t").snapshot().map.to_tablets();
    assert!(
        tablets.iter().all(|t| t.version.is_none()),
        "no v2 versions"
    );
    let before = misrouted(&cluster);
    run(&s, &insert, 2_000, 2_000, 8).await;
    assert_eq!(misrouted(&cluster) - before, 0);
    println!(
        "strongly consistent over v1: {} requests at a non-leader of 4000",
        non_leader(&cluster)
    );
}
