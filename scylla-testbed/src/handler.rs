//! The seam between the network layer and the CQL layer.
//!
//! The network layer (the internal `connection` module) owns everything about a
//! connection itself: framing, OPTIONS/SUPPORTED, the STARTUP/AUTH handshake
//! (with admission), REGISTER and event delivery, faults. Every other request
//! (QUERY, PREPARE, EXECUTE, BATCH) is handed to a [`RequestHandler`] together
//! with a [`ConnCtx`] describing where it arrived. The CQL layer implements
//! the trait; until it exists, [`NotImplementedHandler`] answers everything
//! with an `Invalid` error so the network layer can be tested alone.
//!
//! Requests on one connection are handled concurrently (one task each), as a
//! real server does: stream ids exist for that.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use scylla_cql::frame::header::{Direction, Flags, FrameHeader, Opcode};
use scylla_cql::frame::wire;
use scylla_cql::frame::ProtocolVersion;
use scylla_cql::sharding::{Shard, Sharder};

use crate::stats::{bump_both, NodeStats};
use crate::topology::{NodeInfo, Topology};

/// CQL error codes the network layer and the default handler use.
pub mod error_code {
    /// Server error.
    pub const SERVER_ERROR: i32 = 0x0000;
    /// Protocol error (malformed or unexpected frame).
    pub const PROTOCOL_ERROR: i32 = 0x000A;
    /// Bad credentials.
    pub const BAD_CREDENTIALS: i32 = 0x0100;
    /// Overloaded.
    pub const OVERLOADED: i32 = 0x1001;
    /// Invalid query.
    pub const INVALID: i32 = 0x2200;
}

/// A request frame handed to the handler.
#[derive(Debug, Clone)]
pub struct Request {
    /// The decoded header (the body length matches `body`).
    pub header: FrameHeader,
    /// The body exactly as received (in protocol v5: as carried by its
    /// segments, after their decompression). If a v4 connection negotiated
    /// compression and [`FrameHeader::flags`] has [`Flags::COMPRESSION`], it
    /// is compressed.
    pub body: Bytes,
}

/// One response frame, without its header: the connection writes the header
/// with the request's stream id and the body length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The response opcode.
    pub opcode: Opcode,
    /// Header flags (e.g. [`Flags::WARNING`] if the body starts with warnings).
    pub flags: Flags,
    /// The encoded body.
    pub body: Bytes,
}

impl Response {
    /// A response with no flags.
    pub fn new(opcode: Opcode, body: impl Into<Bytes>) -> Self {
        Response {
            opcode,
            flags: Flags::empty(),
            body: body.into(),
        }
    }

    /// Whether this is a RESULT of kind SCHEMA_CHANGE (the answer to a DDL
    /// statement), looking past the tracing id, warnings and custom payload
    /// the flags announce (in that order, as the protocol specifies). A body
    /// too short to say is not one.
    pub fn is_schema_change(&self) -> bool {
        const SCHEMA_CHANGE: i32 = 0x0005;
        if self.opcode != Opcode::Result {
            return false;
        }
        let mut r = wire::WireReader::new(&self.body);
        let kind = (|| {
            if self.flags.contains(Flags::TRACING) {
                r.read_uuid("tracing id")?;
            }
            if self.flags.contains(Flags::WARNING) {
                r.read_string_list("warnings")?;
            }
            if self.flags.contains(Flags::CUSTOM_PAYLOAD) {
                r.read_bytes_map("custom payload")?;
            }
            r.read_int("result kind")
        })();
        kind.ok() == Some(SCHEMA_CHANGE)
    }

    /// READY (empty body).
    pub fn ready() -> Self {
        Response::new(Opcode::Ready, Bytes::new())
    }

    /// ERROR with `code` and `message` and no extra fields. A message longer
    /// than a `[string]` allows is truncated (at a char boundary).
    pub fn error(code: i32, message: &str) -> Self {
        let mut end = message.len().min(u16::MAX as usize);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let msg = &message[..end];
        let mut b = BytesMut::with_capacity(6 + msg.len());
        b.put_i32(code);
        // Cannot fail: the length was cut to fit a [short] above.
        let _ = wire::put_string(&mut b, msg, "error message");
        Response::new(Opcode::Error, b.freeze())
    }

    /// Appends this response as a complete protocol v4 frame on `stream`.
    pub fn encode_frame(&self, stream: i16, out: &mut BytesMut) {
        self.encode_frame_as(ProtocolVersion::V4, stream, out);
    }

    /// Appends this response as a complete frame (a v5 envelope, before
    /// segment framing) of `version` on `stream`.
    pub fn encode_frame_as(&self, version: ProtocolVersion, stream: i16, out: &mut BytesMut) {
        FrameHeader {
            version,
            direction: Direction::Response,
            flags: self.flags,
            stream,
            opcode: self.opcode,
            // Bodies are built in memory by us and far below 4 GiB; saturate
            // rather than wrap if a handler ever builds a giant one.
            body_len: u32::try_from(self.body.len()).unwrap_or(u32::MAX),
        }
        .encode(out);
        out.put_slice(&self.body);
    }
}

/// What the handler wants done with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Send this response on the request's stream.
    Respond(Response),
    /// Close the connection without answering (a crash, a kill).
    Close,
}

impl From<Response> for Reply {
    fn from(r: Response) -> Self {
        Reply::Respond(r)
    }
}

/// Compression negotiated at STARTUP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// LZ4 (v4 bodies, v5 segments).
    Lz4,
    /// Snappy (v4 bodies only).
    Snappy,
}

impl Compression {
    /// The protocol crate's name for the algorithm.
    pub fn wire(self) -> scylla_cql::Compression {
        match self {
            Compression::Lz4 => scylla_cql::Compression::Lz4,
            Compression::Snappy => scylla_cql::Compression::Snappy,
        }
    }
}

/// Per-connection state the CQL layer may read and change.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SessionState {
    /// Compression negotiated at STARTUP.
    pub compression: Option<Compression>,
    /// `CQL_VERSION` sent at STARTUP.
    pub cql_version: Option<String>,
    /// The current keyspace (set by `USE`).
    pub keyspace: Option<String>,
    /// The authenticated user, if authentication is on.
    pub user: Option<String>,
    /// Whether STARTUP asked for `TABLETS_ROUTING_V1` (tablet routing
    /// payloads go only to such connections).
    pub tablets_routing_v1: bool,
    /// Whether STARTUP asked for `TABLETS_ROUTING_V2_EXPERIMENTAL` (offered):
    /// EXECUTE then carries a tablet version block, and only
    /// `tablets-routing-v2` payloads are sent (never v1).
    pub tablets_routing_v2: bool,
    /// The connection's protocol version: that of the first frame the
    /// client sent (v4 until then). Requests are decoded and responses
    /// encoded with it.
    pub protocol_version: ProtocolVersion,
    /// Whether STARTUP asked for `SCYLLA_USE_METADATA_ID` (offered): result
    /// metadata ids in PREPARED and EXECUTE on v4.
    pub use_metadata_id: bool,
    /// Every option STARTUP carried (driver and application identity,
    /// `CLIENT_OPTIONS`...), as ScyllaDB keeps them for
    /// `system.clients.client_options`.
    pub startup_options: BTreeMap<String, String>,
    /// Where the connection is in its handshake (`system.clients`'
    /// `connection_stage`).
    pub stage: ClientStage,
}

/// A connection's handshake stage, as `system.clients` names it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientStage {
    /// Connected, STARTUP not received yet.
    #[default]
    Established,
    /// STARTUP received, credentials not accepted yet.
    Authenticating,
    /// Ready for requests.
    Ready,
}

impl ClientStage {
    /// The name ScyllaDB shows.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientStage::Established => "ESTABLISHED",
            ClientStage::Authenticating => "AUTHENTICATING",
            ClientStage::Ready => "READY",
        }
    }
}

/// Which listener accepted a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortKind {
    /// The regular CQL port (shard = fewest connections).
    Regular,
    /// The shard-aware port (shard = source port % shards).
    ShardAware,
    /// The Unix-domain maintenance socket (shard = fewest connections, as
    /// on the regular port; no authentication).
    MaintenanceSocket,
}

/// What a connection's TLS handshake agreed on, as ScyllaDB reports it in
/// `system.clients`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSession {
    /// `TLS1.2` or `TLS1.3` (ScyllaDB's `ssl_protocol`).
    pub protocol: &'static str,
    /// The cipher suite's IANA name, e.g. `TLS_AES_256_GCM_SHA384`
    /// (`ssl_cipher_suite`).
    pub cipher_suite: String,
}

impl TlsSession {
    /// What `conn`'s handshake agreed on (`None` before it is done).
    pub(crate) fn of(conn: &rustls::ServerConnection) -> Option<TlsSession> {
        let protocol = match conn.protocol_version()? {
            rustls::ProtocolVersion::TLSv1_3 => "TLS1.3",
            rustls::ProtocolVersion::TLSv1_2 => "TLS1.2",
            _ => return None,
        };
        let suite = conn.negotiated_cipher_suite()?.suite();
        // rustls names TLS 1.3 suites `TLS13_...`; their IANA names are
        // `TLS_...` (TLS 1.2 suites' names are the IANA ones already).
        let name = suite
            .as_str()
            .map_or_else(|| format!("{suite:?}"), str::to_owned);
        let cipher_suite = match name.strip_prefix("TLS13_") {
            Some(rest) => format!("TLS_{rest}"),
            None => name,
        };
        Some(TlsSession {
            protocol,
            cipher_suite,
        })
    }
}

/// Where a request arrived, and access to the cluster around it.
pub struct ConnCtx {
    pub(crate) node: Arc<NodeInfo>,
    pub(crate) topology: Arc<Topology>,
    pub(crate) stats: Arc<NodeStats>,
    pub(crate) shard: Shard,
    pub(crate) port_kind: PortKind,
    pub(crate) peer: SocketAddr,
    pub(crate) conn_id: u64,
    /// Whether the connection came through a TLS listener.
    pub(crate) tls: bool,
    /// The TLS version and cipher suite, once the handshake is done.
    pub(crate) tls_session: std::sync::OnceLock<TlsSession>,
    /// The node's open connections (for `system.clients`).
    pub(crate) clients: Arc<crate::clients::ClientRegistry<ConnCtx>>,
    /// The statements the node prepared since it started.
    pub(crate) prepared: Arc<crate::prepared_ids::PreparedIds>,
    pub(crate) state: Mutex<SessionState>,
}

impl fmt::Debug for ConnCtx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnCtx")
            .field("node", &self.node.index)
            .field("shard", &self.shard)
            .field("port_kind", &self.port_kind)
            .field("peer", &self.peer)
            .field("conn_id", &self.conn_id)
            .finish_non_exhaustive()
    }
}

impl ConnCtx {
    /// The node's index in the cluster.
    pub fn node_index(&self) -> usize {
        self.node.index
    }

    /// The node's identity (address, host id, tokens, dc/rack, shards).
    pub fn node(&self) -> &NodeInfo {
        &self.node
    }

    /// The whole cluster's identity and up/down state (for system.peers, replica checks).
    pub fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    /// The shard this connection is on.
    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// The node's shard math (to find the shard owning a token).
    pub fn sharder(&self) -> Sharder {
        self.node.sharder()
    }

    /// Which port accepted the connection.
    pub fn port_kind(&self) -> PortKind {
        self.port_kind
    }

    /// The client's address as the node sees it (after any NAT rewrite).
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// A per-node unique id of this connection.
    pub fn connection_id(&self) -> u64 {
        self.conn_id
    }

    /// Whether the connection is encrypted (accepted by a TLS listener).
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// What the connection's TLS handshake agreed on (`None` without TLS).
    pub fn tls_session(&self) -> Option<&TlsSession> {
        self.tls_session.get()
    }

    /// The node's open client connections, this one included, in the order
    /// they were accepted (what `system.clients` lists).
    pub fn node_clients(&self) -> Vec<Arc<ConnCtx>> {
        self.clients.open()
    }

    /// A copy of the connection's session state.
    pub fn session(&self) -> SessionState {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The current keyspace.
    pub fn keyspace(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.keyspace.clone())
    }

    /// Sets the current keyspace (after a successful `USE`).
    pub fn set_keyspace(&self, keyspace: Option<String>) {
        if let Ok(mut s) = self.state.lock() {
            s.keyspace = keyspace;
        }
    }

    /// The connection's protocol version (see [`SessionState::protocol_version`]).
    pub fn protocol_version(&self) -> ProtocolVersion {
        self.state
            .lock()
            .map(|s| s.protocol_version)
            .unwrap_or_default()
    }

    /// Compression negotiated at STARTUP. In protocol v5 it applies to
    /// segments, not to frame bodies: a v5 [`Request`] body is never
    /// compressed.
    pub fn compression(&self) -> Option<Compression> {
        self.state.lock().ok().and_then(|s| s.compression)
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut SessionState)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
    }

    /// Remembers that statement `id` was prepared on this node, and counts
    /// the PREPARE.
    pub(crate) fn record_prepare(&self, id: bytes::Bytes) {
        bump_both(&self.stats, self.shard as usize, |s| &s.prepares);
        self.prepared.add(id);
    }

    /// Whether statement `id` was prepared on this node since it started.
    pub(crate) fn knows_prepared(&self, id: &[u8]) -> bool {
        self.prepared.contains(id)
    }

    /// Counts a request whose token is owned by another shard of this node.
    pub fn record_wrong_shard(&self) {
        bump_both(&self.stats, self.shard as usize, |s| {
            &s.requests_wrong_shard
        });
    }

    /// Counts a request for a tablet table that reached a non-replica node
    /// or the wrong shard of a replica node.
    pub fn record_tablet_misrouted(&self) {
        bump_both(&self.stats, self.shard as usize, |s| {
            &s.requests_tablet_misrouted
        });
    }

    /// Whether this connection negotiated `SCYLLA_USE_METADATA_ID`.
    pub fn use_metadata_id(&self) -> bool {
        self.state.lock().is_ok_and(|s| s.use_metadata_id)
    }

    /// Counts a request for a strongly consistent table that reached a
    /// node other than its tablet's leader.
    pub fn record_non_leader(&self) {
        bump_both(&self.stats, self.shard as usize, |s| &s.requests_non_leader);
    }

    /// Whether this connection negotiated `TABLETS_ROUTING_V2_EXPERIMENTAL`.
    pub fn tablets_routing_v2(&self) -> bool {
        self.state.lock().is_ok_and(|s| s.tablets_routing_v2)
    }

    /// Whether this connection negotiated `TABLETS_ROUTING_V1` at STARTUP.
    pub fn tablets_routing_v1(&self) -> bool {
        self.state.lock().is_ok_and(|s| s.tablets_routing_v1)
    }

    /// Counts a row of a batch, `misplaced` when this shard of this node
    /// does not own its partition.
    pub fn record_batch_row(&self, misplaced: bool) {
        bump_both(&self.stats, self.shard as usize, |s| &s.batch_rows);
        if misplaced {
            bump_both(&self.stats, self.shard as usize, |s| {
                &s.batch_rows_misplaced
            });
        }
    }

    /// Counts a request that reached a node which is not one of its replicas.
    pub fn record_non_replica(&self) {
        bump_both(&self.stats, self.shard as usize, |s| {
            &s.requests_non_replica
        });
    }
}

/// The future a [`RequestHandler`] returns.
pub type HandlerFuture<'a> = Pin<Box<dyn Future<Output = Reply> + Send + 'a>>;

/// Answers the requests the network layer does not handle itself
/// (QUERY, PREPARE, EXECUTE, BATCH, and anything after the handshake that is
/// not OPTIONS or REGISTER).
///
/// One handler serves every node and shard of a cluster, so it is the natural
/// owner of the cluster's shared data (schema, rows): build it with an
/// `Arc` to your store inside and pass it to
/// [`crate::TestClusterBuilder::handler`].
pub trait RequestHandler: Send + Sync + 'static {
    /// Answers one request. Called concurrently for requests of one connection.
    fn handle<'a>(&'a self, ctx: &'a ConnCtx, request: Request) -> HandlerFuture<'a>;
}

impl<F> RequestHandler for F
where
    F: Fn(&ConnCtx, Request) -> Reply + Send + Sync + 'static,
{
    fn handle<'a>(&'a self, ctx: &'a ConnCtx, request: Request) -> HandlerFuture<'a> {
        let reply = self(ctx, request);
        Box::pin(async move { reply })
    }
}

/// The placeholder handler: every request gets `Invalid` "not implemented yet".
#[derive(Debug, Clone, Copy, Default)]
pub struct NotImplementedHandler;

impl RequestHandler for NotImplementedHandler {
    fn handle<'a>(&'a self, _ctx: &'a ConnCtx, request: Request) -> HandlerFuture<'a> {
        let msg = format!(
            "{:?} is not implemented yet by the test cluster",
            request.header.opcode
        );
        Box::pin(async move { Reply::Respond(Response::error(error_code::INVALID, &msg)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scylla_cql::frame::wire::WireReader;

    #[test]
    fn error_frame_layout() {
        let mut out = BytesMut::new();
        Response::error(error_code::PROTOCOL_ERROR, "bad").encode_frame(7, &mut out);
        let h = FrameHeader::decode(&out, 1000).unwrap().unwrap();
        assert_eq!(h.opcode, Opcode::Error);
        assert_eq!(h.stream, 7);
        assert_eq!(h.direction, Direction::Response);
        let mut r = WireReader::new(&out[9..]);
        assert_eq!(r.read_int("c").unwrap(), 0x000A);
        assert_eq!(r.read_string("m").unwrap(), "bad");
        assert!(r.is_empty());
    }

    #[test]
    fn schema_change_results_are_told_apart_past_flags() {
        let kind = |k: i32| k.to_be_bytes().to_vec();
        let plain = Response::new(Opcode::Result, kind(5));
        assert!(plain.is_schema_change());
        assert!(!Response::new(Opcode::Result, kind(1)).is_schema_change());
        assert!(!Response::new(Opcode::Error, kind(5)).is_schema_change());
        assert!(!Response::new(Opcode::Result, vec![0, 0]).is_schema_change());
        // Tracing id, one warning, one custom payload entry, then the kind.
        let mut body = vec![7u8; 16];
        body.extend([0, 1, 0, 2, b'h', b'i']);
        body.extend([0, 1, 0, 1, b'k', 0, 0, 0, 3, 1, 2, 3]);
        body.extend(kind(5));
        let mut all = Response::new(Opcode::Result, body.clone());
        all.flags = Flags::TRACING
            .with(Flags::WARNING)
            .with(Flags::CUSTOM_PAYLOAD);
        assert!(all.is_schema_change());
        // The same body read without its flags is not one; cut short, neither.
        all.flags = Flags::WARNING;
        assert!(!all.is_schema_change());
        all.flags = Flags::TRACING
            .with(Flags::WARNING)
            .with(Flags::CUSTOM_PAYLOAD);
        all.body = Bytes::from(body[..body.len() - 2].to_vec());
        assert!(!all.is_schema_change());
    }

    #[test]
    fn long_error_messages_are_truncated() {
        let long = "é".repeat(40_000);
        let r = Response::error(0, &long);
        let mut rd = WireReader::new(&r.body[4..]);
        let s = rd.read_string("m").unwrap();
        assert!(s.len() <= u16::MAX as usize);
    }
}
