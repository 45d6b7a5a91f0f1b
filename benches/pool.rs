//! Time for pools to cover every shard, against the in-process test cluster.
//!
//! Run this suite alone with `cargo bench --bench pool`.
//!
//! - `cover/1_pool_1x16`: one `NodePool` against a 1-node x 16-shard cluster,
//!   from creation until every shard has its connection (1 regular + 15
//!   shard-aware connections, handshakes included).
//! - `cover/20_pools_3x8`: 20 sessions' worth of pools (20 x 3 nodes) against
//!   a 3-node x 8-shard cluster, all created at once: 480 connections.
//!
//! Each iteration starts fresh pools against a cluster that stays up (the
//! previous iteration's pools are shut down and their connections closed
//! first); the cluster's admission control is at its defaults (8 handshakes
//! per shard, 1 ms modelled cost). Measurement time and sample size are set
//! low in code: each sample opens real connections on loopback.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use scylla_driver::metrics::Metrics;
use scylla_driver::pool::{NodePool, PoolConfig};
use scylla_testbed::TestCluster;

/// Opens `pools_per_node` pools to every node and waits until all are full;
/// returns the time that took. Shuts the pools down afterwards and waits
/// (bounded) until the cluster has seen every connection close, so the next
/// iteration starts from an idle cluster.
async fn cover(cluster: &TestCluster, pools_per_node: usize) -> Duration {
    let metrics = Arc::new(Metrics::default());
    let start = Instant::now();
    let mut pools = Vec::with_capacity(pools_per_node * cluster.len());
    for _ in 0..pools_per_node {
        for addr in cluster.cql_addrs() {
            pools.push(NodePool::new(addr, PoolConfig::default(), metrics.clone()));
        }
    }
    for p in &pools {
        assert!(
            p.wait_until_full(Duration::from_secs(30)).await,
            "pool not full"
        );
    }
    let took = start.elapsed();
    for p in &pools {
        p.shutdown();
    }
    drop(pools);
    let idle = Instant::now();
    while cluster.stats().total(|c| c.connections) > 0 && idle.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    took
}

fn bench_cover(c: &mut Criterion, name: &str, nodes: usize, shards: u16, pools_per_node: usize) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let cluster = rt
        .block_on(TestCluster::builder().nodes(nodes).shards(shards).start())
        .expect("test cluster starts");
    let mut g = c.benchmark_group("cover");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += cover(&cluster, pools_per_node).await;
                }
                total
            })
        })
    });
    g.finish();
    rt.block_on(cluster.shutdown());
}

fn one_pool(c: &mut Criterion) {
    bench_cover(c, "1_pool_1x16", 1, 16, 1);
}

fn many_pools(c: &mut Criterion) {
    bench_cover(c, "20_pools_3x8", 3, 8, 20);
}

criterion_group!(benches, one_pool, many_pools);
criterion_main!(benches);
