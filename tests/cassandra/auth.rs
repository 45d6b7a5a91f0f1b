//! Authentication and LZ4 compression against a node started with
//! `scripts/cassandra.sh start --auth` (superuser cassandra/cassandra),
//! whose address is in `SCYLLA_AUTH_URI`.

use scylla_cql::frame::response::error::DbError;
use scylla_driver::cluster::control::{ContactError, ControlError};
use scylla_driver::connection::ConnectionError;
use std::collections::HashMap;

use scylla_cql::compression::Compression;
use scylla_driver::{NewSessionError, Session};

use crate::{builder, create_keyspace, ddl, drop_keyspace, require};

async fn login(uri: &str) -> Session {
    builder(uri)
        .user("cassandra", "cassandra")
        .build()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Cassandra with --auth in SCYLLA_AUTH_URI: scripts/cassandra-suite.sh"]
async fn good_bad_and_missing_credentials() {
    let uri = require!("SCYLLA_AUTH_URI");
    let session = login(&uri).await;
    let (user,): (String,) = session
        .query_unpaged(
            "SELECT role FROM system_auth.roles WHERE role = 'cassandra'",
            (),
        )
        .await
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!(user, "cassandra");
    let ks = create_keyspace(&session, "auth", 1).await;
    ddl(
        &session,
        &format!("CREATE TABLE {ks}.t (k int PRIMARY KEY)"),
    )
    .await;
    session
        .query_unpaged(format!("INSERT INTO {ks}.t (k) VALUES (?)"), (1,))
        .await
        .unwrap();

    // A role with its own password works too; a wrong password does not.
    let role = format!("r_{}", fastrand::u32(..));
    ddl(
        &session,
        &format!("CREATE ROLE {role} WITH PASSWORD = 'sekret' AND LOGIN = true"),
    )
    .await;
    ddl(
        &session,
        &format!("GRANT SELECT ON KEYSPACE {ks} TO {role}"),
    )
    .await;
    let limited = builder(&uri).user(&role, "sekret").build().await.unwrap();
    let r = limited
        .query_unpaged(format!("SELECT k FROM {ks}.t"), ())
        .await
        .unwrap();
    assert_eq!(r.rows_count(), 1);
    // Authorized to read, not to write: the server's Unauthorized error.
    let err = limited
        .query_unpaged(format!("INSERT INTO {ks}.t (k) VALUES (2)"), ())
        .await
        .unwrap_err();
    assert_eq!(err.db_error().map(|e| e.code()), Some(0x2100), "{err}");
    println!("unauthorized write: {err}");

    let err = builder(&uri)
        .user("cassandra", "wrong")
        .build()
        .await
        .unwrap_err();
    println!("bad password: {err}");
    // Matched by variant, down to the server's error code: no message text.
    let NewSessionError::Control(ControlError::Unreachable(failures)) = &err else {
        panic!("expected every contact point to fail, got {err:?}");
    };
    assert!(!failures.is_empty());
    for f in failures {
        assert!(
            matches!(
                &f.error,
                ContactError::Connect(ConnectionError::Server { error, .. })
                    if matches!(error.error, DbError::AuthenticationError)
            ),
            "{}: {:?}",
            f.address,
            f.error
        );
    }

    let err = builder(&uri)
        .user("nobody_here", "x")
        .build()
        .await
        .unwrap_err();
    println!("unknown user: {err}");
    assert!(err.to_string().contains("incorrect"), "{err}");

    let err = builder(&uri).build().await.unwrap_err();
    let text = err.to_string();
    println!("no credentials: {text}");
    assert!(text.contains("requires authentication"), "{text}");
    assert!(text.contains("PasswordAuthenticator"), "{text}");

    ddl(&session, &format!("DROP ROLE {role}")).await;
    drop_keyspace(&session, &ks).await;
}

/// `client_options` of each client connection, by client port.
async fn client_options(session: &Session) -> HashMap<u16, (String, HashMap<String, String>)> {
    let r = session
        .query_unpaged(
            "SELECT port, username, client_options FROM system_views.clients",
            (),
        )
        .await
        .unwrap();
    r.into_rows::<(i32, Option<String>, Option<HashMap<String, String>>)>()
        .unwrap()
        .into_iter()
        .map(|(port, user, opts)| {
            (
                port as u16,
                (user.unwrap_or_default(), opts.unwrap_or_default()),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Cassandra with --auth in SCYLLA_AUTH_URI: scripts/cassandra-suite.sh"]
async fn lz4_compression_is_negotiated_and_used() {
    let uri = require!("SCYLLA_AUTH_URI");
    let lz4 = builder(&uri)
        .user("cassandra", "cassandra")
        .compression(Some(Compression::Lz4))
        .build()
        .await
        .unwrap();
    let plain = login(&uri).await;
    let conn_of = |s: &Session| {
        s.cluster_state().nodes[0]
            .pool
            .connection_for(None)
            .expect("a pool connection")
    };
    let lz4_conn = conn_of(&lz4);
    let plain_conn = conn_of(&plain);
    assert_eq!(lz4_conn.info().server.compression, Some(Compression::Lz4));
    assert_eq!(plain_conn.info().server.compression, None);

    let ks = create_keyspace(&lz4, "lz4", 1).await;
    compressible_rows_round_trip(&lz4, &ks, 50).await;

    // The server's view of the connections.
    let clients = client_options(&lz4).await;
    let (user, opts) = clients
        .get(&lz4_conn.info().local.port())
        .unwrap_or_else(|| panic!("LZ4 connection not in system_views.clients: {clients:?}"));
    println!("LZ4 connection's client_options: {opts:?}");
    assert_eq!(user, "cassandra");
    assert_eq!(
        opts.get("COMPRESSION").map(String::as_str),
        Some("lz4"),
        "{opts:?}"
    );
    let (_, opts) = clients
        .get(&plain_conn.info().local.port())
        .unwrap_or_else(|| panic!("plain connection not in system_views.clients: {clients:?}"));
    assert_eq!(opts.get("COMPRESSION"), None, "{opts:?}");
    drop_keyspace(&lz4, &ks).await;
}

/// LZ4 on the plain node (no AUTHENTICATE step: READY follows STARTUP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn lz4_without_authentication() {
    let uri = require!("SCYLLA_URI");
    let session = builder(&uri)
        .compression(Some(Compression::Lz4))
        .build()
        .await
        .unwrap();
    let conn = session.cluster_state().nodes[0]
        .pool
        .connection_for(None)
        .expect("a pool connection");
    assert_eq!(conn.info().server.compression, Some(Compression::Lz4));
    let r = session
        .query_unpaged("SELECT keyspace_name FROM system_schema.tables", ())
        .await
        .unwrap();
    assert!(r.rows_count() > 10);
    let opts = client_options(&session).await;
    let (_, mine) = opts.get(&conn.info().local.port()).unwrap();
    assert_eq!(mine.get("COMPRESSION").map(String::as_str), Some("lz4"));
}

/// Snappy: compresses v4 bodies both ways (large compressible rows round
/// trip), and on v5, whose segments know LZ4 only, the connection runs
/// uncompressed instead of failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn snappy_on_v4_and_not_on_v5() {
    use scylla_cql::frame::ProtocolVersion;
    let uri = require!("SCYLLA_URI");
    let v4 = builder(&uri)
        .protocol_version(ProtocolVersion::V4)
        .compression(Some(Compression::Snappy))
        .build()
        .await
        .unwrap();
    let conn = v4.cluster_state().nodes[0]
        .pool
        .connection_for(None)
        .expect("a pool connection");
    assert_eq!(conn.info().server.compression, Some(Compression::Snappy));
    let opts = client_options(&v4).await;
    let (_, mine) = opts.get(&conn.info().local.port()).unwrap();
    assert_eq!(mine.get("COMPRESSION").map(String::as_str), Some("snappy"));

    let ks = create_keyspace(&v4, "snappy", 1).await;
    compressible_rows_round_trip(&v4, &ks, 20).await;

    let v5 = builder(&uri)
        .protocol_version(ProtocolVersion::V5)
        .compression(Some(Compression::Snappy))
        .build()
        .await
        .unwrap();
    let conn = v5.cluster_state().nodes[0]
        .pool
        .connection_for(None)
        .expect("a pool connection");
    assert_eq!(conn.info().server.compression, None);
    let rows: Vec<(i32, String)> = v5
        .query_unpaged(format!("SELECT k, v FROM {ks}.t"), ())
        .await
        .unwrap()
        .into_rows()
        .unwrap();
    assert_eq!(rows.len(), 20);
    drop_keyspace(&v4, &ks).await;
}

/// Large and compressible both ways: `n` rows of repeated text written to a
/// new table of `ks` and read back.
async fn compressible_rows_round_trip(session: &Session, ks: &str, n: i32) {
    ddl(
        session,
        &format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)"),
    )
    .await;
    let big = "compressible ".repeat(2000);
    let insert = session
        .prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)"))
        .await
        .unwrap();
    for k in 0..n {
        session
            .execute_unpaged(&insert, (k, format!("{k}{big}")))
            .await
            .unwrap();
    }
    let rows: Vec<(i32, String)> = session
        .query_unpaged(format!("SELECT k, v FROM {ks}.t"), ())
        .await
        .unwrap()
        .into_rows()
        .unwrap();
    assert_eq!(rows.len(), usize::try_from(n).unwrap());
    assert!(rows.iter().all(|(k, v)| *v == format!("{k}{big}")));
}
