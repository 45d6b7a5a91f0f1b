//! History listeners (`observability::history`) against the test cluster:
//! what a statement's listener is told of its requests, their attempts,
//! retries and speculative fibers; and the coordinator of a result in the
//! official crate's shape (`QueryResult::request_coordinator`).

use crate::common;
use common::{cluster_and_session, create_keyspace};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use scylla_driver::error::RequestAttemptError;
use scylla_driver::frame::response::DbError;
use scylla_driver::observability::history::{
    AttemptResult, HistoryCollector, RequestHistory, RequestHistoryResult, StructuredHistory,
};
use scylla_driver::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla_driver::policy::retry::RetryDecision;
use scylla_driver::policy::speculative::SpeculativeExecution;
use scylla_driver::statement::{Batch, BatchType, Statement};
use scylla_driver::{PreparedStatement, Session};
use scylla_testbed::{Faults, TestCluster};

/// A table in a keyspace of replication factor 1 (every key has one
/// replica, which token-aware routing tries first), with rows 0..10, and
/// an idempotent read of one row by key.
async fn table_with_one_replica(session: &Session) -> PreparedStatement {
    create_keyspace(session, "h", 1).await;
    session
        .query_unpaged("CREATE TABLE h.t (k int PRIMARY KEY, v int)", ())
        .await
        .unwrap();
    for k in 0..10 {
        session
            .query_unpaged("INSERT INTO h.t (k, v) VALUES (?, ?)", (k, k * 10))
            .await
            .unwrap();
    }
    session
        .prepare(Statement::new("SELECT v FROM h.t WHERE k = ?").with_idempotent(true))
        .await
        .unwrap()
}

/// The index in `cluster` of the node at `addr`.
fn node_index(cluster: &TestCluster, addr: SocketAddr) -> usize {
    cluster
        .cql_addrs()
        .iter()
        .position(|a| *a == addr)
        .unwrap_or_else(|| panic!("{addr} is not a node of the cluster"))
}

/// The one request of `history`, which succeeded.
fn only_successful(history: &StructuredHistory) -> &RequestHistory {
    assert_eq!(history.requests.len(), 1, "{history}");
    let request = &history.requests[0];
    assert!(
        matches!(request.result, Some(RequestHistoryResult::Success(_))),
        "{history}"
    );
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_shows_as_a_failed_attempt_then_one_on_another_node() {
    let (cluster, session) = cluster_and_session(3, 2, |b| b).await;
    let mut read = table_with_one_replica(&session).await;
    let collector = Arc::new(HistoryCollector::new());
    read.set_history_listener(collector.clone());

    // Without faults: one attempt, on the key's replica.
    let rows = session.execute_unpaged(&read, (7,)).await.unwrap();
    assert_eq!(rows.single_row::<(i32,)>().unwrap(), (70,));
    let history = collector.take_structured_history();
    let request = only_successful(&history);
    assert!(request.speculative_fibers.is_empty());
    let attempts = &request.non_speculative_fiber.attempts;
    assert_eq!(attempts.len(), 1, "{history}");
    assert!(matches!(
        attempts[0].result,
        Some(AttemptResult::Success(_))
    ));
    let replica = attempts[0].node_addr;
    assert_eq!(rows.coordinator, Some(replica));

    // The replica answers its next statement with OVERLOADED: the
    // idempotent read backs off and goes to another node.
    cluster
        .set_faults(
            node_index(&cluster, replica),
            Faults::none().with_overloaded(1),
        )
        .await
        .unwrap();
    let rows = session.execute_unpaged(&read, (7,)).await.unwrap();
    assert_eq!(rows.single_row::<(i32,)>().unwrap(), (70,));
    let history = collector.take_structured_history();
    let request = only_successful(&history);
    let attempts = &request.non_speculative_fiber.attempts;
    assert_eq!(attempts.len(), 2, "{history}");
    assert_eq!(attempts[0].node_addr, replica);
    match &attempts[0].result {
        Some(AttemptResult::Error(at, RequestAttemptError::DbError(error, _), decision)) => {
            assert_eq!(*error, DbError::Overloaded);
            assert!(
                matches!(decision, RetryDecision::RetryNextTargetAfter(None, _)),
                "{decision:?}"
            );
            assert!(*at >= attempts[0].send_time);
        }
        other => panic!("first attempt: {other:?}\n{history}"),
    }
    assert_ne!(attempts[1].node_addr, replica);
    assert!(matches!(
        attempts[1].result,
        Some(AttemptResult::Success(_))
    ));
    assert!(attempts[1].send_time >= attempts[0].send_time);
    assert_eq!(rows.coordinator, Some(attempts[1].node_addr));
    let text = history.to_string();
    assert!(
        text.contains("retry decision: RetryNextTargetAfter"),
        "{text}"
    );
    assert!(
        text.contains(&format!("attempt 1 to {}", attempts[1].node_addr)),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_speculative_fiber_shows_beside_the_slow_first_attempt() {
    let (cluster, session) = cluster_and_session(3, 1, |b| {
        b.speculative_execution(SpeculativeExecution::new(2, Duration::from_millis(30)))
    })
    .await;
    let mut read = table_with_one_replica(&session).await;
    let collector = Arc::new(HistoryCollector::new());
    read.set_history_listener(collector.clone());
    session.execute_unpaged(&read, (3,)).await.unwrap();
    let history = collector.take_structured_history();
    let replica = only_successful(&history).non_speculative_fiber.attempts[0].node_addr;

    // The replica answers after 2 s: the speculative fiber started after
    // 30 ms answers first, from another node.
    cluster
        .set_faults(
            node_index(&cluster, replica),
            Faults::none().with_latency(Duration::from_secs(2)),
        )
        .await
        .unwrap();
    let rows = session.execute_unpaged(&read, (3,)).await.unwrap();
    assert_eq!(rows.single_row::<(i32,)>().unwrap(), (30,));
    let history = collector.take_structured_history();
    let request = only_successful(&history);
    let first = &request.non_speculative_fiber.attempts;
    assert_eq!(first.len(), 1, "{history}");
    assert_eq!(first[0].node_addr, replica);
    // Dropped when the speculative fiber answered: no result.
    assert_eq!(first[0].result, None, "{history}");
    assert_eq!(request.speculative_fibers.len(), 1, "{history}");
    let fiber = &request.speculative_fibers[0];
    assert!(fiber.start_time >= request.start_time + Duration::from_millis(25));
    assert_eq!(fiber.attempts.len(), 1, "{history}");
    assert_ne!(fiber.attempts[0].node_addr, replica);
    assert!(matches!(
        fiber.attempts[0].result,
        Some(AttemptResult::Success(_))
    ));
    assert_eq!(rows.coordinator, Some(fiber.attempts[0].node_addr));
    assert!(history.to_string().contains("speculative fiber 0"));
    assert!(session.metrics().snapshot().speculative_attempts > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_request_pages_and_batches_are_told() {
    let (_cluster, session) = cluster_and_session(1, 2, |b| b).await;
    create_keyspace(&session, "h", 1).await;
    session
        .query_unpaged("CREATE TABLE h.p (k int, c int, PRIMARY KEY (k, c))", ())
        .await
        .unwrap();
    let collector = Arc::new(HistoryCollector::new());

    // An error the retry policy does not retry: one attempt, `Fail`.
    let mut missing = Statement::new("SELECT * FROM h.missing");
    missing.set_history_listener(collector.clone());
    let err = session.query_unpaged(missing, ()).await.unwrap_err();
    let history = collector.take_structured_history();
    assert_eq!(history.requests.len(), 1, "{history}");
    let request = &history.requests[0];
    match &request.result {
        Some(RequestHistoryResult::Error(_, text)) => assert_eq!(*text, err.to_string()),
        other => panic!("{other:?}"),
    }
    let attempts = &request.non_speculative_fiber.attempts;
    assert_eq!(attempts.len(), 1, "{history}");
    assert!(
        matches!(
            attempts[0].result,
            Some(AttemptResult::Error(
                _,
                RequestAttemptError::DbError(..),
                RetryDecision::Fail
            ))
        ),
        "{history}"
    );

    // A batch is one request.
    let mut batch = Batch::new(BatchType::Unlogged);
    for c in 0..20 {
        batch.append(format!("INSERT INTO h.p (k, c) VALUES (1, {c})"));
    }
    batch.set_history_listener(collector.clone());
    session.batch(&batch, vec![(); 20]).await.unwrap();
    let history = collector.take_structured_history();
    assert_eq!(
        only_successful(&history)
            .non_speculative_fiber
            .attempts
            .len(),
        1
    );

    // A paged read: one request per page (20 rows, 8 per page: 3 pages).
    let mut paged = Statement::new("SELECT c FROM h.p WHERE k = 1");
    paged.set_page_size(8);
    paged.set_history_listener(collector.clone());
    let mut rows = session
        .query_iter(paged, ())
        .await
        .unwrap()
        .rows_stream::<(i32,)>()
        .unwrap();
    let mut n = 0;
    // Bounded: 20 rows, then the end.
    for _ in 0..100 {
        match rows.next().await {
            Some(row) => {
                row.unwrap();
                n += 1;
            }
            None => break,
        }
    }
    assert_eq!(n, 20);
    let history = collector.take_structured_history();
    assert_eq!(history.requests.len(), 3, "{history}");
    assert!(history
        .requests
        .iter()
        .all(|r| matches!(r.result, Some(RequestHistoryResult::Success(_)))));

    // The listener removed: nothing more is told.
    let mut quiet = Statement::new("SELECT c FROM h.p WHERE k = 1");
    quiet.set_history_listener(collector.clone());
    assert!(quiet.remove_history_listener().is_some());
    session.query_unpaged(quiet, ()).await.unwrap();
    assert!(collector.clone_collected().events().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_coordinator_is_the_node_that_answered() {
    // Each node in a datacenter and rack of its own, so that the recorded
    // location is told apart from the default's.
    let cluster = TestCluster::builder()
        .nodes(3)
        .shards(4)
        .node_location(0, "dc-a", "r0")
        .node_location(1, "dc-b", "r1")
        .node_location(2, "dc-b", "r2")
        .start()
        .await
        .unwrap();
    let session = scylla_driver::SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    create_keyspace(&session, "rc", 3).await;
    session
        .query_unpaged("CREATE TABLE rc.t (k int PRIMARY KEY)", ())
        .await
        .unwrap();
    let state = session.get_cluster_state();
    let mut local = session
        .prepare("SELECT host_id, rpc_address FROM system.local WHERE key = 'local'")
        .await
        .unwrap();
    let mut insert = session
        .prepare("INSERT INTO rc.t (k) VALUES (1)")
        .await
        .unwrap();
    let mut datacenters = std::collections::BTreeSet::new();
    for node in state.get_nodes_info() {
        for (target, shard) in [
            (NodeIdentifier::Node(Arc::clone(node)), None),
            (NodeIdentifier::HostId(node.host_id), Some(3)),
            (
                NodeIdentifier::NodeAddress(node.address.into_inner()),
                Some(1),
            ),
        ] {
            let policy = SingleTargetLoadBalancingPolicy::new(target, shard);
            local.set_load_balancing_policy(Some(policy.clone()));
            insert.set_load_balancing_policy(Some(policy));
            let rows = session
                .execute_unpaged(&local, ())
                .await
                .unwrap()
                .into_rows_result()
                .unwrap();
            let (host_id, ip) = rows.single_row::<(uuid::Uuid, std::net::IpAddr)>().unwrap();
            assert_eq!(host_id, node.host_id);
            // A result without rows names its coordinator the same way.
            let plain = session.execute_unpaged(&insert, ()).await.unwrap();
            assert!(!plain.is_rows());
            for coordinator in [rows.request_coordinator(), plain.request_coordinator()] {
                assert_eq!(coordinator.node().host_id, node.host_id);
                assert_eq!(coordinator.node().address, node.address);
                assert_eq!(coordinator.node().address.ip(), ip);
                assert_eq!(coordinator.node().datacenter, node.datacenter);
                assert_eq!(coordinator.node().rack, node.rack);
                assert_eq!(coordinator.connection_address(), node.address.into_inner());
                if let Some(shard) = shard {
                    assert_eq!(coordinator.shard(), Some(shard));
                } else {
                    assert!(coordinator.shard().is_some_and(|s| s < 4));
                }
            }
            // Asked twice, the same value (built once).
            assert!(std::ptr::eq(
                plain.request_coordinator(),
                plain.request_coordinator()
            ));
            datacenters.extend(plain.request_coordinator().node().datacenter.clone());
        }
    }
    assert_eq!(
        datacenters.into_iter().collect::<Vec<_>>(),
        ["dc-a", "dc-b"]
    );
}
