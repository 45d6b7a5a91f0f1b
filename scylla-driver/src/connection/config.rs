//! How a connection is opened and run ([`ConnectionConfig`]), and the
//! options of one request ([`RequestOptions`]).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(feature = "tls")]
use super::tls;
use super::{
    stream_slots, AuthenticatorProvider, Coalescing, IoCounters, ProtocolChoice, SocketConfig,
};
use scylla_cql::compression::Compression;
use scylla_cql::frame::envelope::CustomPayload;
use scylla_cql::frame::request::EventType;
use scylla_cql::frame::response::event::Event;
use tokio::sync::mpsc;

/// How to open and run a connection.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConnectionConfig {
    /// Socket options and the connect timeout.
    pub socket: SocketConfig,
    /// Bound on the whole handshake (OPTIONS to the last set-up response).
    pub handshake_timeout: Duration,
    /// Compression to use if the server offers it.
    pub compression: Option<Compression>,
    /// The protocol version to offer: negotiated (the default: v5, falling
    /// back to v4 once per session when a server refuses it) or pinned.
    pub protocol: ProtocolChoice,
    /// Credentials, for servers that require authentication.
    pub authenticator: Option<Arc<dyn AuthenticatorProvider>>,
    /// Keyspace to `USE` after the handshake.
    pub keyspace: Option<String>,
    /// Events to REGISTER for (control connection only).
    pub register_events: Vec<EventType>,
    /// Where events go.
    pub events: Option<mpsc::Sender<Event>>,
    /// When the writer writes.
    pub coalescing: Coalescing,
    /// Most requests in flight (stream ids); at most 32,768.
    pub max_in_flight: usize,
    /// Timed-out requests still holding stream ids at which the connection
    /// is closed (and replaced by its pool).
    pub max_orphans: usize,
    /// How often deadlines are checked while requests are in flight (the
    /// granularity of request timeouts).
    pub timeout_tick: Duration,
    /// Send a heartbeat after this long without a write; `None` disables.
    pub heartbeat_interval: Option<Duration>,
    /// How long a heartbeat may take.
    pub heartbeat_timeout: Duration,
    /// Stall detection: when requests are in flight and no response frame
    /// has arrived for this long, an OPTIONS probe is sent; `None` disables.
    ///
    /// A length field damaged on the wire (v4 frames carry no checksum)
    /// makes the reader wait for the body of a frame that never comes,
    /// swallowing every later response; only a probe that goes unanswered
    /// tells this apart from a slow query.
    pub stall_probe_after: Option<Duration>,
    /// How long the stall probe may take before the connection is recycled
    /// ([`BrokenReason::ReadStalled`](super::BrokenReason::ReadStalled)). A stalled connection is therefore
    /// closed within `stall_probe_after + stall_probe_timeout` (plus a tick).
    pub stall_probe_timeout: Duration,
    /// Largest frame body accepted or sent. The default, 16 MiB, is what
    /// servers accept (Cassandra's `native_transport_max_frame_size`); a
    /// larger announced length is a damaged or hostile frame and closes the
    /// connection at once. Raise it for pages of very large rows.
    pub max_frame_len: usize,
    /// `DRIVER_NAME` sent in STARTUP.
    pub driver_name: String,
    /// `DRIVER_VERSION` sent in STARTUP.
    pub driver_version: String,
    /// `APPLICATION_NAME` sent in STARTUP (not sent when `None`).
    pub application_name: Option<String>,
    /// `APPLICATION_VERSION` sent in STARTUP (not sent when `None`).
    pub application_version: Option<String>,
    /// `CLIENT_ID` sent in STARTUP (not sent when `None`).
    pub client_id: Option<String>,
    /// `CLIENT_OPTIONS` sent in STARTUP: a JSON object of the driver's main
    /// settings, built once per session (`SessionBuilder::build`) and
    /// shared by every connection, so opening one costs nothing more (not
    /// sent when `None`, the default of a bare `ConnectionConfig`). It must
    /// never carry credentials.
    pub client_options: Option<Arc<str>>,
    /// I/O counters to update (share one among connections for totals).
    pub counters: Arc<IoCounters>,
    /// Connect to this Unix-domain socket instead of the address given to
    /// [`open`](super::open()) (which then only names the node: in
    /// [`ConnectionInfo::peer`](super::ConnectionInfo), logs and metrics).
    /// This is how ScyllaDB's maintenance socket is reached; see
    /// `SessionBuilder::maintenance_socket`. The connect is bounded by
    /// [`SocketConfig::connect_timeout`]; the TCP options, source ports and
    /// TLS do not apply (the maintenance socket is plaintext and serves no
    /// shard-aware port). Unix only: elsewhere the connect fails with
    /// [`OpenError::UnixSocket`](super::OpenError::UnixSocket).
    pub unix_socket: Option<PathBuf>,
    /// Encrypt the connection with TLS (the TLS handshake is bounded by the
    /// connect timeout).
    #[cfg(feature = "tls")]
    pub tls: Option<tls::TlsConfig>,
    /// Encrypt the connection through the system's OpenSSL with this
    /// context instead (feature `openssl-010`; set by
    /// `SessionBuilder::tls_context` with an `SslContext`). Takes
    /// precedence over `tls`.
    #[cfg(feature = "openssl-010")]
    pub openssl: Option<openssl::ssl::SslContext>,
}

impl ConnectionConfig {
    /// Whether connections use TLS.
    pub fn uses_tls(&self) -> bool {
        #[cfg(feature = "openssl-010")]
        if self.openssl.is_some() {
            return true;
        }
        #[cfg(feature = "tls")]
        {
            self.tls.is_some()
        }
        #[cfg(not(feature = "tls"))]
        {
            false
        }
    }
}

/// The address under which a node reached through a Unix-domain socket
/// (`ConnectionConfig::unix_socket`) is known, when nothing better is
/// known before connecting: `0.0.0.0:0`, which no node reports for itself or
/// its peers (a peer listening on a wildcard is reported by its gossip
/// address, and never on port 0). Sessions through ScyllaDB's maintenance
/// socket use it as their one node's address (metrics labels, logs, the
/// cluster view).
pub const UNIX_SOCKET_NODE_ADDRESS: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// The default `DRIVER_NAME` sent in STARTUP ([`ConnectionConfig::driver_name`]).
pub const DEFAULT_DRIVER_NAME: &str = "scylla-driver (Rust)";
/// The default `DRIVER_VERSION` sent in STARTUP: this crate's version.
pub const DEFAULT_DRIVER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The default of [`ConnectionConfig::max_frame_len`]: 16 MiB.
pub const DEFAULT_MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            socket: SocketConfig::default(),
            handshake_timeout: Duration::from_secs(5),
            compression: None,
            protocol: ProtocolChoice::negotiate(),
            authenticator: None,
            keyspace: None,
            register_events: Vec::new(),
            events: None,
            coalescing: Coalescing::default(),
            max_in_flight: stream_slots::MAX_STREAMS,
            max_orphans: 1024,
            timeout_tick: Duration::from_millis(10),
            heartbeat_interval: Some(Duration::from_secs(30)),
            heartbeat_timeout: Duration::from_secs(10),
            stall_probe_after: Some(Duration::from_secs(2)),
            stall_probe_timeout: Duration::from_secs(3),
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            driver_name: DEFAULT_DRIVER_NAME.to_owned(),
            driver_version: DEFAULT_DRIVER_VERSION.to_owned(),
            application_name: None,
            application_version: None,
            client_id: None,
            client_options: None,
            counters: Arc::new(IoCounters::default()),
            unix_socket: None,
            #[cfg(feature = "tls")]
            tls: None,
            #[cfg(feature = "openssl-010")]
            openssl: None,
        }
    }
}

/// Per-request options.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct RequestOptions<'a> {
    /// Give up waiting after this long (the request may still run).
    pub timeout: Option<Duration>,
    /// Give up waiting at this instant (the session's requests: their
    /// deadline is shared by all attempts, and passing it as is spares
    /// turning it into a timeout and back, two `Instant` subtractions per
    /// request). Takes precedence over `timeout`.
    pub(crate) deadline: Option<Instant>,
    /// Ask the server to trace the request.
    pub tracing: bool,
    /// A custom payload to send with it.
    pub custom_payload: Option<&'a CustomPayload>,
}
