//! Pools behind a NAT that rewrites source ports, and pools meeting a node
//! that sheds handshakes: no storm of throwaway connections in either case.
//!
//! - Behind a NAT, many pools connect at once and again after a node
//!   restart: every shard of every pool is covered (bounded waits; the
//!   time is printed), with at most 3.5x the ideal connections accepted in
//!   all. A NAT that lands connections on random shards makes covering a
//!   coupon collector's draw: about 2.6x, however it is paced (measured
//!   2.3-3.0x here, and 2.6x in `storm_sim` at 600 x 3 x 7).
//! - A node whose admission control sheds handshakes: the pools back off,
//!   count the shed handshakes, never blame the shard-aware port, and cover
//!   every shard in the end.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_driver::connection::ConnectionConfig;
use scylla_driver::metrics::Metrics;
use scylla_driver::pool::backoff::ExponentialBackoff;
use scylla_driver::pool::nat::FallbackReason;
use scylla_driver::pool::{NodePool, PoolConfig};
use scylla_testbed::{AdmissionConfig, Faults, HandshakeCost, NatMode, TestCluster};

const SESSIONS: usize = 12;
const NODES: usize = 2;
const SHARDS: u16 = 8;
/// Bound of every wait for a pool to fill (all its connections open).
const FILL: Duration = Duration::from_secs(30);
/// Bound of the wait for every shard of every pool to be covered.
const COVER: Duration = Duration::from_secs(90);

fn config() -> PoolConfig {
    let mut connection = ConnectionConfig::default();
    connection.handshake_timeout = Duration::from_secs(2);
    let mut config = PoolConfig::default();
    config.connection = connection;
    config.reconnect = Arc::new(ExponentialBackoff::new(
        Duration::from_millis(20),
        Duration::from_millis(500),
    ));
    config.reconnect_spread = Duration::from_millis(200);
    config.coverage_interval = Duration::from_secs(1);
    // No probe of the shard-aware port within the test's bounds (30 s by
    // default; covering can take longer on a busy machine). A probe that
    // lands on its shard by luck (1 in SHARDS behind a random NAT) would
    // restore the port, and whether a pool still reports the NAT would
    // depend on the dice. Probation itself is tested in `pool::nat`.
    config.fallback.probation = Duration::from_secs(600);
    config
}

fn accepted(cluster: &TestCluster, node: usize) -> u64 {
    let (regular, shard_aware) = accepted_by_port(cluster, node);
    regular + shard_aware
}

fn accepted_by_port(cluster: &TestCluster, node: usize) -> (u64, u64) {
    let s = cluster.node_stats(node).unwrap();
    (s.node.accepted_regular, s.node.accepted_shard_aware)
}

/// Waits until every pool holds at least one connection per shard in
/// total (not necessarily on every shard).
async fn wait_filled(pools: &[&NodePool]) -> bool {
    for p in pools {
        let filled = p
            .wait_for(FILL, |s| !s.shards.is_empty() && s.len() >= s.shards.len())
            .await;
        if !filled {
            return false;
        }
    }
    true
}

/// Waits until every shard of every pool has a connection; how long it took.
async fn wait_covered(pools: &[&NodePool]) -> Option<Duration> {
    let start = Instant::now();
    for p in pools {
        let left = COVER.saturating_sub(start.elapsed());
        if !p.wait_until_full(left).await {
            return None;
        }
    }
    Some(start.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_nat_no_storm_at_cold_start_or_restart_and_coverage_comes() {
    let mut b = TestCluster::builder().nodes(NODES).shards(SHARDS);
    for i in 0..NODES {
        b = b.faults(i, Faults::none().with_nat(NatMode::Random));
    }
    let cluster = b.start().await.unwrap();
    let metrics = Arc::new(Metrics::default());
    let mut pools = Vec::new();
    for _ in 0..SESSIONS {
        for addr in cluster.cql_addrs() {
            pools.push(NodePool::new(addr, config(), metrics.clone()));
        }
    }
    let all: Vec<&NodePool> = pools.iter().collect();

    // Cold start.
    assert!(wait_filled(&all).await, "every pool filled");
    let ideal = (SESSIONS * NODES * SHARDS as usize) as f64;
    let total: u64 = (0..NODES).map(|n| accepted(&cluster, n)).sum();
    let ratio = total as f64 / ideal;
    eprintln!("cold start: {total} accepted for {ideal} wanted ({ratio:.3}x)");
    // A request for a shard without a connection still finds one.
    for p in &pools {
        for shard in 0..SHARDS {
            assert!(p.connection_for(Some(shard)).is_some());
        }
    }
    let took = wait_covered(&all).await;
    let total_covered: u64 = (0..NODES).map(|n| accepted(&cluster, n)).sum();
    let ratio = total_covered as f64 / ideal;
    eprintln!(
        "cold start: every shard covered after {took:?} more, {total_covered} accepted in all ({ratio:.3}x)"
    );
    assert!(took.is_some(), "full coverage behind a NAT, eventually");
    assert!(ratio <= 3.5, "cold start behind a NAT: {ratio:.3}x");
    // The pools saw the NAT. Not necessarily every one: a pool that lands
    // its connections on shards it is missing, never 3 wrong in a row, is
    // covered before it has the evidence (about 0.3% of pools in a simple
    // simulation of the landings; this failed 3 times in about 16 runs when
    // it asserted all 24). Such a pool needs no fallback: it is covered.
    let reasons: Vec<_> = pools.iter().map(|p| p.fallback()).collect();
    let saw = reasons
        .iter()
        .filter(|r| **r == Some(FallbackReason::ShardMismatch))
        .count();
    assert!(
        reasons
            .iter()
            .all(|r| matches!(r, None | Some(FallbackReason::ShardMismatch))),
        "only wrong-shard landings are evidence here: {reasons:?}"
    );
    assert!(
        saw + 2 >= pools.len(),
        "the pools saw the NAT ({saw} of {}): {reasons:?}",
        pools.len()
    );
    // Covering did not grow the pools: one connection per shard each.
    for p in &pools {
        assert_eq!(p.snapshot().len(), SHARDS as usize);
    }
    let m = metrics.snapshot();
    assert!(m.coverage_attempts > 0, "{m:?}");
    assert!(m.surplus_connections_retired > 0, "{m:?}");

    // Restart node 1 (its counters start from zero).
    const RESTARTED: usize = 1;
    let addr = cluster.cql_addrs()[RESTARTED];
    let restarted: Vec<&NodePool> = pools.iter().filter(|p| p.addr() == addr).collect();
    cluster.stop_node(RESTARTED).await.unwrap();
    for p in &restarted {
        assert!(
            p.wait_for(FILL, |s| s.is_empty()).await,
            "connections dropped"
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    cluster.start_node(RESTARTED).await.unwrap();
    for p in &restarted {
        p.node_up_hint();
    }
    assert!(wait_filled(&restarted).await, "every pool filled again");
    let ideal_node = (SESSIONS * SHARDS as usize) as f64;
    let after = accepted(&cluster, RESTARTED);
    let ratio = after as f64 / ideal_node;
    eprintln!("after restart: {after} accepted for {ideal_node} wanted ({ratio:.3}x)");
    let took = wait_covered(&restarted).await;
    let after_covered = accepted(&cluster, RESTARTED);
    let ratio = after_covered as f64 / ideal_node;
    eprintln!(
        "after restart: every shard covered after {took:?} more, {after_covered} accepted in all ({ratio:.3}x)"
    );
    assert!(
        took.is_some(),
        "full coverage after the restart, eventually"
    );
    assert!(ratio <= 3.5, "after a restart behind a NAT: {ratio:.3}x");
}

/// Without a NAT the pools keep exactly one connection per shard and make
/// no background attempts (the shard-aware port covers every shard).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_nat_no_background_attempts() {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(SHARDS)
        .start()
        .await
        .unwrap();
    let metrics = Arc::new(Metrics::default());
    let pools: Vec<NodePool> = (0..4)
        .map(|_| NodePool::new(cluster.cql_addrs()[0], config(), metrics.clone()))
        .collect();
    for p in &pools {
        assert!(p.wait_until_full(FILL).await);
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    for p in &pools {
        let s = p.snapshot();
        assert!(s.shards.iter().all(|c| c.len() == 1), "one per shard");
    }
    // One connection per shard and pool: on the regular port each pool's
    // first connection and every race of it (a second setup started when
    // the first one stalls, as a loaded machine can make it), on the
    // shard-aware port the others, less the raced connections kept for a
    // shard.
    let m = metrics.snapshot();
    let (pools_n, others) = (pools.len() as u64, pools.len() as u64 * (SHARDS as u64 - 1));
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut by_port = accepted_by_port(&cluster, 0);
    while by_port.0 < pools_n + m.setup_races && Instant::now() < deadline {
        // A raced setup may still be connecting.
        tokio::time::sleep(Duration::from_millis(10)).await;
        by_port = accepted_by_port(&cluster, 0);
    }
    let (regular, shard_aware) = by_port;
    assert_eq!(regular, pools_n + m.setup_races, "{m:?}");
    assert!(
        shard_aware <= others && shard_aware + m.setup_races >= others,
        "{shard_aware} shard-aware for {others}: {m:?}"
    );
    assert_eq!(m.coverage_attempts, 0, "{m:?}");
    assert_eq!(m.surplus_connections_retired, 0, "{m:?}");
}

/// A node sheds handshakes (one admitted per shard at a time, a long CPU
/// stage, a short wait): the pools count the shed handshakes and back off,
/// keep the shard-aware port, and cover every shard in the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shed_handshakes_back_off_and_are_not_nat_evidence() {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(4)
        .admission(AdmissionConfig {
            cpu_concurrency: 1,
            cost: HandshakeCost::Sleep(Duration::from_millis(60)),
            shed_after: Duration::from_millis(20),
        })
        .start()
        .await
        .unwrap();
    let metrics = Arc::new(Metrics::default());
    let pools: Vec<NodePool> = (0..8)
        .map(|_| NodePool::new(cluster.cql_addrs()[0], config(), metrics.clone()))
        .collect();
    for p in &pools {
        assert!(p.wait_until_full(COVER).await, "covered despite shedding");
    }
    let shed_by_node = cluster.stats().total(|c| c.handshakes_shed);
    let m = metrics.snapshot();
    assert!(shed_by_node > 0, "the node shed handshakes");
    assert_eq!(
        m.handshakes_shed, shed_by_node,
        "every shed handshake seen as such: {m:?}"
    );
    assert!(m.reconnect_delays > 0, "backed off: {m:?}");
    assert_eq!(m.shard_aware_fallbacks, 0, "not NAT evidence: {m:?}");
    for p in &pools {
        assert_eq!(p.fallback(), None);
        assert!(p.snapshot().shards.iter().all(|c| c.len() == 1));
    }
}

/// Handshakes that wait for admission longer than the client's handshake
/// timeout (the client gives up at STARTUP before the node sheds them): the
/// port answered, so this is load, not a silent port; the pools back off
/// and keep the shard-aware port.
///
/// At a scale where the queue is long and a loaded machine's stall is not:
/// each shard admits one 300 ms handshake at a time, 8 pools queue theirs,
/// so a handshake waits seconds for admission against a 1.5 s timeout,
/// while the connect and OPTIONS (answered at once) would have to stall for
/// 1.5 s to time out there and look like a silent port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshakes_timing_out_in_admission_are_not_a_silent_port() {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(2)
        .admission(AdmissionConfig {
            cpu_concurrency: 1,
            cost: HandshakeCost::Sleep(Duration::from_millis(300)),
            shed_after: Duration::from_secs(10),
        })
        .start()
        .await
        .unwrap();
    let metrics = Arc::new(Metrics::default());
    let mut cfg = config();
    cfg.connection.handshake_timeout = Duration::from_millis(1500);
    let pools: Vec<NodePool> = (0..8)
        .map(|_| NodePool::new(cluster.cql_addrs()[0], cfg.clone(), metrics.clone()))
        .collect();
    for p in &pools {
        assert!(p.wait_until_full(COVER).await, "covered despite the queue");
    }
    let m = metrics.snapshot();
    assert!(m.handshakes_shed > 0, "timed out in admission: {m:?}");
    assert!(m.reconnect_delays > 0, "backed off: {m:?}");
    assert_eq!(m.shard_aware_fallbacks, 0, "not a silent port: {m:?}");
    for p in &pools {
        assert_eq!(p.fallback(), None);
    }
}
