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
//! REGISTER. Every other request goes to the [`RequestHandler`] in its own
//! task, so requests of one connection are served concurrently. Responses and
//! events go through one queue to the writer, which batches what is queued
//! into one `write`.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use scylla_cql::frame::envelope::decode_envelope;
use scylla_cql::frame::header::{Direction, Flags, FrameHeader, Opcode, HEADER_LEN};
use scylla_cql::frame::wire::{self, WireReader};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The read half of a connection (plain TCP or TLS).
pub(crate) type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
/// The write half of a connection (plain TCP or TLS).
pub(crate) type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::events::EventKind;
use crate::handler::{error_code, Compression, ConnCtx, Reply, Request, Response};
use crate::node::NodeShared;
use crate::shard::ShardConnection;
use crate::stats::bump_both;
use crate::supported::supported_response_with;

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
    let (tx, rx) = mpsc::channel::<Bytes>(OUT_QUEUE);
    let id = ctx.conn_id;
    let mask = node.events.add(id, tx.clone());
    let mut writer = std::pin::pin!(write_loop(wr, rx));
    let mut conn = Conn {
        node: node.clone(),
        ctx,
        out: tx,
        events: mask,
        phase: Phase::AwaitStartup,
        tasks: JoinSet::new(),
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

/// Writes queued frames, batching whatever is queued into one write.
async fn write_loop(mut wr: WriteHalf, mut rx: mpsc::Receiver<Bytes>) {
    let mut batch = BytesMut::with_capacity(WRITE_BATCH);
    while let Some(first) = rx.recv().await {
        batch.clear();
        batch.put_slice(&first);
        while batch.len() < WRITE_BATCH {
            match rx.try_recv() {
                Ok(f) => batch.put_slice(&f),
                Err(_) => break,
            }
        }
        if wr.write_all(&batch).await.is_err() {
            return;
        }
    }
    let _ = wr.shutdown().await;
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

struct Conn {
    node: Arc<NodeShared>,
    ctx: Arc<ConnCtx>,
    out: mpsc::Sender<Bytes>,
    events: Arc<AtomicU8>,
    phase: Phase,
    /// Request tasks; each yields whether to close the connection.
    tasks: JoinSet<Next>,
}

impl Conn {
    async fn read_loop(&mut self, mut rd: ReadHalf) {
        let max_body = self.node.config.max_body_len;
        let mut buf = BytesMut::with_capacity(8 * 1024);
        loop {
            // Answer every complete frame in the buffer.
            let mut wanted = HEADER_LEN;
            loop {
                match FrameHeader::decode(&buf, max_body) {
                    Ok(None) => break,
                    Err(e) => {
                        // Framing is lost: answer on the stream the bytes
                        // claim (0 if there are not even 4 of them), then close.
                        let stream = match buf.get(2..4) {
                            Some(s) => i16::from_be_bytes([s[0], s[1]]),
                            None => 0,
                        };
                        self.protocol_error(stream, &format!("invalid frame header: {e}"))
                            .await;
                        return;
                    }
                    Ok(Some(h)) => {
                        if h.direction != Direction::Request
                            || h.opcode.direction() != Direction::Request
                        {
                            let msg = format!("unexpected {:?} frame from a client", h.opcode);
                            self.protocol_error(h.stream, &msg).await;
                            return;
                        }
                        if buf.len() < h.frame_len() {
                            wanted = h.frame_len();
                            break;
                        }
                        let frame = buf.split_to(h.frame_len()).freeze();
                        let body = frame.slice(HEADER_LEN..);
                        if self.dispatch(h, body).await == Next::Close {
                            return;
                        }
                    }
                }
            }
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
                let r = supported_response_with(
                    self.ctx.shard,
                    self.ctx.node.shards.get(),
                    self.ctx.node.shard_aware_port,
                    ssl,
                    self.node.config.use_metadata_id,
                );
                self.respond_later(h.stream, r);
                Next::Continue
            }
            (Opcode::Startup, Phase::AwaitStartup) => self.startup(h.stream, &body).await,
            (Opcode::AuthResponse, Phase::AwaitAuth) => self.auth_response(h.stream, &body).await,
            (Opcode::Register, Phase::Ready) => {
                // After a STARTUP with compression, REGISTER may come compressed.
                let max = self.node.config.max_body_len;
                let comp = self.ctx.compression().map(wire_compression);
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
                self.handle(Request { header: h, body });
                Next::Continue
            }
            (op, phase) => {
                let msg = format!("unexpected {op:?} message in handshake phase {phase:?}");
                self.protocol_error_keep(h.stream, &msg).await;
                Next::Continue
            }
        }
    }

    async fn startup(&mut self, stream: i16, body: &[u8]) -> Next {
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
            Some(other) => {
                let msg = format!("Unknown compression algorithm: {other}");
                self.protocol_error_keep(stream, &msg).await;
                return Next::Continue;
            }
        };
        self.ctx.update(|s| {
            s.compression = compression;
            s.cql_version = opts.get("CQL_VERSION").cloned();
            s.tablets_routing_v1 = opts.contains_key(crate::supported::TABLETS_ROUTING_V1);
            s.use_metadata_id = self.node.config.use_metadata_id
                && opts.contains_key(crate::supported::SCYLLA_USE_METADATA_ID);
        });
        let stats = self.node.stats.clone();
        let shard = self.ctx.shard as usize;
        bump_both(&stats, shard, |s| &s.handshakes_started);
        if self.node.config.auth.is_some() {
            // The cheap step: ask for credentials. The expensive one (the
            // password check) is AUTH_RESPONSE, under admission.
            let mut b = BytesMut::new();
            let _ = wire::put_string(&mut b, PASSWORD_AUTHENTICATOR, "authenticator");
            self.phase = Phase::AwaitAuth;
            self.respond_now(stream, Response::new(Opcode::Authenticate, b.freeze()))
                .await;
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
        bump_both(&stats, shard, |s| &s.handshakes_finished);
        Next::Continue
    }

    async fn auth_response(&mut self, stream: i16, body: &[u8]) -> Next {
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
                self.ctx.update(|s| s.user = Some(u));
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

    /// Hands a request to the handler in its own task.
    fn handle(&mut self, req: Request) {
        let (node, ctx, out) = (self.node.clone(), self.ctx.clone(), self.out.clone());
        let stream = req.header.stream;
        self.tasks.spawn(async move {
            match node.handler.handle(&ctx, req).await {
                Reply::Close => Next::Close,
                Reply::Respond(r) => {
                    delay(&node).await;
                    bump_both(&node.stats, ctx.shard as usize, |s| &s.requests_served);
                    send(&out, stream, &compressed(&ctx, r)).await
                }
            }
        });
    }

    /// Responds from a task, after the node's injected latency, without
    /// holding up the reader.
    fn respond_later(&mut self, stream: i16, r: Response) {
        let (node, out) = (self.node.clone(), self.out.clone());
        // After STARTUP (the only time READY goes out uncompressed, through
        // `respond_now`), frames use the negotiated compression.
        let r = compressed(&self.ctx, r);
        self.tasks.spawn(async move {
            delay(&node).await;
            send(&out, stream, &r).await
        });
    }

    /// Responds in order, before reading on (handshake steps).
    async fn respond_now(&mut self, stream: i16, r: Response) {
        delay(&self.node).await;
        let _ = send(&self.out, stream, &r).await;
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

/// The protocol crate's name for the negotiated algorithm.
fn wire_compression(c: Compression) -> scylla_cql::Compression {
    match c {
        Compression::Lz4 => scylla_cql::Compression::Lz4,
    }
}

/// `r` with its body compressed if the connection negotiated compression
/// (and the body is not already compressed). On the impossible failure of
/// compressing an in-memory body, it goes out uncompressed (a client reads
/// the flag of every frame).
fn compressed(ctx: &ConnCtx, mut r: Response) -> Response {
    let Some(c) = ctx.compression() else {
        return r;
    };
    if r.flags.contains(Flags::COMPRESSION) {
        return r;
    }
    let c = wire_compression(c);
    let mut out = BytesMut::with_capacity(c.max_compressed_len(r.body.len()));
    if c.compress_into(&r.body, &mut out).is_ok() {
        r.body = out.freeze();
        r.flags = r.flags.with(Flags::COMPRESSION);
    }
    r
}

async fn delay(node: &NodeShared) {
    let d = node.faults.latency();
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

/// Queues one response frame; closes the connection if the writer is gone.
async fn send(out: &mpsc::Sender<Bytes>, stream: i16, r: &Response) -> Next {
    let mut b = BytesMut::with_capacity(HEADER_LEN + r.body.len());
    r.encode_frame(stream, &mut b);
    match out.send(b.freeze()).await {
        Ok(()) => Next::Continue,
        Err(_) => Next::Close,
    }
}
