//! Client routes: reaching every node through its own endpoint of a load
//! balancer (PrivateLink-style networks), as ScyllaDB's
//! `system.client_routes` table says.
//!
//! In such a network the nodes' own addresses (`rpc_address` in
//! `system.local` / `system.peers`) are not reachable from the client. The
//! cloud side publishes, per *connection id* (one per private link), the
//! endpoint that reaches each node (by host id): its `address` (a DNS name
//! or an IP), `port` and `tls_port`. The schema is ScyllaDB's
//! (`system_keyspace::client_routes()` in `db/system_keyspace.cc`,
//! <https://github.com/scylladb/scylladb>); the official Rust driver reads
//! the same columns (`scylla/src/cluster/metadata/fetching.rs` in
//! <https://github.com/scylladb/scylla-rust-driver>).
//!
//! With [`SessionBuilder::client_routes`](crate::SessionBuilder::client_routes)
//! the control connection reads the table (the rows of the configured
//! connection ids) with every topology read, registers for
//! `CLIENT_ROUTES_CHANGE` and reads the topology again on that event. Each
//! node with a route is then dialled at the route's address and `port` (or
//! `tls_port` when the session uses TLS) instead of its own address; a node
//! without a route keeps its own (translated) address. A route's DNS name
//! is resolved when the route appears or changes; its address is kept while
//! the route stays the same. The node's identity
//! stays its host id: routing, tablets and load are unchanged. When a
//! route changes, the node's pool is replaced by one on the new endpoint
//! and the old pool is *retired*: it offers no connection to new requests
//! and closes each of its connections once the requests on it are done. A
//! control connection that came in through the moved route moves too.
//!
//! **Shard awareness through the balancer.** A load balancer opens its own
//! connection to the node, with its own source port, so the shard-aware
//! port's rule (`shard = source port % shards`) would see the balancer's
//! port, not the client's. A balancer that speaks the PROXY protocol v2
//! writes the client's address and port in a header in front of the
//! forwarded bytes, and ScyllaDB's shard-aware proxy-protocol listener
//! (`native_shard_aware_transport_port_proxy_protocol`, and `_ssl_` for
//! TLS, in `db/config.cc`) picks the shard from that port. The route's
//! port is then shard-aware, but nothing in `system.client_routes` says
//! so; the session is told with [`ClientRoutes::proxy_protocol`] (ScyllaDB's
//! Java driver does the same with its `proxyProtocol` flag of
//! `ClientRoutesConfig`, <https://github.com/scylladb/java-driver/pull/839>).
//! With it on, every connection of a routed node's pool goes to the route's
//! endpoint with a source port chosen for the shard it wants, exactly as
//! towards a shard-aware port; the pool's NAT detection still watches where
//! connections land and falls back to taking what comes if the balancer
//! does not pass the port on. Without it, a routed node's pool never uses a
//! shard-aware port (the port the node advertises is not reachable through
//! the balancer) and covers its shards as on a regular port.

/// Which client routes a session uses (see the [module](self) docs).
///
/// ```
/// use scylla_driver::{ClientRoutes, SessionBuilder};
///
/// let builder = SessionBuilder::new()
///     .known_node("my-link-endpoint.example.com:9042")
///     .client_routes(ClientRoutes::new(["my-connection-id"]).proxy_protocol(true));
/// # drop(builder);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRoutes {
    connection_ids: Vec<String>,
    proxy_protocol: bool,
    /// Per connection id, an address dialled instead of the table's.
    address_overrides: Vec<(String, String)>,
}

impl ClientRoutes {
    /// The routes of these connection ids (rows of other connection ids
    /// are ignored). With several ids naming the same host, the first id
    /// in this order wins.
    pub fn new<I, S>(connection_ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ClientRoutes {
            connection_ids: connection_ids.into_iter().map(Into::into).collect(),
            proxy_protocol: false,
            address_overrides: Vec::new(),
        }
    }

    /// Dials the routes of `connection_id` at `address` (a DNS name or an
    /// IP) instead of the address their rows give; the rows' ports still
    /// apply. For a link whose endpoint name is known on the client side
    /// only (a private DNS zone, a test setup). A later call for the same
    /// connection id replaces the earlier one.
    ///
    /// ```
    /// use scylla_driver::ClientRoutes;
    ///
    /// let routes = ClientRoutes::new(["link-a", "link-b"])
    ///     .override_address("link-a", "vpce-0a1b2c.example.internal");
    /// assert_eq!(routes.address_override("link-a"), Some("vpce-0a1b2c.example.internal"));
    /// assert_eq!(routes.address_override("link-b"), None);
    /// ```
    #[must_use]
    pub fn override_address(
        mut self,
        connection_id: impl Into<String>,
        address: impl Into<String>,
    ) -> Self {
        let (id, address) = (connection_id.into(), address.into());
        self.address_overrides.retain(|(c, _)| *c != id);
        self.address_overrides.push((id, address));
        self
    }

    /// The address dialled instead of the table's for `connection_id`, if
    /// [`override_address`](Self::override_address) set one.
    pub fn address_override(&self, connection_id: &str) -> Option<&str> {
        self.address_overrides
            .iter()
            .find(|(c, _)| c == connection_id)
            .map(|(_, a)| a.as_str())
    }

    /// The load balancer behind the routes passes the client's source port
    /// to the nodes in a PROXY protocol v2 header, to their shard-aware
    /// proxy-protocol ports (default off): the pools pick source ports per
    /// shard through the routes.
    #[must_use]
    pub fn proxy_protocol(mut self, on: bool) -> Self {
        self.proxy_protocol = on;
        self
    }

    /// The connection ids.
    pub fn connection_ids(&self) -> &[String] {
        &self.connection_ids
    }

    /// Whether the routes' ports are shard-aware through PROXY v2.
    pub fn uses_proxy_protocol(&self) -> bool {
        self.proxy_protocol
    }
}
