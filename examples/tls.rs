//! TLS: the session's connections encrypted, the nodes' certificates
//! checked against a CA, and a client certificate for clusters that require
//! one (mutual TLS).
//!
//! Without `SCYLLA_URI` the example starts a test cluster whose TLS ports
//! require a client certificate, and uses the CA and client certificate it
//! made. With `SCYLLA_URI` (the nodes' TLS port), `SCYLLA_TLS_CA` names the
//! CA's PEM file, and `SCYLLA_TLS_CERT` / `SCYLLA_TLS_KEY` the client's.
//!
//! ```sh
//! cargo run --example tls
//! SCYLLA_URI=127.0.0.1:9142 SCYLLA_TLS_CA=ca.pem SCYLLA_TLS_CERT=client.pem \
//!   SCYLLA_TLS_KEY=client-key.pem cargo run --example tls
//! ```

#[path = "common/mod.rs"]
mod common;

use std::time::Duration;

use scylla_driver::tls::TlsConfig;
use scylla_driver::SessionBuilder;

#[tokio::main]
async fn main() -> Result<(), common::BoxError> {
    // SCYLLA_URI (with SCYLLA_TLS_*), or a TLS test cluster in this process.
    let (cluster, pem) = common::tls_cluster().await?;

    // The nodes are verified against this CA, by their IP address (the name
    // a node's certificate must carry); a client certificate is offered if
    // there is one.
    let mut tls = TlsConfig::builder().ca_pem(&pem.ca)?;
    if let Some((cert, key)) = &pem.client {
        tls = tls.client_cert_pem(cert, key)?;
    }
    let session = SessionBuilder::new()
        .known_node(&cluster.uri)
        .tls(tls.build()?)
        .build()
        .await?;
    // Every shard of every node over TLS (on ScyllaDB, through its TLS
    // shard-aware port).
    let all = session.wait_for_all_shards(Duration::from_secs(20)).await;

    let (version,): (String,) = session
        .query_unpaged("SELECT release_version FROM system.local", ())
        .await?
        .single_row()?;
    println!("connected over TLS: release_version {version}, every shard covered: {all}");

    // Without the client certificate, a cluster that requires one refuses
    // the handshake.
    if pem.client.is_some() {
        let no_cert = TlsConfig::builder().ca_pem(&pem.ca)?.build()?;
        let refused = SessionBuilder::new()
            .known_node(&cluster.uri)
            .tls(no_cert)
            .connect_timeout(Duration::from_secs(5))
            .build()
            .await;
        match refused {
            Err(e) => println!("without a client certificate: refused ({e})"),
            Ok(_) => println!(
                "without a client certificate: accepted (the cluster does not require one)"
            ),
        }
    }
    Ok(())
}
