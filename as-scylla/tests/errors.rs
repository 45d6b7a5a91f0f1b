//! Error handling written the way programs for the official `scylla` 1.x
//! crate write it: a classification that matches every `ExecutionError`
//! and `RequestAttemptError` variant the official crate has (ending in
//! `unreachable!()`, as change-data-capture consumers do), a server error's
//! code and message out of `LastAttemptError(RequestAttemptError::DbError)`,
//! `RequestTimeout`, a node without connections as
//! `ConnectionPoolError::Broken`, and values of a type that is neither
//! `Send` nor `Sync` passed to `query_unpaged` (through a generic function)
//! and to `batch`,
//! and a hand-written serializer that refuses a column type with the
//! official `BuiltinTypeCheckError`.
//! Run against the in-process test cluster.
#![allow(clippy::unwrap_used, missing_docs)]

use std::rc::Rc;
use std::time::{Duration, Instant};

use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::cluster::metadata::{ColumnType, NativeType};
use scylla::errors::BadQuery;
use scylla::errors::{
    ConnectionPoolError, DbError, ExecutionError, PrepareError, RequestAttemptError, RequestError,
};
use scylla::serialize::row::{RowSerializationContext, SerializeRow};
use scylla::serialize::value::{BuiltinTypeCheckError, BuiltinTypeCheckErrorKind, SerializeValue};
use scylla::serialize::writers::{CellWriter, RowWriter, WrittenCellProof};
use scylla::serialize::SerializationError;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::unprepared::Statement;
use scylla_testbed::{Faults, TestCluster};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Whether trying again later may help, by the error's shape only.
fn is_transient(error: &ExecutionError) -> bool {
    match error {
        ExecutionError::RequestTimeout(_) => true,
        ExecutionError::LastAttemptError(error) => match error {
            RequestAttemptError::BrokenConnectionError(_)
            | RequestAttemptError::UnableToAllocStreamId => true,
            RequestAttemptError::DbError(db_error, _) => matches!(
                db_error,
                DbError::Unavailable { .. }
                    | DbError::ReadTimeout { .. }
                    | DbError::Overloaded
                    | DbError::IsBootstrapping
                    | DbError::RateLimitReached { .. }
            ),
            RequestAttemptError::SerializationError(_)
            | RequestAttemptError::CqlRequestSerialization(_)
            | RequestAttemptError::BodyExtensionsParseError(_)
            | RequestAttemptError::CqlResultParseError(_)
            | RequestAttemptError::CqlErrorParseError(_)
            | RequestAttemptError::UnexpectedResponse(_)
            | RequestAttemptError::RepreparedIdChanged { .. }
            | RequestAttemptError::RepreparedIdMissingInBatch
            | RequestAttemptError::NonfinishedPagingState => false,
            _ => unreachable!("an attempt error outside the official set: {error:?}"),
        },
        ExecutionError::ConnectionPoolError(error) => match error {
            ConnectionPoolError::NodeDisabledByHostFilter => false,
            ConnectionPoolError::Broken { .. } | ConnectionPoolError::Initializing => true,
            _ => unreachable!(),
        },
        ExecutionError::BadQuery(_)
        | ExecutionError::EmptyPlan
        | ExecutionError::PrepareError(_)
        | ExecutionError::UseKeyspaceError(_)
        | ExecutionError::SchemaAgreementError(_)
        | ExecutionError::MetadataError(_) => false,
        _ => unreachable!("an execution error outside the official set: {error:?}"),
    }
}

/// Runs `query` with whatever values the caller has: no `Send` or `Sync`
/// bound, as programs for the official crate write such helpers.
async fn run_statement(
    session: &Session,
    query: Statement,
    values: impl SerializeRow,
) -> Result<(), ExecutionError> {
    session.query_unpaged(query, values).await.map(|_| ())
}

/// Values that are neither `Send` nor `Sync` (an `Rc`), serialized by
/// hand through the official row writer.
struct Local {
    k: i32,
    v: Rc<String>,
}

impl SerializeRow for Local {
    fn serialize(
        &self,
        ctx: &RowSerializationContext<'_>,
        writer: &mut RowWriter,
    ) -> Result<(), SerializationError> {
        SerializeRow::serialize(&(self.k, self.v.as_str()), ctx, writer)
    }

    fn is_empty(&self) -> bool {
        false
    }
}

/// A counter value, serialized by hand, as only a `counter` column.
struct CounterOnly(i64);

impl SerializeValue for CounterOnly {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        if typ != &ColumnType::Native(NativeType::Counter) {
            return Err(SerializationError::new(BuiltinTypeCheckError {
                rust_name: std::any::type_name::<CounterOnly>(),
                got: typ.clone().into_owned(),
                kind: BuiltinTypeCheckErrorKind::MismatchedType {
                    expected: &[ColumnType::Native(NativeType::Counter)],
                },
            }));
        }
        writer
            .set_value(self.0.to_be_bytes().as_slice())
            .map_err(SerializationError::new)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_have_the_official_shapes() -> Result<(), Error> {
    let cluster = TestCluster::builder().nodes(1).shards(1).start().await?;
    let node = cluster.cql_addrs()[0].to_string();
    let impatient = ExecutionProfile::builder()
        .request_timeout(Some(Duration::from_millis(200)))
        .build()
        .into_handle();
    let session: Session = SessionBuilder::new()
        .known_node(&node)
        .default_execution_profile_handle(impatient)
        .build()
        .await?;

    // A syntax error: the server's code and message.
    let err = session
        .query_unpaged("SELEC nonsense", &[])
        .await
        .unwrap_err();
    match &err {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::SyntaxError,
            message,
        )) => assert!(!message.is_empty()),
        other => panic!("expected the server's syntax error, got {other:?}"),
    }
    assert!(!is_transient(&err));
    // With values, the statement is prepared first: a `PrepareError`.
    let err = session
        .query_unpaged("SELEC nonsense ?", (1i32,))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            ExecutionError::PrepareError(PrepareError::AllAttemptsFailed {
                first_attempt: RequestAttemptError::DbError(DbError::SyntaxError, _)
            })
        ),
        "{err:?}"
    );

    // Values that are not `Send`, through a generic helper.
    session
        .query_unpaged(
            "CREATE KEYSPACE errs WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await?;
    session
        .query_unpaged("CREATE TABLE errs.kv (k int PRIMARY KEY, v text)", &[])
        .await?;
    let local = Local {
        k: 1,
        v: Rc::new("one".to_owned()),
    };
    run_statement(
        &session,
        Statement::new("INSERT INTO errs.kv (k, v) VALUES (?, ?)"),
        local,
    )
    .await?;
    // And a batch of such values; with `Sync` values the futures stay
    // `Send` (they can be spawned).
    let mut batch = Batch::new(BatchType::Unlogged);
    batch.append_statement("INSERT INTO errs.kv (k, v) VALUES (?, ?)");
    let local = Local {
        k: 2,
        v: Rc::new("two".to_owned()),
    };
    session.batch(&batch, (local,)).await?;
    fn sendable<F: std::future::Future + Send>(f: F) -> F {
        f
    }
    sendable(session.batch(&batch, ((3i32, "three"),))).await?;
    sendable(session.query_unpaged("INSERT INTO errs.kv (k, v) VALUES (?, ?)", (4i32, "four")))
        .await?;
    let (v,) = session
        .query_unpaged("SELECT v FROM errs.kv WHERE k = 2", &[])
        .await?
        .into_rows_result()?
        .single_row::<(String,)>()?;
    assert_eq!(v, "two");
    let (v,) = session
        .query_unpaged("SELECT v FROM errs.kv WHERE k = 1", &[])
        .await?
        .into_rows_result()?
        .single_row::<(String,)>()?;
    assert_eq!(v, "one");

    // A hand-written serializer's type check, for an `int` column.
    let err = session
        .query_unpaged(
            "INSERT INTO errs.kv (k, v) VALUES (?, 'x')",
            (CounterOnly(1),),
        )
        .await
        .unwrap_err();
    let ExecutionError::BadQuery(BadQuery::SerializationError(e)) = &err else {
        panic!("expected the serializer's refusal, got {err:?}");
    };
    let text = e.to_string();
    assert!(
        text.contains("CounterOnly") && text.contains("serializes only as `counter`"),
        "{text}"
    );

    // The node answers after the deadline: `RequestTimeout`.
    cluster
        .set_faults(0, Faults::none().with_latency(Duration::from_millis(800)))
        .await
        .expect("latency injected");
    let err = session
        .query_unpaged("SELECT v FROM errs.kv WHERE k = 1", &[])
        .await
        .unwrap_err();
    assert!(
        matches!(err, ExecutionError::RequestTimeout(d) if d == Duration::from_millis(200)),
        "{err:?}"
    );
    assert!(is_transient(&err));
    cluster
        .set_faults(0, Faults::none())
        .await
        .expect("latency removed");

    // The only node stopped: once its pool failed to reconnect, requests
    // fail with the pool's error, which holds how that attempt failed.
    cluster.stop_node(0).await?;
    let until = Instant::now() + Duration::from_secs(30);
    let err = loop {
        let err = session
            .query_unpaged("SELECT v FROM errs.kv WHERE k = 1", &[])
            .await
            .unwrap_err();
        if matches!(
            err,
            ExecutionError::ConnectionPoolError(ConnectionPoolError::Broken { .. })
        ) || Instant::now() > until
        {
            break err;
        }
        assert!(is_transient(&err), "{err:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let ExecutionError::ConnectionPoolError(ConnectionPoolError::Broken {
        last_connection_error,
    }) = &err
    else {
        panic!("expected the pool's error, got {err:?}");
    };
    assert!(
        std::error::Error::source(&err)
            .is_some_and(|s| s.to_string() == last_connection_error.to_string()),
        "{err:?}"
    );
    assert!(is_transient(&err));

    // The request-level error converts as the official one does.
    let e: ExecutionError =
        RequestError::RequestTimeout(Duration::from_secs(1)).into_execution_error();
    assert!(matches!(e, ExecutionError::RequestTimeout(_)));
    Ok(())
}
