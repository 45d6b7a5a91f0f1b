//! The test cluster's CQL layer, exercised with plain sockets and the
//! protocol crate's codecs: DDL, prepared statements and their pk indexes,
//! paging, error codes, system tables per node, routing accounting, LZ4.

// Test helpers unwrap on purpose: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use crate::raw_client;

use std::borrow::Cow;

use bytes::Bytes;
use scylla_cql::frame::request::{Execute, Prepare, QueryParameters, Request};
use scylla_cql::frame::response::{DbError, Response, ResultBody};
use scylla_cql::token::murmur3_token;
use scylla_cql::types::SerializedValues;
use scylla_testbed::TestCluster;

use raw_client::{cells, error_code, rows, vals, Client};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_prepared_paging_and_errors() {
    let c = TestCluster::builder().start().await.unwrap();
    let mut cl = Client::connect(c.node(0).unwrap().cql_addr(), false).await;
    cl.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").await;
    cl.ok("USE ks").await;
    cl.ok("CREATE TABLE t (k int PRIMARY KEY, v text)").await;
    cl.ok("CREATE TABLE w (a int, b text, c int, v bigint, PRIMARY KEY ((a, b), c))")
        .await;
    // pk indexes: single and composite (bind order differs from key order).
    let prep = |q: &'static str| Request::Prepare(Prepare::new(q));
    let Response::Result(ResultBody::Prepared(p)) =
        cl.send(&prep("INSERT INTO t (v, k) VALUES (?, ?)")).await
    else {
        panic!()
    };
    assert_eq!(p.metadata.pk_indexes, vec![1]);
    let Response::Result(ResultBody::Prepared(pw)) = cl
        .send(&prep("INSERT INTO ks.w (c, b, v, a) VALUES (?, ?, ?, ?)"))
        .await
    else {
        panic!()
    };
    assert_eq!(pw.metadata.pk_indexes, vec![3, 1]);
    assert_eq!(pw.metadata.col_specs[2].name, "v");
    let Response::Result(ResultBody::Prepared(ps)) = cl
        .send(&prep("SELECT v FROM w WHERE a = ? AND b = ? AND c = ?"))
        .await
    else {
        panic!()
    };
    assert_eq!(ps.metadata.pk_indexes, vec![0, 1]);
    assert_eq!(ps.result_metadata.col_specs.as_ref().unwrap()[0].name, "v");
    for k in 0..250i32 {
        let text = format!("v{k}");
        let r = cl
            .send(&Request::Execute(Execute {
                id: Cow::Owned(p.id.to_vec()),
                result_metadata_id: None,
                params: QueryParameters {
                    values: Cow::Owned(vals(&[text.as_bytes(), &k.to_be_bytes()])),
                    ..Default::default()
                },
                tablet_version_block: None,
            }))
            .await;
        assert!(matches!(r, Response::Result(ResultBody::Void)), "{r:?}");
    }
    let r = cl
        .send(&Request::Execute(Execute {
            id: Cow::Owned(pw.id.to_vec()),
            result_metadata_id: None,
            params: QueryParameters {
                values: Cow::Owned(vals(&[
                    &7i32.to_be_bytes(),
                    b"x",
                    &70i64.to_be_bytes(),
                    &1i32.to_be_bytes(),
                ])),
                ..Default::default()
            },
            tablet_version_block: None,
        }))
        .await;
    assert!(matches!(r, Response::Result(ResultBody::Void)), "{r:?}");
    let got = cells(&rows(
        cl.query("SELECT v FROM w WHERE a = 1 AND b = 'x' AND c = 7")
            .await,
    ));
    assert_eq!(got, vec![vec![Some(70i64.to_be_bytes().to_vec())]]);
    // Paging: 250 rows in pages of 100, each key exactly once.
    let mut seen = Vec::new();
    let mut state = None;
    let mut pages = 0;
    loop {
        let r = rows(
            cl.query_with(
                "SELECT k FROM t",
                SerializedValues::new(),
                Some(100),
                state.clone(),
            )
            .await,
        );
        pages += 1;
        for row in cells(&r) {
            seen.push(i32::from_be_bytes(
                row[0].clone().unwrap().try_into().unwrap(),
            ));
        }
        state = r.paging_state().cloned();
        if state.is_none() {
            break;
        }
        assert!(pages < 10);
    }
    assert_eq!(pages, 3);
    seen.sort();
    assert_eq!(seen, (0..250).collect::<Vec<_>>());
    let count = cells(&rows(cl.query("SELECT COUNT(*) FROM t").await));
    assert_eq!(count[0][0].as_deref(), Some(&250i64.to_be_bytes()[..]));
    // UPDATE / DELETE by key.
    cl.ok("UPDATE t SET v = 'new' WHERE k = 5").await;
    let got = cells(&rows(cl.query("SELECT v FROM t WHERE k = 5").await));
    assert_eq!(got[0][0].as_deref(), Some(&b"new"[..]));
    cl.ok("DELETE FROM t WHERE k = 5").await;
    assert_eq!(
        rows(cl.query("SELECT * FROM t WHERE k = 5").await).rows_count(),
        0
    );
    // Errors.
    assert_eq!(error_code(&cl.query("SELEC oops").await), 0x2000);
    assert_eq!(error_code(&cl.query("GRANT ALL ON ks TO x").await), 0x2000);
    assert_eq!(error_code(&cl.query("SELECT * FROM nope").await), 0x2200);
    assert_eq!(error_code(&cl.query("SELECT nope FROM t").await), 0x2200);
    assert_eq!(
        error_code(&cl.query("SELECT * FROM system.peers_v2").await),
        0x2200
    );
    let r = cl.query("CREATE TABLE t (k int PRIMARY KEY)").await;
    assert_eq!(error_code(&r), 0x2400);
    let r = cl
        .send(&Request::Execute(Execute {
            id: Cow::Borrowed(b"0123456789abcdef"),
            result_metadata_id: None,
            params: Default::default(),
            tablet_version_block: None,
        }))
        .await;
    match r {
        Response::Error(e) => assert_eq!(
            e.error,
            DbError::Unprepared {
                statement_id: Bytes::from_static(b"0123456789abcdef")
            }
        ),
        other => panic!("{other:?}"),
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_tables_per_node() {
    let c = TestCluster::builder().nodes(3).start().await.unwrap();
    for i in 0..3 {
        let n = c.node(i).unwrap().clone();
        let mut cl = Client::connect(n.cql_addr(), false).await;
        let local = rows(cl.query("SELECT host_id, rpc_address, release_version, tokens FROM system.local WHERE key = 'local'").await);
        let row = &cells(&local)[0];
        assert_eq!(row[0].as_deref(), Some(&n.host_id.as_bytes()[..]));
        assert_eq!(row[2].as_deref(), Some(&b"3.0.8"[..]));
        let peers = rows(cl.query("SELECT peer, host_id FROM system.peers").await);
        let ids: Vec<Vec<u8>> = cells(&peers)
            .into_iter()
            .map(|r| r[1].clone().unwrap())
            .collect();
        assert_eq!(ids.len(), 2);
        assert!(!ids.contains(&n.host_id.as_bytes().to_vec()));
        let ks = rows(cl.query("SELECT * FROM system_schema.keyspaces").await);
        assert!(ks.rows_count() >= 2);
        assert_eq!(
            rows(cl.query("SELECT * FROM system_schema.types").await).rows_count(),
            0
        );
        let stats = rows(cl.query("SELECT * FROM testbed.stats").await);
        assert_eq!(stats.rows_count(), 3);
    }
    // A stopped node stays in system.peers, as in ScyllaDB.
    c.stop_node(2).await.unwrap();
    let mut cl = Client::connect(c.node(0).unwrap().cql_addr(), false).await;
    assert_eq!(
        rows(cl.query("SELECT * FROM system.peers").await).rows_count(),
        2
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounting_of_wrong_shard_and_non_replica() {
    let c = TestCluster::builder()
        .nodes(2)
        .shards(2)
        .seed(7)
        .start()
        .await
        .unwrap();
    let n0 = c.node(0).unwrap().clone();
    let mut cl = Client::connect(n0.cql_addr(), false).await;
    cl.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").await;
    cl.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v int)").await;
    // Which shard is this connection on? The one whose counters move.
    let before = c.stats();
    let shard = (0..2)
        .find(|&s| before.nodes[0].shards[s].connections > 0)
        .unwrap() as u16;
    let find = |node: usize, right_shard: bool| {
        (0..10_000i32)
            .find(|k| {
                let t = murmur3_token(&k.to_be_bytes());
                c.topology().primary_replica(t) == Some(node)
                    && (n0.sharder().shard_of(t) == shard) == right_shard
            })
            .unwrap()
    };
    let good = find(0, true);
    cl.ok(&format!("INSERT INTO ks.t (k, v) VALUES ({good}, 1)"))
        .await;
    let s = c.stats().nodes[0].node;
    assert_eq!((s.requests_wrong_shard, s.requests_non_replica), (0, 0));
    let wrong_shard = find(0, false);
    cl.ok(&format!("SELECT * FROM ks.t WHERE k = {wrong_shard}"))
        .await;
    let s = c.stats().nodes[0].node;
    assert_eq!((s.requests_wrong_shard, s.requests_non_replica), (1, 0));
    let other_node = find(1, true);
    cl.ok(&format!("UPDATE ks.t SET v = 2 WHERE k = {other_node}"))
        .await;
    let s = c.stats().nodes[0].node;
    assert_eq!((s.requests_wrong_shard, s.requests_non_replica), (1, 1));
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lz4_end_to_end() {
    let c = TestCluster::builder().start().await.unwrap();
    let mut cl = Client::connect(c.node(0).unwrap().cql_addr(), true).await;
    let local = rows(cl.query("SELECT * FROM system.local").await);
    assert_eq!(local.rows_count(), 1);
    cl.ok("CREATE KEYSPACE k2 WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 1}").await;
    cl.ok("CREATE TABLE k2.t (k text PRIMARY KEY, v blob)")
        .await;
    let big = "ab".repeat(5000);
    cl.ok(&format!("INSERT INTO k2.t (k, v) VALUES ('{big}', 0xcafe)"))
        .await;
    let got = cells(&rows(
        cl.query(&format!("SELECT v FROM k2.t WHERE k = '{big}'"))
            .await,
    ));
    assert_eq!(got, vec![vec![Some(vec![0xca, 0xfe])]]);
    c.shutdown().await;
}
