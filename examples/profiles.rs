//! Execution profiles and consistency levels.
//!
//! A profile is a named bundle of request settings (consistency, serial
//! consistency, timeout, retry and speculative policies, page size),
//! registered on the session and attached to statements. A setting comes
//! from, first set wins: the statement itself, its profile, the session's
//! default profile, the session configuration.
//!
//! The example registers a default profile (LOCAL_QUORUM), an `analytics`
//! profile (ONE, long timeout, big pages, speculative execution) and a
//! `three-replicas` profile (THREE), and shows each applied: on a keyspace
//! with one replica, THREE cannot be met, and the node answers UNAVAILABLE.
//!
//! ```sh
//! cargo run --example profiles
//! SCYLLA_URI=127.0.0.1:9042 cargo run --example profiles
//! ```

#[path = "common/mod.rs"]
mod common;

use std::time::Duration;

use scylla_driver::errors::{DbError, RequestAttemptError};
use scylla_driver::policy::speculative::SpeculativeExecution;
use scylla_driver::statement::{Consistency, ExecutionProfile, SerialConsistency, Statement};
use scylla_driver::{ExecutionError, SessionBuilder};

#[tokio::main]
async fn main() -> Result<(), common::BoxError> {
    // SCYLLA_URI, or a test cluster started in this process.
    let cluster = common::cluster().await?;
    let session = SessionBuilder::new()
        .known_node(&cluster.uri)
        // What every statement without a profile of its own uses.
        .default_execution_profile(
            ExecutionProfile::builder()
                .consistency(Consistency::LocalQuorum)
                // The Paxos round of lightweight transactions (IF ...).
                .serial_consistency(Some(SerialConsistency::LocalSerial))
                .request_timeout(Some(Duration::from_secs(5)))
                .build(),
        )
        // Reads that may be slightly stale but should never give up early;
        // idempotent statements get a second attempt at another replica if
        // the first has not answered within 50 ms.
        .execution_profile(
            "analytics",
            ExecutionProfile::builder()
                .consistency(Consistency::One)
                .request_timeout(Some(Duration::from_secs(60)))
                .page_size(5_000)
                .speculative_execution(SpeculativeExecution::new(2, Duration::from_millis(50)))
                .build(),
        )
        .execution_profile(
            "three-replicas",
            ExecutionProfile::builder()
                .consistency(Consistency::Three)
                .build(),
        )
        .build()
        .await?;
    // Looked up once, by name: an unknown name is an error here, not a
    // silent fall-back to defaults at request time.
    let analytics = session.execution_profile("analytics")?;
    let three = session.execution_profile("three-replicas")?;

    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS examples WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 1}",
            (),
        )
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS examples.events (day text, seq int, what text, \
             PRIMARY KEY (day, seq))",
            (),
        )
        .await?;

    // The default profile: LOCAL_QUORUM (1 of 1 replica here).
    let insert = session
        .prepare("INSERT INTO examples.events (day, seq, what) VALUES (?, ?, ?)")
        .await?;
    for seq in 0..10 {
        session
            .execute_unpaged(&insert, ("2026-11-26", seq, format!("event {seq}")))
            .await?;
    }
    println!("10 writes at LOCAL_QUORUM (the default profile)");

    // A profile on a statement: ONE, pages of 5,000 rows.
    let report = Statement::new("SELECT seq, what FROM examples.events WHERE day = ?")
        .with_execution_profile(analytics.clone())
        .with_idempotent(true);
    let rows: Vec<(i32, String)> = session
        .query_unpaged(report.clone(), ("2026-11-26",))
        .await?
        .into_rows()?;
    println!("{} rows read at ONE (the analytics profile)", rows.len());

    // The statement's own setting wins over its profile's.
    let strict = report.with_consistency(Consistency::All);
    session.query_unpaged(strict, ("2026-11-26",)).await?;
    println!("the same read at ALL (set on the statement, over the profile's ONE)");

    // A profile whose consistency this keyspace cannot meet: three replicas
    // must answer, and it has one.
    let demanding = Statement::new("SELECT seq FROM examples.events WHERE day = ?")
        .with_execution_profile(three);
    match session.query_unpaged(demanding, ("2026-11-26",)).await {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(error, _))) => {
            match error {
                DbError::Unavailable {
                    consistency,
                    required,
                    alive,
                } => println!(
                    "at {consistency} (the three-replicas profile): UNAVAILABLE, \
                 {required} replicas required, {alive} alive"
                ),
                other => return Err(format!("expected UNAVAILABLE, got {other}").into()),
            }
        }
        Err(e) => return Err(e.into()),
        Ok(_) => return Err("a read at THREE succeeded on a keyspace with one replica".into()),
    }

    Ok(())
}
