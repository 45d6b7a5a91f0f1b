//! Recording through the [`metrics`](https://docs.rs/metrics) facade.
//!
//! Per-request metrics use keys built at compile time (static names and
//! labels): with no recorder installed each call is one atomic load and no
//! allocation; with one, a lookup of a key that exists.
//! Per-node metrics (connections, fallbacks, reconnect delays) carry the
//! node's label, built once per pool ([`NodeLabels`]); they are recorded on
//! connection events, never per request.

use std::time::Duration;

use ::metrics::{counter, gauge, histogram, Key, Label, Level, Metadata, SharedString};

use super::names::*;

/// Describes every metric (type, unit, help text) to the installed recorder,
/// if any. Called when a session is built; cheap and idempotent.
pub(crate) fn describe() {
    use ::metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        REQUESTS,
        "Requests finished (after retries and speculative attempts), by outcome."
    );
    describe_histogram!(
        REQUEST_DURATION,
        Unit::Seconds,
        "Request latency, retries and speculative attempts included."
    );
    describe_gauge!(REQUESTS_IN_FLIGHT, "Requests started and not yet finished.");
    describe_gauge!(
        REQUESTS_QUEUED,
        "Requests waiting for a free stream id on a saturated connection."
    );
    describe_counter!(RETRIES, "Attempts retried by the retry policy.");
    describe_counter!(SPECULATIVE_ATTEMPTS, "Speculative attempts started.");
    describe_counter!(
        REPREPARES,
        "PREPAREs sent again to nodes that had forgotten the statement."
    );
    describe_counter!(
        SHARD_FALLBACK_REQUESTS,
        "Requests sent to another shard's connection (their shard had none)."
    );
    describe_counter!(
        CONNECTION_ATTEMPTS,
        "Connection attempts by node, shard, port and outcome."
    );
    describe_gauge!(
        CONNECTIONS,
        "Open pooled connections by node, shard and port."
    );
    describe_counter!(
        SHARD_AWARE_FALLBACKS,
        "Times a node's pool stopped using the shard-aware port, by reason."
    );
    describe_counter!(
        SHARD_AWARE_RESTORED,
        "Times a node's pool started using the shard-aware port again."
    );
    describe_histogram!(
        RECONNECT_DELAY,
        Unit::Seconds,
        "Backoff delays waited before reconnecting to a node."
    );
    describe_counter!(
        TABLET_MISROUTES,
        "Requests the server reported misrouted for a tablet table."
    );
    describe_gauge!(TABLETS_KNOWN, "Tablets known, over all tables.");
    describe_counter!(
        TLS_HANDSHAKES,
        "TLS handshakes of pool connections, by node and kind (full or resumed)."
    );
}

/// Metadata of every metric the driver records.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// A key with static labels: built at compile time, so that recording it
/// allocates nothing (the `metrics` macros allocate a label vector for
/// labels that are not literals).
macro_rules! static_key {
    ($key:ident = $name:expr $(, $label:expr => $value:expr)*) => {
        static $key: Key = Key::from_static_parts($name, {
            const LABELS: &[Label] = &[$(Label::from_static_parts($label, $value)),*];
            LABELS
        });
    };
}

static_key!(KEY_REQUESTS_OK = REQUESTS, LABEL_OUTCOME => OUTCOME_OK);
static_key!(KEY_REQUESTS_ERROR = REQUESTS, LABEL_OUTCOME => OUTCOME_ERROR);
static_key!(KEY_REQUEST_DURATION = REQUEST_DURATION);
static_key!(KEY_REQUESTS_IN_FLIGHT = REQUESTS_IN_FLIGHT);
static_key!(KEY_RETRIES = RETRIES);
static_key!(KEY_SPECULATIVE_ATTEMPTS = SPECULATIVE_ATTEMPTS);
static_key!(KEY_REPREPARES = REPREPARES);
static_key!(KEY_SHARD_FALLBACK_REQUESTS = SHARD_FALLBACK_REQUESTS);
static_key!(KEY_MISROUTES_OK = TABLET_MISROUTES, LABEL_OUTCOME => OUTCOME_OK);
static_key!(KEY_MISROUTES_ERROR = TABLET_MISROUTES, LABEL_OUTCOME => OUTCOME_ERROR);
static_key!(KEY_TABLETS_KNOWN = TABLETS_KNOWN);

fn counter_of(key: &Key) -> ::metrics::Counter {
    ::metrics::with_recorder(|r| r.register_counter(key, &METADATA))
}

fn gauge_of(key: &Key) -> ::metrics::Gauge {
    ::metrics::with_recorder(|r| r.register_gauge(key, &METADATA))
}

fn histogram_of(key: &Key) -> ::metrics::Histogram {
    ::metrics::with_recorder(|r| r.register_histogram(key, &METADATA))
}

/// Counts a request in [`REQUESTS_IN_FLIGHT`] until dropped (a cancelled
/// request leaves the gauge too).
#[derive(Debug)]
pub(crate) struct InFlight(());

impl InFlight {
    pub(crate) fn enter() -> Self {
        gauge_of(&KEY_REQUESTS_IN_FLIGHT).increment(1.0);
        InFlight(())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        gauge_of(&KEY_REQUESTS_IN_FLIGHT).decrement(1.0);
    }
}

/// A request finished: its outcome and latency.
pub(crate) fn request_finished(ok: bool, latency: Duration) {
    counter_of(if ok {
        &KEY_REQUESTS_OK
    } else {
        &KEY_REQUESTS_ERROR
    })
    .increment(1);
    histogram_of(&KEY_REQUEST_DURATION).record(latency.as_secs_f64());
}

/// The retry policy retried an attempt.
pub(crate) fn retry() {
    counter_of(&KEY_RETRIES).increment(1);
}

/// A speculative attempt started.
pub(crate) fn speculative_attempt() {
    counter_of(&KEY_SPECULATIVE_ATTEMPTS).increment(1);
}

/// A statement was prepared again on a node that had forgotten it.
pub(crate) fn reprepared() {
    counter_of(&KEY_REPREPARES).increment(1);
}

/// A request went to another shard's connection.
pub(crate) fn shard_fallback_request() {
    counter_of(&KEY_SHARD_FALLBACK_REQUESTS).increment(1);
}

/// A tablet routing payload (v1 or v2) came back (`ok`: it decoded).
pub(crate) fn tablet_misroute(ok: bool) {
    counter_of(if ok {
        &KEY_MISROUTES_OK
    } else {
        &KEY_MISROUTES_ERROR
    })
    .increment(1);
}

/// The number of tablets known changed.
pub(crate) fn tablets_known(n: u64) {
    gauge_of(&KEY_TABLETS_KNOWN).set(n as f64);
}

/// Which port a connection uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PortKind {
    /// The regular CQL port.
    Regular,
    /// The shard-aware port.
    ShardAware,
}

/// The label values of one node, built once per pool.
#[derive(Debug, Clone)]
pub(crate) struct NodeLabels {
    node: SharedString,
    tls: bool,
}

impl NodeLabels {
    pub(crate) fn new(node: std::net::SocketAddr, tls: bool) -> Self {
        Self {
            node: SharedString::from_owned(node.to_string()),
            tls,
        }
    }

    fn node(&self) -> Label {
        Label::new(LABEL_NODE, self.node.clone())
    }

    fn port(&self, kind: PortKind) -> Label {
        let value = match (kind, self.tls) {
            (PortKind::Regular, false) => PORT_REGULAR,
            (PortKind::ShardAware, false) => PORT_SHARD_AWARE,
            (PortKind::Regular, true) => PORT_REGULAR_TLS,
            (PortKind::ShardAware, true) => PORT_SHARD_AWARE_TLS,
        };
        Label::from_static_parts(LABEL_PORT, value)
    }

    /// A connection attempt ended.
    pub(crate) fn connection_attempt(&self, kind: PortKind, shard: ShardTag, ok: bool) {
        let outcome = if ok { OUTCOME_OK } else { OUTCOME_ERROR };
        let labels = vec![
            self.node(),
            shard.label(),
            self.port(kind),
            Label::from_static_parts(LABEL_OUTCOME, outcome),
        ];
        counter!(CONNECTION_ATTEMPTS, labels).increment(1);
    }

    /// A pool connection's TLS handshake succeeded (`resumed`: with a
    /// session ticket).
    pub(crate) fn tls_handshake(&self, resumed: bool) {
        let kind = if resumed { KIND_RESUMED } else { KIND_FULL };
        let labels = vec![self.node(), Label::from_static_parts(LABEL_KIND, kind)];
        counter!(TLS_HANDSHAKES, labels).increment(1);
    }

    /// Sets the number of open connections of one shard through `kind`.
    pub(crate) fn connections(&self, kind: PortKind, shard: ShardTag, n: usize) {
        let labels = vec![self.node(), shard.label(), self.port(kind)];
        gauge!(CONNECTIONS, labels).set(n as f64);
    }

    /// The pool stopped using the shard-aware port.
    pub(crate) fn shard_aware_fallback(&self, reason: &'static str) {
        let labels = vec![self.node(), Label::from_static_parts(LABEL_REASON, reason)];
        counter!(SHARD_AWARE_FALLBACKS, labels).increment(1);
    }

    /// The pool uses the shard-aware port again.
    pub(crate) fn shard_aware_restored(&self) {
        counter!(SHARD_AWARE_RESTORED, vec![self.node()]).increment(1);
    }

    /// The pool waits `delay` before reconnecting.
    pub(crate) fn reconnect_delay(&self, delay: Duration) {
        histogram!(RECONNECT_DELAY, vec![self.node()]).record(delay.as_secs_f64());
    }
}

/// The `shard` label's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShardTag {
    /// A shard of a sharded node.
    Shard(u16),
    /// The node does not shard (Cassandra).
    Unsharded,
    /// Not known (the attempt failed before the node said).
    Unknown,
}

impl ShardTag {
    /// The shard a connection is on: `Unsharded` when the node did not say.
    pub(crate) fn of(shard: Option<u16>) -> Self {
        shard.map_or(ShardTag::Unsharded, ShardTag::Shard)
    }

    fn label(self) -> Label {
        match self {
            ShardTag::Shard(s) => Label::new(LABEL_SHARD, s.to_string()),
            ShardTag::Unsharded => Label::from_static_parts(LABEL_SHARD, SHARD_NONE),
            ShardTag::Unknown => Label::from_static_parts(LABEL_SHARD, SHARD_UNKNOWN),
        }
    }
}
