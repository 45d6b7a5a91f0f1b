//! The [`TestCluster`] handle: start, stop and restart nodes, set faults,
//! push events, read stats, shut down.
//!
//! Every task the cluster spawns hangs off one cancellation token (cluster
//! -> node -> connection). Dropping the handle cancels it, so no task
//! outlives the cluster; [`TestCluster::shutdown`] also waits until they
//! have ended.

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU16;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use scylla_cql::frame::response::event::{ClientRoutesChangeType, Event, TopologyChangeType};
use scylla_cql::frame::{MessageBody, ProtocolVersion};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{ClusterConfig, TestClusterBuilder};
use crate::error::ClusterError;
use crate::events::EventKind;
use crate::faults::{FaultState, Faults};
use crate::node::NodeRuntime;
use crate::node_shared::NodeShared;
use crate::routes::{ClientRoute, RouteFront, RouteFrontStats, DEFAULT_CONNECTION_ID};
use crate::stats::{ClusterStats, NodeStats, NodeStatsSnapshot};
use crate::tablets::{TabletError, TabletInfo, TabletMap, TabletRegistry};
use crate::tls::TlsMaterial;
use crate::topology::{next_block, node_address, node_identity, NodeInfo, Topology};

/// How many address blocks `start` tries when ports are taken.
const BLOCK_ATTEMPTS: usize = 32;

#[derive(Debug)]
struct NodeSlot {
    faults: Arc<FaultState>,
    /// The running lifetime, if the node is up; serialises control operations.
    runtime: tokio::sync::Mutex<Option<NodeRuntime>>,
    /// The latest lifetime's shared state (kept after a stop, for stats).
    last: Mutex<Option<Arc<NodeShared>>>,
}

/// A running in-process cluster. Dropping it stops every node.
#[derive(Debug)]
pub struct TestCluster {
    topology: Arc<Topology>,
    config: Arc<ClusterConfig>,
    cancel: CancellationToken,
    nodes: Vec<NodeSlot>,
    /// Certificates and the TLS server side, when TLS is on.
    tls: Option<Arc<TlsMaterial>>,
    /// The directory of the nodes' maintenance sockets, when they have one.
    /// Declared last: removed after the nodes' tasks were told to stop.
    sockets: Option<SocketDir>,
    /// Client routes: every load-balancer front started (the current one of
    /// each node and those a route moved away from, still running).
    fronts: Mutex<Vec<Arc<RouteFront>>>,
    /// The fronts' tasks.
    front_tasks: TaskTracker,
    /// The last octet of the next front's address (counts down from 254).
    next_front: AtomicU8,
}

/// A temporary directory holding each node's maintenance socket at
/// `node<i>/cql.m` (ScyllaDB's `<workdir>/cql.m`); removed when dropped.
#[derive(Debug)]
struct SocketDir(PathBuf);

impl SocketDir {
    fn create(nodes: usize) -> Result<SocketDir, ClusterError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "scylla-testbed-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let made = SocketDir(dir);
        for i in 0..nodes {
            std::fs::create_dir_all(made.0.join(format!("node{i}"))).map_err(|source| {
                ClusterError::BindSocket {
                    path: made.0.clone(),
                    source,
                }
            })?;
        }
        Ok(made)
    }

    fn path(&self, i: usize) -> PathBuf {
        self.0.join(format!("node{i}")).join("cql.m")
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn validate(c: &ClusterConfig) -> Result<NonZeroU16, ClusterError> {
    let bad = |m: &str| Err(ClusterError::InvalidConfig(m.to_owned()));
    if c.nodes == 0 || c.nodes > 254 {
        return bad("nodes must be in 1..=254 (one 127.x.y.0/24 block)");
    }
    let Some(shards) = NonZeroU16::new(c.shards) else {
        return bad("shards must be at least 1");
    };
    if c.vnodes == 0 {
        return bad("vnodes must be at least 1");
    }
    if c.port == 0 || c.shard_aware_port == Some(0) {
        return bad("port 0 is not allowed: every node must listen on the same, known port");
    }
    if c.shard_aware_port == Some(c.port) {
        return bad("the shard-aware port must differ from the regular port");
    }
    if c.block.is_some_and(|(x, _)| x == 0) {
        return bad("address block 127.0.y.0/24 is reserved; use x >= 1");
    }
    if c.block.is_some_and(|(x, _)| x == 255) {
        return bad(
            "address blocks 127.255.y.0/24 are reserved for advertised addresses; use x <= 254",
        );
    }
    let out_of_range = c
        .without_shard_aware_port
        .iter()
        .chain(c.locations.iter().map(|(i, _, _)| i))
        .chain(c.initial_faults.iter().map(|(i, _)| i))
        .chain(c.slow_nodes.iter().map(|(i, _)| i))
        .any(|&i| i >= c.nodes);
    if out_of_range {
        return bad("a per-node setting names a node index out of range");
    }
    Ok(shards)
}

fn node_infos(c: &ClusterConfig, shards: NonZeroU16, block: (u8, u8)) -> Vec<NodeInfo> {
    let mut taken = HashSet::new();
    (0..c.nodes)
        .map(|i| {
            let (host_id, tokens) = node_identity(c.seed, i, c.vnodes, &mut taken);
            let (dc, rack) = c
                .locations
                .iter()
                .rev()
                .find(|(n, _, _)| *n == i)
                .map(|(_, d, r)| (d.clone(), r.clone()))
                .unwrap_or_else(|| (c.datacenter.clone(), c.rack.clone()));
            NodeInfo {
                index: i,
                address: node_address(block, i),
                advertised: if c.advertise_unreachable {
                    crate::topology::advertised_address(node_address(block, i))
                } else {
                    node_address(block, i)
                },
                port: c.port,
                shard_aware_port: c
                    .shard_aware_port
                    .filter(|_| !c.without_shard_aware_port.contains(&i)),
                host_id,
                datacenter: dc,
                rack,
                tokens,
                shards,
            }
        })
        .collect()
}

impl TestCluster {
    /// A builder with the defaults (1 node, 1 shard, 16 vnodes, ports 9042/19042).
    pub fn builder() -> TestClusterBuilder {
        TestClusterBuilder::default()
    }

    pub(crate) async fn start(config: ClusterConfig) -> Result<TestCluster, ClusterError> {
        let shards = validate(&config)?;
        let config = Arc::new(config);
        let attempts = if config.block.is_some() {
            1
        } else {
            BLOCK_ATTEMPTS
        };
        let mut last_err = None;
        let mut sockets = if config.maintenance_socket {
            Some(SocketDir::create(config.nodes)?)
        } else {
            None
        };
        for _ in 0..attempts {
            let block = config.block.unwrap_or_else(next_block);
            let infos = node_infos(&config, shards, block);
            let tls = match &config.tls {
                Some(o) => {
                    let ips: Vec<_> = infos.iter().map(|n| n.address).collect();
                    let m = TlsMaterial::generate(o.clone(), &ips)
                        .map_err(|e| ClusterError::InvalidConfig(e.to_string()))?;
                    Some(Arc::new(m))
                }
                None => None,
            };
            let topology = Arc::new(
                Topology::new(infos, config.cluster_name.clone())
                    .with_tablets(TabletRegistry::new(config.seed, config.tablets))
                    .with_peers_v2(config.peers_v2),
            );
            let mut cluster = TestCluster {
                nodes: (0..config.nodes)
                    .map(|i| {
                        let faults = Arc::new(FaultState::new(config.seed ^ (i as u64) << 32));
                        if let Some((_, f)) =
                            config.initial_faults.iter().rev().find(|(n, _)| *n == i)
                        {
                            faults.set(f);
                        }
                        let slow = config.slow_nodes.iter().filter(|(n, _)| *n == i);
                        faults.set_extra_latency(slow.map(|(_, d)| *d).sum());
                        NodeSlot {
                            faults,
                            runtime: tokio::sync::Mutex::new(None),
                            last: Mutex::new(None),
                        }
                    })
                    .collect(),
                topology,
                config: config.clone(),
                cancel: CancellationToken::new(),
                tls,
                sockets: sockets.take(),
                fronts: Mutex::new(Vec::new()),
                front_tasks: TaskTracker::new(),
                next_front: AtomicU8::new(254),
            };
            let mut result = Ok(());
            for i in 0..config.nodes {
                result = cluster.start_node(i).await;
                if result.is_err() {
                    break;
                }
            }
            if result.is_ok() && config.proxy_port.is_some() {
                for i in 0..config.nodes {
                    let ip = cluster.next_route_address()?;
                    if let Err(e) = cluster.set_client_route(i, ip).await {
                        result = Err(e);
                        break;
                    }
                }
            }
            match result {
                Ok(()) => return Ok(cluster),
                Err(ClusterError::Bind { addr, source })
                    if matches!(
                        source.kind(),
                        io::ErrorKind::AddrInUse | io::ErrorKind::AddrNotAvailable
                    ) =>
                {
                    tracing::debug!("{addr} is taken ({source}); trying another address block");
                    sockets = cluster.take_sockets();
                    cluster.shutdown().await;
                    last_err = Some(ClusterError::Bind { addr, source });
                }
                Err(e) => {
                    cluster.shutdown().await;
                    return Err(e);
                }
            }
        }
        Err(last_err.unwrap_or_else(|| {
            ClusterError::InvalidConfig("no address block could be bound".into())
        }))
    }

    /// Hands the socket directory to the next attempt of `start`.
    fn take_sockets(&mut self) -> Option<SocketDir> {
        self.sockets.take()
    }

    /// The path of node `i`'s maintenance socket (a Unix-domain socket
    /// served like its regular port, without authentication), when the
    /// cluster was built with
    /// [`TestClusterBuilder::maintenance_socket`]; `None` otherwise or for
    /// a node that does not exist. The file exists while the node runs.
    pub fn maintenance_socket(&self, i: usize) -> Option<PathBuf> {
        if i >= self.nodes.len() {
            return None;
        }
        self.sockets.as_ref().map(|d| d.path(i))
    }

    /// The directory holding the maintenance sockets (removed when the
    /// cluster is dropped), if they are on.
    pub fn maintenance_socket_dir(&self) -> Option<&Path> {
        self.sockets.as_ref().map(|d| d.0.as_path())
    }

    fn slot(&self, i: usize) -> Result<&NodeSlot, ClusterError> {
        self.nodes.get(i).ok_or(ClusterError::NoSuchNode(i))
    }

    /// Starts node `i` if it is stopped: a fresh lifetime (no connections,
    /// zeroed stats) with the same address, ports, tokens and host id.
    pub async fn start_node(&self, i: usize) -> Result<(), ClusterError> {
        let slot = self.slot(i)?;
        let info = self
            .topology
            .node(i)
            .cloned()
            .ok_or(ClusterError::NoSuchNode(i))?;
        let mut rt = slot.runtime.lock().await;
        if rt.is_some() {
            return Ok(());
        }
        let started = NodeRuntime::start(
            info,
            self.topology.clone(),
            slot.faults.clone(),
            self.config.clone(),
            &self.cancel,
            self.tls.clone(),
            self.maintenance_socket(i),
        )?;
        if let Ok(mut last) = slot.last.lock() {
            *last = Some(started.shared.clone());
        }
        *rt = Some(started);
        Ok(())
    }

    /// Stops node `i`: closes its listeners, drops all its connections, and
    /// waits (bounded) for its tasks to end. A stopped node stays stopped.
    pub async fn stop_node(&self, i: usize) -> Result<(), ClusterError> {
        let slot = self.slot(i)?;
        let mut rt = slot.runtime.lock().await;
        if let Some(r) = rt.take() {
            r.stop().await;
        }
        Ok(())
    }

    /// Decommissions node `i`: it leaves the other nodes' `system.peers`
    /// (and `peers_v2`), stops, and the others announce `REMOVED_NODE` to
    /// the connections registered for topology changes.
    pub async fn decommission_node(&self, i: usize) -> Result<(), ClusterError> {
        let addr = self.node(i).ok_or(ClusterError::NoSuchNode(i))?.cql_addr();
        self.topology.set_member(i, false);
        self.stop_node(i).await?;
        self.announce_topology(TopologyChangeType::RemovedNode, addr);
        Ok(())
    }

    /// Brings a decommissioned node `i` back: it starts, joins the other
    /// nodes' `system.peers`, and they announce `NEW_NODE`.
    pub async fn join_node(&self, i: usize) -> Result<(), ClusterError> {
        let addr = self.node(i).ok_or(ClusterError::NoSuchNode(i))?.cql_addr();
        self.start_node(i).await?;
        self.topology.set_member(i, true);
        self.announce_topology(TopologyChangeType::NewNode, addr);
        Ok(())
    }

    fn announce_topology(&self, change: TopologyChangeType, addr: SocketAddr) {
        let mut body = BytesMut::new();
        let event = Event::TopologyChange { change, addr };
        match event.encode_body(&mut body, ProtocolVersion::V4) {
            Ok(()) => {
                self.push_event(EventKind::TopologyChange, body.freeze());
            }
            Err(e) => tracing::warn!(error = %e, "cannot encode a TOPOLOGY_CHANGE event"),
        }
    }

    /// A loopback address of this cluster's block where no node listens,
    /// for a route front (`127.x.y.254` down; fails when it would reach the
    /// nodes' addresses).
    pub fn next_route_address(&self) -> Result<IpAddr, ClusterError> {
        let octet = self.next_front.fetch_sub(1, Ordering::Relaxed);
        let first = self
            .node(0)
            .map(|n| n.address)
            .ok_or(ClusterError::NoSuchNode(0))?;
        match first {
            IpAddr::V4(a) if usize::from(octet) > self.nodes.len() + 1 => {
                let [x, y, z, _] = a.octets();
                Ok(IpAddr::V4(Ipv4Addr::new(x, y, z, octet)))
            }
            _ => Err(ClusterError::InvalidConfig(
                "no loopback address left for another route front".into(),
            )),
        }
    }

    /// Moves node `i`'s client route to a new load-balancer front listening
    /// on `ip` (ephemeral ports; plain, and TLS with TLS on): the front
    /// starts, the node's row of `system.client_routes` (connection id
    /// [`DEFAULT_CONNECTION_ID`]) is updated, and `CLIENT_ROUTES_CHANGE` is
    /// pushed to every connection registered for it. The previous front
    /// keeps running (its connections keep working; see
    /// [`TestCluster::route_fronts`] for what it accepts afterwards).
    /// Needs [`TestClusterBuilder::client_routes`].
    pub async fn set_client_route(
        &self,
        i: usize,
        ip: IpAddr,
    ) -> Result<RouteFrontStats, ClusterError> {
        let info = self.node(i).ok_or(ClusterError::NoSuchNode(i))?;
        let Some(port) = self.config.proxy_port else {
            return Err(ClusterError::InvalidConfig(
                "client routes are off: build the cluster with client_routes(true)".into(),
            ));
        };
        let target = SocketAddr::new(info.address, port);
        let tls_target = self
            .config
            .proxy_tls_port
            .filter(|_| self.tls.is_some())
            .map(|p| SocketAddr::new(info.address, p));
        let front =
            RouteFront::start(ip, i, target, tls_target, &self.cancel, &self.front_tasks).await?;
        self.topology.client_routes().upsert(ClientRoute {
            connection_id: DEFAULT_CONNECTION_ID.to_owned(),
            host_id: info.host_id,
            address: ip.to_string(),
            port: front.address().port(),
            tls_port: front.tls_address().map(|a| a.port()),
        });
        let stats = front.stats();
        if let Ok(mut f) = self.fronts.lock() {
            f.push(front);
        }
        let event = Event::ClientRoutesChange {
            change: ClientRoutesChangeType::UpdateNodes,
            connection_ids: vec![DEFAULT_CONNECTION_ID.to_owned()],
            host_ids: vec![info.host_id.to_string()],
        };
        let mut body = BytesMut::new();
        match event.encode_body(&mut body, ProtocolVersion::V4) {
            Ok(()) => {
                self.push_event(EventKind::ClientRoutesChange, body.freeze());
            }
            Err(e) => tracing::warn!(error = %e, "cannot encode a CLIENT_ROUTES_CHANGE event"),
        }
        Ok(stats)
    }

    /// Every route front started, in start order, with its counters.
    pub fn route_fronts(&self) -> Vec<RouteFrontStats> {
        self.fronts
            .lock()
            .map(|f| f.iter().map(|f| f.stats()).collect())
            .unwrap_or_default()
    }

    /// Node `i`'s current route front (the latest started for it).
    pub fn route_front(&self, i: usize) -> Option<RouteFrontStats> {
        self.route_fronts().into_iter().rev().find(|f| f.node == i)
    }

    /// Stops then starts node `i`.
    pub async fn restart_node(&self, i: usize) -> Result<(), ClusterError> {
        self.stop_node(i).await?;
        self.start_node(i).await
    }

    /// Sets node `i`'s faults (replacing the previous ones). They apply to new
    /// connections (NAT, silent port) and to every response from now on
    /// (latency); a refusing shard-aware port is closed before this returns.
    /// Faults survive restarts.
    pub async fn set_faults(&self, i: usize, faults: Faults) -> Result<(), ClusterError> {
        let slot = self.slot(i)?;
        let mut rt = slot.runtime.lock().await;
        slot.faults.set(&faults);
        if let Some(r) = rt.as_mut() {
            r.apply_shard_aware_mode().await?;
        }
        Ok(())
    }

    /// Node `i`'s current faults.
    pub fn faults(&self, i: usize) -> Result<Faults, ClusterError> {
        Ok(self.slot(i)?.faults.get())
    }

    /// Sends an EVENT frame (stream -1) with the already-encoded `body` to
    /// every connection of every running node that REGISTERed for `kind`.
    /// Returns the number of connections that got it.
    pub fn push_event(&self, kind: EventKind, body: Bytes) -> usize {
        (0..self.nodes.len())
            .map(|i| self.push_event_from(i, kind, body.clone()))
            .sum()
    }

    /// Like [`TestCluster::push_event`], from node `i` only (0 if it is down
    /// or out of range).
    pub fn push_event_from(&self, i: usize, kind: EventKind, body: Bytes) -> usize {
        if !self.topology.is_up(i) {
            return 0;
        }
        self.last_shared(i)
            .map_or(0, |s| s.events.push(kind, &body))
    }

    fn last_shared(&self, i: usize) -> Option<Arc<NodeShared>> {
        self.nodes
            .get(i)
            .and_then(|s| s.last.lock().ok().and_then(|l| l.clone()))
    }

    /// A snapshot of every node's counters (a stopped node shows its last lifetime's).
    pub fn stats(&self) -> ClusterStats {
        ClusterStats {
            nodes: (0..self.nodes.len())
                .map(|i| {
                    self.node_stats(i)
                        .unwrap_or_else(|| NodeStats::new(self.config.shards).snapshot(false))
                })
                .collect(),
        }
    }

    /// A snapshot of node `i`'s counters.
    pub fn node_stats(&self, i: usize) -> Option<NodeStatsSnapshot> {
        self.last_shared(i)
            .map(|s| s.stats.snapshot(self.topology.is_up(i)))
    }

    /// The identity and up/down state of every node.
    pub fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    /// Every node's identity, indexed by node.
    pub fn nodes(&self) -> &[NodeInfo] {
        self.topology.nodes()
    }

    /// Node `i`'s identity.
    pub fn node(&self, i: usize) -> Option<&NodeInfo> {
        self.topology.node(i)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a cluster has at least one node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every node's regular CQL endpoint (contact points).
    pub fn cql_addrs(&self) -> Vec<SocketAddr> {
        self.nodes().iter().map(NodeInfo::cql_addr).collect()
    }

    /// The regular CQL port (the same on every node).
    pub fn port(&self) -> u16 {
        self.config.port
    }

    /// The shard-aware port of nodes that have one.
    pub fn shard_aware_port(&self) -> Option<u16> {
        self.config.shard_aware_port
    }

    /// The CA certificate (PEM) that signed the servers' certificates, when TLS is on.
    pub fn tls_ca_pem(&self) -> Option<&str> {
        self.tls.as_deref().map(|t| t.ca_pem.as_str())
    }

    /// A client certificate (PEM) signed by the CA, for mutual TLS.
    pub fn tls_client_cert_pem(&self) -> Option<&str> {
        self.tls.as_deref().map(|t| t.client_cert_pem.as_str())
    }

    /// The private key (PKCS#8 PEM) of [`TestCluster::tls_client_cert_pem`].
    pub fn tls_client_key_pem(&self) -> Option<&str> {
        self.tls.as_deref().map(|t| t.client_key_pem.as_str())
    }

    /// The regular TLS port of every node, when TLS is on.
    pub fn tls_port(&self) -> Option<u16> {
        self.tls.as_deref().map(|t| t.options.port)
    }

    /// The TLS shard-aware port, when TLS is on and nodes have one.
    pub fn tls_shard_aware_port(&self) -> Option<u16> {
        self.tls.as_deref().and_then(|t| t.options.shard_aware_port)
    }

    /// Every node's regular TLS address (empty without TLS).
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        match self.tls_port() {
            Some(p) => self
                .topology
                .nodes()
                .iter()
                .map(|n| SocketAddr::new(n.address, p))
                .collect(),
            None => Vec::new(),
        }
    }

    /// Shards per node.
    pub fn shards(&self) -> u16 {
        self.config.shards
    }

    /// The configuration the cluster was started with.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The tablets of `keyspace.table` in token order, replicas as (host id,
    /// shard), or `None` if it is not a tablet table.
    pub fn tablets(&self, keyspace: &str, table: &str) -> Option<Vec<TabletInfo>> {
        let map = self.topology.tablets().map(keyspace, table)?;
        Some(
            map.tablets()
                .iter()
                .map(|t| TabletInfo {
                    first_token: t.first_token,
                    last_token: t.last_token,
                    replicas: t
                        .replicas
                        .iter()
                        .filter_map(|&(n, s)| Some((self.topology.node(n)?.host_id, s)))
                        .collect(),
                })
                .collect(),
        )
    }

    /// Moves replica `replica` of tablet `tablet` (its index in token order)
    /// of `keyspace.table` to `(node index, shard)`, at once (a real
    /// migration streams first; the data here is shared by every node, so
    /// only the routing changes). Drivers learn the move from the
    /// `tablets-routing-v1` payload of their next misrouted request; no
    /// event is sent, as on ScyllaDB.
    pub fn migrate_tablet(
        &self,
        keyspace: &str,
        table: &str,
        tablet: usize,
        replica: usize,
        to: (usize, u16),
    ) -> Result<(), TabletError> {
        let nodes = self.topology.placement_nodes();
        self.topology
            .tablets()
            .update(keyspace, table, |m| m.migrate(tablet, replica, to, &nodes))?;
        tracing::info!(
            keyspace,
            table,
            tablet,
            replica,
            node = to.0,
            shard = to.1,
            "tablet migrated"
        );
        Ok(())
    }

    /// Makes replica `replica` of tablet `tablet` (its index in token order)
    /// of the strongly consistent table `keyspace.table` the Raft leader of
    /// that tablet, at once (a leader election). The tablet's version
    /// changes; drivers on `TABLETS_ROUTING_V2_EXPERIMENTAL` connections
    /// learn the new leader from the `tablets-routing-v2` payload of their
    /// next request whose version block no longer matches. Requests that
    /// reach another node count as `requests_non_leader`.
    pub fn set_tablet_leader(
        &self,
        keyspace: &str,
        table: &str,
        tablet: usize,
        replica: usize,
    ) -> Result<(), TabletError> {
        self.topology
            .tablets()
            .update(keyspace, table, |m| m.set_leader(tablet, replica))?;
        tracing::info!(keyspace, table, tablet, replica, "tablet leader moved");
        Ok(())
    }

    /// The leader of each tablet of the strongly consistent table
    /// `keyspace.table`, in token order, as (host id, shard); `None` if it
    /// is not a strongly consistent tablet table.
    pub fn tablet_leaders(&self, keyspace: &str, table: &str) -> Option<Vec<(uuid::Uuid, u16)>> {
        let map = self.topology.tablets().map(keyspace, table)?;
        if !map.strongly_consistent() {
            return None;
        }
        Some(
            map.tablets()
                .iter()
                .filter_map(|t| {
                    let (n, s) = *t.replicas.get(t.leader)?;
                    Some((self.topology.node(n)?.host_id, s))
                })
                .collect(),
        )
    }

    /// Splits every tablet of `keyspace.table` in two (as ScyllaDB's resize
    /// does when tables grow); the halves keep the replicas.
    pub fn split_tablets(&self, keyspace: &str, table: &str) -> Result<(), TabletError> {
        self.topology
            .tablets()
            .update(keyspace, table, TabletMap::split)?;
        tracing::info!(keyspace, table, "tablets split");
        Ok(())
    }

    /// Stops every node and waits (bounded) for all tasks to end.
    pub async fn shutdown(self) {
        for i in 0..self.nodes.len() {
            let _ = self.stop_node(i).await;
        }
        self.cancel.cancel();
        self.front_tasks.close();
        let _ =
            tokio::time::timeout(std::time::Duration::from_secs(5), self.front_tasks.wait()).await;
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        // Every task's token descends from this one: they all end at their
        // next poll, closing listeners and sockets as they go.
        self.cancel.cancel();
        for i in 0..self.topology.nodes().len() {
            self.topology.set_up(i, false);
        }
    }
}

impl TestClusterBuilder {
    /// Binds every node's listeners and starts serving.
    pub async fn start(self) -> Result<TestCluster, ClusterError> {
        TestCluster::start(self.into_config()).await
    }
}
