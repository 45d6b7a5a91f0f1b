//! Under pressure (issue 15): the session's bound on requests in flight and
//! the queue behind it (backpressure), requests waiting for stream ids, and
//! server overload (OVERLOADED, ScyllaDB's rate-limit error) answered with a
//! delayed retry on another replica.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;
use common::{cluster_and_session, create_keyspace};

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use scylla_cql::frame::response::error::DbError;
use scylla_driver::policy::retry::{
    AttemptFailure, RetryContext, RetryDecision, RetryPolicy, OVERLOAD_BACKOFF,
};
use scylla_driver::statement::Statement;
use scylla_driver::{ExecutionError, PreparedStatement, QueryResult, Session, SessionBuilder};
use scylla_testbed::{Faults, TestCluster};

type Request<'a> = Pin<Box<dyn Future<Output = Result<QueryResult, ExecutionError>> + Send + 'a>>;

/// Runs `futures` concurrently and returns their results in order. Each
/// poll of the whole set polls every unfinished future once, in order, so
/// the first poll starts every request before any of them can finish.
async fn all<'a>(futures: Vec<Request<'a>>) -> Vec<Result<QueryResult, ExecutionError>> {
    let mut futures: Vec<Option<Request<'a>>> = futures.into_iter().map(Some).collect();
    let mut results: Vec<Option<Result<QueryResult, ExecutionError>>> =
        (0..futures.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, r) in futures.iter_mut().zip(results.iter_mut()) {
            if let Some(fut) = f {
                match fut.as_mut().poll(cx) {
                    Poll::Ready(out) => {
                        *r = Some(out);
                        *f = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    results.into_iter().map(Option::unwrap).collect()
}

/// Polls `fut` once: its output if it finished on that poll.
async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *fut).poll(cx))).await
}

/// `n` executions of `stmt` with keys `0..n`.
fn executions<'a>(s: &'a Session, stmt: &'a PreparedStatement, n: i64) -> Vec<Request<'a>> {
    (0..n)
        .map(|k| Box::pin(s.execute_unpaged(stmt, (k, k))) as Request<'a>)
        .collect()
}

/// A table `p.t (k bigint PRIMARY KEY, v bigint)` replicated on every node,
/// and its idempotent and non-idempotent INSERTs.
async fn table(session: &Session, nodes: usize) -> (PreparedStatement, PreparedStatement) {
    create_keyspace(session, "p", nodes).await;
    session
        .query_unpaged("CREATE TABLE p.t (k bigint PRIMARY KEY, v bigint)", ())
        .await
        .unwrap();
    let idempotent = session
        .prepare(Statement::new("INSERT INTO p.t (k, v) VALUES (?, ?)").with_idempotent(true))
        .await
        .unwrap();
    let plain = session
        .prepare(Statement::new("UPDATE p.t SET v = ? WHERE k = ?"))
        .await
        .unwrap();
    (idempotent, plain)
}

async fn set_latency(cluster: &TestCluster, nodes: usize, latency: Duration) {
    for i in 0..nodes {
        cluster
            .set_faults(i, Faults::none().with_latency(latency))
            .await
            .unwrap();
    }
}

/// Samples the session's in-flight and queued counts until `stop`; returns
/// their maxima.
fn sample(session: &Session, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<(usize, usize)> {
    let session = session.clone();
    tokio::spawn(async move {
        let (mut in_flight, mut queued) = (0, 0);
        while !stop.load(Ordering::Relaxed) {
            in_flight = in_flight.max(session.requests_in_flight());
            queued = queued.max(session.requests_queued());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        (in_flight, queued)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_bound_holds_with_ten_times_the_bound_of_callers() {
    const BOUND: usize = 8;
    const QUEUE: usize = 9 * BOUND; // in flight + queued = 10x the bound
    const CALLERS: i64 = 12 * BOUND as i64;
    let latency = Duration::from_millis(50);
    let (cluster, session) = cluster_and_session(2, 2, |b| {
        b.max_requests_in_flight(BOUND)
            .max_queued_requests(QUEUE)
            .request_timeout(Duration::from_secs(20))
    })
    .await;
    let (insert, _) = table(&session, 2).await;
    set_latency(&cluster, 2, latency).await;

    // Exactly 10x the bound: every one succeeds, 8 at a time.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(&session, stop.clone());
    let started = Instant::now();
    let mut requests = Box::pin(all(executions(&session, &insert, 10 * BOUND as i64)));
    assert!(poll_once(&mut requests).await.is_pending());
    // The first poll started every request: BOUND of them in flight, the
    // others queued.
    assert_eq!(
        (session.requests_in_flight(), session.requests_queued()),
        (BOUND, QUEUE)
    );
    let results = requests.await;
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (max_in_flight, max_queued) = sampler.await.unwrap();
    for r in &results {
        assert!(r.is_ok(), "{:?}", r.as_ref().err());
    }
    assert!(max_in_flight <= BOUND, "{max_in_flight} in flight");
    assert!(max_queued <= QUEUE, "{max_queued} queued");
    // Each request holds its place for at least the server's latency, and at
    // most BOUND hold one at a time: 10 rounds at least.
    assert!(
        elapsed >= latency * 10,
        "{elapsed:?}: more than {BOUND} ran at once"
    );

    // Beyond in flight + queue: the rest fail at once, with the distinct error.
    let started = Instant::now();
    let results = all(executions(&session, &insert, CALLERS)).await;
    let mut rejected = Vec::new();
    for (i, r) in results.iter().enumerate() {
        match r {
            Ok(_) => {}
            Err(ExecutionError::ClientOverloaded {
                max_in_flight,
                max_queued,
            }) => {
                assert_eq!((*max_in_flight, *max_queued), (BOUND, QUEUE));
                rejected.push(i);
            }
            Err(e) => panic!("request {i}: {e}"),
        }
    }
    // Started in order: the first BOUND + QUEUE got in, the others not.
    let expected: Vec<usize> = (BOUND + QUEUE..CALLERS as usize).collect();
    assert_eq!(rejected, expected);
    let e = results[CALLERS as usize - 1].as_ref().unwrap_err();
    assert!(
        e.to_string().contains("overloaded: client queue full"),
        "{e}"
    );
    assert!(started.elapsed() >= latency * 10);
    assert_eq!(session.requests_in_flight(), 0);
    assert_eq!(session.requests_queued(), 0);

    // The same load without the bound runs at once, every request in flight
    // from the first poll (so the bound above is what made it take 10
    // rounds).
    let unbounded = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();
    assert!(unbounded.wait_for_all_shards(Duration::from_secs(20)).await);
    let insert = unbounded
        .prepare("INSERT INTO p.t (k, v) VALUES (?, ?)")
        .await
        .unwrap();
    let mut requests = Box::pin(all(executions(&unbounded, &insert, 10 * BOUND as i64)));
    assert!(poll_once(&mut requests).await.is_pending());
    assert_eq!(unbounded.requests_in_flight(), 10 * BOUND);
    assert_eq!(unbounded.requests_queued(), 0);
    for r in requests.await {
        r.unwrap();
    }
}

/// Requests queued behind the bound time out at their deadline while they
/// wait, with the ordinary timeout error, not once a place comes free: the
/// two places are held by requests the server answers after 5 s, the queued
/// ones' timeout is 150 ms, and they all fail while both places are still
/// held (an ordering, with seconds to spare).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_requests_time_out_at_their_deadline() {
    let timeout = Duration::from_millis(150);
    let (cluster, session) = cluster_and_session(1, 1, |b| {
        b.max_requests_in_flight(2)
            .max_queued_requests(10)
            .request_timeout(Duration::from_secs(30))
    })
    .await;
    let (insert, _) = table(&session, 1).await;
    let mut queued_insert = insert.clone();
    queued_insert.set_request_timeout(Some(timeout));
    set_latency(&cluster, 1, Duration::from_secs(5)).await;
    // Both places, held until the server answers.
    let mut held = Box::pin(all(executions(&session, &insert, 2)));
    assert!(poll_once(&mut held).await.is_pending());
    assert_eq!(session.requests_in_flight(), 2);
    let results = tokio::select! {
        results = all(executions(&session, &queued_insert, 4)) => results,
        _ = &mut held => panic!("a place came free before the queued requests' deadline"),
    };
    for r in results {
        // The ordinary timeout, never the queue's error (the queue had room).
        assert!(
            matches!(r, Err(ExecutionError::RequestTimeout(t)) if t == timeout),
            "{r:?}"
        );
    }
    assert_eq!(session.requests_queued(), 0);
    assert_eq!(session.requests_in_flight(), 2);
    drop(held);
    assert_eq!(session.requests_in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_futures_release_their_permits() {
    let (cluster, session) = cluster_and_session(1, 2, |b| {
        b.max_requests_in_flight(4)
            .max_queued_requests(4)
            .request_timeout(Duration::from_secs(10))
    })
    .await;
    let (insert, _) = table(&session, 1).await;
    set_latency(&cluster, 1, Duration::from_millis(300)).await;
    for _round in 0..3 {
        // 4 in flight and 4 queued (the first poll starts them all), all
        // abandoned.
        let mut requests = Box::pin(all(executions(&session, &insert, 8)));
        assert!(
            poll_once(&mut requests).await.is_pending(),
            "the requests should still be waiting"
        );
        assert_eq!(
            (session.requests_in_flight(), session.requests_queued()),
            (4, 4)
        );
        drop(requests);
        assert_eq!(session.requests_in_flight(), 0, "a permit leaked");
        assert_eq!(session.requests_queued(), 0, "a waiter stayed queued");
    }
    // And the session still runs requests at its full bound.
    set_latency(&cluster, 1, Duration::ZERO).await;
    for r in all(executions(&session, &insert, 8)).await {
        r.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_wait_for_stream_ids_and_never_fail_for_them() {
    const STREAMS: usize = 2;
    let latency = Duration::from_millis(20);
    let (cluster, session) = cluster_and_session(1, 1, |mut b| {
        b.config.pool.connection.max_in_flight = STREAMS;
        b.request_timeout(Duration::from_secs(20))
    })
    .await;
    let (insert, _) = table(&session, 1).await;
    set_latency(&cluster, 1, latency).await;
    let n = 40;
    let started = Instant::now();
    for r in all(executions(&session, &insert, n)).await {
        r.unwrap();
    }
    // One connection with 2 stream ids: 20 rounds of the latency at least.
    let elapsed = started.elapsed();
    assert!(
        elapsed >= latency * (n as u32 / STREAMS as u32),
        "{elapsed:?}"
    );
}

/// A node answering OVERLOADED sends each idempotent request on to another
/// replica after the default policy's backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overloaded_answers_lead_to_success_on_another_replica() {
    let (cluster, session) = cluster_and_session(3, 2, |b| b).await;
    let (insert, plain) = table(&session, 3).await;
    // Node 1: the control connection (whose metadata reads would also be
    // answered) is on node 0, the contact point.
    let armed = 1_000;
    cluster
        .set_faults(1, Faults::none().with_overloaded(armed))
        .await
        .unwrap();
    let mut delayed = 0u32;
    for k in 0..30i64 {
        let retries = session.metrics().snapshot().retries;
        let started = Instant::now();
        let r = session.execute_unpaged(&insert, (k, k)).await.unwrap();
        let elapsed = started.elapsed();
        let retried = session.metrics().snapshot().retries - retries;
        assert!(retried <= 1, "only one node is overloaded");
        if retried == 1 {
            delayed += 1;
            assert!(
                elapsed >= OVERLOAD_BACKOFF.min_delay(0),
                "retried after {elapsed:?}"
            );
            assert_ne!(r.coordinator, Some(cluster.cql_addrs()[1]));
        }
    }
    let answered = armed - cluster.faults(1).unwrap().overloaded;
    assert!(answered > 0, "node 1 was never asked first");
    assert_eq!(answered, delayed, "each OVERLOADED answer was retried once");

    // Not idempotent: the error, with the node that answered it. Node 1 may
    // be tried first less often after its OVERLOADED answers (the routing
    // avoids replicas that answer slowly): send until it has answered a few,
    // bounded.
    let mut failed = 0u32;
    for k in 0..600i64 {
        if failed >= 3 {
            break;
        }
        match session.execute_unpaged(&plain, (k, k)).await {
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e.db_error(), Some(&DbError::Overloaded), "{e}");
                failed += 1;
            }
        }
    }
    let answered_plain = armed - answered - cluster.faults(1).unwrap().overloaded;
    assert_eq!(failed, answered_plain);
    assert!(failed > 0);
}

/// ScyllaDB's rate-limit error: retried elsewhere after the backoff for an
/// idempotent statement, returned for a non-idempotent one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_error_retried_only_when_idempotent() {
    let (cluster, session) = cluster_and_session(3, 2, |b| b).await;
    let (insert, plain) = table(&session, 3).await;
    let armed = 1_000;
    for i in 1..3 {
        cluster
            .set_faults(i, Faults::none().with_rate_limited(armed))
            .await
            .unwrap();
    }
    let remaining = || -> u32 {
        (1..3)
            .map(|i| cluster.faults(i).unwrap().rate_limited)
            .sum()
    };
    let mut retried_total = 0;
    for k in 0..30i64 {
        let retries = session.metrics().snapshot().retries;
        let started = Instant::now();
        let r = session.execute_unpaged(&insert, (k, k)).await.unwrap();
        let elapsed = started.elapsed();
        let retried = session.metrics().snapshot().retries - retries;
        let min: Duration = (0..retried as u32)
            .map(|n| OVERLOAD_BACKOFF.min_delay(n))
            .sum();
        assert!(elapsed >= min, "{retried} retries after {elapsed:?}");
        // Nodes 1 and 2 refuse every statement: only node 0 runs them.
        assert_eq!(r.coordinator, Some(cluster.cql_addrs()[0]));
        retried_total += retried;
    }
    assert!(retried_total > 0);
    assert_eq!(u64::from(2 * armed - remaining()), retried_total);

    let before = remaining();
    let retries = session.metrics().snapshot().retries;
    let mut failed = 0u32;
    for k in 0..30i64 {
        if let Err(e) = session.execute_unpaged(&plain, (k, k)).await {
            assert!(
                matches!(
                    e.db_error(),
                    Some(DbError::RateLimitReached {
                        rejected_by_coordinator: true,
                        ..
                    })
                ),
                "{e}"
            );
            failed += 1;
        }
    }
    assert!(failed > 0);
    assert_eq!(
        before - remaining(),
        failed,
        "each rate-limit answer failed its request"
    );
    assert_eq!(
        session.metrics().snapshot().retries,
        retries,
        "nothing was retried"
    );
}

/// Retries after a fixed delay on OVERLOADED.
#[derive(Debug)]
struct FixedBackoff(Duration);

impl RetryPolicy for FixedBackoff {
    fn decide(&self, failure: AttemptFailure<'_>, _: &RetryContext) -> RetryDecision {
        match failure {
            AttemptFailure::Server(DbError::Overloaded) => {
                RetryDecision::RetryNextTargetAfter(None, self.0)
            }
            _ => RetryDecision::Fail,
        }
    }
}

/// A delay that would pass the deadline is not taken: the error comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backoff_past_the_deadline_is_not_taken() {
    let timeout = Duration::from_secs(2);
    let (cluster, session) = cluster_and_session(2, 1, |b| {
        b.request_timeout(timeout)
            .retry_policy(Arc::new(FixedBackoff(Duration::from_millis(300))))
    })
    .await;
    let (insert, _) = table(&session, 2).await;
    for i in 0..2 {
        cluster
            .set_faults(i, Faults::none().with_overloaded(u32::MAX))
            .await
            .unwrap();
    }
    // Two replicas: one delayed retry, then the plan is exhausted.
    let started = Instant::now();
    let e = session
        .execute_unpaged(&insert, (1i64, 1i64))
        .await
        .unwrap_err();
    assert_eq!(e.db_error(), Some(&DbError::Overloaded), "{e}");
    assert!(started.elapsed() >= Duration::from_millis(300));

    // A backoff (10 s) beyond the statement's timeout (2 s): the error comes
    // back at once, before the deadline that waiting would have reached.
    let mut slow = Statement::new("INSERT INTO p.t (k, v) VALUES (?, ?)")
        .with_idempotent(true)
        .with_timeout(timeout);
    slow.set_retry_policy(Some(Arc::new(FixedBackoff(Duration::from_secs(10)))));
    let slow = session.prepare(slow).await.unwrap();
    let started = Instant::now();
    let e = session
        .execute_unpaged(&slow, (1i64, 1i64))
        .await
        .unwrap_err();
    assert_eq!(e.db_error(), Some(&DbError::Overloaded), "{e}");
    assert!(started.elapsed() < timeout, "{:?}", started.elapsed());
}

/// A paged read holds a place in flight per page fetch, none between pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_reads_take_one_permit_per_page() {
    let (_cluster, session) =
        cluster_and_session(1, 2, |b| b.max_requests_in_flight(1).max_queued_requests(0)).await;
    let (insert, update) = table(&session, 1).await;
    for r in all(executions(&session, &insert, 10)).await {
        // The bound is 1 and nothing may queue: some of these are refused.
        assert!(matches!(
            r,
            Ok(_) | Err(ExecutionError::ClientOverloaded { .. })
        ));
    }
    for k in 0..10i64 {
        session.execute_unpaged(&insert, (k, k)).await.unwrap();
    }
    let mut rows = session
        .query_iter(Statement::new("SELECT k, v FROM p.t").with_page_size(3), ())
        .await
        .unwrap()
        .rows_stream::<(i64, i64)>()
        .unwrap();
    let mut n = 0i64;
    while let Some(row) = rows.next().await {
        let (k, _) = row.unwrap();
        n += 1;
        // Between page fetches the stream holds nothing: another request
        // gets the session's only place.
        assert_eq!(session.requests_in_flight(), 0);
        session.execute_unpaged(&update, (n, k)).await.unwrap();
    }
    assert_eq!(n, 10);
}
