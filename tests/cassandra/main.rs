//! The driver against a real Apache Cassandra 5.0 (started by
//! `scripts/cassandra.sh`), as one test binary with a module per area.
//!
//! - `SCYLLA_URI` (`host:port`): a plain node (no authentication).
//!
//! Every test here is `#[ignore]`d, so a plain `cargo test` lists them as
//! ignored instead of reporting a pass for a test that ran nothing;
//! `scripts/cassandra-suite.sh` runs them with `--ignored`, phase by phase.
//! A test run without the variables it needs fails, saying which.
//! - `SCYLLA_AUTH_URI`: a node started with `--auth` (cassandra/cassandra),
//!   for the `auth` module.
//! - `SCYLLA_THREE_NODES=1` with `SCYLLA_URI` on a 3-node cluster: the
//!   `three_nodes` module.
//! - `SCYLLA_TLS_CA` with `SCYLLA_URI` on a node started with `--tls`: the
//!   `tls` module (see it for the other `SCYLLA_TLS_*` variables).
//! - `SCYLLA_PROTOCOL_VERSION=4` pins every session to protocol v4 (by
//!   default they negotiate, and Cassandra 5 speaks v5): CI runs the plain
//!   node's tests both ways.
//!
//! Each test creates its own keyspace (a unique name) and drops it at the
//! end, so the tests run in parallel. `scripts/cassandra-suite.sh` runs all
//! the phases.
#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod auth;
#[path = "../common/mod.rs"]
mod common;
mod paging;
mod protocol;
mod schema;
mod three_nodes;
mod tls;
mod tokens;
mod tracing;
mod types;
mod writes;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use scylla_cql::frame::ProtocolVersion;
use scylla_driver::{Session, SessionBuilder};

/// Logs to the test's output, filtered by `RUST_LOG` (default: warnings).
pub fn setup_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// The value of `var`; panics when it is unset (the test was asked to run,
/// with `--ignored`, without the server it needs).
pub fn env_uri(var: &str) -> String {
    setup_tracing();
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "{var} is not set: this test needs a real server (run scripts/cassandra-suite.sh)"
        ),
    }
}

/// `let uri = require!("SCYLLA_URI");`: the variable's value (see
/// [`env_uri`]).
#[macro_export]
macro_rules! require {
    ($var:expr) => {
        $crate::env_uri($var)
    };
}

/// A session to `uri` with generous timeouts (the node shares 2 cores with
/// the tests).
pub async fn session(uri: &str) -> Session {
    builder(uri).build().await.unwrap()
}

/// The builder [`session`] uses, to add options.
pub fn builder(uri: &str) -> SessionBuilder {
    let builder = SessionBuilder::new()
        .known_node(uri)
        .request_timeout(Duration::from_secs(30))
        .schema_agreement_timeout(Duration::from_secs(30));
    match pinned_version() {
        Some(v) => builder.protocol_version(v),
        None => builder,
    }
}

/// The version `SCYLLA_PROTOCOL_VERSION` pins, if set (4 or 5).
pub fn pinned_version() -> Option<ProtocolVersion> {
    let v = std::env::var("SCYLLA_PROTOCOL_VERSION").ok()?;
    let n: u8 = v
        .parse()
        .unwrap_or_else(|_| panic!("SCYLLA_PROTOCOL_VERSION={v}: expected 4 or 5"));
    Some(ProtocolVersion::from_number(n).unwrap_or_else(|| panic!("unsupported version {n}")))
}

/// A keyspace name no other test (or earlier run) uses.
pub fn unique_keyspace(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}_{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        fastrand::u32(..100_000)
    )
}

/// Creates a SimpleStrategy keyspace with replication factor `rf`, returning
/// its name.
pub async fn create_keyspace(session: &Session, prefix: &str, rf: u32) -> String {
    let ks = unique_keyspace(prefix);
    session
        .query_unpaged(
            format!(
                "CREATE KEYSPACE {ks} WITH replication = \
                 {{'class': 'SimpleStrategy', 'replication_factor': {rf}}}"
            ),
            (),
        )
        .await
        .unwrap();
    ks
}

/// Drops a keyspace (best effort: a failure only leaves it behind).
pub async fn drop_keyspace(session: &Session, ks: &str) {
    if let Err(e) = session
        .query_unpaged(format!("DROP KEYSPACE IF EXISTS {ks}"), ())
        .await
    {
        eprintln!("note: dropping {ks} failed: {e}");
    }
}

/// Runs DDL (or any statement without values), panicking with the statement
/// on failure.
pub async fn ddl(session: &Session, cql: &str) {
    if let Err(e) = session.query_unpaged(cql, ()).await {
        // The whole chain: a schema agreement error's cause is its source.
        panic!("{cql}: {}", common::error_chain(&e));
    }
}
