//! Smoke test: the driver's connection against the in-process test cluster.
#![allow(clippy::unwrap_used, missing_docs)]

use scylla_cql::frame::request::Options;
use scylla_cql::frame::response::Response;
use scylla_driver::connection::{open, Coalescing, ConnectionConfig, RequestOptions};
use scylla_testbed::TestCluster;
use std::time::{Duration, Instant};

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
    // The writer counts a frame after its write returns, and the answer can
    // be read and returned first: wait (bounded) for the last counts.
    let settled = Instant::now() + Duration::from_secs(2);
    while conn.counters().snapshot().since(&before).frames_written < 512 * 20
        && Instant::now() < settled
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
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
/// and writes by its bound (250 µs) even when none comes to end the wait:
/// then the reader ends it when responses arrive, and the connection's tick
/// (10 ms) when the server answers nothing, as here, where the server holds
/// every answer for a minute, so that no response wakes the writer or a
/// requester (which would add a frame). An ordering, not a race against the
/// server's latency: with the heartbeat off and a request timeout beyond
/// the server's latency, nothing but the writer's own bound can write the
/// last frames within the 10 s the test waits, all before any response.
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
    let cfg = {
        let mut built = ConnectionConfig::default();
        built.heartbeat_interval = None;
        built
    };
    let conn = open(addr, None, &cfg).await.unwrap();
    let held = Duration::from_secs(60);
    cluster
        .set_faults(0, Faults::none().with_latency(held))
        .await
        .unwrap();
    let opts = {
        let mut built = RequestOptions::default();
        built.timeout = Some(held * 2);
        built
    };
    let written = || conn.counters().snapshot().frames_written;
    let before = written();
    let mut sent = Vec::new();
    for _ in 0..63 {
        let c = conn.clone();
        sent.push(tokio::spawn(async move {
            c.request(&Options, &opts).await.map(|_| ())
        }));
    }
    // Once the burst is written (or after a bounded spin):
    for _ in 0..100_000 {
        if written() >= before + 63 {
            break;
        }
        tokio::task::yield_now().await;
    }
    // Then a trickle: 20 more, a scheduler round apart (frames keep coming
    // often, so the writer waits for the next one each time), and then
    // nothing: the last ones must not wait for a frame that never comes.
    for _ in 0..20 {
        let c = conn.clone();
        sent.push(tokio::spawn(async move {
            c.request(&Options, &opts).await.map(|_| ())
        }));
        tokio::task::yield_now().await;
    }
    let started = Instant::now();
    while written() < before + 83 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{} of 83 frames written, no response yet",
            written() - before
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    eprintln!(
        "all 83 frames written {:?} after the last",
        started.elapsed()
    );
    // All of them before any response.
    assert_eq!(conn.in_flight(), 83);
    for t in &sent {
        assert!(!t.is_finished());
    }
    // The answers would take a minute: end the requests here.
    for t in sent {
        t.abort();
    }
    conn.close();
}

/// The connection stays open while any handle is alive and closes when the
/// last one is dropped (no request needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_closes_with_its_last_handle() {
    let cluster = TestCluster::builder().nodes(1).start().await.unwrap();
    let open_now = || cluster.node_stats(0).unwrap().node.connections;
    let conn = open(cluster.cql_addrs()[0], None, &ConnectionConfig::default())
        .await
        .unwrap();
    let other = conn.clone();
    drop(conn);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(open_now(), 1, "a handle is alive");
    let r = other
        .request(&Options, &RequestOptions::default())
        .await
        .unwrap();
    assert!(matches!(r.response, Response::Supported(_)));
    drop(other);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while open_now() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the connection outlived its last handle"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// With only 4 stream ids, 64 concurrent requests all complete: the others
/// wait for ids (in line, woken as ids free up) and none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_wait_for_free_stream_ids_and_all_complete() {
    let cluster = TestCluster::builder().nodes(1).start().await.unwrap();
    let mut cfg = ConnectionConfig::default();
    cfg.max_in_flight = 4;
    let conn = open(cluster.cql_addrs()[0], None, &cfg).await.unwrap();
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let c = conn.clone();
            tokio::spawn(async move {
                for _ in 0..20 {
                    let mut opts = RequestOptions::default();
                    opts.timeout = Some(Duration::from_secs(10));
                    let r = c.request(&Options, &opts).await.unwrap();
                    assert!(matches!(r.response, Response::Supported(_)));
                    assert!(c.in_flight() <= 4);
                }
            })
        })
        .collect();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .expect("every request gets an id")
            .unwrap();
    }
    assert_eq!(conn.in_flight(), 0);
}

/// A node whose handshakes cost 40 ms of its CPU stage: the connection's
/// STARTUP exchange takes at least that much beyond the OPTIONS round trip,
/// which does not pay it (the pool paces its opens by that difference).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handshake_times_startup_apart_from_options() {
    use scylla_testbed::{AdmissionConfig, HandshakeCost};
    let cost = Duration::from_millis(40);
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(2)
        .admission(AdmissionConfig {
            cost: HandshakeCost::Sleep(cost),
            ..AdmissionConfig::default()
        })
        .start()
        .await
        .unwrap();
    let conn = open(cluster.cql_addrs()[0], None, &ConnectionConfig::default())
        .await
        .unwrap();
    let times = conn.info().server.setup_times;
    assert!(times.startup >= cost, "{times:?}");
    assert!(
        times.startup_excess() >= cost - times.options.min(cost),
        "{times:?}"
    );
    assert!(times.options > Duration::ZERO, "{times:?}");
}
