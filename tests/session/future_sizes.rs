//! The size of a request's future on the `Session` path. Every `.await`
//! layer moves its child future into place, so a large future is copied
//! (memmove) several times per request: profiled at 5% of the client's CPU
//! at concurrency 64 before the rare paths (re-preparation, schema
//! agreement) were boxed. Deterministic: sizes, not timings. The bounds are
//! those of a debug build (the test profile), with some room; a release
//! build's futures are smaller.
#![allow(clippy::unwrap_used, missing_docs)]

use scylla_driver::SessionBuilder;
use scylla_testbed::TestCluster;

/// Upper bound for the future of `execute_unpaged` / `query_unpaged`
/// (debug build, rustc 1.95). Before boxing the rare paths (re-preparation,
/// schema agreement): 3,512 / 4,208 bytes; after: 3,056 / 3,752. After also
/// boxing the keyspace switch and the wait for a free stream id, and making
/// the span wrapper a plain function: 2,232 / 2,928 (release: 2,144 bytes
/// for `execute_page`, from 2,968). After borrowing the routing and run
/// options instead of moving them in, and scoping the locals that no await
/// needs (an attempt's outcome, the routing request, an UNPREPARED answer):
/// 1,848 / 2,624 (release: 1,760 for `execute_page`). After pinning the
/// attempt's future in place (awaiting it by value moved it twice) and
/// building the parameters inside the message: 1,736 / 2,552 (release:
/// 1,648). With execution profiles resolved per request, tablets routing
/// v2 and shared re-preparation: 1,808 / 2,736; then boxing a query's
/// preparation (for values that need their markers' types): 1,808 / 2,072.
const MAX_EXECUTE: usize = 1_900;
const MAX_QUERY: usize = 2_300;

#[tokio::test]
async fn request_futures_stay_small() {
    let cluster = TestCluster::builder().nodes(1).start().await.unwrap();
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();
    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS fs WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            (),
        )
        .await
        .unwrap();
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS fs.kv (k bigint PRIMARY KEY, v bigint)",
            (),
        )
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO fs.kv (k, v) VALUES (?, ?)")
        .await
        .unwrap();

    let execute = session.execute_unpaged(&insert, (1i64, 2i64));
    let execute_size = std::mem::size_of_val(&execute);
    execute.await.unwrap();
    let query = session.query_unpaged("SELECT v FROM fs.kv WHERE k = 1", ());
    let query_size = std::mem::size_of_val(&query);
    query.await.unwrap();
    eprintln!("execute_unpaged future: {execute_size} bytes, query_unpaged: {query_size} bytes");
    assert!(
        execute_size <= MAX_EXECUTE,
        "execute_unpaged future: {execute_size} bytes"
    );
    assert!(
        query_size <= MAX_QUERY,
        "query_unpaged future: {query_size} bytes"
    );
}
