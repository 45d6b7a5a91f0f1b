//! Prepared statements and batches.
//!
//! - A statement prepared once and executed many times with bound values:
//!   the node parses it once, and the driver knows the types of its bind
//!   markers and which of them form the partition key, so each execution goes
//!   straight to a replica of its partition.
//! - A logged batch: a transfer that updates two accounts and appends to a
//!   ledger, all applied or none (the batch log's guarantee).
//! - An unlogged batch of rows of one partition: one request, one mutation.
//! - A batch mixing prepared statements and a plain text one.
//!
//! ```sh
//! cargo run --example prepared_batches
//! SCYLLA_URI=127.0.0.1:9042 cargo run --example prepared_batches
//! ```

#[path = "common/mod.rs"]
mod common;

use scylla_driver::statement::{Batch, BatchType};
use scylla_driver::SessionBuilder;

#[tokio::main]
async fn main() -> Result<(), common::BoxError> {
    // SCYLLA_URI, or a test cluster started in this process.
    let cluster = common::cluster().await?;
    let session = SessionBuilder::new()
        .known_node(&cluster.uri)
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
            "CREATE TABLE IF NOT EXISTS examples.accounts (id int PRIMARY KEY, owner text, balance bigint)",
            (),
        )
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS examples.ledger \
             (account int, seq int, amount bigint, note text, PRIMARY KEY (account, seq))",
            (),
        )
        .await?;
    session
        .query_unpaged("TRUNCATE examples.ledger", ())
        .await?;

    // Prepare once: the node returns the bind markers' names and types, and
    // which of them are the partition key (the driver computes the token
    // from them, and picks a replica and its shard).
    let open = session
        .prepare("INSERT INTO examples.accounts (id, owner, balance) VALUES (?, ?, ?)")
        .await?;
    let markers: Vec<String> = open
        .bind_markers()
        .iter()
        .map(|m| format!("{} {}", m.name, m.typ))
        .collect();
    println!(
        "prepared: bind markers [{}], partition key at {:?}",
        markers.join(", "),
        open.pk_indexes()
    );
    // ... then execute many times.
    for (id, owner) in [(1, "Ada"), (2, "Alan"), (3, "Grace")] {
        session.execute_unpaged(&open, (id, owner, 100i64)).await?;
    }

    // A logged batch: the transfer is applied whole or not at all. Each
    // statement of the batch gets its own values, in order.
    let set_balance = session
        .prepare("UPDATE examples.accounts SET balance = ? WHERE id = ?")
        .await?;
    let record = session
        .prepare("INSERT INTO examples.ledger (account, seq, amount, note) VALUES (?, ?, ?, ?)")
        .await?;
    let mut transfer = Batch::new(BatchType::Logged);
    transfer.append(set_balance.clone());
    transfer.append(set_balance.clone());
    transfer.append(record.clone());
    transfer.append(record.clone());
    session
        .batch(
            &transfer,
            (
                (70i64, 1),
                (130i64, 2),
                (1, 1, -30i64, "to 2"),
                (2, 1, 30i64, "from 1"),
            ),
        )
        .await?;
    println!("logged batch: moved 30 from account 1 to account 2");

    // An unlogged batch of rows of one partition (account 3): no batch log
    // is needed, the rows are one mutation of one partition.
    let mut entries = Batch::new(BatchType::Unlogged);
    for _ in 0..3 {
        entries.append(record.clone());
    }
    // A plain text statement fits in a batch too (with no values here).
    entries.append("UPDATE examples.accounts SET owner = 'Grace H.' WHERE id = 3");
    session
        .batch(
            &entries,
            (
                (3, 1, 5i64, "interest"),
                (3, 2, 5i64, "interest"),
                (3, 3, -10i64, "fee"),
                (),
            ),
        )
        .await?;
    println!("unlogged batch: 3 ledger rows of account 3 and a rename, in one request");

    // Read back, prepared too.
    let balance_of = session
        .prepare("SELECT owner, balance FROM examples.accounts WHERE id = ?")
        .await?;
    let history = session
        .prepare("SELECT seq, amount, note FROM examples.ledger WHERE account = ?")
        .await?;
    let mut total = 0;
    for id in 1..=3 {
        let (owner, balance): (String, i64) = session
            .execute_unpaged(&balance_of, (id,))
            .await?
            .single_row()?;
        let entries: Vec<(i32, i64, String)> = session
            .execute_unpaged(&history, (id,))
            .await?
            .into_rows()?;
        println!("account {id} ({owner}): balance {balance}, ledger {entries:?}");
        total += balance;
    }
    // The transfer moved money; it did not create any.
    if total != 300 {
        return Err(format!("the balances add up to {total}, not 300").into());
    }
    println!("total balance: {total}");
    Ok(())
}
