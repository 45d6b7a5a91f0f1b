//! Smoke test: the driver's connection against the in-process test cluster.
#![allow(clippy::unwrap_used, missing_docs)]

use scylla_cql::frame::request::Options;
use scylla_cql::frame::response::Response;
use scylla_driver::connection::{open, Coalescing, ConnectionConfig, RequestOptions};
use scylla_testbed::TestCluster;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_round_trips_and_coalesces() {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(4)
        .start()
        .await
        .unwrap();
    let addr = cluster.cql_addrs()[0];
    let cfg = {
        let mut built = ConnectionConfig::default();
        built.coalescing = Coalescing::default();
        built
    };
    let conn = open(addr, None, &cfg).await.unwrap();
    assert!(conn.shard().is_some());
    let r = conn
        .request(&Options, &RequestOptions::default())
        .await
        .unwrap();
    assert!(matches!(r.response, Response::Supported(_)));

    let before = conn.counters().snapshot();
    let mut tasks = Vec::new();
    for _ in 0..512 {
        let c = conn.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..20 {
                let opts = {
                    let mut built = RequestOptions::default();
                    built.timeout = Some(Duration::from_secs(5));
                    built
                };
                let r = c.request(&Options, &opts).await.unwrap();
                assert!(matches!(r.response, Response::Supported(_)));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let d = conn.counters().snapshot().since(&before);
    eprintln!(
        "{d:?} writes/request = {:.3}",
        d.write_syscalls as f64 / d.frames_written as f64
    );
    assert_eq!(d.frames_written, 512 * 20);
    assert!(d.write_syscalls < d.frames_written / 2);
    assert_eq!(conn.in_flight(), 0);
}
