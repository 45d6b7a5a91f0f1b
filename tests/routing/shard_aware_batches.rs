//! Shard-aware batching: rows grouped by `Session::group_by_replica_shard`
//! go out as batches that the receiving shard owns entirely, where the same
//! rows in mixed batches make it forward most of them. The test cluster
//! judges every batch row (`batch_rows_misplaced`: rows whose partition the
//! receiving node and shard do not own), for a vnode table and a tablet
//! table.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use scylla_driver::session::ShardGroupLimits;
use scylla_driver::statement::BatchType;
use scylla_driver::{PreparedStatement, Session, TabletWarmup};
use scylla_testbed::TestCluster;

const ROWS: i64 = 2_000;
const MIXED_BATCH: usize = 50;

fn misplaced(cluster: &TestCluster) -> (u64, u64) {
    let stats = cluster.stats();
    (
        stats.total(|c| c.batch_rows),
        stats.total(|c| c.batch_rows_misplaced),
    )
}

/// Sends `0..ROWS` as mixed batches of `MIXED_BATCH`, then as grouped
/// batches; returns (rows, misplaced) for each way.
async fn compare(
    cluster: &TestCluster,
    s: &Session,
    insert: &PreparedStatement,
) -> ((u64, u64), (u64, u64)) {
    let rows: Vec<(i64, i64)> = (0..ROWS).map(|k| (k, k * 10)).collect();
    let (r0, m0) = misplaced(cluster);
    for chunk in rows.chunks(MIXED_BATCH) {
        let mut batch = scylla_driver::Batch::new(BatchType::Unlogged);
        for _ in chunk {
            batch.append(insert);
        }
        s.batch(&batch, chunk).await.unwrap();
    }
    let (r1, m1) = misplaced(cluster);
    let limits = ShardGroupLimits::default().max_rows(MIXED_BATCH);
    let groups = s
        .group_by_replica_shard_within(insert, rows.clone(), limits)
        .unwrap();
    assert_eq!(
        groups.iter().map(|g| g.rows.len()).sum::<usize>(),
        rows.len(),
        "every row in exactly one group"
    );
    assert!(groups.iter().all(|g| !g.replicas.is_empty()));
    assert!(groups.iter().all(|g| g.rows.len() <= MIXED_BATCH));
    // Two bigints per row: 2 x (4-byte length + 8 bytes).
    assert!(groups.iter().all(|g| g.bytes == g.rows.len() * 24));
    for group in groups {
        let (batch, rows) = group.into_batch(BatchType::Unlogged, insert);
        s.batch(&batch, &rows).await.unwrap();
    }

    // A byte bound: 100 bytes hold 4 rows of 24.
    let small = ShardGroupLimits::default().max_bytes(100);
    let groups = s
        .group_by_replica_shard_within(insert, rows.clone(), small)
        .unwrap();
    assert!(groups.iter().all(|g| g.bytes <= 100 && g.rows.len() <= 4));
    let mut all: Vec<(i64, i64)> = groups.into_iter().flat_map(|g| g.rows).collect();
    all.sort_unstable();
    assert_eq!(all, rows, "every row in exactly one group");
    // A row larger than the bound is a group of its own.
    let tiny = ShardGroupLimits::default().max_bytes(10);
    let groups = s
        .group_by_replica_shard_within(insert, rows[..5].to_vec(), tiny)
        .unwrap();
    assert_eq!(groups.len(), 5);
    let (r2, m2) = misplaced(cluster);
    ((r1 - r0, m1 - m0), (r2 - r1, m2 - m1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_batches_land_on_the_shard_that_owns_every_row() {
    let cluster = TestCluster::builder()
        .nodes(3)
        .shards(4)
        .start()
        .await
        .unwrap();
    let s = common::tablet_session(&cluster, TabletWarmup::Off, None).await;
    s.query_unpaged(
        "CREATE KEYSPACE sb WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}",
        (),
    )
    .await
    .unwrap();
    s.query_unpaged("CREATE TABLE sb.t (k bigint PRIMARY KEY, v bigint)", ())
        .await
        .unwrap();
    let insert = s
        .prepare("INSERT INTO sb.t (k, v) VALUES (?, ?)")
        .await
        .unwrap();
    let (mixed, grouped) = compare(&cluster, &s, &insert).await;
    println!("vnodes: mixed batches {mixed:?}, grouped {grouped:?} (rows, misplaced)");
    assert_eq!(mixed.0, ROWS as u64);
    assert_eq!(grouped.0, ROWS as u64);
    // 3 nodes x 4 shards with RF 2: a row is local to a given replica shard
    // about once in 6; mixed batches forward most of their rows.
    assert!(mixed.1 > ROWS as u64 / 2, "{mixed:?}");
    assert_eq!(grouped.1, 0, "grouped batches forward nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_batches_follow_tablets() {
    let cluster = TestCluster::builder()
        .nodes(3)
        .shards(4)
        .tablets(16)
        .start()
        .await
        .unwrap();
    let s = common::tablet_session(&cluster, TabletWarmup::UsedKeyspaces, None).await;
    s.query_unpaged(
        "CREATE KEYSPACE sbt WITH replication = {'class': 'NetworkTopologyStrategy', \
         'replication_factor': 2} AND tablets = {'enabled': true, 'initial': 16}",
        (),
    )
    .await
    .unwrap();
    s.query_unpaged("CREATE TABLE sbt.t (k bigint PRIMARY KEY, v bigint)", ())
        .await
        .unwrap();
    let insert = s
        .prepare("INSERT INTO sbt.t (k, v) VALUES (?, ?)")
        .await
        .unwrap();
    s.warm_up_tablets().await.unwrap();
    let (mixed, grouped) = compare(&cluster, &s, &insert).await;
    println!("tablets: mixed batches {mixed:?}, grouped {grouped:?} (rows, misplaced)");
    assert!(mixed.1 > ROWS as u64 / 2, "{mixed:?}");
    assert_eq!(grouped.1, 0, "grouped batches forward nothing");
}
