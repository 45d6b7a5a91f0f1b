//! The application's identity and the driver's settings in STARTUP, as the
//! test cluster shows them in `system.clients` (one row per open client
//! connection of the node, with every STARTUP option in `client_options`).
#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use scylla_driver::client::SelfIdentity;
use scylla_driver::{DeserializeRow, Session};

use crate::common::cluster_and_session;

/// A row of `SELECT * FROM system.clients`.
#[derive(Debug, DeserializeRow)]
#[allow(dead_code)]
struct ClientRow {
    address: IpAddr,
    port: i32,
    client_type: String,
    client_options: Option<HashMap<String, String>>,
    connection_stage: Option<String>,
    driver_name: Option<String>,
    driver_version: Option<String>,
    hostname: Option<String>,
    protocol_version: Option<i32>,
    scheduling_group: Option<String>,
    shard_id: Option<i32>,
    ssl_cipher_suite: Option<String>,
    ssl_enabled: Option<bool>,
    ssl_protocol: Option<String>,
    username: Option<String>,
}

const SHARDS: u16 = 3;

async fn clients(session: &Session) -> Vec<ClientRow> {
    session
        .query_unpaged("SELECT * FROM system.clients", ())
        .await
        .unwrap()
        .into_rows::<ClientRow>()
        .unwrap()
}

/// The client ports of the session's pool connections, one per shard.
fn pool_ports(session: &Session) -> HashMap<u16, u16> {
    let state = session.cluster_state();
    let pool = &state.nodes[0].pool;
    (0..SHARDS)
        .map(|shard| {
            let conn = pool.connection_for(Some(shard)).unwrap();
            assert_eq!(conn.shard(), Some(shard));
            (conn.info().local.port(), shard)
        })
        .collect()
}

/// Checks the rows: one per pool connection (shard and port as the pool
/// sees them) plus the control connection, all READY, all carrying
/// `expected` in the driver/app columns and in `client_options`; returns
/// the parsed CLIENT_OPTIONS of the first row (every row has the same).
fn check_rows(
    rows: &[ClientRow],
    ports: &HashMap<u16, u16>,
    expected: &[(&str, Option<&str>)],
) -> serde_json::Value {
    // The pool's connections and the control connection: nothing else is
    // connected to this node.
    assert_eq!(rows.len(), usize::from(SHARDS) + 1, "{rows:#?}");
    let mut pool_rows = 0;
    let mut json = None;
    for row in rows {
        let port = u16::try_from(row.port).unwrap();
        if let Some(&shard) = ports.get(&port) {
            assert_eq!(row.shard_id, Some(i32::from(shard)), "{row:?}");
            pool_rows += 1;
        }
        assert!(row.address.is_loopback(), "{row:?}");
        assert_eq!(row.client_type, "cql");
        assert_eq!(row.connection_stage.as_deref(), Some("READY"));
        assert_eq!(row.ssl_enabled, Some(false));
        assert_eq!(row.username.as_deref(), Some("anonymous"));
        assert!(matches!(row.protocol_version, Some(4 | 5)), "{row:?}");
        let options = row.client_options.as_ref().unwrap();
        assert_eq!(
            row.driver_name.as_deref(),
            options.get("DRIVER_NAME").map(|s| s.as_str())
        );
        assert_eq!(
            row.driver_version.as_deref(),
            options.get("DRIVER_VERSION").map(|s| s.as_str())
        );
        for (key, value) in expected {
            assert_eq!(
                options.get(*key).map(|s| s.as_str()),
                *value,
                "{key} in {row:?}"
            );
        }
        let text = options.get("CLIENT_OPTIONS").expect("CLIENT_OPTIONS sent");
        let parsed: serde_json::Value = serde_json::from_str(text).unwrap();
        if let Some(first) = &json {
            assert_eq!(first, &parsed, "one CLIENT_OPTIONS per session");
        }
        json = Some(parsed);
    }
    assert_eq!(
        pool_rows,
        usize::from(SHARDS),
        "every shard's connection is listed"
    );
    json.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_clients_shows_the_application_on_every_connection() {
    // Quotes, a backslash, a control character and non-ASCII: the JSON
    // copy of the settings (local_datacenter here) must stay valid JSON.
    let dc = "datacenter1";
    let (_cluster, session) = cluster_and_session(1, SHARDS, |b| {
        b.application_name("billing \"east\"")
            .application_version("2.4.1")
            .client_id("pod\\7 – zürich\t1")
            .local_datacenter(dc)
            .request_timeout(Duration::from_millis(4500))
    })
    .await;
    let ports = pool_ports(&session);
    let rows = clients(&session).await;
    let json = check_rows(
        &rows,
        &ports,
        &[
            ("APPLICATION_NAME", Some("billing \"east\"")),
            ("APPLICATION_VERSION", Some("2.4.1")),
            ("CLIENT_ID", Some("pod\\7 – zürich\t1")),
            ("DRIVER_NAME", Some("scylla-driver (Rust)")),
            ("DRIVER_VERSION", Some(env!("CARGO_PKG_VERSION"))),
        ],
    );
    assert_eq!(json["driver_name"], "scylla-driver (Rust)");
    assert_eq!(json["local_datacenter"], dc);
    assert_eq!(json["request_timeout_ms"], 4500);
    assert_eq!(json["tls"], false);
    assert_eq!(json["authentication"], false);
    assert_eq!(json["shard_aware_port"], true);
    assert_eq!(json["connections_per_shard"], 1);
    assert_eq!(json["protocol_version"], "negotiated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_identity_and_the_defaults() {
    // The official crate's form, with the driver's name replaced.
    let identity = SelfIdentity::new()
        .with_application_name("reports")
        .with_client_id("c-1")
        .with_custom_driver_name("wrapped driver");
    let (_cluster, session) = cluster_and_session(1, SHARDS, |b| b.custom_identity(identity)).await;
    let rows = clients(&session).await;
    let json = check_rows(
        &rows,
        &pool_ports(&session),
        &[
            ("APPLICATION_NAME", Some("reports")),
            ("APPLICATION_VERSION", None),
            ("CLIENT_ID", Some("c-1")),
            ("DRIVER_NAME", Some("wrapped driver")),
        ],
    );
    assert_eq!(json["driver_name"], "wrapped driver");
    drop(session);

    // No identity: the driver's own name and version, no application keys,
    // and the default settings in CLIENT_OPTIONS.
    let (_cluster, session) = cluster_and_session(1, SHARDS, |b| b).await;
    let rows = clients(&session).await;
    let json = check_rows(
        &rows,
        &pool_ports(&session),
        &[
            ("APPLICATION_NAME", None),
            ("APPLICATION_VERSION", None),
            ("CLIENT_ID", None),
            ("DRIVER_NAME", Some("scylla-driver (Rust)")),
            ("DRIVER_VERSION", Some(env!("CARGO_PKG_VERSION"))),
        ],
    );
    assert_eq!(json["local_datacenter"], serde_json::Value::Null);
    assert_eq!(json["consistency"], "LocalQuorum");
    assert_eq!(json["request_timeout_ms"], 12_000);
}

/// Over TLS, every connection's row says so, with the version and the
/// cipher suite its handshake agreed on (ScyllaDB's `TLS1.3` / `TLS1.2`
/// and the suite's IANA name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_clients_shows_each_connections_tls_version_and_cipher_suite() {
    use scylla_driver::tls::TlsConfig;
    use scylla_testbed::{TestCluster, TlsOptions};

    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(SHARDS)
        .tls(TlsOptions::default())
        .start()
        .await
        .unwrap();
    let tls = TlsConfig::builder()
        .ca_pem(cluster.tls_ca_pem().unwrap().as_bytes())
        .unwrap()
        .build()
        .unwrap();
    let session = scylla_driver::SessionBuilder::new()
        .known_node(cluster.tls_addrs()[0].to_string())
        .tls(tls)
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    let rows = clients(&session).await;
    assert_eq!(rows.len(), usize::from(SHARDS) + 1, "{rows:#?}");
    for row in &rows {
        assert_eq!(row.ssl_enabled, Some(true), "{row:?}");
        // rustls on both sides: TLS 1.3, an AEAD suite by its IANA name.
        assert_eq!(row.ssl_protocol.as_deref(), Some("TLS1.3"), "{row:?}");
        let suite = row.ssl_cipher_suite.as_deref().unwrap_or_default();
        assert!(
            [
                "TLS_AES_128_GCM_SHA256",
                "TLS_AES_256_GCM_SHA384",
                "TLS_CHACHA20_POLY1305_SHA256"
            ]
            .contains(&suite),
            "{row:?}"
        );
    }
    session.close(Duration::from_secs(5)).await;
    cluster.shutdown().await;

    // Without TLS the columns stay null.
    let (cluster, session) = cluster_and_session(1, SHARDS, |b| b).await;
    for row in clients(&session).await {
        assert_eq!(row.ssl_enabled, Some(false), "{row:?}");
        assert_eq!((row.ssl_protocol, row.ssl_cipher_suite), (None, None));
    }
    session.close(Duration::from_secs(5)).await;
    cluster.shutdown().await;
}
