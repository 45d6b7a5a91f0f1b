//! The model against the pool it models: one pool of one node with 4
//! shards, through a cold start and a restart of the node, once on real
//! sockets (the test cluster, the driver's `NodePool`) and once in the model.
//! Both append their refill decisions to a `DecisionLog`
//! (`pool::plan::RefillPlan::with_log`); the sequences must agree, as must
//! the connections the node accepted. A change to what a round opens, how it
//! ends or what follows it, made in the pool or in the model alone, shows
//! here.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use scylla_driver::metrics::Metrics;
use scylla_driver::pool::plan::{Decision, DecisionLog, Next, Round};
use scylla_driver::pool::{NodePool, PoolConfig};
use scylla_testbed::TestCluster;

use crate::model::{self, Params, Policy};

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
/// the node accepted (regular + shard-aware), for each phase.
async fn on_sockets(p: &Params) -> [(Vec<Decision>, u64); 2] {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(SHARDS as u16)
        .start()
        .await
        .unwrap();
    let accepted = |c: &TestCluster| {
        let s = c.node_stats(0).unwrap().node;
        s.accepted_regular + s.accepted_shard_aware
    };
    let log = new_log();
    let mut config = PoolConfig::default();
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
    pool.shutdown();
    [cold, restart]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_decides_as_the_pool_does() {
    let log = new_log();
    let mut p = Params::new(1, 1, SHARDS, Policy::Ours);
    p.decision_log = Some(log.clone());
    let [cold, restart] = on_sockets(&p).await;

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
    // What they agree on: the first connection, then the other shards at
    // once; after the outage, the first connection, then the others paced
    // (the pool has seen handshakes: no spread window).
    let expected = [
        (Round::Progress, true, 0, Duration::ZERO, "now"),
        (Round::Complete, false, SHARDS - 1, Duration::ZERO, "idle"),
    ];
    let got: Vec<_> = steps(model_cold)
        .iter()
        .map(|s| (s.round, s.first, s.opens, s.window, s.next))
        .collect();
    assert_eq!(got, expected);
    let got: Vec<_> = steps(model_restart)
        .iter()
        .map(|s| (s.round, s.first, s.opens, s.window, s.next))
        .collect();
    assert_eq!(
        got,
        [
            (Round::Failed, false, 0, Duration::ZERO, "backoff"),
            (Round::Progress, true, 0, Duration::ZERO, "now"),
            (Round::Complete, false, SHARDS - 1, Duration::ZERO, "idle"),
        ]
    );
}
