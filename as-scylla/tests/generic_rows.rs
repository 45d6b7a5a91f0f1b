//! Rows read through generic code written the way ORMs for the official
//! `scylla` 1.x crate write it: a model bound by
//! `for<'frame, 'metadata> DeserializeRow<'frame, 'metadata>`, read through
//! `query_iter(..).await?.rows_stream::<T>()?` and
//! `into_rows_result()?.rows::<T>()`, and a model that does not fit the
//! columns refused by `rows_stream` itself with a `TypeCheckError`. Run
//! against the in-process test cluster.
#![allow(clippy::unwrap_used, missing_docs)]

use futures::TryStreamExt;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::deserialize::row::DeserializeRow;
use scylla::errors::NextRowError;
use scylla_testbed::TestCluster;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Every row of `query`, as `T`.
async fn all<T>(session: &Session, query: &str) -> Result<Vec<T>, Error>
where
    T: for<'frame, 'metadata> DeserializeRow<'frame, 'metadata> + Send + 'static,
{
    let streamed: Result<Vec<T>, NextRowError> = session
        .query_iter(query, &[])
        .await?
        .rows_stream::<T>()?
        .try_collect()
        .await;
    let streamed = streamed?;
    let unpaged = session
        .query_unpaged(query, &[])
        .await?
        .into_rows_result()?
        .rows::<T>()?
        .collect::<Result<Vec<T>, _>>()?;
    assert_eq!(streamed.len(), unpaged.len());
    Ok(streamed)
}

#[derive(Debug, PartialEq, scylla::DeserializeRow)]
struct Item {
    k: i32,
    v: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_models_read_rows() -> Result<(), Error> {
    let cluster = TestCluster::builder().nodes(1).shards(1).start().await?;
    let session: Session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await?;
    session
        .query_unpaged(
            "CREATE KEYSPACE gen WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await?;
    session
        .query_unpaged("CREATE TABLE gen.items (k int PRIMARY KEY, v text)", &[])
        .await?;
    for k in 0..5 {
        session
            .query_unpaged(
                "INSERT INTO gen.items (k, v) VALUES (?, ?)",
                (k, format!("v{k}")),
            )
            .await?;
    }
    let mut items: Vec<Item> = all(&session, "SELECT k, v FROM gen.items").await?;
    items.sort_by_key(|i| i.k);
    assert_eq!(items.len(), 5);
    assert_eq!(
        items[3],
        Item {
            k: 3,
            v: "v3".into()
        }
    );
    let pairs: Vec<(i32, String)> = all(&session, "SELECT k, v FROM gen.items").await?;
    assert_eq!(pairs.len(), 5);

    // A model that does not fit: refused when the stream is typed, before
    // any row is read.
    let refused = session
        .query_iter("SELECT k, v FROM gen.items", &[])
        .await?
        .rows_stream::<(i32, i64)>();
    let Err(e) = refused else {
        panic!("a text column read as i64 was accepted");
    };
    assert!(e.to_string().contains("i64"), "{e}");
    Ok(())
}
