//! Per-node pools of per-shard connections.
//!
//! A [`NodePool`] keeps `connections_per_shard` connections to every shard of
//! one node. Its first connection goes to the node's regular port and learns
//! from SUPPORTED how many shards the node has and where its shard-aware port
//! is; the other shards are then opened through the shard-aware port with a
//! source port chosen so that the node puts each connection on the shard that
//! lacks one ([`shard_port`]). When the network defeats that (a NAT rewriting
//! ports, a refused or silent port: [`nat`]) the pool falls back to the regular
//! port, where the node picks the least loaded shard: it opens as many
//! connections as it wants in total and keeps them wherever they land, then
//! covers the shards still missing slowly in the background (rate-limited,
//! jittered), instead of a storm of throwaway connections. Requests for a
//! shard without a connection use the node's least loaded one. Lost
//! connections come back with jittered exponential [`backoff`]; a handshake
//! the node sheds under load ([`shed`]) backs that node's reconnects off.
//! The work is done by one task per pool (`refill`); requests only read an
//! immutable snapshot.
//!
//! - [`backoff`]: full-jitter exponential reconnect delays.
//! - [`shard_port`]: the process-wide source-port allocator.
//! - [`nat`]: evidence against the shard-aware port, fallback and probation.
//! - [`shed`]: handshakes shed by the node's admission control.
//! - [`pacing`]: how fast the pool opens, paced by how long its handshakes
//!   queue at the node.
//! - [`plan`]: the refill task's decisions (backoff, spread, what to wait
//!   for), without sockets or clocks: also driven by the `storm_sim` tool.
//! - `refill`: the task that opens what is missing, round by round.
//! - `slots`: what the pool holds by shard; where an opened connection goes,
//!   what is missing, retiring and draining what is held beyond the target.
//! - `open`: opening one connection, through the shard-aware port (with
//!   fallback to the regular port) or the regular port, and counting it.
//! - [`fill`]: what a round aims at and where its connections go, decided on
//!   counts (what `slots` applies, and the `storm_sim` tool too).
//! - [`coverage`]: the background attempts that cover the remaining shards
//!   when the shard-aware port is not usable.
//! - `session_opens`: a session's opens to all its nodes, started within one
//!   window (first connections one, then one more per node that answered;
//!   the others as many as its nodes answer calmly).
//! - `tickets` (feature `tls`): a node's TLS opens paced by the session
//!   tickets held for it, so that they resume.

pub mod backoff;
pub mod coverage;
pub mod fill;
pub mod nat;
mod open;
pub mod pacing;
pub mod plan;
mod refill;
mod session_opens;
pub mod shard_port;
pub mod shed;
mod slots;
#[cfg(feature = "tls")]
mod tickets;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use scylla_cql::sharding::{Shard, Sharder};
use scylla_cql::token::Token;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::connection::{Connection, ConnectionConfig, ConnectionError};
use crate::metrics::record::NodeLabels;
use crate::metrics::{record, Metrics};

use self::backoff::{ExponentialBackoff, ReconnectPolicy};
use self::nat::{FallbackConfig, ShardAwareHealth};
use self::shard_port::PortRange;

/// How many connections a node's pool keeps (the official `scylla` crate's
/// `PoolSize`, given to
/// [`SessionBuilder::pool_size`](crate::SessionBuilder::pool_size)).
///
/// ```
/// use std::num::NonZeroUsize;
/// use scylla_driver::client::PoolSize;
///
/// let five = NonZeroUsize::new(5).unwrap();
/// // 5 per node: on a node of 4 shards, 2 per shard.
/// assert_eq!(PoolSize::PerHost(five).per_shard(4), 2);
/// assert_eq!(PoolSize::PerShard(five).per_shard(4), 5);
/// assert_eq!(PoolSize::default().per_shard(4), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolSize {
    /// This many connections to every shard (to the node, for a server that
    /// does not shard). The default: one.
    PerShard(NonZeroUsize),
    /// At least this many connections to every node, spread evenly over its
    /// shards: `ceil(n / shards)` per shard, so that every shard has one.
    PerHost(NonZeroUsize),
}

impl Default for PoolSize {
    fn default() -> Self {
        PoolSize::PerShard(NonZeroUsize::MIN)
    }
}

impl PoolSize {
    /// The connections kept per shard on a node of `shards` shards (1 for a
    /// node that does not shard).
    pub fn per_shard(self, shards: usize) -> usize {
        match self {
            PoolSize::PerShard(n) => n.get(),
            PoolSize::PerHost(n) => n.get().div_ceil(shards.max(1)),
        }
    }
}

/// How a node pool opens and keeps its connections.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PoolConfig {
    /// How each connection is opened.
    pub connection: ConnectionConfig,
    /// Connections kept per shard, or per node.
    pub size: PoolSize,
    /// Use ScyllaDB's shard-aware port when the node advertises one.
    pub shard_aware_port: bool,
    /// Local ports to choose shard-aware source ports from.
    pub source_ports: PortRange,
    /// Source ports tried per connection before giving up on the shard-aware port.
    pub max_source_port_attempts: usize,
    /// When to stop trusting the shard-aware port, and for how long.
    pub fallback: FallbackConfig,
    /// Delays between failed attempts.
    pub reconnect: Arc<dyn ReconnectPolicy>,
    /// Most connections opened to this node at the same time.
    pub max_concurrent_opens: usize,
    /// After the node is reported up, the pool's first open waits a random
    /// moment within this window, or within [`pacing::SPREAD_HANDSHAKES`]
    /// times the session's quickest first connection to a node if shorter;
    /// longer after a storm ([`pacing::OpenPacer::restart_spread`]).
    pub reconnect_spread: Duration,
    /// Without a usable shard-aware port: the mean interval between the
    /// background attempts to cover a shard that has no connection (at most
    /// one attempt per node per interval, each interval drawn from
    /// `[interval / 2, 3 * interval / 2)`). Behind a NAT the attempts
    /// follow one another, paced by the node's handshake queue, until
    /// [`coverage::eager_attempts`] miss in a row (see
    /// [`coverage::Coverage::after_round`]).
    pub coverage_interval: Duration,
    /// Client routes through a PROXY protocol v2 balancer: the pools of
    /// routed nodes choose source ports through the route
    /// ([`ClientRoutes::proxy_protocol`](crate::ClientRoutes::proxy_protocol)).
    pub(crate) route_proxy_protocol: bool,
    /// Where this pool's shard-aware connections go (set per node by the
    /// cluster layer).
    pub(crate) shard_aware_target: ShardAwareTarget,
    /// Over TLS: pace a node's opens by the session tickets held for it, so
    /// that each can resume instead of paying a full handshake (see
    /// `docs/pools.md`, "TLS session tickets"). No effect without TLS, with a
    /// node that sends no tickets, or with a `TlsConfig` made from a
    /// `ClientConfig` elsewhere (its store is not the driver's).
    pub tls_ticket_pacing: bool,
    /// Told whenever a pool learns (or its node changes) its sharding: the
    /// cluster layer then rebuilds the routing table with the node's shards.
    pub(crate) sharding_changed: Option<Arc<Notify>>,
    /// Told whenever a pool gains its first connection or loses its last:
    /// the cluster layer then tells the application (node events).
    pub(crate) connectivity_changed: Option<Arc<Notify>>,
    /// The session's opens to its nodes, shared by its pools (set by the
    /// cluster layer; a pool on its own has none to share).
    pub(crate) session_opens: Option<Arc<session_opens::SessionOpens>>,
    /// Where the refill task appends each of its decisions, if anywhere
    /// (see [`plan::DecisionLog`]): for comparing it with a simulation.
    pub decision_log: Option<plan::DecisionLog>,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            connection: ConnectionConfig::default(),
            size: PoolSize::default(),
            shard_aware_port: true,
            source_ports: PortRange::system_default(),
            max_source_port_attempts: 32,
            fallback: FallbackConfig::default(),
            reconnect: Arc::new(ExponentialBackoff::default()),
            max_concurrent_opens: 4,
            reconnect_spread: Duration::from_secs(1),
            coverage_interval: Duration::from_secs(1),
            route_proxy_protocol: false,
            shard_aware_target: ShardAwareTarget::Advertised,
            tls_ticket_pacing: true,
            sharding_changed: None,
            connectivity_changed: None,
            session_opens: None,
            decision_log: None,
        }
    }
}

impl PoolConfig {
    /// The pools built from this config and its clones share one session's
    /// opens (`pool::session_opens`), as the pools of a session do: for
    /// tools that drive pools without a session (`storm_sim`'s agreement
    /// test).
    #[cfg(feature = "unstable-internals")]
    #[must_use]
    pub fn with_session_opens(mut self) -> Self {
        self.session_opens = Some(Default::default());
        self
    }
}

/// Where a pool opens the connections it steers to a shard by their source
/// port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShardAwareTarget {
    /// The shard-aware port the node advertises (SUPPORTED), on the pool's
    /// IP: the default.
    Advertised,
    /// The pool's own address: a client route whose balancer passes the
    /// source port on in a PROXY v2 header to a shard-aware listener.
    Dialled,
    /// None: a client route without PROXY v2 (the advertised port is not
    /// reachable through the balancer).
    Disabled,
}

/// The connections of a pool at one moment: immutable, swapped atomically.
#[derive(Debug, Default)]
pub struct PoolSnapshot {
    /// Connections by shard (one entry for servers that do not shard).
    pub shards: Vec<Vec<Connection>>,
    /// The node's sharding, once known.
    pub sharder: Option<Sharder>,
}

impl PoolSnapshot {
    /// Number of open connections.
    pub fn len(&self) -> usize {
        self.shards.iter().map(Vec::len).sum()
    }

    /// Whether there is no connection.
    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(Vec::is_empty)
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// Shards with at least one connection.
    pub fn covered_shards(&self) -> usize {
        self.shards.iter().filter(|s| !s.is_empty()).count()
    }
}

/// The state shared by the pool's handle and its refill task.
struct PoolInner {
    addr: SocketAddr,
    /// The node's labels of the `metrics` facade, built once.
    labels: NodeLabels,
    config: PoolConfig,
    metrics: Arc<Metrics>,
    snapshot: ArcSwap<PoolSnapshot>,
    /// Whether `snapshot` holds a connection: set with every snapshot, so
    /// that the routing's "is this node up" asked on every request is one
    /// atomic load instead of a snapshot load.
    connected: AtomicBool,
    /// How many times `connected` flipped (odd: connected now): lets the
    /// cluster layer tell every flip to the application, even two that
    /// happened between two of its looks.
    flips: AtomicU64,
    /// Published on every change, for waiters.
    changes: watch::Sender<u64>,
    /// Wakes the refill task (a connection closed, or the node is back).
    wake: Notify,
    /// The node was reported up: reconnect now, but spread.
    up_hint: std::sync::atomic::AtomicBool,
    health: Mutex<ShardAwareHealth>,
    /// How the latest connection attempt failed (`None` before any did):
    /// what a request that finds no connection here reports. Written on
    /// failures only.
    last_error: Mutex<Option<Arc<ConnectionError>>>,
    cancel: CancellationToken,
    /// Set by [`NodePool::retire`]: on stopping, the connections drain
    /// instead of closing at once.
    retiring: AtomicBool,
    round_robin: AtomicUsize,
    /// The pacing of TLS opens by the node's tickets, when it applies.
    #[cfg(feature = "tls")]
    tickets: Option<Arc<tickets::TicketGate>>,
}

/// Connections to every shard of one node.
#[derive(Debug, Clone)]
pub struct NodePool {
    inner: Arc<PoolInner>,
    _stop_on_drop: Arc<StopOnDrop>,
}

impl std::fmt::Debug for PoolInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolInner")
            .field("addr", &self.addr)
            .finish()
    }
}

#[derive(Debug)]
struct StopOnDrop(CancellationToken);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl NodePool {
    /// Starts a pool for the node at `addr` (its regular CQL port). The refill
    /// task starts connecting at once.
    pub fn new(addr: SocketAddr, config: PoolConfig, metrics: Arc<Metrics>) -> NodePool {
        let cancel = CancellationToken::new();
        #[cfg(feature = "tls")]
        let tickets = config
            .connection
            .tls
            .as_ref()
            .filter(|_| config.tls_ticket_pacing)
            .and_then(|t| {
                let store = t.tickets.clone()?;
                let name = t.server_name.for_addr(addr).ok()?;
                Some(Arc::new(tickets::TicketGate::new(store, name)))
            });
        let inner = Arc::new(PoolInner {
            addr,
            labels: NodeLabels::new(addr, config.connection.uses_tls()),
            health: Mutex::new(ShardAwareHealth::new(config.fallback)),
            last_error: Mutex::new(None),
            config,
            metrics,
            snapshot: ArcSwap::from_pointee(PoolSnapshot::default()),
            connected: AtomicBool::new(false),
            flips: AtomicU64::new(0),
            changes: watch::channel(0).0,
            wake: Notify::new(),
            up_hint: std::sync::atomic::AtomicBool::new(false),
            cancel: cancel.clone(),
            retiring: AtomicBool::new(false),
            round_robin: AtomicUsize::new(0),
            #[cfg(feature = "tls")]
            tickets,
        });
        tokio::spawn(refill::run(inner.clone()));
        NodePool {
            inner,
            _stop_on_drop: Arc::new(StopOnDrop(cancel)),
        }
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// The node's regular CQL address.
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// How the pool's latest connection attempt failed (`None` before any
    /// did): why a request finds no connection here.
    pub fn last_error(&self) -> Option<Arc<ConnectionError>> {
        self.inner
            .last_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A connection to `shard` if there is one, else (counted as a shard
    /// fallback) the node's least loaded connection. `None` means: a
    /// connection for statements without routing information (spread
    /// round-robin). `None` back when the pool has no connection at all.
    pub fn connection_for(&self, shard: Option<Shard>) -> Option<Connection> {
        self.pick(&self.inner.snapshot.load(), shard)
    }

    /// [`NodePool::connection_for`] the shard that owns `token` (by the
    /// node's sharding as its connections told it), or any shard without a
    /// token or before the sharding is known. One snapshot load for both.
    pub fn connection_for_token(&self, token: Option<Token>) -> Option<Connection> {
        let snap = self.inner.snapshot.load();
        let shard = token.and_then(|t| Some(snap.sharder.as_ref()?.shard_of(t)));
        self.pick(&snap, shard)
    }

    fn pick(&self, snap: &PoolSnapshot, shard: Option<Shard>) -> Option<Connection> {
        let n = snap.shards.len();
        if n == 0 {
            return None;
        }
        let Some(shard) = shard else {
            let start = self.inner.round_robin.fetch_add(1, Ordering::Relaxed);
            return (0..n)
                .map(|i| &snap.shards[(start + i) % n])
                .find_map(|c| least_loaded(c))
                .cloned();
        };
        if let Some(c) = snap
            .shards
            .get(shard as usize)
            .and_then(|c| least_loaded(c))
        {
            return Some(c.clone());
        }
        // The shard has no connection (yet): the least loaded of the node's,
        // ties broken from a rotating start so they share the load. (Only
        // here and above does the rotation advance: a shared counter that
        // every request bumps costs the cores a contended cache line.)
        let start = self.inner.round_robin.fetch_add(1, Ordering::Relaxed);
        let best = (0..n)
            .filter_map(|i| least_loaded(&snap.shards[(start + i) % n]))
            .min_by_key(|c| c.in_flight())?;
        Metrics::inc(&self.inner.metrics.shard_fallback_requests);
        record::shard_fallback_request();
        Some(best.clone())
    }

    /// The current connections.
    pub fn snapshot(&self) -> Arc<PoolSnapshot> {
        self.inner.snapshot.load_full()
    }

    /// The node's sharding, once a connection has told it.
    pub fn sharder(&self) -> Option<Sharder> {
        self.inner.snapshot.load().sharder
    }

    /// Whether the pool has at least one usable connection.
    pub fn is_connected(&self) -> bool {
        self.inner.connected.load(Ordering::Relaxed)
    }

    /// How many times the pool went from no connection to some, or back
    /// (odd: it has a connection now).
    pub fn connectivity_flips(&self) -> u64 {
        self.inner.flips.load(Ordering::Acquire)
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// Why the shard-aware port is not in use for this node, if it is not.
    pub fn fallback(&self) -> Option<nat::FallbackReason> {
        self.inner
            .health
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fallback()
    }

    /// Tells the pool the node was reported up: reconnect without waiting
    /// out the backoff (still spread over the reconnect window).
    pub fn node_up_hint(&self) {
        self.inner.up_hint.store(true, Ordering::Relaxed);
        self.inner.wake.notify_one();
    }

    /// Waits until `pred` holds for the snapshot, or `timeout` passes.
    /// Returns whether it holds.
    pub async fn wait_for(&self, timeout: Duration, pred: impl Fn(&PoolSnapshot) -> bool) -> bool {
        let mut rx = self.inner.changes.subscribe();
        let check = async {
            loop {
                if pred(&self.inner.snapshot.load()) {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(timeout, check).await;
        pred(&self.inner.snapshot.load())
    }

    /// Waits until every shard has its connections (or `timeout` passes).
    pub async fn wait_until_full(&self, timeout: Duration) -> bool {
        let size = self.inner.config.size;
        self.wait_for(timeout, |s| {
            let per_shard = size.per_shard(s.shards.len());
            !s.shards.is_empty() && s.shards.iter().all(|c| c.len() >= per_shard)
        })
        .await
    }

    /// Stops the pool and closes its connections.
    pub fn shutdown(&self) {
        self.inner.cancel.cancel();
    }

    /// Stops the pool gently (its node is reached elsewhere now, e.g. a
    /// client route moved): it opens nothing more and offers no connection
    /// to new requests, and each connection closes once the requests on it
    /// are done (after a short grace for requests that just picked it, and
    /// at most 10 s).
    pub fn retire(&self) {
        self.inner.retiring.store(true, Ordering::Relaxed);
        self.inner.cancel.cancel();
    }
}

/// The connection with the fewest requests in flight.
/// Broken connections stay in the snapshot until the refill task replaces
/// them, so they are skipped here.
fn least_loaded(conns: &[Connection]) -> Option<&Connection> {
    match conns {
        [] => None,
        [one] => one.is_usable().then_some(one),
        many => many
            .iter()
            .filter(|c| c.is_usable())
            .min_by_key(|c| c.in_flight()),
    }
}
