//! Paging over 10,000 rows with several page sizes, through the row streams
//! (`query_iter`, `execute_iter`) and by hand (`execute_single_page`,
//! `query_single_page`): every row is seen exactly once.

use scylla_driver::statement::{Batch, BatchType, Statement};
use scylla_driver::Session;

use crate::{create_keyspace, ddl, drop_keyspace, require, session};

const ROWS: i32 = 10_000;
/// Rows live in this many partitions (so a full scan crosses partitions and
/// token ranges, and a partition is deep enough for clustering pages).
const PARTITIONS: i32 = 20;

async fn fill(session: &Session, ks: &str) {
    ddl(
        session,
        &format!("CREATE TABLE {ks}.t (p int, c int, v text, PRIMARY KEY (p, c))"),
    )
    .await;
    let insert = session
        .prepare(format!("INSERT INTO {ks}.t (p, c, v) VALUES (?, ?, ?)"))
        .await
        .unwrap();
    // Unlogged batches of 100 rows of one partition each.
    let mut batch = Batch::new(BatchType::Unlogged);
    for _ in 0..100 {
        batch.append(insert.clone());
    }
    let per = ROWS / PARTITIONS;
    let mut tasks = Vec::new();
    for p in 0..PARTITIONS {
        let session = session.clone();
        let batch = batch.clone();
        tasks.push(tokio::spawn(async move {
            for chunk in 0..per / 100 {
                let rows: Vec<(i32, i32, String)> = (0..100)
                    .map(|i| {
                        let c = chunk * 100 + i;
                        (p, c, format!("v{}", p * per + c))
                    })
                    .collect();
                let refs: Vec<&(dyn scylla_cql::types::SerializeRow + Sync)> = rows
                    .iter()
                    .map(|r| r as &(dyn scylla_cql::types::SerializeRow + Sync))
                    .collect();
                session.batch(&batch, &refs).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Marks `(p, c)` seen, failing on a duplicate or a foreign row.
fn see(seen: &mut [bool], p: i32, c: i32, v: &str) {
    let per = ROWS / PARTITIONS;
    assert!(
        (0..PARTITIONS).contains(&p) && (0..per).contains(&c),
        "row ({p}, {c})"
    );
    let i = (p * per + c) as usize;
    assert_eq!(v, format!("v{i}"));
    assert!(!seen[i], "row ({p}, {c}) seen twice");
    seen[i] = true;
}

fn all_seen(seen: &[bool]) {
    let missing = seen.iter().filter(|s| !**s).count();
    assert_eq!(missing, 0, "{missing} rows never seen");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn ten_thousand_rows_in_pages() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks = create_keyspace(&session, "paging", 1).await;
    fill(&session, &ks).await;
    let scan = format!("SELECT p, c, v FROM {ks}.t");

    for page in [100, 1000, 5000] {
        // Stream of an unprepared statement.
        let mut seen = vec![false; ROWS as usize];
        let mut rows = session
            .query_iter(Statement::new(scan.as_str()).with_page_size(page), ())
            .await
            .unwrap()
            .rows_stream::<(i32, i32, String)>()
            .unwrap();
        while let Some(row) = rows.next().await {
            let (p, c, v) = row.unwrap();
            see(&mut seen, p, c, &v);
        }
        all_seen(&seen);
        let pages = rows.pages_fetched();
        let want = (ROWS as usize).div_ceil(page as usize);
        // Cassandra may end with an empty page when the last one is full.
        assert!(
            pages == want || pages == want + 1,
            "page size {page}: {pages} pages"
        );

        // Stream of a prepared statement.
        let prepared = session
            .prepare(Statement::new(scan.as_str()).with_page_size(page))
            .await
            .unwrap();
        let mut seen = vec![false; ROWS as usize];
        let mut rows = session
            .execute_iter(&prepared, ())
            .await
            .unwrap()
            .rows_stream::<(i32, i32, String)>()
            .unwrap();
        while let Some(row) = rows.next().await {
            let (p, c, v) = row.unwrap();
            see(&mut seen, p, c, &v);
        }
        all_seen(&seen);

        // By hand.
        let mut seen = vec![false; ROWS as usize];
        let mut state = None;
        let mut pages = 0;
        loop {
            let (result, next) = session
                .execute_single_page(&prepared, (), state)
                .await
                .unwrap();
            pages += 1;
            assert!(result.rows_count() <= page as usize);
            for row in result.rows::<(i32, i32, &str)>().unwrap() {
                let (p, c, v) = row.unwrap();
                see(&mut seen, p, c, v);
            }
            match next {
                Some(s) => state = Some(s),
                None => break,
            }
        }
        all_seen(&seen);
        assert!(
            pages == want || pages == want + 1,
            "page size {page}: {pages} pages by hand"
        );
    }
    drop_keyspace(&session, &ks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn page_size_one_over_a_small_partition() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks = create_keyspace(&session, "paging1", 1).await;
    ddl(
        &session,
        &format!("CREATE TABLE {ks}.t (p int, c int, PRIMARY KEY (p, c))"),
    )
    .await;
    for c in 0..25 {
        session
            .query_unpaged(format!("INSERT INTO {ks}.t (p, c) VALUES (?, ?)"), (1, c))
            .await
            .unwrap();
    }
    let select = format!("SELECT c FROM {ks}.t WHERE p = ?");
    // Stream, prepared behind the scenes (the statement has values).
    let mut rows = session
        .query_iter(Statement::new(select.as_str()).with_page_size(1), (1,))
        .await
        .unwrap()
        .rows_stream::<(i32,)>()
        .unwrap();
    let mut seen = Vec::new();
    while let Some(row) = rows.next().await {
        seen.push(row.unwrap().0);
    }
    assert_eq!(seen, (0..25).collect::<Vec<_>>());
    assert!(rows.pages_fetched() >= 25);

    // By hand, unprepared: one row per page, in clustering order.
    let mut seen = Vec::new();
    let mut state = None;
    loop {
        let (result, next) = session
            .query_single_page(
                Statement::new(format!("SELECT c FROM {ks}.t WHERE p = 1")).with_page_size(1),
                (),
                state,
            )
            .await
            .unwrap();
        assert!(result.rows_count() <= 1);
        seen.extend(result.rows::<(i32,)>().unwrap().map(|r| r.unwrap().0));
        match next {
            Some(s) => state = Some(s),
            None => break,
        }
    }
    assert_eq!(seen, (0..25).collect::<Vec<_>>());
    drop_keyspace(&session, &ks).await;
}
