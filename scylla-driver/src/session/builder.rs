//! [`SessionBuilder`]: everything a session can be configured with, and
//! `build()`, which returns once the control connection and a first
//! connection to every node are up.

use std::collections::HashMap;
use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::Arc;
use std::time::Duration;

use scylla_cql::compression::Compression;
use scylla_cql::frame::ProtocolVersion;
use scylla_cql::Consistency;

use super::trace::TraceFetchOptions;
use super::Session;
use crate::cluster::control::{ControlHandle, ControlOptions};
use crate::cluster::host_filter::HostFilter;
use crate::cluster::runtime::Cluster;
use crate::cluster::translation::AddressTranslator;
use crate::cluster::TabletWarmup;
use crate::connection::{AuthenticatorProvider, Coalescing, PlainTextAuthenticator};
use crate::error::NewSessionError;
use crate::metrics::Metrics;
use crate::policy::retry::{DefaultRetryPolicy, RetryPolicy};
use crate::policy::speculative::SpeculativeExecution;
use crate::pool::backoff::ReconnectPolicy;
use crate::pool::shard_port::PortRange;
use crate::pool::{PoolConfig, PoolSize};
use crate::statement::{ExecutionProfile, ExecutionProfileHandle};

/// A session's configuration.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionConfig {
    /// Addresses (`host:port`) of nodes to discover the cluster from.
    pub contact_points: Vec<String>,
    /// Keyspace to use.
    pub keyspace: Option<String>,
    /// Pool and connection settings (credentials, compression, coalescing,
    /// timeouts, shard-aware port, local port range, reconnect policy).
    /// Its type is internal: set these through the [`SessionBuilder`]
    /// methods (public only with the feature `unstable-internals`, for the
    /// project's own tests).
    #[cfg(feature = "unstable-internals")]
    #[doc(hidden)]
    pub pool: PoolConfig,
    #[cfg(not(feature = "unstable-internals"))]
    pub(crate) pool: PoolConfig,
    /// Default consistency.
    pub consistency: Consistency,
    /// Default timeout of a request (all of its attempts; for a
    /// [`RowStream`](crate::session::RowStream), all of its pages, see
    /// `RowStream::with_deadline`).
    pub request_timeout: Duration,
    /// Default page size of paged execution.
    pub page_size: i32,
    /// The datacenter to prefer.
    pub local_datacenter: Option<String>,
    /// The rack to prefer inside the local datacenter (needs
    /// `local_datacenter`): its replicas first, then the rest of the local
    /// datacenter.
    pub local_rack: Option<String>,
    /// Put the less loaded, faster of two replicas first (requests in
    /// flight, latency average), so slow replicas get fewer requests without
    /// being starved. Default: on.
    pub latency_aware_routing: bool,
    /// What to do when an attempt fails.
    pub retry_policy: Arc<dyn RetryPolicy>,
    /// Speculative execution of idempotent statements.
    pub speculative: Option<SpeculativeExecution>,
    /// Bound on waiting for schema agreement after DDL.
    pub schema_agreement_timeout: Duration,
    /// Whether a statement that changes the schema waits, before it
    /// returns, until every node agrees on the new schema version
    /// (`Session::await_schema_agreement`). Default: on.
    pub auto_await_schema_agreement: bool,
    /// How [`Session::get_tracing_info`] reads traces.
    pub tracing_info_fetch: TraceFetchOptions,
    /// Most statements the prepared-statement cache keeps (`Session::prepare`
    /// and the `query_*` methods with values go through it); the least
    /// recently used is evicted. 0 disables caching.
    pub prepared_cache_size: usize,
    /// How long `build` waits for a first connection to every node.
    pub initial_connect_timeout: Duration,
    /// The control connection's settings. Its type is internal: set the
    /// address translator and host filter through the [`SessionBuilder`]
    /// (public only with the feature `unstable-internals`).
    #[cfg(feature = "unstable-internals")]
    #[doc(hidden)]
    pub control: ControlOptions,
    #[cfg(not(feature = "unstable-internals"))]
    pub(crate) control: ControlOptions,
    /// Ask for rows without their column metadata when executing prepared
    /// statements, decoding them with the columns learned at PREPARE time.
    /// Saves bytes per result, but is only safe if the tables' columns never
    /// change while the session runs: protocol v4 cannot tell that a
    /// `SELECT *` gained a column after `ALTER TABLE`. Default: off.
    pub skip_result_metadata: bool,
    /// Which tablets to read from `system.tablets` ahead of requests
    /// (default: the keyspaces the session uses).
    pub tablet_warmup: TabletWarmup,
    /// The session's default execution profile: its set fields override
    /// the defaults above for every statement (see
    /// [`statement::profile`](crate::statement::profile)).
    pub default_profile: ExecutionProfile,
    /// The session's default execution profile as a handle, read per
    /// request (so [`ExecutionProfileHandle::map_to_another_profile`]
    /// changes it while the session runs): its set fields override
    /// [`default_profile`](Self::default_profile)'s and the defaults above.
    pub default_profile_handle: Option<ExecutionProfileHandle>,
    /// Execution profiles by name, for
    /// [`Session::execution_profile`](crate::Session::execution_profile).
    pub execution_profiles: HashMap<String, ExecutionProfileHandle>,
    /// Backpressure: most requests the session has in flight at once (each
    /// holds one from its start to its end, retries and speculative attempts
    /// included; a paged read one per page). Default 4096.
    pub max_requests_in_flight: usize,
    /// Backpressure: most requests waiting for one of the
    /// [`max_requests_in_flight`](Self::max_requests_in_flight) to finish;
    /// a request beyond fails at once with
    /// [`ExecutionError::ClientOverloaded`](crate::ExecutionError::ClientOverloaded),
    /// a waiting one with a timeout at its deadline. Default 65536.
    pub max_queued_requests: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            contact_points: Vec::new(),
            keyspace: None,
            pool: PoolConfig::default(),
            consistency: Consistency::LocalQuorum,
            request_timeout: Duration::from_secs(12),
            page_size: 5000,
            local_datacenter: None,
            local_rack: None,
            latency_aware_routing: true,
            retry_policy: Arc::new(DefaultRetryPolicy),
            speculative: None,
            schema_agreement_timeout: Duration::from_secs(10),
            auto_await_schema_agreement: true,
            tracing_info_fetch: TraceFetchOptions::default(),
            prepared_cache_size: 1024,
            initial_connect_timeout: Duration::from_secs(5),
            control: ControlOptions::default(),
            skip_result_metadata: false,
            tablet_warmup: TabletWarmup::default(),
            default_profile: ExecutionProfile::default(),
            default_profile_handle: None,
            execution_profiles: HashMap::new(),
            max_requests_in_flight: 4096,
            max_queued_requests: 65_536,
        }
    }
}

/// Builds a [`Session`].
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use scylla_driver::SessionBuilder;
///
/// let session = SessionBuilder::new()
///     .known_node("127.0.0.1:9042")
///     .user("cassandra", "cassandra")
///     .request_timeout(Duration::from_secs(5))
///     .build()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct SessionBuilder {
    /// The configuration being built.
    pub config: SessionConfig,
}

impl SessionConfig {
    /// The default configuration, without contact points.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a contact point (`host:port`, or `host` for port 9042).
    pub fn add_known_node(&mut self, addr: impl Into<String>) {
        self.contact_points.push(addr.into());
    }

    /// Adds contact points.
    pub fn add_known_nodes<S: Into<String>>(&mut self, addrs: impl IntoIterator<Item = S>) {
        self.contact_points
            .extend(addrs.into_iter().map(Into::into));
    }
}

impl Session {
    /// Connects with `config` (the same as
    /// [`SessionBuilder::build`] with that
    /// configuration).
    pub async fn connect(config: SessionConfig) -> Result<Session, crate::error::NewSessionError> {
        SessionBuilder { config }.build().await
    }
}

impl SessionBuilder {
    /// A builder with default settings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a contact point (`host:port`, or `host` for port 9042).
    #[must_use]
    pub fn known_node(mut self, addr: impl Into<String>) -> Self {
        self.config.contact_points.push(addr.into());
        self
    }

    /// Adds contact points.
    #[must_use]
    pub fn known_nodes<S: Into<String>>(mut self, addrs: impl IntoIterator<Item = S>) -> Self {
        self.config
            .contact_points
            .extend(addrs.into_iter().map(Into::into));
        self
    }

    /// Uses the keyspace `keyspace_name` once connected, taken as
    /// [`Session::use_keyspace`] takes it (`case_sensitive: false` reads the
    /// name in lowercase).
    #[must_use]
    pub fn use_keyspace(mut self, keyspace_name: impl Into<String>, case_sensitive: bool) -> Self {
        self.config.keyspace = Some(super::admin::keyspace_name_as_given(
            keyspace_name.into(),
            case_sensitive,
        ));
        self
    }

    /// Username and password (SASL PLAIN, for the server's
    /// `PasswordAuthenticator`): a [`PlainTextAuthenticator`].
    #[must_use]
    pub fn user(self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.authenticator_provider(Arc::new(PlainTextAuthenticator::new(
            username.into(),
            password.into(),
        )))
    }

    /// A custom authenticator: any SASL-style mechanism (see
    /// [`AuthenticatorProvider`]).
    #[must_use]
    pub fn authenticator_provider(mut self, a: Arc<dyn AuthenticatorProvider>) -> Self {
        self.config.pool.connection.authenticator = Some(a);
        self
    }

    /// The application's name, sent to every node when a connection opens
    /// (STARTUP's `APPLICATION_NAME`): ScyllaDB shows it in
    /// `system.clients`, Cassandra 4+ in `system_views.clients`, so
    /// operators see which application a connection belongs to.
    ///
    /// ```
    /// use scylla_driver::SessionBuilder;
    ///
    /// let builder = SessionBuilder::new()
    ///     .known_node("127.0.0.1:9042")
    ///     .application_name("billing")
    ///     .application_version("2.4.1")
    ///     .client_id("billing-7f9c-pod-3");
    /// ```
    ///
    /// Every connection also sends the driver's name and version and,
    /// as `CLIENT_OPTIONS`, a JSON object of the session's main settings
    /// (protocol, compression, TLS on or off, shard awareness, connections
    /// per shard, timeouts, consistency, preferred datacenter and rack;
    /// never credentials), built once when the session is built.
    #[must_use]
    pub fn application_name(mut self, name: impl Into<String>) -> Self {
        self.config.pool.connection.application_name = Some(name.into());
        self
    }

    /// The application's version (STARTUP's `APPLICATION_VERSION`; see
    /// [`application_name`](Self::application_name)).
    #[must_use]
    pub fn application_version(mut self, version: impl Into<String>) -> Self {
        self.config.pool.connection.application_version = Some(version.into());
        self
    }

    /// An identifier of this client instance, such as a host or pod name
    /// (STARTUP's `CLIENT_ID`; see [`application_name`](Self::application_name)).
    #[must_use]
    pub fn client_id(mut self, id: impl Into<String>) -> Self {
        self.config.pool.connection.client_id = Some(id.into());
        self
    }

    /// The application's and driver's identity as the official `scylla`
    /// crate sets it: the set fields of `identity` replace the application
    /// name, version and client id (see
    /// [`application_name`](Self::application_name)) and the driver name and
    /// version sent in STARTUP.
    ///
    /// ```
    /// use scylla_driver::client::SelfIdentity;
    /// use scylla_driver::SessionBuilder;
    ///
    /// let builder = SessionBuilder::new()
    ///     .known_node("127.0.0.1:9042")
    ///     .custom_identity(
    ///         SelfIdentity::new()
    ///             .with_application_name("billing")
    ///             .with_application_version("2.4.1")
    ///             .with_client_id("billing-7f9c-pod-3"),
    ///     );
    /// ```
    #[must_use]
    pub fn custom_identity(mut self, identity: super::identity::SelfIdentity<'_>) -> Self {
        let c = &mut self.config.pool.connection;
        let set = |field: &mut Option<String>, value: Option<&str>| {
            if let Some(v) = value {
                *field = Some(v.to_owned());
            }
        };
        set(&mut c.application_name, identity.get_application_name());
        set(
            &mut c.application_version,
            identity.get_application_version(),
        );
        set(&mut c.client_id, identity.get_client_id());
        if let Some(name) = identity.get_custom_driver_name() {
            c.driver_name = name.to_owned();
        }
        if let Some(version) = identity.get_custom_driver_version() {
            c.driver_version = version.to_owned();
        }
        self
    }

    /// Compression (used when the server offers it).
    #[must_use]
    pub fn compression(mut self, c: Option<Compression>) -> Self {
        self.config.pool.connection.compression = c;
        self
    }

    /// Pins the protocol version. By default the session negotiates: it
    /// offers v5 and, when the cluster refuses it (ScyllaDB, Cassandra 3),
    /// speaks v4; the first connection learns this for the whole session.
    ///
    /// ```
    /// use scylla_driver::SessionBuilder;
    /// use scylla_cql::frame::ProtocolVersion;
    ///
    /// let builder = SessionBuilder::new()
    ///     .known_node("127.0.0.1:9042")
    ///     .protocol_version(ProtocolVersion::V4);
    /// ```
    #[must_use]
    pub fn protocol_version(mut self, version: ProtocolVersion) -> Self {
        self.config.pool.connection.protocol = crate::connection::ProtocolChoice::pinned(version);
        self
    }

    /// Connections per shard (per node for servers that do not shard); the
    /// same as `pool_size(PoolSize::PerShard(n))`, 0 taken as 1.
    #[must_use]
    pub fn connections_per_shard(self, n: usize) -> Self {
        self.pool_size(PoolSize::PerShard(
            NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN),
        ))
    }

    /// How many connections each node's pool keeps: per shard (default:
    /// one) or per node (spread over its shards). See [`PoolSize`].
    #[must_use]
    pub fn pool_size(mut self, size: PoolSize) -> Self {
        self.config.pool.size = size;
        self
    }

    /// Nagle's algorithm off (`true`, the default) or on. The connection's
    /// writer coalesces frames itself, so `false` only adds delay.
    #[must_use]
    pub fn tcp_nodelay(mut self, nodelay: bool) -> Self {
        self.config.pool.connection.socket.nodelay = nodelay;
        self
    }

    /// TCP keepalive on every connection: probes after `interval` idle, then
    /// every `interval` (default: off; the CQL heartbeat, [`keepalive_interval`](Self::keepalive_interval),
    /// finds dead connections without it).
    #[must_use]
    pub fn tcp_keepalive_interval(mut self, interval: Duration) -> Self {
        self.config.pool.connection.socket.keepalive = Some(interval);
        self
    }

    /// The CQL heartbeat: an OPTIONS request after `interval` without a
    /// write (default 30 s). The same as the first argument of
    /// [`heartbeat`](Self::heartbeat).
    #[must_use]
    pub fn keepalive_interval(mut self, interval: Duration) -> Self {
        self.config.pool.connection.heartbeat_interval = Some(interval);
        self
    }

    /// How long a heartbeat may go unanswered before its connection is
    /// replaced (default 10 s). The same as the second argument of
    /// [`heartbeat`](Self::heartbeat).
    #[must_use]
    pub fn keepalive_timeout(mut self, timeout: Duration) -> Self {
        self.config.pool.connection.heartbeat_timeout = timeout;
        self
    }

    /// The write coalescing policy of every connection.
    #[must_use]
    pub fn coalescing(mut self, c: Coalescing) -> Self {
        self.config.pool.connection.coalescing = c;
        self
    }

    /// TCP connect timeout.
    #[must_use]
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.config.pool.connection.socket.connect_timeout = d;
        self
    }

    /// TCP connect timeout (the official `scylla` crate's name for
    /// [`connect_timeout`](Self::connect_timeout)).
    #[must_use]
    pub fn connection_timeout(self, d: Duration) -> Self {
        self.connect_timeout(d)
    }

    /// Bound on a connection's handshake.
    #[must_use]
    pub fn handshake_timeout(mut self, d: Duration) -> Self {
        self.config.pool.connection.handshake_timeout = d;
        self
    }

    /// Default request timeout: one deadline for the keyspace switch, the
    /// attempts, re-preparations and speculative executions of a request,
    /// and for every page fetch of a stream.
    #[must_use]
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.config.request_timeout = d;
        self
    }

    /// Encrypts every connection (control and pools) with TLS.
    ///
    /// Give the nodes' TLS port as contact points (ScyllaDB: usually 9142;
    /// Cassandra: 9042 with `client_encryption_options.optional: false`).
    /// Shard-aware connections go to the node's `SCYLLA_SHARD_AWARE_PORT_SSL`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use scylla_driver::tls::TlsConfig;
    /// use scylla_driver::SessionBuilder;
    ///
    /// let tls = TlsConfig::builder().ca_pem_file("ca.pem")?.build()?;
    /// let session = SessionBuilder::new()
    ///     .known_node("127.0.0.1:9142")
    ///     .tls(tls)
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn tls(mut self, tls: crate::connection::tls::TlsConfig) -> Self {
        tracing::debug!(config = ?tls, "TLS enabled");
        self.config.pool.connection.tls = Some(tls);
        #[cfg(feature = "openssl-010")]
        {
            self.config.pool.connection.openssl = None;
        }
        self
    }

    /// TLS as the official `scylla` crate sets it: `Some` of a
    /// [`TlsContext`](crate::tls::TlsContext) encrypts every connection:
    /// a [`TlsConfig`](crate::tls::TlsConfig) or a rustls `Arc<ClientConfig>`
    /// through rustls (see [`tls`](Self::tls)), or, with the feature
    /// `openssl-010`, an `openssl::ssl::SslContext` through OpenSSL. `None`
    /// turns encryption off.
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn tls_context(mut self, tls: Option<impl Into<crate::tls::TlsContext>>) -> Self {
        match tls.map(Into::into) {
            Some(crate::tls::TlsContext::Rustls(tls)) => self.tls(tls),
            #[cfg(feature = "openssl-010")]
            Some(crate::tls::TlsContext::OpenSsl010(context)) => {
                tracing::debug!("TLS enabled (OpenSSL)");
                self.config.pool.connection.tls = None;
                self.config.pool.connection.openssl = Some(context);
                self
            }
            None => {
                self.config.pool.connection.tls = None;
                #[cfg(feature = "openssl-010")]
                {
                    self.config.pool.connection.openssl = None;
                }
                self
            }
        }
    }

    /// Whether to use ScyllaDB's shard-aware port.
    #[must_use]
    pub fn shard_aware_port(mut self, enabled: bool) -> Self {
        self.config.pool.shard_aware_port = enabled;
        self
    }

    /// Local ports to bind shard-aware connections from.
    #[must_use]
    pub fn local_port_range(mut self, range: PortRange) -> Self {
        self.config.pool.source_ports = range;
        self
    }

    /// Source ports tried per shard-aware connection before the pool gives
    /// up on the shard-aware port for it (taken ports are skipped; default
    /// 32).
    #[must_use]
    pub fn max_source_port_attempts(mut self, n: usize) -> Self {
        self.config.pool.max_source_port_attempts = n.max(1);
        self
    }

    /// When to stop trusting a node's shard-aware port (behind a NAT that
    /// rewrites source ports, connections land on the wrong shards): after
    /// `mismatches` wrong-shard landings in a row, the pool uses the regular
    /// port for `probation` (doubling up to `max_probation` while the port
    /// keeps failing its probes). Defaults: 3, 30 s, 10 min.
    #[must_use]
    pub fn shard_aware_fallback(
        mut self,
        mismatches: u32,
        probation: Duration,
        max_probation: Duration,
    ) -> Self {
        let f = &mut self.config.pool.fallback;
        f.mismatch_threshold = mismatches.max(1);
        f.probation = probation;
        f.max_probation = max_probation.max(probation);
        self
    }

    /// Most connections opened to one node at the same time (default 4):
    /// bounds the handshakes a client puts on a node that restarts.
    #[must_use]
    pub fn max_concurrent_opens(mut self, n: usize) -> Self {
        self.config.pool.max_concurrent_opens = n.max(1);
        self
    }

    /// Over TLS, pace a node's connection opens by the session tickets the
    /// driver holds for it (default on), so that each shard's connection
    /// after the first resumes the TLS session instead of paying a full
    /// handshake on the node. Off: every missing shard is opened at once
    /// (still at most [`max_concurrent_opens`](Self::max_concurrent_opens)).
    /// See `docs/pools.md`, "TLS session tickets".
    #[must_use]
    pub fn tls_ticket_pacing(mut self, on: bool) -> Self {
        self.config.pool.tls_ticket_pacing = on;
        self
    }

    /// The bound of the random wait before a returning node's first
    /// connection is reopened (default 1 s), so that thousands of clients do
    /// not reconnect in lockstep. A pool that has seen handshakes waits
    /// within 4 of the session's quickest instead, if that is shorter; one
    /// whose node queued its last opens (a storm) waits within the time
    /// between the ends of the last two, if longer (at most 4 times this
    /// bound). Its later opens are paced by how long its handshakes queue at
    /// the node.
    #[must_use]
    pub fn reconnect_spread(mut self, d: Duration) -> Self {
        self.config.pool.reconnect_spread = d;
        self
    }

    /// Without a usable shard-aware port: the mean interval between
    /// background attempts to cover a shard that has no connection (default
    /// 1 s; at most one attempt per node per interval). Behind a NAT, whose
    /// random landings give every attempt a fair chance, the attempts follow
    /// one another as fast as the node admits them, and this interval only
    /// applies after 16 misses per shard in a row.
    #[must_use]
    pub fn coverage_interval(mut self, d: Duration) -> Self {
        self.config.pool.coverage_interval = d;
        self
    }

    /// Keep-alive: a heartbeat after `interval` without a write (`None`
    /// disables it), and the connection is replaced if it is not answered
    /// within `timeout`. Defaults: 30 s, 10 s.
    #[must_use]
    pub fn heartbeat(mut self, interval: Option<Duration>, timeout: Duration) -> Self {
        let c = &mut self.config.pool.connection;
        c.heartbeat_interval = interval;
        c.heartbeat_timeout = timeout;
        self
    }

    /// A connection with requests in flight that completes no response for
    /// `after` is probed, and replaced if the probe is not answered within
    /// `timeout` (`None` disables the probe). Defaults: 2 s, 3 s.
    #[must_use]
    pub fn stall_probe(mut self, after: Option<Duration>, timeout: Duration) -> Self {
        let c = &mut self.config.pool.connection;
        c.stall_probe_after = after;
        c.stall_probe_timeout = timeout;
        self
    }

    /// Timed-out requests still holding stream ids at which a connection is
    /// replaced (default 1024).
    #[must_use]
    pub fn max_orphans(mut self, n: usize) -> Self {
        self.config.pool.connection.max_orphans = n.max(1);
        self
    }

    /// The largest frame accepted or sent (default 16 MiB); raise it for
    /// pages of very large rows.
    #[must_use]
    pub fn max_frame_len(mut self, bytes: usize) -> Self {
        self.config.pool.connection.max_frame_len = bytes;
        self
    }

    /// The datacenter to prefer.
    #[must_use]
    pub fn local_datacenter(mut self, dc: impl Into<String>) -> Self {
        self.config.local_datacenter = Some(dc.into());
        self
    }

    /// The rack to prefer inside the local datacenter (set with
    /// [`local_datacenter`](Self::local_datacenter); ignored without it):
    /// replicas in this rack come first, then the other replicas of the
    /// local datacenter; likewise for the other nodes.
    #[must_use]
    pub fn local_rack(mut self, rack: impl Into<String>) -> Self {
        self.config.local_rack = Some(rack.into());
        self
    }

    /// Whether plans put the less loaded, faster of two replicas first
    /// (default: on). Off, replicas take turns whatever their latency.
    #[must_use]
    pub fn latency_aware_routing(mut self, on: bool) -> Self {
        self.config.latency_aware_routing = on;
        self
    }

    /// Whether the session reads the full schema (default: yes): every
    /// column of every table with its type and clustering order,
    /// user-defined types, materialized views and secondary indexes, which
    /// [`ClusterState::get_keyspace`](crate::cluster::ClusterState::get_keyspace)
    /// gives. Off, only what routing needs is read (replication, partition
    /// keys, tablets), and `get_keyspace` finds nothing: for a large schema
    /// the application does not read.
    ///
    /// ```
    /// # use scylla_driver::SessionBuilder;
    /// let builder = SessionBuilder::new()
    ///     .known_node("127.0.0.1:9042")
    ///     .fetch_schema_metadata(false);
    /// ```
    #[must_use]
    pub fn fetch_schema_metadata(mut self, fetch: bool) -> Self {
        self.config.control.schema.full = fetch;
        self
    }

    /// Reads the schema of these keyspaces only (default: every keyspace);
    /// an empty list means every keyspace. Statements on tables of other
    /// keyspaces are not routed by token (their replication is not read).
    ///
    /// ```
    /// # use scylla_driver::SessionBuilder;
    /// let builder = SessionBuilder::new()
    ///     .known_node("127.0.0.1:9042")
    ///     .keyspaces_to_fetch(["shop", "system"]);
    /// ```
    #[must_use]
    pub fn keyspaces_to_fetch(
        mut self,
        keyspaces: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        let list: Vec<String> = keyspaces.into_iter().map(Into::into).collect();
        self.config.control.schema.keyspaces = (!list.is_empty()).then_some(list);
        self
    }

    /// How often the control connection checks the cluster for what events
    /// may have missed (default 60 s): it reads the topology again, and the
    /// schema only if a node reports a schema version other than at the last
    /// read, so a stable cluster sees no schema reads. Schema and topology
    /// changes are otherwise followed through the server's events.
    #[must_use]
    pub fn cluster_metadata_refresh_interval(mut self, interval: Duration) -> Self {
        self.config.control.refresh_interval = Some(interval);
        self
    }

    /// The reconnect policy (backoff) of the pools and the control connection.
    #[must_use]
    pub fn reconnect_policy(mut self, p: Arc<dyn ReconnectPolicy>) -> Self {
        self.config.pool.reconnect = p.clone();
        self.config.control.reconnect = p;
        self
    }

    /// The retry policy.
    #[must_use]
    pub fn retry_policy(mut self, p: Arc<dyn RetryPolicy>) -> Self {
        self.config.retry_policy = p;
        self
    }

    /// Speculative execution of idempotent statements.
    #[must_use]
    pub fn speculative_execution(mut self, s: SpeculativeExecution) -> Self {
        self.config.speculative = Some(s);
        self
    }

    /// Default consistency.
    #[must_use]
    pub fn consistency(mut self, c: Consistency) -> Self {
        self.config.consistency = c;
        self
    }

    /// Default page size.
    #[must_use]
    pub fn page_size(mut self, rows: i32) -> Self {
        self.config.page_size = rows;
        self
    }

    /// Skip result metadata of prepared statements (see
    /// [`SessionConfig::skip_result_metadata`]: unsafe across `ALTER TABLE`).
    #[must_use]
    pub fn skip_result_metadata(mut self, skip: bool) -> Self {
        self.config.skip_result_metadata = skip;
        self
    }

    /// Which tablet tables to read from `system.tablets` in the
    /// background (at start, after topology changes, for newly used
    /// keyspaces), so that their first requests already reach the right
    /// replica and shard: [`TabletWarmup::UsedKeyspaces`] (default),
    /// [`TabletWarmup::All`] or [`TabletWarmup::Off`].
    #[must_use]
    pub fn tablet_warmup(mut self, mode: TabletWarmup) -> Self {
        self.config.tablet_warmup = mode;
        self
    }

    /// Most statements the prepared-statement cache keeps (default 1024;
    /// the least recently used is evicted; 0 disables caching).
    #[must_use]
    pub fn prepared_cache_size(mut self, statements: usize) -> Self {
        self.config.prepared_cache_size = statements;
        self
    }

    /// Registers `profile` under `name` (replacing a profile of that name);
    /// statements select it with
    /// `with_execution_profile(session.execution_profile(name)?)`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use scylla_driver::statement::{Consistency, ExecutionProfile};
    /// use scylla_driver::SessionBuilder;
    ///
    /// let builder = SessionBuilder::new()
    ///     .known_node("127.0.0.1:9042")
    ///     .execution_profile(
    ///         "oltp",
    ///         ExecutionProfile::builder()
    ///             .consistency(Consistency::LocalQuorum)
    ///             .request_timeout(Some(Duration::from_millis(500)))
    ///             .build(),
    ///     );
    /// assert!(builder.config.execution_profiles.contains_key("oltp"));
    /// ```
    #[must_use]
    pub fn execution_profile(mut self, name: impl Into<String>, profile: ExecutionProfile) -> Self {
        let name = name.into();
        let handle = profile.into_handle_with_label(name.clone());
        self.config.execution_profiles.insert(name, handle);
        self
    }

    /// The default execution profile: its set fields override the
    /// session's defaults (consistency, timeout, ...) for every statement;
    /// a statement's own profile and options override it.
    #[must_use]
    pub fn default_execution_profile(mut self, profile: ExecutionProfile) -> Self {
        self.config.default_profile = profile;
        self
    }

    /// The default execution profile, given as a handle (the official
    /// `scylla` crate's form of
    /// [`default_execution_profile`](Self::default_execution_profile)):
    /// re-pointing the handle
    /// ([`map_to_another_profile`](ExecutionProfileHandle::map_to_another_profile))
    /// changes the session's defaults from its next request.
    #[must_use]
    pub fn default_execution_profile_handle(mut self, handle: ExecutionProfileHandle) -> Self {
        self.config.default_profile_handle = Some(handle);
        self
    }

    /// Bound on waiting for schema agreement after DDL.
    #[must_use]
    pub fn schema_agreement_timeout(mut self, d: Duration) -> Self {
        self.config.schema_agreement_timeout = d;
        self
    }

    /// Time between two reads of the nodes' schema versions while they
    /// disagree (default 200 ms).
    #[must_use]
    pub fn schema_agreement_interval(mut self, d: Duration) -> Self {
        self.config.control.agreement.interval = d;
        self
    }

    /// Whether statements that change the schema wait, before they return,
    /// until every node agrees on the new schema (default: on). Off, they
    /// return as soon as their coordinator answers: call
    /// [`Session::await_schema_agreement`] before anything that depends on
    /// the change, since the next statement may run on a node that has not
    /// applied it yet. The metadata is read again after each change either
    /// way.
    #[must_use]
    pub fn auto_await_schema_agreement(mut self, on: bool) -> Self {
        self.config.auto_await_schema_agreement = on;
        self
    }

    /// Reads of a trace's session row before [`Session::get_tracing_info`]
    /// gives up on a trace that is not complete (default 10).
    #[must_use]
    pub fn tracing_info_fetch_attempts(mut self, attempts: NonZeroU32) -> Self {
        self.config.tracing_info_fetch.attempts = attempts.get();
        self
    }

    /// The wait between two reads of an incomplete trace by
    /// [`Session::get_tracing_info`]: a fixed interval (by default the wait
    /// starts at 3 ms and doubles up to 300 ms; see [`TraceFetchOptions`]).
    #[must_use]
    pub fn tracing_info_fetch_interval(mut self, interval: Duration) -> Self {
        self.config.tracing_info_fetch.interval = interval;
        self.config.tracing_info_fetch.max_interval = interval;
        self
    }

    /// The consistency of the reads of traces by
    /// [`Session::get_tracing_info`] (default ONE).
    #[must_use]
    pub fn tracing_info_fetch_consistency(mut self, consistency: Consistency) -> Self {
        self.config.tracing_info_fetch.consistency = consistency;
        self
    }

    /// Backpressure: most requests in flight at once (default 4096, at
    /// least 1); see [`SessionConfig::max_requests_in_flight`].
    #[must_use]
    pub fn max_requests_in_flight(mut self, n: usize) -> Self {
        self.config.max_requests_in_flight = n.max(1);
        self
    }

    /// Backpressure: most requests waiting for a place in flight (default
    /// 65536; 0 fails every request beyond the bound at once); see
    /// [`SessionConfig::max_queued_requests`].
    #[must_use]
    pub fn max_queued_requests(mut self, n: usize) -> Self {
        self.config.max_queued_requests = n;
        self
    }

    /// Connects to every node through its client route (PrivateLink-style
    /// networks): the endpoint `system.client_routes` names for the node's
    /// host id under one of `routes`' connection ids, at its `port`, or its
    /// `tls_port` with [`tls`](Self::tls). The control connection reads the
    /// table with every topology read and again on each
    /// `CLIENT_ROUTES_CHANGE` event; a node whose route moves gets a pool on
    /// the new endpoint while the old one drains (requests in flight finish
    /// there). Nodes keep their host ids: routing is unchanged. With
    /// [`ClientRoutes::proxy_protocol`](crate::ClientRoutes::proxy_protocol)
    /// the pools stay shard-aware through a PROXY protocol v2 balancer. The
    /// contact points are used as given (give the endpoints of the link).
    /// With TLS and a certificate that does not name the endpoints, set the
    /// [`ServerName`](crate::tls::ServerName) the certificate names. See
    /// [`ClientRoutes`](crate::ClientRoutes) and `docs/connecting.md`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use scylla_driver::{ClientRoutes, SessionBuilder};
    ///
    /// let session = SessionBuilder::new()
    ///     .known_node("vpce-0123.example.com:9042")
    ///     .client_routes(ClientRoutes::new(["my-connection-id"]).proxy_protocol(true))
    ///     .build()
    ///     .await?;
    /// # drop(session); Ok(()) }
    /// ```
    #[must_use]
    pub fn client_routes(mut self, routes: crate::cluster::client_routes::ClientRoutes) -> Self {
        self.config.control.nodes.client_routes = Some(routes);
        self
    }

    /// Maps the addresses nodes report (in `system.peers(_v2)` and events)
    /// to the addresses to connect to (default: identity). Contact points
    /// are used as given. The shard-aware port is used on the translated IP
    /// with the port number the node reports; see
    /// [`AddressTranslator`].
    #[must_use]
    pub fn address_translator(mut self, t: Arc<dyn AddressTranslator>) -> Self {
        self.config.control.nodes.translator = t;
        self
    }

    /// Uses only the nodes `filter` accepts: the others get no pool, are in
    /// no query plan, and the control connection does not stay on them.
    /// See [`HostFilter`].
    #[must_use]
    pub fn host_filter(mut self, filter: Arc<dyn HostFilter>) -> Self {
        self.config.control.nodes.filter = Some(filter);
        self
    }

    /// Connects to one ScyllaDB node through its maintenance socket, the
    /// Unix-domain socket at `path`, instead of over TCP.
    ///
    /// The maintenance socket is ScyllaDB's administration entry point: CQL
    /// without authentication, with full (superuser) permissions, reachable
    /// only on the node's own host by its owner and group (file mode 660 on
    /// the socket; `maintenance_socket_group` in scylla.yaml sets the group).
    /// The node creates it before it joins the cluster (in maintenance mode
    /// it is the only CQL entry point). scylla.yaml's `maintenance_socket`
    /// says where: `ignore` (the default: none), `workdir`
    /// (`<workdir>/cql.m`), or a path (shorter than 108 bytes). Sources:
    /// <https://docs.scylladb.com/manual/master/operating-scylla/admin-tools/maintenance-socket.html>,
    /// and `controller::start_listening_on_maintenance_socket` in ScyllaDB's
    /// `transport/controller.cc`, which listens on every shard of the node,
    /// unencrypted and "non-shard-aware".
    ///
    /// What the session then does:
    /// - **One node.** The control connection and the pool both go through
    ///   the socket, so the session uses the node behind it and no other:
    ///   a host filter leaves out the peers `system.peers` lists (as the
    ///   Python driver's documented recipe does with
    ///   `Cluster([UnixSocketEndPoint(path)],
    ///   load_balancing_policy=WhiteListRoundRobinPolicy([...]))`). That
    ///   node is known by the address
    ///   [`UNIX_SOCKET_NODE_ADDRESS`](crate::cluster::UNIX_SOCKET_NODE_ADDRESS)
    ///   (`0.0.0.0:0`), as in metrics labels and the cluster view.
    /// - **No shard awareness.** A client cannot pick its shard over a
    ///   Unix-domain socket (there is no source port; the node puts each
    ///   connection on a shard of its choosing), so the node is pooled as
    ///   unsharded: [`connections_per_shard`](Self::connections_per_shard)
    ///   connections in all, wherever they land; no shard-aware port.
    /// - **No credentials needed.** A configured authenticator is still
    ///   answered if the server asks for one.
    /// - Queries, prepared statements and paging work as usual.
    ///
    /// This replaces the contact points, turns the shard-aware port off and
    /// sets the host filter: call it after [`known_node`](Self::known_node),
    /// [`shard_aware_port`](Self::shard_aware_port) and
    /// [`host_filter`](Self::host_filter), if at all. TLS settings do not
    /// apply to the socket (it is plaintext). Unix only: elsewhere `build`
    /// fails with
    /// [`OpenError::UnixSocket`](crate::errors::OpenError::UnixSocket).
    /// A path that does not exist, or that the process may not open, fails
    /// `build` with the same error, naming the path and what to check.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use scylla_driver::SessionBuilder;
    ///
    /// // scylla.yaml: maintenance_socket: workdir
    /// let session = SessionBuilder::new()
    ///     .maintenance_socket("/var/lib/scylla/cql.m")
    ///     .build()
    ///     .await?;
    /// session
    ///     .query_unpaged(
    ///         "CREATE ROLE admin WITH SUPERUSER = true AND LOGIN = true AND PASSWORD = 'change-me'",
    ///         (),
    ///     )
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn maintenance_socket(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        use crate::cluster::host_filter::{FnHostFilter, HostInfo};
        use crate::connection::UNIX_SOCKET_NODE_ADDRESS;
        self.config.pool.connection.unix_socket = Some(path.into());
        // Every connection goes through the socket: the contact point only
        // names the node (the control connection's node is known by the
        // address it was reached at).
        self.config.contact_points = vec![UNIX_SOCKET_NODE_ADDRESS.to_string()];
        self.config.pool.shard_aware_port = false;
        self.config.control.nodes.filter = Some(Arc::new(FnHostFilter(|h: &HostInfo<'_>| {
            h.address == UNIX_SOCKET_NODE_ADDRESS
        })));
        self
    }

    /// Connects: the control connection first (discovering the nodes), then a
    /// pool per node; returns once every node has a connection (nodes that
    /// do not answer within the initial connect timeout are left to their
    /// pools' reconnect logic) and, unless [`TabletWarmup::Off`], the
    /// tablets of the session's keyspace (or of all tablet keyspaces) were
    /// read, or that read failed or took longer than the request timeout
    /// (it is logged, and tablets are then learned as requests go).
    ///
    /// # Cancellation
    ///
    /// Dropping the future stops the control connection and the pools
    /// started so far (they stop when dropped), closing their connections.
    pub async fn build(self) -> Result<Session, NewSessionError> {
        let mut config = self.config;
        if config.contact_points.is_empty() {
            return Err(NewSessionError::EmptyKnownNodesList);
        }
        let mut addrs = Vec::new();
        for cp in &config.contact_points {
            let with_port = if cp.contains(':') && !cp.starts_with('[') || cp.contains("]:") {
                cp.clone()
            } else {
                format!("{cp}:9042")
            };
            let resolved = tokio::net::lookup_host(&with_port)
                .await
                .map_err(|source| NewSessionError::Resolve {
                    contact_point: cp.clone(),
                    source,
                })?;
            addrs.extend(resolved);
        }
        let metrics = Arc::new(Metrics::default());
        // Types, units and help texts of the `metrics` facade's metrics.
        crate::metrics::record::describe();
        config.pool.connection.counters = metrics.io.clone();
        // Once per session: every connection (and every reconnection in a
        // storm) sends the same shared text.
        config.pool.connection.client_options = Some(client_options_json(&config).into());
        config.control.nodes.tls = config.pool.connection.uses_tls();
        config.pool.route_proxy_protocol = config
            .control
            .nodes
            .client_routes
            .as_ref()
            .is_some_and(|r| r.uses_proxy_protocol());
        let (control, updates) = ControlHandle::start(
            addrs,
            config.pool.connection.clone(),
            config.control.clone(),
        )
        .await
        .map_err(NewSessionError::Control)?;
        let cluster = Cluster::start(
            control,
            updates,
            config.pool.clone(),
            metrics.clone(),
            config.local_datacenter.clone(),
            config.local_rack.clone(),
            config.tablet_warmup,
        );
        let missing = cluster.wait_for_pools(config.initial_connect_timeout).await;
        for addr in &missing {
            tracing::warn!(node = %addr, "no connection to this node yet; its pool keeps trying");
        }
        let keyspace = config.keyspace.take();
        let session = Session::from_parts(cluster, config, metrics);
        if let Some(ks) = keyspace {
            session
                .use_keyspace(ks, true)
                .await
                .map_err(|e| NewSessionError::Keyspace(Box::new(e)))?;
        }
        session.initial_tablet_warmup().await;
        Ok(session)
    }
}

/// The `CLIENT_OPTIONS` JSON of a session: the driver's name and version and
/// the settings an operator needs to tell one configuration from another
/// (ScyllaDB shows it in `system.clients.client_options`). Never
/// credentials: whether authentication is configured, nothing more.
fn client_options_json(config: &SessionConfig) -> String {
    let c = &config.pool.connection;
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let (pool_size_key, pool_size) = match config.pool.size {
        PoolSize::PerShard(n) => ("connections_per_shard", n.get()),
        PoolSize::PerHost(n) => ("connections_per_host", n.get()),
    };
    let protocol = match c.protocol.pinned_version() {
        Some(v) => v.to_string(),
        None => "negotiated".to_owned(),
    };
    let profile = &config.default_profile;
    let consistency = profile.consistency.unwrap_or(config.consistency);
    let request_timeout = profile.request_timeout.unwrap_or(config.request_timeout);
    crate::connection::client_options::JsonObject::new()
        .str("driver_name", &c.driver_name)
        .str("driver_version", &c.driver_version)
        .str("protocol_version", &protocol)
        .opt_str("compression", c.compression.map(|c| c.name()))
        .bool("tls", c.uses_tls())
        .bool("authentication", c.authenticator.is_some())
        .bool("shard_aware_port", config.pool.shard_aware_port)
        .num(pool_size_key, u64::try_from(pool_size).unwrap_or(u64::MAX))
        .num("connect_timeout_ms", ms(c.socket.connect_timeout))
        .num("request_timeout_ms", ms(request_timeout))
        .opt_num("heartbeat_interval_ms", c.heartbeat_interval.map(ms))
        .str("consistency", &consistency.to_string())
        .num("page_size", u64::try_from(config.page_size).unwrap_or(0))
        .opt_str("local_datacenter", config.local_datacenter.as_deref())
        .opt_str("local_rack", config.local_rack.as_deref())
        .bool("latency_aware_routing", config.latency_aware_routing)
        .bool("speculative_execution", config.speculative.is_some())
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_options_name_the_settings_and_no_credentials() {
        let builder = SessionBuilder::new()
            .user("alice", "s3cr3t-pass")
            .application_name("app")
            .local_datacenter("dc \"east\"")
            .connections_per_shard(2)
            .request_timeout(Duration::from_millis(1500))
            .compression(Some(Compression::Lz4));
        let json = client_options_json(&builder.config);
        assert!(json.starts_with("{\"driver_name\":\"scylla-driver (Rust)\","));
        for part in [
            r#""compression":"lz4""#,
            r#""authentication":true"#,
            r#""connections_per_shard":2"#,
            r#""request_timeout_ms":1500"#,
            r#""local_datacenter":"dc \"east\"""#,
            r#""local_rack":null"#,
            r#""protocol_version":"negotiated""#,
            r#""consistency":"LocalQuorum""#,
        ] {
            assert!(json.contains(part), "{part} missing from {json}");
        }
        assert!(
            !json.contains("alice") && !json.contains("s3cr3t"),
            "{json}"
        );
    }

    #[test]
    fn custom_identity_sets_only_what_it_has() {
        use crate::session::identity::SelfIdentity;
        let builder = SessionBuilder::new()
            .application_name("kept")
            .client_id("replaced")
            .custom_identity(
                SelfIdentity::new()
                    .with_client_id("c-1")
                    .with_custom_driver_version("9.9.9"),
            );
        let c = &builder.config.pool.connection;
        assert_eq!(c.application_name.as_deref(), Some("kept"));
        assert_eq!(c.application_version, None);
        assert_eq!(c.client_id.as_deref(), Some("c-1"));
        assert_eq!(c.driver_name, crate::connection::DEFAULT_DRIVER_NAME);
        assert_eq!(c.driver_version, "9.9.9");
    }
}
