//! Writes with server-side semantics: logged, unlogged and counter batches;
//! lightweight transactions and their `[applied]` column; TTL; client and
//! statement timestamps; `USE` and switching keyspaces.

use std::time::{Duration, Instant};

use scylla_cql::types::{Counter, CqlValue, Row, SerializeRow};
use scylla_driver::statement::{Batch, BatchType, Statement};

use crate::{create_keyspace, ddl, drop_keyspace, require, session};

type Values<'a> = &'a (dyn SerializeRow + Sync);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn batches() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks = create_keyspace(&session, "batches", 1).await;
    ddl(
        &session,
        &format!("CREATE TABLE {ks}.t (k int, c int, v text, PRIMARY KEY (k, c))"),
    )
    .await;
    ddl(
        &session,
        &format!("CREATE TABLE {ks}.counts (k int PRIMARY KEY, n counter)"),
    )
    .await;
    let insert = session
        .prepare(format!("INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?)"))
        .await
        .unwrap();

    // Logged, across partitions, mixing prepared, text-with-values and plain text.
    let mut logged = Batch::new(BatchType::Logged);
    logged.append(insert.clone());
    logged.append(insert.clone());
    logged.append(format!("INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?)").as_str());
    logged.append(format!("INSERT INTO {ks}.t (k, c, v) VALUES (3, 0, 'plain')").as_str());
    let (a, b, c) = ((1, 0, "a"), (2, 0, "b"), (2, 1, "c"));
    let values: [Values<'_>; 4] = [&a, &b, &c, &()];
    session.batch(&logged, &values).await.unwrap();
    let mut rows: Vec<(i32, i32, String)> = session
        .query_unpaged(format!("SELECT k, c, v FROM {ks}.t"), ())
        .await
        .unwrap()
        .into_rows()
        .unwrap();
    rows.sort();
    assert_eq!(
        rows,
        vec![
            (1, 0, "a".into()),
            (2, 0, "b".into()),
            (2, 1, "c".into()),
            (3, 0, "plain".into())
        ]
    );

    // Unlogged, one partition, with a batch-level timestamp.
    let mut unlogged = Batch::new(BatchType::Unlogged).with_timestamp(1_234_567);
    for _ in 0..10 {
        unlogged.append(insert.clone());
    }
    let rows: Vec<(i32, i32, String)> = (0..10).map(|c| (9, c, format!("u{c}"))).collect();
    let values: Vec<Values<'_>> = rows.iter().map(|r| r as Values<'_>).collect();
    session.batch(&unlogged, &values).await.unwrap();
    let r = session
        .query_unpaged(
            format!("SELECT c, v, WRITETIME(v) FROM {ks}.t WHERE k = 9"),
            (),
        )
        .await
        .unwrap();
    let got: Vec<(i32, String, i64)> = r.into_rows().unwrap();
    assert_eq!(got.len(), 10);
    assert!(
        got.iter()
            .all(|(c, v, w)| *v == format!("u{c}") && *w == 1_234_567),
        "{got:?}"
    );

    // Counter batch.
    let bump = session
        .prepare(format!("UPDATE {ks}.counts SET n = n + ? WHERE k = ?"))
        .await
        .unwrap();
    let mut counter = Batch::new(BatchType::Counter);
    counter.append(bump.clone());
    counter.append(bump.clone());
    counter.append(bump);
    let (x, y, z) = ((Counter(5), 1), (Counter(7), 1), (Counter(-3), 2));
    session.batch(&counter, &[&x, &y, &z]).await.unwrap();
    session.batch(&counter, &[&x, &y, &z]).await.unwrap();
    let mut counts: Vec<(i32, Counter)> = session
        .query_unpaged(format!("SELECT k, n FROM {ks}.counts"), ())
        .await
        .unwrap()
        .into_rows()
        .unwrap();
    counts.sort();
    assert_eq!(counts, vec![(1, Counter(24)), (2, Counter(-6))]);

    // A counter update in a logged batch: the server's error, with its text.
    let mut wrong = Batch::new(BatchType::Logged);
    wrong.append(format!("UPDATE {ks}.counts SET n = n + 1 WHERE k = 1").as_str());
    let err = session.batch(&wrong, &[&()]).await.unwrap_err();
    assert_eq!(err.db_error().map(|e| e.code()), Some(0x2200), "{err}");
    assert!(err.to_string().to_lowercase().contains("counter"), "{err}");
    drop_keyspace(&session, &ks).await;
}

/// Cassandra warns about an unlogged batch that covers more partitions than
/// `unlogged_batch_across_partitions_warn_threshold` (10 by default); the
/// warning reaches the result. Ordinary writes carry none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn server_warnings_reach_the_result() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks = create_keyspace(&session, "warnings", 1).await;
    ddl(
        &session,
        &format!("CREATE TABLE {ks}.t (k int, c int, v text, PRIMARY KEY (k, c))"),
    )
    .await;
    let insert = session
        .prepare(format!("INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?)"))
        .await
        .unwrap();
    let r = session.execute_unpaged(&insert, (0, 0, "x")).await.unwrap();
    assert_eq!(
        r.warnings().len(),
        0,
        "{:?}",
        r.warnings().collect::<Vec<_>>()
    );

    let mut batch = Batch::new(BatchType::Unlogged);
    let rows: Vec<(i32, i32, &str)> = (1..=12).map(|k| (k, 0, "x")).collect();
    for _ in &rows {
        batch.append(insert.clone());
    }
    let r = session.batch(&batch, &rows).await.unwrap();
    let warnings: Vec<&str> = r.warnings().collect();
    println!("warnings: {warnings:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("Unlogged batch covering 12 partitions")),
        "{warnings:?}"
    );
    assert_eq!(r.tracing_id(), None);
    drop_keyspace(&session, &ks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn lightweight_transactions() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks = create_keyspace(&session, "lwt", 1).await;
    ddl(
        &session,
        &format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v text, n int)"),
    )
    .await;
    let insert = session
        .prepare(format!(
            "INSERT INTO {ks}.t (k, v, n) VALUES (?, ?, ?) IF NOT EXISTS"
        ))
        .await
        .unwrap();

    let first = session
        .execute_unpaged(&insert, (1, "first", 10))
        .await
        .unwrap();
    assert_eq!(first.columns()[0].name, "[applied]");
    let (applied,): (bool,) = first.single_row().unwrap();
    assert!(applied);

    let second = session
        .execute_unpaged(&insert, (1, "second", 20))
        .await
        .unwrap();
    let names: Vec<&str> = second.columns().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names[0], "[applied]");
    let row: Row = second.single_row().unwrap();
    assert_eq!(row.columns[0], Some(CqlValue::Boolean(false)));
    // The existing row comes back with its values.
    let col = |name: &str| row.columns[names.iter().position(|n| *n == name).unwrap()].clone();
    assert_eq!(col("k"), Some(CqlValue::Int(1)));
    assert_eq!(col("v"), Some(CqlValue::Text("first".into())));
    assert_eq!(col("n"), Some(CqlValue::Int(10)));

    // Conditional update, unprepared, with a serial consistency.
    let update = Statement::new(format!("UPDATE {ks}.t SET n = ? WHERE k = ? IF n = ?"))
        .with_serial_consistency(scylla_driver::Consistency::LocalSerial);
    let r = session
        .query_unpaged(update.clone(), (11, 1, 10))
        .await
        .unwrap();
    assert_eq!(r.first_row::<(bool,)>().unwrap(), Some((true,)));
    let r = session.query_unpaged(update, (12, 1, 10)).await.unwrap();
    let (applied, n): (bool, Option<i32>) = r.single_row().unwrap();
    assert_eq!((applied, n), (false, Some(11)));
    drop_keyspace(&session, &ks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn ttl_and_timestamps() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks = create_keyspace(&session, "ttl", 1).await;
    ddl(
        &session,
        &format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)"),
    )
    .await;

    // TTL: visible at once with a TTL, gone after it expires.
    session
        .query_unpaged(
            format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?) USING TTL 1"),
            (1, "short"),
        )
        .await
        .unwrap();
    session
        .query_unpaged(
            format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?) USING TTL ?"),
            (2, "long", 1000),
        )
        .await
        .unwrap();
    let (ttl,): (Option<i32>,) = session
        .query_unpaged(format!("SELECT TTL(v) FROM {ks}.t WHERE k = 2"), ())
        .await
        .unwrap()
        .single_row()
        .unwrap();
    assert!(
        matches!(ttl, Some(t) if (990..=1000).contains(&t)),
        "{ttl:?}"
    );
    let started = Instant::now();
    loop {
        let r = session
            .query_unpaged(format!("SELECT v FROM {ks}.t WHERE k = 1"), ())
            .await
            .unwrap();
        if r.rows_count() == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the TTL 1 row is still there"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // USING TIMESTAMP in the text.
    session
        .query_unpaged(
            format!("INSERT INTO {ks}.t (k, v) VALUES (3, 'x') USING TIMESTAMP 1000"),
            (),
        )
        .await
        .unwrap();
    // The statement's client timestamp (the protocol's default timestamp).
    let insert = session
        .prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)"))
        .await
        .unwrap()
        .with_timestamp(1_600_000_000_000_001);
    session.execute_unpaged(&insert, (4, "y")).await.unwrap();
    session
        .query_unpaged(
            Statement::new(format!("INSERT INTO {ks}.t (k, v) VALUES (5, 'z')")).with_timestamp(42),
            (),
        )
        .await
        .unwrap();
    let writetime = |k: i32| {
        let session = session.clone();
        let ks = ks.clone();
        async move {
            let (w,): (i64,) = session
                .query_unpaged(format!("SELECT WRITETIME(v) FROM {ks}.t WHERE k = ?"), (k,))
                .await
                .unwrap()
                .single_row()
                .unwrap();
            w
        }
    };
    assert_eq!(writetime(3).await, 1000);
    assert_eq!(writetime(4).await, 1_600_000_000_000_001);
    assert_eq!(writetime(5).await, 42);
    // A write with an older timestamp loses.
    session
        .query_unpaged(
            Statement::new(format!("INSERT INTO {ks}.t (k, v) VALUES (5, 'older')"))
                .with_timestamp(41),
            (),
        )
        .await
        .unwrap();
    let (v,): (String,) = session
        .query_unpaged(format!("SELECT v FROM {ks}.t WHERE k = 5"), ())
        .await
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!(v, "z");
    drop_keyspace(&session, &ks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn use_and_switch_keyspaces() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks1 = create_keyspace(&session, "use_a", 1).await;
    let ks2 = create_keyspace(&session, "use_b", 1).await;
    session.use_keyspace(&ks1, false).await.unwrap();
    assert_eq!(
        session.keyspace().as_deref().map(String::as_str),
        Some(ks1.as_str())
    );
    ddl(&session, "CREATE TABLE t (k int PRIMARY KEY, v text)").await;
    for k in 0..20 {
        session
            .query_unpaged("INSERT INTO t (k, v) VALUES (?, ?)", (k, "one"))
            .await
            .unwrap();
    }
    session.use_keyspace(&ks2, false).await.unwrap();
    ddl(&session, "CREATE TABLE t (k int PRIMARY KEY, v text)").await;
    session
        .query_unpaged("INSERT INTO t (k, v) VALUES (?, ?)", (0, "two"))
        .await
        .unwrap();
    // Unqualified names now resolve in ks2, on every connection.
    for _ in 0..10 {
        let r = session
            .query_unpaged("SELECT k, v FROM t", ())
            .await
            .unwrap();
        let rows: Vec<(i32, String)> = r.into_rows().unwrap();
        assert_eq!(rows, vec![(0, "two".to_string())]);
    }
    // A `USE` statement through query_unpaged switches back.
    session
        .query_unpaged(format!("USE {ks1}"), ())
        .await
        .unwrap();
    assert_eq!(
        session.keyspace().as_deref().map(String::as_str),
        Some(ks1.as_str())
    );
    for _ in 0..10 {
        let r = session
            .query_unpaged("SELECT count(*) FROM t", ())
            .await
            .unwrap();
        let (n,): (i64,) = r.single_row().unwrap();
        assert_eq!(n, 20);
    }
    // An unknown keyspace: a clear server error, and the session stays where it was.
    let err = session
        .use_keyspace("no_such_keyspace_here", false)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no_such_keyspace_here"), "{err}");
    assert_eq!(
        session.keyspace().as_deref().map(String::as_str),
        Some(ks1.as_str())
    );
    // A session built with a keyspace.
    let other = crate::builder(&uri)
        .use_keyspace(&ks2, false)
        .build()
        .await
        .unwrap();
    let (v,): (String,) = other
        .query_unpaged("SELECT v FROM t WHERE k = 0", ())
        .await
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!(v, "two");
    drop_keyspace(&session, &ks1).await;
    drop_keyspace(&session, &ks2).await;
}
