//! Derives: Rust structs as rows, bound values and user-defined types.
//!
//! - `#[derive(SerializeRow)]`: a struct's fields bound to the bind markers
//!   of the same name (`rename` for another name).
//! - `#[derive(DeserializeRow)]`: a row read into a struct, columns matched
//!   by name; fields may borrow from the response (`&str`), be `Option`
//!   (null), or collections.
//! - `#[derive(SerializeValue, DeserializeValue)]`: a struct as a UDT,
//!   fields matched by name: nested in another UDT, in a list, in a frozen
//!   and in a non-frozen column.
//!
//! ```sh
//! cargo run --example derives
//! SCYLLA_URI=127.0.0.1:9042 cargo run --example derives
//! ```

#[path = "common/mod.rs"]
mod common;

use scylla_driver::{
    DeserializeRow, DeserializeValue, SerializeRow, SerializeValue, SessionBuilder,
};

/// The UDT `examples.phone`.
#[derive(Debug, Clone, PartialEq, SerializeValue, DeserializeValue)]
struct Phone {
    kind: String,
    number: String,
}

/// The UDT `examples.contact`: a UDT inside a UDT, and a list of UDTs.
#[derive(Debug, Clone, PartialEq, SerializeValue, DeserializeValue)]
struct Contact {
    email: Option<String>,
    phones: Vec<Phone>,
    /// The UDT field is `pref` (named differently from the Rust field).
    #[scylla(rename = "pref")]
    preferred: Option<Phone>,
}

/// Values of an INSERT, bound by name.
#[derive(SerializeRow)]
struct NewCustomer<'a> {
    id: i32,
    name: &'a str,
    tags: Vec<&'a str>,
    contact: Contact,
    billing: Option<Phone>,
}

/// A row; `name` borrows from the response frame (no copy).
#[derive(DeserializeRow)]
struct Customer<'a> {
    id: i32,
    name: &'a str,
    tags: Option<Vec<String>>,
    contact: Option<Contact>,
    billing: Option<Phone>,
}

#[tokio::main]
async fn main() -> Result<(), common::BoxError> {
    // SCYLLA_URI, or a test cluster started in this process.
    let cluster = common::cluster().await?;
    let session = SessionBuilder::new()
        .known_node(&cluster.uri)
        .build()
        .await?;
    for ddl in [
        "CREATE KEYSPACE IF NOT EXISTS examples WITH replication = \
         {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "CREATE TYPE IF NOT EXISTS examples.phone (kind text, number text)",
        "CREATE TYPE IF NOT EXISTS examples.contact \
         (email text, phones list<frozen<phone>>, pref frozen<phone>)",
        // `contact` is frozen (written whole); `billing` is not (a non-frozen
        // UDT, whose fields a server can update one by one).
        "CREATE TABLE IF NOT EXISTS examples.customers \
         (id int PRIMARY KEY, name text, tags list<text>, contact frozen<contact>, billing phone)",
    ] {
        session.query_unpaged(ddl, ()).await?;
    }

    let mobile = Phone {
        kind: "mobile".into(),
        number: "+44 7700 900123".into(),
    };
    let ada = NewCustomer {
        id: 1,
        name: "Ada",
        tags: vec!["vip", "early"],
        contact: Contact {
            email: Some("ada@example.com".into()),
            phones: vec![
                mobile.clone(),
                Phone {
                    kind: "home".into(),
                    number: "+44 20 7946 0000".into(),
                },
            ],
            preferred: Some(mobile.clone()),
        },
        billing: Some(mobile.clone()),
    };
    let alan = NewCustomer {
        id: 2,
        name: "Alan",
        tags: Vec::new(),
        contact: Contact {
            email: None,
            phones: Vec::new(),
            preferred: None,
        },
        billing: None,
    };
    let insert = session
        .prepare(
            "INSERT INTO examples.customers (id, name, tags, contact, billing) \
             VALUES (?, ?, ?, ?, ?)",
        )
        .await?;
    let expected = [ada.contact.clone(), alan.contact.clone()];
    session.execute_unpaged(&insert, ada).await?;
    session.execute_unpaged(&insert, alan).await?;

    let result = session
        .query_unpaged(
            "SELECT id, name, tags, contact, billing FROM examples.customers WHERE id IN (1, 2)",
            (),
        )
        .await?;
    let mut customers: Vec<Customer<'_>> =
        result.rows::<Customer<'_>>()?.collect::<Result<_, _>>()?;
    customers.sort_by_key(|c| c.id);
    for c in &customers {
        println!(
            "{} {}: tags {:?}\n  contact {:?}\n  billing {:?}",
            c.id, c.name, c.tags, c.contact, c.billing
        );
    }
    // What was written is what comes back (an empty list reads as null).
    let read: Vec<Option<Contact>> = customers.iter().map(|c| c.contact.clone()).collect();
    if read != expected.map(Some) {
        return Err("the contacts read back differ from those written".into());
    }
    if customers.first().and_then(|c| c.billing.as_ref()) != Some(&mobile) {
        return Err("the billing phone read back differs".into());
    }
    Ok(())
}
