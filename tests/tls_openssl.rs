//! The driver's OpenSSL backend (feature `openssl-010`) against the test
//! cluster's TLS listeners (rustls servers): a session configured as the
//! official crate's users configure it (`tls_context(Some(SslContext))`)
//! reaches every shard through the TLS shard-aware port, reads back what it
//! wrote, does mutual TLS, and names an untrusted server's certificate as
//! such. Run with `cargo test --features openssl-010 --test tls_openssl`.
#![cfg(feature = "openssl-010")]
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use openssl::pkey::PKey;
use openssl::ssl::{SslContext, SslMethod, SslVerifyMode};
use openssl::x509::X509;
use scylla_driver::SessionBuilder;
use scylla_testbed::TestCluster;

mod common;
use common::tls_cluster;

const FULL: Duration = Duration::from_secs(20);

/// A client context that verifies the node's chain against the cluster's
/// CA (or against nothing: `trust_ca = false`), with the cluster's client
/// certificate when `with_cert`.
fn context(cluster: &TestCluster, trust_ca: bool, with_cert: bool) -> SslContext {
    let mut b = SslContext::builder(SslMethod::tls_client()).unwrap();
    if trust_ca {
        let ca = X509::from_pem(cluster.tls_ca_pem().unwrap().as_bytes()).unwrap();
        b.cert_store_mut().add_cert(ca).unwrap();
    }
    b.set_verify(SslVerifyMode::PEER);
    if with_cert {
        let cert = X509::from_pem(cluster.tls_client_cert_pem().unwrap().as_bytes()).unwrap();
        let key =
            PKey::private_key_from_pem(cluster.tls_client_key_pem().unwrap().as_bytes()).unwrap();
        b.set_certificate(&cert).unwrap();
        b.set_private_key(&key).unwrap();
    }
    b.build()
}

fn handshakes(cluster: &TestCluster) -> u64 {
    cluster
        .stats()
        .nodes
        .iter()
        .map(|n| n.node.tls_handshakes_full + n.node.tls_handshakes_resumed)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openssl_context_reaches_every_shard_and_reads_back_its_writes() {
    let cluster = tls_cluster(2, 4, false).await;
    assert_eq!(handshakes(&cluster), 0);
    let session = SessionBuilder::new()
        .known_node(cluster.tls_addrs()[0].to_string())
        .tls_context(Some(context(&cluster, true, false)))
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(FULL).await);
    let m = session.metrics().snapshot();
    assert_eq!(m.wrong_shard_landings, 0, "{m:?}");
    assert_eq!(m.connects_shard_aware_failed, 0, "{m:?}");
    // Every connection (8 shards' and the control connection) was a TLS
    // handshake at the cluster.
    assert!(handshakes(&cluster) >= 9, "{}", handshakes(&cluster));

    session
        .query_unpaged(
            "CREATE KEYSPACE ko WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            (),
        )
        .await
        .unwrap();
    session
        .query_unpaged("CREATE TABLE ko.t (pk bigint PRIMARY KEY, v text)", ())
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO ko.t (pk, v) VALUES (?, ?)")
        .await
        .unwrap();
    let select = session
        .prepare("SELECT pk, v FROM ko.t WHERE pk = ?")
        .await
        .unwrap();
    for k in 0..100i64 {
        session
            .execute_unpaged(&insert, (k, format!("v{k}")))
            .await
            .unwrap();
    }
    for k in 0..100i64 {
        let r = session.execute_unpaged(&select, (k,)).await.unwrap();
        let (pk, v): (i64, &str) = r.single_row().unwrap();
        assert_eq!((pk, v), (k, format!("v{k}").as_str()));
    }
    assert_eq!(session.metrics().snapshot().wrong_shard_landings, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_through_openssl() {
    let cluster = tls_cluster(1, 2, true).await;
    let session = SessionBuilder::new()
        .known_node(cluster.tls_addrs()[0].to_string())
        .tls_context(Some(context(&cluster, true, true)))
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(FULL).await);
    session
        .query_unpaged("SELECT key FROM system.local", ())
        .await
        .unwrap();

    // Without the client certificate, the server refuses the connection.
    let e = SessionBuilder::new()
        .known_node(cluster.tls_addrs()[0].to_string())
        .tls_context(Some(context(&cluster, true, false)))
        .connect_timeout(Duration::from_secs(2))
        .handshake_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("client certificate"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_server_is_named_as_such() {
    let cluster = tls_cluster(1, 1, false).await;
    let e = SessionBuilder::new()
        .known_node(cluster.tls_addrs()[0].to_string())
        .tls_context(Some(context(&cluster, false, false)))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not signed by a trusted CA"), "{e}");

    // The plaintext port is not mistaken for a TLS one.
    let e = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .tls_context(Some(context(&cluster, true, false)))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("does not speak TLS"), "{e}");
}
