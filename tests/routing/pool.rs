//! The per-shard pool against the in-process test cluster: exact shard
//! coverage through the shard-aware port, every fallback path, port
//! exhaustion, restarts, and many pools connecting at once.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_driver::metrics::Metrics;
use scylla_driver::pool::backoff::ExponentialBackoff;
use scylla_driver::pool::nat::FallbackReason;
use scylla_driver::pool::shard_port::PortRange;
use scylla_driver::pool::{NodePool, PoolConfig};
use scylla_testbed::{
    AdmissionConfig, Faults, HandshakeCost, NatMode, ShardAwarePortMode, TestCluster,
};

const FULL: Duration = Duration::from_secs(20);

/// The default handshake timeout (5 s): a setup the machine stalls for a
/// moment still completes, and the shard-aware port is judged on what it
/// does, not on how long this process took to read its answer. The test of
/// a silent port shortens it.
fn config() -> PoolConfig {
    {
        let mut built = PoolConfig::default();
        built.reconnect = Arc::new(ExponentialBackoff::new(
            Duration::from_millis(20),
            Duration::from_millis(500),
        ));
        built.reconnect_spread = Duration::from_millis(200);
        built
    }
}

/// A cluster whose every handshake takes `cost` at the node (8 at a time
/// per shard, none shed).
async fn slow_handshakes(nodes: usize, shards: u16, cost: Duration) -> TestCluster {
    TestCluster::builder()
        .nodes(nodes)
        .shards(shards)
        .admission(AdmissionConfig {
            cpu_concurrency: 8,
            cost: HandshakeCost::Sleep(cost),
            shed_after: Duration::from_secs(10),
        })
        .start()
        .await
        .unwrap()
}

/// Two pools of one session (`PoolConfig::with_session_opens`) to two nodes
/// whose every handshake takes 300 ms at the node (beyond the pacing's 250 ms
/// target): each open halves the session's window, which stays at one, so
/// after the first connection the session's eight opens go one at a time
/// across both nodes (at least 7 x 300 ms), where two pools pacing only
/// their own node would open side by side (about 4 x 350 ms). A lower bound
/// on the time: a busy machine only makes it longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_opens_go_one_at_a_time_while_its_nodes_queue_them() {
    const COST: Duration = Duration::from_millis(300);
    let cluster = slow_handshakes(2, 4, COST).await;
    let cfg = config().with_session_opens();
    let metrics = Arc::new(Metrics::default());
    let start = tokio::time::Instant::now();
    let pools: Vec<NodePool> = cluster
        .cql_addrs()
        .into_iter()
        .map(|addr| NodePool::new(addr, cfg.clone(), metrics.clone()))
        .collect();
    for p in &pools {
        assert!(p.wait_until_full(FULL).await);
    }
    let took = start.elapsed();
    assert!(
        took >= COST * 7,
        "both pools full after {took:?}: the session's opens overlapped"
    );
    for p in &pools {
        p.shutdown();
    }
}

/// A pool whose first connection queued at its node pauses before its next
/// open as after any other (`pool::pacing`): the node's handshakes take
/// 1.5 s there, so the first connection queued 1.5 s, a pause of a quarter
/// of the 1 s beyond the pacer's 500 ms target follows it (250 ms), then the
/// other shard's open (1.5 s). Without the pause the pool is full after
/// 3 s and a few round trips. A lower bound on the time: a busy machine only
/// makes it longer. (A second setup raced with the first one, 500 ms into
/// it, can only be kept between rounds; if the machine stalled the first
/// one long enough for that, the other shard came through the regular port
/// and there was no second open to pause before.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_first_connection_is_followed_by_the_pacers_pause() {
    const COST: Duration = Duration::from_millis(1500);
    let cluster = slow_handshakes(1, 2, COST).await;
    let start = tokio::time::Instant::now();
    let pool = NodePool::new(
        cluster.cql_addrs()[0],
        config(),
        Arc::new(Metrics::default()),
    );
    assert!(pool.wait_until_full(FULL).await);
    let took = start.elapsed();
    let (_, shard_aware) = accepted(&cluster, 0);
    if shard_aware > 0 {
        assert!(
            took >= COST * 2 + Duration::from_millis(250),
            "full after {took:?}: the second open did not wait the pause"
        );
    }
    pool.shutdown();
}

fn accepted(cluster: &TestCluster, node: usize) -> (u64, u64) {
    let s = cluster.node_stats(node).unwrap();
    (s.node.accepted_regular, s.node.accepted_shard_aware)
}

/// Asserts that the node accepted exactly the connections of a pool that
/// holds one per shard: on the regular port, its first connection's setup
/// and each of its `races` (a second setup started when the first one
/// stalls, as a loaded machine can make it; counted in
/// `Metrics::setup_races`), and on the shard-aware port one per other
/// shard, less the raced connections kept for a shard. Waits (bounded) for
/// the raced setups to reach the node: one may still be connecting when the
/// pool is full.
async fn assert_one_per_shard(cluster: &TestCluster, node: usize, shards: u64, races: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let (mut regular, mut shard_aware) = accepted(cluster, node);
    while regular < 1 + races && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
        (regular, shard_aware) = accepted(cluster, node);
    }
    assert_eq!(
        regular,
        1 + races,
        "regular: the first connection and {races} races of it"
    );
    assert!(
        shard_aware < shards && shard_aware + races >= shards - 1,
        "shard-aware: {shard_aware} for {shards} shards after {races} races"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_per_shard_through_the_shard_aware_port() {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(8)
        .start()
        .await
        .unwrap();
    let metrics = Arc::new(Metrics::default());
    let pool = NodePool::new(cluster.cql_addrs()[0], config(), metrics.clone());
    assert!(pool.wait_until_full(FULL).await);
    let snap = pool.snapshot();
    assert_eq!(snap.covered_shards(), 8);
    for (shard, conns) in snap.shards.iter().enumerate() {
        assert_eq!(conns.len(), 1);
        assert_eq!(conns[0].shard(), Some(shard as u16));
    }
    // Exactly S accepted connections for S shards: 1 regular + 7 shard-aware
    // (and one more regular one per raced first setup).
    let m = metrics.snapshot();
    assert_one_per_shard(&cluster, 0, 8, m.setup_races).await;
    assert_eq!(m.wrong_shard_landings, 0);
    // A raced setup that completes late is kept for a shard or closed.
    assert!(m.excess_connections_closed <= m.setup_races, "{m:?}");
    assert_eq!(pool.fallback(), None);
    // Routing by shard returns that shard's connection.
    for shard in 0..8u16 {
        assert_eq!(
            pool.connection_for(Some(shard)).unwrap().shard(),
            Some(shard)
        );
    }
}

async fn covered_despite(faults: Faults, cfg: PoolConfig, expected: FallbackReason) {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(6)
        .faults(0, faults)
        .start()
        .await
        .unwrap();
    let metrics = Arc::new(Metrics::default());
    let pool = NodePool::new(cluster.cql_addrs()[0], cfg, metrics.clone());
    assert!(pool.wait_until_full(FULL).await, "every shard covered");
    assert_eq!(pool.fallback(), Some(expected));
    let m = metrics.snapshot();
    assert_eq!(m.shard_aware_fallbacks, 1, "{m:?}");
    // Bounded attempts: a few wasted on the shard-aware port, then the
    // regular port, whose excess landings are closed.
    let (regular, sa) = accepted(&cluster, 0);
    assert!(regular + sa <= 6 * 4, "accepted {regular} + {sa}");
    assert!(m.connect_attempts() <= 6 * 4, "{m:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nat_rewriting_ports_falls_back_to_the_regular_port() {
    covered_despite(
        Faults::none().with_nat(NatMode::Offset(1)),
        config(),
        FallbackReason::ShardMismatch,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_shard_aware_port_falls_back() {
    covered_despite(
        Faults::none().with_shard_aware_port(ShardAwarePortMode::Refuse),
        config(),
        FallbackReason::Refused,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_shard_aware_port_times_out_and_falls_back() {
    // Each attempt on the silent port waits out the handshake timeout.
    let mut cfg = config();
    cfg.connection.handshake_timeout = Duration::from_millis(500);
    covered_despite(
        Faults::none().with_shard_aware_port(ShardAwarePortMode::Silent),
        cfg,
        FallbackReason::TimedOut,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_port_range_is_exhausted_cleanly() {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(8)
        .start()
        .await
        .unwrap();
    let metrics = Arc::new(Metrics::default());
    // 4 ports cover at most 4 of the 8 shards' residues.
    let cfg = {
        let mut built = config();
        built.source_ports = PortRange::new(63000, 63004).unwrap();
        built
    };
    let pool = NodePool::new(cluster.cql_addrs()[0], cfg, metrics.clone());
    assert!(pool.wait_until_full(FULL).await);
    assert_eq!(pool.fallback(), Some(FallbackReason::PortsExhausted));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_restart_is_recovered() {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(4)
        .start()
        .await
        .unwrap();
    let metrics = Arc::new(Metrics::default());
    let pool = NodePool::new(cluster.cql_addrs()[0], config(), metrics.clone());
    assert!(pool.wait_until_full(FULL).await);
    cluster.stop_node(0).await.unwrap();
    assert!(
        pool.wait_for(FULL, |s| s.is_empty()).await,
        "connections dropped"
    );
    assert!(pool.connection_for(Some(0)).is_none());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let races_before = metrics.snapshot().setup_races;
    cluster.start_node(0).await.unwrap();
    assert!(pool.wait_until_full(FULL).await, "all shards back");
    let m = metrics.snapshot();
    assert!(m.reconnect_delays >= 1, "{m:?}");
    // After the restart (its counters start from zero): again exactly one
    // connection per shard.
    assert_one_per_shard(&cluster, 0, 4, m.setup_races - races_before).await;
}

/// One lost message of a setup (the node never answers the STARTUP of the
/// first connection after its restart) costs the node far less than the
/// handshake timeout: a second setup races the stalled one after a delay
/// that follows the setup times seen, and the node is served again while
/// the stalled setup is still waiting. The race starts after 4 times the
/// slowest recent setup, at least 100 ms (here: 100 ms, setups on loopback
/// take a few milliseconds; a loaded machine may have stretched one of the
/// first setups to a few hundred); the deadline asserted is a quarter of the
/// 30 s handshake timeout, so a busy machine has room and a pool that waits
/// for the stalled setup (or races only at half the timeout) fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_setup_is_raced_instead_of_waiting_out_the_timeout() {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(4)
        .start()
        .await
        .unwrap();
    let mut cfg = config();
    cfg.connection.handshake_timeout = Duration::from_secs(30);
    let metrics = Arc::new(Metrics::default());
    let pool = NodePool::new(cluster.cql_addrs()[0], cfg, metrics.clone());
    assert!(pool.wait_until_full(FULL).await);

    cluster.stop_node(0).await.unwrap();
    assert!(pool.wait_for(FULL, |s| s.is_empty()).await);
    cluster
        .set_faults(0, Faults::none().with_withheld_startup(1))
        .await
        .unwrap();
    // A setup the machine stalled at the start may have been raced too.
    let races_before = metrics.snapshot().setup_races;
    cluster.start_node(0).await.unwrap();
    let started = std::time::Instant::now();
    assert!(
        pool.wait_for(FULL, |s| !s.is_empty()).await,
        "the node is served again"
    );
    let served_after = started.elapsed();
    let m = metrics.snapshot();
    println!(
        "served {served_after:?} after the restart; races {}, timeouts {}, slowest recent setup {} us",
        m.setup_races,
        m.connect_timeouts,
        metrics
            .slowest_recent_setup_micros
            .load(std::sync::atomic::Ordering::Relaxed)
    );
    assert_eq!(
        cluster.faults(0).unwrap().withhold_startup,
        0,
        "the node withheld a STARTUP answer"
    );
    let races = m.setup_races - races_before;
    assert_eq!(races, 1, "{m:?}");
    assert!(
        served_after < Duration::from_millis(7500),
        "served {served_after:?} after the restart"
    );
    assert_eq!(
        m.connect_timeouts, 0,
        "served before the stalled setup timed out: {m:?}"
    );
    assert!(pool.wait_until_full(FULL).await, "all shards back");
    // The stalled connection, the racing one, and one per other shard.
    assert_eq!(accepted(&cluster, 0), (2, 3));
}

/// Many pools (as many client sessions) connect at once, and again after a
/// node restart: the accepted connections stay within 1% of the ideal.
///
/// With the default handshake timeout (5 s). With 500 ms, a machine whose
/// cores are busy with other work slows the test cluster (it runs in this
/// process) enough that some handshakes pass the client's timeout after the
/// node accepted them: the pool gives those up and opens new ones, and each
/// counts as one more accepted connection (seen: 741 accepted for 720, 21
/// of them after as many handshake timeouts at STARTUP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storm_of_pools_needs_almost_no_extra_connections() {
    const SESSIONS: usize = 20;
    const NODES: usize = 3;
    const SHARDS: u16 = 12;
    let cluster = TestCluster::builder()
        .nodes(NODES)
        .shards(SHARDS)
        .start()
        .await
        .unwrap();
    let metrics = Arc::new(Metrics::default());
    let mut pools = Vec::new();
    for _ in 0..SESSIONS {
        for addr in cluster.cql_addrs() {
            pools.push(NodePool::new(addr, config(), metrics.clone()));
        }
    }
    for p in &pools {
        assert!(p.wait_until_full(Duration::from_secs(60)).await);
    }
    let ideal = (SESSIONS * NODES * SHARDS as usize) as f64;
    let total: u64 = (0..NODES)
        .map(|n| {
            let (r, s) = accepted(&cluster, n);
            r + s
        })
        .sum();
    let m = metrics.snapshot();
    println!(
        "cold start: {total} accepted for {ideal} wanted ({})",
        open_outcomes(&m)
    );
    assert!(
        total as f64 / ideal <= 1.01,
        "cold start: {total} accepted for {ideal} wanted ({})",
        open_outcomes(&m)
    );

    cluster.stop_node(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    cluster.start_node(1).await.unwrap();
    for p in &pools {
        assert!(p.wait_until_full(Duration::from_secs(60)).await);
    }
    let (r, s) = accepted(&cluster, 1);
    let ideal_node = (SESSIONS * SHARDS as usize) as f64;
    let m = metrics.snapshot();
    println!(
        "after restart: {} accepted for {ideal_node} wanted ({})",
        r + s,
        open_outcomes(&m)
    );
    assert!(
        (r + s) as f64 / ideal_node <= 1.01,
        "after restart: {} accepted for {ideal_node} ({})",
        r + s,
        open_outcomes(&m)
    );
}

/// What the pools' connection attempts ended in, for a failure message.
fn open_outcomes(m: &scylla_driver::metrics::MetricsSnapshot) -> String {
    format!(
        "driver: {} shard-aware ok, {} failed; {} regular ok, {} failed; {} connect timeouts; \
         {} wrong-shard landings; {} excess closed; {} fallbacks; {} shed; {} setup races",
        m.connects_shard_aware_ok,
        m.connects_shard_aware_failed,
        m.connects_regular_ok,
        m.connects_regular_failed,
        m.connect_timeouts,
        m.wrong_shard_landings,
        m.excess_connections_closed,
        m.shard_aware_fallbacks,
        m.handshakes_shed,
        m.setup_races
    )
}
