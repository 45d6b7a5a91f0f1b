//! `Session::close`: new requests are refused at once, requests in flight
//! finish within the grace period (or end with an error after it), and then
//! no task, socket or server-side connection of the session is left; a
//! plain drop of the last clone leaves nothing behind either. Counted by the
//! runtime (live tasks), the process (open file descriptors) and the test
//! cluster (connections open).
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use scylla_driver::{ExecutionError, PrepareError, Session, SessionBuilder};
use scylla_testbed::{Faults, TestCluster};

/// The tests count process-wide descriptors: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Live tasks of this runtime, open descriptors of this process, and
/// connections the cluster has open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Footprint {
    tasks: usize,
    fds: usize,
    server_connections: u64,
}

fn footprint(cluster: &TestCluster) -> Footprint {
    Footprint {
        tasks: tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        fds: std::fs::read_dir("/proc/self/fd").unwrap().count(),
        server_connections: cluster.stats().total(|c| c.connections),
    }
}

impl Footprint {
    /// Nothing more than `baseline`: no task, descriptor or connection left.
    fn within(self, baseline: Footprint) -> bool {
        self.tasks <= baseline.tasks
            && self.fds <= baseline.fds
            && self.server_connections <= baseline.server_connections
    }
}

/// The footprint once it has stopped changing (sockets of an earlier test
/// may still be closing): the same for 200 ms, waiting 10 s at most.
async fn steady(cluster: &TestCluster) -> Footprint {
    let until = Instant::now() + Duration::from_secs(10);
    let mut last = footprint(cluster);
    let mut since = Instant::now();
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = footprint(cluster);
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= Duration::from_millis(200) {
            break;
        }
    }
    last
}

/// Waits (bounded) until the footprint is back within `baseline`; returns
/// the last one seen.
async fn settle(cluster: &TestCluster, baseline: Footprint) -> Footprint {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let now = footprint(cluster);
        if now.within(baseline) || Instant::now() >= until {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (5 s at most) until `session` has `n` requests in flight.
async fn wait_in_flight(session: &Session, n: usize) {
    let until = Instant::now() + Duration::from_secs(5);
    while session.requests_in_flight() < n && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Drops `session` (already closed, or not: `how` says which) and checks
/// that the footprint comes back within `baseline`; then stops the cluster.
async fn nothing_left_behind(
    cluster: TestCluster,
    baseline: Footprint,
    session: Session,
    how: &str,
) {
    drop(session);
    let after = settle(&cluster, baseline).await;
    assert!(
        after.within(baseline),
        "left behind after {how}: {after:?} vs {baseline:?}"
    );
    cluster.shutdown().await;
}

async fn session(cluster: &TestCluster) -> Session {
    let s = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .request_timeout(Duration::from_secs(5))
        .build()
        .await
        .unwrap();
    assert!(s.wait_for_all_shards(Duration::from_secs(20)).await);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_drains_then_leaves_nothing_behind() {
    let _serial = SERIAL.lock().await;
    let cluster = TestCluster::builder()
        .nodes(2)
        .shards(2)
        .start()
        .await
        .unwrap();
    let baseline = steady(&cluster).await;

    let session = session(&cluster).await;
    let prepared = session
        .prepare("SELECT release_version FROM system.local")
        .await
        .unwrap();
    let open = footprint(&cluster);
    assert!(open.server_connections >= 4, "{open:?}");
    assert!(open.tasks > baseline.tasks, "{open:?} vs {baseline:?}");

    // Requests in flight when close starts: the nodes answer after 300 ms,
    // within the grace period, so every one succeeds.
    for i in 0..2 {
        cluster
            .set_faults(i, Faults::none().with_latency(Duration::from_millis(300)))
            .await
            .unwrap();
    }
    let mut in_flight = Vec::new();
    for _ in 0..8 {
        let (s, p) = (session.clone(), prepared.clone());
        in_flight.push(tokio::spawn(async move { s.execute_unpaged(&p, ()).await }));
    }
    wait_in_flight(&session, 8).await;
    assert_eq!(session.requests_in_flight(), 8);

    let closing = {
        let s = session.clone();
        tokio::spawn(async move { s.close(Duration::from_secs(5)).await })
    };
    let until = Instant::now() + Duration::from_secs(5);
    while !session.is_closed() && Instant::now() < until {
        tokio::task::yield_now().await;
    }
    // New requests are refused at once, without waiting for the drain.
    let refused = session.execute_unpaged(&prepared, ()).await.unwrap_err();
    assert!(
        matches!(refused, ExecutionError::SessionClosed),
        "{refused:?}"
    );
    let refused = session
        .query_unpaged("SELECT release_version FROM system.local", ())
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ExecutionError::SessionClosed),
        "{refused:?}"
    );
    let refused = session
        .prepare("SELECT * FROM system.peers")
        .await
        .unwrap_err();
    assert!(
        matches!(refused, PrepareError::SessionClosed),
        "{refused:?}"
    );

    assert!(closing.await.unwrap(), "the requests in flight drained");
    for t in in_flight {
        t.await.unwrap().unwrap();
    }
    nothing_left_behind(cluster, baseline, session, "close").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_cuts_off_requests_after_the_grace_period() {
    let _serial = SERIAL.lock().await;
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(2)
        .start()
        .await
        .unwrap();
    let baseline = steady(&cluster).await;
    let session = session(&cluster).await;
    cluster
        .set_faults(0, Faults::none().with_latency(Duration::from_secs(3)))
        .await
        .unwrap();
    let slow = {
        let s = session.clone();
        tokio::spawn(async move {
            s.query_unpaged("SELECT release_version FROM system.local", ())
                .await
        })
    };
    wait_in_flight(&session, 1).await;
    let started = Instant::now();
    assert!(!session.close(Duration::from_millis(100)).await);
    // The request ends (once, with an error) as its connection closes, long
    // before the node would have answered.
    let err = slow.await.unwrap().unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "{err:?}");
    nothing_left_behind(cluster, baseline, session, "close").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_session_leaves_nothing_behind() {
    let _serial = SERIAL.lock().await;
    let cluster = TestCluster::builder()
        .nodes(2)
        .shards(2)
        .start()
        .await
        .unwrap();
    let baseline = steady(&cluster).await;
    let session = session(&cluster).await;
    session
        .query_unpaged("SELECT release_version FROM system.local", ())
        .await
        .unwrap();
    assert!(footprint(&cluster).server_connections >= 4);
    nothing_left_behind(cluster, baseline, session, "a drop").await;
}
