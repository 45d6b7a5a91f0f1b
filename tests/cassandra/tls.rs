//! Client encryption against a node started with `scripts/cassandra.sh
//! start --tls` (`SCYLLA_URI` is then its TLS port).
//!
//! - `SCYLLA_TLS_CA`: the CA's PEM file (the tests are `#[ignore]`d; run
//!   them with `--ignored` against a TLS node);
//! - `SCYLLA_TLS_CERT` / `SCYLLA_TLS_KEY`: a client certificate;
//! - `SCYLLA_TLS_CLIENT_AUTH=1`: the node requires a client certificate;
//! - `SCYLLA_TLS_SERVER_NAME`: the name on the node's certificate, if it is
//!   not issued for the node's IP address.

use std::time::Duration;

use scylla_driver::connection::tls::{ServerName, TlsConfig, TlsConfigBuilder};
use scylla_driver::SessionBuilder;

use crate::{builder, create_keyspace, ddl, drop_keyspace, require};

fn named(b: TlsConfigBuilder) -> TlsConfigBuilder {
    match std::env::var("SCYLLA_TLS_SERVER_NAME") {
        Ok(n) if !n.is_empty() => b.server_name(ServerName::Fixed(n)),
        _ => b,
    }
}

/// The TLS configuration from the environment (with the client certificate
/// if one is given).
fn tls(ca: &str, with_client_cert: bool) -> TlsConfig {
    let mut b = named(TlsConfig::builder().ca_pem_file(ca).unwrap());
    if with_client_cert {
        if let (Ok(cert), Ok(key)) = (
            std::env::var("SCYLLA_TLS_CERT"),
            std::env::var("SCYLLA_TLS_KEY"),
        ) {
            b = b.client_cert_pem_files(cert, key).unwrap();
        }
    }
    b.build().unwrap()
}

fn client_auth_required() -> bool {
    std::env::var("SCYLLA_TLS_CLIENT_AUTH").is_ok_and(|v| v == "1")
}

fn short(b: SessionBuilder) -> SessionBuilder {
    b.connect_timeout(Duration::from_secs(5))
        .handshake_timeout(Duration::from_secs(10))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Cassandra with client encryption (SCYLLA_URI, SCYLLA_TLS_CA)"]
async fn create_insert_select_over_tls() {
    let ca = require!("SCYLLA_TLS_CA");
    let uri = require!("SCYLLA_URI");
    let session = builder(&uri).tls(tls(&ca, true)).build().await.unwrap();
    let ks = create_keyspace(&session, "tls", 1).await;
    ddl(
        &session,
        &format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)"),
    )
    .await;
    let insert = session
        .prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)"))
        .await
        .unwrap();
    for k in 0..20 {
        session
            .execute_unpaged(&insert, (k, format!("v{k}")))
            .await
            .unwrap();
    }
    let (v,): (String,) = session
        .query_unpaged(format!("SELECT v FROM {ks}.t WHERE k = ?"), (7,))
        .await
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!(v, "v7");
    drop_keyspace(&session, &ks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Cassandra with client encryption (SCYLLA_URI, SCYLLA_TLS_CA)"]
async fn an_unknown_ca_is_named() {
    let _ca = require!("SCYLLA_TLS_CA");
    let uri = require!("SCYLLA_URI");
    // A CA made here: it signed nothing the node presents.
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let wrong_ca = params.self_signed(&key).unwrap().pem();
    let b = TlsConfig::builder().ca_pem(wrong_ca.as_bytes()).unwrap();
    let tls = named(b).build().unwrap();
    let e = short(builder(&uri)).tls(tls).build().await.unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("not signed by a trusted CA"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Cassandra with client encryption (SCYLLA_URI, SCYLLA_TLS_CA)"]
async fn a_missing_client_certificate_is_named() {
    let ca = require!("SCYLLA_TLS_CA");
    let uri = require!("SCYLLA_URI");
    assert!(
        client_auth_required(),
        "SCYLLA_TLS_CLIENT_AUTH=1 is not set: this test needs a node started with \
         --tls-client-auth (scripts/cassandra-suite.sh runs it so)"
    );
    let e = short(builder(&uri))
        .tls(tls(&ca, false))
        .build()
        .await
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("client certificate") || msg.contains("closed the connection during the TLS"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Cassandra with client encryption (SCYLLA_URI, SCYLLA_TLS_CA)"]
async fn a_plaintext_session_to_the_tls_port_is_named() {
    let _ca = require!("SCYLLA_TLS_CA");
    let uri = require!("SCYLLA_URI");
    let e = short(builder(&uri)).build().await.unwrap_err();
    let msg = e.to_string();
    // What the real server does (Cassandra 5.0.6, client_encryption_options
    // with optional: false, measured here): it resets the connection on the
    // plaintext OPTIONS, sending no TLS alert, so the driver can only report
    // the reset at that step. A server that answers with an alert gets the
    // named "enable TLS" error (scylla-driver/tests/tls.rs).
    assert!(
        msg.contains("enable TLS") || msg.contains("closed the connection"),
        "{msg}"
    );
}
