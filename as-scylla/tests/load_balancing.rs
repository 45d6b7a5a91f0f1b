//! A load-balancing policy written as programs for the official `scylla` 1.x
//! crate write one (`pick`, `fallback`, the replica locator, shards from the
//! node's sharder), run by sessions against the in-process test cluster:
//! the requests go where the policy says, the fallback is asked only when
//! the picked target cannot take the request, and the policy hears of each
//! attempt.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::cluster::{ClusterState, NodeRef};
use scylla::errors::RequestAttemptError;
use scylla::policies::load_balancing::{
    DefaultPolicy, FallbackPlan, LoadBalancingPolicy, RoutingInfo,
};
use scylla::routing::Shard;
use scylla_testbed::TestCluster;
use uuid::Uuid;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What the policy was asked and told.
#[derive(Debug, Default)]
struct Calls {
    picks: AtomicUsize,
    fallbacks: AtomicUsize,
    successes: AtomicUsize,
    failures: AtomicUsize,
}

/// Only the nodes of one datacenter, each on a shard chosen from its
/// sharder (the first node first, unless told to pick none).
#[derive(Debug)]
struct FavoriteDatacenter {
    datacenter: String,
    pick_none: bool,
    calls: Arc<Calls>,
}

fn on_last_shard(node: NodeRef<'_>) -> (NodeRef<'_>, Option<Shard>) {
    let shards = node.sharder().map_or(1, |s| s.nr_shards.get());
    (node, Some(Shard::from(shards - 1)))
}

impl LoadBalancingPolicy for FavoriteDatacenter {
    fn pick<'a>(
        &'a self,
        info: &'a RoutingInfo,
        cluster: &'a ClusterState,
    ) -> Option<(NodeRef<'a>, Option<Shard>)> {
        self.calls.picks.fetch_add(1, Ordering::SeqCst);
        if self.pick_none {
            return None;
        }
        self.nodes(info, cluster).next()
    }

    fn fallback<'a>(
        &'a self,
        info: &'a RoutingInfo,
        cluster: &'a ClusterState,
    ) -> FallbackPlan<'a> {
        self.calls.fallbacks.fetch_add(1, Ordering::SeqCst);
        self.nodes(info, cluster)
    }

    fn on_request_success(&self, _: &RoutingInfo, _: Duration, node: NodeRef<'_>) {
        assert_eq!(node.datacenter.as_deref(), Some(self.datacenter.as_str()));
        self.calls.successes.fetch_add(1, Ordering::SeqCst);
    }

    fn on_request_failure(
        &self,
        _: &RoutingInfo,
        _: Duration,
        _: NodeRef<'_>,
        _: &RequestAttemptError,
    ) {
        self.calls.failures.fetch_add(1, Ordering::SeqCst);
    }

    fn name(&self) -> String {
        "FavoriteDatacenter".to_string()
    }
}

impl FavoriteDatacenter {
    fn nodes<'a>(&'a self, _: &'a RoutingInfo, cluster: &'a ClusterState) -> FallbackPlan<'a> {
        match cluster
            .replica_locator()
            .unique_nodes_in_datacenter_ring(&self.datacenter)
        {
            Some(nodes) => Box::new(nodes.iter().map(on_last_shard)),
            None => Box::new(std::iter::empty()),
        }
    }
}

/// Four nodes of two shards: 0 and 1 in dc1, 2 and 3 in dc2.
async fn two_datacenters() -> TestCluster {
    TestCluster::builder()
        .nodes(4)
        .shards(2)
        .node_location(0, "dc1", "r1")
        .node_location(1, "dc1", "r1")
        .node_location(2, "dc2", "r1")
        .node_location(3, "dc2", "r1")
        .start()
        .await
        .unwrap()
}

async fn session_with(
    cluster: &TestCluster,
    policy: Arc<dyn LoadBalancingPolicy>,
) -> Result<Session, Error> {
    let profile = ExecutionProfile::builder()
        .load_balancing_policy(policy)
        .build();
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .default_execution_profile_handle(profile.into_handle())
        .build()
        .await?;
    Ok(session)
}

/// Waits (bounded) until every node's sharding is known to the session.
async fn sharders_known(session: &Session) -> Arc<ClusterState> {
    for _ in 0..200 {
        let state = session.get_cluster_state();
        if state.get_nodes_info().iter().all(|n| n.sharder().is_some()) {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    session.get_cluster_state()
}

/// The coordinator's datacenter and host id, as the coordinator says.
async fn coordinator(session: &Session) -> Result<(String, Uuid), Error> {
    let rows = session
        .query_unpaged("SELECT data_center, host_id FROM system.local", &[])
        .await?
        .into_rows_result()?;
    Ok(rows.single_row::<(String, Uuid)>()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_go_where_the_policy_says_and_it_hears_of_each() -> Result<(), Error> {
    let cluster = two_datacenters().await;
    let calls = Arc::new(Calls::default());
    let policy = Arc::new(FavoriteDatacenter {
        datacenter: "dc2".to_string(),
        pick_none: false,
        calls: calls.clone(),
    });
    let session = session_with(&cluster, policy.clone()).await?;
    let state = sharders_known(&session).await;

    // The whole plan, asked for as the official example asks: both nodes of
    // dc2, each with its last shard.
    let planned: Vec<_> = policy
        .fallback(&RoutingInfo::default(), &state)
        .map(|(node, shard)| (node.datacenter.clone(), shard))
        .collect();
    assert_eq!(
        planned,
        vec![(Some("dc2".to_string()), Some(1)); 2],
        "{planned:?}"
    );
    let dc2: Vec<Uuid> = cluster.nodes()[2..].iter().map(|n| n.host_id).collect();

    let before = (
        calls.picks.load(Ordering::SeqCst),
        calls.fallbacks.load(Ordering::SeqCst),
    );
    for _ in 0..8 {
        let (dc, host) = coordinator(&session).await?;
        assert_eq!(dc, "dc2");
        // `pick` gives the first node of dc2 by host id, every time.
        assert_eq!(host, *dc2.iter().min().unwrap());
    }
    // Each request asked `pick` once and never needed the fallback.
    assert_eq!(calls.picks.load(Ordering::SeqCst) - before.0, 8);
    assert_eq!(calls.fallbacks.load(Ordering::SeqCst) - before.1, 0);
    assert_eq!(calls.successes.load(Ordering::SeqCst), 8);
    assert_eq!(calls.failures.load(Ordering::SeqCst), 0);

    // An error the node answers with is an attempt's failure.
    let err = session
        .query_unpaged("SELECT * FROM no_such_keyspace.no_such_table", &[])
        .await
        .expect_err("an unknown table");
    assert!(!err.to_string().is_empty());
    assert_eq!(calls.failures.load(Ordering::SeqCst), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_takes_over_when_the_picked_node_is_down() -> Result<(), Error> {
    let cluster = two_datacenters().await;
    let calls = Arc::new(Calls::default());
    let policy = Arc::new(FavoriteDatacenter {
        datacenter: "dc2".to_string(),
        pick_none: false,
        calls: calls.clone(),
    });
    let session = session_with(&cluster, policy).await?;
    sharders_known(&session).await;
    let first = cluster.nodes()[2..]
        .iter()
        .min_by_key(|n| n.host_id)
        .map(|n| n.index)
        .unwrap();
    let other = if first == 2 { 3 } else { 2 };
    cluster.stop_node(first).await?;
    // The picked node has no connection: the fallback's next node answers
    // (the fallback repeats the picked node first; it is skipped).
    let mut answered = None;
    for _ in 0..100 {
        match coordinator(&session).await {
            Ok(who) => {
                answered = Some(who);
                break;
            }
            // Until the session notices, an attempt may still break on the
            // stopped node's connection.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let (dc, host) = answered.expect("the request went nowhere");
    assert_eq!(dc, "dc2");
    assert_eq!(host, cluster.nodes()[other].host_id);
    assert!(calls.fallbacks.load(Ordering::SeqCst) >= 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_picks_nothing_runs_on_its_fallback() -> Result<(), Error> {
    let cluster = two_datacenters().await;
    let calls = Arc::new(Calls::default());
    let policy = Arc::new(FavoriteDatacenter {
        datacenter: "dc1".to_string(),
        pick_none: true,
        calls: calls.clone(),
    });
    let session = session_with(&cluster, policy).await?;
    let (dc, _) = coordinator(&session).await?;
    assert_eq!(dc, "dc1");
    assert_eq!(calls.picks.load(Ordering::SeqCst), 1);
    assert_eq!(calls.fallbacks.load(Ordering::SeqCst), 1);

    // A policy with no node to offer fails the request without an attempt.
    let empty = Arc::new(FavoriteDatacenter {
        datacenter: "no-such-dc".to_string(),
        pick_none: false,
        calls: Arc::new(Calls::default()),
    });
    let session = session_with(&cluster, empty).await?;
    let err = session
        .query_unpaged("SELECT data_center FROM system.local", &[])
        .await
        .expect_err("an empty plan");
    assert!(
        matches!(err, scylla::errors::ExecutionError::EmptyPlan),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_policy_gives_its_plan_to_callers() -> Result<(), Error> {
    let cluster = two_datacenters().await;
    let policy = DefaultPolicy::builder()
        .prefer_datacenter("dc2".to_string())
        .permit_dc_failover(true)
        .build();
    let session = session_with(&cluster, policy.clone()).await?;
    let state = sharders_known(&session).await;
    let plan: Vec<_> = policy
        .fallback(&RoutingInfo::default(), &state)
        .map(|(node, _)| node.datacenter.clone().unwrap())
        .collect();
    // Every node once, the preferred datacenter's first.
    assert_eq!(plan, ["dc2", "dc2", "dc1", "dc1"], "{plan:?}");
    let info = RoutingInfo::default();
    let picked = policy.pick(&info, &state).unwrap();
    assert_eq!(picked.0.datacenter.as_deref(), Some("dc2"));
    // Requests with it stay in dc2 too (routed by the session's own table).
    assert_eq!(coordinator(&session).await?.0, "dc2");
    Ok(())
}
