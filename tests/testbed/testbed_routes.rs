//! The test cluster's client routes, spoken to with raw TCP: the nodes'
//! PROXY v2 listeners pick the shard from the header's source port and
//! close on a malformed header; the fronts forward with the client's port;
//! `system.client_routes` lists the fronts; a route change is pushed.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use scylla_testbed::proxy_v2;
use scylla_testbed::routes::DEFAULT_CONNECTION_ID;
use scylla_testbed::TestCluster;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SHARDS: u16 = 4;

async fn cluster() -> TestCluster {
    TestCluster::builder()
        .nodes(2)
        .shards(SHARDS)
        .client_routes(true)
        .start()
        .await
        .unwrap()
}

/// Waits (bounded) until `f` holds.
async fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_proxy_listener_uses_the_header_source_port() {
    let cluster = cluster().await;
    let node = cluster.node(1).unwrap().clone();
    let proxy: SocketAddr = SocketAddr::new(node.address, cluster.config().proxy_port.unwrap());
    let mut held = Vec::new();
    // Source ports 40001..=40004 claimed in the header: shards 1, 2, 3, 0,
    // whatever the real source port of the TCP connection.
    for (i, port) in (40001u16..=40004).enumerate() {
        let mut s = TcpStream::connect(proxy).await.unwrap();
        let claimed: SocketAddr = SocketAddr::new("10.1.2.3".parse().unwrap(), port);
        s.write_all(&proxy_v2::encode(claimed, proxy))
            .await
            .unwrap();
        held.push(s);
        let want = i as u64 + 1;
        eventually("the proxied accept", || {
            cluster.node_stats(1).unwrap().node.accepted_proxy == want
        })
        .await;
        let st = cluster.node_stats(1).unwrap();
        let shard = usize::from(port % SHARDS);
        assert_eq!(st.shards[shard].accepted_proxy, 1, "port {port}: {st:?}");
    }
    assert_eq!(cluster.node_stats(1).unwrap().node.accepted_regular, 0);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_malformed_header_closes_the_connection() {
    let cluster = cluster().await;
    let node = cluster.node(0).unwrap().clone();
    let proxy = SocketAddr::new(node.address, cluster.config().proxy_port.unwrap());
    let before = cluster.node_stats(0).unwrap().node.protocol_errors;
    let mut s = TcpStream::connect(proxy).await.unwrap();
    // A CQL OPTIONS frame where the header should be.
    s.write_all(&[0x04, 0, 0, 1, 0x05, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "the node answered instead of closing");
    let st = cluster.node_stats(0).unwrap().node;
    assert_eq!(st.protocol_errors, before + 1);
    assert_eq!(st.accepted_proxy, 0);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_front_forwards_with_the_client_source_port() {
    let cluster = cluster().await;
    let front = cluster.route_front(0).unwrap();
    // Bind a source port whose shard we know.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_reuseaddr(true).unwrap();
    let mut port = 0;
    for p in (52002u16..53000).step_by(4) {
        if socket.bind(SocketAddr::new(front.address.ip(), p)).is_ok() {
            port = p;
            break;
        }
    }
    assert_ne!(port, 0, "no free source port");
    let _s = socket.connect(front.address).await.unwrap();
    eventually("the forwarded accept", || {
        cluster.node_stats(0).unwrap().node.accepted_proxy == 1
    })
    .await;
    let st = cluster.node_stats(0).unwrap();
    assert_eq!(
        st.shards[usize::from(port % SHARDS)].accepted_proxy,
        1,
        "{st:?}"
    );
    assert_eq!(cluster.route_front(0).unwrap().accepted, 1);
    cluster.shutdown().await;
}

#[tokio::test]
async fn routes_are_listed_and_a_move_updates_them() {
    let cluster = cluster().await;
    let rows = cluster.topology().client_routes().rows();
    assert_eq!(rows.len(), 2);
    for (i, n) in cluster.nodes().iter().enumerate() {
        let r = rows.iter().find(|r| r.host_id == n.host_id).unwrap();
        let f = cluster.route_front(i).unwrap();
        assert_eq!(r.connection_id, DEFAULT_CONNECTION_ID);
        assert_eq!(r.address, f.address.ip().to_string());
        assert_eq!(r.port, f.address.port());
        assert_eq!(r.tls_port, None);
    }
    let ip = cluster.next_route_address().unwrap();
    let moved = cluster.set_client_route(1, ip).await.unwrap();
    let rows = cluster.topology().client_routes().rows();
    assert_eq!(rows.len(), 2, "a move replaces the row");
    let r = rows
        .iter()
        .find(|r| r.host_id == cluster.nodes()[1].host_id)
        .unwrap();
    assert_eq!(
        (r.address.as_str(), r.port),
        (&*ip.to_string(), moved.address.port())
    );
    assert_eq!(cluster.route_fronts().len(), 3);
    assert_eq!(cluster.route_front(1).unwrap().address, moved.address);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_cluster_without_client_routes_refuses_to_set_one() {
    let cluster = TestCluster::builder().nodes(1).start().await.unwrap();
    let ip = cluster.next_route_address().unwrap();
    let e = cluster.set_client_route(0, ip).await.unwrap_err();
    assert!(e.to_string().contains("client_routes(true)"), "{e}");
    assert!(cluster.route_fronts().is_empty());
    assert!(cluster.topology().client_routes().rows().is_empty());
    cluster.shutdown().await;
}
