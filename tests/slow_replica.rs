//! Slow replicas avoided (issue 15): with one of three replicas 20 ms slower,
//! latency-aware plans send it only probes (so its average can recover),
//! where plans that ignore latency (`latency_aware_routing(false)`) take
//! turns.
//!
//! What the suite asserts does not depend on the machine's load: counts of
//! requests each node served (the slow node below its third, yet not
//! starved; the latency-blind plans at about a third), orderings between
//! the variants, and the one latency bound no load can break (a third of
//! the blind plans' requests wait the slow node's extra 20 ms, so their p99
//! is at least that). The latency claim itself, p99 within 2x of the p99
//! without a slow node, is a measurement: it moves with the machine's load
//! (on a busy 2-core machine the p99 without any slow node reached 53 ms),
//! so it is an ignored test to run on a quiet machine, as is the share the
//! slow node gets under paced load (its probes, under 0.6 %):
//! `cargo test --test slow_replica -- --ignored --nocapture`.
//! Each phase warms up first (the averages start empty) and is bounded in
//! time.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;
use common::create_keyspace;

use std::time::{Duration, Instant};

use scylla_driver::statement::{Consistency, Statement};
use scylla_driver::{PreparedStatement, Session, SessionBuilder};
use scylla_testbed::TestCluster;

const SLOW: usize = 2;
const EXTRA: Duration = Duration::from_millis(20);
const WORKERS: usize = 4;
const ROUNDS: usize = 4;
const WARMUP: usize = 1_500;
const MEASURED: usize = 8_000;
const KEYS: i64 = 200;

/// A 3-node cluster (node `SLOW` slower by `extra`, if any) with keyspace
/// `s` (RF 3) holding `KEYS` rows.
async fn cluster(extra: Option<Duration>) -> TestCluster {
    let mut b = TestCluster::builder().nodes(3).shards(2);
    if let Some(extra) = extra {
        // As a fault, so that a test can take it away.
        b = b.faults(SLOW, scylla_testbed::Faults::default().with_latency(extra));
    }
    let cluster = b.start().await.unwrap();
    let session = session(&cluster, true).await;
    create_keyspace(&session, "s", 3).await;
    session
        .query_unpaged("CREATE TABLE s.t (k bigint PRIMARY KEY, v bigint)", ())
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO s.t (k, v) VALUES (?, ?)")
        .await
        .unwrap();
    common::run_inserts(&session, &insert, 0, KEYS, 8).await;
    cluster
}

async fn session(cluster: &TestCluster, latency_aware: bool) -> Session {
    let s = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .latency_aware_routing(latency_aware)
        .build()
        .await
        .unwrap();
    assert!(s.wait_for_all_shards(Duration::from_secs(20)).await);
    s
}

/// What one phase measured.
#[derive(Debug)]
struct Phase {
    #[allow(dead_code)] // printed
    p50: Duration,
    p99: Duration,
    /// Requests that took the slow node's extra latency or more.
    at_least_extra: usize,
    requests: usize,
    /// Requests node `SLOW` served during the measured part.
    slow_served: u64,
    /// Requests all nodes served during the measured part.
    all_served: u64,
}

/// `n` reads by `WORKERS` closed-loop workers; every latency.
async fn run(session: &Session, read: &PreparedStatement, n: usize) -> Vec<Duration> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..WORKERS {
        let (session, read) = (session.clone(), read.clone());
        tasks.spawn(async move {
            let mut latencies = Vec::with_capacity(n / WORKERS + 1);
            let mut k = w as i64;
            while latencies.len() < n / WORKERS && Instant::now() < deadline {
                let started = Instant::now();
                session.execute_unpaged(&read, (k % KEYS,)).await.unwrap();
                latencies.push(started.elapsed());
                k += WORKERS as i64;
            }
            latencies
        });
    }
    let mut all = Vec::with_capacity(n);
    while let Some(r) = tasks.join_next().await {
        all.extend(r.unwrap());
    }
    all
}

/// A session measured in rounds, interleaved with the other sessions so that
/// all of them see the same machine load.
struct Measured {
    session: Session,
    read: PreparedStatement,
    latencies: Vec<Duration>,
    slow_served: u64,
    all_served: u64,
}

impl Measured {
    async fn new(cluster: &TestCluster, latency_aware: bool) -> Self {
        let session = session(cluster, latency_aware).await;
        let read = session
            .prepare(
                Statement::new("SELECT v FROM s.t WHERE k = ?").with_consistency(Consistency::One),
            )
            .await
            .unwrap();
        // The latency averages start empty: warm them up.
        run(&session, &read, WARMUP).await;
        Self {
            session,
            read,
            latencies: Vec::new(),
            slow_served: 0,
            all_served: 0,
        }
    }

    async fn round(&mut self, cluster: &TestCluster) {
        let before = cluster.stats();
        let latencies = run(&self.session, &self.read, MEASURED / ROUNDS).await;
        let after = cluster.stats();
        let served =
            |i: usize| after.nodes[i].node.requests_served - before.nodes[i].node.requests_served;
        self.latencies.extend(latencies);
        self.slow_served += served(SLOW);
        self.all_served += (0..3).map(served).sum::<u64>();
    }

    fn phase(mut self) -> Phase {
        let latencies = &mut self.latencies;
        latencies.sort_unstable();
        let at = |q: f64| measure::percentile(latencies, q).unwrap_or_default();
        Phase {
            p50: at(0.50),
            p99: at(0.99),
            at_least_extra: latencies.iter().filter(|&&l| l >= EXTRA).count(),
            requests: latencies.len(),
            slow_served: self.slow_served,
            all_served: self.all_served,
        }
    }
}

/// The three phases, measured in interleaved rounds: no slow node, a slow
/// node with latency-aware plans, a slow node with latency-blind plans.
async fn three_phases() -> (Phase, Phase, Phase) {
    let fast = cluster(None).await;
    let slow = cluster(Some(EXTRA)).await;
    let mut base = Measured::new(&fast, true).await;
    let mut aware = Measured::new(&slow, true).await;
    let mut blind = Measured::new(&slow, false).await;
    for _ in 0..ROUNDS {
        base.round(&fast).await;
        aware.round(&slow).await;
        blind.round(&slow).await;
    }
    let (base, aware, blind) = (base.phase(), aware.phase(), blind.phase());
    fast.shutdown().await;
    slow.shutdown().await;
    eprintln!("no slow node:     {base:?}");
    eprintln!("slow node, aware: {aware:?}");
    eprintln!("slow node, blind: {blind:?}");
    for p in [&base, &aware, &blind] {
        assert!(
            p.requests >= MEASURED * 9 / 10,
            "too few requests in time: {p:?}"
        );
    }
    (base, aware, blind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_replica_gets_only_probes_and_is_not_starved() {
    let (_, aware, blind) = three_phases().await;
    // Plans that ignore latency send about a third of the requests to the
    // slow node, so their p99 is at least its extra latency (a lower bound:
    // a loaded machine only adds to it).
    assert!(blind.slow_served * 5 >= blind.all_served, "{blind:?}");
    assert!(blind.p99 >= EXTRA, "{blind:?}");
    // Latency-aware plans send it far fewer (probes, about 1 in 384, plus
    // what a loaded machine's noise lets through), and at most a third of
    // what the blind plans sent it.
    assert!(aware.slow_served * 10 < aware.all_served, "{aware:?}");
    assert!(
        aware.slow_served * 3 <= blind.slow_served,
        "aware {aware:?} vs blind {blind:?}"
    );
    // Not starved: it still gets its probes.
    assert!(
        aware.slow_served >= 5,
        "the slow node was starved: {aware:?}"
    );
}

/// The latency target, measured: p99 with a slow node within 2x of the p99
/// without one. Load-dependent, hence ignored in the suite (see the module
/// documentation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a latency measurement: run on a quiet machine"]
async fn measured_p99_with_a_slow_replica_is_within_2x_of_none() {
    let (base, aware, blind) = three_phases().await;
    assert!(
        aware.p99 <= base.p99 * 2,
        "p99 {:?} with a slow node vs {:?} without",
        aware.p99,
        base.p99
    );
    assert!(
        blind.at_least_extra >= 3 * aware.at_least_extra.max(1),
        "blind {blind:?} vs aware {aware:?}"
    );
}

/// The first seconds of fresh sessions (no warm-up, the averages empty):
/// with one replica 20 ms slower, p99 over the first `FIRST` of paced load
/// within 2x of the p99 without a slow node. Load-dependent, hence ignored
/// in the suite; the rule behind it (a slow replica passed over from its
/// first answer) is `routing::load`'s unit test
/// `a_slow_node_is_passed_over_from_its_first_answer`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a latency measurement: run on a quiet machine"]
async fn measured_p99_of_the_first_seconds_with_a_slow_replica_is_within_2x_of_none() {
    const FIRST: Duration = Duration::from_secs(4);
    let fast = cluster(None).await;
    let slow = cluster(Some(EXTRA)).await;
    let base_sessions = paced_sessions(&fast).await;
    let slow_sessions = paced_sessions(&slow).await;
    let (base, _) = served_during(&fast, paced(&base_sessions, FIRST)).await;
    let (aware, served) = served_during(&slow, paced(&slow_sessions, FIRST)).await;
    let total: u64 = served.iter().sum();
    eprintln!(
        "first {FIRST:?} of {SESSIONS} fresh sessions x {RATE_PER_SESSION}/s: p99 {:?} without \
         a slow node, {:?} with one ({:.2}x); the slow node served {} of {total}",
        p99(&base),
        p99(&aware),
        p99(&aware).as_secs_f64() / p99(&base).as_secs_f64(),
        served[SLOW],
    );
    assert!(
        p99(&aware) <= p99(&base) * 2,
        "p99 {:?} with a slow node vs {:?} without",
        p99(&aware),
        p99(&base)
    );
}

/// A replica that turns slow under steady load: warmed-up sessions on a
/// cluster whose node `SLOW` becomes 20 ms slower. Within the first second
/// it is avoided: from the second second on it serves under 1 % of the
/// reads (its probes, about 0.26 %, and little more). Prints the p99 over
/// the 4 s after the change against the 4 s before. Load-dependent, hence
/// ignored in the suite; the rule behind it is `routing::load`'s unit test
/// `a_node_that_turned_slow_waits_for_its_probes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a share measured on a quiet machine"]
async fn measured_a_replica_that_turns_slow_is_avoided_within_a_second() {
    const AFTER: Duration = Duration::from_secs(4);
    let cluster = cluster(None).await;
    let sessions = paced_sessions(&cluster).await;
    paced(&sessions, Duration::from_secs(2)).await;
    let (before, _) = served_during(&cluster, paced(&sessions, AFTER)).await;
    cluster
        .set_faults(SLOW, scylla_testbed::Faults::default().with_latency(EXTRA))
        .await
        .unwrap();
    let mut after = Vec::new();
    let mut per_second = Vec::new();
    for _ in 0..AFTER.as_secs() {
        let (l, served) = served_during(&cluster, paced(&sessions, Duration::from_secs(1))).await;
        after.extend(l);
        per_second.push((served[SLOW], served.iter().sum::<u64>()));
    }
    after.sort_unstable();
    eprintln!(
        "{SESSIONS} sessions x {RATE_PER_SESSION}/s, node {SLOW} 20 ms slower from now: p99 \
         {:?} before, {:?} over the next {AFTER:?} ({:.2}x); the slow node's reads per second \
         (of all): {per_second:?}",
        p99(&before),
        p99(&after),
        p99(&after).as_secs_f64() / p99(&before).as_secs_f64(),
    );
    for &(slow, all) in &per_second[1..] {
        assert!(
            slow * 100 < all,
            "seconds after it turned slow: {per_second:?}"
        );
    }
}

/// A DDL statement's answer waits for the node's schema update, far longer
/// than a request takes: it must not count as the node's latency. (A real
/// 3-node Cassandra, the keyspace and table created through one node, once
/// sent 100 RF 3 reads to the other two only.) Here every node is warmed up
/// by reads first (a warming node's first answers would decide alone), then
/// node 0, which answers
/// schema changes 300 ms late, coordinates two; then sequential reads,
/// latency-aware, reach node 0 as often as the others, give or take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_change_does_not_count_as_the_nodes_latency() {
    use scylla_driver::policies::load_balancing::{
        NodeIdentifier, SingleTargetLoadBalancingPolicy,
    };
    let ddl_node = 0;
    // Every answer takes 20 ms: a machine busy with other work does not make
    // outliers (3x the average, here a stall of 40 ms) of the reads, as it
    // would of 0.3 ms ones (and, once in a full workspace run, of 5 ms ones:
    // two in a row left node 0 to its probes, 6 of 99 reads).
    let answers = Duration::from_millis(20);
    let mut builder = TestCluster::builder().nodes(3).shards(2);
    for node in 0..3 {
        let mut faults = scylla_testbed::Faults::default().with_latency(answers);
        if node == ddl_node {
            faults = faults.with_schema_change_latency(Duration::from_millis(300));
        }
        builder = builder.faults(node, faults);
    }
    let cluster = builder.start().await.unwrap();
    let session = session(&cluster, true).await;
    let addrs = cluster.cql_addrs();
    let on = |node: usize, mut st: Statement| {
        st.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
            NodeIdentifier::NodeAddress(addrs[node]),
            None,
        )));
        st
    };
    for ddl in [
        "CREATE KEYSPACE d WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}",
        "CREATE TABLE d.t (k bigint PRIMARY KEY, v bigint)",
    ] {
        session
            .query_unpaged(on(1, Statement::new(ddl)), ())
            .await
            .unwrap();
    }
    let read = "SELECT v FROM d.t WHERE k = 1";
    for (node, addr) in addrs.iter().enumerate() {
        for _ in 0..4 {
            let r = session
                .query_unpaged(on(node, Statement::new(read)), ())
                .await
                .unwrap();
            assert_eq!(r.coordinator, Some(*addr));
        }
    }
    for ddl in [
        "CREATE TABLE d.u (k bigint PRIMARY KEY, v bigint)",
        "CREATE TABLE d.w (k bigint PRIMARY KEY, v bigint)",
    ] {
        let started = Instant::now();
        session
            .query_unpaged(on(ddl_node, Statement::new(ddl)), ())
            .await
            .unwrap();
        assert!(started.elapsed() >= Duration::from_millis(300), "{ddl}");
    }
    let read = session.prepare(read).await.unwrap();
    let mut served = [0usize; 3];
    for _ in 0..99 {
        let r = session.execute_unpaged(&read, ()).await.unwrap();
        let node = addrs
            .iter()
            .position(|a| Some(*a) == r.coordinator)
            .unwrap();
        served[node] += 1;
    }
    eprintln!("99 reads after the DDL, by node: {served:?}");
    assert!(
        served[ddl_node] >= 15,
        "99 reads, by node: {served:?} (node {ddl_node} coordinated the DDL)"
    );
}

/// With a local rack, the replicas of that rack serve the requests (the
/// other replicas only when it is down).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_rack_is_preferred() {
    let mut b = TestCluster::builder().nodes(3);
    for i in 0..3 {
        b = b.node_location(i, "dc1", format!("r{i}"));
    }
    let cluster = b.start().await.unwrap();
    let s = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .local_datacenter("dc1")
        .local_rack("r1")
        .build()
        .await
        .unwrap();
    assert!(s.wait_for_all_shards(Duration::from_secs(20)).await);
    create_keyspace(&s, "r", 3).await;
    s.query_unpaged("CREATE TABLE r.t (k bigint PRIMARY KEY, v bigint)", ())
        .await
        .unwrap();
    let read = s
        .prepare(Statement::new("SELECT v FROM r.t WHERE k = ?").with_consistency(Consistency::One))
        .await
        .unwrap();
    let before = cluster.stats();
    for k in 0..300i64 {
        s.execute_unpaged(&read, (k,)).await.unwrap();
    }
    let after = cluster.stats();
    let served =
        |i: usize| after.nodes[i].node.requests_served - before.nodes[i].node.requests_served;
    // Node 0 also serves the control connection's occasional queries.
    assert!(
        served(1) >= 300,
        "{:?}",
        (0..3).map(served).collect::<Vec<_>>()
    );
    assert!(
        served(0) + served(2) <= 10,
        "{:?}",
        (0..3).map(served).collect::<Vec<_>>()
    );
    cluster.shutdown().await;
}

/// Sessions of a moderately busy deployment: many application instances at
/// a fixed rate each. With such rates a slow node's average is seconds old
/// between probes; that must not earn it turns.
const SESSIONS: usize = 20;
const RATE_PER_SESSION: u32 = 100;
const STEADY: Duration = Duration::from_secs(6);

/// Every session sends `RATE_PER_SESSION` reads per second (open loop, one
/// task per session, each read awaited before the next tick) for `length`;
/// returns every latency.
async fn paced(sessions: &[(Session, PreparedStatement)], length: Duration) -> Vec<Duration> {
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (session, read)) in sessions.iter().enumerate() {
        let (session, read) = (session.clone(), read.clone());
        tasks.spawn(async move {
            let period = Duration::from_secs(1) / RATE_PER_SESSION;
            // Sessions start spread over one period, as independent
            // applications would.
            tokio::time::sleep(period * i as u32 / SESSIONS as u32).await;
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let end = Instant::now() + length;
            let mut latencies = Vec::new();
            let mut k = i as i64;
            while Instant::now() < end {
                tick.tick().await;
                let started = Instant::now();
                session.execute_unpaged(&read, (k % KEYS,)).await.unwrap();
                latencies.push(started.elapsed());
                k += SESSIONS as i64;
            }
            latencies
        });
    }
    let mut all = Vec::new();
    while let Some(r) = tasks.join_next().await {
        all.extend(r.unwrap());
    }
    all.sort_unstable();
    all
}

fn p99(sorted: &[Duration]) -> Duration {
    measure::percentile(sorted, 0.99).unwrap_or_default()
}

async fn paced_sessions(cluster: &TestCluster) -> Vec<(Session, PreparedStatement)> {
    let mut sessions = Vec::new();
    for _ in 0..SESSIONS {
        let session = session(cluster, true).await;
        let read = session
            .prepare(
                Statement::new("SELECT v FROM s.t WHERE k = ?").with_consistency(Consistency::One),
            )
            .await
            .unwrap();
        sessions.push((session, read));
    }
    sessions
}

/// Requests served per node during `f`.
async fn served_during<T>(
    cluster: &TestCluster,
    f: impl std::future::Future<Output = T>,
) -> (T, [u64; 3]) {
    let before = cluster.stats();
    let out = f.await;
    let after = cluster.stats();
    let served =
        |i: usize| after.nodes[i].node.requests_served - before.nodes[i].node.requests_served;
    (out, [served(0), served(1), served(2)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_moderately_busy_sessions_keep_off_a_slow_replica() {
    paced_phase(0.25).await;
}

/// The paced phase with the share measured on a quiet machine: the slow
/// node gets its probes (about 1 in 384 requests, 0.26 %) and little more,
/// under 0.6 %, below the 1 % that would reach the p99. Load-dependent,
/// hence ignored in the suite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a share measured on a quiet machine"]
async fn measured_share_of_a_slow_replica_is_its_probes() {
    paced_phase(0.006).await;
}

/// Twenty paced sessions on a cluster without and with a slow node; fails
/// unless the slow node's share of the requests stays below `max_share`,
/// it is not starved, and it gets its third back once it speeds up.
async fn paced_phase(max_share: f64) {
    let fast = cluster(None).await;
    let slow = cluster(Some(EXTRA)).await;
    let base_sessions = paced_sessions(&fast).await;
    let slow_sessions = paced_sessions(&slow).await;
    // Warm-up: the latency averages start empty.
    paced(&base_sessions, Duration::from_secs(2)).await;
    paced(&slow_sessions, Duration::from_secs(2)).await;

    let (base, _) = served_during(&fast, paced(&base_sessions, STEADY)).await;
    let (aware, served) = served_during(&slow, paced(&slow_sessions, STEADY)).await;
    let total: u64 = served.iter().sum();
    let share = served[SLOW] as f64 / total as f64;
    eprintln!(
        "{SESSIONS} sessions x {RATE_PER_SESSION}/s: p99 {:?} without a slow node, {:?} with one \
         ({:.2}x); the slow node served {} of {total} ({:.2} %)",
        p99(&base),
        p99(&aware),
        p99(&aware).as_secs_f64() / p99(&base).as_secs_f64(),
        served[SLOW],
        share * 100.0
    );
    assert!(aware.len() as u64 >= total * 9 / 10, "requests missing");
    // On a quiet machine the slow node gets its probes and little more
    // (see `measured_share_of_a_slow_replica_is_its_probes`). On a busy
    // one, scheduling delays blur every node's latency and the requests
    // queued at the fast nodes raise their cost (latency x load), so the
    // policy spreads more: 0.66-0.78 % under one parallel release build,
    // 16.8 % under two builds at once (load average 7-8). What holds at any
    // load is the direction: below its fair third, and never starved.
    assert!(served[SLOW] >= 5, "the slow node was starved: {served:?}");
    assert!(
        share < max_share,
        "the slow node served {:.2} % (bound {:.2} %)",
        share * 100.0,
        max_share * 100.0
    );

    // It speeds up again: within 20 rounds of half a second of load it gets
    // its share back (a third). Counted in rounds of load, not seconds, so
    // a stalled machine does not fail it.
    slow.set_faults(SLOW, scylla_testbed::Faults::default())
        .await
        .unwrap();
    let sped_up = Instant::now();
    let mut recovered = None;
    for _ in 0..20 {
        let (_, served) =
            served_during(&slow, paced(&slow_sessions, Duration::from_millis(500))).await;
        let total: u64 = served.iter().sum();
        if served[SLOW] * 5 >= total {
            recovered = Some(sped_up.elapsed());
            break;
        }
    }
    eprintln!("the sped-up node had a fifth of the requests or more after {recovered:?}");
    assert!(
        recovered.is_some(),
        "the sped-up node did not get its share back within 20 rounds"
    );
}
