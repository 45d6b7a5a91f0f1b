//! The README's quick start, as a program: connect, create a table, insert
//! with a prepared statement, read typed rows back, page through them.
//!
//! ```sh
//! SCYLLA_URI=127.0.0.1:9042 cargo run --example quickstart
//! ```
//!
//! With client encryption: `SCYLLA_TLS_CA` names the PEM file of the CA that
//! signed the nodes' certificates (nodes are verified by IP address, or by
//! `SCYLLA_TLS_SERVER_NAME` if set); `SCYLLA_TLS_CERT` and `SCYLLA_TLS_KEY`
//! add a client certificate (mutual TLS).
//!
//! ```sh
//! SCYLLA_URI=127.0.0.1:9142 SCYLLA_TLS_CA=ca.pem cargo run --example quickstart
//! ```

use scylla_driver::connection::tls::{ServerName, TlsConfig};
use scylla_driver::statement::Statement;
use scylla_driver::{DeserializeRow, SessionBuilder};

/// A row, matched to the selected columns by name; `name` borrows the frame.
#[derive(DeserializeRow)]
struct Person<'a> {
    name: &'a str,
    age: i32,
}

/// TLS settings from the environment, if `SCYLLA_TLS_CA` is set.
fn tls_from_env() -> Result<Option<TlsConfig>, Box<dyn std::error::Error>> {
    let Ok(ca) = std::env::var("SCYLLA_TLS_CA") else {
        return Ok(None);
    };
    let mut tls = TlsConfig::builder().ca_pem_file(ca)?;
    if let (Ok(cert), Ok(key)) = (
        std::env::var("SCYLLA_TLS_CERT"),
        std::env::var("SCYLLA_TLS_KEY"),
    ) {
        tls = tls.client_cert_pem_files(cert, key)?;
    }
    if let Ok(name) = std::env::var("SCYLLA_TLS_SERVER_NAME") {
        tls = tls.server_name(ServerName::Fixed(name));
    }
    Ok(Some(tls.build()?))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uri = std::env::var("SCYLLA_URI").unwrap_or_else(|_| "127.0.0.1:9042".to_owned());
    let mut builder = SessionBuilder::new().known_node(uri);
    if let Some(tls) = tls_from_env()? {
        builder = builder.tls(tls);
    }
    let session = builder.build().await?;

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
