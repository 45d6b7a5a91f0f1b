//! Where the examples connect: the cluster named by `SCYLLA_URI`
//! (`host:port`) when it is set; otherwise a test cluster started inside the
//! example's own process (`scylla-testbed`: ScyllaDB-like nodes on loopback,
//! data in memory), which lives as long as the returned [`Cluster`].
//!
//! This module is only here so that every example runs without a server
//! installed. An application needs none of it: it passes its cluster's
//! address to `SessionBuilder::known_node`. Each example includes it with
//! `#[path = "common/mod.rs"] mod common;`.
#![allow(dead_code)] // each example uses part of it

use std::error::Error;

use scylla_testbed::{TestCluster, TlsOptions};

/// The errors of the examples' `main`.
pub(crate) type BoxError = Box<dyn Error + Send + Sync>;

/// A cluster to run an example against.
pub(crate) struct Cluster {
    /// A contact point, `host:port`.
    pub(crate) uri: String,
    /// The in-process test cluster, when `SCYLLA_URI` is unset: held only
    /// to keep it running (its nodes stop when this is dropped).
    _embedded: Option<TestCluster>,
}

/// `SCYLLA_URI`'s cluster, or a test cluster of one node with two shards.
pub(crate) async fn cluster() -> Result<Cluster, BoxError> {
    cluster_of(1, 2).await
}

/// `SCYLLA_URI`'s cluster, or a test cluster of `nodes` nodes with `shards`
/// shards each.
pub(crate) async fn cluster_of(nodes: usize, shards: u16) -> Result<Cluster, BoxError> {
    if let Ok(uri) = std::env::var("SCYLLA_URI") {
        println!("SCYLLA_URI={uri}: running against that cluster");
        return Ok(Cluster {
            uri,
            _embedded: None,
        });
    }
    let tb = TestCluster::builder()
        .nodes(nodes)
        .shards(shards)
        .start()
        .await?;
    // Like a real coordinator, answer UNAVAILABLE when too few replicas of
    // a partition are up for the consistency level, and record query traces.
    tb.topology().set_check_live_replicas(true);
    tb.topology().set_record_traces(true);
    let uri = tb.cql_addrs()[0].to_string();
    let plural = if nodes == 1 { "" } else { "s" };
    println!(
        "SCYLLA_URI is not set: running against a test cluster in this process \
         ({nodes} node{plural} x {shards} shards, contact point {uri})"
    );
    Ok(Cluster {
        uri,
        _embedded: Some(tb),
    })
}

/// The PEM files (as bytes) a TLS client needs.
pub(crate) struct TlsFiles {
    /// The CA that signed the nodes' certificates.
    pub(crate) ca: Vec<u8>,
    /// A client certificate and its key, for clusters that require one.
    pub(crate) client: Option<(Vec<u8>, Vec<u8>)>,
}

/// A cluster that serves TLS, and the PEMs to reach it: with `SCYLLA_URI`
/// set (its TLS port), the files named by `SCYLLA_TLS_CA` and, if the
/// cluster wants client certificates, `SCYLLA_TLS_CERT` and
/// `SCYLLA_TLS_KEY`; otherwise a test cluster of one node (2 shards) whose
/// TLS ports require a client certificate, with the certificates it made.
pub(crate) async fn tls_cluster() -> Result<(Cluster, TlsFiles), BoxError> {
    if let Ok(uri) = std::env::var("SCYLLA_URI") {
        println!("SCYLLA_URI={uri}: running against that cluster over TLS");
        let ca_path = std::env::var("SCYLLA_TLS_CA")
            .map_err(|_| "with SCYLLA_URI set, SCYLLA_TLS_CA must name the CA's PEM file")?;
        let ca = std::fs::read(&ca_path).map_err(|e| format!("reading {ca_path}: {e}"))?;
        let client = match (
            std::env::var("SCYLLA_TLS_CERT"),
            std::env::var("SCYLLA_TLS_KEY"),
        ) {
            (Ok(cert), Ok(key)) => Some((
                std::fs::read(&cert).map_err(|e| format!("reading {cert}: {e}"))?,
                std::fs::read(&key).map_err(|e| format!("reading {key}: {e}"))?,
            )),
            _ => None,
        };
        let cluster = Cluster {
            uri,
            _embedded: None,
        };
        return Ok((cluster, TlsFiles { ca, client }));
    }
    let tb = TestCluster::builder()
        .nodes(1)
        .shards(2)
        .tls(TlsOptions::default().require_client_cert(true))
        .start()
        .await?;
    let pem = |p: Option<&str>, what: &str| {
        p.map(|s| s.as_bytes().to_vec())
            .ok_or_else(|| format!("the test cluster made no {what}"))
    };
    let files = TlsFiles {
        ca: pem(tb.tls_ca_pem(), "CA")?,
        client: Some((
            pem(tb.tls_client_cert_pem(), "client certificate")?,
            pem(tb.tls_client_key_pem(), "client key")?,
        )),
    };
    let uri = tb
        .tls_addrs()
        .first()
        .ok_or("the test cluster has no TLS port")?
        .to_string();
    println!(
        "SCYLLA_URI is not set: running against a test cluster in this process \
         (1 node x 2 shards, TLS with client certificates at {uri})"
    );
    let cluster = Cluster {
        uri,
        _embedded: Some(tb),
    };
    Ok((cluster, files))
}
