//! Client routes (ScyllaDB's `system.client_routes`, for PrivateLink-style
//! networks) and the load-balancer fronts they point at.
//!
//! In such a network the client cannot reach the nodes' own addresses; each
//! node is reached through an endpoint of a load balancer (one address per
//! node), and `system.client_routes` says which: one row per (connection
//! id, host id) with the endpoint's `address`, `port` and `tls_port`
//! (the schema is ScyllaDB's, `db/system_keyspace.cc` in
//! <https://github.com/scylladb/scylladb>). When a row changes, ScyllaDB
//! sends `CLIENT_ROUTES_CHANGE` to the connections that registered for it.
//!
//! A [`RouteFront`] is one such endpoint: a listener on a loopback address
//! (plain, and TLS when the cluster has TLS) that forwards every connection
//! to its node's PROXY protocol v2 listener, after writing a
//! [`proxy_v2`](crate::proxy_v2) header with the client's address and port
//! and the front's own. TLS is end to end: the front forwards bytes, the
//! node terminates TLS after reading the header. The node's PROXY listeners
//! are shard-aware (ScyllaDB's
//! `native_shard_aware_transport_port_proxy_protocol`): the header's source
//! port picks the shard, so a client that binds its source port keeps its
//! shard awareness through the balancer.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::error::ClusterError;

/// The connection id the test cluster's routes are published under.
pub const DEFAULT_CONNECTION_ID: &str = "testbed-link";

/// How long a front waits for its node's listener to accept.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One row of `system.client_routes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRoute {
    /// The connection id (partition key): which private link this row is for.
    pub connection_id: String,
    /// The node's host id (clustering key).
    pub host_id: Uuid,
    /// The endpoint's address (text: a DNS name or an IP).
    pub address: String,
    /// The endpoint's plaintext port.
    pub port: u16,
    /// The endpoint's TLS port, when there is one.
    pub tls_port: Option<u16>,
}

/// The rows of `system.client_routes`, shared by every node (the table is
/// group-0 replicated in ScyllaDB: every node answers the same).
#[derive(Debug, Default)]
pub struct ClientRouteTable {
    rows: Mutex<Vec<ClientRoute>>,
}

impl ClientRouteTable {
    /// The rows, sorted by (connection id, host id).
    pub fn rows(&self) -> Vec<ClientRoute> {
        let mut rows = self.rows.lock().map(|r| r.clone()).unwrap_or_default();
        rows.sort_by(|a, b| (&a.connection_id, a.host_id).cmp(&(&b.connection_id, b.host_id)));
        rows
    }

    /// Inserts `route`, replacing the row with its (connection id, host id).
    pub fn upsert(&self, route: ClientRoute) {
        if let Ok(mut rows) = self.rows.lock() {
            rows.retain(|r| (&r.connection_id, r.host_id) != (&route.connection_id, route.host_id));
            rows.push(route);
        }
    }

    /// Deletes the row of (`connection_id`, `host_id`); returns whether there
    /// was one.
    pub fn remove(&self, connection_id: &str, host_id: Uuid) -> bool {
        let Ok(mut rows) = self.rows.lock() else {
            return false;
        };
        let before = rows.len();
        rows.retain(|r| (r.connection_id.as_str(), r.host_id) != (connection_id, host_id));
        rows.len() != before
    }
}

/// A load-balancer endpoint for one node.
#[derive(Debug)]
pub struct RouteFront {
    node: usize,
    address: SocketAddr,
    tls_address: Option<SocketAddr>,
    accepted: AtomicU64,
    accepted_tls: AtomicU64,
    forwarding: AtomicU64,
    cancel: CancellationToken,
}

/// What a front saw, for tests to assert on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteFrontStats {
    /// The node it forwards to.
    pub node: usize,
    /// Its plaintext address.
    pub address: SocketAddr,
    /// Its TLS address, if the cluster has TLS.
    pub tls_address: Option<SocketAddr>,
    /// Connections accepted on the plaintext address.
    pub accepted: u64,
    /// Connections accepted on the TLS address.
    pub accepted_tls: u64,
    /// Connections it forwards now (both addresses).
    pub forwarding: u64,
}

impl RouteFront {
    /// Binds a front on `ip` (ephemeral ports) for node `node`, forwarding
    /// plaintext connections to `target` and TLS ones to `tls_target`, until
    /// `parent` is cancelled or [`RouteFront::close`] is called.
    pub(crate) async fn start(
        ip: IpAddr,
        node: usize,
        target: SocketAddr,
        tls_target: Option<SocketAddr>,
        parent: &CancellationToken,
        tracker: &TaskTracker,
    ) -> Result<Arc<RouteFront>, ClusterError> {
        let bind = |addr: SocketAddr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| ClusterError::Bind { addr, source })
        };
        let plain = bind(SocketAddr::new(ip, 0)).await?;
        let tls = match tls_target {
            Some(_) => Some(bind(SocketAddr::new(ip, 0)).await?),
            None => None,
        };
        let local = |l: &TcpListener| {
            l.local_addr().map_err(|source| ClusterError::Bind {
                addr: SocketAddr::new(ip, 0),
                source,
            })
        };
        let front = Arc::new(RouteFront {
            node,
            address: local(&plain)?,
            tls_address: tls.as_ref().map(local).transpose()?,
            accepted: AtomicU64::new(0),
            accepted_tls: AtomicU64::new(0),
            forwarding: AtomicU64::new(0),
            cancel: parent.child_token(),
        });
        tracker.spawn(accept_loop(
            front.clone(),
            plain,
            target,
            false,
            tracker.clone(),
        ));
        if let (Some(l), Some(t)) = (tls, tls_target) {
            tracker.spawn(accept_loop(front.clone(), l, t, true, tracker.clone()));
        }
        Ok(front)
    }

    /// Its plaintext address.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Its TLS address, if any.
    pub fn tls_address(&self) -> Option<SocketAddr> {
        self.tls_address
    }

    /// The node it forwards to.
    pub fn node(&self) -> usize {
        self.node
    }

    /// Its counters.
    pub fn stats(&self) -> RouteFrontStats {
        RouteFrontStats {
            node: self.node,
            address: self.address,
            tls_address: self.tls_address,
            accepted: self.accepted.load(Ordering::Relaxed),
            accepted_tls: self.accepted_tls.load(Ordering::Relaxed),
            forwarding: self.forwarding.load(Ordering::Relaxed),
        }
    }

    /// Stops listening and cuts the connections it forwards.
    pub fn close(&self) {
        self.cancel.cancel();
    }
}

async fn accept_loop(
    front: Arc<RouteFront>,
    listener: TcpListener,
    target: SocketAddr,
    tls: bool,
    tracker: TaskTracker,
) {
    loop {
        let accepted = tokio::select! {
            _ = front.cancel.cancelled() => return,
            a = listener.accept() => a,
        };
        let (client, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(node = front.node, "route front accept failed: {e}");
                tokio::select! {
                    _ = front.cancel.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(10)) => {}
                }
                continue;
            }
        };
        let counter = if tls {
            &front.accepted_tls
        } else {
            &front.accepted
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let local = if tls {
            front.tls_address.unwrap_or(front.address)
        } else {
            front.address
        };
        let f = front.clone();
        tracker.spawn(async move {
            f.forwarding.fetch_add(1, Ordering::Relaxed);
            tokio::select! {
                _ = f.cancel.cancelled() => {}
                r = forward(client, peer, local, target) => {
                    if let Err(e) = r {
                        tracing::debug!(node = f.node, %peer, "route front: forwarding ended: {e}");
                    }
                }
            }
            f.forwarding.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Connects to `target`, writes the PROXY v2 header (`peer` -> `local`),
/// then copies bytes both ways until either side closes.
async fn forward(
    mut client: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    target: SocketAddr,
) -> std::io::Result<()> {
    let _ = client.set_nodelay(true);
    let mut upstream = tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(target))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "node did not accept"))??;
    let _ = upstream.set_nodelay(true);
    upstream
        .write_all(&crate::proxy_v2::encode(peer, local))
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(cid: &str, host: u128, port: u16) -> ClientRoute {
        ClientRoute {
            connection_id: cid.into(),
            host_id: Uuid::from_u128(host),
            address: "127.0.0.1".into(),
            port,
            tls_port: None,
        }
    }

    #[test]
    fn rows_are_keyed_by_connection_id_and_host_id() {
        let t = ClientRouteTable::default();
        t.upsert(route("b", 1, 1));
        t.upsert(route("a", 2, 2));
        t.upsert(route("a", 1, 3));
        t.upsert(route("a", 2, 4));
        let keys: Vec<_> = t
            .rows()
            .iter()
            .map(|r| (r.connection_id.clone(), r.host_id.as_u128(), r.port))
            .collect();
        assert_eq!(
            keys,
            vec![("a".into(), 1, 3), ("a".into(), 2, 4), ("b".into(), 1, 1)]
        );
        assert!(t.remove("a", Uuid::from_u128(2)));
        assert!(!t.remove("a", Uuid::from_u128(2)));
        assert_eq!(t.rows().len(), 2);
    }
}
