//! Query traces recorded by the test cluster when it is asked to
//! (`Topology::set_record_traces`), read through the driver: traced plain,
//! prepared and batched requests come back with a trace id, and
//! `get_tracing_info` finds each trace complete, with its events.
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use scylla_driver::statement::{Batch, BatchType, Statement};

use crate::common;
use common::{cluster_and_session, create_keyspace};

/// Long enough for any answer on a busy machine; a hang fails the test.
const NO_HANG: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traced_requests_get_traces_with_events() {
    let (cluster, session) = cluster_and_session(2, 2, |b| b).await;
    cluster.topology().set_record_traces(true);
    create_keyspace(&session, "tr", 1).await;
    session
        .query_unpaged("CREATE TABLE tr.t (pk int PRIMARY KEY, v text)", ())
        .await
        .unwrap();
    let nodes: Vec<_> = cluster.nodes().iter().map(|n| n.advertised).collect();

    let text = "INSERT INTO tr.t (pk, v) VALUES (?, ?)";
    let insert = session
        .prepare(Statement::new(text).with_tracing(true))
        .await
        .unwrap();
    let prepared = session.execute_unpaged(&insert, (1, "one")).await.unwrap();
    let plain = session
        .query_unpaged(
            Statement::new("SELECT v FROM tr.t WHERE pk = 1").with_tracing(true),
            (),
        )
        .await
        .unwrap();
    let (v,): (String,) = plain.single_row().unwrap();
    assert_eq!(v, "one");
    let mut batch = Batch::new(BatchType::Logged);
    batch.append(insert.clone());
    batch.append(insert.clone());
    let batch = batch.with_tracing(true);
    let batched = session
        .batch(&batch, ((2, "two"), (3, "three")))
        .await
        .unwrap();

    let mut ids = Vec::new();
    for (result, command, request) in [
        (&prepared, "EXECUTE", text),
        (&plain, "QUERY", "SELECT v FROM tr.t WHERE pk = 1"),
        (&batched, "BATCH", "2 statements"),
    ] {
        let id = result
            .tracing_id()
            .expect("a traced request has a trace id");
        ids.push(id);
        let trace = tokio::time::timeout(NO_HANG, session.get_tracing_info(id))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(trace.command.as_deref(), Some(command));
        assert_eq!(trace.request.as_deref(), Some(request));
        let coordinator = trace.coordinator.unwrap();
        assert!(nodes.contains(&coordinator), "{coordinator}");
        assert!(trace.client.is_some());
        assert!(trace.started_at.is_some());
        // Received, executed, complete; in time order, all on the coordinator.
        let activities: Vec<&str> = trace
            .events
            .iter()
            .map(|e| e.activity.as_deref().unwrap_or(""))
            .collect();
        assert_eq!(activities.len(), 3, "{activities:?}");
        assert!(activities[0].contains(" received from "), "{activities:?}");
        assert_eq!(activities[1], "Statement executed");
        assert_eq!(activities[2], "Request complete");
        assert!(trace.events.iter().all(|e| e.source == Some(coordinator)));
        let elapsed: Vec<Duration> = trace.events.iter().map(|e| e.elapsed().unwrap()).collect();
        assert!(elapsed.windows(2).all(|w| w[0] <= w[1]), "{elapsed:?}");
        let duration = trace.elapsed().unwrap();
        assert!(duration >= elapsed[2], "{duration:?}");
        assert_eq!(duration.as_micros(), trace.duration.unwrap() as u128);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "every request has a trace of its own");

    // An untraced request carries no id.
    let untraced = session
        .query_unpaged("SELECT v FROM tr.t WHERE pk = 2", ())
        .await
        .unwrap();
    assert_eq!(untraced.tracing_id(), None);
}
