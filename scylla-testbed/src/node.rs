//! A running node: its listeners (regular and shard-aware ports, TLS ones,
//! and the Unix-domain maintenance socket when on), accept loops and
//! connection tasks.
//!
//! A [`NodeRuntime`] is one "process lifetime" of a node: starting a node
//! builds a fresh one (fresh connections, stats, admission), stopping it
//! cancels the node's token, which ends the accept loops (closing the
//! listeners) and every connection task, and waits on the node's task
//! tracker until all of them are gone. The node's identity ([`NodeInfo`]) and
//! its faults outlive runtimes, as a real node's address and the network
//! around it outlive a restart.
//!
//! Listeners are bound with `SO_REUSEADDR`, so a restarted node can bind its
//! ports again while old connections linger in `TIME_WAIT`. The maintenance
//! socket's file is removed before binding (a stale one from an earlier
//! lifetime, as ScyllaDB does) and when the node stops.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use socket2::{Domain, Socket, Type};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admission::Admission;
use crate::config::ClusterConfig;
use crate::connection;
use crate::error::ClusterError;
use crate::events::EventRegistry;
use crate::faults::{FaultState, ShardAwarePortMode};
use crate::handler::{ConnCtx, PortKind, SessionState, TlsSession};
use crate::node_shared::NodeShared;
use crate::shard::{assign, ShardConnection};
use crate::stats::{bump_both, NodeStats};
use crate::tls::TlsMaterial;
use crate::topology::{NodeInfo, Topology};
use rustls::HandshakeKind;

/// How long `stop` waits for a node's tasks to end.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause after a failed `accept` (e.g. out of file descriptors), so the loop
/// does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(10);
/// Longest a TLS handshake may take before the server gives up on the
/// client (a plaintext client on a TLS port that waits for an answer).
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// One lifetime of a running node.
#[derive(Debug)]
pub(crate) struct NodeRuntime {
    pub(crate) shared: Arc<NodeShared>,
    /// The shard-aware accept loops (plain and, with TLS, TLS), stoppable
    /// alone (refuse fault): their token is a child of the node's.
    shard_aware: Option<(CancellationToken, Vec<JoinHandle<()>>)>,
    /// The maintenance socket's path, when the node listens on one.
    maintenance_socket: Option<PathBuf>,
}

/// Binds a listener with `SO_REUSEADDR` (see the module doc).
fn bind(addr: SocketAddr) -> Result<TcpListener, ClusterError> {
    bind_io(addr).map_err(|source| ClusterError::Bind { addr, source })
}

fn bind_io(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

impl NodeRuntime {
    /// Binds the node's listeners and starts its accept loops.
    pub(crate) fn start(
        info: NodeInfo,
        topology: Arc<Topology>,
        faults: Arc<FaultState>,
        config: Arc<ClusterConfig>,
        parent: &CancellationToken,
        tls: Option<Arc<TlsMaterial>>,
        maintenance_socket: Option<PathBuf>,
    ) -> Result<Self, ClusterError> {
        // New ticket keys for this lifetime: no ticket of an earlier one
        // resumes (ScyllaDB makes its key when it starts).
        let tls = match tls {
            Some(m) => Some(
                m.node_acceptors(info.shards.get())
                    .map_err(|e| ClusterError::InvalidConfig(e.to_string()))?,
            ),
            None => None,
        };
        let regular = bind(info.cql_addr())?;
        let unix = match &maintenance_socket {
            Some(path) => Some(bind_unix(path)?),
            None => None,
        };
        let tls_regular = match (&tls, &config.tls) {
            (Some(_), Some(o)) => Some(bind(SocketAddr::new(info.address, o.port))?),
            _ => None,
        };
        let mut proxy_listeners = Vec::new();
        if let Some(p) = config.proxy_port {
            proxy_listeners.push((bind(SocketAddr::new(info.address, p))?, false));
            if let (Some(_), Some(tp)) = (&tls, config.proxy_tls_port) {
                proxy_listeners.push((bind(SocketAddr::new(info.address, tp))?, true));
            }
        }
        let nr_shards = info.shards.get();
        let shared = Arc::new(NodeShared {
            stats: Arc::new(NodeStats::new(nr_shards)),
            admission: (0..nr_shards)
                .map(|_| Admission::new(config.admission))
                .collect(),
            handler: config.handler.clone(),
            events: EventRegistry::default(),
            clients: Arc::default(),
            prepared: Arc::default(),
            tls,
            cancel: parent.child_token(),
            tracker: TaskTracker::new(),
            next_conn_id: AtomicU64::new(1),
            silent_now: AtomicUsize::new(0),
            info: Arc::new(info),
            topology,
            faults,
            config,
        });
        let mut rt = NodeRuntime {
            shared: shared.clone(),
            shard_aware: None,
            maintenance_socket,
        };
        // Nothing is spawned yet: on error, dropping `regular` closes it
        // (and dropping `rt` removes the socket file).
        rt.open_shard_aware_if_wanted()?;
        if let Some(listener) = unix {
            spawn_unix_accept_loop(&shared, listener);
        }
        shared.tracker.spawn(accept_loop(
            shared.clone(),
            regular,
            PortKind::Regular,
            false,
            false,
            shared.cancel.clone(),
        ));
        if let Some(listener) = tls_regular {
            shared.tracker.spawn(accept_loop(
                shared.clone(),
                listener,
                PortKind::Regular,
                true,
                false,
                shared.cancel.clone(),
            ));
        }
        // Client routes: the PROXY v2 listeners the route fronts forward to
        // (ScyllaDB's shard-aware proxy-protocol ports, plain and TLS).
        for (listener, tls) in proxy_listeners {
            shared.tracker.spawn(accept_loop(
                shared.clone(),
                listener,
                PortKind::ShardAware,
                tls,
                true,
                shared.cancel.clone(),
            ));
        }
        shared
            .topology
            .set_stats(shared.info.index, shared.stats.clone());
        shared.topology.set_up(shared.info.index, true);
        Ok(rt)
    }

    fn open_shard_aware_if_wanted(&mut self) -> Result<(), ClusterError> {
        let wanted = self.shared.faults.get().shard_aware_port != ShardAwarePortMode::Refuse;
        let Some(addr) = self.shared.info.shard_aware_addr() else {
            return Ok(());
        };
        if !wanted || self.shard_aware.is_some() {
            return Ok(());
        }
        let listener = bind(addr)?;
        let tls_port = match (&self.shared.tls, &self.shared.config.tls) {
            (Some(_), Some(o)) => o.shard_aware_port,
            _ => None,
        };
        let tls_listener = match tls_port {
            Some(p) => Some(bind(SocketAddr::new(addr.ip(), p))?),
            None => None,
        };
        let token = self.shared.cancel.child_token();
        let mut handles = vec![self.shared.tracker.spawn(accept_loop(
            self.shared.clone(),
            listener,
            PortKind::ShardAware,
            false,
            false,
            token.clone(),
        ))];
        if let Some(l) = tls_listener {
            handles.push(self.shared.tracker.spawn(accept_loop(
                self.shared.clone(),
                l,
                PortKind::ShardAware,
                true,
                false,
                token.clone(),
            )));
        }
        self.shard_aware = Some((token, handles));
        Ok(())
    }

    /// Opens or closes the shard-aware listener to match the current faults.
    /// Closing waits (bounded) until the accept loop has dropped the
    /// listener, so a client connecting right after sees "connection refused".
    pub(crate) async fn apply_shard_aware_mode(&mut self) -> Result<(), ClusterError> {
        let refuse = self.shared.faults.get().shard_aware_port == ShardAwarePortMode::Refuse;
        if !refuse {
            return self.open_shard_aware_if_wanted();
        }
        if let Some((token, handles)) = self.shard_aware.take() {
            token.cancel();
            for handle in handles {
                let _ = tokio::time::timeout(STOP_TIMEOUT, handle).await;
            }
        }
        Ok(())
    }

    /// Stops the node: closes listeners and connections, waits (bounded)
    /// for every task to end.
    pub(crate) async fn stop(self) {
        let s = &self.shared;
        s.topology.set_up(s.info.index, false);
        s.cancel.cancel();
        s.tracker.close();
        let _ = tokio::time::timeout(STOP_TIMEOUT, s.tracker.wait()).await;
        // Dropping `self` removes the maintenance socket's file.
    }
}

impl Drop for NodeRuntime {
    fn drop(&mut self) {
        if let Some(path) = &self.maintenance_socket {
            // Connecting to a left-over file would be refused: remove it.
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Binds the maintenance socket at `path`, removing a stale file first.
#[cfg(unix)]
fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, ClusterError> {
    let err = |source| ClusterError::BindSocket {
        path: path.to_owned(),
        source,
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    tokio::net::UnixListener::bind(path).map_err(err)
}

#[cfg(not(unix))]
fn bind_unix(_path: &Path) -> Result<std::convert::Infallible, ClusterError> {
    Err(ClusterError::InvalidConfig(
        "the maintenance socket needs Unix-domain sockets (a Unix platform)".into(),
    ))
}

#[cfg(unix)]
fn spawn_unix_accept_loop(node: &Arc<NodeShared>, listener: tokio::net::UnixListener) {
    node.tracker.spawn(unix_accept_loop(
        node.clone(),
        listener,
        node.cancel.clone(),
    ));
}

#[cfg(not(unix))]
fn spawn_unix_accept_loop(_node: &Arc<NodeShared>, listener: std::convert::Infallible) {
    match listener {}
}

/// Accepts connections on the maintenance socket until `cancel` fires.
#[cfg(unix)]
async fn unix_accept_loop(
    node: Arc<NodeShared>,
    listener: tokio::net::UnixListener,
    cancel: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, _)) => on_unix_accept(&node, stream),
            Err(e) => {
                tracing::debug!(
                    node = node.info.index,
                    "maintenance socket accept failed: {e}"
                );
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => {}
                }
            }
        }
    }
}

/// Serves a maintenance-socket connection: a shard as on the regular port,
/// plaintext, no NAT or port faults (there is no port), and no
/// authentication (see `Conn::requires_auth`).
#[cfg(unix)]
fn on_unix_accept(node: &Arc<NodeShared>, stream: tokio::net::UnixStream) {
    let kind = PortKind::MaintenanceSocket;
    let shard = assign(&node.stats, &node.info.sharder(), kind, 0);
    let slot = ShardConnection::join(node.stats.clone(), shard, kind);
    let ctx = Arc::new(ConnCtx {
        node: node.info.clone(),
        topology: node.topology.clone(),
        stats: node.stats.clone(),
        shard: slot.shard(),
        port_kind: kind,
        // A Unix-domain peer has no IP address.
        peer: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        conn_id: node.next_conn_id.fetch_add(1, Ordering::Relaxed),
        tls: false,
        tls_session: std::sync::OnceLock::new(),
        clients: node.clients.clone(),
        prepared: node.prepared.clone(),
        state: Mutex::new(SessionState::default()),
    });
    let (rd, wr) = stream.into_split();
    let halves: (connection::ReadHalf, connection::WriteHalf) = (Box::new(rd), Box::new(wr));
    let cancel = node.cancel.child_token();
    node.tracker
        .spawn(connection::serve(node.clone(), halves, ctx, slot, cancel));
}

/// Accepts connections on one listener until `cancel` fires (which drops,
/// and so closes, the listener). On a `proxy` listener each connection
/// starts with a PROXY protocol v2 header, read before anything else.
async fn accept_loop(
    node: Arc<NodeShared>,
    listener: TcpListener,
    kind: PortKind,
    tls: bool,
    proxy: bool,
    cancel: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) if proxy => on_proxy_accept(&node, stream, peer, tls),
            Ok((stream, peer)) => on_accept(&node, stream, peer, kind, tls, false),
            Err(e) => {
                tracing::debug!(node = node.info.index, ?kind, "accept failed: {e}");
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => {}
                }
            }
        }
    }
}

/// How long a PROXY listener waits for the header.
const PROXY_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection on a PROXY v2 listener: reads the header, then serves the
/// connection as one on the shard-aware port from the header's source
/// address and port (the client's, as the balancer saw it), as ScyllaDB's
/// `native_shard_aware_transport_port_proxy_protocol` does. A malformed
/// header closes the connection.
fn on_proxy_accept(node: &Arc<NodeShared>, mut stream: TcpStream, peer: SocketAddr, tls: bool) {
    let n = node.clone();
    let cancel = node.cancel.clone();
    node.tracker.spawn(async move {
        let read = tokio::time::timeout(PROXY_HEADER_TIMEOUT, crate::proxy_v2::read(&mut stream));
        let header = tokio::select! {
            _ = cancel.cancelled() => return,
            h = read => h,
        };
        let client = match header {
            Ok(Ok(crate::proxy_v2::ProxyHeader::Proxy { source, .. })) => source,
            Ok(Ok(crate::proxy_v2::ProxyHeader::Local)) => peer,
            Ok(Err(e)) => {
                n.stats.node.protocol_errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(node = n.info.index, %peer, "bad PROXY header: {e}");
                return;
            }
            Err(_) => {
                tracing::debug!(node = n.info.index, %peer, "no PROXY header in time");
                return;
            }
        };
        on_accept(&n, stream, client, PortKind::ShardAware, tls, true);
    });
}

fn on_accept(
    node: &Arc<NodeShared>,
    stream: TcpStream,
    peer: SocketAddr,
    kind: PortKind,
    tls: bool,
    proxied: bool,
) {
    if kind == PortKind::ShardAware && !proxied && node.faults.is_silent() {
        hold_silently(node, stream);
        return;
    }
    if tls && node.faults.get().tls_handshake_stall {
        hold_silently(node, stream);
        return;
    }
    let _ = stream.set_nodelay(true);
    let (seen_port, rewritten) = match kind {
        // Behind the balancer, `peer` is the header's source: no NAT there.
        PortKind::ShardAware if proxied => (peer.port(), false),
        PortKind::ShardAware => node.faults.seen_port(peer.port()),
        // NAT changes nothing that matters on the regular port; the peer
        // address is reported as it is. (TCP listeners are never the
        // maintenance socket.)
        PortKind::Regular | PortKind::MaintenanceSocket => (peer.port(), false),
    };
    if rewritten {
        node.stats.nat_rewrites.fetch_add(1, Ordering::Relaxed);
    }
    let shard = assign(&node.stats, &node.info.sharder(), kind, seen_port);
    let slot = ShardConnection::join(node.stats.clone(), shard, kind);
    if tls {
        bump_both(&node.stats, shard as usize, |s| &s.accepted_tls);
    }
    if proxied {
        bump_both(&node.stats, shard as usize, |s| &s.accepted_proxy);
    }
    let ctx = Arc::new(ConnCtx {
        node: node.info.clone(),
        topology: node.topology.clone(),
        stats: node.stats.clone(),
        shard: slot.shard(),
        port_kind: kind,
        peer: SocketAddr::new(peer.ip(), seen_port),
        conn_id: node.next_conn_id.fetch_add(1, Ordering::Relaxed),
        tls,
        tls_session: std::sync::OnceLock::new(),
        clients: node.clients.clone(),
        prepared: node.prepared.clone(),
        state: Mutex::new(SessionState::default()),
    });
    let cancel = node.cancel.child_token();
    let acceptor = match (tls, node.tls_acceptor(shard as usize)) {
        (false, _) => None,
        (true, Some(a)) => Some(a.clone()),
        // Cannot happen: TLS listeners exist only with an acceptor.
        (true, None) => return,
    };
    let Some(acceptor) = acceptor else {
        let (rd, wr) = stream.into_split();
        let halves: (connection::ReadHalf, connection::WriteHalf) = (Box::new(rd), Box::new(wr));
        node.tracker
            .spawn(connection::serve(node.clone(), halves, ctx, slot, cancel));
        return;
    };
    let n = node.clone();
    node.tracker.spawn(async move {
        // The handshake runs before the CQL handshake; a plaintext client
        // (or one that never finishes) is logged and closed, bounded in time.
        let handshake = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream));
        let tls_stream = tokio::select! {
            _ = cancel.cancelled() => return,
            r = handshake => match r {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(node = n.info.index, %peer, "TLS handshake failed: {e}");
                    return;
                }
                Err(_) => {
                    tracing::debug!(node = n.info.index, %peer, "TLS handshake timed out");
                    return;
                }
            },
        };
        // Count the handshake and charge its CPU time inside the shard's
        // admission; a handshake shed there closes the connection.
        let idx = slot.shard() as usize;
        if let Some(session) = TlsSession::of(tls_stream.get_ref().1) {
            let _ = ctx.tls_session.set(session);
        }
        let resumed = tls_stream.get_ref().1.handshake_kind() == Some(HandshakeKind::Resumed);
        let cost = match &n.config.tls {
            Some(o) if resumed => o.resumed_handshake_cost,
            Some(o) => o.full_handshake_cost,
            None => Duration::ZERO,
        };
        if resumed {
            bump_both(&n.stats, idx, |s| &s.tls_handshakes_resumed);
        } else {
            bump_both(&n.stats, idx, |s| &s.tls_handshakes_full);
        }
        let admitted = tokio::select! {
            _ = cancel.cancelled() => return,
            r = n.admission(idx).run_tls(&n.stats, idx, cost) => r,
        };
        if admitted.is_err() {
            tracing::debug!(node = n.info.index, %peer, "TLS handshake shed by admission");
            return;
        }
        let (rd, wr) = tokio::io::split(tls_stream);
        let halves: (connection::ReadHalf, connection::WriteHalf) = (Box::new(rd), Box::new(wr));
        connection::serve(n, halves, ctx, slot, cancel).await;
    });
}

/// The silent-port fault: keep the socket open, read nothing, answer
/// nothing, until the node stops or the configured hold time passes. At most
/// `max_silent_connections` are held; extra ones are closed at once.
fn hold_silently(node: &Arc<NodeShared>, stream: TcpStream) {
    let max = node.config.max_silent_connections;
    if node.silent_now.fetch_add(1, Ordering::Relaxed) >= max {
        node.silent_now.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    node.stats.silent_held.fetch_add(1, Ordering::Relaxed);
    let hold = node.faults.silent_hold();
    let (n, cancel) = (node.clone(), node.cancel.clone());
    node.tracker.spawn(async move {
        let until = async {
            match hold {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => {}
            _ = until => {}
        }
        drop(stream);
        n.silent_now.fetch_sub(1, Ordering::Relaxed);
    });
}
