//! A quiet cluster gets a quiet control connection: over a window of many
//! periodic checks, the session reads the topology (two small queries per
//! check) and never the schema; a schema change still reaches it at once,
//! through the server's event. Counted on the server side, by a handler
//! that records every QUERY the nodes receive.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_cql::frame::header::Opcode;
use scylla_cql::frame::request::{Request as Decoded, RequestContext};
use scylla_driver::{Session, SessionBuilder};
use scylla_testbed::{ConnCtx, CqlHandler, HandlerFuture, Request, RequestHandler, TestCluster};

/// The default handler, counting the metadata queries it serves.
#[derive(Default)]
struct Counter {
    inner: CqlHandler,
    /// `system_schema.*` reads.
    schema: AtomicUsize,
    /// `system.local` / `system.peers*` reads.
    topology: AtomicUsize,
    /// Any other QUERY.
    other: AtomicUsize,
}

impl Counter {
    fn counts(&self) -> (usize, usize, usize) {
        (
            self.schema.load(Ordering::Relaxed),
            self.topology.load(Ordering::Relaxed),
            self.other.load(Ordering::Relaxed),
        )
    }
}

impl RequestHandler for Counter {
    fn handle<'a>(&'a self, ctx: &'a ConnCtx, request: Request) -> HandlerFuture<'a> {
        if request.header.opcode == Opcode::Query {
            let rctx = RequestContext {
                version: ctx.protocol_version(),
                use_metadata_id: ctx.use_metadata_id(),
                tablets_routing_v2: false,
            };
            if let Ok(Decoded::Query(q)) =
                Decoded::decode_in(request.header.opcode, &request.body, &rctx)
            {
                let text = q.contents.to_ascii_lowercase();
                let counter = if text.contains("system_schema.") {
                    &self.schema
                } else if text.contains("system.local") || text.contains("system.peers") {
                    &self.topology
                } else {
                    &self.other
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.inner.handle(ctx, request)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stable_cluster_sees_topology_checks_and_no_schema_reads() {
    let counter = Arc::new(Counter::default());
    let cluster = TestCluster::builder()
        .nodes(3)
        .shards(2)
        .handler(counter.clone())
        .start()
        .await
        .unwrap();
    let period = Duration::from_millis(100);
    let session: Session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .cluster_metadata_refresh_interval(period)
        .build()
        .await
        .unwrap();
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    session
        .query_unpaged(
            "CREATE KEYSPACE quiet WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}",
            (),
        )
        .await
        .unwrap();
    session
        .query_unpaged("CREATE TABLE quiet.t (k int PRIMARY KEY, v int)", ())
        .await
        .unwrap();
    // Let the refreshes the DDL started finish: counted in periodic checks
    // (system.local and system.peers each), not in time. Settled once
    // SETTLE checks in a row ran with no schema read; a session that kept
    // reading the schema never settles.
    const SETTLE: usize = 5;
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut schema0, mut topology0, _) = counter.counts();
    loop {
        let (schema, topology, _) = counter.counts();
        if schema != schema0 {
            (schema0, topology0) = (schema, topology);
        } else if topology >= topology0 + 2 * SETTLE {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "schema reads went on after the DDL: {:?}",
            counter.counts()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // A quiet window of 20 periodic checks, counted.
    const CHECKS: usize = 20;
    let (schema0, topology0, other0) = counter.counts();
    let started = Instant::now();
    while counter.counts().1 < topology0 + 2 * CHECKS {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the periodic checks stopped: {:?}",
            counter.counts()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let window = started.elapsed();
    let (schema1, topology1, other1) = counter.counts();
    let (schema, topology, other) = (schema1 - schema0, topology1 - topology0, other1 - other0);
    println!("over {window:?}: {schema} schema reads, {topology} topology reads, {other} other");
    assert_eq!(schema, 0, "no schema read on a stable cluster");
    assert_eq!(other, 0, "nothing else either");
    // No more often than the interval says (a missed tick is delayed, not
    // made up in a burst): 20 checks take 19 periods, 15 allowing for a
    // few extra reads.
    assert!(
        window >= period * 15,
        "{topology} topology reads in {window:?}"
    );

    // A schema change made elsewhere reaches the session through its event.
    let other_session: Session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[1].to_string())
        .build()
        .await
        .unwrap();
    other_session
        .query_unpaged(
            "CREATE KEYSPACE elsewhere WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            (),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !session.cluster().keyspaces().contains_key("elsewhere") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new keyspace never appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
