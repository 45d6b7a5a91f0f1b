//! Opening a connection: socket, TLS, protocol negotiation, the CQL
//! handshake, and spawning the writer, reader and tick tasks.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use bytes::BytesMut;
use scylla_cql::compression::Compressor;
use scylla_cql::frame::segment_stream::SegmentEncoder;
use scylla_cql::frame::ProtocolVersion;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::coalescing::Coalescer;
use super::stream_slots::StreamSlots;
#[cfg(feature = "tls")]
use super::tls;
use super::{
    handshake, housekeeping, reader, writer, Connection, ConnectionConfig, ConnectionError,
    ConnectionInfo, Handle, Pending, ServerInfo, SetupStep, Shared,
};

/// Opens a connection to `addr`, optionally from the local address `source`.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use scylla_driver::connection::{open, ConnectionConfig, RequestOptions};
/// use scylla_cql::frame::request::Options;
///
/// let conn = open("127.0.0.1:9042".parse()?, None, &ConnectionConfig::default()).await?;
/// let supported = conn.request(&Options, &RequestOptions::default()).await?;
/// println!("{:?}", supported.response);
/// # Ok(()) }
/// ```
pub async fn open(
    addr: SocketAddr,
    source: Option<SocketAddr>,
    config: &ConnectionConfig,
) -> Result<Connection, ConnectionError> {
    let span = match &config.unix_socket {
        Some(path) => {
            tracing::debug_span!("connection", peer = %addr, unix_socket = %path.display())
        }
        None => tracing::debug_span!("connection", peer = %addr, tls = config.uses_tls()),
    };
    open_inner(addr, source, config).instrument(span).await
}

pub(super) async fn open_inner(
    addr: SocketAddr,
    source: Option<SocketAddr>,
    config: &ConnectionConfig,
) -> Result<Connection, ConnectionError> {
    let tls = config.uses_tls();
    let result = open_streams(addr, source, config).await;
    match &result {
        Ok(conn) => tracing::debug!(
            local = %conn.info().local,
            shard = ?conn.shard(),
            tls,
            "connection opened"
        ),
        Err(e) => tracing::debug!(error = %e, tls, "connection failed"),
    }
    result
}

pub(super) async fn open_streams(
    addr: SocketAddr,
    source: Option<SocketAddr>,
    config: &ConnectionConfig,
) -> Result<Connection, ConnectionError> {
    let mut version = config.protocol.offer();
    // Bounded: each refusal moves to an older version, and there are two.
    loop {
        match open_in(addr, source, config, version).await {
            Err(ConnectionError::VersionRefused { offered, message }) => {
                let Some(older) = config.protocol.refused(offered) else {
                    return Err(ConnectionError::VersionRefused { offered, message });
                };
                tracing::info!(
                    peer = %addr,
                    refused = %offered,
                    %message,
                    next = %older,
                    "the server does not speak this protocol version; trying an older one"
                );
                version = older;
            }
            Ok(conn) => {
                config.protocol.accepted(version);
                return Ok(conn);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Connects and sets up a connection in protocol `version`.
pub(super) async fn open_in(
    addr: SocketAddr,
    source: Option<SocketAddr>,
    config: &ConnectionConfig,
    version: ProtocolVersion,
) -> Result<Connection, ConnectionError> {
    if let Some(path) = &config.unix_socket {
        return open_unix_in(addr, path, config, version).await;
    }
    let mut stream = super::open::open_socket(addr, source, &config.socket).await?;
    let local = super::open::local_addr(&stream).map_err(|source| ConnectionError::Io {
        step: SetupStep::Connect,
        source,
    })?;
    #[cfg(feature = "openssl-010")]
    if let Some(context) = &config.openssl {
        let mut stream =
            super::tls_openssl::connect(context, stream, config.socket.connect_timeout).await?;
        let encryption = Encryption::Tls {
            resumed: super::tls_openssl::resumed(&stream),
        };
        // Whether a client certificate was offered is the context's
        // business: no guess about a close after the handshake.
        let (server, leftover) = cql_handshake(&mut stream, config, version).await?;
        // One OpenSSL state for both directions: the halves share it behind
        // tokio's lock, as with rustls.
        let (rd, wr) = tokio::io::split(stream);
        return Ok(start(
            addr, local, server, leftover, rd, wr, None, encryption, config,
        ));
    }
    #[cfg(feature = "tls")]
    if let Some(tls) = &config.tls {
        let stream = tls
            .connect(addr, stream, config.socket.connect_timeout)
            .await?;
        let offered_cert = tls.client.client_auth_cert_resolver.has_certs();
        let resumed = stream.resumed();
        let encryption = Encryption::Tls { resumed };
        match stream {
            tls::TlsStream::Rustls(mut stream) => {
                let (server, leftover) = match cql_handshake(&mut stream, config, version).await {
                    Ok(done) => done,
                    Err(e) => {
                        // A close_notify (the driver's record layer sends
                        // it when its stream drops; rustls' does not).
                        writer::shutdown_once(&mut stream).await;
                        return Err(tls::closed_after_handshake(e, offered_cert));
                    }
                };
                // rustls' connection is one state for both directions: the
                // halves share it behind tokio's lock.
                let (rd, wr) = tokio::io::split(stream);
                return Ok(start(
                    addr, local, server, leftover, rd, wr, None, encryption, config,
                ));
            }
            tls::TlsStream::Driver(mut stream) => {
                let (server, leftover) = cql_handshake(&mut stream, config, version)
                    .await
                    .map_err(|e| tls::closed_after_handshake(e, offered_cert))?;
                // Each half owns its direction's keys and buffer: no lock
                // between the reader and the writer.
                let (rd, wr) = (*stream)
                    .into_split()
                    .map_err(|source| ConnectionError::Io {
                        step: SetupStep::Options,
                        source,
                    })?;
                return Ok(start(
                    addr, local, server, leftover, rd, wr, None, encryption, config,
                ));
            }
        }
    }
    let (server, leftover) = cql_handshake(&mut stream, config, version).await?;
    // The owned halves of a TCP stream: no lock between reader and writer.
    // The write half is shared by the writer task and idle requesters.
    let (rd, wr) = stream.into_split();
    let wr = Arc::new(wr);
    Ok(start(
        addr,
        local,
        server,
        leftover,
        rd,
        writer::SharedWriteHalf(wr.clone()),
        Some(wr),
        Encryption::None,
        config,
    ))
}

/// Connects to the Unix-domain socket `path` and sets the connection up in
/// protocol `version`: the same handshake and tasks as over TCP. `addr`
/// only names the node. There is no source port (the node picks the shard,
/// as on its regular port), no TLS (ScyllaDB's maintenance socket is
/// plaintext), and no direct writes (the halves of `tokio::io::split` share
/// a lock).
#[cfg(unix)]
async fn open_unix_in(
    addr: SocketAddr,
    path: &std::path::Path,
    config: &ConnectionConfig,
    version: ProtocolVersion,
) -> Result<Connection, ConnectionError> {
    let mut stream = super::open::open_unix(path, &config.socket).await?;
    let (server, leftover) = cql_handshake(&mut stream, config, version).await?;
    let (rd, wr) = tokio::io::split(stream);
    // A Unix-domain peer has no IP address: the local end is reported as
    // the unspecified address.
    let local = super::UNIX_SOCKET_NODE_ADDRESS;
    Ok(start(
        addr,
        local,
        server,
        leftover,
        rd,
        wr,
        None,
        Encryption::None,
        config,
    ))
}

/// Unix-domain sockets exist on Unix only.
#[cfg(not(unix))]
async fn open_unix_in(
    _addr: SocketAddr,
    path: &std::path::Path,
    _config: &ConnectionConfig,
    _version: ProtocolVersion,
) -> Result<Connection, ConnectionError> {
    Err(open::unix_unsupported(path).into())
}

/// The CQL handshake, bounded by the handshake timeout.
pub(super) async fn cql_handshake<S>(
    stream: &mut S,
    config: &ConnectionConfig,
    version: ProtocolVersion,
) -> Result<(ServerInfo, handshake::Leftover), ConnectionError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut step = SetupStep::Options;
    let outcome = tokio::time::timeout(
        config.handshake_timeout,
        handshake::handshake(stream, config, version, &mut step),
    )
    .await;
    match outcome {
        Ok(Ok(server)) => Ok(server),
        #[cfg(feature = "tls")]
        Ok(Err(ConnectionError::Io { step, source })) => {
            // A TLS alert after the TLS handshake (TLS 1.3 servers reject a
            // client certificate only then) arrives as an I/O error.
            match tls::classify_io(&source) {
                Some(kind) => Err(ConnectionError::Tls {
                    step,
                    kind,
                    source: Some(Box::new(source)),
                }),
                None => Err(ConnectionError::Io { step, source }),
            }
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ConnectionError::Timeout {
            step,
            after: config.handshake_timeout,
        }),
    }
}

/// How a connection is encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encryption {
    /// Plaintext.
    None,
    /// TLS; `resumed`: the handshake resumed an earlier session.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    Tls { resumed: bool },
}

/// Spawns the connection's tasks on its read and write halves.
// Each argument is a distinct part of the connection being started.
#[allow(clippy::too_many_arguments)]
pub(super) fn start<R, W>(
    addr: SocketAddr,
    local: SocketAddr,
    server: ServerInfo,
    leftover: handshake::Leftover,
    rd: R,
    wr: W,
    direct: Option<Arc<tokio::net::tcp::OwnedWriteHalf>>,
    encryption: Encryption,
    config: &ConnectionConfig,
) -> Connection
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let version = server.protocol_version;
    let slots = Arc::new(StreamSlots::new(config.max_in_flight));
    let shared = Arc::new(Shared {
        slots,
        pending: Mutex::new(Pending {
            buf: BytesMut::with_capacity(8 * 1024),
            ids: Vec::new(),
            ends: Vec::new(),
            compressor: server
                .compression
                .filter(|_| !version.uses_segments())
                .map(Compressor::new),
            segments: version
                .uses_segments()
                .then(|| SegmentEncoder::new(server.compression.is_some())),
            framed: BytesMut::new(),
            writing: false,
            direct: direct.clone(),
        }),
        writer_wake: Notify::new(),
        tick_wake: Notify::new(),
        tick_parked: AtomicBool::new(false),
        broken: OnceLock::new(),
        cancel: CancellationToken::new(),
        counters: config.counters.clone(),
        last_write: AtomicU64::new(0),
        frames_in: AtomicU64::new(0),
        epoch: Instant::now(),
        coalescer: Coalescer::new(config.coalescing, direct.is_some()),
        max_frame_len: config.max_frame_len,
        version,
        peer: addr,
        keyspace: arc_swap::ArcSwapOption::new(config.keyspace.clone().map(Arc::new)),
    });
    let segments = version
        .uses_segments()
        .then(|| SegmentEncoder::new(server.compression.is_some()));
    tokio::spawn(writer::run(shared.clone(), wr, segments));
    tokio::spawn(reader::run(
        shared.clone(),
        rd,
        reader::ReaderConfig {
            context: server.response_context,
            compression: server.compression,
            events: config.events.clone(),
            version,
            segments: leftover.segments,
        },
        leftover.buf,
    ));
    tokio::spawn(housekeeping::run(
        shared.clone(),
        housekeeping::TickConfig {
            tick: config.timeout_tick,
            heartbeat_interval: config.heartbeat_interval,
            heartbeat_timeout: config.heartbeat_timeout,
            stall_probe_after: config.stall_probe_after,
            stall_probe_timeout: config.stall_probe_timeout,
            max_orphans: config.max_orphans,
        },
    ));
    Connection {
        inner: Arc::new(Handle {
            info: ConnectionInfo {
                peer: addr,
                local,
                server,
                tls: encryption != Encryption::None,
                tls_resumed: encryption == Encryption::Tls { resumed: true },
            },
            shared,
        }),
    }
}
