//! The derive macros against the in-process test cluster through `Session`:
//! a `#[derive(SerializeRow)]` struct bound by marker name (in a different
//! order than the statement's markers), rows read back into
//! `#[derive(DeserializeRow)]` structs, borrowed and owned.
#![allow(clippy::unwrap_used, missing_docs)]

use crate::common;

use common::{cluster_and_session, create_keyspace};
use scylla_driver::statement::Statement;
use scylla_driver::{DeserializeRow, SerializeRow};

/// Field order differs from the markers' order: binding is by name.
#[derive(SerializeRow)]
struct NewPerson<'a> {
    age: i32,
    name: &'a str,
    id: i32,
}

#[derive(Debug, PartialEq, DeserializeRow)]
struct Person<'a> {
    name: &'a str,
    #[scylla(rename = "id")]
    key: i32,
    age: Option<i32>,
}

#[derive(Debug, PartialEq, DeserializeRow)]
#[scylla(flavor = "enforce_order")]
struct OwnedPerson {
    id: i32,
    name: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derived_rows_through_a_session() {
    let (_cluster, session) = cluster_and_session(1, 2, |b| b).await;
    create_keyspace(&session, "d", 1).await;
    session
        .query_unpaged(
            "CREATE TABLE d.people (id int PRIMARY KEY, name text, age int)",
            (),
        )
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO d.people (id, name, age) VALUES (?, ?, ?)")
        .await
        .unwrap();
    for (id, name, age) in [(1, "Ada", 36), (2, "Alan", 41)] {
        session
            .execute_unpaged(&insert, NewPerson { age, name, id })
            .await
            .unwrap();
    }

    let result = session
        .query_unpaged("SELECT age, id, name FROM d.people WHERE id = ?", (2,))
        .await
        .unwrap();
    let p: Person<'_> = result.single_row().unwrap();
    assert_eq!(
        p,
        Person {
            name: "Alan",
            key: 2,
            age: Some(41)
        }
    );
    // A column the struct lacks is refused before any row is read.
    assert!(result.single_row::<OwnedPerson>().is_err());

    let mut rows = session
        .query_iter(Statement::new("SELECT id, name FROM d.people"), ())
        .await
        .unwrap()
        .rows_stream::<OwnedPerson>()
        .unwrap();
    let mut seen = Vec::new();
    while let Some(row) = rows.next().await {
        seen.push(row.unwrap());
    }
    seen.sort_by_key(|p| p.id);
    assert_eq!(
        seen,
        vec![
            OwnedPerson {
                id: 1,
                name: "Ada".into()
            },
            OwnedPerson {
                id: 2,
                name: "Alan".into()
            }
        ]
    );
}
