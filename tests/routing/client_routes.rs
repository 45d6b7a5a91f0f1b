//! Client routes (PrivateLink-style networks) against the test cluster's
//! load-balancer fronts: nodes advertise unreachable addresses, so every
//! connection goes through a route; the fronts speak PROXY v2 to the nodes'
//! shard-aware proxy listeners, which put each connection on the shard its
//! *client* source port names. Counted on the cluster side.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_driver::tls::{ServerName, TlsConfig};
use scylla_driver::{ClientRoutes, Session, SessionBuilder};
use scylla_testbed::routes::{RouteFrontStats, DEFAULT_CONNECTION_ID};
use scylla_testbed::tls::SERVER_DNS_NAME;
use scylla_testbed::{TestCluster, TlsOptions};

const FULL: Duration = Duration::from_secs(20);

async fn routed_cluster(nodes: usize, shards: u16, tls: bool) -> TestCluster {
    let mut b = TestCluster::builder()
        .nodes(nodes)
        .shards(shards)
        .advertise_unreachable(true)
        .client_routes(true);
    if tls {
        b = b.tls(TlsOptions::default());
    }
    b.start().await.unwrap()
}

fn routes() -> ClientRoutes {
    ClientRoutes::new([DEFAULT_CONNECTION_ID]).proxy_protocol(true)
}

/// A session through node 0's front, plain or TLS, every shard connected.
async fn routed_session(cluster: &TestCluster, tls: bool) -> Session {
    let front0 = cluster.route_front(0).unwrap();
    let mut b = SessionBuilder::new().client_routes(routes());
    if tls {
        let mut t = TlsConfig::builder()
            .ca_pem(cluster.tls_ca_pem().unwrap().as_bytes())
            .unwrap()
            .build()
            .unwrap();
        // The fronts' addresses are not in the nodes' certificate.
        t.server_name = ServerName::Fixed(SERVER_DNS_NAME.into());
        b = b.known_node(front0.tls_address.unwrap().to_string()).tls(t);
    } else {
        b = b.known_node(front0.address.to_string());
    }
    let session = b.build().await.unwrap();
    assert!(session.wait_for_all_shards(FULL).await);
    session
}

/// Waits (up to [`FULL`]) until the session holds a connection to every
/// node, whichever shards they are on.
async fn every_node_connected(session: &Session) {
    let deadline = Instant::now() + FULL;
    while session.cluster().nodes().iter().any(|n| n.connections == 0) {
        assert!(Instant::now() < deadline, "{:?}", session.cluster().nodes());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every shard of every node is reached through its route, on the right
/// shard, with nothing arriving at the nodes any other way.
async fn every_shard_through_routes(tls: bool) {
    let (nodes, shards) = (3, 4u16);
    let cluster = routed_cluster(nodes, shards, tls).await;
    let session = routed_session(&cluster, tls).await;
    // The session dials every node at its route.
    for n in session.cluster().nodes() {
        let i = cluster
            .nodes()
            .iter()
            .position(|c| c.host_id == n.host_id)
            .unwrap();
        let f = cluster.route_front(i).unwrap();
        let want = if tls {
            f.tls_address.unwrap()
        } else {
            f.address
        };
        assert_eq!(n.address, want, "node {i}");
        assert_eq!(n.connections, shards as usize, "node {i}");
    }
    // One attempt per shard of every node, and one more per raced first
    // setup (a first setup that a loaded machine stalls past the race delay
    // is raced by a second one, counted in setup_races), whose connection
    // is kept for its shard (one shard-aware attempt fewer) or closed.
    // Waits (bounded) for a raced setup still running.
    let races = session.metrics().snapshot().setup_races;
    let deadline = Instant::now() + Duration::from_secs(5);
    while {
        let m = session.metrics().snapshot();
        m.connects_regular_ok + m.connects_regular_failed < nodes as u64 + races
    } && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let m = session.metrics().snapshot();
    assert_eq!(m.wrong_shard_landings, 0, "{m:?}");
    assert_eq!(m.shard_aware_fallbacks, 0, "{m:?}");
    assert_eq!(m.connects_regular_ok, nodes as u64 + races, "{m:?}");
    let others = nodes as u64 * (u64::from(shards) - 1);
    assert!(
        m.connects_shard_aware_ok <= others && m.connects_shard_aware_ok + races >= others,
        "{m:?}"
    );
    assert_eq!(
        m.connect_attempts(),
        m.connects_regular_ok + m.connects_shard_aware_ok,
        "{m:?}"
    );
    let mut through_routes = 0;
    for i in 0..nodes {
        let st = cluster.node_stats(i).unwrap();
        for (s, c) in st.shards.iter().enumerate() {
            assert!(c.accepted_proxy >= 1, "node {i} shard {s}: {c:?}");
        }
        // Everything came through the balancer (nothing reached the regular
        // or plain shard-aware ports directly)...
        assert_eq!(st.node.accepted_regular, 0, "node {i}");
        assert_eq!(
            st.node.accepted_proxy, st.node.accepted_shard_aware,
            "node {i}"
        );
        if tls {
            assert_eq!(st.node.accepted_tls, st.node.accepted_proxy, "node {i}");
        }
        // ...in one attempt per shard (plus the control connection on node 0,
        // and the raced setups counted below).
        let control = u64::from(i == 0);
        assert!(
            st.node.accepted_proxy >= u64::from(shards) + control,
            "node {i}: {}",
            st.node.accepted_proxy
        );
        through_routes += st.node.accepted_proxy;
        let f = cluster.route_front(i).unwrap();
        let at_front = if tls { f.accepted_tls } else { f.accepted };
        assert_eq!(at_front, st.node.accepted_proxy, "node {i}: {f:?}");
    }
    // Every pool attempt and the control connection, nothing else.
    assert_eq!(through_routes, m.connect_attempts() + 1, "{m:?}");
    session.close(Duration::from_secs(5)).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shard_of_every_node_through_its_route() {
    every_shard_through_routes(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shard_of_every_node_through_its_route_over_tls() {
    every_shard_through_routes(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_change_under_load_fails_no_idempotent_request() {
    route_change_under_load(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_change_under_load_over_tls_fails_no_idempotent_request() {
    route_change_under_load(true).await;
}

/// 64 workers of idempotent prepared INSERTs for 3 s; after 1 s node 1's
/// route moves to a new front. Ends with 0 failed requests, node 1's
/// connections all on the new front, and no connection at the old one
/// after the change.
async fn route_change_under_load(tls: bool) {
    let (nodes, shards) = (3, 2u16);
    let cluster = routed_cluster(nodes, shards, tls).await;
    let session = routed_session(&cluster, tls).await;
    // The address of a front the session dials.
    let dialled = |f: &RouteFrontStats| {
        if tls {
            f.tls_address.unwrap()
        } else {
            f.address
        }
    };
    let accepted = |f: &RouteFrontStats| if tls { f.accepted_tls } else { f.accepted };
    session
        .query_unpaged(
            "CREATE KEYSPACE rc WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}",
            (),
        )
        .await
        .unwrap();
    session
        .query_unpaged("CREATE TABLE rc.t (k bigint PRIMARY KEY, v bigint)", ())
        .await
        .unwrap();
    let mut insert = session
        .prepare("INSERT INTO rc.t (k, v) VALUES (?, ?)")
        .await
        .unwrap();
    insert.set_is_idempotent(true);

    let retries_before = session.metrics().snapshot().retries;
    let moved = 1usize;
    let old = cluster.route_front(moved).unwrap();
    let ok = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    // Requests that ended after the route changed.
    let changed = Arc::new(AtomicBool::new(false));
    let ok_after = Arc::new(AtomicU64::new(0));
    let run_for = Duration::from_secs(3);
    let start = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..64i64 {
        let (s, insert, ok, failed) = (session.clone(), insert.clone(), ok.clone(), failed.clone());
        let (changed, ok_after) = (changed.clone(), ok_after.clone());
        workers.spawn(async move {
            let mut k = w;
            while start.elapsed() < run_for {
                match s.execute_unpaged(&insert, (k, w)).await {
                    Ok(_) => {
                        if changed.load(Ordering::Relaxed) {
                            ok_after.fetch_add(1, Ordering::Relaxed);
                        }
                        ok.fetch_add(1, Ordering::Relaxed)
                    }
                    Err(e) => {
                        eprintln!("request failed: {e}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
                k += 64;
            }
        });
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ip = cluster.next_route_address().unwrap();
    changed.store(true, Ordering::Relaxed);
    let changed_at = Instant::now();
    let new = cluster.set_client_route(moved, ip).await.unwrap();
    let old_accepted_at_change = accepted(&cluster.route_fronts()[moved]);
    // While the workers run: when the session dials the new route, and when
    // the old front has no connection left (10 ms polls, bounded).
    let host = cluster.nodes()[moved].host_id;
    let watch = async {
        let (mut dialled_after, mut drained_after) = (None, None);
        while changed_at.elapsed() < FULL && (dialled_after.is_none() || drained_after.is_none()) {
            let view = session.cluster().nodes();
            if dialled_after.is_none()
                && view
                    .iter()
                    .any(|n| n.host_id == host && n.address == dialled(&new))
            {
                dialled_after = Some(changed_at.elapsed());
            }
            let fronts = cluster.route_fronts();
            if drained_after.is_none()
                && fronts
                    .iter()
                    .any(|f| f.address == old.address && f.forwarding == 0)
            {
                drained_after = Some(changed_at.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (dialled_after, drained_after)
    };
    let join = async {
        while let Some(r) = workers.join_next().await {
            r.unwrap();
        }
    };
    let ((dialled_after, drained_after), ()) = tokio::join!(watch, join);
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    assert_eq!(failed, 0, "{ok} ok");
    // Not even retried: the old pool drained its requests before closing.
    let retries = session.metrics().snapshot().retries - retries_before;
    assert_eq!(retries, 0, "{ok} ok");
    // Under load on both sides of the change (counted: a loaded machine
    // runs fewer requests in the 3 s, but at least one round of the 64
    // workers on each side).
    let ok_after = ok_after.load(Ordering::Relaxed);
    assert!(
        ok - ok_after >= 64 && ok_after >= 64,
        "{ok} requests, {ok_after} of them after the change"
    );

    // The node is dialled at its new route, every shard connected there,
    // and the old front forwards nothing any more (bounded wait).
    let deadline = Instant::now() + FULL;
    loop {
        let view = session.cluster().nodes();
        let node = view
            .iter()
            .find(|n| n.host_id == cluster.nodes()[moved].host_id)
            .unwrap();
        let fronts = cluster.route_fronts();
        let old_now = fronts.iter().find(|f| f.address == old.address).unwrap();
        let new_now = fronts.iter().find(|f| f.address == new.address).unwrap();
        if node.address == dialled(&new)
            && node.connections == shards as usize
            && old_now.forwarding == 0
            && new_now.forwarding == shards as u64
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node {node:?}, old front {old_now:?}, new front {new_now:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "route change (tls: {tls}): {ok} requests ok, 0 failed, 0 retried; the session dialled the new route {dialled_after:?} after the change, the old front had no connection left {drained_after:?} after it"
    );
    // No connection reached the old front after the change.
    let old_end = cluster
        .route_fronts()
        .into_iter()
        .find(|f| f.address == old.address)
        .unwrap();
    assert_eq!(accepted(&old_end), old_accepted_at_change, "{old_end:?}");
    let m = session.metrics().snapshot();
    assert_eq!(m.wrong_shard_landings, 0, "{m:?}");
    session.close(Duration::from_secs(5)).await;
    cluster.shutdown().await;
}

/// Without `proxy_protocol`, a routed node's pool never tries a shard-aware
/// port (the one the node advertises is not behind the route): every
/// connection goes to the route as to a regular port, and requests work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_proxy_protocol_routed_pools_use_no_shard_aware_port() {
    let cluster = routed_cluster(2, 2, false).await;
    let session = SessionBuilder::new()
        .known_node(cluster.route_front(0).unwrap().address.to_string())
        .client_routes(ClientRoutes::new([DEFAULT_CONNECTION_ID]))
        .build()
        .await
        .unwrap();
    every_node_connected(&session).await;
    for _ in 0..20 {
        session
            .query_unpaged("SELECT release_version FROM system.local", ())
            .await
            .unwrap();
    }
    let m = session.metrics().snapshot();
    assert_eq!(m.connects_shard_aware_ok, 0, "{m:?}");
    assert_eq!(m.connects_shard_aware_failed, 0, "{m:?}");
    assert!(m.connects_regular_ok >= 2, "{m:?}");
    for i in 0..2 {
        let st = cluster.node_stats(i).unwrap().node;
        assert_eq!(st.accepted_regular, 0, "node {i}");
        assert!(st.accepted_proxy >= 1, "node {i}");
    }
    session.close(Duration::from_secs(5)).await;
    cluster.shutdown().await;
}

/// Moving the route of the node the control connection came in through:
/// the control connection leaves the old route (for a node's current route:
/// the moved one or another node's), so the old front ends with no
/// connection at all, and the session keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_connection_follows_its_node_s_route() {
    let cluster = routed_cluster(2, 2, false).await;
    let session = routed_session(&cluster, false).await;
    let old = cluster.route_front(0).unwrap();
    // The pool's 2 connections and the control connection.
    assert_eq!(old.forwarding, 3, "{old:?}");
    let ip = cluster.next_route_address().unwrap();
    let new = cluster.set_client_route(0, ip).await.unwrap();
    let deadline = Instant::now() + FULL;
    loop {
        let fronts = cluster.route_fronts();
        let old_now = fronts.iter().find(|f| f.address == old.address).unwrap();
        let new_now = fronts.iter().find(|f| f.address == new.address).unwrap();
        let current: u64 = (0..2)
            .map(|i| cluster.route_front(i).unwrap().forwarding)
            .sum();
        // Both pools (2 x 2) and the control connection on current routes.
        if old_now.forwarding == 0 && new_now.forwarding >= 2 && current == 5 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "old {old_now:?}, new {new_now:?}, {fronts:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The control connection works at its new place: a schema change is
    // agreed on through it.
    session
        .query_unpaged(
            "CREATE KEYSPACE moved WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}",
            (),
        )
        .await
        .unwrap();
    session.await_schema_agreement().await.unwrap();
    session.close(Duration::from_secs(5)).await;
    cluster.shutdown().await;
}

/// The official crate's spelling (`client::client_routes`,
/// `ClientRoutesSessionBuilder`) reaches every node through its route, and
/// a proxy's overridden hostname replaces the address in the table: here
/// every row names a host that does not resolve, and the override names
/// the fronts' address (each node's front on its own port).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_client_routes_builder_with_an_overridden_hostname() {
    use scylla_driver::client::client_routes::{ClientRoutesConfig, ClientRoutesProxy};
    use scylla_driver::client::session_builder::ClientRoutesSessionBuilder;
    use scylla_testbed::routes::ClientRoute;

    let nodes = 2;
    let cluster = routed_cluster(nodes, 2, false).await;
    // Both nodes' fronts on one address, so one hostname serves them (the
    // rows' ports tell them apart).
    let ip = cluster.route_front(0).unwrap().address.ip();
    let front1 = cluster.set_client_route(1, ip).await.unwrap();
    assert_eq!(front1.address.ip(), ip);
    for row in cluster.topology().client_routes().rows() {
        cluster.topology().client_routes().upsert(ClientRoute {
            address: "no-such-route.invalid".into(),
            ..row
        });
    }
    let proxy = ClientRoutesProxy::new_with_connection_id(DEFAULT_CONNECTION_ID.to_owned())
        .with_overridden_hostname(ip.to_string());
    let config = ClientRoutesConfig::new(vec![proxy]).unwrap();
    let session = ClientRoutesSessionBuilder::new(config)
        .known_node(cluster.route_front(0).unwrap().address.to_string())
        .build()
        .await
        .unwrap();
    // Every node reached through its route. (Without `proxy_protocol` the
    // pools do not pick source ports per shard, and the fronts' PROXY v2
    // listeners put a connection on `client port % shards`: which shards
    // that covers is the kernel's choice, so it is not waited for here.)
    every_node_connected(&session).await;
    for i in 0..nodes {
        let f = cluster.route_front(i).unwrap();
        let n = session
            .cluster()
            .nodes()
            .into_iter()
            .find(|n| n.host_id == cluster.nodes()[i].host_id)
            .unwrap();
        assert_eq!(n.address, f.address, "node {i}");
        assert!(f.accepted >= 1, "node {i}: {f:?}");
    }
    // The official default: the routes' ports are not taken as shard-aware.
    let m = session.metrics().snapshot();
    assert_eq!(m.connects_shard_aware_ok, 0, "{m:?}");
    assert_eq!(m.connects_shard_aware_failed, 0, "{m:?}");
    let rows = session
        .query_unpaged("SELECT key FROM system.local", &[])
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    assert_eq!(rows.rows_num(), 1);
    session.close(Duration::from_secs(5)).await;

    // Without the override the table's hostname is dialled: it does not
    // resolve, so node 1 keeps its own (unreachable) address and gets no
    // connection. (Node 0 is the contact point's node: its address is the
    // one the session came in through.)
    let config = ClientRoutesConfig::new(vec![ClientRoutesProxy::from(
        DEFAULT_CONNECTION_ID.to_owned(),
    )])
    .unwrap();
    let session = ClientRoutesSessionBuilder::new(config)
        .known_node(cluster.route_front(0).unwrap().address.to_string())
        .build()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let nodes_view = session.cluster().nodes();
    let node1 = nodes_view
        .iter()
        .find(|n| n.host_id == cluster.nodes()[1].host_id)
        .unwrap();
    assert_ne!(node1.address.ip(), ip, "{nodes_view:?}");
    assert_eq!(node1.connections, 0, "{nodes_view:?}");
    session.close(Duration::from_secs(5)).await;
    cluster.shutdown().await;
}
