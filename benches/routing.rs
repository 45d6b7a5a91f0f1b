//! Cost of routing one request with the precomputed routing table, and of
//! building the table.
//!
//! Two rings: 3 nodes x 256 vnodes in one datacenter (SimpleStrategy RF 3),
//! and 100 nodes x 256 vnodes in 3 datacenters of 3 racks each
//! (NetworkTopologyStrategy RF 3 per datacenter, local datacenter set).
//! "choose" times the first target of a plan (what a request pays on the
//! happy path); "full_plan" walks every target. Before timing, each scenario
//! counts heap allocations per choice with a counting global allocator and
//! prints the count: the design promises zero. It also prints the best
//! nanoseconds per choice over a few batches, a figure that stays meaningful
//! when other processes share the machine.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::alloc::System;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::num::NonZeroU16;

use criterion::{criterion_group, criterion_main, Criterion};
use scylla_cql::sharding::Sharder;
use scylla_cql::token::Token;
use scylla_driver::routing::{
    NodeIdx, NodeInfo, NodeLoad, ReplicationStrategy, RoutingRequest, RoutingTable, TopologyInput,
};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// One benchmark scenario: the input, the keyspace to route for, the local dc.
struct Scenario {
    name: &'static str,
    input: TopologyInput,
    local_dc: Option<&'static str>,
}

/// `nodes` nodes with 256 random vnodes each, spread round-robin over
/// `dcs` datacenters and `racks` racks per datacenter, 8 shards each.
fn topology(
    nodes: usize,
    dcs: usize,
    racks: usize,
    strategy: ReplicationStrategy,
) -> TopologyInput {
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let sharder = NonZeroU16::new(8).map(|n| Sharder::new(n, 12));
    let nodes = (0..nodes)
        .map(|i| NodeInfo {
            datacenter: format!("dc{}", i % dcs),
            rack: format!("rack{}", (i / dcs) % racks),
            tokens: (0..256).map(|_| Token(rng.i64(..))).collect(),
            sharder,
        })
        .collect();
    let mut keyspaces = BTreeMap::new();
    keyspaces.insert("ks".to_owned(), strategy);
    keyspaces.insert("system".to_owned(), ReplicationStrategy::Local);
    TopologyInput { nodes, keyspaces }
}

fn scenarios() -> Vec<Scenario> {
    let nts = ReplicationStrategy::NetworkTopology {
        dc_rfs: (0..3).map(|d| (format!("dc{d}"), 3)).collect(),
    };
    vec![
        Scenario {
            name: "3x256_simple_rf3",
            input: topology(3, 1, 1, ReplicationStrategy::Simple { rf: 3 }),
            local_dc: None,
        },
        Scenario {
            name: "100x256_nts_3dc_rf3",
            input: topology(100, 3, 3, nts),
            local_dc: Some("dc0"),
        },
    ]
}

/// The best average nanoseconds per call of `f` over 15 batches of `n` calls.
fn best_ns_per_call(n: u64, mut f: impl FnMut(u64)) -> f64 {
    (0..15)
        .map(|batch| {
            let start = std::time::Instant::now();
            for i in 0..n {
                f(batch * n + i);
            }
            start.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// Heap allocations per call of `f`, over `n` calls.
fn allocations_per_call(n: u64, mut f: impl FnMut(u64)) -> f64 {
    let region = Region::new(GLOBAL);
    for i in 0..n {
        f(i);
    }
    let stats = region.change();
    stats.allocations as f64 / n as f64
}

fn bench(c: &mut Criterion) {
    let mut rng = fastrand::Rng::with_seed(42);
    // Many tokens so the search does not always take one cached path; a power
    // of two so that picking one is a mask, not a division.
    let tokens: Vec<Token> = (0..4096).map(|_| Token(rng.i64(..))).collect();
    let up = [true; 100];
    let is_up = |n: NodeIdx| up.get(n.index()).copied().unwrap_or(false);

    for s in scenarios() {
        let table = RoutingTable::build(&s.input);
        // Resolved once per prepared statement / session, not per request.
        let ks = table.keyspace_id("ks");
        let local_dc = s.local_dc.and_then(|d| table.dc_id(d));
        let request = |i: u64| RoutingRequest {
            keyspace: ks,
            token: Some(tokens[i as usize & (tokens.len() - 1)]),
            lwt: false,
            local_dc,
            seed: i,
        };

        // Per-node load with varied latencies, as a session records it.
        let loads: Vec<std::sync::Arc<NodeLoad>> = (0..table.node_count())
            .map(|n| {
                let l = NodeLoad::new();
                for _ in 0..scylla_driver::routing::load::WARM_UP {
                    l.record(std::time::Duration::from_micros(200 + 50 * n as u64));
                }
                std::sync::Arc::new(l)
            })
            .collect();
        let balanced_allocs = allocations_per_call(100_000, |i| {
            black_box(table.plan(&request(i), &is_up).with_loads(&loads).next());
        });
        assert_eq!(balanced_allocs, 0.0, "a balanced choice must not allocate");
        let best_balanced = best_ns_per_call(200_000, |i| {
            black_box(
                table
                    .plan(black_box(&request(i)), &is_up)
                    .with_loads(&loads)
                    .next(),
            );
        });
        println!(
            "routing/{}: best batch ns per balanced choice = {best_balanced:.1}",
            s.name
        );

        let choose_allocs = allocations_per_call(100_000, |i| {
            black_box(table.plan(&request(i), &is_up).next());
        });
        let full_allocs = allocations_per_call(10_000, |i| {
            black_box(table.plan(&request(i), &is_up).count());
        });
        println!(
            "routing/{}: allocations per choice = {choose_allocs}, per full plan = {full_allocs}",
            s.name
        );
        assert_eq!(choose_allocs, 0.0, "choosing a target must not allocate");
        assert_eq!(full_allocs, 0.0, "walking a plan must not allocate");
        let best = best_ns_per_call(200_000, |i| {
            black_box(table.plan(black_box(&request(i)), &is_up).next());
        });
        println!("routing/{}: best batch ns per choice = {best:.1}", s.name);

        let mut group = c.benchmark_group(format!("routing/{}", s.name));
        let mut i = 0u64;
        group.bench_function("choose", |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(table.plan(black_box(&request(i)), &is_up).next())
            })
        });
        group.bench_function("choose_balanced", |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(
                    table
                        .plan(black_box(&request(i)), &is_up)
                        .with_loads(&loads)
                        .next(),
                )
            })
        });
        group.bench_function("full_plan", |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(table.plan(black_box(&request(i)), &is_up).count())
            })
        });
        group.bench_function("build", |b| {
            b.iter(|| black_box(RoutingTable::build(black_box(&s.input))))
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
