//! One client connection: read frames, answer them, push events.
//!
//! The task reads into a bounded buffer and parses complete frames with the
//! header's body-length check, so a hostile peer cannot make it allocate
//! more than one maximum-size frame. Malformed input (bad version, unknown
//! opcode, a response opcode, an oversized length, an undecodable body) is
//! answered with a protocol error (0x000A) and, when framing is lost, the
//! connection is closed; nothing here panics on input.
//!
//! The connection-level protocol is handled here: OPTIONS, the STARTUP and
//! AUTH_RESPONSE steps of the handshake (through [`crate::admission`]), and
//! REGISTER. Every other request goes to the [`RequestHandler`], answered in
//! the connection's task when it can be at once, else in a task of its own
//! (a pending handler, an injected latency), so requests of one connection
//! are served concurrently and none waits for a slow one. Responses and
//! events go through one queue to the writer, which batches what is queued
//! into one `write`.
//!
//! # Protocol versions
//!
//! A connection speaks the version of the first frame its client sends (v4
//! or v5, up to [`crate::ClusterConfig::max_protocol_version`]); every later
//! frame must carry it (else a protocol error and the connection closes),
//! and every response carries it. A first frame of a version the cluster
//! does not serve is refused as real servers refuse it (see
//! [`Conn::refuse_version`]), so that clients negotiate down.
//!
//! In v5 the handshake travels in bare frames, as in v4: OPTIONS, STARTUP
//! and their answers. From the READY or AUTHENTICATE the node sends on, every
//! message in both directions is an envelope inside checksummed segments
//! (`native_protocol_v5.spec`, section 2), compressed per segment with LZ4 if
//! STARTUP asked for it. The reader switches to a [`SegmentDecoder`] right
//! after queueing that answer; the writer switches to a [`SegmentEncoder`]
//! when it reaches [`Outgoing::StartSegments`], queued right behind the
//! answer, and then frames each batch of queued frames (the same batching as
//! in v4) as self-contained segments: one write, one or a few segments. A
//! segment from the client that fails its CRC24 or CRC32 closes the
//! connection (counted as `segment_checksum_failures`).

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use scylla_cql::frame::envelope::decode_envelope;
use scylla_cql::frame::header::{Direction, Flags, FrameHeader, Opcode, HEADER_LEN};
use scylla_cql::frame::segment::{self, SegmentError};
use scylla_cql::frame::segment_stream::{SegmentDecoder, SegmentEncoder};
use scylla_cql::frame::wire::{self, WireReader};
use scylla_cql::frame::ProtocolVersion;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The read half of a connection (plain TCP, TLS or Unix-domain).
pub(crate) type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
/// The write half of a connection (plain TCP, TLS or Unix-domain).
pub(crate) type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::events::EventKind;
use crate::handler::{
    error_code, ClientStage, Compression, ConnCtx, PortKind, Reply, Request, Response,
};
use crate::node_shared::NodeShared;
pub(crate) use crate::outgoing::Outgoing;
use crate::shard::ShardConnection;
use crate::stats::bump_both;
use crate::supported::{protocol_versions, supported_response_ext};

/// Frames queued for the writer per connection.
const OUT_QUEUE: usize = 1024;
/// Most requests of one connection in flight at once (the v4 stream-id space).
const MAX_IN_FLIGHT: usize = 32 * 1024;
/// Most bytes gathered into one write.
const WRITE_BATCH: usize = 64 * 1024;
/// How long a closing connection may take to flush its last frames.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);
/// The authenticator class named in AUTHENTICATE.
const PASSWORD_AUTHENTICATOR: &str = "org.apache.cassandra.auth.PasswordAuthenticator";

/// Serves one accepted connection until it closes or `cancel` fires.
pub(crate) async fn serve(
    node: Arc<NodeShared>,
    (rd, wr): (ReadHalf, WriteHalf),
    ctx: Arc<ConnCtx>,
    slot: ShardConnection,
    cancel: CancellationToken,
) {
    let (tx, rx) = mpsc::channel::<Outgoing>(OUT_QUEUE);
    let id = ctx.conn_id;
    // Listed in system.clients while this task serves it.
    let _listed = node.clients.register(ctx.conn_id, &ctx);
    let mask = node.events.add(id, tx.clone());
    let mut writer = std::pin::pin!(write_loop(node.clone(), wr, rx));
    let mut conn = Conn {
        node: node.clone(),
        ctx,
        out: tx,
        events: mask,
        phase: Phase::AwaitStartup,
        tasks: JoinSet::new(),
        version: None,
        deframer: None,
    };
    let finished_reading = tokio::select! {
        _ = cancel.cancelled() => false,
        _ = &mut writer => false,
        () = conn.read_loop(rd) => true,
    };
    node.events.remove(id);
    // Dropping `conn` aborts in-flight request tasks and drops the last
    // sender, so the writer ends once it has flushed what is queued.
    drop(conn);
    if finished_reading {
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, async {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = &mut writer => {}
            }
        })
        .await;
    }
    drop(slot);
}

/// Writes queued frames, batching whatever is queued into one write; after
/// [`Outgoing::StartSegments`], each batch goes out as v5 segments.
async fn write_loop(node: Arc<NodeShared>, mut wr: WriteHalf, mut rx: mpsc::Receiver<Outgoing>) {
    let mut batch = BytesMut::with_capacity(WRITE_BATCH);
    let mut framed = BytesMut::new();
    let mut encoder: Option<SegmentEncoder> = None;
    // A marker met while batching: handled once the batch before it is out.
    let mut held: Option<Outgoing> = None;
    loop {
        let item = match held.take() {
            Some(item) => item,
            None => match rx.recv().await {
                Some(item) => item,
                None => break,
            },
        };
        let first = match item {
            Outgoing::StartSegments { compressed } => {
                encoder = Some(SegmentEncoder::new(compressed));
                continue;
            }
            Outgoing::Frame(f) => f,
        };
        let in_segments = encoder.is_some();
        batch.clear();
        append_frame(&node, &mut batch, &first, in_segments);
        while batch.len() < WRITE_BATCH {
            match rx.try_recv() {
                Ok(Outgoing::Frame(f)) => append_frame(&node, &mut batch, &f, in_segments),
                Ok(marker) => {
                    held = Some(marker);
                    break;
                }
                Err(_) => break,
            }
        }
        let bytes = match encoder.as_mut() {
            None => &batch[..],
            Some(enc) => {
                framed.clear();
                if let Err(e) = enc.encode_envelopes(&batch, &mut framed) {
                    // Cannot happen: the batch is whole frames we encoded.
                    tracing::warn!(node = node.info.index, "cannot frame responses: {e}");
                    return;
                }
                corrupt_segments(&node, &mut framed, enc.is_compressed());
                &framed[..]
            }
        };
        if wr.write_all(bytes).await.is_err() {
            return;
        }
    }
    let _ = wr.shutdown().await;
}

/// Appends one frame to the writer's batch, applying what must change in
/// it on the way out.
fn append_frame(node: &NodeShared, batch: &mut BytesMut, frame: &[u8], in_segments: bool) {
    let start = batch.len();
    batch.put_slice(frame);
    if frame.len() < HEADER_LEN {
        return; // Cannot happen: every frame has its header.
    }
    if in_segments {
        // Events are encoded once for all connections of a node, in a v4
        // header; on a v5 connection every frame says 5.
        batch[start] = 0x80 | ProtocolVersion::V5.number();
    } else if frame[0] & 0x7f == ProtocolVersion::V4.number()
        // Bit 20 of the big-endian length at 5..9 is bit 4 of byte 6.
        && frame[6] & 0x10 == 0
        && node.faults.take_damaged_v4_length()
    {
        batch[start + 6] |= 0x10;
        node.stats
            .v4_lengths_damaged
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// The corrupt-segments fault: flips the middle payload byte of as many of
/// the segments in `out` (all of them self-contained, just encoded) as the
/// fault has armed, after their CRC32 was computed.
fn corrupt_segments(node: &NodeShared, out: &mut BytesMut, compressed: bool) {
    if !node.faults.corrupting_segments() {
        return;
    }
    let head = segment::header_and_crc_len(compressed);
    let mut pos = 0;
    while pos < out.len() {
        let Ok(Some(h)) = segment::decode_header(&out[pos..], compressed) else {
            return; // Cannot happen: the encoder wrote these headers.
        };
        if h.payload_len > 0 && node.faults.take_corrupt_segment() {
            out[pos + head + h.payload_len / 2] ^= 0xFF;
            node.stats
                .segments_corrupted
                .fetch_add(1, Ordering::Relaxed);
        }
        pos += head + h.payload_len + segment::TRAILER_LEN;
    }
}

/// Where the connection is in its handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitStartup,
    AwaitAuth,
    Ready,
}

/// Whether to keep the connection after a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    Continue,
    Close,
}

/// Why the reader stops.
#[derive(Debug)]
enum Broken {
    /// Answer with a protocol error on `stream`, then close.
    Protocol { stream: i16, message: String },
    /// The first frame has a version the cluster does not serve.
    UnservedVersion { stream: i16, client_version: u8 },
    /// A segment from the client is damaged or breaks the framing rules:
    /// close without an answer (the stream cannot be resynchronised).
    Segment(SegmentError),
}

/// What the read buffer holds.
enum Step {
    /// A whole frame: its header and body.
    Frame(FrameHeader, Bytes),
    /// The buffer must hold this many bytes for the next step.
    NeedBytes(usize),
}

struct Conn {
    node: Arc<NodeShared>,
    ctx: Arc<ConnCtx>,
    out: mpsc::Sender<Outgoing>,
    events: Arc<AtomicU8>,
    phase: Phase,
    /// Request tasks; each yields whether to close the connection.
    tasks: JoinSet<Next>,
    /// The version of the client's first frame, once it came.
    version: Option<ProtocolVersion>,
    /// Takes envelopes out of segments once a v5 connection's handshake
    /// answer (READY or AUTHENTICATE) is out.
    deframer: Option<SegmentDecoder>,
}

impl Conn {
    async fn read_loop(&mut self, mut rd: ReadHalf) {
        let mut buf = BytesMut::with_capacity(8 * 1024);
        loop {
            // Answer every complete frame in the buffer.
            let wanted = loop {
                match self.next_frame(&mut buf) {
                    Ok(Step::NeedBytes(n)) => break n,
                    Ok(Step::Frame(h, body)) => {
                        if self.dispatch(h, body).await == Next::Close {
                            return;
                        }
                    }
                    Err(broken) => {
                        self.broken(broken).await;
                        return;
                    }
                }
            };
            // Room for the rest of the current frame, in steps of at most
            // 64 KiB so a lying length does not allocate ahead of the data.
            let missing = wanted.saturating_sub(buf.len()).clamp(4096, 64 * 1024);
            if buf.capacity() - buf.len() < missing {
                buf.reserve(missing);
            }
            let can_read = self.tasks.len() < MAX_IN_FLIGHT;
            tokio::select! {
                r = rd.read_buf(&mut buf), if can_read => match r {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                },
                Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                    // A panicking handler task counts as a crash: close.
                    if done.unwrap_or(Next::Close) == Next::Close {
                        return;
                    }
                }
            }
        }
    }

    /// The connection's version (v4 until the first frame came).
    fn version(&self) -> ProtocolVersion {
        self.version.unwrap_or(ProtocolVersion::V4)
    }

    /// The next frame in `buf`: a bare frame, or after a v5 handshake an
    /// envelope out of the segments in `buf`.
    fn next_frame(&mut self, buf: &mut BytesMut) -> Result<Step, Broken> {
        let max_body = self.node.config.max_body_len;
        if let Some(deframer) = self.deframer.as_mut() {
            let envelope = match deframer.decode_next(buf) {
                Ok(Some(e)) => e,
                Ok(None) => return Ok(Step::NeedBytes(deframer.needed(buf))),
                Err(e) => return Err(Broken::Segment(e)),
            };
            let stream = match envelope.get(2..4) {
                Some(s) => i16::from_be_bytes([s[0], s[1]]),
                None => 0,
            };
            let h = match FrameHeader::decode(&envelope, max_body) {
                Ok(Some(h)) if h.frame_len() == envelope.len() => h,
                Ok(_) => {
                    let message = "envelope length does not match its segment".to_owned();
                    return Err(Broken::Protocol { stream, message });
                }
                Err(e) => {
                    let message = format!("invalid frame header: {e}");
                    return Err(Broken::Protocol { stream, message });
                }
            };
            self.check_header(&h)?;
            return Ok(Step::Frame(h, envelope.slice(HEADER_LEN..)));
        }
        if self.version.is_none() {
            if let Some(&first) = buf.first() {
                let n = first & 0x7f;
                let served = ProtocolVersion::from_number(n)
                    .is_some_and(|v| v <= self.node.config.max_protocol_version);
                // A response bit is a different error (below).
                if first & 0x80 == 0 && !served {
                    let Some(s) = buf.get(2..4) else {
                        return Ok(Step::NeedBytes(HEADER_LEN));
                    };
                    let stream = i16::from_be_bytes([s[0], s[1]]);
                    return Err(Broken::UnservedVersion {
                        stream,
                        client_version: n,
                    });
                }
            }
        }
        let h = match FrameHeader::decode(buf, max_body) {
            Ok(None) => return Ok(Step::NeedBytes(HEADER_LEN)),
            Ok(Some(h)) => h,
            Err(e) => {
                // Framing is lost: answer on the stream the bytes claim (0
                // if there are not even 4 of them), then close.
                let stream = match buf.get(2..4) {
                    Some(s) => i16::from_be_bytes([s[0], s[1]]),
                    None => 0,
                };
                let message = format!("invalid frame header: {e}");
                return Err(Broken::Protocol { stream, message });
            }
        };
        self.check_header(&h)?;
        if buf.len() < h.frame_len() {
            return Ok(Step::NeedBytes(h.frame_len()));
        }
        let frame = buf.split_to(h.frame_len()).freeze();
        Ok(Step::Frame(h, frame.slice(HEADER_LEN..)))
    }

    /// Direction and version of a client's frame; the first one sets the
    /// connection's version.
    fn check_header(&mut self, h: &FrameHeader) -> Result<(), Broken> {
        if h.direction != Direction::Request || h.opcode.direction() != Direction::Request {
            let message = format!("unexpected {:?} frame from a client", h.opcode);
            return Err(Broken::Protocol {
                stream: h.stream,
                message,
            });
        }
        match self.version {
            None => {
                self.version = Some(h.version);
                self.ctx.update(|s| s.protocol_version = h.version);
                if h.version == ProtocolVersion::V5 {
                    let shard = self.ctx.shard as usize;
                    bump_both(&self.node.stats, shard, |s| &s.connections_v5);
                }
                Ok(())
            }
            Some(v) if v == h.version => Ok(()),
            // ScyllaDB's wording.
            Some(v) => Err(Broken::Protocol {
                stream: h.stream,
                message: format!(
                    "Invalid message version. Got {} but previous messages on this connection had version {}",
                    h.version.number(),
                    v.number()
                ),
            }),
        }
    }

    /// Answers (or not) what broke the connection; the caller closes it.
    async fn broken(&mut self, broken: Broken) {
        match broken {
            Broken::Protocol { stream, message } => self.protocol_error(stream, &message).await,
            Broken::UnservedVersion {
                stream,
                client_version,
            } => self.refuse_version(stream, client_version).await,
            Broken::Segment(e) => {
                let shard = self.ctx.shard as usize;
                let stats = &self.node.stats;
                match e {
                    SegmentError::HeaderChecksum { .. } | SegmentError::PayloadChecksum { .. } => {
                        bump_both(stats, shard, |s| &s.segment_checksum_failures)
                    }
                    _ => bump_both(stats, shard, |s| &s.protocol_errors),
                }
                tracing::debug!(
                    node = self.node.info.index,
                    conn = self.ctx.conn_id,
                    "closing a v5 connection: {e}"
                );
            }
        }
    }

    /// Refuses a first frame of version `client_version`, which the cluster
    /// does not serve, and lets the caller close the connection.
    ///
    /// What real servers do (looked up in their sources and in driver
    /// logs):
    /// - ScyllaDB (`transport/server.cc`, `read_frame`): on a first byte
    ///   above its current version (4) it sets the connection's version to
    ///   4 and throws a protocol exception "Invalid or unsupported protocol
    ///   version: 5"; the ERROR (code 0x000A) goes out in a v4 frame. A
    ///   later frame of another version gets "Invalid message version. Got
    ///   X but previous messages on this connection had version Y".
    /// - Cassandra (`ProtocolVersion.decode`): "Invalid or unsupported
    ///   protocol version (66); supported versions are (3/v3, 4/v4,
    ///   5/v5-beta, 65/dse-v1)" (a Python driver log against Cassandra
    ///   3/4), answered in the highest version it supports (or, for a
    ///   known but too old one, in the client's); newer in-JVM tests expect
    ///   "Invalid or unsupported protocol version (84); the lowest supported
    ///   version is 3 and the greatest is 4", and its decoder recovers the
    ///   stream id from the attempted version's header layout
    ///   (CASSANDRA-21508), i.e. answers on the client's stream.
    /// - Drivers key on the text: the Python driver marks the connection
    ///   `is_unsupported_proto_version` when the protocol error's message
    ///   contains "unsupported protocol version" (on a stream it is
    ///   waiting on, so the stream id must be the request's), then
    ///   downgrades ("Downgrading core protocol version from 66 to 65"); the
    ///   Java driver 4 (`ProtocolInitHandler`) retries a lower version when
    ///   the first request (OPTIONS or STARTUP) gets PROTOCOL_ERROR or
    ///   SERVER_ERROR with "Invalid or unsupported protocol version" (or
    ///   "Beta version of the protocol used") in the message; the C#, Lua
    ///   and Go drivers look for the same prefix.
    ///
    /// So: Cassandra's message, which contains ScyllaDB's prefix, listing
    /// only the versions really served; header version: the highest one
    /// served (4 on a v4-only cluster, as ScyllaDB), or 4 for a client
    /// older than every version served; the client's stream id.
    async fn refuse_version(&mut self, stream: i16, client_version: u8) {
        let max = self.node.config.max_protocol_version;
        let shard = self.ctx.shard as usize;
        bump_both(&self.node.stats, shard, |s| &s.version_refusals);
        bump_both(&self.node.stats, shard, |s| &s.protocol_errors);
        let message = format!(
            "Invalid or unsupported protocol version ({client_version}); supported versions are ({})",
            protocol_versions(max).join(", ")
        );
        let reply_version = if client_version < ProtocolVersion::V4.number() {
            ProtocolVersion::V4
        } else {
            max
        };
        sleep(self.node.faults.latency()).await;
        let r = Response::error(error_code::PROTOCOL_ERROR, &message);
        let _ = send(&self.out, reply_version, stream, &r).await;
    }

    async fn dispatch(&mut self, h: FrameHeader, body: Bytes) -> Next {
        match (h.opcode, self.phase) {
            (Opcode::Options, _) => {
                // ScyllaDB advertises the TLS shard-aware port on every
                // connection of a node that has a shard-aware port.
                let ssl = self.ctx.node.shard_aware_port.and_then(|_| {
                    self.node
                        .config
                        .tls
                        .as_ref()
                        .and_then(|t| t.shard_aware_port)
                });
                let r = supported_response_ext(
                    self.ctx.shard,
                    self.ctx.node.shards.get(),
                    (self.ctx.node.shard_aware_port, ssl),
                    self.node.config.max_protocol_version,
                    self.node.config.use_metadata_id,
                    self.node.config.tablets_routing_v2,
                );
                if self.phase == Phase::AwaitStartup && self.version().uses_segments() {
                    // In v5 this answer must leave unframed, before the
                    // STARTUP answer switches the writer to segments.
                    self.respond_now(h.stream, r).await;
                } else {
                    self.respond_later(h.stream, r);
                }
                Next::Continue
            }
            (Opcode::Startup, Phase::AwaitStartup) => self.startup(h.stream, &body).await,
            (Opcode::AuthResponse, Phase::AwaitAuth) => self.auth_response(h.stream, &body).await,
            (Opcode::Register, Phase::Ready) => {
                // After a STARTUP with compression, REGISTER may come compressed.
                let max = self.node.config.max_body_len;
                let comp = self.ctx.compression().map(Compression::wire);
                match decode_envelope(&h, body, comp, max) {
                    Ok(env) => self.register(h.stream, &env.body).await,
                    Err(e) => {
                        let msg = format!("invalid REGISTER frame: {e}");
                        self.protocol_error_keep(h.stream, &msg).await;
                        Next::Continue
                    }
                }
            }
            (_, Phase::Ready)
                if h.opcode != Opcode::Startup && h.opcode != Opcode::AuthResponse =>
            {
                self.handle(Request { header: h, body })
            }
            (op, phase) => {
                let msg = format!("unexpected {op:?} message in handshake phase {phase:?}");
                self.protocol_error_keep(h.stream, &msg).await;
                Next::Continue
            }
        }
    }

    async fn startup(&mut self, stream: i16, body: &[u8]) -> Next {
        if self.node.faults.take_withheld_startup() {
            tracing::debug!(
                node = self.node.info.index,
                conn = self.ctx.conn_id,
                "leaving STARTUP unanswered (fault)"
            );
            return Next::Continue;
        }
        let opts = match WireReader::new(body).read_string_map("STARTUP options") {
            Ok(o) => o,
            Err(e) => {
                self.protocol_error_keep(stream, &format!("invalid STARTUP body: {e}"))
                    .await;
                return Next::Continue;
            }
        };
        let compression = match opts.get("COMPRESSION").map(String::as_str) {
            None => None,
            Some(c) if c.eq_ignore_ascii_case("lz4") => Some(Compression::Lz4),
            Some(c) if c.eq_ignore_ascii_case("snappy") && !self.version().uses_segments() => {
                Some(Compression::Snappy)
            }
            Some(c) if c.eq_ignore_ascii_case("snappy") => {
                let msg = "Snappy compression is not supported in protocol v5 (segments are LZ4 or uncompressed)";
                self.protocol_error_keep(stream, msg).await;
                return Next::Continue;
            }
            Some(other) => {
                let msg = format!("Unknown compression algorithm: {other}");
                self.protocol_error_keep(stream, &msg).await;
                return Next::Continue;
            }
        };
        self.ctx.update(|s| {
            s.compression = compression;
            s.cql_version = opts.get("CQL_VERSION").cloned();
            s.tablets_routing_v2 = self.node.config.tablets_routing_v2
                && opts.contains_key(crate::supported::TABLETS_ROUTING_V2);
            // v2 subsumes v1: a connection that has v2 gets no v1 payloads.
            s.tablets_routing_v1 =
                !s.tablets_routing_v2 && opts.contains_key(crate::supported::TABLETS_ROUTING_V1);
            s.use_metadata_id = self.node.config.use_metadata_id
                && opts.contains_key(crate::supported::SCYLLA_USE_METADATA_ID);
            s.stage = if self.requires_auth() {
                ClientStage::Authenticating
            } else {
                ClientStage::Ready
            };
            s.startup_options = opts.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        });
        let stats = self.node.stats.clone();
        let shard = self.ctx.shard as usize;
        bump_both(&stats, shard, |s| &s.handshakes_started);
        if self.requires_auth() {
            // The cheap step: ask for credentials. The expensive one (the
            // password check) is AUTH_RESPONSE, under admission.
            let mut b = BytesMut::new();
            let _ = wire::put_string(&mut b, PASSWORD_AUTHENTICATOR, "authenticator");
            self.phase = Phase::AwaitAuth;
            self.respond_now(stream, Response::new(Opcode::Authenticate, b.freeze()))
                .await;
            self.start_segments_if_v5().await;
            return Next::Continue;
        }
        let admitted = self
            .node
            .admission(shard)
            .run(&stats, shard, async {})
            .await;
        if admitted.is_err() {
            return Next::Close;
        }
        self.phase = Phase::Ready;
        self.respond_now(stream, Response::ready()).await;
        self.start_segments_if_v5().await;
        bump_both(&stats, shard, |s| &s.handshakes_finished);
        Next::Continue
    }

    /// Whether STARTUP is answered with AUTHENTICATE: when the cluster
    /// requires credentials, except on the maintenance socket (ScyllaDB
    /// gives its connections superuser rights without asking).
    fn requires_auth(&self) -> bool {
        self.node.config.auth.is_some() && self.ctx.port_kind != PortKind::MaintenanceSocket
    }

    /// On a v5 connection, right after READY or AUTHENTICATE was queued:
    /// every later message in both directions travels in segments.
    async fn start_segments_if_v5(&mut self) {
        if !self.version().uses_segments() || self.deframer.is_some() {
            return;
        }
        let compressed = self.ctx.compression() == Some(Compression::Lz4);
        let _ = self.out.send(Outgoing::StartSegments { compressed }).await;
        let max_envelope = self.node.config.max_body_len.saturating_add(HEADER_LEN);
        self.deframer = Some(SegmentDecoder::new(compressed, max_envelope));
    }

    async fn auth_response(&mut self, stream: i16, body: &[u8]) -> Next {
        if self.node.faults.take_close_during_auth() {
            tracing::debug!(
                node = self.node.info.index,
                conn = self.ctx.conn_id,
                "closing the connection instead of answering AUTH_RESPONSE (fault)"
            );
            return Next::Close;
        }
        let token = match WireReader::new(body).read_bytes("AUTH_RESPONSE token") {
            Ok(t) => t.unwrap_or_default().to_vec(),
            Err(e) => {
                self.protocol_error_keep(stream, &format!("invalid AUTH_RESPONSE: {e}"))
                    .await;
                return Next::Continue;
            }
        };
        let stats = self.node.stats.clone();
        let shard = self.ctx.shard as usize;
        let expected = self.node.config.auth.clone();
        // The password check is the CPU stage: run it under admission.
        let check = async move {
            // PLAIN SASL: [authzid] NUL user NUL password.
            let mut parts = token.split(|&b| b == 0);
            let _authzid = parts.next();
            let user = parts
                .next()
                .map(|u| String::from_utf8_lossy(u).into_owned());
            let pass = parts
                .next()
                .map(|p| String::from_utf8_lossy(p).into_owned());
            match (expected, user, pass) {
                (Some(c), Some(u), Some(p)) if c.username == u && c.password == p => Some(u),
                _ => None,
            }
        };
        let user = match self.node.admission(shard).run(&stats, shard, check).await {
            Ok(u) => u,
            Err(_) => return Next::Close,
        };
        match user {
            Some(u) => {
                self.ctx.update(|s| {
                    s.user = Some(u);
                    s.stage = ClientStage::Ready;
                });
                self.phase = Phase::Ready;
                let mut b = BytesMut::new();
                let _ = wire::put_bytes(&mut b, None, "auth token");
                self.respond_now(stream, Response::new(Opcode::AuthSuccess, b.freeze()))
                    .await;
                bump_both(&stats, shard, |s| &s.handshakes_finished);
            }
            None => {
                let msg = "Provided username and/or password are incorrect";
                self.respond_now(stream, Response::error(error_code::BAD_CREDENTIALS, msg))
                    .await;
            }
        }
        Next::Continue
    }

    async fn register(&mut self, stream: i16, body: &[u8]) -> Next {
        let names = match WireReader::new(body).read_string_list("REGISTER events") {
            Ok(n) => n,
            Err(e) => {
                self.protocol_error_keep(stream, &format!("invalid REGISTER body: {e}"))
                    .await;
                return Next::Continue;
            }
        };
        let mut mask = 0u8;
        for n in &names {
            match EventKind::from_name(n) {
                Some(k) => mask |= k.bit(),
                None => {
                    let msg = format!("Invalid value '{n}' for Type");
                    self.protocol_error_keep(stream, &msg).await;
                    return Next::Continue;
                }
            }
        }
        self.events.fetch_or(mask, Ordering::Relaxed);
        self.respond_later(stream, Response::ready());
        Next::Continue
    }

    /// Answers a request. The handler runs in the connection's task, and
    /// when it answers at once (the CQL handler always does) with no latency
    /// injected, the response is queued for the writer right away; only what
    /// must wait (a pending handler, an injected latency, a full writer
    /// queue) goes to a task of its own, so that it never holds up reading.
    ///
    /// Answering inline is how a real node serves a connection (ScyllaDB runs
    /// each request as a continuation on the connection's shard, not as a
    /// thread of its own). A task per request cost a spawn, a join and a
    /// wake-up per request, and a saturated node starved requests: past 256
    /// runnable tasks on a worker, tokio moves them in batches of 129 to its
    /// global queue, which a busy worker serves only now and then. With a
    /// one-thread node at concurrency 1024 on one connection (the
    /// `throughput` example), about 5% of the requests waited 150 ms while
    /// the median waited 3 ms, in runs of 129 consecutive requests.
    fn handle(&mut self, req: Request) -> Next {
        let stream = req.header.stream;
        let version = self.version();
        // Overload faults: a statement answered without being run.
        if matches!(
            req.header.opcode,
            Opcode::Query | Opcode::Execute | Opcode::Batch
        ) {
            if let Some(answer) = self.node.faults.take_overload() {
                self.respond_later(stream, overload_response(answer));
                return Next::Continue;
            }
        }
        let (node, ctx) = (self.node.clone(), self.ctx.clone());
        // A shard busy with TLS handshakes (their modelled CPU time) serves
        // the request when it is done with them.
        let busy = self
            .node
            .admission(self.ctx.shard as usize)
            .cpu_busy_until();
        let mut answer = Box::pin(async move {
            if let Some(until) = busy {
                tokio::time::sleep_until(until.into()).await;
            }
            node.handler.handle(&ctx, req).await
        });
        // Polled once with a no-op waker: if it is pending, the task it
        // moves to polls it again at once, registering its own waker.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let reply = match answer.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(reply) => reply,
            std::task::Poll::Pending => {
                let (node, ctx, out) = (self.node.clone(), self.ctx.clone(), self.out.clone());
                self.tasks.spawn(async move {
                    match answer.await {
                        Reply::Close => Next::Close,
                        Reply::Respond(r) => deliver(node, ctx, out, version, stream, r).await,
                    }
                });
                return Next::Continue;
            }
        };
        let r = match reply {
            Reply::Close => return Next::Close,
            Reply::Respond(r) => r,
        };
        if !self.node.faults.latency_of(&r).is_zero() {
            let (node, ctx, out) = (self.node.clone(), self.ctx.clone(), self.out.clone());
            self.tasks
                .spawn(deliver(node, ctx, out, version, stream, r));
            return Next::Continue;
        }
        match self
            .out
            .try_send(served(&self.node, &self.ctx, version, stream, r))
        {
            Ok(()) => Next::Continue,
            Err(mpsc::error::TrySendError::Closed(_)) => Next::Close,
            Err(mpsc::error::TrySendError::Full(frame)) => {
                // The writer is behind: wait for room in a task, reading on.
                let out = self.out.clone();
                self.tasks.spawn(async move { queue(&out, frame).await });
                Next::Continue
            }
        }
    }

    /// Responds from a task, after the node's injected latency, without
    /// holding up the reader.
    fn respond_later(&mut self, stream: i16, r: Response) {
        let (node, out) = (self.node.clone(), self.out.clone());
        // After STARTUP (the only time READY goes out uncompressed, through
        // `respond_now`), frames use the negotiated compression.
        let version = self.version();
        let d = node.faults.latency_of(&r);
        let r = compressed(&self.ctx, version, r);
        self.tasks.spawn(async move {
            sleep(d).await;
            send(&out, version, stream, &r).await
        });
    }

    /// Responds in order, before reading on (handshake steps).
    async fn respond_now(&mut self, stream: i16, r: Response) {
        sleep(self.node.faults.latency_of(&r)).await;
        let _ = send(&self.out, self.version(), stream, &r).await;
    }

    /// A protocol error after which the connection stays usable.
    async fn protocol_error_keep(&mut self, stream: i16, msg: &str) {
        bump_both(&self.node.stats, self.ctx.shard as usize, |s| {
            &s.protocol_errors
        });
        self.respond_now(stream, Response::error(error_code::PROTOCOL_ERROR, msg))
            .await;
    }

    /// A protocol error before closing (the caller returns).
    async fn protocol_error(&mut self, stream: i16, msg: &str) {
        self.protocol_error_keep(stream, msg).await;
    }
}

/// The error an overload fault answers with: OVERLOADED, or ScyllaDB's
/// rate-limit error (`SCYLLA_RATE_LIMIT_ERROR`: the advertised code, then
/// `op_type` = write and `rejected_by_coordinator` = 1).
fn overload_response(answer: crate::faults::OverloadAnswer) -> Response {
    match answer {
        crate::faults::OverloadAnswer::Overloaded => {
            Response::error(error_code::OVERLOADED, "overloaded (injected fault)")
        }
        crate::faults::OverloadAnswer::RateLimited => {
            let r = Response::error(
                crate::supported::RATE_LIMIT_ERROR_CODE,
                "per-partition rate limit reached (injected fault)",
            );
            let mut body = BytesMut::from(&r.body[..]);
            body.extend_from_slice(&[1, 1]);
            Response::new(r.opcode, body.freeze())
        }
    }
}

/// `r` with its body compressed if the (v4) connection negotiated
/// compression (and the body is not already compressed). On the impossible
/// failure of compressing an in-memory body, it goes out uncompressed (a
/// client reads the flag of every frame). In v5 envelopes are never
/// compressed: their segments are.
fn compressed(ctx: &ConnCtx, version: ProtocolVersion, mut r: Response) -> Response {
    if version.uses_segments() {
        return r;
    }
    let Some(c) = ctx.compression() else {
        return r;
    };
    if r.flags.contains(Flags::COMPRESSION) {
        return r;
    }
    let c = c.wire();
    let mut out = BytesMut::with_capacity(c.max_compressed_len(r.body.len()));
    if c.compress_into(&r.body, &mut out).is_ok() {
        r.body = out.freeze();
        r.flags = r.flags.with(Flags::COMPRESSION);
    }
    r
}

/// Waits `d` (no timer when it is zero).
async fn sleep(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

/// A handler's response, counted as served, as the frame the writer sends.
fn served(
    node: &NodeShared,
    ctx: &ConnCtx,
    version: ProtocolVersion,
    stream: i16,
    r: Response,
) -> Outgoing {
    bump_both(&node.stats, ctx.shard as usize, |s| &s.requests_served);
    Outgoing::Frame(encode(version, stream, &compressed(ctx, version, r)))
}

/// A handler's response after the node's injected latency (in a task of
/// its own).
async fn deliver(
    node: Arc<NodeShared>,
    ctx: Arc<ConnCtx>,
    out: mpsc::Sender<Outgoing>,
    version: ProtocolVersion,
    stream: i16,
    r: Response,
) -> Next {
    sleep(node.faults.latency_of(&r)).await;
    queue(&out, served(&node, &ctx, version, stream, r)).await
}

/// One response frame of `version`.
fn encode(version: ProtocolVersion, stream: i16, r: &Response) -> Bytes {
    let mut b = BytesMut::with_capacity(HEADER_LEN + r.body.len());
    r.encode_frame_as(version, stream, &mut b);
    b.freeze()
}

/// Queues `item` for the writer; closes the connection if the writer is
/// gone.
async fn queue(out: &mpsc::Sender<Outgoing>, item: Outgoing) -> Next {
    match out.send(item).await {
        Ok(()) => Next::Continue,
        Err(_) => Next::Close,
    }
}

/// Queues one response frame of `version`; closes the connection if the
/// writer is gone.
async fn send(
    out: &mpsc::Sender<Outgoing>,
    version: ProtocolVersion,
    stream: i16,
    r: &Response,
) -> Next {
    queue(out, Outgoing::Frame(encode(version, stream, r))).await
}
