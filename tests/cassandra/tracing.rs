//! CQL tracing: traced statements (plain, prepared, batched, paged) come
//! back with a tracing id, and the session fetches the trace Cassandra wrote
//! (`system_traces.sessions` and `.events`) as a typed value.

use std::collections::HashSet;
use std::net::IpAddr;
use std::time::Duration;

use scylla_driver::session::{TraceFetchOptions, TracingError, TracingInfo};
use scylla_driver::statement::{Batch, BatchType, Statement};
use scylla_driver::Session;
use uuid::Uuid;

use crate::{create_keyspace, ddl, drop_keyspace, require, session};

/// Fetches trace `id`, checks what every complete trace has, and prints it.
async fn fetch(session: &Session, id: Uuid, what: &str) -> TracingInfo {
    let t = session
        .get_tracing_info(id)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    println!(
        "{what}: trace {id}: command {:?}, request {:?}, coordinator {:?}, client {:?}, \
         duration {:?}, {} events, parameters {:?}",
        t.command,
        t.request,
        t.coordinator,
        t.client,
        t.elapsed(),
        t.events.len(),
        t.parameters
    );
    for e in t.events.iter().take(5) {
        println!(
            "  {:>10?} {:?} [{}] {}",
            e.elapsed(),
            e.source,
            e.thread.as_deref().unwrap_or(""),
            e.activity.as_deref().unwrap_or("")
        );
    }
    assert_eq!(t.id, id);
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    assert_eq!(t.coordinator, Some(loopback), "{what}: coordinator");
    assert!(t.client.is_some(), "{what}: client");
    assert!(t.started_at.is_some(), "{what}: started_at");
    assert!(t.elapsed() > Some(Duration::ZERO), "{what}: duration");
    assert!(!t.events.is_empty(), "{what}: no events");
    for e in &t.events {
        assert!(
            e.activity.as_deref().is_some_and(|a| !a.is_empty()),
            "{what}: event without activity: {e:?}"
        );
        assert_eq!(e.source, Some(loopback), "{what}: event source");
        assert!(e.source_elapsed.is_some(), "{what}: event source_elapsed");
    }
    // Events come in the order of their (time-based) ids.
    let times: Vec<u64> = t
        .events
        .iter()
        .map(|e| e.event_id.get_timestamp().expect("a timeuuid").to_unix())
        .map(|(s, n)| s * 1_000_000_000 + u64::from(n))
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "{what}: event order"
    );
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra: SCYLLA_URI (see scripts/cassandra-suite.sh)"]
async fn traced_statements_return_ids_and_their_traces_have_events() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks = create_keyspace(&session, "tracing", 1).await;
    ddl(
        &session,
        &format!("CREATE TABLE {ks}.t (p int, c int, v text, PRIMARY KEY (p, c))"),
    )
    .await;
    let mut ids = HashSet::new();

    // A traced QUERY (no values: sent as is).
    let text = format!("INSERT INTO {ks}.t (p, c, v) VALUES (1, 0, 'zero')");
    let r = session
        .query_unpaged(Statement::new(text.clone()).with_tracing(true), ())
        .await
        .unwrap();
    let id = r.tracing_id().expect("a traced query has a tracing id");
    ids.insert(id);
    let t = fetch(&session, id, "query").await;
    assert_eq!(t.command.as_deref(), Some("QUERY"));
    assert_eq!(t.parameters.get("query"), Some(&text), "{:?}", t.parameters);

    // Untraced: no id.
    let r = session.query_unpaged(text.as_str(), ()).await.unwrap();
    assert_eq!(r.tracing_id(), None);

    // A traced EXECUTE.
    let insert = session
        .prepare(format!("INSERT INTO {ks}.t (p, c, v) VALUES (?, ?, ?)"))
        .await
        .unwrap();
    let r = session
        .execute_unpaged(&insert.clone().with_tracing(true), (1, 1, "one"))
        .await
        .unwrap();
    let id = r.tracing_id().expect("a traced execution has a tracing id");
    assert!(ids.insert(id), "a new id for a new request");
    fetch(&session, id, "execute").await;
    let r = session
        .execute_unpaged(&insert, (1, 2, "two"))
        .await
        .unwrap();
    assert_eq!(r.tracing_id(), None);

    // A traced read by primary key, prepared.
    let select = session
        .prepare(format!("SELECT v FROM {ks}.t WHERE p = ? AND c = ?"))
        .await
        .unwrap()
        .with_tracing(true);
    let r = session.execute_unpaged(&select, (1, 1)).await.unwrap();
    let (v,): (&str,) = r.single_row().unwrap();
    assert_eq!(v, "one");
    let id = r.tracing_id().expect("a traced read has a tracing id");
    assert!(ids.insert(id));
    fetch(&session, id, "read").await;

    // A traced BATCH.
    let mut batch = Batch::new(BatchType::Unlogged).with_tracing(true);
    batch.append(insert.clone());
    batch.append(insert.clone());
    let r = session
        .batch(&batch, &[&(2, 0, "b0"), &(2, 1, "b1")])
        .await
        .unwrap();
    let id = r.tracing_id().expect("a traced batch has a tracing id");
    assert!(ids.insert(id));
    let t = fetch(&session, id, "batch").await;
    assert_eq!(t.command.as_deref(), Some("QUERY"));

    // A traced paged read: every page is a traced request of its own.
    let scan = Statement::new(format!("SELECT p, c, v FROM {ks}.t WHERE p = 1"))
        .with_page_size(1)
        .with_tracing(true);
    let mut rows = session
        .query_iter(scan, ())
        .await
        .unwrap()
        .rows_stream::<(i32, i32, String)>()
        .unwrap();
    let mut n = 0;
    while let Some(row) = rows.next().await {
        row.unwrap();
        n += 1;
    }
    assert_eq!(n, 3);
    let pages = rows.tracing_ids().to_vec();
    assert_eq!(pages.len(), rows.pages_fetched(), "one id per page");
    assert!(pages.len() >= 3, "{} pages", pages.len());
    for id in &pages {
        assert!(ids.insert(*id), "each page has its own trace");
    }
    fetch(&session, pages[0], "first page").await;
    fetch(&session, pages[pages.len() - 1], "last page").await;

    drop_keyspace(&session, &ks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra: SCYLLA_URI (see scripts/cassandra-suite.sh)"]
async fn an_unknown_trace_is_not_complete_after_the_bounded_wait() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let options = {
        let mut built = TraceFetchOptions::default();
        built.attempts = 4;
        built.interval = Duration::from_millis(5);
        built.max_interval = Duration::from_millis(20);
        built
    };
    let id = Uuid::from_u128(fastrand::u128(..));
    let started = std::time::Instant::now();
    let e = session
        .get_tracing_info_with(id, &options)
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    println!("unknown trace: {e} (after {elapsed:?})");
    match e {
        TracingError::NotComplete {
            id: got,
            attempts,
            waited,
            session_found,
        } => {
            assert_eq!(got, id);
            assert_eq!(attempts, 4);
            // 5 + 10 + 20 ms.
            assert_eq!(waited, Duration::from_millis(35));
            assert!(!session_found);
        }
        other => panic!("expected NotComplete, got {other}"),
    }
    assert!(elapsed >= Duration::from_millis(35), "{elapsed:?}");
}
