//! The README's quick start, as a program: connect, create a table with a
//! user-defined type, insert with a prepared statement (values from a
//! derived struct), read typed rows back (into derived structs), page
//! through them.
//!
//! ```sh
//! cargo run --example quickstart                            # a test cluster in the process
//! SCYLLA_URI=127.0.0.1:9042 cargo run --example quickstart  # a real cluster
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

#[path = "common/mod.rs"]
mod common;

use scylla_driver::statement::Statement;
use scylla_driver::tls::{ServerName, TlsConfig};
use scylla_driver::{
    DeserializeRow, DeserializeValue, SerializeRow, SerializeValue, SessionBuilder,
};

/// The UDT `quickstart.address`, fields matched by name.
#[derive(Debug, SerializeValue, DeserializeValue)]
struct Address {
    street: String,
    city: String,
}

/// A row, matched to the selected columns by name; `name` borrows the frame.
#[derive(DeserializeRow)]
struct Person<'a> {
    name: &'a str,
    age: i32,
    address: Option<Address>,
}

/// Bound values, matched to the bind markers by name.
#[derive(SerializeRow)]
struct NewPerson<'a> {
    id: i32,
    name: &'a str,
    age: i32,
    address: Address,
}

/// TLS settings from the environment, if `SCYLLA_TLS_CA` is set.
fn tls_from_env() -> Result<Option<TlsConfig>, common::BoxError> {
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
async fn main() -> Result<(), common::BoxError> {
    // SCYLLA_URI, or a test cluster started in this process.
    let cluster = common::cluster().await?;
    let mut builder = SessionBuilder::new().known_node(&cluster.uri);
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
            "CREATE TYPE IF NOT EXISTS quickstart.address (street text, city text)",
            (),
        )
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS quickstart.users \
             (id int PRIMARY KEY, name text, age int, address frozen<address>)",
            (),
        )
        .await?;

    let insert = session
        .prepare("INSERT INTO quickstart.users (id, name, age, address) VALUES (?, ?, ?, ?)")
        .await?;
    for (id, name, age, city) in [
        (1, "Ada", 36, "London"),
        (2, "Alan", 41, "Manchester"),
        (3, "Grace", 85, "Arlington"),
    ] {
        let address = Address {
            street: format!("{id} Main Street"),
            city: city.to_owned(),
        };
        let person = NewPerson {
            id,
            name,
            age,
            address,
        };
        session.execute_unpaged(&insert, person).await?;
    }

    // One row, borrowed straight from the response frame.
    let result = session
        .query_unpaged(
            "SELECT name, age, address FROM quickstart.users WHERE id = ?",
            (1,),
        )
        .await?;
    let Person { name, age, address } = result.single_row()?;
    println!("id 1: {name}, {age}, {address:?}");

    // Every row, a page at a time, as owned values.
    let mut rows = session
        .query_iter(
            Statement::new("SELECT id, name, age FROM quickstart.users").with_page_size(2),
            (),
        )
        .await?
        .rows_stream::<(i32, String, i32)>()?;
    while let Some(row) = rows.next().await {
        let (id, name, age) = row?;
        println!("{id}: {name} ({age})");
    }
    Ok(())
}
