//! The session's use of the protocol v5 message bodies, against the
//! in-process test cluster: result metadata ids (v5, or v4 with ScyllaDB's
//! `SCYLLA_USE_METADATA_ID`), the per-request keyspace, `now_in_seconds`.
//!
//! Each test pins the version it is about (the test cluster speaks v5 by
//! default, and v4 to a client that asks for it).
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use scylla_cql::frame::ProtocolVersion;
use scylla_driver::error::BadQuery;
use scylla_driver::statement::Statement;
use scylla_driver::{ExecutionError, PreparedStatement, Session, SessionBuilder};
use scylla_testbed::{CqlHandler, TestCluster};

use crate::common;
use common::create_keyspace;

/// A one-node cluster (with `SCYLLA_USE_METADATA_ID` offered when
/// `metadata_id`), its handler, and a session pinned to `version`.
async fn setup(
    metadata_id: bool,
    version: ProtocolVersion,
) -> (TestCluster, Arc<CqlHandler>, Session) {
    let handler = Arc::new(CqlHandler::new());
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(1)
        .use_metadata_id(metadata_id)
        .handler(handler.clone())
        .start()
        .await
        .unwrap();
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .protocol_version(version)
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    assert_eq!(version_of(&session), version);
    (cluster, handler, session)
}

/// The version the session's connections speak.
fn version_of(session: &Session) -> ProtocolVersion {
    let state = session.cluster_state();
    let conn = state.nodes[0].pool.connection_for(None).unwrap();
    conn.protocol_version()
}

/// Bytes the session read while running `n` executions of `select`.
async fn bytes_read_per_execution(session: &Session, select: &PreparedStatement, n: u64) -> u64 {
    let io = &session.metrics().io;
    let before = io.bytes_read.load(Ordering::Relaxed);
    for _ in 0..n {
        let r = session.execute_unpaged(select, (1i64,)).await.unwrap();
        let (pk, v): (i64, &str) = r.single_row().unwrap();
        assert_eq!((pk, v), (1, "one"));
    }
    (io.bytes_read.load(Ordering::Relaxed) - before) / n
}

async fn table_with_one_row(session: &Session) {
    create_keyspace(session, "md", 1).await;
    session
        .query_unpaged("CREATE TABLE md.t (pk bigint PRIMARY KEY, v text)", ())
        .await
        .unwrap();
    session
        .query_unpaged("INSERT INTO md.t (pk, v) VALUES (1, 'one')", ())
        .await
        .unwrap();
}

/// With metadata ids, SELECT executions skip the result metadata (fewer
/// bytes per result) and read rows with the prepared columns; after the
/// table changes, the server reports the new columns with their id, and the
/// statement adopts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_id_skips_metadata_and_adopts_changed_columns() {
    // v4 with ScyllaDB's extension, and v5 (which always has ids).
    for (metadata_id, version) in [(true, ProtocolVersion::V4), (false, ProtocolVersion::V5)] {
        metadata_ids_in(metadata_id, version).await;
    }
}

async fn metadata_ids_in(metadata_id: bool, version: ProtocolVersion) {
    let (_plain_cluster, _, plain) = setup(false, ProtocolVersion::V4).await;
    table_with_one_row(&plain).await;
    let plain_select = plain
        .prepare("SELECT * FROM md.t WHERE pk = ?")
        .await
        .unwrap();
    assert_eq!(plain_select.result_metadata_id(), None);
    let plain_bytes = bytes_read_per_execution(&plain, &plain_select, 20).await;

    let (_cluster, _, session) = setup(metadata_id, version).await;
    table_with_one_row(&session).await;
    let select = session
        .prepare("SELECT * FROM md.t WHERE pk = ?")
        .await
        .unwrap();
    let first_id = select.result_metadata_id().expect("PREPARED carries an id");
    assert_eq!(select.result_columns().unwrap().len(), 2);
    let bytes = bytes_read_per_execution(&session, &select, 20).await;
    // The skipped metadata: the table spec ("md", "t": 4 + 3 bytes) and
    // two column specs ("pk" bigint, "v" varchar: 6 + 5 bytes); v5 adds its
    // segment framing around each response (6-byte header, 4-byte CRC32).
    let framing = if version == ProtocolVersion::V5 {
        10
    } else {
        0
    };
    assert_eq!(
        (plain_bytes + framing).checked_sub(bytes),
        Some(18),
        "{version}: {bytes} bytes per SELECT with a metadata id, {plain_bytes} on plain v4"
    );

    // The table gets another column: the statement's id is stale.
    session.query_unpaged("DROP TABLE md.t", ()).await.unwrap();
    session
        .query_unpaged(
            "CREATE TABLE md.t (pk bigint PRIMARY KEY, a int, v text)",
            (),
        )
        .await
        .unwrap();
    session
        .query_unpaged("INSERT INTO md.t (pk, a, v) VALUES (1, 7, 'seven')", ())
        .await
        .unwrap();
    for _ in 0..3 {
        let r = session.execute_unpaged(&select, (1i64,)).await.unwrap();
        let (pk, a, v): (i64, i32, &str) = r.single_row().unwrap();
        assert_eq!((pk, a, v), (1, 7, "seven"));
    }
    let new_id = select.result_metadata_id().unwrap();
    assert_ne!(new_id, first_id, "the statement adopted the new id");
    let names: Vec<String> = select
        .result_columns()
        .unwrap()
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(names, ["pk", "a", "v"]);
}

/// `USE ks1`, prepare an unqualified statement, `USE ks2`, the node forgets
/// its prepared statements (a restart), execute: the session prepares it
/// again. On v5 the PREPARE names ks1 (the keyspace it was prepared in) and
/// the statement reads ks1; on v4 the re-preparation resolves `t` in ks2,
/// gets another id, and the execution fails (the limitation the README
/// states). Unprepared statements follow the session's keyspace either way.
async fn reprepare_after_use(
    session: &Session,
    handler: &CqlHandler,
) -> Result<String, ExecutionError> {
    for (ks, v) in [("ks1", "one"), ("ks2", "two")] {
        create_keyspace(session, ks, 1).await;
        session
            .query_unpaged(
                format!("CREATE TABLE {ks}.t (pk bigint PRIMARY KEY, v text)"),
                (),
            )
            .await
            .unwrap();
        session
            .query_unpaged(format!("INSERT INTO {ks}.t (pk, v) VALUES (1, '{v}')"), ())
            .await
            .unwrap();
    }
    session.use_keyspace("ks1", false).await.unwrap();
    let select = session
        .prepare("SELECT v FROM t WHERE pk = ?")
        .await
        .unwrap();
    assert_eq!(select.prepared_in(), Some("ks1"));
    let r = session.execute_unpaged(&select, (1i64,)).await.unwrap();
    assert_eq!(r.single_row::<(&str,)>().unwrap().0, "one");

    session.use_keyspace("ks2", false).await.unwrap();
    let r = session
        .query_unpaged("SELECT v FROM t WHERE pk = 1", ())
        .await
        .unwrap();
    assert_eq!(r.single_row::<(&str,)>().unwrap().0, "two");

    handler.store().forget_prepared();
    let r = session.execute_unpaged(&select, (1i64,)).await?;
    Ok(r.single_row::<(&str,)>()?.0.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reprepare_after_use_keeps_the_prepared_keyspace_on_v5() {
    let (_cluster, handler, session) = setup(false, ProtocolVersion::V5).await;
    assert_eq!(
        reprepare_after_use(&session, &handler).await.unwrap(),
        "one"
    );
}

/// v4 cannot name the keyspace: the statement is prepared again in ks2,
/// under another id, and the execution fails (or, were the ids the same,
/// would read ks2): never ks1's row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reprepare_after_use_cannot_keep_the_keyspace_on_v4() {
    let (_cluster, handler, session) = setup(false, ProtocolVersion::V4).await;
    let outcome = reprepare_after_use(&session, &handler).await;
    assert_ne!(outcome.ok().as_deref(), Some("one"));
}

/// `now_in_seconds` is a v5 option: on a v4 connection the request fails
/// with a client-side error naming the version (it is never dropped
/// silently), and nothing is retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn now_in_seconds_needs_v5() {
    for version in ProtocolVersion::ALL {
        now_in_seconds_in(version).await;
    }
}

async fn now_in_seconds_in(version: ProtocolVersion) {
    let (_cluster, _, session) = setup(false, version).await;
    table_with_one_row(&session).await;
    let mut statement = Statement::new("SELECT v FROM md.t WHERE pk = 1");
    statement.set_now_in_seconds(Some(1_700_000_000));
    let mut select = session
        .prepare("SELECT v FROM md.t WHERE pk = ?")
        .await
        .unwrap();
    select.set_now_in_seconds(Some(1_700_000_000));
    let retries = session.metrics().snapshot().retries;
    let query = session.query_unpaged(statement, ()).await;
    let execute = session.execute_unpaged(&select, (1i64,)).await;
    match version_of(&session) {
        ProtocolVersion::V5 => {
            assert_eq!(query.unwrap().single_row::<(&str,)>().unwrap().0, "one");
            assert_eq!(execute.unwrap().single_row::<(&str,)>().unwrap().0, "one");
        }
        ProtocolVersion::V4 => {
            for r in [query, execute] {
                match r {
                    Err(ExecutionError::BadQuery(BadQuery::Unsupported(msg))) => {
                        assert!(msg.contains("needs protocol v5"), "{msg}")
                    }
                    other => panic!("expected BadQuery, got {other:?}"),
                }
            }
            assert_eq!(session.metrics().snapshot().retries, retries);
        }
    }
}
