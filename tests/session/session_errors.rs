//! The error paths a user matches on, each matched by variant (and the
//! server's error code as data), never by message text: bad credentials,
//! unknown keyspace, syntax error, unavailable, timeout, no node reachable;
//! a failed preparation is a `PrepareError`, and a request's history shows
//! its attempts.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use scylla_cql::frame::response::error::DbError;
use scylla_driver::cluster::control::{ContactError, ControlError};
use scylla_driver::connection::ConnectionError;
use scylla_driver::error::{PrepareError, RequestAttemptError};
use scylla_driver::observability::history::{AttemptResult, HistoryCollector};
use scylla_driver::{Consistency, ExecutionError, NewSessionError, SessionBuilder, Statement};
use scylla_testbed::{Faults, TestCluster};

use crate::common;
use common::{cluster_and_session, create_keyspace};

async fn cluster(auth: bool) -> TestCluster {
    let mut b = TestCluster::builder().nodes(1).shards(1);
    if auth {
        b = b.password_auth("app", "secret");
    }
    b.start().await.unwrap()
}

fn builder(cluster: &TestCluster) -> SessionBuilder {
    SessionBuilder::new().known_node(cluster.cql_addrs()[0].to_string())
}

/// Every contact point failed; each failure, by variant.
fn contact_failures(err: &NewSessionError) -> impl Iterator<Item = &ContactError> {
    let NewSessionError::Control(ControlError::Unreachable(failures)) = err else {
        panic!("expected every contact point to fail, got {err:?}");
    };
    assert!(!failures.is_empty());
    failures.iter().map(|f| &f.error)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_credentials() {
    let cluster = cluster(true).await;
    let err = builder(&cluster)
        .user("app", "wrong")
        .build()
        .await
        .unwrap_err();
    for e in contact_failures(&err) {
        assert!(
            matches!(
                e,
                ContactError::Connect(ConnectionError::Server { error, .. })
                    if matches!(error.error, DbError::AuthenticationError)
            ),
            "{e:?}"
        );
    }
    // And no credentials at all: the driver says so before sending any.
    let err = builder(&cluster).build().await.unwrap_err();
    for e in contact_failures(&err) {
        assert!(
            matches!(
                e,
                ContactError::Connect(ConnectionError::AuthRequired { .. })
            ),
            "{e:?}"
        );
    }
    builder(&cluster)
        .user("app", "secret")
        .build()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_node_reachable() {
    // A loopback address nothing listens on: refused at once.
    let err = SessionBuilder::new()
        .known_node("127.250.250.250:9042")
        .build()
        .await
        .unwrap_err();
    for e in contact_failures(&err) {
        assert!(
            matches!(e, ContactError::Connect(ConnectionError::Open(_))),
            "{e:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_keyspace_syntax_error_and_timeout() {
    let cluster = cluster(false).await;
    // Unknown keyspace at session start: the USE's server error.
    let err = builder(&cluster)
        .use_keyspace("no_such_keyspace", false)
        .build()
        .await
        .unwrap_err();
    match &err {
        NewSessionError::Keyspace(e) => {
            assert!(matches!(e.db_error(), Some(DbError::Invalid)), "{e:?}")
        }
        other => panic!("expected a keyspace error, got {other:?}"),
    }

    // The default request timeout: the statements expected to come back
    // with the server's error get it whatever a loaded machine does to
    // their round trip; only the timeout's statement has a short one.
    let session = builder(&cluster).build().await.unwrap();
    // Unknown keyspace in a statement.
    let err = session
        .query_unpaged("SELECT * FROM no_such_keyspace.t", ())
        .await
        .unwrap_err();
    assert!(matches!(err.db_error(), Some(DbError::Invalid)), "{err:?}");
    // Syntax error.
    let err = session
        .query_unpaged("SELEC nonsense", ())
        .await
        .unwrap_err();
    assert!(
        matches!(err.db_error(), Some(DbError::SyntaxError)),
        "{err:?}"
    );
    // Timeout: the node answers seconds after the request's deadline.
    cluster
        .set_faults(0, Faults::none().with_latency(Duration::from_secs(5)))
        .await
        .unwrap();
    let timeout = Duration::from_millis(300);
    let err = session
        .query_unpaged(
            Statement::new("SELECT release_version FROM system.local").with_timeout(timeout),
            (),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ExecutionError::RequestTimeout(t) if t == timeout),
        "{err:?}"
    );
}

/// RF 3, one node stopped: CL=ALL cannot be met and the coordinator says
/// UNAVAILABLE (required 3, alive 2); the default policy tried another node
/// first, as the request's history shows. CL=ONE still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_is_retried_once_on_another_node() {
    let (cluster, session) =
        cluster_and_session(3, 1, |b| b.request_timeout(Duration::from_secs(5))).await;
    create_keyspace(&session, "ks", 3).await;
    session
        .query_unpaged("CREATE TABLE ks.t (k bigint PRIMARY KEY, v bigint)", ())
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)")
        .await
        .unwrap();
    let mut all = insert.clone().with_consistency(Consistency::All);
    let history = Arc::new(HistoryCollector::new());
    all.set_history_listener(history.clone());
    cluster.topology().set_check_live_replicas(true);
    // Every replica up: ALL is fine.
    session.execute_unpaged(&all, (1i64, 1i64)).await.unwrap();

    cluster.stop_node(2).await.unwrap();
    // Wait until the session saw the node go (bounded), so that no request
    // is caught on the closing connection.
    let gone_by = std::time::Instant::now() + Duration::from_secs(20);
    while session
        .cluster_state()
        .nodes
        .iter()
        .filter(|n| n.pool.is_connected())
        .count()
        > 2
    {
        assert!(
            std::time::Instant::now() < gone_by,
            "node 2 still connected"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let err = session
        .execute_unpaged(&all, (2i64, 2i64))
        .await
        .unwrap_err();
    let ExecutionError::LastAttemptError(RequestAttemptError::DbError(e, _)) = &err else {
        panic!("expected the server's UNAVAILABLE, got {err:?}");
    };
    assert!(
        matches!(
            e,
            DbError::Unavailable {
                consistency: Consistency::All,
                required: 3,
                alive: 2
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.code(), 0x1000);
    assert!(!err.to_string().contains('\n'), "{err}");
    // The first UNAVAILABLE was retried on another node (once), and both
    // nodes are up ones.
    let history = history.take_structured_history();
    let request = history.requests.last().expect("the failed request");
    let attempts = &request.non_speculative_fiber.attempts;
    assert_eq!(attempts.len(), 2, "{history}");
    for a in attempts {
        assert!(
            matches!(
                a.result,
                Some(AttemptResult::Error(
                    _,
                    RequestAttemptError::DbError(DbError::Unavailable { .. }, _),
                    _
                ))
            ),
            "{history}"
        );
        assert!(cluster.cql_addrs()[..2].contains(&a.node_addr), "{history}");
    }
    assert_ne!(attempts[0].node_addr, attempts[1].node_addr, "{history}");

    // ONE needs one live replica.
    session
        .execute_unpaged(&insert.with_consistency(Consistency::One), (3i64, 3i64))
        .await
        .unwrap();
}

/// `prepare` fails with a `PrepareError`; a query with values that had to
/// prepare says so (`ExecutionError::PrepareError`), keeping the server's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_preparation_is_a_prepare_error() {
    let cluster = cluster(false).await;
    let session = builder(&cluster).build().await.unwrap();
    let err = session.prepare("SELEC nonsense ?").await.unwrap_err();
    match &err {
        PrepareError::AllAttemptsFailed {
            first_attempt: RequestAttemptError::DbError(e, _),
        } => assert!(matches!(e, DbError::SyntaxError), "{e:?}"),
        other => panic!("expected the server's refusal, got {other:?}"),
    }
    let err = session
        .query_unpaged(Statement::new("SELEC nonsense ?"), (1i64,))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            ExecutionError::PrepareError(PrepareError::AllAttemptsFailed { .. })
        ),
        "{err:?}"
    );
    assert_eq!(err.db_error(), Some(&DbError::SyntaxError));
    // The preparation's error is the execution's own (transparent): it
    // displays as itself, once.
    let ExecutionError::PrepareError(inner) = &err else {
        unreachable!()
    };
    assert_eq!(err.to_string(), inner.to_string());
}
