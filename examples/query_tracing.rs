//! Tracing, both kinds:
//!
//! - the driver's logs: it logs through the `tracing` crate (connections
//!   opened and lost, topology and schema changes, retries, ...); the
//!   application installs a subscriber, here `tracing-subscriber`'s
//!   formatter on stderr, filtered by `RUST_LOG` (default
//!   `info,scylla_driver=debug`);
//! - query tracing: a statement run `with_tracing(true)` makes the
//!   coordinator record what each node did for it; the result carries the
//!   trace's id, and `Session::get_tracing_info` reads the trace.
//!
//! The in-process test cluster records a short trace of its own (received,
//! executed, complete); ScyllaDB and Cassandra (`SCYLLA_URI`) record what
//! each replica did, step by step.
//!
//! ```sh
//! cargo run --example query_tracing
//! RUST_LOG=scylla_driver=trace cargo run --example query_tracing
//! SCYLLA_URI=127.0.0.1:9042 cargo run --example query_tracing
//! ```

#[path = "common/mod.rs"]
mod common;

use std::io::IsTerminal;

use scylla_driver::statement::Statement;
use scylla_driver::SessionBuilder;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> Result<(), common::BoxError> {
    // The driver's logs (and this program's) go to stderr, filtered by
    // RUST_LOG.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,scylla_driver=debug"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours on a terminal only (not in a log file).
        .with_ansi(std::io::stderr().is_terminal())
        .init();

    // SCYLLA_URI, or a test cluster started in this process.
    let cluster = common::cluster().await?;
    let session = SessionBuilder::new()
        .known_node(&cluster.uri)
        .build()
        .await?;
    tracing::info!(uri = %cluster.uri, "session ready");

    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS examples WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 1}",
            (),
        )
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS examples.kv (k int PRIMARY KEY, v text)",
            (),
        )
        .await?;
    session
        .query_unpaged("INSERT INTO examples.kv (k, v) VALUES (1, 'one')", ())
        .await?;

    // A traced read.
    let traced = Statement::new("SELECT v FROM examples.kv WHERE k = 1").with_tracing(true);
    let result = session.query_unpaged(traced, ()).await?;
    let id = result
        .tracing_id()
        .ok_or("the node did not return a trace id")?;
    // The coordinator writes the trace after it answers: this waits
    // (bounded) until it is complete.
    let trace = session.get_tracing_info(id).await?;
    let node = |a: Option<std::net::IpAddr>| a.map_or_else(|| "?".to_owned(), |a| a.to_string());
    println!(
        "trace {id}: {} on {} took {:?}, {} events",
        trace.command.as_deref().unwrap_or("?"),
        node(trace.coordinator),
        trace.elapsed().unwrap_or_default(),
        trace.events.len()
    );
    for e in &trace.events {
        println!(
            "  {:>10?} {}: {}",
            e.elapsed().unwrap_or_default(),
            node(e.source),
            e.activity.as_deref().unwrap_or("")
        );
    }
    Ok(())
}
