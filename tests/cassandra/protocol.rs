//! The protocol version: negotiation against a server that speaks v5, and
//! v5 framing (checksummed segments) with envelopes larger than a segment,
//! with and without LZ4; the application's identity and CLIENT_OPTIONS in
//! STARTUP, as Cassandra lists them in `system_views.clients`.

use std::collections::HashMap;

use scylla_cql::compression::Compression;
use scylla_cql::frame::ProtocolVersion;

use crate::{builder, create_keyspace, ddl, drop_keyspace, pinned_version, require};

/// Cassandra 5 speaks v5: a negotiating session settles on it (or on the
/// pinned version), and so does every pool connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn negotiates_v5_unless_pinned() {
    let uri = require!("SCYLLA_URI");
    let session = builder(&uri).build().await.unwrap();
    let expected = pinned_version().unwrap_or(ProtocolVersion::V5);
    assert_eq!(session.protocol_version(), Some(expected));
    let conn = session.cluster_state().nodes[0]
        .pool
        .connection_for(None)
        .expect("a pool connection");
    assert_eq!(conn.protocol_version(), expected);
}

/// Values of 300 KB travel both ways: in v5 each envelope spans three
/// segments (at most 128 KiB each), checked on both ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn envelopes_larger_than_a_segment() {
    let uri = require!("SCYLLA_URI");
    for compression in [None, Some(Compression::Lz4)] {
        let session = builder(&uri)
            .compression(compression)
            .build()
            .await
            .unwrap();
        let ks = create_keyspace(&session, "big_envelopes", 1).await;
        ddl(
            &session,
            &format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v blob)"),
        )
        .await;
        let insert = session
            .prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)"))
            .await
            .unwrap();
        let select = session
            .prepare(format!("SELECT v FROM {ks}.t WHERE k = ?"))
            .await
            .unwrap();
        for k in 0..4i32 {
            // Random bytes do not compress: LZ4 sends such segments as is.
            // Repeated bytes do: the compressed format carries them.
            let value: Vec<u8> = if k % 2 == 0 {
                (0..300_000).map(|_| fastrand::u8(..)).collect()
            } else {
                vec![k as u8; 300_000]
            };
            session
                .execute_unpaged(&insert, (k, value.clone()))
                .await
                .unwrap();
            let r = session.execute_unpaged(&select, (k,)).await.unwrap();
            let (back,): (Vec<u8>,) = r.single_row().unwrap();
            assert_eq!(back.len(), value.len(), "k = {k}, {compression:?}");
            assert!(back == value, "k = {k}, {compression:?}: value differs");
        }
        drop_keyspace(&session, &ks).await;
    }
}

/// Cassandra accepts the application's identity and CLIENT_OPTIONS in
/// STARTUP (keys it does not know are not refused) and shows them, with the
/// driver's name and version, in `system_views.clients.client_options` of
/// each of the session's connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn application_identity_reaches_system_views_clients() {
    let uri = require!("SCYLLA_URI");
    let session = builder(&uri)
        .application_name("suite \"app\"")
        .application_version("1.2.3")
        .client_id("client-\u{e9}")
        .build()
        .await
        .unwrap();
    let conn = session.cluster_state().nodes[0]
        .pool
        .connection_for(None)
        .expect("a pool connection");
    let port = i32::from(conn.info().local.port());
    let rows = session
        .query_unpaged(
            "SELECT port, driver_name, client_options FROM system_views.clients",
            (),
        )
        .await
        .unwrap()
        .into_rows::<(i32, Option<String>, Option<HashMap<String, String>>)>()
        .unwrap();
    let (_, driver, options) = rows
        .into_iter()
        .find(|(p, ..)| *p == port)
        .expect("the pool connection is listed");
    assert_eq!(driver.as_deref(), Some("scylla-driver (Rust)"));
    let options = options.unwrap_or_default();
    assert_eq!(options["APPLICATION_NAME"], "suite \"app\"");
    assert_eq!(options["APPLICATION_VERSION"], "1.2.3");
    assert_eq!(options["CLIENT_ID"], "client-\u{e9}");
    let json = &options["CLIENT_OPTIONS"];
    assert!(
        json.starts_with("{\"driver_name\":\"scylla-driver (Rust)\""),
        "{json}"
    );
    assert!(json.contains("\"shard_aware_port\":true"), "{json}");
}
