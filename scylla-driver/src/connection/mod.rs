//! One TCP connection to one shard of one node, in plaintext or over TLS.
//!
//! [`open()`](fn@open) connects (`open` module: socket2, optional bind of a
//! chosen source port), runs the TLS handshake if configured (`tls` module,
//! feature `tls`), runs the handshake (`handshake`), and spawns three tasks that own
//! the socket; the caller gets a cheap, clonable [`Connection`] handle:
//!
//! - the **writer** (`writer`) takes the frames that requests encoded into the
//!   shared pending buffer and writes them, several per syscall when the
//!   [`Coalescing`] policy says so;
//! - the **reader** (`reader`) splits the incoming bytes into frames, decodes
//!   them, and completes the `stream_slots` of their stream ids (events go to
//!   a channel);
//! - the **tick** (`housekeeping`) times out requests past their deadline
//!   (no timer per request), sends heartbeats on idle connections, probes a
//!   busy connection whose reader has completed no frame for a while (a
//!   damaged length field makes the reader wait for bytes that never come),
//!   and recycles a connection with too many orphaned stream ids.
//!
//! # The life of a request
//! 1. [`Connection::request`] reserves a stream id and its slot (waiting, within
//!    the request's timeout, if all 32,768 are busy: the `permits` count the
//!    free ids).
//! 2. It encodes the frame straight into the pending buffer (no per-request
//!    buffer), and wakes the writer if the buffer was empty.
//! 3. The writer swaps the pending buffer with its own (both are reused) and
//!    writes it.
//! 4. The reader decodes the response and completes the slot, waking the
//!    requester, which takes the response and frees the id.
//!
//! # Dropping and cancelling
//! Dropping the future of a request that was already encoded does not unsend
//! it: its stream id stays reserved until the response arrives and is
//! discarded. A request that fails before its frame reached the socket fails
//! with [`RequestError::NotSent`], so it can be retried safely. Dropping the
//! last [`Connection`] handle closes the connection.

// Internals: what users need is re-exported below (or in `tls`).
mod auth;
mod coalescing;
mod error;
pub(crate) mod handshake;
mod housekeeping;
mod negotiation;
mod open;
mod permits;
mod reader;
pub(crate) mod stats;
mod stream_slots;
#[cfg(feature = "tls")]
pub mod tls;
mod writer;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use scylla_cql::compression::{Compression, Compressor};
use scylla_cql::frame::envelope::{encode_frame_limited, CustomPayload, FrameExtras};
use scylla_cql::frame::request::EventType;
use scylla_cql::frame::response::event::Event;
use scylla_cql::frame::response::supported::ShardingInfo;
use scylla_cql::frame::response::Response;
use scylla_cql::frame::segment_stream::SegmentEncoder;
use scylla_cql::frame::{Direction, MessageBody, ProtocolVersion};
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

pub use self::auth::{AuthError, AuthSession, Authenticator, PasswordAuthenticator};
pub use self::coalescing::Coalescing;
pub use self::error::{
    BrokenConnection, BrokenReason, ConnectionError, RequestError, SetupStep, TlsErrorKind,
};
pub use self::handshake::ServerInfo;
pub use self::negotiation::ProtocolChoice;
pub use self::open::{OpenError, OpenStep, SocketConfig};
pub use self::stats::{IoCounters, IoSnapshot};

use self::stream_slots::{ResponseFuture, SlotOutcome, StreamSlots};

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
    pub authenticator: Option<Arc<dyn Authenticator>>,
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
    /// ([`BrokenReason::ReadStalled`]). A stalled connection is therefore
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
    /// I/O counters to update (share one among connections for totals).
    pub counters: Arc<IoCounters>,
    /// Encrypt the connection with TLS (the TLS handshake is bounded by the
    /// connect timeout).
    #[cfg(feature = "tls")]
    pub tls: Option<tls::TlsConfig>,
}

impl ConnectionConfig {
    /// Whether connections use TLS.
    pub fn uses_tls(&self) -> bool {
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
            driver_name: "scylla-driver (Rust)".to_owned(),
            driver_version: env!("CARGO_PKG_VERSION").to_owned(),
            counters: Arc::new(IoCounters::default()),
            #[cfg(feature = "tls")]
            tls: None,
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

/// A response and what came with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseFrame {
    /// The response message.
    pub response: Response,
    /// The tracing id, warnings and custom payload.
    extras: Extras,
}

/// What a response frame may carry beside its message (the frame flags
/// TRACING, WARNING and CUSTOM_PAYLOAD).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseExtras {
    /// The tracing session, if tracing was requested.
    pub tracing_id: Option<Uuid>,
    /// Server warnings.
    pub warnings: Vec<String>,
    /// The server's custom payload.
    pub custom_payload: Option<CustomPayload>,
}

/// [`ResponseExtras`] as a response and its result carry them: boxed, and
/// only when there is something to carry. Most responses have none, and a
/// response is moved several times on its way from the reader to the caller
/// (each move copies the whole value, so 8 bytes here instead of 96 matter
/// on the hot path).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Extras(Option<Box<ResponseExtras>>);

impl Extras {
    /// `extras`, boxed unless empty (no allocation for the common response).
    pub(crate) fn new(extras: ResponseExtras) -> Self {
        let empty = extras.tracing_id.is_none()
            && extras.warnings.is_empty()
            && extras.custom_payload.is_none();
        Self((!empty).then(|| Box::new(extras)))
    }

    pub(crate) fn tracing_id(&self) -> Option<Uuid> {
        self.0.as_ref().and_then(|e| e.tracing_id)
    }

    pub(crate) fn warnings(&self) -> &[String] {
        self.0.as_ref().map_or(&[], |e| &e.warnings)
    }

    pub(crate) fn custom_payload(&self) -> Option<&CustomPayload> {
        self.0.as_ref().and_then(|e| e.custom_payload.as_ref())
    }
}

impl ResponseFrame {
    /// A frame of `response` with `extras`.
    pub fn new(response: Response, extras: ResponseExtras) -> Self {
        Self {
            response,
            extras: Extras::new(extras),
        }
    }

    /// The tracing session, if tracing was requested.
    pub fn tracing_id(&self) -> Option<Uuid> {
        self.extras.tracing_id()
    }

    /// Server warnings (empty for most responses).
    pub fn warnings(&self) -> &[String] {
        self.extras.warnings()
    }

    /// The server's custom payload.
    pub fn custom_payload(&self) -> Option<&CustomPayload> {
        self.extras.custom_payload()
    }

    /// The message and the extras.
    pub(crate) fn into_parts(self) -> (Response, Extras) {
        (self.response, self.extras)
    }
}

type SlotValue = Result<ResponseFrame, RequestError>;

/// Frames encoded by requesters and not yet taken by the writer.
struct Pending {
    buf: BytesMut,
    /// Stream ids of the frames in `buf`, in order.
    ids: Vec<u16>,
    /// End offset of each frame in `buf` (for one-write-per-frame policies).
    ends: Vec<usize>,
    /// v4: compresses each frame (v5 compresses segments instead).
    compressor: Option<Compressor>,
    /// v5: frames a direct write into segments.
    segments: Option<SegmentEncoder>,
    /// v5: bytes already in segments that go out before `buf` (the rest
    /// of a direct write the socket did not take whole).
    framed: BytesMut,
    /// The writer has taken frames and is writing them.
    writing: bool,
    /// The socket, for requesters to write to directly when the connection
    /// is idle (plain TCP only; `None` once the connection is broken).
    direct: Option<Arc<tokio::net::tcp::OwnedWriteHalf>>,
}

impl Pending {
    /// Nothing waits to be written.
    fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.framed.is_empty()
    }

    /// Writes the pending bytes (one frame, submitted to an idle connection)
    /// straight to the socket without blocking. Returns whether they are all
    /// written; whatever is left stays pending for the writer task.
    fn write_direct(&mut self, counters: &IoCounters) -> bool {
        let Some(socket) = &self.direct else {
            return false;
        };
        if let Some(encoder) = &mut self.segments {
            // v5: frame the envelope into `framed` (empty: the connection
            // is idle), then write that.
            if encoder
                .encode_envelopes(&self.buf, &mut self.framed)
                .is_err()
            {
                // Cannot happen for a whole frame; the writer reports it.
                return false;
            }
            self.buf.clear();
            self.ends.clear();
            // Cleared, not taken: the vectors keep their capacity.
            let frames = self.ids.len();
            self.ids.clear();
            // On an error (would block, or failed) the writer retries and
            // reports.
            if let Ok(n) = socket.try_write(&self.framed) {
                IoCounters::add(&counters.write_syscalls, 1);
                IoCounters::add(&counters.bytes_written, n as u64);
                IoCounters::add(&counters.frames_written, frames as u64);
                if n == self.framed.len() {
                    self.framed.clear();
                } else {
                    bytes::Buf::advance(&mut self.framed, n);
                }
            }
            return self.framed.is_empty();
        }
        match socket.try_write(&self.buf) {
            Ok(n) => {
                IoCounters::add(&counters.write_syscalls, 1);
                IoCounters::add(&counters.bytes_written, n as u64);
                if n == self.buf.len() {
                    IoCounters::add(&counters.frames_written, self.ids.len() as u64);
                    self.buf.clear();
                    self.ids.clear();
                    self.ends.clear();
                    return true;
                }
                // A partial write: the rest goes first, by the writer.
                bytes::Buf::advance(&mut self.buf, n);
                for e in &mut self.ends {
                    *e -= n;
                }
                false
            }
            // Would block, or failed: the writer retries and reports.
            Err(_) => false,
        }
    }
}

/// State shared by the handles and the connection's tasks.
struct Shared {
    slots: Arc<StreamSlots<SlotValue>>,
    pending: Mutex<Pending>,
    writer_wake: Notify,
    tick_wake: Notify,
    /// The tick sleeps until woken or its heartbeat (see `housekeeping`).
    tick_parked: AtomicBool,
    broken: OnceLock<BrokenConnection>,
    cancel: CancellationToken,
    counters: Arc<IoCounters>,
    /// Nanoseconds after `epoch` of the last write.
    last_write: AtomicU64,
    /// Response frames completed by the reader so far (written by the
    /// reader only, once per read; the tick watches it for stalls).
    frames_in: AtomicU64,
    /// Nanoseconds after `epoch` of the last request submitted.
    last_arrival: AtomicU64,
    /// Moving average of the time between submissions, in nanoseconds: how
    /// soon the coalescing writer can expect the next frame.
    arrival_gap: AtomicU64,
    /// While the writer waits for more frames: nanoseconds after `epoch` by
    /// which it must write anyway (0 otherwise). Whoever ends the wait takes
    /// it (swaps in 0) and wakes the writer: the requester whose frame
    /// completes the batch, or, once the time has passed, the reader (after
    /// each read) or the tick. Set and taken by requesters under the pending
    /// lock, so a frame added after the writer looked is never missed. So the
    /// wait needs no timer of its own (registering one per wait woke a parked
    /// worker thread through the runtime's driver: measured 0.04 extra
    /// eventfd writes and 15% more client CPU per request at concurrency 64).
    gather_until: AtomicU64,
    epoch: Instant,
    /// The adaptive policy's byte cap: a requester whose frame reaches it
    /// wakes a writer waiting for more frames.
    gather_max_bytes: usize,
    /// Whether idle requesters write their frame themselves (see
    /// [`Coalescing::writes_when_idle`]).
    direct_writes: bool,
    max_frame_len: usize,
    /// The protocol version every frame is written in.
    version: ProtocolVersion,
    peer: SocketAddr,
    /// The keyspace this connection last switched to (`USE`), as a marker
    /// the session compares with its own.
    keyspace: arc_swap::ArcSwapOption<String>,
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        // Every critical section leaves `Pending` consistent (the encoder
        // truncates its partial frame on error), so a poisoned lock is usable.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn mark_write(&self) {
        self.mark_write_at(Instant::now());
    }

    fn mark_write_at(&self, now: Instant) {
        self.last_write.store(self.nanos_at(now), Ordering::Relaxed);
    }

    /// Records a submission and updates the average gap between them
    /// (weight 1/8; a single long pause counts as at most 1 ms, so one idle
    /// spell does not make the writer impatient for long).
    fn note_arrival(&self, now: Instant) {
        let now = self.nanos_at(now);
        let prev = self.last_arrival.swap(now, Ordering::Relaxed);
        if prev == 0 {
            return;
        }
        let gap = now.saturating_sub(prev).min(1_000_000);
        let old = self.arrival_gap.load(Ordering::Relaxed);
        let new = if old == 0 {
            gap
        } else {
            old - old / 8 + gap / 8
        };
        self.arrival_gap.store(new, Ordering::Relaxed);
    }

    /// Nanoseconds after `epoch` at `t`.
    fn nanos_at(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Wakes the writer if it waits for frames past its bound (called by the
    /// reader after each read and by the tick). Reads the clock only while
    /// the writer waits.
    fn end_overdue_gathering(&self) {
        let until = self.gather_until.load(Ordering::Relaxed);
        if until != 0
            && self.nanos_at(Instant::now()) >= until
            && self.gather_until.swap(0, Ordering::Relaxed) != 0
        {
            self.writer_wake.notify_one();
        }
    }

    fn arrival_gap(&self) -> Duration {
        Duration::from_nanos(self.arrival_gap.load(Ordering::Relaxed))
    }

    fn since_last_write(&self) -> Duration {
        let last = Duration::from_nanos(self.last_write.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    /// Ends the connection: every request in flight fails with `reason`
    /// (those still in the pending buffer as not sent). The first reason wins.
    fn fail(&self, reason: BrokenReason) {
        let broken = BrokenConnection(Arc::new(reason));
        if self.broken.set(broken.clone()).is_err() {
            return;
        }
        match broken.reason() {
            BrokenReason::Closed => tracing::debug!(peer = %self.peer, "connection closed"),
            reason => tracing::info!(peer = %self.peer, %reason, "connection broken"),
        }
        let unsent = {
            let mut p = self.pending();
            p.buf.clear();
            p.framed.clear();
            p.ends.clear();
            // The socket closes once the writer lets go of it too.
            p.direct = None;
            std::mem::take(&mut p.ids)
        };
        for id in unsent {
            // These were never handed to the socket.
            let _ = self
                .slots
                .complete(id as i16, Err(RequestError::NotSent(broken.clone())));
        }
        self.slots
            .close(|_| Err(RequestError::Broken(broken.clone())));
        // Last, so that whoever awaits `Connection::closed` sees every request
        // already ended and every orphaned id freed.
        self.cancel.cancel();
        // A writer waiting for frames sees the cancellation.
        self.writer_wake.notify_one();
    }

    /// Sends `msg`; `now` is the caller's reading of the clock (the
    /// deadline and the arrival statistics use it: one clock read serves
    /// the whole submission).
    async fn request(
        &self,
        msg: &(impl MessageBody + ?Sized),
        opts: &RequestOptions<'_>,
        now: Instant,
    ) -> Result<ResponseFrame, RequestError> {
        let deadline = opts.deadline.or_else(|| opts.timeout.map(|t| now + t));
        // What a timeout error reports: the time the request was given.
        let budget = || {
            opts.timeout
                .or_else(|| deadline.map(|d| d.saturating_duration_since(now)))
                .unwrap_or_default()
        };
        let id = match self.slots.try_alloc(deadline) {
            Some(id) => id,
            // All ids busy (rare: 32,768 per connection): boxed, so that
            // every request's future does not carry this wait's timer.
            None => Box::pin(self.alloc_slow(deadline, budget())).await?,
        };
        if self.slots.take_became_busy() {
            // A parked tick (the connection was idle for a while) must start
            // watching deadlines again; a ticking one sees this request at
            // its next tick. Pairs with the fence in `housekeeping`.
            std::sync::atomic::fence(Ordering::SeqCst);
            if self.tick_parked.swap(false, Ordering::SeqCst) {
                self.tick_wake.notify_one();
            }
        }
        let extras = FrameExtras {
            tracing: opts.tracing,
            custom_payload: opts.custom_payload,
            ..FrameExtras::NONE
        };
        let wake_writer = {
            let mut p = self.pending();
            if let Some(b) = self.broken.get() {
                drop(p);
                self.slots.cancel_unsent(id);
                return Err(RequestError::NotSent(b.clone()));
            }
            let was_empty = p.is_empty();
            let Pending {
                buf,
                ids,
                ends,
                compressor,
                ..
            } = &mut *p;
            if let Err(e) = encode_frame_limited(
                buf,
                self.version,
                Direction::Request,
                id as i16,
                msg,
                &extras,
                compressor.as_mut(),
                self.max_frame_len,
            ) {
                drop(p);
                self.slots.cancel_unsent(id);
                return Err(RequestError::Encode(e));
            }
            ids.push(id);
            ends.push(buf.len());
            self.note_arrival(now);
            // An idle connection (this request is the only one in flight,
            // nothing else pending, the writer not writing): write from here.
            let direct = was_empty
                && !p.writing
                && self.direct_writes
                && self.slots.in_use() == 1
                && p.write_direct(&self.counters);
            if direct {
                self.mark_write_at(now);
            }
            // A writer waiting for frames wakes when the batch is large
            // enough for the load or the bytes reach its cap (or the reader
            // or the tick finds its time bound passed).
            let batch_done = self.gather_until.load(Ordering::Relaxed) != 0
                && {
                    let frames = p.ids.len();
                    coalescing::batch_is_large(frames, self.slots.in_use().saturating_sub(frames))
                        || p.buf.len() >= self.gather_max_bytes
                }
                && self.gather_until.swap(0, Ordering::Relaxed) != 0;
            (was_empty || batch_done) && !direct
        };
        if wake_writer {
            self.writer_wake.notify_one();
        }
        match ResponseFuture::new(&self.slots, id).await {
            SlotOutcome::Done(result) => result,
            SlotOutcome::TimedOut => {
                IoCounters::add(&self.counters.timeouts, 1);
                Err(RequestError::Timeout(budget()))
            }
        }
    }

    /// Waits for a free stream id (all are busy), within the request's timeout.
    async fn alloc_slow(
        &self,
        deadline: Option<Instant>,
        budget: Duration,
    ) -> Result<u16, RequestError> {
        let closed = || {
            RequestError::NotSent(
                self.broken
                    .get()
                    .cloned()
                    .unwrap_or_else(|| BrokenConnection(Arc::new(BrokenReason::Closed))),
            )
        };
        // Counted as queued until it has an id (or gives up).
        let _queued = stats::QueuedGuard::enter();
        let wait = self.slots.alloc(deadline);
        let id = match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), wait)
                .await
                .map_err(|_| RequestError::Timeout(budget))?,
            None => wait.await,
        };
        id.ok_or_else(closed)
    }
}

/// A handle to an open connection. Cheap to clone; the connection closes when
/// the last handle is dropped (or on [`Connection::close`]).
#[derive(Clone)]
pub struct Connection {
    /// One reference count per handle: a request clones and drops its
    /// connection's handle, from whichever worker thread it runs on, and
    /// every count is a cache line the threads pass between them.
    inner: Arc<Handle>,
}

/// What the handles of one connection share; the connection closes when the
/// last of them goes.
struct Handle {
    shared: Arc<Shared>,
    info: ConnectionInfo,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.fail(BrokenReason::Closed);
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("peer", &self.inner.info.peer)
            .field("local", &self.inner.info.local)
            .field("shard", &self.shard())
            .field("in_flight", &self.in_flight())
            .field("broken", &self.inner.shared.broken.get())
            .finish()
    }
}

/// What is known about a connection once it is open.
#[derive(Debug)]
pub struct ConnectionInfo {
    /// The server's address.
    pub peer: SocketAddr,
    /// The local address (source port) as bound here.
    pub local: SocketAddr,
    /// What the handshake learned.
    pub server: ServerInfo,
    /// Whether the connection is encrypted (TLS).
    pub tls: bool,
}

impl Connection {
    /// Sends a request and waits for its response.
    ///
    /// An ERROR from the server is a successful round trip here
    /// ([`Response::Error`]); only failures of the connection itself, the
    /// timeout and encoding are [`RequestError`]s.
    ///
    /// # Cancellation
    ///
    /// Dropping the future does not unsend a frame that was already encoded: its stream id
    /// stays reserved until the late response arrives and is discarded. A request dropped
    /// before encoding leaves nothing behind.
    pub async fn request(
        &self,
        msg: &(impl MessageBody + ?Sized),
        opts: &RequestOptions<'_>,
    ) -> Result<ResponseFrame, RequestError> {
        self.inner.shared.request(msg, opts, Instant::now()).await
    }

    /// [`request`](Self::request) with the caller's clock reading `now`
    /// (the timeout counts from it), sparing a clock read per request.
    pub(crate) async fn request_at(
        &self,
        msg: &(impl MessageBody + ?Sized),
        opts: &RequestOptions<'_>,
        now: Instant,
    ) -> Result<ResponseFrame, RequestError> {
        self.inner.shared.request(msg, opts, now).await
    }

    /// The protocol version the connection speaks.
    pub fn protocol_version(&self) -> ProtocolVersion {
        self.inner.info.server.protocol_version
    }

    /// What was learned at set-up.
    pub fn info(&self) -> &ConnectionInfo {
        &self.inner.info
    }

    /// The shard this connection is on (ScyllaDB), from SUPPORTED.
    pub fn shard(&self) -> Option<u16> {
        self.sharding().map(|s| s.shard)
    }

    /// The node's sharding, if it shards.
    pub fn sharding(&self) -> Option<&ShardingInfo> {
        self.inner.info.server.sharding.as_ref()
    }

    /// Requests in flight, including timed-out ones still holding ids.
    pub fn in_flight(&self) -> usize {
        self.inner.shared.slots.in_use()
    }

    /// Timed-out or abandoned requests still holding stream ids.
    pub fn orphans(&self) -> usize {
        self.inner.shared.slots.orphans()
    }

    /// Why the connection stopped, if it did.
    pub fn broken(&self) -> Option<&BrokenConnection> {
        self.inner.shared.broken.get()
    }

    /// Whether the connection still takes requests.
    pub fn is_usable(&self) -> bool {
        self.inner.shared.broken.get().is_none()
    }

    /// Completes when the connection has stopped.
    pub async fn closed(&self) {
        self.inner.shared.cancel.cancelled().await;
    }

    /// The keyspace the connection is using, as far as the driver knows.
    pub fn keyspace(&self) -> Option<Arc<String>> {
        self.inner.shared.keyspace.load_full()
    }

    /// Whether the connection is on `keyspace` (compared without cloning
    /// the connection's own name).
    pub(crate) fn is_on_keyspace(&self, keyspace: &Arc<String>) -> bool {
        self.inner
            .shared
            .keyspace
            .load()
            .as_ref()
            .is_some_and(|have| Arc::ptr_eq(have, keyspace) || **have == **keyspace)
    }

    /// Records that the connection now uses `keyspace` (after a `USE`).
    pub fn set_keyspace(&self, keyspace: Option<Arc<String>>) {
        self.inner.shared.keyspace.store(keyspace);
    }

    /// A token cancelled when the connection stops; holding it does not keep
    /// the connection open.
    pub(crate) fn close_token(&self) -> CancellationToken {
        self.inner.shared.cancel.clone()
    }

    /// Closes the connection; requests in flight fail.
    pub fn close(&self) {
        self.inner.shared.fail(BrokenReason::Closed);
    }

    /// The I/O counters this connection updates.
    pub fn counters(&self) -> &Arc<IoCounters> {
        &self.inner.shared.counters
    }
}

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
    let span = tracing::debug_span!("connection", peer = %addr, tls = config.uses_tls());
    open_inner(addr, source, config).instrument(span).await
}

async fn open_inner(
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

async fn open_streams(
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
async fn open_in(
    addr: SocketAddr,
    source: Option<SocketAddr>,
    config: &ConnectionConfig,
    version: ProtocolVersion,
) -> Result<Connection, ConnectionError> {
    let mut stream = open::open_socket(addr, source, &config.socket).await?;
    let local = open::local_addr(&stream).map_err(|source| ConnectionError::Io {
        step: SetupStep::Connect,
        source,
    })?;
    #[cfg(feature = "tls")]
    if let Some(tls) = &config.tls {
        let mut stream = tls
            .connect(addr, stream, config.socket.connect_timeout)
            .await?;
        let offered_cert = tls.client.client_auth_cert_resolver.has_certs();
        let (server, leftover) = cql_handshake(&mut stream, config, version)
            .await
            .map_err(|e| tls::closed_after_handshake(e, offered_cert))?;
        let (rd, wr) = tokio::io::split(stream);
        return Ok(start(addr, local, server, leftover, rd, wr, None, config));
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
        config,
    ))
}

/// The CQL handshake, bounded by the handshake timeout.
async fn cql_handshake<S>(
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

/// Spawns the connection's tasks on its read and write halves.
// Each argument is a distinct part of the connection being started.
#[allow(clippy::too_many_arguments)]
fn start<R, W>(
    addr: SocketAddr,
    local: SocketAddr,
    server: ServerInfo,
    leftover: handshake::Leftover,
    rd: R,
    wr: W,
    direct: Option<Arc<tokio::net::tcp::OwnedWriteHalf>>,
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
        last_arrival: AtomicU64::new(0),
        arrival_gap: AtomicU64::new(0),
        gather_until: AtomicU64::new(0),
        epoch: Instant::now(),
        direct_writes: direct.is_some() && config.coalescing.writes_when_idle(),
        gather_max_bytes: config.coalescing.max_bytes(),
        max_frame_len: config.max_frame_len,
        version,
        peer: addr,
        keyspace: arc_swap::ArcSwapOption::new(config.keyspace.clone().map(Arc::new)),
    });
    let segments = version
        .uses_segments()
        .then(|| SegmentEncoder::new(server.compression.is_some()));
    tokio::spawn(writer::run(shared.clone(), wr, config.coalescing, segments));
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
                // Plain TCP always hands its write half for direct writes; a
                // TLS stream cannot (its records need the writer's exclusive
                // access).
                tls: direct.is_none(),
            },
            shared,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scylla_cql::frame::response::ResultBody;

    #[test]
    fn a_frame_boxes_its_extras_only_when_it_has_some() {
        let plain = ResponseFrame::new(
            Response::Result(ResultBody::Void),
            ResponseExtras::default(),
        );
        assert!(plain.extras.0.is_none());
        assert_eq!(plain.tracing_id(), None);
        assert!(plain.warnings().is_empty());
        assert_eq!(plain.custom_payload(), None);

        let id = Uuid::from_u128(7);
        let mut payload = CustomPayload::new();
        payload.insert("tablets-routing-v1".into(), Some(b"x".to_vec()));
        let extras = ResponseExtras {
            tracing_id: Some(id),
            warnings: vec!["careful".into()],
            custom_payload: Some(payload.clone()),
        };
        let frame = ResponseFrame::new(Response::Result(ResultBody::Void), extras.clone());
        assert_eq!(frame.tracing_id(), Some(id));
        assert_eq!(frame.warnings(), ["careful".to_string()]);
        assert_eq!(frame.custom_payload(), Some(&payload));
        let (response, boxed) = frame.into_parts();
        assert_eq!(response, Response::Result(ResultBody::Void));
        assert_eq!(boxed.0.as_deref(), Some(&extras));

        // Any one of the three is enough to keep them.
        let only_warning = ResponseExtras {
            warnings: vec!["w".into()],
            ..ResponseExtras::default()
        };
        assert!(Extras::new(only_warning).0.is_some());
    }

    #[test]
    fn a_response_moves_as_at_most_128_bytes() {
        // A response is moved about ten times on its way from the reader to
        // the caller (slot, attempt, plan, session). Up to 128 bytes those
        // moves are inline copies; a larger value makes each a `memcpy`
        // call (`scripts/instructions-per-request.sh`: 7,950 instructions
        // per prepared INSERT at 152 bytes, 7,706 at 128). See
        // `ResultMetadata::new_metadata_id`.
        assert!(std::mem::size_of::<ResponseFrame>() <= 128);
        assert!(std::mem::size_of::<SlotValue>() <= 128);
    }
}
