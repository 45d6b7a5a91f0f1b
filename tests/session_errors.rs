//! The error paths a user matches on, each matched by variant (and the
//! server's error code as data), never by message text: bad credentials,
//! unknown keyspace, syntax error, timeout, no node reachable.
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use scylla_cql::frame::response::error::DbError;
use scylla_driver::cluster::control::{ContactError, ControlError};
use scylla_driver::connection::ConnectionError;
use scylla_driver::{ExecutionError, NewSessionError, SessionBuilder};
use scylla_testbed::{Faults, TestCluster};

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
        .use_keyspace("no_such_keyspace")
        .build()
        .await
        .unwrap_err();
    match &err {
        NewSessionError::Keyspace(e) => {
            assert!(matches!(e.db_error(), Some(DbError::Invalid)), "{e:?}")
        }
        other => panic!("expected a keyspace error, got {other:?}"),
    }

    let session = builder(&cluster)
        .request_timeout(Duration::from_millis(300))
        .build()
        .await
        .unwrap();
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
    // Timeout: the node answers after the request's deadline.
    cluster
        .set_faults(0, Faults::none().with_latency(Duration::from_millis(800)))
        .await
        .unwrap();
    let err = session
        .query_unpaged("SELECT release_version FROM system.local", ())
        .await
        .unwrap_err();
    assert!(matches!(err, ExecutionError::Timeout { .. }), "{err:?}");
}
