//! The metadata layer and the control connection against a real server (a
//! Cassandra 5.0 node from `scripts/cassandra.sh`, address in `SCYLLA_URI`).
//!
//! The server tests are `#[ignore]`d (a plain `cargo test` reports them as
//! ignored, never as passed); run them with `--ignored` and `SCYLLA_URI`,
//! without which they fail saying so. Each test uses its own keyspace, so
//! they can run in parallel.
//!
//! ```sh
//! scripts/cassandra.sh start
//! SCYLLA_URI=127.0.0.1:9042 cargo test --test cassandra_metadata -- --ignored
//! ```

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use scylla_cql::frame::request::{Query, QueryParameters};
use scylla_cql::frame::response::Response;
use scylla_cql::token::Token;
use scylla_cql::types::{ColumnType, NativeType};
use scylla_driver::cluster::{ControlError, ControlHandle, ControlOptions};
use scylla_driver::connection::{open, Connection, ConnectionConfig, RequestOptions};
use scylla_driver::routing::{NodeIdx, ReplicationStrategy, RoutingTable};

/// Logs to the test's output, filtered by `RUST_LOG` (default: warnings,
/// which is where skipped metadata rows show up).
fn setup_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// The node's address; panics when `SCYLLA_URI` is unset (these tests are
/// `#[ignore]`d and run with `--ignored` by scripts/cassandra-suite.sh).
fn node_addr() -> Option<SocketAddr> {
    setup_tracing();
    let Ok(uri) = std::env::var("SCYLLA_URI") else {
        panic!("SCYLLA_URI is not set: this test needs a real Cassandra (run scripts/cassandra-suite.sh)");
    };
    let addr = uri
        .to_socket_addrs()
        .unwrap_or_else(|e| panic!("SCYLLA_URI={uri:?} is not host:port: {e}"))
        .next()
        .unwrap_or_else(|| panic!("SCYLLA_URI={uri:?} resolves to nothing"));
    Some(addr)
}

/// A plain connection for DDL (not the control connection).
async fn session(addr: SocketAddr) -> Connection {
    open(addr, None, &ConnectionConfig::default())
        .await
        .expect("connect")
}

async fn execute(conn: &Connection, cql: &str) {
    let query = Query {
        contents: cql.into(),
        params: QueryParameters::default(),
    };
    let opts = {
        let mut built = RequestOptions::default();
        built.timeout = Some(Duration::from_secs(60));
        built
    };
    let frame = conn.request(&query, &opts).await.expect("request");
    if let Response::Error(e) = frame.response {
        panic!("`{cql}` failed: {e}");
    }
}

/// Drops and recreates keyspace `ks` (SimpleStrategy, RF 1).
async fn fresh_keyspace(conn: &Connection, ks: &str) {
    execute(conn, &format!("DROP KEYSPACE IF EXISTS {ks}")).await;
    execute(
        conn,
        &format!(
            "CREATE KEYSPACE {ks} WITH replication = \
             {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        ),
    )
    .await;
}

async fn start(
    addr: SocketAddr,
) -> (
    ControlHandle,
    tokio::sync::watch::Receiver<std::sync::Arc<scylla_driver::cluster::Metadata>>,
) {
    ControlHandle::start(
        vec![addr],
        ConnectionConfig::default(),
        ControlOptions::default(),
    )
    .await
    .expect("control connection")
}

#[tokio::test]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn discovers_the_node() {
    let Some(addr) = node_addr() else { return };
    let (control, rx) = start(addr).await;
    let md = control.metadata();
    assert_eq!(*rx.borrow(), md);
    assert_eq!(md.nodes.len(), 1, "{:?}", md.nodes);
    let node = &md.nodes[0];
    assert!(!node.host_id.is_nil());
    assert_eq!(node.address, addr);
    assert_eq!(node.datacenter, "datacenter1");
    assert_eq!(node.rack, "rack1");
    assert_eq!(node.tokens.len(), 16);
    assert!(node.tokens.windows(2).all(|w| w[0] < w[1]));
    assert!(node.schema_version.is_some());
    assert!(node
        .release_version
        .as_deref()
        .is_some_and(|v| v.starts_with("5.")));
    assert_eq!(control.connected_to(), Some(addr));
}

/// Cassandra 5 has `system.peers_v2`: it is read (no fallback to
/// `system.peers`); a host filter that rejects the node leaves the control
/// connection without a node.
#[tokio::test]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn reads_peers_v2_and_honours_the_host_filter() {
    use scylla_driver::cluster::{ContactError, FnHostFilter, HostInfo};
    let Some(addr) = node_addr() else { return };
    let options = ControlOptions::default();
    let nodes = options.nodes.clone();
    let (control, _rx) = ControlHandle::start(vec![addr], ConnectionConfig::default(), options)
        .await
        .expect("control connection");
    assert!(!nodes.peers_v2_missing(), "system.peers_v2 was not read");
    assert_eq!(control.metadata().nodes.len(), 1);
    drop(control);

    let mut options = ControlOptions::default();
    let dc = "datacenter1";
    options.nodes.filter = Some(std::sync::Arc::new(FnHostFilter(
        move |h: &HostInfo<'_>| h.datacenter != dc,
    )));
    match ControlHandle::start(vec![addr], ConnectionConfig::default(), options).await {
        Err(ControlError::Unreachable(failures)) => {
            assert_eq!(failures.len(), 1);
            assert!(matches!(
                &failures[0].error,
                ContactError::Filtered { accepted } if accepted.is_empty()
            ));
        }
        other => panic!("expected Unreachable, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn reads_keyspaces_and_partition_keys() {
    let Some(addr) = node_addr() else { return };
    let conn = session(addr).await;
    fresh_keyspace(&conn, "meta_ks_read").await;
    execute(
        &conn,
        "CREATE TABLE meta_ks_read.t (a int, b text, c int, v text, PRIMARY KEY ((a, b), c))",
    )
    .await;

    let (control, _rx) = start(addr).await;
    let md = control.metadata();
    for system in [
        "system",
        "system_schema",
        "system_auth",
        "system_distributed",
    ] {
        assert!(md.keyspaces.contains_key(system), "missing {system}");
    }
    assert_eq!(md.keyspaces["system"].strategy, ReplicationStrategy::Local);
    let ks = &md.keyspaces["meta_ks_read"];
    assert_eq!(ks.strategy, ReplicationStrategy::Simple { rf: 1 });
    assert_eq!(
        ks.tables["t"].partition_key,
        vec![
            ("a".to_owned(), ColumnType::Native(NativeType::Int)),
            ("b".to_owned(), ColumnType::Native(NativeType::Text))
        ]
    );
    // A system table's key, read the same way.
    assert_eq!(
        md.table("system_schema", "columns")
            .map(|t| &t.partition_key[..]),
        Some(
            &[(
                "keyspace_name".to_owned(),
                ColumnType::Native(NativeType::Text)
            )][..]
        )
    );
    execute(&conn, "DROP KEYSPACE meta_ks_read").await;
}

#[tokio::test]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn schema_change_event_refreshes() {
    let Some(addr) = node_addr() else { return };
    let conn = session(addr).await;
    fresh_keyspace(&conn, "meta_ks_event").await;
    let (control, mut rx) = start(addr).await;
    assert!(control.metadata().table("meta_ks_event", "fresh").is_none());

    execute(
        &conn,
        "CREATE TABLE meta_ks_event.fresh (k bigint PRIMARY KEY, v text)",
    )
    .await;
    let created = Instant::now();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    loop {
        if rx
            .borrow_and_update()
            .table("meta_ks_event", "fresh")
            .is_some()
        {
            break;
        }
        tokio::time::timeout_at(deadline, rx.changed())
            .await
            .expect("the new table did not appear within a second")
            .expect("control connection stopped");
    }
    println!(
        "table appeared {:?} after CREATE returned",
        created.elapsed()
    );
    let md = control.metadata();
    assert_eq!(
        md.table("meta_ks_event", "fresh")
            .map(|t| t.partition_key.clone()),
        Some(vec![(
            "k".to_owned(),
            ColumnType::Native(NativeType::BigInt)
        )])
    );

    execute(&conn, "DROP TABLE meta_ks_event.fresh").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    while rx
        .borrow_and_update()
        .table("meta_ks_event", "fresh")
        .is_some()
    {
        tokio::time::timeout_at(deadline, rx.changed())
            .await
            .expect("the dropped table did not disappear within a second")
            .expect("control connection stopped");
    }
    execute(&conn, "DROP KEYSPACE meta_ks_event").await;
}

#[tokio::test]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn schema_agreement_after_ddl() {
    let Some(addr) = node_addr() else { return };
    let conn = session(addr).await;
    let (control, _rx) = start(addr).await;
    fresh_keyspace(&conn, "meta_ks_agree").await;
    execute(&conn, "CREATE TABLE meta_ks_agree.t (k int PRIMARY KEY)").await;
    assert!(matches!(
        control
            .agreed_schema_version(None)
            .await
            .expect("agreement"),
        scylla_driver::cluster::system_tables::Agreement::Agreed(_)
    ));
    // A forced refresh sees the table whether or not the event came yet.
    let md = control.refresh().await.expect("refresh");
    assert!(md.table("meta_ks_agree", "t").is_some());
    execute(&conn, "DROP KEYSPACE meta_ks_agree").await;
}

#[tokio::test]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn routing_table_from_metadata() {
    let Some(addr) = node_addr() else { return };
    let conn = session(addr).await;
    fresh_keyspace(&conn, "meta_ks_route").await;
    let (control, _rx) = start(addr).await;
    let md = control.metadata();
    let table = RoutingTable::build(&md.to_topology_input(&|_| None));
    assert_eq!(table.node_count(), 1);
    assert_eq!(table.ring_len(), 16);
    let ks = table.keyspace_id("meta_ks_route").expect("keyspace known");
    for t in [i64::MIN + 1, -1, 0, 42, i64::MAX] {
        assert_eq!(table.replicas(ks, Token(t)), &[NodeIdx(0)]);
    }
    execute(&conn, "DROP KEYSPACE meta_ks_route").await;
}

#[tokio::test]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn skips_unreachable_contact_points() {
    let Some(addr) = node_addr() else { return };
    // Port 1 on loopback refuses connections.
    let dead: SocketAddr = "127.0.0.1:1".parse().expect("addr");
    let (control, _rx) = ControlHandle::start(
        vec![dead, addr],
        ConnectionConfig::default(),
        ControlOptions::default(),
    )
    .await
    .expect("the second contact point works");
    assert_eq!(control.connected_to(), Some(addr));
}

/// Needs no server: every contact point refuses.
#[tokio::test]
async fn start_fails_listing_every_contact_point() {
    let dead: Vec<SocketAddr> = vec![
        "127.0.0.1:1".parse().expect("addr"),
        "127.0.0.1:2".parse().expect("addr"),
    ];
    match ControlHandle::start(
        dead.clone(),
        ConnectionConfig::default(),
        ControlOptions::default(),
    )
    .await
    {
        Err(ControlError::Unreachable(failures)) => {
            let addrs: Vec<SocketAddr> = failures.iter().map(|f| f.address).collect();
            assert_eq!(addrs, dead);
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert!(matches!(
        ControlHandle::start(
            vec![],
            ConnectionConfig::default(),
            ControlOptions::default()
        )
        .await,
        Err(ControlError::EmptyKnownNodesList)
    ));
}

/// A TCP proxy to the node whose forwarded connections can be cut (the
/// listener keeps accepting): a way to kill the control connection from
/// outside.
struct Proxy {
    addr: SocketAddr,
    links: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let links = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let accepted = links.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let link = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                accepted.lock().expect("lock").push(link);
            }
        });
        Proxy {
            addr,
            links,
            accept,
        }
    }

    /// Forwarded connections still open.
    fn open_links(&self) -> usize {
        let links = self.links.lock().expect("lock");
        links.iter().filter(|l| !l.is_finished()).count()
    }

    /// Closes every forwarded connection.
    fn cut(&self) {
        for link in self.links.lock().expect("lock").drain(..) {
            link.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

#[tokio::test]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn reconnects_and_keeps_receiving_events() {
    let Some(addr) = node_addr() else { return };
    let proxy = Proxy::start(addr).await;
    let conn = session(addr).await;
    fresh_keyspace(&conn, "meta_ks_reconnect").await;
    let options = {
        let mut built = ControlOptions::default();
        built.reconnect =
            std::sync::Arc::new(scylla_driver::pool::backoff::ExponentialBackoff::new(
                Duration::from_millis(10),
                Duration::from_millis(100),
            ));
        built
    };
    let (control, mut rx) =
        ControlHandle::start(vec![proxy.addr], ConnectionConfig::default(), options)
            .await
            .expect("control connection");
    assert_eq!(control.connected_to(), Some(proxy.addr));

    proxy.cut();
    let deadline = Instant::now() + Duration::from_secs(5);
    // The reader sees the close first; wait until a new connection is up.
    tokio::time::sleep(Duration::from_millis(50)).await;
    while control.connected_to().is_none() {
        assert!(Instant::now() < deadline, "no reconnect within 5 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The new connection registered for events too.
    execute(
        &conn,
        "CREATE TABLE meta_ks_reconnect.t (k int PRIMARY KEY)",
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while rx
        .borrow_and_update()
        .table("meta_ks_reconnect", "t")
        .is_none()
    {
        tokio::time::timeout_at(deadline, rx.changed())
            .await
            .expect("no schema refresh after the reconnect")
            .expect("control connection stopped");
    }
    execute(&conn, "DROP KEYSPACE meta_ks_reconnect").await;
}

#[tokio::test]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn moves_to_another_contact_point_when_its_node_dies() {
    let Some(addr) = node_addr() else { return };
    let a = Proxy::start(addr).await;
    let b = Proxy::start(addr).await;
    let options = {
        let mut built = ControlOptions::default();
        built.reconnect =
            std::sync::Arc::new(scylla_driver::pool::backoff::ExponentialBackoff::new(
                Duration::from_millis(10),
                Duration::from_millis(100),
            ));
        built
    };
    let (control, _rx) =
        ControlHandle::start(vec![a.addr, b.addr], ConnectionConfig::default(), options)
            .await
            .expect("control connection");
    assert_eq!(control.connected_to(), Some(a.addr));
    let a_addr = a.addr;
    drop(a); // stops accepting and cuts the control connection
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match control.connected_to() {
            Some(now) if now != a_addr => {
                assert_eq!(now, b.addr);
                break;
            }
            _ => {
                assert!(Instant::now() < deadline, "did not move to b within 5 s");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    // The snapshot now names the node by the address that reached it.
    let md = control.refresh().await.expect("refresh");
    assert_eq!(md.nodes[0].address, b.addr);
}

#[tokio::test]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn dropping_the_handle_closes_the_connection() {
    let Some(addr) = node_addr() else { return };
    let proxy = Proxy::start(addr).await;
    let (control, mut rx) = ControlHandle::start(
        vec![proxy.addr],
        ConnectionConfig::default(),
        ControlOptions::default(),
    )
    .await
    .expect("control connection");
    assert_eq!(proxy.open_links(), 1);
    drop(control);
    let deadline = Instant::now() + Duration::from_secs(2);
    while proxy.open_links() > 0 {
        assert!(
            Instant::now() < deadline,
            "the connection outlived its handle"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The snapshot channel reports the end.
    assert!(rx.changed().await.is_err());
}
