//! The official `scylla` crate's cluster state, load-balancing and
//! speculative-execution APIs, against the test cluster:
//!
//! - `Session::get_cluster_state()`: its nodes are the cluster's,
//!   `get_token_endpoints` names the replicas (and shards) the driver's own
//!   view names, for tokens that `SELECT token(pk)` confirms, and
//!   `compute_token` agrees with the prepared statement's token;
//! - `SingleTargetLoadBalancingPolicy`: every request (statement, prepared
//!   statement, batch) reaches the named node (by `Node`, host id or
//!   address), on the named shard; an unknown node fails the request;
//! - where a policy comes from: statement over profile over session default;
//! - `DefaultPolicy`: preferred datacenter (and rack), datacenter failover,
//!   token awareness, replica shuffling;
//! - `PercentileSpeculativeExecutionPolicy`: speculation after the session's
//!   latency percentile, around slow nodes.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;
use common::create_keyspace;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_driver::client::execution_profile::ExecutionProfile;
use scylla_driver::cluster::{ClusterStateTokenError, Node, NodeAddr};
use scylla_driver::policies::load_balancing::{
    DefaultPolicy, LoadBalancingPolicy, NodeIdentifier, SingleTargetLoadBalancingPolicy,
};
use scylla_driver::policies::speculative_execution::PercentileSpeculativeExecutionPolicy;
use scylla_driver::routing::Token;
use scylla_driver::statement::Statement;
use scylla_driver::{Batch, BatchType, ExecutionError, Session, SessionBuilder};
use scylla_testbed::{Faults, TestCluster, TestClusterBuilder};
use uuid::Uuid;

async fn start(b: TestClusterBuilder) -> (TestCluster, Session) {
    let cluster = b.start().await.unwrap();
    let session = session_with(&cluster, |b| b).await;
    (cluster, session)
}

async fn session_with(
    cluster: &TestCluster,
    configure: impl FnOnce(SessionBuilder) -> SessionBuilder,
) -> Session {
    let b = SessionBuilder::new().known_node(cluster.cql_addrs()[0].to_string());
    let s = configure(b).build().await.unwrap();
    assert!(s.wait_for_all_shards(Duration::from_secs(20)).await);
    s
}

const LOCAL: &str = "SELECT host_id FROM system.local WHERE key = 'local'";

/// Runs `stmt` and returns the host id the answering node reports and the
/// node the driver says answered.
async fn ask(session: &Session, stmt: &Statement) -> (Uuid, SocketAddr) {
    let result = session.query_unpaged(stmt.clone(), ()).await.unwrap();
    let coordinator = result.coordinator.unwrap();
    let (host,) = result
        .into_rows_result()
        .unwrap()
        .single_row::<(Uuid,)>()
        .unwrap();
    (host, coordinator)
}

fn single(target: NodeIdentifier, shard: Option<u16>) -> Arc<dyn LoadBalancingPolicy> {
    SingleTargetLoadBalancingPolicy::new(target, shard)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_state_names_nodes_and_token_endpoints() {
    let (cluster, session) = start(TestCluster::builder().nodes(3).shards(2).vnodes(8)).await;
    create_keyspace(&session, "ct", 2).await;
    session
        .query_unpaged("CREATE TABLE ct.t (pk bigint PRIMARY KEY)", ())
        .await
        .unwrap();
    // The tables' columns (for compute_token) as of now.
    session.refresh_metadata().await.unwrap();
    let state = session.get_cluster_state();

    let nodes = state.get_nodes_info();
    let hosts: BTreeSet<Uuid> = nodes.iter().map(|n| n.host_id).collect();
    let want: BTreeSet<Uuid> = cluster.nodes().iter().map(|n| n.host_id).collect();
    assert_eq!(hosts, want);
    let addrs: BTreeSet<SocketAddr> = nodes.iter().map(|n| n.address.into_inner()).collect();
    assert_eq!(addrs, cluster.cql_addrs().into_iter().collect());
    for n in nodes {
        assert_eq!(n.datacenter.as_deref(), Some("datacenter1"), "{n:?}");
        let info = &cluster.nodes()[cluster
            .nodes()
            .iter()
            .position(|c| c.host_id == n.host_id)
            .unwrap()];
        assert_eq!(n.address.ip(), info.address);
        assert_eq!(n.address.port(), info.port);
    }

    let insert = session
        .prepare("INSERT INTO ct.t (pk) VALUES (?)")
        .await
        .unwrap();
    let view = session.cluster();
    for pk in 0..40_i64 {
        session.execute_unpaged(&insert, (pk,)).await.unwrap();
        let t = insert.calculate_token(&(pk,)).unwrap().unwrap().value();
        let (server,) = session
            .query_unpaged("SELECT token(pk) FROM ct.t WHERE pk = ?", (pk,))
            .await
            .unwrap()
            .into_rows_result()
            .unwrap()
            .single_row::<(i64,)>()
            .unwrap();
        assert_eq!(t, server, "token of {pk}");
        let computed = state.compute_token("ct", "t", &(pk,)).unwrap();
        assert_eq!(computed.value(), t, "compute_token of {pk}");
        let endpoints = state.get_token_endpoints("ct", "t", Token::new(t));
        let replicas = view.replicas("ct", "t", Token::new(t));
        assert_eq!(endpoints.len(), 2, "RF 2: {endpoints:?}");
        let got: Vec<(Uuid, u16)> = endpoints.iter().map(|(n, s)| (n.host_id, *s)).collect();
        let want: Vec<(Uuid, u16)> = replicas
            .iter()
            .map(|r| (r.host_id, r.shard.unwrap()))
            .collect();
        assert_eq!(got, want, "replicas of {pk}");
        let addrs: Vec<NodeAddr> = endpoints.iter().map(|(n, _)| n.address).collect();
        let want: Vec<SocketAddr> = replicas.iter().map(|r| r.address).collect();
        assert_eq!(
            addrs.into_iter().map(SocketAddr::from).collect::<Vec<_>>(),
            want
        );
    }
    assert!(state
        .get_token_endpoints("no_such_keyspace", "t", Token::new(0))
        .is_empty());
    // compute_token's failures.
    let err = state.compute_token("ct", "nope", &(1_i64,)).unwrap_err();
    assert!(
        matches!(err, ClusterStateTokenError::UnknownTable { .. }),
        "{err:?}"
    );
    let err = state.compute_token("ct", "t", &(1_i32,)).unwrap_err();
    assert!(
        matches!(err, ClusterStateTokenError::Serialization(_)),
        "{err:?}"
    );
    let err = state.compute_token("ct", "t", &(1_i64, 2_i64)).unwrap_err();
    assert!(
        matches!(err, ClusterStateTokenError::Serialization(_)),
        "{err:?}"
    );
    let err = state.compute_token("ct", "t", &(None::<i64>,)).unwrap_err();
    assert!(matches!(err, ClusterStateTokenError::NullKey), "{err:?}");
    // A composite partition key.
    session
        .query_unpaged(
            "CREATE TABLE ct.c (a int, b text, c int, PRIMARY KEY ((a, b), c))",
            (),
        )
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO ct.c (a, b, c) VALUES (?, ?, ?)")
        .await
        .unwrap();
    session.refresh_metadata().await.unwrap();
    let state = session.get_cluster_state();
    for a in 0..10_i32 {
        let want = insert.calculate_token(&(a, "x", 0_i32)).unwrap().unwrap();
        assert_eq!(state.compute_token("ct", "c", &(a, "x")).unwrap(), want);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_target_reaches_the_named_node_and_shard() {
    let (cluster, session) = start(TestCluster::builder().nodes(3).shards(4)).await;
    let state = session.get_cluster_state();
    let nodes: Vec<Arc<Node>> = state.get_nodes_info().to_vec();
    assert_eq!(nodes.len(), 3);
    for node in &nodes {
        for ident in [
            NodeIdentifier::Node(Arc::clone(node)),
            NodeIdentifier::HostId(node.host_id),
            NodeIdentifier::NodeAddress(node.address.into_inner()),
        ] {
            let mut stmt = Statement::new(LOCAL);
            stmt.set_load_balancing_policy(Some(single(ident.clone(), None)));
            for _ in 0..6 {
                let (host, coordinator) = ask(&session, &stmt).await;
                assert_eq!(host, node.host_id, "{ident:?}");
                assert_eq!(coordinator, node.address.into_inner(), "{ident:?}");
            }
        }
    }

    // The shard: every request lands on it.
    let node = &nodes[1];
    let index = cluster
        .nodes()
        .iter()
        .position(|n| n.host_id == node.host_id)
        .unwrap();
    let served = |shard: usize| cluster.node_stats(index).unwrap().shards[shard].requests_served;
    let before = served(3);
    let mut prepared = session.prepare(LOCAL).await.unwrap();
    prepared.set_load_balancing_policy(Some(single(NodeIdentifier::HostId(node.host_id), Some(3))));
    for _ in 0..10 {
        session.execute_unpaged(&prepared, ()).await.unwrap();
    }
    assert!(
        served(3) - before >= 10,
        "shard 3 served {}",
        served(3) - before
    );

    // A batch, too.
    create_keyspace(&session, "b", 3).await;
    session
        .query_unpaged("CREATE TABLE b.t (k int PRIMARY KEY)", ())
        .await
        .unwrap();
    let mut batch = Batch::new(BatchType::Unlogged);
    batch.append_statement("INSERT INTO b.t (k) VALUES (1)");
    batch.append_statement("INSERT INTO b.t (k) VALUES (2)");
    for node in &nodes {
        batch.set_load_balancing_policy(Some(single(NodeIdentifier::HostId(node.host_id), None)));
        for _ in 0..4 {
            let r = session.batch(&batch, ((), ())).await.unwrap();
            assert_eq!(r.coordinator, Some(node.address.into_inner()));
        }
    }

    // A node the session does not know: no attempt, an error.
    let mut stmt = Statement::new(LOCAL);
    stmt.set_load_balancing_policy(Some(single(NodeIdentifier::HostId(Uuid::nil()), None)));
    let err = session.query_unpaged(stmt, ()).await.unwrap_err();
    assert!(matches!(err, ExecutionError::EmptyPlan), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_policy_over_profile_over_session_default() {
    let cluster = TestCluster::builder()
        .nodes(3)
        .shards(1)
        .start()
        .await
        .unwrap();
    let hosts: Vec<Uuid> = cluster.nodes().iter().map(|n| n.host_id).collect();
    let to = |i: usize| single(NodeIdentifier::HostId(hosts[i]), None);
    let default = ExecutionProfile::builder()
        .load_balancing_policy(to(0))
        .build()
        .into_handle();
    let session = session_with(&cluster, |b| b.default_execution_profile_handle(default)).await;

    let plain = Statement::new(LOCAL);
    for _ in 0..5 {
        assert_eq!(ask(&session, &plain).await.0, hosts[0]);
    }
    let profile = ExecutionProfile::builder()
        .load_balancing_policy(to(1))
        .build()
        .into_handle();
    let mut with_profile = Statement::new(LOCAL);
    with_profile.set_execution_profile_handle(Some(profile));
    for _ in 0..5 {
        assert_eq!(ask(&session, &with_profile).await.0, hosts[1]);
    }
    let mut own = with_profile.clone();
    own.set_load_balancing_policy(Some(to(2)));
    for _ in 0..5 {
        assert_eq!(ask(&session, &own).await.0, hosts[2]);
    }
    own.set_load_balancing_policy(None);
    assert_eq!(ask(&session, &own).await.0, hosts[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_policy_prefers_its_datacenter_and_rack() {
    let (cluster, session) = start(
        TestCluster::builder()
            .nodes(4)
            .shards(1)
            .node_location(0, "dc1", "r1")
            .node_location(1, "dc1", "r1")
            .node_location(2, "dc2", "r1")
            .node_location(3, "dc2", "r2"),
    )
    .await;
    let host = |i: usize| cluster.nodes()[i].host_id;
    let with = |p: Arc<dyn LoadBalancingPolicy>| {
        let mut s = Statement::new(LOCAL);
        s.set_load_balancing_policy(Some(p));
        s
    };

    let dc2 = with(
        DefaultPolicy::builder()
            .prefer_datacenter("dc2".into())
            .build(),
    );
    let mut seen = BTreeSet::new();
    for _ in 0..30 {
        seen.insert(ask(&session, &dc2).await.0);
    }
    assert_eq!(seen, BTreeSet::from([host(2), host(3)]));

    let rack = with(
        DefaultPolicy::builder()
            .prefer_datacenter_and_rack("dc2".into(), "r2".into())
            .build(),
    );
    for _ in 0..10 {
        assert_eq!(ask(&session, &rack).await.0, host(3));
    }

    // Without failover, a datacenter with no node fails the request; with
    // it, any node answers.
    let nowhere = with(
        DefaultPolicy::builder()
            .prefer_datacenter("dc9".into())
            .build(),
    );
    let err = session.query_unpaged(nowhere, ()).await.unwrap_err();
    assert!(matches!(err, ExecutionError::EmptyPlan), "{err:?}");
    let failover = with(
        DefaultPolicy::builder()
            .prefer_datacenter("dc9".into())
            .permit_dc_failover(true)
            .build(),
    );
    ask(&session, &failover).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_policy_token_awareness_and_shuffling() {
    let (_cluster, session) = start(TestCluster::builder().nodes(3).shards(1).vnodes(8)).await;
    create_keyspace(&session, "one", 1).await;
    create_keyspace(&session, "all", 3).await;
    for ks in ["one", "all"] {
        session
            .query_unpaged(format!("CREATE TABLE {ks}.t (k bigint PRIMARY KEY)"), ())
            .await
            .unwrap();
    }
    let state = session.get_cluster_state();
    let read = |ks: &str, p: Arc<dyn LoadBalancingPolicy>| {
        let ks = ks.to_owned();
        let session = &session;
        async move {
            let mut prepared = session
                .prepare(format!("SELECT k FROM {ks}.t WHERE k = ?"))
                .await
                .unwrap();
            prepared.set_load_balancing_policy(Some(p));
            prepared
        }
    };

    // Token-aware: the one replica coordinates every key; not token-aware:
    // some keys go elsewhere.
    let aware = read("one", DefaultPolicy::builder().token_aware(true).build()).await;
    let blind = read("one", DefaultPolicy::builder().token_aware(false).build()).await;
    let mut elsewhere = 0;
    for k in 0..60_i64 {
        let t = aware.calculate_token(&(k,)).unwrap().unwrap();
        let replica = state.get_token_endpoints("one", "t", t)[0]
            .0
            .address
            .into_inner();
        let r = session.execute_unpaged(&aware, (k,)).await.unwrap();
        assert_eq!(r.coordinator, Some(replica), "key {k}");
        let r = session.execute_unpaged(&blind, (k,)).await.unwrap();
        if r.coordinator != Some(replica) {
            elsewhere += 1;
        }
    }
    assert!(
        elsewhere > 0,
        "token-unaware requests all went to the replica"
    );

    // RF 3: shuffled replicas take turns; unshuffled, one key always goes
    // to the same (first) replica.
    let fixed = read(
        "all",
        DefaultPolicy::builder()
            .enable_shuffling_replicas(false)
            .build(),
    )
    .await;
    let shuffled = read("all", DefaultPolicy::builder().build()).await;
    let (mut fixed_seen, mut shuffled_seen) = (BTreeSet::new(), BTreeSet::new());
    for _ in 0..30 {
        let r = session.execute_unpaged(&fixed, (7_i64,)).await.unwrap();
        fixed_seen.insert(r.coordinator.unwrap());
        let r = session.execute_unpaged(&shuffled, (7_i64,)).await.unwrap();
        shuffled_seen.insert(r.coordinator.unwrap());
    }
    assert_eq!(fixed_seen.len(), 1, "{fixed_seen:?}");
    assert!(shuffled_seen.len() > 1, "{shuffled_seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn percentile_speculation_starts_after_the_sessions_latency() {
    let cluster = TestCluster::builder()
        .nodes(3)
        .shards(1)
        .start()
        .await
        .unwrap();
    let profile = ExecutionProfile::builder()
        .speculative_execution_policy(Some(Arc::new(PercentileSpeculativeExecutionPolicy {
            max_retry_count: 2,
            percentile: 50.0,
        })))
        .build()
        .into_handle();
    let session = session_with(&cluster, |b| b.default_execution_profile_handle(profile)).await;
    create_keyspace(&session, "s", 3).await;
    session
        .query_unpaged("CREATE TABLE s.t (k int PRIMARY KEY, v int)", ())
        .await
        .unwrap();
    let read = session
        .prepare(Statement::new("SELECT v FROM s.t WHERE k = ?").with_idempotent(true))
        .await
        .unwrap();
    // Fast requests: the session's median latency is well under 100 ms.
    for k in 0..100 {
        session.execute_unpaged(&read, (k,)).await.unwrap();
    }
    let p50 = session.metrics().latency.quantile_micros(0.5).unwrap();
    assert!(p50 < 50_000, "median {p50} us");
    let slow = Duration::from_secs(5);
    for i in [1, 2] {
        cluster
            .set_faults(i, Faults::none().with_latency(slow))
            .await
            .unwrap();
    }
    let before = session.metrics().snapshot().speculative_attempts;
    let mut took = Vec::new();
    for k in 0..20 {
        let started = Instant::now();
        session.execute_unpaged(&read, (k,)).await.unwrap();
        took.push(started.elapsed());
    }
    took.sort();
    assert!(session.metrics().snapshot().speculative_attempts > before);
    // Two thirds of first attempts reach a slow node: the speculative one
    // starts after the median, not after the slow answer (5 s; bounded at
    // half of it, room for a loaded machine), nor after the 100 ms used
    // before any latency is known (the median of the 20, which a few
    // stalled requests do not move).
    assert!(took[took.len() - 1] < slow / 2, "{took:?}");
    assert!(
        took[took.len() / 2] < Duration::from_millis(100),
        "{took:?}"
    );
}
