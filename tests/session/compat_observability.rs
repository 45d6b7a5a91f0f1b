//! The official `scylla` crate's observability API against the test
//! cluster: `Session::get_metrics` (requests and errors by kind of paging,
//! latency statistics, rates, connections, timeouts), schema agreement
//! (`await_schema_agreement` returning the agreed version,
//! `check_schema_agreement`, `auto_await_schema_agreement`) and the
//! builder's trace fetch settings.
#![allow(clippy::unwrap_used, missing_docs)]

use std::num::NonZeroU32;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use scylla_driver::observability::metrics::{Metrics, MetricsError};
use scylla_driver::response::PagingState;
use scylla_driver::session::RowStream;
use scylla_driver::statement::{Consistency, Statement};
use scylla_driver::{Session, SessionBuilder};
use scylla_testbed::{Faults, ShardAwarePortMode, TestCluster};
use uuid::Uuid;

use crate::common;
use common::{cluster_and_session, create_keyspace};

/// Long enough for any answer on a busy machine; a hang fails the test.
const NO_HANG: Duration = Duration::from_secs(20);

/// The request and error counters by kind, in one comparable value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    unpaged: u64,
    manual: u64,
    auto: u64,
    errors_unpaged: u64,
    errors_manual: u64,
    errors_auto: u64,
}

impl Counts {
    fn of(m: &Metrics) -> Self {
        Counts {
            unpaged: m.get_requests_unpaged_num(),
            manual: m.get_requests_manually_paged_num(),
            auto: m.get_requests_automatically_paged_num(),
            errors_unpaged: m.get_errors_unpaged_num(),
            errors_manual: m.get_errors_manually_paged_num(),
            errors_auto: m.get_errors_automatically_paged_num(),
        }
    }

    fn since(self, before: Counts) -> Counts {
        Counts {
            unpaged: self.unpaged - before.unpaged,
            manual: self.manual - before.manual,
            auto: self.auto - before.auto,
            errors_unpaged: self.errors_unpaged - before.errors_unpaged,
            errors_manual: self.errors_manual - before.errors_manual,
            errors_auto: self.errors_auto - before.errors_auto,
        }
    }
}

const NONE: Counts = Counts {
    unpaged: 0,
    manual: 0,
    auto: 0,
    errors_unpaged: 0,
    errors_manual: 0,
    errors_auto: 0,
};

/// Every row of a stream (at most 1000), or its first error.
async fn collect(
    mut rows: RowStream<(i32,)>,
) -> Result<Vec<(i32,)>, scylla_driver::ExecutionError> {
    let mut all = Vec::new();
    for _ in 0..1000 {
        match rows.next().await {
            Some(row) => all.push(row?),
            None => break,
        }
    }
    Ok(all)
}

async fn fill(session: &Session, rows: i32) {
    create_keyspace(session, "obs", 1).await;
    session
        .query_unpaged("CREATE TABLE obs.t (a int PRIMARY KEY)", ())
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO obs.t (a) VALUES (?)")
        .await
        .unwrap();
    for a in 0..rows {
        session.execute_unpaged(&insert, (a,)).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_and_errors_are_counted_by_kind_of_paging() {
    let (_cluster, session) = cluster_and_session(2, 2, |b| b).await;
    let metrics = session.get_metrics();
    // Nothing ran yet: no latency to describe.
    assert!(matches!(
        metrics.get_latency_avg_ms(),
        Err(MetricsError::Empty)
    ));
    assert!(matches!(metrics.get_snapshot(), Err(MetricsError::Empty)));
    assert_eq!(Counts::of(&metrics), NONE);

    // CREATE KEYSPACE, CREATE TABLE and 25 inserts: 27 unpaged requests.
    fill(&session, 25).await;
    let after_fill = Counts::of(&metrics);
    assert_eq!(
        after_fill,
        Counts {
            unpaged: 27,
            ..NONE
        }
    );

    // A row stream of 25 rows in pages of 10: 3 pages, each a request.
    let select = Statement::new("SELECT a FROM obs.t").with_page_size(10);
    let stream = session.query_iter(select.clone(), ()).await.unwrap();
    let rows = collect(stream.rows_stream::<(i32,)>().unwrap())
        .await
        .unwrap();
    assert_eq!(rows.len(), 25);
    let after_stream = Counts::of(&metrics);
    assert_eq!(after_stream.since(after_fill), Counts { auto: 3, ..NONE });

    // By hand: the same 3 pages.
    let mut state = PagingState::start();
    let mut pages = 0;
    for _ in 0..10 {
        let (_, next) = session
            .query_single_page(select.clone(), (), state)
            .await
            .unwrap();
        pages += 1;
        match next.into_paging_control_flow() {
            ControlFlow::Break(()) => break,
            ControlFlow::Continue(s) => state = s,
        }
    }
    assert_eq!(pages, 3);
    let after_manual = Counts::of(&metrics);
    assert_eq!(
        after_manual.since(after_stream),
        Counts { manual: 3, ..NONE }
    );

    // One failure of each kind: the server refuses a missing table.
    let missing = Statement::new("SELECT a FROM obs.missing");
    assert!(session.query_unpaged(missing.clone(), ()).await.is_err());
    assert!(session
        .query_single_page(missing.clone(), (), PagingState::start())
        .await
        .is_err());
    let streamed: Result<Vec<(i32,)>, _> = match session.query_iter(missing, ()).await {
        Ok(pager) => collect(pager.rows_stream::<(i32,)>().unwrap()).await,
        Err(e) => Err(e),
    };
    assert!(streamed.is_err());
    let after_errors = Counts::of(&metrics);
    assert_eq!(
        after_errors.since(after_manual),
        Counts {
            unpaged: 1,
            manual: 1,
            auto: 1,
            errors_unpaged: 1,
            errors_manual: 1,
            errors_auto: 1,
        }
    );
    // The official crate's older totals leave row streams out.
    #[allow(deprecated)]
    {
        assert_eq!(metrics.get_errors_num(), 2);
        assert_eq!(metrics.get_queries_num(), 27 + 1 + 3 + 1);
        assert_eq!(metrics.get_queries_iter_num(), 3 + 1);
        assert_eq!(metrics.get_errors_iter_num(), 1);
    }
    let all = session.metrics().snapshot();
    assert_eq!((all.requests, all.request_errors), (27 + 3 + 3 + 3, 3));
    assert_eq!(metrics.get_request_timeouts(), 0);
    // A second handle reads the same counters.
    assert_eq!(Counts::of(&session.get_metrics()), after_errors);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_statistics_and_rates_follow_the_requests() {
    let (cluster, session) = cluster_and_session(1, 2, |b| b).await;
    // Every answer of the node waits 5 ms: latencies of at least 5 ms.
    cluster
        .set_faults(
            0,
            Faults {
                latency: Duration::from_millis(5),
                ..Faults::none()
            },
        )
        .await
        .unwrap();
    let started = Instant::now();
    fill(&session, 20).await;
    let elapsed = started.elapsed().as_secs_f64();
    let metrics = session.get_metrics();

    let snapshot = metrics.get_snapshot().unwrap();
    assert!(snapshot.min >= 4, "{snapshot:?}");
    assert!(snapshot.min <= snapshot.median, "{snapshot:?}");
    assert!(snapshot.median <= snapshot.percentile_75, "{snapshot:?}");
    assert!(
        snapshot.percentile_75 <= snapshot.percentile_95
            && snapshot.percentile_95 <= snapshot.percentile_98
            && snapshot.percentile_98 <= snapshot.percentile_99
            && snapshot.percentile_99 <= snapshot.percentile_99_9
            && snapshot.percentile_99_9 <= snapshot.max,
        "{snapshot:?}"
    );
    assert!(
        snapshot.min <= snapshot.mean && snapshot.mean <= snapshot.max,
        "{snapshot:?}"
    );
    let avg = metrics.get_latency_avg_ms().unwrap();
    assert_eq!(avg, snapshot.mean);
    assert_eq!(
        metrics.get_latency_percentile_ms(50.0).unwrap(),
        snapshot.median
    );

    // 22 requests over at most `elapsed` seconds (and the session lived
    // a little longer than that).
    let mean = metrics.get_mean_rate();
    assert!(mean > 0.0 && mean <= 22.0 / elapsed, "{mean} vs {elapsed}");
    // The first read starts the averages at the mean so far.
    let one = metrics.get_one_minute_rate();
    assert!(one > 0.0 && one <= 22.0 / elapsed, "{one}");
    // Idle since: every average only decays, the one-minute one fastest.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (one_later, five_later, fifteen_later) = (
        metrics.get_one_minute_rate(),
        metrics.get_five_minute_rate(),
        metrics.get_fifteen_minute_rate(),
    );
    assert!(one_later < one, "{one_later} !< {one}");
    assert!(
        one_later < five_later && five_later < fifteen_later,
        "{one_later} {five_later} {fifteen_later}"
    );
    assert!(fifteen_later <= one, "{fifteen_later} {one}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_and_connection_timeouts_are_counted() {
    // Node 0's shard-aware port accepts and never answers: those
    // handshakes time out, and the pool falls back to the regular port.
    let cluster = TestCluster::builder()
        .nodes(2)
        .shards(3)
        .faults(
            0,
            Faults::none().with_shard_aware_port(ShardAwarePortMode::Silent),
        )
        .start()
        .await
        .unwrap();
    // Long enough for every handshake that gets answers (the control
    // connection's included) on a loaded machine; only the silent port's
    // wait it out.
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[1].to_string())
        .handshake_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(NO_HANG).await);
    let metrics = session.get_metrics();
    // One connection per shard of each node.
    assert_eq!(metrics.get_total_connections(), 6);
    assert!(metrics.get_connection_timeouts() >= 1);
    assert_eq!(
        metrics.get_connection_timeouts(),
        session.metrics().snapshot().connect_timeouts
    );
    session.close(Duration::from_secs(1)).await;
    drop(session);
    // The pools are gone with the session.
    let deadline = Instant::now() + NO_HANG;
    while metrics.get_total_connections() != 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(metrics.get_total_connections(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_timeout_is_counted() {
    let (cluster, session) = cluster_and_session(1, 1, |b| b).await;
    create_keyspace(&session, "obs", 1).await;
    cluster
        .set_faults(
            0,
            Faults {
                latency: Duration::from_millis(500),
                ..Faults::none()
            },
        )
        .await
        .unwrap();
    let slow = Statement::new("SELECT keyspace_name FROM system_schema.keyspaces")
        .with_timeout(Duration::from_millis(50));
    let err = session.query_unpaged(slow, ()).await.unwrap_err();
    assert!(err.is_timeout(), "{err}");
    let metrics = session.get_metrics();
    assert_eq!(metrics.get_request_timeouts(), 1);
    assert_eq!(metrics.get_errors_unpaged_num(), 1);
}

/// The schema version `system.local` reports, read as a user would.
async fn local_version(session: &Session) -> Uuid {
    let (v,): (Uuid,) = session
        .query_unpaged(
            "SELECT schema_version FROM system.local WHERE key = 'local'",
            (),
        )
        .await
        .unwrap()
        .single_row()
        .unwrap();
    v
}

/// Another client's DDL applied between this session's DDL and its first
/// look at the nodes' versions: every node is then on that later version,
/// which includes this change, and the wait ends on it (it used to wait for
/// the version read from the coordinator right after the change until the
/// agreement timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_change_by_another_client_ends_the_agreement_wait() {
    let timeout = Duration::from_secs(5);
    let (cluster, session) = cluster_and_session(1, 1, |b| {
        b.schema_agreement_timeout(timeout)
            .schema_agreement_interval(Duration::from_millis(20))
    })
    .await;
    let other = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .auto_await_schema_agreement(false)
        .build()
        .await
        .unwrap();
    create_keyspace(&session, "later", 1).await;
    // Every answer of the node now leaves 400 ms after its request arrived
    // (and was executed): this session's DDL is answered at about +400 ms,
    // its read of the coordinator's version runs then, before the other
    // client's DDL (+600 ms), and its first look at the versions at about
    // +800 ms, after it. A machine slow enough to shift these by 200 ms
    // makes the test pass without the race, never fail.
    cluster
        .set_faults(
            0,
            Faults {
                latency: Duration::from_millis(400),
                ..Faults::none()
            },
        )
        .await
        .unwrap();
    let started = Instant::now();
    let ddl = tokio::spawn(async move {
        session
            .query_unpaged("CREATE TABLE later.a (k int PRIMARY KEY)", ())
            .await
            .map(|_| ())
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    other
        .query_unpaged("CREATE TABLE later.b (k int PRIMARY KEY)", ())
        .await
        .unwrap();
    let outcome = tokio::time::timeout(NO_HANG, ddl).await.unwrap().unwrap();
    if let Err(e) = outcome {
        panic!("after {:?}: {e}", started.elapsed());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_agreement_returns_the_version_the_nodes_report() {
    let (_cluster, session) = cluster_and_session(3, 1, |b| {
        b.auto_await_schema_agreement(false)
            .schema_agreement_interval(Duration::from_millis(20))
    })
    .await;
    let before = tokio::time::timeout(NO_HANG, session.await_schema_agreement())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before, local_version(&session).await);
    assert_eq!(
        session.check_schema_agreement().await.unwrap(),
        Some(before)
    );

    create_keyspace(&session, "agree", 3).await;
    let after = tokio::time::timeout(NO_HANG, session.await_schema_agreement())
        .await
        .unwrap()
        .unwrap();
    assert_ne!(after, before, "a schema change makes a new version");
    assert_eq!(after, local_version(&session).await);
    assert_eq!(session.check_schema_agreement().await.unwrap(), Some(after));
    // Without the automatic wait the metadata still follows the change.
    session
        .query_unpaged("CREATE TABLE agree.t (a int PRIMARY KEY)", ())
        .await
        .unwrap();
    session.await_schema_agreement().await.unwrap();
    let insert = session
        .prepare("INSERT INTO agree.t (a) VALUES (?)")
        .await
        .unwrap();
    session.execute_unpaged(&insert, (1,)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builder_sets_how_traces_are_fetched() {
    let (cluster, session) = cluster_and_session(1, 1, |b| {
        b.tracing_info_fetch_attempts(NonZeroU32::new(3).unwrap())
            .tracing_info_fetch_interval(Duration::from_millis(40))
            .tracing_info_fetch_consistency(Consistency::One)
    })
    .await;
    cluster.topology().set_record_traces(true);
    let traced =
        Statement::new("SELECT keyspace_name FROM system_schema.keyspaces").with_tracing(true);
    let id = session
        .query_unpaged(traced, ())
        .await
        .unwrap()
        .tracing_id()
        .unwrap();
    // By reference, as the official crate takes it, and by value.
    let trace = session.get_tracing_info(&id).await.unwrap();
    assert_eq!(trace, session.get_tracing_info(id).await.unwrap());
    let duration = trace.duration.unwrap();
    assert!(duration >= 0);
    assert_eq!(
        trace.elapsed(),
        Some(Duration::from_micros(duration as u64))
    );
    for e in &trace.events {
        assert_eq!(
            e.elapsed(),
            e.source_elapsed.map(|us| Duration::from_micros(us as u64))
        );
    }
    // A trace that never comes: three reads, two waits of 40 ms.
    let started = Instant::now();
    let err = session
        .get_tracing_info(Uuid::from_u128(1))
        .await
        .unwrap_err();
    let took = started.elapsed();
    match err {
        scylla_driver::observability::tracing::TracingError::NotComplete {
            attempts,
            waited,
            ..
        } => {
            assert_eq!(attempts, 3);
            assert_eq!(waited, Duration::from_millis(80));
        }
        other => panic!("{other}"),
    }
    assert!(took >= Duration::from_millis(80), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_prepare_reports_its_trace() {
    let (cluster, session) = cluster_and_session(2, 1, |b| b).await;
    cluster.topology().set_record_traces(true);
    let text = "SELECT keyspace_name FROM system_schema.keyspaces";
    // Untraced: no trace id; and now cached.
    let plain = session.prepare(text).await.unwrap();
    assert!(plain.prepare_tracing_ids.is_empty());
    // Traced: prepared again despite the cache, so the PREPARE has a trace.
    let traced = session
        .prepare(Statement::new(text).with_tracing(true))
        .await
        .unwrap();
    assert_eq!(traced.id(), plain.id());
    assert_eq!(traced.prepare_tracing_ids.len(), 1);
    let trace = session
        .get_tracing_info(&traced.prepare_tracing_ids[0])
        .await
        .unwrap();
    assert_eq!(trace.command.as_deref(), Some("PREPARE"));
    // The cache does not hand that trace to the next caller.
    let again = session.prepare(text).await.unwrap();
    assert!(again.prepare_tracing_ids.is_empty());
}
