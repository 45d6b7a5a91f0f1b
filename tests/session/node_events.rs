//! Node events as the application sees them (`Session::node_events`): a
//! stopped node goes Down and comes back Up (the session's own
//! reachability), a decommissioned node is Removed and a joining one Added
//! (the topology the session follows), against the test cluster.
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use scylla_driver::cluster::events::{NodeEvent, NodeEventKind, NodeEvents};
use scylla_driver::SessionBuilder;
use scylla_testbed::TestCluster;
use uuid::Uuid;

/// Waits (bounded) for `kind` about `host`; returns the events seen before
/// it.
async fn expect(events: &mut NodeEvents, kind: NodeEventKind, host: Uuid) -> Vec<NodeEvent> {
    let mut before = Vec::new();
    let wait = async {
        while let Some(e) = events.next().await {
            if e.kind == kind && e.host_id == host {
                return Some(e);
            }
            before.push(e);
        }
        None
    };
    let found = tokio::time::timeout(Duration::from_secs(15), wait).await;
    match found {
        Ok(Some(e)) => assert_eq!((e.kind, e.host_id), (kind, host)),
        other => panic!("no {kind:?} for {host} ({other:?}); saw {before:?}"),
    }
    before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_up_removed_and_added_reach_the_application() {
    let cluster = TestCluster::builder()
        .nodes(3)
        .shards(2)
        .start()
        .await
        .unwrap();
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    let host = |i: usize| cluster.node(i).unwrap().host_id;
    let mut events = session.node_events();
    assert_eq!(events.try_next(), None, "a steady cluster says nothing");

    // The session's reachability: its pool lost every connection, then
    // opened one again.
    cluster.stop_node(2).await.unwrap();
    let before = expect(&mut events, NodeEventKind::Down, host(2)).await;
    assert!(before.is_empty(), "{before:?}");
    cluster.start_node(2).await.unwrap();
    let before = expect(&mut events, NodeEventKind::Up, host(2)).await;
    assert!(before.is_empty(), "{before:?}");

    // The topology: a decommissioned node goes down, then leaves.
    cluster.decommission_node(1).await.unwrap();
    let before = expect(&mut events, NodeEventKind::Removed, host(1)).await;
    assert!(
        before
            .iter()
            .all(|e| e.host_id == host(1) && e.kind == NodeEventKind::Down),
        "{before:?}"
    );
    assert!(!session
        .cluster()
        .nodes()
        .iter()
        .any(|n| n.host_id == host(1)));
    // ... and joins again: added, then reachable.
    cluster.join_node(1).await.unwrap();
    let before = expect(&mut events, NodeEventKind::Added, host(1)).await;
    assert!(before.is_empty(), "{before:?}");
    let e = expect(&mut events, NodeEventKind::Up, host(1)).await;
    assert!(e.is_empty(), "{e:?}");
    assert_eq!(events.missed(), 0);

    // A closed session ends the stream.
    session.close(Duration::from_secs(1)).await;
    drop(session);
    let end = tokio::time::timeout(Duration::from_secs(5), events.next()).await;
    assert!(matches!(end, Ok(None)), "{end:?}");
}
