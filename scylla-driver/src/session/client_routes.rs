//! The official crate's configuration of client routes
//! ([`ClientRoutesConfig`], [`ClientRoutesProxy`], [`ClientRoutesSessionBuilder`]),
//! over [`ClientRoutes`] and [`SessionBuilder::client_routes`] (the official
//! path is `client::client_routes`).

use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::client_routes::ClientRoutes;
use crate::cluster::host_filter::HostFilter;
use crate::cluster::TabletWarmup;
use crate::connection::{AuthenticatorProvider, Coalescing};
use crate::error::NewSessionError;
use crate::policy::retry::RetryPolicy;
use crate::policy::speculative::SpeculativeExecution;
use crate::pool::backoff::ReconnectPolicy;
use crate::pool::shard_port::PortRange;
use crate::session::{Session, SessionBuilder};
use crate::statement::{ExecutionProfile, ExecutionProfileHandle};
use scylla_cql::compression::Compression;
use scylla_cql::frame::ProtocolVersion;
use scylla_cql::Consistency;

/// One private link: the connection id whose rows of `system.client_routes`
/// the session follows, and optionally the address to dial instead of the
/// rows' own ([`ClientRoutes::override_address`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRoutesProxy {
    connection_id: String,
    overridden_hostname: Option<String>,
}

impl ClientRoutesProxy {
    /// The routes of `connection_id`, at the addresses the table gives.
    pub fn new_with_connection_id(connection_id: String) -> Self {
        ClientRoutesProxy {
            connection_id,
            overridden_hostname: None,
        }
    }

    /// Dials this connection id's routes at `hostname` (a DNS name or an
    /// IP) instead of the address in their rows; the rows' ports still
    /// apply.
    #[must_use]
    pub fn with_overridden_hostname(mut self, hostname: String) -> Self {
        self.overridden_hostname = Some(hostname);
        self
    }

    /// The connection id.
    pub fn connection_id(&self) -> &str {
        &self.connection_id
    }
}

impl From<String> for ClientRoutesProxy {
    fn from(connection_id: String) -> Self {
        Self::new_with_connection_id(connection_id)
    }
}

/// The private links a session follows, in order of preference (with two
/// links naming the same node, the first one's route is used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRoutesConfig {
    proxies: Vec<ClientRoutesProxy>,
}

impl ClientRoutesConfig {
    /// The links of `proxies`; at least one is needed.
    pub fn new(proxies: Vec<ClientRoutesProxy>) -> Result<Self, ClientRoutesConfigError> {
        if proxies.is_empty() {
            return Err(ClientRoutesConfigError::EmptyConnectionIds);
        }
        Ok(ClientRoutesConfig { proxies })
    }

    /// The links, in order of preference.
    pub fn proxies(&self) -> &[ClientRoutesProxy] {
        &self.proxies
    }
}

impl From<ClientRoutesConfig> for ClientRoutes {
    fn from(config: ClientRoutesConfig) -> Self {
        let ids = config.proxies.iter().map(|p| p.connection_id.clone());
        let mut routes = ClientRoutes::new(ids.collect::<Vec<_>>());
        for p in config.proxies {
            if let Some(hostname) = p.overridden_hostname {
                routes = routes.override_address(p.connection_id, hostname);
            }
        }
        routes
    }
}

/// Why a [`ClientRoutesConfig`] could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientRoutesConfigError {
    /// No proxy (connection id) was given.
    EmptyConnectionIds,
}

impl fmt::Display for ClientRoutesConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientRoutesConfigError::EmptyConnectionIds => f.write_str(
                "no connection id was given: client routes need at least one ClientRoutesProxy",
            ),
        }
    }
}

impl std::error::Error for ClientRoutesConfigError {}

/// A [`SessionBuilder`] for a cluster reached through client routes, as the
/// official crate spells it: `ClientRoutesSessionBuilder::new(config)`,
/// then the usual settings and [`build`](Self::build). It is this crate's
/// `SessionBuilder::new().client_routes(config.into())`; its settings are
/// the [`SessionBuilder`]'s (each method here is the one of the same name
/// there), without the ones a routed session cannot use (an address
/// translator: the routes are the translation; a maintenance socket). The
/// routes' ports are not taken as shard-aware (the official crate's
/// default too); for a balancer that passes the client's port on in a
/// PROXY v2 header, use [`ClientRoutes::proxy_protocol`] through
/// [`into_session_builder`](Self::into_session_builder) and
/// [`SessionBuilder::client_routes`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ClientRoutesSessionBuilder(SessionBuilder);

/// Builder methods of [`ClientRoutesSessionBuilder`] that pass their
/// arguments on to the [`SessionBuilder`] method of the same name.
macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            #[doc = concat!("As [`SessionBuilder::", stringify!($name), "`].")]
            pub fn $name(self, $($arg: $ty),*) -> Self {
                ClientRoutesSessionBuilder(self.0.$name($($arg),*))
            }
        )*
    };
}

impl ClientRoutesSessionBuilder {
    /// A builder whose session follows `config`'s routes.
    pub fn new(config: ClientRoutesConfig) -> Self {
        ClientRoutesSessionBuilder(SessionBuilder::new().client_routes(config.into()))
    }

    /// Connects (as [`SessionBuilder::build`]).
    pub async fn build(self) -> Result<Session, NewSessionError> {
        self.0.build().await
    }

    /// This crate's builder with the same settings.
    pub fn into_session_builder(self) -> SessionBuilder {
        self.0
    }

    /// As [`SessionBuilder::known_nodes`].
    pub fn known_nodes<S: Into<String>>(self, addrs: impl IntoIterator<Item = S>) -> Self {
        ClientRoutesSessionBuilder(self.0.known_nodes(addrs))
    }

    /// As [`SessionBuilder::tls_context`].
    #[cfg(feature = "tls")]
    pub fn tls_context(self, tls: Option<impl Into<crate::tls::TlsContext>>) -> Self {
        ClientRoutesSessionBuilder(self.0.tls_context(tls))
    }

    /// As [`SessionBuilder::tls`].
    #[cfg(feature = "tls")]
    pub fn tls(self, tls: crate::tls::TlsConfig) -> Self {
        ClientRoutesSessionBuilder(self.0.tls(tls))
    }

    forward! {
        known_node(addr: impl Into<String>);
        use_keyspace(keyspace_name: impl Into<String>, case_sensitive: bool);
        user(username: impl Into<String>, password: impl Into<String>);
        authenticator_provider(a: Arc<dyn AuthenticatorProvider>);
        application_name(name: impl Into<String>);
        application_version(version: impl Into<String>);
        client_id(id: impl Into<String>);
        custom_identity(identity: crate::session::identity::SelfIdentity<'_>);
        compression(c: Option<Compression>);
        protocol_version(version: ProtocolVersion);
        connections_per_shard(n: usize);
        pool_size(size: crate::pool::PoolSize);
        tcp_nodelay(nodelay: bool);
        tcp_keepalive_interval(interval: Duration);
        keepalive_interval(interval: Duration);
        keepalive_timeout(timeout: Duration);
        coalescing(c: Coalescing);
        connect_timeout(d: Duration);
        connection_timeout(d: Duration);
        handshake_timeout(d: Duration);
        request_timeout(d: Duration);
        local_port_range(range: PortRange);
        max_source_port_attempts(n: usize);
        max_concurrent_opens(n: usize);
        tls_ticket_pacing(on: bool);
        reconnect_spread(d: Duration);
        coverage_interval(d: Duration);
        heartbeat(interval: Option<Duration>, timeout: Duration);
        stall_probe(after: Option<Duration>, timeout: Duration);
        max_orphans(n: usize);
        max_frame_len(bytes: usize);
        local_datacenter(dc: impl Into<String>);
        local_rack(rack: impl Into<String>);
        latency_aware_routing(on: bool);
        cluster_metadata_refresh_interval(interval: Duration);
        reconnect_policy(p: Arc<dyn ReconnectPolicy>);
        retry_policy(p: Arc<dyn RetryPolicy>);
        speculative_execution(s: SpeculativeExecution);
        consistency(c: Consistency);
        page_size(rows: i32);
        skip_result_metadata(skip: bool);
        tablet_warmup(mode: TabletWarmup);
        prepared_cache_size(statements: usize);
        execution_profile(name: impl Into<String>, profile: ExecutionProfile);
        default_execution_profile(profile: ExecutionProfile);
        default_execution_profile_handle(handle: ExecutionProfileHandle);
        schema_agreement_timeout(d: Duration);
        schema_agreement_interval(d: Duration);
        auto_await_schema_agreement(on: bool);
        tracing_info_fetch_attempts(attempts: NonZeroU32);
        tracing_info_fetch_interval(interval: Duration);
        tracing_info_fetch_consistency(consistency: Consistency);
        max_requests_in_flight(n: usize);
        max_queued_requests(n: usize);
        host_filter(filter: Arc<dyn HostFilter>);
    }
}

impl From<ClientRoutesSessionBuilder> for SessionBuilder {
    fn from(builder: ClientRoutesSessionBuilder) -> Self {
        builder.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_needs_a_connection_id() {
        let err = ClientRoutesConfig::new(Vec::new()).unwrap_err();
        assert_eq!(err, ClientRoutesConfigError::EmptyConnectionIds);
        assert!(err.to_string().contains("at least one"), "{err}");
    }

    #[test]
    fn a_config_becomes_routes_with_its_ids_in_order_and_its_overrides() {
        let config = ClientRoutesConfig::new(vec![
            ClientRoutesProxy::from("b".to_owned()),
            ClientRoutesProxy::new_with_connection_id("a".to_owned())
                .with_overridden_hostname("vpce.internal".to_owned()),
        ])
        .unwrap();
        let routes = ClientRoutes::from(config);
        assert_eq!(routes.connection_ids(), ["b", "a"]);
        assert_eq!(routes.address_override("a"), Some("vpce.internal"));
        assert_eq!(routes.address_override("b"), None);
        assert!(!routes.uses_proxy_protocol());
    }
}
