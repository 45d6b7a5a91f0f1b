//! `CachingSession` as programs written for the official `scylla` 1.x crate
//! use it: statements run prepared, prepared once per text while cached,
//! within a bounded cache; batches and paged reads through it.
#![allow(clippy::unwrap_used, missing_docs)]

use futures::TryStreamExt;
use scylla::client::caching_session::{CachingSession, CachingSessionBuilder};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::PagingState;
use scylla::statement::batch::Batch;
use scylla::statement::unprepared::Statement;
use scylla_testbed::TestCluster;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// PREPARE requests the (one-node) cluster has received.
fn prepares(cluster: &TestCluster) -> u64 {
    cluster.node_stats(0).unwrap().node.prepares
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_run_prepared_once_per_text_within_the_bound() -> Result<(), Error> {
    let cluster = TestCluster::builder().nodes(1).shards(2).start().await?;
    let session: Session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await?;
    session
        .query_unpaged(
            "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE ks.t (k int, c int, v text, PRIMARY KEY (k, c))",
            &[],
        )
        .await?;
    let session = CachingSession::from(session, 2);
    assert_eq!(session.get_max_capacity(), 2);

    let insert = "INSERT INTO ks.t (k, c, v) VALUES (?, ?, ?)";
    let before = prepares(&cluster);
    for c in 0..10 {
        session
            .execute_unpaged(insert, (1, c, format!("v{c}")))
            .await?;
    }
    // One PREPARE (per node: one node here) for ten executions.
    assert_eq!(prepares(&cluster) - before, 1);
    assert_eq!(session.cached_statements(), 1);

    // Three texts through a cache of two: at most two are kept. (An evicted
    // statement coming back is taken from the session's own cache of
    // prepared statements, without a PREPARE.)
    let by_key = "SELECT c, v FROM ks.t WHERE k = ?";
    let count = "SELECT COUNT(*) FROM ks.t WHERE k = ?";
    session.execute_unpaged(by_key, (1,)).await?;
    session.execute_unpaged(count, (1,)).await?;
    assert_eq!(session.cached_statements(), 2);
    session.execute_unpaged(insert, (1, 10, "v10")).await?;
    assert_eq!(session.cached_statements(), 2);

    // A statement's options apply to the run: a page size of 3.
    let mut paged = Statement::new(by_key);
    paged.set_page_size(3);
    let (page, next) = session
        .execute_single_page(paged.clone(), (1,), PagingState::start())
        .await?;
    assert_eq!(page.into_rows_result()?.rows_num(), 3);
    assert!(!next.finished());
    let rows: Vec<(i32, String)> = session
        .execute_iter(paged, (1,))
        .await?
        .rows_stream::<(i32, String)>()?
        .try_collect()
        .await?;
    assert_eq!(rows.len(), 11);

    // A batch of unprepared statements runs prepared through the cache.
    let mut batch = Batch::default();
    batch.append_statement(insert);
    batch.append_statement(insert);
    session.batch(&batch, ((2, 0, "a"), (2, 1, "b"))).await?;
    let (n,): (i64,) = session
        .execute_unpaged(count, (2,))
        .await?
        .into_rows_result()?
        .single_row()?;
    assert_eq!(n, 2);

    // The builder form.
    let session = CachingSessionBuilder::new(session.get_session().clone())
        .max_capacity(10)
        .use_cached_result_metadata(true)
        .build();
    let prepared = session.add_prepared_statement(by_key).await?;
    assert!(prepared.get_use_cached_result_metadata());
    let rows = session
        .execute_unpaged(by_key, (1,))
        .await?
        .into_rows_result()?;
    assert_eq!(rows.rows_num(), 11);
    Ok(())
}
