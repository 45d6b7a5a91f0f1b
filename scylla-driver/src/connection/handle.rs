//! [`Connection`], the cheap handle requests go through, and what is known
//! about a connection once it is open ([`ConnectionInfo`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use super::{
    BrokenConnection, BrokenReason, ConnectionRequestError, RequestOptions, ResponseFrame,
    ServerInfo, Shared,
};
use scylla_cql::frame::response::supported::ShardingInfo;
use scylla_cql::frame::{MessageBody, ProtocolVersion};
use tokio_util::sync::CancellationToken;

/// A handle to an open connection. Cheap to clone; the connection closes when
/// the last handle is dropped (or on [`Connection::close`]).
#[derive(Clone)]
pub struct Connection {
    /// One reference count per handle: a request clones and drops its
    /// connection's handle, from whichever worker thread it runs on, and
    /// every count is a cache line the threads pass between them.
    pub(super) inner: Arc<Handle>,
}

/// What the handles of one connection share; the connection closes when the
/// last of them goes.
pub(super) struct Handle {
    pub(super) shared: Arc<Shared>,
    pub(super) info: ConnectionInfo,
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
    /// Whether its TLS handshake resumed an earlier session (the node
    /// accepted a session ticket) instead of running in full; `false`
    /// without TLS.
    pub tls_resumed: bool,
}

impl Connection {
    /// Sends a request and waits for its response.
    ///
    /// An ERROR from the server is a successful round trip here
    /// ([`Response::Error`](scylla_cql::frame::response::Response::Error)); only failures of the connection itself, the
    /// timeout and encoding are [`ConnectionRequestError`]s.
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
    ) -> Result<ResponseFrame, ConnectionRequestError> {
        self.inner.shared.request(msg, opts, Instant::now()).await
    }

    /// [`request`](Self::request) with the caller's clock reading `now`
    /// (the timeout counts from it), sparing a clock read per request.
    pub(crate) async fn request_at(
        &self,
        msg: &(impl MessageBody + ?Sized),
        opts: &RequestOptions<'_>,
        now: Instant,
    ) -> Result<ResponseFrame, ConnectionRequestError> {
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

    #[cfg(any(test, feature = "unstable-internals"))]
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

    #[cfg(any(test, feature = "unstable-internals"))]
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

    #[cfg(any(test, feature = "unstable-internals"))]
    /// The I/O counters this connection updates.
    pub fn counters(&self) -> &Arc<super::IoCounters> {
        &self.inner.shared.counters
    }
}
