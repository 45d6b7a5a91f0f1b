//! Cost of routing a request to a tablet table: looking up the tablet of a
//! token in a table of 10,000 tablets, and the whole plan over its replicas.
//!
//! 6 nodes in 2 datacenters, 8 shards each; each tablet has 3 replicas (2 in
//! the local datacenter, 1 remote) on random shards. Before timing, the
//! allocations per lookup and per plan are counted with a counting global
//! allocator (the design promises zero), and the best nanoseconds per call
//! over a few batches are printed (a figure that stays meaningful when other
//! processes share the machine).

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
    NodeIdx, NodeInfo, RoutingRequest, RoutingTable, Tablet, TabletMap, TopologyInput,
};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use uuid::Uuid;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const TABLETS: u64 = 10_000;
const NODES: u32 = 6;

fn table() -> RoutingTable {
    let sharder = NonZeroU16::new(8).map(|n| Sharder::new(n, 12));
    let nodes = (0..NODES)
        .map(|i| NodeInfo {
            datacenter: format!("dc{}", i % 2),
            rack: "r1".into(),
            tokens: vec![Token(i64::from(i) * 1_000_000)],
            sharder,
        })
        .collect();
    RoutingTable::build(&TopologyInput {
        nodes,
        keyspaces: BTreeMap::new(),
    })
}

/// 10,000 equal tablets over the whole token range.
fn tablets() -> TabletMap {
    let mut rng = fastrand::Rng::with_seed(7);
    let step = u64::MAX / TABLETS;
    let tablets = (0..TABLETS).map(|i| {
        let first = i64::MIN.wrapping_add((i * step) as i64);
        let last = if i + 1 == TABLETS {
            i64::MAX
        } else {
            i64::MIN.wrapping_add(((i + 1) * step) as i64)
        };
        // Two replicas in dc0 (even nodes), one in dc1 (odd nodes).
        let a = rng.u32(0..3) * 2;
        let b = (a + 2) % 6;
        let c = rng.u32(0..3) * 2 + 1;
        Tablet {
            first_token: Token(first),
            last_token: Token(last),
            replicas: [a, b, c]
                .iter()
                .map(|&n| (Uuid::from_u128(u128::from(n) + 1), rng.u16(0..8)))
                .collect(),
            version: None,
        }
    });
    TabletMap::from_tablets(tablets, &|h| {
        let i = h.as_u128();
        (1..=u128::from(NODES))
            .contains(&i)
            .then(|| NodeIdx(i as u32 - 1))
    })
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
    region.change().allocations as f64 / n as f64
}

fn bench(c: &mut Criterion) {
    let table = table();
    let map = tablets();
    assert_eq!(map.len() as u64, TABLETS);
    let mut rng = fastrand::Rng::with_seed(42);
    let tokens: Vec<Token> = (0..4096).map(|_| Token(rng.i64(..))).collect();
    let token = |i: u64| tokens[i as usize & (tokens.len() - 1)];
    let local_dc = table.dc_id("dc0");
    let is_up = |n: NodeIdx| n.0 < NODES;
    let request = |i: u64| RoutingRequest {
        keyspace: None,
        token: Some(token(i)),
        lwt: false,
        local_dc,
        seed: i,
    };
    let choose = |i: u64| {
        let replicas = map.lookup(token(i)).unwrap_or_default();
        table.plan_tablet(&request(i), replicas, &is_up).next()
    };
    let full = |i: u64| {
        let replicas = map.lookup(token(i)).unwrap_or_default();
        table.plan_tablet(&request(i), replicas, &is_up).count()
    };

    let lookup_allocs = allocations_per_call(100_000, |i| {
        black_box(map.lookup(token(i)));
    });
    let choose_allocs = allocations_per_call(100_000, |i| {
        black_box(choose(i));
    });
    let full_allocs = allocations_per_call(10_000, |i| {
        black_box(full(i));
    });
    println!(
        "tablets/10k: allocations per lookup = {lookup_allocs}, per choice = {choose_allocs}, per full plan = {full_allocs}"
    );
    assert_eq!(lookup_allocs, 0.0, "a tablet lookup must not allocate");
    assert_eq!(
        choose_allocs, 0.0,
        "choosing a tablet target must not allocate"
    );
    assert_eq!(full_allocs, 0.0, "walking a tablet plan must not allocate");
    let lookup_ns = best_ns_per_call(200_000, |i| {
        black_box(map.lookup(black_box(token(i))));
    });
    let choose_ns = best_ns_per_call(200_000, |i| {
        black_box(choose(black_box(i)));
    });
    let full_ns = best_ns_per_call(100_000, |i| {
        black_box(full(black_box(i)));
    });
    println!(
        "tablets/10k: best batch ns per lookup = {lookup_ns:.1}, per lookup + choice = {choose_ns:.1}, per lookup + full plan = {full_ns:.1}"
    );

    let mut group = c.benchmark_group("tablets/10k");
    let mut i = 0u64;
    group.bench_function("lookup", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            black_box(map.lookup(black_box(token(i))))
        })
    });
    group.bench_function("lookup_choose", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            black_box(choose(black_box(i)))
        })
    });
    group.bench_function("lookup_full_plan", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            black_box(full(black_box(i)))
        })
    });
    group.bench_function("insert_one", |b| {
        let t = Tablet {
            first_token: Token(0),
            last_token: Token(1000),
            replicas: vec![(Uuid::from_u128(1), 3)],
            version: None,
        };
        b.iter(|| black_box(map.with_tablet(t.clone(), &|_| Some(NodeIdx(0)))))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
