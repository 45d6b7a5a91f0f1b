//! OPTIONS round trips on one connection to the in-process test cluster, for
//! each coalescing policy, at concurrency 1 (latency: what a lone request
//! pays) and 64 / 512 (throughput: one iteration is one batch of that many
//! concurrent requests, so time per iteration / concurrency is the cost per
//! request).
//!
//! Measurement times are short so the whole bench ends in about a minute;
//! `benches/tools/throughput.rs` is the tool for careful numbers.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use scylla_cql::frame::request::Options;
use scylla_cql::frame::response::Response;
use scylla_driver::connection::{open, Coalescing, Connection, ConnectionConfig, RequestOptions};
use scylla_testbed::TestCluster;

fn policies() -> [(&'static str, Coalescing); 3] {
    [
        ("off", Coalescing::Off),
        ("fixed_1ms", Coalescing::Fixed(Duration::from_millis(1))),
        ("adaptive", Coalescing::ADAPTIVE),
    ]
}

async fn round_trip(conn: &Connection) {
    let opts = {
        let mut built = RequestOptions::default();
        built.timeout = Some(Duration::from_secs(10));
        built
    };
    match conn.request(&Options, &opts).await {
        Ok(f) if matches!(f.response, Response::Supported(_)) => {}
        other => panic!("OPTIONS failed: {other:?}"),
    }
}

async fn batch(conn: &Connection, n: usize) {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let c = conn.clone();
            tokio::spawn(async move { round_trip(&c).await })
        })
        .collect();
    for t in tasks {
        if let Err(e) = t.await {
            panic!("request task failed: {e}");
        }
    }
}

fn request_path(c: &mut Criterion) {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("runtime: {e}"),
    };
    let cluster = match rt.block_on(TestCluster::builder().nodes(1).shards(1).start()) {
        Ok(c) => c,
        Err(e) => panic!("test cluster: {e}"),
    };
    let addr = cluster.cql_addrs()[0];
    let mut g = c.benchmark_group("options_round_trip");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10);
    for (name, policy) in policies() {
        let cfg = {
            let mut built = ConnectionConfig::default();
            built.coalescing = policy;
            built
        };
        let conn = match rt.block_on(open(addr, None, &cfg)) {
            Ok(c) => c,
            Err(e) => panic!("open: {e}"),
        };
        for concurrency in [1usize, 64, 512] {
            g.throughput(Throughput::Elements(concurrency as u64));
            g.bench_with_input(
                BenchmarkId::new(name, concurrency),
                &concurrency,
                |b, &n| {
                    // One `block_on` per sample, timed inside the runtime.
                    b.iter_custom(|iters| {
                        rt.block_on(async {
                            let start = Instant::now();
                            for _ in 0..iters {
                                if n == 1 {
                                    round_trip(&conn).await
                                } else {
                                    batch(&conn, n).await
                                }
                            }
                            start.elapsed()
                        })
                    })
                },
            );
        }
    }
    g.finish();
    rt.block_on(cluster.shutdown());
}

criterion_group!(benches, request_path);
criterion_main!(benches);
