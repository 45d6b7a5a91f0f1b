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

/// The adaptive writer waits for more frames only while they keep coming,
/// and never longer than its bound (250 µs, on the runtime's 1 ms timer
/// when no frame comes to end the wait): the end of a burst is written
/// promptly even when every request is held up at a slow server, so that
/// no response will wake a requester (and add a frame) for a long time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_a_burst_is_written_within_the_bound() {
    use scylla_testbed::Faults;
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(1)
        .start()
        .await
        .unwrap();
    let addr = cluster.cql_addrs()[0];
    let conn = open(addr, None, &ConnectionConfig::default())
        .await
        .unwrap();
    let slow = Duration::from_millis(600);
    cluster
        .set_faults(0, Faults::none().with_latency(slow))
        .await
        .unwrap();
    let opts = {
        let mut built = RequestOptions::default();
        built.timeout = Some(Duration::from_secs(10));
        built
    };
    let written = || conn.counters().snapshot().frames_written;
    let before = written();
    let started = std::time::Instant::now();
    let mut sent = Vec::new();
    for _ in 0..63 {
        let c = conn.clone();
        sent.push(tokio::spawn(async move {
            c.request(&Options, &opts).await.map(|_| ())
        }));
    }
    // Frames have been coming microseconds apart; once the burst is
    // written (or after a bounded spin), one more request right away: with
    // one frame pending and 63 responses awaited, the writer waits for
    // more frames, and none come.
    for _ in 0..100_000 {
        if written() >= before + 63 {
            break;
        }
        tokio::task::yield_now().await;
    }
    let c = conn.clone();
    sent.push(tokio::spawn(async move {
        c.request(&Options, &opts).await.map(|_| ())
    }));
    // Bounded: at most 300 polls of 1 ms, half the server's latency.
    let mut all_written = None;
    for _ in 0..300 {
        if written() >= before + 64 {
            all_written = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let Some(took) = all_written else {
        panic!(
            "{} of 64 frames written after 300 ms (server latency {slow:?})",
            written() - before
        );
    };
    eprintln!("all 64 frames written after {took:?}");
    for t in sent {
        t.await.unwrap().unwrap();
    }
}
