//! Errors and retries: what a failed request tells you, and who decides to
//! try again.
//!
//! Every request fails with an `ExecutionError`, whose variants say where it
//! failed: `Server` (a node answered with an error: the `DbError` inside has
//! the protocol's code and details), `Timeout`, `NoConnection`,
//! `Connection`, `Serialization` (a value does not fit its bind marker),
//! `TypeCheck` / `Deserialization` (a row does not fit the Rust type),
//! `Prepare`, `Page`, ... The example provokes several and matches on them.
//!
//! Then retries: a retry policy sees each failed attempt and decides (try
//! the same node, the next one, wait, or give up). The session's default
//! retries only what is safe; here a custom policy answers UNAVAILABLE by
//! trying once more at a consistency the live replicas can meet, and the
//! driver's metrics count the retry.
//!
//! ```sh
//! cargo run --example errors_retries
//! SCYLLA_URI=127.0.0.1:9042 cargo run --example errors_retries
//! ```

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;

use scylla_driver::errors::{BadQuery, DbError, RequestAttemptError};
use scylla_driver::policy::retry::{
    AttemptFailure, DefaultRetryPolicy, RetryContext, RetryDecision, RetryPolicy,
};
use scylla_driver::statement::{Consistency, ExecutionProfile, Statement};
use scylla_driver::{ExecutionError, SessionBuilder};

/// On UNAVAILABLE, retries once on the same node at the consistency the
/// live replicas can give (ONE if any is alive); otherwise does what the
/// default policy does. Trading consistency for availability is the
/// application's call, which is why no driver does it by default.
#[derive(Debug)]
struct DowngradeOnUnavailable;

impl RetryPolicy for DowngradeOnUnavailable {
    fn decide(&self, failure: AttemptFailure<'_>, ctx: &RetryContext) -> RetryDecision {
        match failure {
            AttemptFailure::Server(DbError::Unavailable { alive, .. })
                if ctx.retries == 0 && *alive > 0 =>
            {
                let lower = match alive {
                    1 => Consistency::One,
                    2 => Consistency::Two,
                    _ => Consistency::Three,
                };
                RetryDecision::RetrySameTarget(Some(lower))
            }
            _ => DefaultRetryPolicy.decide(failure, ctx),
        }
    }
}

/// What went wrong, from the error's variant.
fn explain(e: &ExecutionError) -> String {
    match e {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(error, message)) => {
            match error {
                DbError::SyntaxError => format!("the node could not parse it: {message}"),
                DbError::Invalid => format!("the node refused it as invalid: {message}"),
                DbError::AlreadyExists { keyspace, table } => {
                    format!("{keyspace}.{table} already exists")
                }
                DbError::Unavailable {
                    consistency,
                    required,
                    alive,
                } => {
                    format!(
                        "unavailable at {consistency}: {required} replicas required, {alive} alive"
                    )
                }
                other => format!("the node answered {other} (code {:#06x})", other.code()),
            }
        }
        ExecutionError::RequestTimeout(timeout) => format!("no answer within {timeout:?}"),
        ExecutionError::ConnectionPoolError(_) => "no node could take the request".to_owned(),
        ExecutionError::LastAttemptError(RequestAttemptError::BrokenConnectionError(_)) => {
            "the connection failed".to_owned()
        }
        ExecutionError::BadQuery(BadQuery::SerializationError(e)) => {
            format!("a bound value does not fit: {e}")
        }
        ExecutionError::TypeCheck(e) => format!("the rows do not fit the Rust type: {e}"),
        other => format!("other: {other}"),
    }
}

#[tokio::main]
async fn main() -> Result<(), common::BoxError> {
    // SCYLLA_URI, or a test cluster started in this process.
    let cluster = common::cluster().await?;
    let session = SessionBuilder::new()
        .known_node(&cluster.uri)
        .execution_profile(
            "downgrading",
            ExecutionProfile::builder()
                .retry_policy(Arc::new(DowngradeOnUnavailable))
                .build(),
        )
        .build()
        .await?;
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

    // Each of these fails, in its own way.
    let attempts = [
        ("a typo", Statement::new("SELEC v FROM examples.kv")),
        (
            "a table that does not exist",
            Statement::new("SELECT v FROM examples.nope"),
        ),
        (
            "creating a table twice",
            Statement::new("CREATE TABLE examples.kv (k int PRIMARY KEY, v text)"),
        ),
        (
            "a write at THREE with one replica",
            Statement::new("INSERT INTO examples.kv (k, v) VALUES (1, 'one')")
                .with_consistency(Consistency::Three),
        ),
    ];
    let mut failed = 0;
    for (what, statement) in attempts {
        match session.query_unpaged(statement, ()).await {
            Ok(_) => println!("{what}: succeeded?"),
            Err(e) => {
                failed += 1;
                println!("{what}: {}", explain(&e));
            }
        }
    }

    // Client-side errors: a value of the wrong type for its bind marker,
    // and a row read into the wrong Rust type. No request reaches a node.
    let insert = session
        .prepare("INSERT INTO examples.kv (k, v) VALUES (?, ?)")
        .await?;
    if let Err(e) = session.execute_unpaged(&insert, ("one", 1)).await {
        failed += 1;
        println!("binding text to an int marker: {}", explain(&e));
    }
    session.execute_unpaged(&insert, (1, "one")).await?;
    let result = session
        .query_unpaged("SELECT v FROM examples.kv WHERE k = 1", ())
        .await?;
    if let Err(e) = result.single_row::<(i32,)>() {
        failed += 1;
        println!("reading a text column as i32: {}", explain(&e));
    }
    if failed != 6 {
        return Err(format!("{failed} of 6 requests failed").into());
    }

    // The UNAVAILABLE write again, with the downgrading profile: its retry
    // policy tries again at ONE, and the write goes through.
    let downgrading = session.execution_profile("downgrading")?;
    let retries_before = session.metrics().snapshot().retries;
    session
        .query_unpaged(
            Statement::new("INSERT INTO examples.kv (k, v) VALUES (2, 'two')")
                .with_consistency(Consistency::Three)
                .with_execution_profile(downgrading),
            (),
        )
        .await?;
    let retries = session.metrics().snapshot().retries - retries_before;
    println!("the write at THREE with the downgrading policy: applied after {retries} retry");
    let (v,): (String,) = session
        .query_unpaged("SELECT v FROM examples.kv WHERE k = 2", ())
        .await?
        .single_row()?;
    if v != "two" || retries != 1 {
        return Err(format!("read back {v:?} after {retries} retries").into());
    }
    Ok(())
}
