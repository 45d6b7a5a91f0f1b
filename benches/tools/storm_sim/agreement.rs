//! The model against the pool it models: one pool of one node with 4
//! shards, through a cold start and a restart of the node, once on real
//! sockets (the test cluster, the driver's `NodePool`) and once in the model.
//! Both append their refill decisions to a `DecisionLog`
//! (`pool::plan::RefillPlan::with_log`); the sequences must agree, as must
//! the connections the node accepted. A change to what a round opens, how it
//! ends or what follows it, made in the pool or in the model alone, shows
//! here. The second scenario puts a NAT that shifts source ports between
//! them: the pool learns that the shard-aware port misleads, and covers the
//! last shard through the regular port.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use scylla_driver::metrics::Metrics;
use scylla_driver::pool::nat::FallbackReason;
use scylla_driver::pool::plan::{Decision, DecisionLog, Next, Round};
use scylla_driver::pool::{NodePool, PoolConfig};
use scylla_testbed::{Faults, NatMode, TestCluster};

use crate::model::{self, Nat, Params, Policy};

const SHARDS: usize = 4;
const FULL: Duration = Duration::from_secs(20);

/// What the comparison keeps of a decision: the round's outcome, whether it
/// tried the pool's first connection, the opens it ordered and over which
/// window, and the kind of wait after it (its length is a random draw).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    round: Round,
    first: bool,
    opens: usize,
    window: Duration,
    next: &'static str,
}

/// The decisions that do not depend on the clock, in order. Rounds that
/// found nothing to do (a wake of a full pool) are left out, and the failed
/// rounds of an outage count as one: how many of them fit in it, and how
/// many of the pool's connections each saw closed, depend on when each
/// close is noticed.
fn steps(log: &[Decision]) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    for d in log {
        if d.round == Round::Complete && d.opens == 0 && !d.first {
            continue;
        }
        let step = if d.round == Round::Failed {
            Step {
                round: Round::Failed,
                first: false,
                opens: 0,
                window: Duration::ZERO,
                next: "backoff",
            }
        } else {
            Step {
                round: d.round,
                first: d.first,
                opens: d.opens,
                window: d.window,
                next: match d.next {
                    Next::Now => "now",
                    Next::Pause(_) => "pause",
                    Next::Idle => "idle",
                    Next::Backoff(_) => "backoff",
                },
            }
        };
        if out.last() != Some(&step) {
            out.push(step);
        }
    }
    out
}

fn new_log() -> DecisionLog {
    Arc::new(Mutex::new(Vec::new()))
}

fn taken(log: &DecisionLog) -> Vec<Decision> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// The scenario on real sockets: returns the decisions and the connections
/// the node accepted (regular + shard-aware), for each phase, and the
/// shard-aware port's fallback at the end.
async fn on_sockets(p: &Params) -> ([(Vec<Decision>, u64); 2], Option<FallbackReason>) {
    let mut faults = Faults::none();
    if let Some(nat) = p.nat {
        faults = faults.with_nat(match nat {
            Nat::Random => NatMode::Random,
            Nat::Offset(k) => NatMode::Offset(k),
        });
    }
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(SHARDS as u16)
        .faults(0, faults)
        .start()
        .await
        .unwrap();
    let accepted = |c: &TestCluster| {
        let s = c.node_stats(0).unwrap().node;
        s.accepted_regular + s.accepted_shard_aware
    };
    let log = new_log();
    // Within a session's opens, as the model's pools are.
    let mut config = PoolConfig::default().with_session_opens();
    config.decision_log = Some(log.clone());
    let pool = NodePool::new(cluster.cql_addrs()[0], config, Arc::new(Metrics::default()));
    assert!(pool.wait_until_full(FULL).await);
    // The pool goes idle: its last decision is taken.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cold = (taken(&log), accepted(&cluster));

    cluster.stop_node(0).await.unwrap();
    let stopped = tokio::time::Instant::now();
    assert!(pool.wait_for(FULL, |s| s.is_empty()).await);
    tokio::time::sleep_until(stopped + p.down).await;
    cluster.start_node(0).await.unwrap();
    tokio::time::sleep(p.up_event_after).await;
    pool.node_up_hint();
    assert!(pool.wait_until_full(FULL).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // (A started node's stats start from zero.)
    let restart = (taken(&log), accepted(&cluster));
    let fallback = pool.fallback();
    pool.shutdown();
    ([cold, restart], fallback)
}

/// One phase's decisions, as compared.
type Steps = Vec<(Round, bool, usize, Duration, &'static str)>;

/// Runs the scenario on sockets and in the model, checks that their
/// decisions and accepted connections agree, and returns the decisions of
/// both phases and the pool's fallback at the end (on sockets).
async fn agree(mut p: Params) -> ([Steps; 2], Option<FallbackReason>) {
    let log = new_log();
    p.decision_log = Some(log.clone());
    let ([cold, restart], fallback) = on_sockets(&p).await;

    // The model logs both phases in one run: split at the first failure.
    let r = model::run(p.clone());
    let all = taken(&log);
    let split = all
        .iter()
        .position(|d| d.round == Round::Failed)
        .expect("the model's restart fails rounds while the node is down");
    let (model_cold, model_restart) = all.split_at(split);

    assert_eq!(
        steps(model_cold),
        steps(&cold.0),
        "cold start: model, then sockets"
    );
    assert_eq!(
        steps(model_restart),
        steps(&restart.0),
        "restart: model, then sockets"
    );
    assert_eq!((r.cold.accepted, r.restart.accepted), (cold.1, restart.1));
    let flat = |log: &[Decision]| {
        steps(log)
            .iter()
            .map(|s| (s.round, s.first, s.opens, s.window, s.next))
            .collect::<Vec<_>>()
    };
    ([flat(model_cold), flat(model_restart)], fallback)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_decides_as_the_pool_does() {
    let ([cold, restart], fallback) = agree(Params::new(1, 1, SHARDS, Policy::Ours)).await;
    assert_eq!(fallback, None);
    // What they agree on: the first connection, then the other shards at
    // once; after the outage, the first connection, then the others paced
    // (the pool has seen handshakes: no spread window).
    assert_eq!(
        cold,
        [
            (Round::Progress, true, 0, Duration::ZERO, "now"),
            (Round::Complete, false, SHARDS - 1, Duration::ZERO, "idle"),
        ]
    );
    assert_eq!(
        restart,
        [
            (Round::Failed, false, 0, Duration::ZERO, "backoff"),
            (Round::Progress, true, 0, Duration::ZERO, "now"),
            (Round::Complete, false, SHARDS - 1, Duration::ZERO, "idle"),
        ]
    );
}

/// Behind a NAT that shifts every source port by one: the other shards'
/// connections all land one shard further (three wrong landings in a row:
/// the pool stops trusting the shard-aware port), and the one shard left
/// is covered by a background attempt through the regular port, whose
/// least loaded shard it is; the surplus connection is retired. After the
/// restart the port is still distrusted: the regular port fills the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_decides_as_the_pool_does_behind_a_nat() {
    let mut p = Params::new(1, 1, SHARDS, Policy::Ours);
    p.nat = Some(Nat::Offset(1));
    let ([cold, restart], fallback) = agree(p).await;
    assert_eq!(
        cold,
        [
            (Round::Progress, true, 0, Duration::ZERO, "now"),
            (Round::Progress, false, SHARDS - 1, Duration::ZERO, "now"),
            (Round::Complete, false, 1, Duration::ZERO, "idle"),
        ]
    );
    assert_eq!(
        restart,
        [
            (Round::Failed, false, 0, Duration::ZERO, "backoff"),
            (Round::Progress, true, 0, Duration::ZERO, "now"),
            (Round::Complete, false, SHARDS - 1, Duration::ZERO, "idle"),
        ]
    );
    assert_eq!(fallback, Some(FallbackReason::ShardMismatch));
}
