//! The README's quick start, as a program: connect, create a table, insert
//! with a prepared statement, read typed rows back, page through them.
//!
//! ```sh
//! SCYLLA_URI=127.0.0.1:9042 cargo run --example quickstart
//! ```

use scylla_driver::statement::Statement;
use scylla_driver::{DeserializeRow, SessionBuilder};

/// A row, matched to the selected columns by name; `name` borrows the frame.
#[derive(DeserializeRow)]
struct Person<'a> {
    name: &'a str,
    age: i32,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uri = std::env::var("SCYLLA_URI").unwrap_or_else(|_| "127.0.0.1:9042".to_owned());
    let session = SessionBuilder::new().known_node(uri).build().await?;

    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS quickstart WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 1}",
            (),
        )
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS quickstart.people (id int PRIMARY KEY, name text, age int)",
            (),
        )
        .await?;

    let insert = session
        .prepare("INSERT INTO quickstart.people (id, name, age) VALUES (?, ?, ?)")
        .await?;
    for (id, name, age) in [(1, "Ada", 36), (2, "Alan", 41), (3, "Grace", 85)] {
        session.execute_unpaged(&insert, (id, name, age)).await?;
    }

    // One row, borrowed straight from the response frame.
    let result = session
        .query_unpaged("SELECT name, age FROM quickstart.people WHERE id = ?", (1,))
        .await?;
    let Person { name, age } = result.single_row()?;
    println!("id 1: {name}, {age}");

    // Every row, a page at a time, as owned values.
    let mut rows = session
        .query_iter::<(i32, String, i32)>(
            Statement::new("SELECT id, name, age FROM quickstart.people").with_page_size(2),
            (),
        )
        .await?;
    while let Some(row) = rows.next().await {
        let (id, name, age) = row?;
        println!("{id}: {name} ({age})");
    }
    Ok(())
}
