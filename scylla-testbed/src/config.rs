//! The cluster's settings and the builder that collects them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use scylla_cql::frame::ProtocolVersion;

use crate::admission::AdmissionConfig;
use crate::cql::CqlHandler;
use crate::faults::Faults;
use crate::handler::RequestHandler;
use crate::tls::TlsOptions;

/// Username and password for `PasswordAuthenticator`.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// Everything [`crate::TestCluster`] needs to start.
#[derive(Clone)]
pub struct ClusterConfig {
    /// Number of nodes (1..=254).
    pub nodes: usize,
    /// Shards per node (>= 1).
    pub shards: u16,
    /// Vnode tokens per node.
    pub vnodes: usize,
    /// Seed of host ids, tokens and random faults.
    pub seed: u64,
    /// The regular CQL port of every node (not 0: all nodes share it).
    pub port: u16,
    /// The shard-aware port of every node, or `None` for no node to have one.
    pub shard_aware_port: Option<u16>,
    /// Nodes without a shard-aware port (like ScyllaDB before 4.3).
    pub without_shard_aware_port: Vec<usize>,
    /// Default datacenter and rack of every node.
    pub datacenter: String,
    /// Default rack.
    pub rack: String,
    /// Per-node `(datacenter, rack)` overrides.
    pub locations: Vec<(usize, String, String)>,
    /// The cluster name.
    pub cluster_name: String,
    /// Tablets by default: `Some(n)` makes new NetworkTopologyStrategy
    /// keyspaces use tablets with `n` initial tablets per table (ScyllaDB's
    /// default since 2025); `None` keeps vnodes unless a keyspace asks.
    pub tablets: Option<usize>,
    /// Handshake admission.
    pub admission: AdmissionConfig,
    /// Password authentication, if on.
    pub auth: Option<Credentials>,
    /// Largest request body accepted (bigger headers get a protocol error).
    pub max_body_len: usize,
    /// The highest native protocol version served (default
    /// [`ProtocolVersion::V5`]); with [`ProtocolVersion::V4`] the cluster
    /// refuses a v5 first frame the way ScyllaDB does, so that clients
    /// negotiate down.
    pub max_protocol_version: ProtocolVersion,
    /// Most connections a silent shard-aware port holds at once per node
    /// (beyond that they are closed, to bound the test's resources).
    pub max_silent_connections: usize,
    /// Faults every node starts with.
    pub initial_faults: Vec<(usize, Faults)>,
    /// Slow nodes: `(i, extra)` delays every response of node `i` by
    /// `extra` on top of its faults' latency, for the cluster's lifetime
    /// (restarts and `set_faults` included).
    pub slow_nodes: Vec<(usize, Duration)>,
    /// A fixed `127.x.y.0/24` block instead of an allocated one.
    pub block: Option<(u8, u8)>,
    /// TLS ports and certificates, if on (off by default).
    pub tls: Option<TlsOptions>,
    /// Offer ScyllaDB's `SCYLLA_USE_METADATA_ID` (result metadata ids on
    /// protocol v4). Off by default, like ScyllaDB releases before it.
    pub use_metadata_id: bool,
    /// Offer ScyllaDB's `TABLETS_ROUTING_V2_EXPERIMENTAL` (tablet versions on
    /// EXECUTE, `tablets-routing-v2` payloads, leaders of strongly
    /// consistent tablets). Off by default, as on ScyllaDB without the
    /// `strongly-consistent-tables` experimental feature: the v1 path.
    pub tablets_routing_v2: bool,
    /// Answers the CQL requests.
    pub handler: Arc<dyn RequestHandler>,
    /// Nodes report unreachable addresses (`127.255.y.n` for `127.x.y.n`)
    /// instead of the ones they listen on, as nodes behind address
    /// translation do.
    pub advertise_unreachable: bool,
    /// Serve `system.peers_v2` (as Cassandra 4+ does); ScyllaDB has none.
    pub peers_v2: bool,
    /// Every node also listens on a Unix-domain socket, as ScyllaDB's
    /// maintenance socket (see [`TestClusterBuilder::maintenance_socket`]).
    pub maintenance_socket: bool,
    /// Client routes (see [`TestClusterBuilder::client_routes`]): the port
    /// of every node's shard-aware PROXY v2 listener (`None`: no client
    /// routes).
    pub proxy_port: Option<u16>,
    /// With TLS and client routes: the port of every node's TLS
    /// shard-aware PROXY v2 listener.
    pub proxy_tls_port: Option<u16>,
}

impl fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("nodes", &self.nodes)
            .field("shards", &self.shards)
            .field("vnodes", &self.vnodes)
            .field("seed", &self.seed)
            .field("port", &self.port)
            .field("shard_aware_port", &self.shard_aware_port)
            .field("admission", &self.admission)
            .field("auth", &self.auth)
            .field("max_protocol_version", &self.max_protocol_version)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            nodes: 1,
            shards: 1,
            vnodes: 16,
            seed: 0,
            port: 9042,
            shard_aware_port: Some(19042),
            without_shard_aware_port: Vec::new(),
            datacenter: "datacenter1".into(),
            rack: "rack1".into(),
            locations: Vec::new(),
            cluster_name: "Test Cluster".into(),
            tablets: None,
            admission: AdmissionConfig::default(),
            auth: None,
            max_body_len: 16 * 1024 * 1024,
            max_protocol_version: ProtocolVersion::V5,
            max_silent_connections: 1024,
            initial_faults: Vec::new(),
            slow_nodes: Vec::new(),
            block: None,
            tls: None,
            use_metadata_id: false,
            tablets_routing_v2: false,
            handler: Arc::new(CqlHandler::new()),
            advertise_unreachable: false,
            peers_v2: false,
            maintenance_socket: false,
            proxy_port: None,
            proxy_tls_port: None,
        }
    }
}

/// Builds a [`crate::TestCluster`]: `TestCluster::builder().nodes(3).shards(8).start().await`.
#[derive(Debug, Clone, Default)]
pub struct TestClusterBuilder {
    pub(crate) config: ClusterConfig,
}

impl TestClusterBuilder {
    /// Number of nodes (default 1, at most 254).
    #[must_use]
    pub fn nodes(mut self, n: usize) -> Self {
        self.config.nodes = n;
        self
    }

    /// Shards per node (default 1).
    #[must_use]
    pub fn shards(mut self, n: u16) -> Self {
        self.config.shards = n;
        self
    }

    /// Vnode tokens per node (default 16).
    #[must_use]
    pub fn vnodes(mut self, n: usize) -> Self {
        self.config.vnodes = n;
        self
    }

    /// Seed of host ids, tokens and random faults (default 0).
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = seed;
        self
    }

    /// The regular CQL port of every node (default 9042).
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.config.port = port;
        self
    }

    /// The shard-aware port of every node (default `Some(19042)`; `None`: no node has one).
    #[must_use]
    pub fn shard_aware_port(mut self, port: Option<u16>) -> Self {
        self.config.shard_aware_port = port;
        self
    }

    /// Node `i` has no shard-aware port (and does not advertise one).
    #[must_use]
    pub fn without_shard_aware_port(mut self, i: usize) -> Self {
        self.config.without_shard_aware_port.push(i);
        self
    }

    /// Default datacenter of every node (default "datacenter1").
    #[must_use]
    pub fn datacenter(mut self, dc: impl Into<String>) -> Self {
        self.config.datacenter = dc.into();
        self
    }

    /// Default rack of every node (default "rack1").
    #[must_use]
    pub fn rack(mut self, rack: impl Into<String>) -> Self {
        self.config.rack = rack.into();
        self
    }

    /// Datacenter and rack of node `i`.
    #[must_use]
    pub fn node_location(
        mut self,
        i: usize,
        datacenter: impl Into<String>,
        rack: impl Into<String>,
    ) -> Self {
        self.config
            .locations
            .push((i, datacenter.into(), rack.into()));
        self
    }

    /// The cluster name (default "Test Cluster").
    #[must_use]
    pub fn cluster_name(mut self, name: impl Into<String>) -> Self {
        self.config.cluster_name = name.into();
        self
    }

    /// New NetworkTopologyStrategy keyspaces use tablets, `initial` per
    /// table (rounded up to a power of two; 0 = about one per shard of the
    /// cluster), unless created with `AND tablets = {'enabled': false}`.
    #[must_use]
    pub fn tablets(mut self, initial: usize) -> Self {
        self.config.tablets = Some(initial);
        self
    }

    /// Handshake admission settings.
    #[must_use]
    pub fn admission(mut self, admission: AdmissionConfig) -> Self {
        self.config.admission = admission;
        self
    }

    /// Requires `PasswordAuthenticator` credentials.
    #[must_use]
    pub fn password_auth(
        mut self,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        self.config.auth = Some(Credentials {
            username: username.into(),
            password: password.into(),
        });
        self
    }

    /// Largest request body accepted (default 16 MiB).
    #[must_use]
    pub fn max_body_len(mut self, n: usize) -> Self {
        self.config.max_body_len = n;
        self
    }

    /// The highest native protocol version the cluster serves (default
    /// [`ProtocolVersion::V5`], like Cassandra 4 and 5). With
    /// [`ProtocolVersion::V4`] the cluster behaves like ScyllaDB: a first
    /// frame of version 5 gets a protocol error ("Invalid or unsupported
    /// protocol version (5); ...") in a v4 frame, the connection is closed,
    /// and SUPPORTED lists only `4/v4`.
    #[must_use]
    pub fn max_protocol_version(mut self, version: ProtocolVersion) -> Self {
        self.config.max_protocol_version = version;
        self
    }

    /// Most connections a silent shard-aware port holds at once per node (default 1024).
    #[must_use]
    pub fn max_silent_connections(mut self, n: usize) -> Self {
        self.config.max_silent_connections = n;
        self
    }

    /// Faults node `i` starts with.
    #[must_use]
    pub fn faults(mut self, i: usize, faults: Faults) -> Self {
        self.config.initial_faults.push((i, faults));
        self
    }

    /// Makes node `i` slow: every response waits `extra` more (added to the
    /// latency of its faults; see [`ClusterConfig::slow_nodes`]).
    #[must_use]
    pub fn slow_node(mut self, i: usize, extra: Duration) -> Self {
        self.config.slow_nodes.push((i, extra));
        self
    }

    /// Uses the fixed block `127.x.y.0/24` (x >= 1) instead of allocating one.
    #[must_use]
    pub fn address_block(mut self, x: u8, y: u8) -> Self {
        self.config.block = Some((x, y));
        self
    }

    /// The handler of CQL requests (default: a fresh [`CqlHandler`], the
    /// in-memory CQL server; [`crate::NotImplementedHandler`] answers everything with an error).
    #[must_use]
    pub fn handler(mut self, handler: Arc<dyn RequestHandler>) -> Self {
        self.config.handler = handler;
        self
    }

    /// Serves TLS as well, as ScyllaDB does with client encryption on: each
    /// node also listens on `options.port` (regular TLS port) and
    /// `options.shard_aware_port`; certificates are made at start (see
    /// [`crate::TestCluster::tls_ca_pem`]). The plain ports stay open.
    #[must_use]
    pub fn tls(mut self, options: TlsOptions) -> Self {
        self.config.tls = Some(options);
        self
    }

    /// Offer `SCYLLA_USE_METADATA_ID` (result metadata ids on v4; default
    /// off). A connection whose STARTUP asks for it gets ids in PREPARED,
    /// sends one in EXECUTE, and gets `Metadata_changed` rows when it is stale.
    #[must_use]
    pub fn use_metadata_id(mut self, on: bool) -> Self {
        self.config.use_metadata_id = on;
        self
    }

    /// Offer `TABLETS_ROUTING_V2_EXPERIMENTAL` (default off: v1 only). A
    /// connection whose STARTUP asks for it sends a tablet version block
    /// with every EXECUTE and gets `tablets-routing-v2` payloads when the
    /// block is stale.
    #[must_use]
    pub fn tablets_routing_v2(mut self, on: bool) -> Self {
        self.config.tablets_routing_v2 = on;
        self
    }

    /// Nodes report `127.255.y.n` (where nothing listens) instead of the
    /// `127.x.y.n` they listen on, in `system.local` and `system.peers(_v2)`,
    /// as nodes behind a NAT or proxy report addresses clients cannot reach
    /// (see [`crate::topology::advertised_address`]). A driver reaches the
    /// other nodes only through an address translator; without one its
    /// connections are refused on loopback.
    #[must_use]
    pub fn advertise_unreachable(mut self, on: bool) -> Self {
        self.config.advertise_unreachable = on;
        self
    }

    /// Serve `system.peers_v2` (as Cassandra 4+ does; default off, as
    /// ScyllaDB, which answers it with "unconfigured table").
    #[must_use]
    pub fn peers_v2(mut self, on: bool) -> Self {
        self.config.peers_v2 = on;
        self
    }

    /// Every node also listens on a Unix-domain socket (default off), as
    /// ScyllaDB's maintenance socket (`maintenance_socket` in scylla.yaml):
    /// CQL served like on the regular port (the node picks the shard, the
    /// least loaded), but without authentication even when the cluster
    /// requires it. The sockets live in a temporary directory of the
    /// cluster's ([`crate::TestCluster::maintenance_socket`] gives node
    /// `i`'s path); a node's socket file is removed when the node stops, the
    /// directory when the cluster is dropped. Connections accepted there are
    /// counted in `accepted_maintenance_socket`. Unix only: elsewhere
    /// `start` fails with [`crate::ClusterError::InvalidConfig`].
    #[must_use]
    pub fn maintenance_socket(mut self, on: bool) -> Self {
        self.config.maintenance_socket = on;
        self
    }

    /// Client routes (default off), as a ScyllaDB cluster behind a private
    /// link: every node also listens on shard-aware PROXY protocol v2 ports
    /// (29042, and 29142 with TLS: ScyllaDB's
    /// `native_shard_aware_transport_port_proxy_protocol` and its `_ssl`
    /// twin), the cluster starts one load-balancer front per node
    /// ([`crate::routes::RouteFront`]) and publishes them in
    /// `system.client_routes` under
    /// [`DEFAULT_CONNECTION_ID`](crate::routes::DEFAULT_CONNECTION_ID).
    /// [`crate::TestCluster::set_client_route`] moves a node's route while
    /// clients run. Combine with [`Self::advertise_unreachable`] to make the
    /// routes the only way in.
    #[must_use]
    pub fn client_routes(mut self, on: bool) -> Self {
        self.config.proxy_port = on.then_some(29042);
        self.config.proxy_tls_port = on.then_some(29142);
        self
    }

    /// The collected settings.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The collected settings, taken.
    pub(crate) fn into_config(self) -> ClusterConfig {
        self.config
    }
}
