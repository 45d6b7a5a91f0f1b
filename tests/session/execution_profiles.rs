//! Execution profiles end to end against the test cluster: a recording
//! layer around the default CQL handler decodes every QUERY (on table
//! `pt.t`), EXECUTE and BATCH as the server sees it, so the tests judge the
//! consistency, serial consistency and page size that reached the node; a
//! node's injected latency judges timeouts. Precedence: statement option >
//! statement's profile > session default profile > session config.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use scylla_cql::frame::header::{Flags, Opcode};
use scylla_cql::frame::request::{Request as Decoded, RequestContext};
use scylla_driver::policy::retry::FallthroughRetryPolicy;
use scylla_driver::policy::speculative::SpeculativeExecution;
use scylla_driver::statement::{
    Batch, BatchType, Consistency, ExecutionProfile, SerialConsistency, Statement,
};
use scylla_driver::{ExecutionError, Session, SessionBuilder};
use scylla_testbed::{
    ConnCtx, CqlHandler, Faults, HandlerFuture, Request, RequestHandler, TestCluster,
};

/// What the server saw of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    opcode: Opcode,
    consistency: Consistency,
    serial_consistency: Option<Consistency>,
    page_size: Option<i32>,
}

/// The default handler, recording what requests on `pt.t` carried.
struct Recorder {
    inner: CqlHandler,
    seen: Mutex<Vec<Seen>>,
}

impl Recorder {
    fn record(&self, ctx: &ConnCtx, request: &Request) {
        if request.header.flags.contains(Flags::COMPRESSION) {
            return;
        }
        let rctx = RequestContext {
            version: ctx.protocol_version(),
            use_metadata_id: ctx.use_metadata_id(),
            tablets_routing_v2: false,
        };
        let Ok(decoded) = Decoded::decode_in(request.header.opcode, &request.body, &rctx) else {
            return;
        };
        let seen = match decoded {
            Decoded::Query(q) if q.contents.contains("pt.t") => Seen {
                opcode: Opcode::Query,
                consistency: q.params.consistency,
                serial_consistency: q.params.serial_consistency,
                page_size: q.params.page_size,
            },
            Decoded::Execute(e) => Seen {
                opcode: Opcode::Execute,
                consistency: e.params.consistency,
                serial_consistency: e.params.serial_consistency,
                page_size: e.params.page_size,
            },
            Decoded::Batch(b) => Seen {
                opcode: Opcode::Batch,
                consistency: b.consistency,
                serial_consistency: b.serial_consistency,
                page_size: None,
            },
            _ => return,
        };
        self.seen.lock().unwrap().push(seen);
    }

    /// What was recorded since the last call.
    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl RequestHandler for Recorder {
    fn handle<'a>(&'a self, ctx: &'a ConnCtx, request: Request) -> HandlerFuture<'a> {
        self.record(ctx, &request);
        self.inner.handle(ctx, request)
    }
}

async fn start(
    configure: impl FnOnce(SessionBuilder) -> SessionBuilder,
) -> (TestCluster, Arc<Recorder>, Session) {
    start_nodes(1, configure).await
}

async fn start_nodes(
    nodes: usize,
    configure: impl FnOnce(SessionBuilder) -> SessionBuilder,
) -> (TestCluster, Arc<Recorder>, Session) {
    let recorder = Arc::new(Recorder {
        inner: CqlHandler::new(),
        seen: Mutex::new(Vec::new()),
    });
    let cluster = TestCluster::builder()
        .nodes(nodes)
        .shards(2)
        .handler(recorder.clone())
        .start()
        .await
        .unwrap();
    let builder = SessionBuilder::new().known_node(cluster.cql_addrs()[0].to_string());
    let session = configure(builder).build().await.unwrap();
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    session
        .query_unpaged(
            "CREATE KEYSPACE pt WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}",
            (),
        )
        .await
        .unwrap();
    session
        .query_unpaged("CREATE TABLE pt.t (k int PRIMARY KEY, v int)", ())
        .await
        .unwrap();
    recorder.take();
    (cluster, recorder, session)
}

/// The one request recorded since the last `take`.
fn only(recorder: &Recorder) -> Seen {
    let seen = recorder.take();
    assert_eq!(seen.len(), 1, "{seen:?}");
    seen[0]
}

fn profiled(b: SessionBuilder) -> SessionBuilder {
    b.consistency(Consistency::Quorum)
        .page_size(100)
        .default_execution_profile(
            ExecutionProfile::builder()
                .consistency(Consistency::Two)
                .build(),
        )
        .execution_profile(
            "reporting",
            ExecutionProfile::builder()
                .consistency(Consistency::One)
                .serial_consistency(Some(SerialConsistency::LocalSerial))
                .page_size(7)
                .build(),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_s_settings_reach_the_server() {
    let (_cluster, rec, session) = start(profiled).await;
    let reporting = session.execution_profile("reporting").unwrap();
    assert_eq!(reporting.name(), "reporting");

    // No profile: the session's default profile beats the session config.
    session
        .query_single_page("SELECT v FROM pt.t", (), None)
        .await
        .unwrap();
    let seen = only(&rec);
    assert_eq!(
        (seen.consistency, seen.serial_consistency, seen.page_size),
        (Consistency::Two, None, Some(100))
    );

    // The statement's profile beats the default profile and the config.
    let s = Statement::new("SELECT v FROM pt.t").with_execution_profile(reporting.clone());
    session
        .query_single_page(s.clone(), (), None)
        .await
        .unwrap();
    let seen = only(&rec);
    assert_eq!(
        (seen.consistency, seen.serial_consistency, seen.page_size),
        (Consistency::One, Some(Consistency::LocalSerial), Some(7))
    );

    // The statement's own options beat its profile, field by field.
    let s = s
        .with_consistency(Consistency::Three)
        .with_page_size(9)
        .with_serial_consistency(Consistency::Serial);
    session.query_single_page(s, (), None).await.unwrap();
    let seen = only(&rec);
    assert_eq!(
        (seen.consistency, seen.serial_consistency, seen.page_size),
        (Consistency::Three, Some(Consistency::Serial), Some(9))
    );

    // Prepared statements and batches take profiles too.
    let insert = session
        .prepare(
            Statement::new("INSERT INTO pt.t (k, v) VALUES (?, ?)")
                .with_execution_profile(reporting.clone()),
        )
        .await
        .unwrap();
    rec.take();
    session.execute_unpaged(&insert, (1, 1)).await.unwrap();
    let seen = only(&rec);
    assert_eq!(seen.opcode, Opcode::Execute);
    assert_eq!(
        (seen.consistency, seen.serial_consistency),
        (Consistency::One, Some(Consistency::LocalSerial))
    );
    let plain = insert.clone().with_execution_profile(
        ExecutionProfile::builder()
            .consistency(Consistency::All)
            .build()
            .into_handle_with_label("ad hoc".to_owned()),
    );
    session.execute_unpaged(&plain, (2, 2)).await.unwrap();
    assert_eq!(only(&rec).consistency, Consistency::All);

    let mut batch = Batch::new(BatchType::Unlogged).with_execution_profile(reporting);
    batch.append(insert.clone());
    batch.append(insert);
    session.batch(&batch, &[&(3, 3), &(4, 4)]).await.unwrap();
    let seen = only(&rec);
    assert_eq!(seen.opcode, Opcode::Batch);
    assert_eq!(
        (seen.consistency, seen.serial_consistency),
        (Consistency::One, Some(Consistency::LocalSerial))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_s_timeout_applies_and_a_statement_timeout_beats_it() {
    let (cluster, _rec, session) = start(|b| {
        b.request_timeout(Duration::from_secs(10))
            .execution_profile(
                "impatient",
                ExecutionProfile::builder()
                    .request_timeout(Some(Duration::from_millis(150)))
                    .retry_policy(Arc::new(FallthroughRetryPolicy))
                    .build(),
            )
    })
    .await;
    let impatient = session.execution_profile("impatient").unwrap();
    // Answers 1.5 s late: the profile's 150 ms end the request long before
    // (the timeout the error reports says whose it was; a request that
    // waited for the answer would have succeeded).
    cluster
        .set_faults(0, Faults::none().with_latency(Duration::from_millis(1500)))
        .await
        .unwrap();
    let s = Statement::new("SELECT v FROM pt.t").with_execution_profile(impatient);
    let err = session.query_unpaged(s.clone(), ()).await.unwrap_err();
    assert!(
        matches!(err, ExecutionError::RequestTimeout(timeout) if timeout == Duration::from_millis(150)),
        "{err:?}"
    );

    // Without the profile the session's 10 s apply, and the request waits
    // out the latency.
    session
        .query_unpaged("SELECT v FROM pt.t", ())
        .await
        .unwrap();
    // The statement's own timeout beats its profile's.
    session
        .query_unpaged(s.with_timeout(Duration::from_secs(5)), ())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_profile_name_is_an_error() {
    let (_cluster, _rec, session) = start(profiled).await;
    let err = session.execution_profile("reportin").unwrap_err();
    assert!(
        matches!(&err, ExecutionError::UnknownExecutionProfile(n) if n == "reportin"),
        "{err:?}"
    );
    assert!(err.to_string().contains("\"reportin\""), "{err}");
    // Only registered names resolve; the default profile has no name.
    assert!(session.execution_profile("default").is_err());
    assert!(session.execution_profile("reporting").is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_s_speculative_execution_applies_only_to_its_statements() {
    // Plans that ignore latency: this is about the profile's speculation,
    // which latency-aware plans would make unneeded once the plain requests
    // below taught them which nodes are slow.
    let (cluster, _rec, session) = start_nodes(3, |b| {
        b.latency_aware_routing(false).execution_profile(
            "hedged",
            ExecutionProfile::builder()
                .speculative_execution(SpeculativeExecution::new(3, Duration::from_millis(30)))
                .build(),
        )
    })
    .await;
    let hedged = session.execution_profile("hedged").unwrap();
    let plain = session
        .prepare(Statement::new("SELECT v FROM pt.t WHERE k = ?").with_idempotent(true))
        .await
        .unwrap();
    let with_profile = plain.clone().with_execution_profile(hedged);
    // Two of three nodes answer after 400 ms.
    for i in [1, 2] {
        cluster
            .set_faults(i, Faults::none().with_latency(Duration::from_millis(400)))
            .await
            .unwrap();
    }
    for k in 0..10 {
        session.execute_unpaged(&plain, (k,)).await.unwrap();
    }
    // The session has no speculative execution: none started.
    assert_eq!(session.metrics().snapshot().speculative_attempts, 0);
    let started = std::time::Instant::now();
    for k in 0..10 {
        session.execute_unpaged(&with_profile, (k,)).await.unwrap();
    }
    let per_request = started.elapsed() / 10;
    assert!(session.metrics().snapshot().speculative_attempts > 0);
    assert!(per_request < Duration::from_millis(300), "{per_request:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remapped_handle_changes_its_statements_and_its_sessions_from_the_next_request() {
    let mut handle = ExecutionProfile::builder()
        .consistency(Consistency::One)
        .page_size(7)
        .build()
        .into_handle_with_label("remapped".to_owned());
    // The handle is the session's default, and a statement's profile.
    let (_cluster, rec, session) = start(|b| {
        b.consistency(Consistency::Quorum)
            .default_execution_profile(
                ExecutionProfile::builder()
                    .consistency(Consistency::Two)
                    .build(),
            )
            .default_execution_profile_handle(handle.clone())
    })
    .await;
    let plain = Statement::new("SELECT v FROM pt.t");
    let profiled = plain.clone().with_execution_profile(handle.clone());
    let insert = session
        .prepare(Statement::new("INSERT INTO pt.t (k, v) VALUES (?, ?)"))
        .await
        .unwrap();
    rec.take();

    let (session_ref, rec_ref) = (&session, &*rec);
    let seen = move |s: &Statement| {
        let s = s.clone();
        async move {
            session_ref.query_single_page(s, (), None).await.unwrap();
            let seen = only(rec_ref);
            (seen.consistency, seen.page_size)
        }
    };
    // The handle's set fields beat the default profile's (and the config).
    assert_eq!(seen(&plain).await, (Consistency::One, Some(7)));
    assert_eq!(seen(&profiled).await, (Consistency::One, Some(7)));

    // Re-pointed: the statement and the session follow, prepared
    // statements too; a field the new profile leaves unset falls through to
    // the default profile.
    handle.map_to_another_profile(ExecutionProfile::builder().page_size(3).build());
    assert_eq!(seen(&plain).await, (Consistency::Two, Some(3)));
    assert_eq!(seen(&profiled).await, (Consistency::Two, Some(3)));
    handle.map_to_another_profile(
        ExecutionProfile::builder()
            .consistency(Consistency::All)
            .build(),
    );
    session.execute_unpaged(&insert, (1, 1)).await.unwrap();
    assert_eq!(only(&rec).consistency, Consistency::All);
    // A statement option still beats the handle.
    let own = profiled.clone().with_consistency(Consistency::Three);
    assert_eq!(seen(&own).await.0, Consistency::Three);
}

/// A retry policy that counts the failures it is asked about and gives up.
#[derive(Debug, Default)]
struct CountingFail(std::sync::atomic::AtomicUsize);

impl scylla_driver::policy::retry::RetryPolicy for CountingFail {
    fn decide(
        &self,
        _failure: scylla_driver::policy::retry::AttemptFailure<'_>,
        _ctx: &scylla_driver::policy::retry::RetryContext,
    ) -> scylla_driver::policy::retry::RetryDecision {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        scylla_driver::policy::retry::RetryDecision::Fail
    }
}

/// A statement's own retry policy decides over its profile's and the
/// session's: an idempotent read meeting OVERLOADED, which the session's
/// default policy retries elsewhere, fails at once, and only the
/// statement's policy was asked; cleared, the profile's is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statements_retry_policy_wins_over_its_profiles() {
    use scylla_driver::errors::{DbError, RequestAttemptError};
    use std::sync::atomic::Ordering;

    let (cluster, session) = crate::common::cluster_and_session(1, 1, |b| b).await;
    let of_profile = Arc::new(CountingFail::default());
    let of_statement = Arc::new(CountingFail::default());
    let profile = ExecutionProfile::builder()
        .retry_policy(of_profile.clone())
        .build();
    let mut read = Statement::new("SELECT release_version FROM system.local")
        .with_idempotent(true)
        .with_execution_profile(profile.into_handle_with_label("counting".to_owned()));
    read.set_retry_policy(Some(of_statement.clone()));
    assert!(read.get_retry_policy().is_some());

    cluster
        .set_faults(0, Faults::none().with_overloaded(1))
        .await
        .unwrap();
    let err = session.query_unpaged(read.clone(), ()).await.unwrap_err();
    assert!(
        matches!(
            err,
            ExecutionError::LastAttemptError(RequestAttemptError::DbError(DbError::Overloaded, _))
        ),
        "{err:?}"
    );
    assert_eq!(of_statement.0.load(Ordering::Relaxed), 1);
    assert_eq!(of_profile.0.load(Ordering::Relaxed), 0);

    read.set_retry_policy(None);
    cluster
        .set_faults(0, Faults::none().with_overloaded(1))
        .await
        .unwrap();
    session.query_unpaged(read, ()).await.unwrap_err();
    assert_eq!(of_statement.0.load(Ordering::Relaxed), 1);
    assert_eq!(of_profile.0.load(Ordering::Relaxed), 1);
}
