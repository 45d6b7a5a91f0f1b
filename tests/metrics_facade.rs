//! The driver's metrics through the `metrics` facade: a Prometheus recorder
//! (without its HTTP listener) is installed for this process, a session runs
//! a workload against the test cluster, and the rendered exposition must
//! hold the documented names with non-zero values; then a node's refused
//! shard-aware port and its stop show in the pool's metrics. This binary
//! holds one test: the recorder is process-wide.
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use scylla_driver::metrics::names;
use scylla_driver::SessionBuilder;
use scylla_testbed::{Faults, ShardAwarePortMode, TestCluster};

mod common;
use common::{cluster_and_session, create_keyspace};

/// The value of the sample whose name is `name` and whose labels include
/// every `key="value"` of `labels`, summed over the matching lines.
fn sum(rendered: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    rendered
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = match series.split_once('{') {
                Some((m, r)) => (m, r),
                None => (series, ""),
            };
            if metric != name {
                return None;
            }
            let all = labels
                .iter()
                .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            all.then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documented_metrics_appear_with_non_zero_values() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).unwrap();

    const NODES: usize = 2;
    const SHARDS: u16 = 3;
    let (cluster, session) = cluster_and_session(NODES, SHARDS, |b| b).await;

    create_keyspace(&session, "m", 1).await;
    session
        .query_unpaged("CREATE TABLE m.kv (k bigint PRIMARY KEY, v text)", ())
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO m.kv (k, v) VALUES (?, ?)")
        .await
        .unwrap();
    let select = session
        .prepare("SELECT v FROM m.kv WHERE k = ?")
        .await
        .unwrap();
    const ROWS: i64 = 200;
    for k in 0..ROWS {
        session.execute_unpaged(&insert, (k, "v")).await.unwrap();
        session.execute_unpaged(&select, (k,)).await.unwrap();
    }
    // One request that fails (no such table): outcome="error".
    assert!(session
        .query_unpaged("SELECT * FROM m.no_such_table", ())
        .await
        .is_err());

    let text = handle.render();
    let ok = sum(&text, names::REQUESTS, &[("outcome", "ok")]);
    let errors = sum(&text, names::REQUESTS, &[("outcome", "error")]);
    // The workload's requests, plus those of the set-up (the control
    // connection's queries are not session requests).
    assert!(ok >= (2 * ROWS) as f64, "ok requests {ok}\n{text}");
    assert!(errors >= 1.0, "error requests {errors}\n{text}");
    let latency_count = sum(&text, &format!("{}_count", names::REQUEST_DURATION), &[]);
    assert_eq!(latency_count, ok + errors, "{text}");
    assert!(sum(&text, &format!("{}_sum", names::REQUEST_DURATION), &[]) > 0.0);
    // Finished: nothing in flight or queued.
    assert_eq!(sum(&text, names::REQUESTS_IN_FLIGHT, &[]), 0.0, "{text}");
    assert_eq!(sum(&text, names::REQUESTS_QUEUED, &[]), 0.0, "{text}");

    // Every shard of every node got its connection: one through the regular
    // port first per node, the others through the shard-aware port, each
    // counted under its node and shard, and open now.
    for addr in cluster.cql_addrs() {
        let node = addr.to_string();
        let regular_ok = sum(
            &text,
            names::CONNECTION_ATTEMPTS,
            &[("node", &node), ("port", "regular"), ("outcome", "ok")],
        );
        assert!(regular_ok >= 1.0, "{node}: regular {regular_ok}\n{text}");
        let shard_aware_ok = sum(
            &text,
            names::CONNECTION_ATTEMPTS,
            &[("node", &node), ("port", "shard_aware"), ("outcome", "ok")],
        );
        assert!(
            shard_aware_ok >= f64::from(SHARDS - 1),
            "{node}: shard-aware {shard_aware_ok}\n{text}"
        );
        for shard in 0..SHARDS {
            let shard = shard.to_string();
            let open = sum(
                &text,
                names::CONNECTIONS,
                &[("node", &node), ("shard", &shard)],
            );
            assert!(open >= 1.0, "{node} shard {shard}: {open} open\n{text}");
        }
        let open_shard_aware = sum(
            &text,
            names::CONNECTIONS,
            &[("node", &node), ("port", "shard_aware")],
        );
        assert!(
            open_shard_aware >= f64::from(SHARDS - 1),
            "{node}: {open_shard_aware} open through the shard-aware port\n{text}"
        );
    }
    // The in-process snapshot agrees with the facade on request counts.
    let snap = session.metrics().snapshot();
    assert_eq!(snap.requests as f64, ok + errors, "{text}");

    // Help texts are there (describe ran at session build).
    assert!(
        text.contains(&format!("# HELP {}", names::REQUESTS)),
        "{text}"
    );
    drop(session);
    cluster.shutdown().await;

    // Then the pool's failures, on another cluster (its own node labels).
    pool_failures_are_counted(&handle).await;
}

/// A node whose shard-aware port refuses: the fallback (by reason) and the
/// failed shard-aware attempts are counted; the node stops: reconnect delays
/// and failed regular-port attempts are, and its open connections drop to 0.
async fn pool_failures_are_counted(handle: &PrometheusHandle) {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(3)
        .faults(
            0,
            Faults::none().with_shard_aware_port(ShardAwarePortMode::Refuse),
        )
        .start()
        .await
        .unwrap();
    let node = cluster.cql_addrs()[0].to_string();
    let session = SessionBuilder::new()
        .known_node(node.clone())
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    let text = handle.render();
    let fallbacks = sum(
        &text,
        names::SHARD_AWARE_FALLBACKS,
        &[("node", &node), ("reason", "refused")],
    );
    assert!(fallbacks >= 1.0, "fallbacks {fallbacks}\n{text}");
    let refused = sum(
        &text,
        names::CONNECTION_ATTEMPTS,
        &[
            ("node", &node),
            ("port", "shard_aware"),
            ("outcome", "error"),
        ],
    );
    assert!(refused >= 1.0, "refused attempts {refused}\n{text}");
    // Every shard covered through the regular port.
    let open_regular = sum(
        &text,
        names::CONNECTIONS,
        &[("node", &node), ("port", "regular")],
    );
    assert_eq!(open_regular, 3.0, "{text}");

    cluster.stop_node(0).await.unwrap();
    // Bounded: the pool's first backoff delays are well under a second.
    let mut last = String::new();
    for _ in 0..100 {
        last = handle.render();
        let delays = sum(
            &last,
            &format!("{}_count", names::RECONNECT_DELAY),
            &[("node", &node)],
        );
        let failed = sum(
            &last,
            names::CONNECTION_ATTEMPTS,
            &[
                ("node", &node),
                ("port", "regular"),
                ("shard", "unknown"),
                ("outcome", "error"),
            ],
        );
        let open = sum(&last, names::CONNECTIONS, &[("node", &node)]);
        if delays >= 1.0 && failed >= 1.0 && open == 0.0 {
            drop(session);
            cluster.shutdown().await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no reconnect delay / failed attempt / zero connections recorded for {node}\n{last}");
}
