//! Prepared statements across schema changes, and schema-change events.
//!
//! What Cassandra 5.0 does (protocol v4): on `ALTER TABLE` it evicts the
//! prepared statements of that table, so the next EXECUTE of a statement
//! prepared before gets UNPREPARED; the driver prepares it again on that
//! connection and retries. v4 has no result-metadata id, so a statement
//! executed with "skip metadata" cannot learn that `SELECT *` now has another
//! column from the EXECUTE response alone. Cassandra answers the old
//! statement (re-prepared) with rows of three columns; a driver that skipped
//! result metadata decoded them with the two columns of PREPARE time (this
//! test found that: a shifted, undecodable second row). The session now asks
//! for result metadata by default.
//!
//! `DROP TABLE` evicts them too; after the table is created again, executing
//! the old statement re-prepares it transparently.

use std::time::{Duration, Instant};

use scylla_cql::types::{CqlValue, Row};

use crate::{create_keyspace, ddl, drop_keyspace, require, session};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn prepared_statements_survive_alter_and_drop() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks = create_keyspace(&session, "prep", 1).await;
    ddl(
        &session,
        &format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)"),
    )
    .await;
    session
        .query_unpaged(
            format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)"),
            (1, "one"),
        )
        .await
        .unwrap();
    let select_star = session
        .prepare(format!("SELECT * FROM {ks}.t WHERE k = ?"))
        .await
        .unwrap();
    let select_v = session
        .prepare(format!("SELECT v FROM {ks}.t WHERE k = ?"))
        .await
        .unwrap();
    let insert = session
        .prepare(format!("INSERT INTO {ks}.t (k, v) VALUES (?, ?)"))
        .await
        .unwrap();
    let scan_star = session
        .prepare(format!("SELECT * FROM {ks}.t"))
        .await
        .unwrap();
    let r = session.execute_unpaged(&select_star, (1,)).await.unwrap();
    assert_eq!(r.columns().len(), 2);
    assert_eq!(
        r.single_row::<(i32, String)>().unwrap(),
        (1, "one".to_string())
    );

    // ALTER: add a column, then execute the old statements.
    ddl(&session, &format!("ALTER TABLE {ks}.t ADD x int")).await;
    session
        .query_unpaged(format!("UPDATE {ks}.t SET x = 5 WHERE k = 1"), ())
        .await
        .unwrap();
    let r = session.execute_unpaged(&select_v, (1,)).await.unwrap();
    assert_eq!(r.single_row::<(String,)>().unwrap(), ("one".to_string(),));
    session.execute_unpaged(&insert, (2, "two")).await.unwrap();
    // SELECT *: the rows have three columns now; the result must describe
    // them (or the old statement must keep returning the old two), and must
    // decode either way.
    let r = session.execute_unpaged(&select_star, (1,)).await.unwrap();
    let names: Vec<&str> = r.columns().iter().map(|c| c.name.as_str()).collect();
    let row: Row = r.single_row().unwrap();
    assert_eq!(
        row.columns.len(),
        names.len(),
        "columns {names:?}, row {row:?}"
    );
    // The server re-prepared it: the rows have the new column, and the
    // result says so (the session asks for result metadata).
    assert_eq!(names, ["k", "v", "x"]);
    assert_eq!(
        row.columns,
        vec![
            Some(CqlValue::Int(1)),
            Some(CqlValue::Text("one".into())),
            Some(CqlValue::Int(5))
        ]
    );
    println!("SELECT * prepared before ALTER returns columns {names:?}");
    // Several rows: a row decoded with too few columns would shift the next.
    session
        .execute_unpaged(&insert, (3, "three"))
        .await
        .unwrap();
    let r = session.execute_unpaged(&scan_star, ()).await.unwrap();
    let names: Vec<String> = r.columns().iter().map(|c| c.name.clone()).collect();
    let mut rows: Vec<Row> = r.into_rows().unwrap();
    rows.sort_by_key(|r| r.columns[0].as_ref().and_then(CqlValue::as_int));
    println!("SELECT * (all rows) prepared before ALTER: columns {names:?}, rows {rows:?}");
    let keys: Vec<Option<i32>> = rows
        .iter()
        .map(|r| r.columns[0].as_ref().and_then(CqlValue::as_int))
        .collect();
    assert_eq!(keys, vec![Some(1), Some(2), Some(3)], "{rows:?}");
    for row in &rows {
        assert_eq!(row.columns.len(), names.len());
        assert!(matches!(row.columns[1], Some(CqlValue::Text(_))), "{row:?}");
    }
    // A new prepare of the same text sees the new column.
    // (The session caches by text, so go around the cache with other spacing.)
    let fresh = session
        .prepare(format!("SELECT *  FROM {ks}.t WHERE k = ?"))
        .await
        .unwrap();
    let r = session.execute_unpaged(&fresh, (1,)).await.unwrap();
    assert_eq!(r.columns().len(), 3);

    // DROP and CREATE again: the old statements are re-prepared transparently.
    ddl(&session, &format!("DROP TABLE {ks}.t")).await;
    ddl(
        &session,
        &format!("CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)"),
    )
    .await;
    session
        .execute_unpaged(&insert, (3, "three"))
        .await
        .unwrap();
    let r = session.execute_unpaged(&select_v, (3,)).await.unwrap();
    assert_eq!(r.single_row::<(String,)>().unwrap(), ("three".to_string(),));
    for k in 0..5 {
        session
            .execute_unpaged(&insert, (10 + k, "again"))
            .await
            .unwrap();
    }
    let (n,): (i64,) = session
        .query_unpaged(format!("SELECT count(*) FROM {ks}.t"), ())
        .await
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!(n, 6);
    drop_keyspace(&session, &ks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn schema_changes_reach_other_sessions() {
    let uri = require!("SCYLLA_URI");
    let watcher = session(&uri).await;
    let writer = session(&uri).await;
    let ks = create_keyspace(&writer, "events", 1).await;
    ddl(
        &writer,
        &format!("CREATE TABLE {ks}.first (k int PRIMARY KEY)"),
    )
    .await;
    // The watcher did nothing: it learns from the server's events.
    let seen = |table: &'static str| {
        let watcher = watcher.clone();
        let ks = ks.clone();
        async move {
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(10) {
                if watcher.cluster_state().metadata.table(&ks, table).is_some() {
                    return Some(started.elapsed());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            None
        }
    };
    let took = seen("first")
        .await
        .expect("the watcher never saw the new table");
    println!("first table seen after {took:?}");
    let started = Instant::now();
    ddl(
        &writer,
        &format!("CREATE TABLE {ks}.second (a int, b text, PRIMARY KEY ((a, b)))"),
    )
    .await;
    let took = seen("second")
        .await
        .expect("the watcher never saw the second table");
    let total = started.elapsed();
    println!("second table seen {took:?} after CREATE returned ({total:?} after it was sent)");
    // Through the server's event, well before a periodic refresh would
    // have read it (a real JVM and a loaded machine take their time).
    assert!(took < Duration::from_secs(5), "took {took:?}");
    let meta = watcher.cluster_state().metadata.clone();
    let t = meta.table(&ks, "second").unwrap();
    let pk: Vec<&str> = t.partition_key.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(pk, vec!["a", "b"]);
    // And the routing table knows the new keyspace.
    assert!(watcher.cluster_state().routing.keyspace_id(&ks).is_some());

    // Dropped tables disappear.
    ddl(&writer, &format!("DROP TABLE {ks}.first")).await;
    let started = Instant::now();
    while watcher
        .cluster_state()
        .metadata
        .table(&ks, "first")
        .is_some()
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "dropped table still in metadata"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop_keyspace(&writer, &ks).await;
}

/// The schema model as Cassandra 5.0 describes a table with every kind of
/// column: collections frozen and not, user-defined types (one nested in
/// another, one column not frozen), static and clustering columns with a
/// descending order, a secondary index and a materialized view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn schema_metadata_round_trip() {
    use scylla_cql::types::{ColumnType, NativeType};
    use scylla_driver::cluster::metadata::{ClusteringOrder, ColumnKind, Strategy};

    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks = create_keyspace(&session, "model", 1).await;
    for cql in [
        format!("CREATE TYPE {ks}.point (x double, y double)"),
        format!("CREATE TYPE {ks}.address (street text, at frozen<point>, tags frozen<set<text>>)"),
        format!(
            "CREATE TABLE {ks}.t (a int, b text, c1 int, c2 timeuuid, s text static, \
             tags set<text>, nums frozen<list<int>>, m map<text, int>, \
             home frozen<address>, work address, v vector<float, 3>, \
             PRIMARY KEY ((a, b), c1, c2)) WITH CLUSTERING ORDER BY (c1 ASC, c2 DESC)"
        ),
        format!("CREATE INDEX t_m_keys ON {ks}.t (KEYS(m))"),
        format!(
            "CREATE MATERIALIZED VIEW {ks}.by_s AS SELECT a, b, c1, c2, tags FROM {ks}.t \
             WHERE a IS NOT NULL AND b IS NOT NULL AND c1 IS NOT NULL AND c2 IS NOT NULL \
             PRIMARY KEY (c1, a, b, c2)"
        ),
    ] {
        ddl(&session, &cql).await;
    }
    let state = session.get_cluster_state();
    let model = state
        .get_keyspace(&ks)
        .expect("the keyspace is in the model");
    assert_eq!(
        model.strategy,
        Strategy::SimpleStrategy {
            replication_factor: 1
        }
    );
    assert!(model.durable_writes);
    let t = &model.tables["t"];
    assert_eq!(t.partition_key, ["a", "b"]);
    assert_eq!(t.clustering_key, ["c1", "c2"]);
    let col = |n: &str| &t.columns[n];
    assert_eq!(col("c1").clustering_order, Some(ClusteringOrder::Ascending));
    assert_eq!(
        col("c2").clustering_order,
        Some(ClusteringOrder::Descending)
    );
    assert_eq!(col("s").kind, ColumnKind::Static);
    assert_eq!(col("b").kind, ColumnKind::PartitionKey);
    assert_eq!(
        col("tags").typ,
        ColumnType::set(ColumnType::Native(NativeType::Text))
    );
    // The schema model keeps what `frozen<...>` says.
    assert_eq!(
        col("nums").typ,
        ColumnType::list(ColumnType::Native(NativeType::Int)).into_frozen()
    );
    assert_eq!(
        col("m").typ,
        ColumnType::map(
            ColumnType::Native(NativeType::Text),
            ColumnType::Native(NativeType::Int)
        )
    );
    assert_eq!(
        col("v").typ,
        ColumnType::Vector {
            typ: Box::new(ColumnType::Native(NativeType::Float)),
            dimensions: 3
        }
    );
    for udt_column in ["home", "work"] {
        let ColumnType::UserDefinedType { definition, .. } = &col(udt_column).typ else {
            panic!("{udt_column}: not a UDT: {:?}", col(udt_column).typ);
        };
        assert_eq!(definition.name, "address");
        assert_eq!(definition.field_types.len(), 3);
        assert!(matches!(&definition.field_types[1].1,
            ColumnType::UserDefinedType { definition, .. } if definition.name == "point"));
    }
    assert_eq!(t.columns.len(), 11);
    assert_eq!(t.indexes["t_m_keys"].target(), Some("keys(m)"));
    let view = &model.views["by_s"];
    assert_eq!(view.base_table_name, "t");
    assert_eq!(view.view_metadata.partition_key, ["c1"]);
    assert_eq!(view.view_metadata.clustering_key, ["a", "b", "c2"]);
    assert_eq!(view.view_metadata.columns.len(), 5);
    assert!(!model.tables.contains_key("by_s"));
    let mut udts: Vec<&str> = model
        .user_defined_types
        .keys()
        .map(String::as_str)
        .collect();
    udts.sort_unstable();
    assert_eq!(udts, ["address", "point"]);

    // A change to the table is in the model when the statement returns.
    ddl(&session, &format!("ALTER TABLE {ks}.t ADD extra blob")).await;
    let state = session.get_cluster_state();
    let t = &state.get_keyspace(&ks).unwrap().tables["t"];
    assert_eq!(t.columns["extra"].typ, ColumnType::Native(NativeType::Blob));
    drop_keyspace(&session, &ks).await;
}
