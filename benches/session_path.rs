//! The whole `Session` path end to end (serialize, route, submit, write,
//! read, decode, typed row) against the in-process test cluster (1 node, 2
//! shards) on the same runtime: prepared INSERT and SELECT at concurrency 1
//! (time per request: what a lone request pays, server included) and 64 (one
//! iteration = one request; 64 tasks keep 64 in flight, so time per
//! iteration is the cost per request at that load).
//!
//! The server answers from memory at once, so the driver's own cost is not
//! hidden behind a real server's; `scripts/compare-drivers.sh` puts the
//! server in its own process and compares with the official driver.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use scylla_driver::{PreparedStatement, Session, SessionBuilder};
use scylla_testbed::TestCluster;

const VALUE: &[u8] = b"0123456789abcdef0123456789abcdef";

#[derive(Clone, Copy)]
enum Op {
    Insert,
    Select,
}

async fn one(s: &Session, st: &PreparedStatement, op: Op, k: i64) {
    match op {
        Op::Insert => {
            if let Err(e) = s.execute_unpaged(st, (k, VALUE)).await {
                panic!("INSERT failed: {e}");
            }
        }
        Op::Select => {
            let r = match s.execute_unpaged(st, (k,)).await {
                Ok(r) => r,
                Err(e) => panic!("SELECT failed: {e}"),
            };
            match r.single_row::<(i64, &[u8])>() {
                Ok((got, v)) if got == k && v == VALUE => {}
                other => panic!("SELECT {k}: unexpected {other:?}"),
            }
        }
    }
}

/// Runs `n` requests with `concurrency` tasks; returns the elapsed time.
async fn run(s: &Session, st: &PreparedStatement, op: Op, n: u64, concurrency: u64) -> Duration {
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (s, st, next) = (s.clone(), st.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    one(&s, &st, op, (i % 1000) as i64).await;
                }
            })
        })
        .collect();
    for t in tasks {
        if let Err(e) = t.await {
            panic!("worker failed: {e}");
        }
    }
    start.elapsed()
}

fn session_path(c: &mut Criterion) {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("runtime: {e}"),
    };
    let (cluster, session, insert, select) = rt.block_on(async {
        let cluster = match TestCluster::builder().nodes(1).shards(2).start().await {
            Ok(c) => c,
            Err(e) => panic!("test cluster: {e}"),
        };
        let session = match SessionBuilder::new()
            .known_node(cluster.cql_addrs()[0].to_string())
            .build()
            .await
        {
            Ok(s) => s,
            Err(e) => panic!("session: {e}"),
        };
        assert!(session.wait_for_all_shards(Duration::from_secs(10)).await);
        for q in [
            "CREATE KEYSPACE bench WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            "CREATE TABLE bench.kv (k bigint PRIMARY KEY, v blob)",
        ] {
            if let Err(e) = session.query_unpaged(q, ()).await {
                panic!("{q}: {e}");
            }
        }
        let prepare = |q: &'static str| {
            let s = session.clone();
            async move {
                match s.prepare(q).await {
                    Ok(p) => p,
                    Err(e) => panic!("prepare {q}: {e}"),
                }
            }
        };
        let insert = prepare("INSERT INTO bench.kv (k, v) VALUES (?, ?)").await;
        let select = prepare("SELECT k, v FROM bench.kv WHERE k = ?").await;
        // Every key the SELECTs read exists.
        run(&session, &insert, Op::Insert, 1000, 16).await;
        (cluster, session, insert, select)
    });

    let mut g = c.benchmark_group("session_path");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20)
        .throughput(Throughput::Elements(1));
    for (name, op, st) in [
        ("insert", Op::Insert, &insert),
        ("select", Op::Select, &select),
    ] {
        for concurrency in [1u64, 64] {
            g.bench_with_input(
                BenchmarkId::new(name, concurrency),
                &concurrency,
                |b, &c| {
                    b.iter_custom(|iters| rt.block_on(run(&session, st, op, iters, c)));
                },
            );
        }
    }
    g.finish();
    drop(session);
    rt.block_on(cluster.shutdown());
}

criterion_group!(benches, session_path);
criterion_main!(benches);
