//! The stable names and label values of what the driver records through the
//! [`metrics`](https://docs.rs/metrics) facade (the table is in
//! [`crate::metrics`]).
//!
//! Dashboards and alerts may depend on these strings: renaming one is a
//! breaking change.

/// Counter: requests finished (after retries and speculative attempts), by
/// `outcome` ([`OUTCOME_OK`] / [`OUTCOME_ERROR`]).
pub const REQUESTS: &str = "scylla_driver_requests_total";
/// Histogram, seconds: the latency of every request, from the call to its
/// result (retries and speculative attempts included), whatever the outcome.
pub const REQUEST_DURATION: &str = "scylla_driver_request_duration_seconds";
/// Gauge: requests started and not yet finished.
pub const REQUESTS_IN_FLIGHT: &str = "scylla_driver_requests_in_flight";
/// Gauge: requests waiting for a free stream id on a connection whose 32,768
/// are all busy (0 unless the driver is overloaded).
pub const REQUESTS_QUEUED: &str = crate::connection::stats::REQUESTS_QUEUED_METRIC;
/// Counter: attempts retried (same or next target), by the retry policy.
pub const RETRIES: &str = "scylla_driver_retries_total";
/// Counter: speculative attempts started.
pub const SPECULATIVE_ATTEMPTS: &str = "scylla_driver_speculative_attempts_total";
/// Counter: PREPAREs sent again to a node that answered UNPREPARED (once
/// per statement and node however many requests met it).
pub const REPREPARES: &str = "scylla_driver_reprepares_total";
/// Counter: requests sent to another shard's connection because their own
/// shard had none open.
pub const SHARD_FALLBACK_REQUESTS: &str = "scylla_driver_shard_fallback_requests_total";
/// Counter: connection attempts by `node`, `shard`, `port` and `outcome`.
pub const CONNECTION_ATTEMPTS: &str = "scylla_driver_connection_attempts_total";
/// Gauge: open connections in the pools, by `node`, `shard` and `port`.
pub const CONNECTIONS: &str = "scylla_driver_connections";
/// Counter: times a node's pool stopped using the shard-aware port, by `node`
/// and `reason`.
pub const SHARD_AWARE_FALLBACKS: &str = "scylla_driver_shard_aware_fallbacks_total";
/// Counter: times a node's pool started using the shard-aware port again, by
/// `node`.
pub const SHARD_AWARE_RESTORED: &str = "scylla_driver_shard_aware_restored_total";
/// Histogram, seconds: the backoff delays a node's pool waited before
/// reconnecting, by `node`.
pub const RECONNECT_DELAY: &str = "scylla_driver_reconnect_delay_seconds";
/// Counter: requests the server answered with a tablet's routing (a
/// `tablets-routing-v1` payload: the request was misrouted; a
/// `tablets-routing-v2` one: its tablet version was stale), by `outcome` ([`OUTCOME_OK`]: the
/// payload was learned / [`OUTCOME_ERROR`]: it did not decode).
pub const TABLET_MISROUTES: &str = "scylla_driver_tablet_misroutes_total";
/// Gauge: tablets known, over all tables.
pub const TABLETS_KNOWN: &str = "scylla_driver_tablets_known";
/// Counter: TLS handshakes of pool connections that succeeded, by `node` and
/// `kind` ([`KIND_FULL`] / [`KIND_RESUMED`]: the node accepted a session
/// ticket). In a reconnect storm, full handshakes are what costs the nodes.
pub const TLS_HANDSHAKES: &str = "scylla_driver_tls_handshakes_total";

/// Label: the node's CQL address as `ip:port` (its regular port).
pub const LABEL_NODE: &str = "node";
/// Label: the shard (decimal); [`SHARD_NONE`] for an unsharded node
/// (Cassandra), [`SHARD_UNKNOWN`] for a failed regular-port attempt.
pub const LABEL_SHARD: &str = "shard";
/// Label: the port kind: [`PORT_REGULAR`], [`PORT_SHARD_AWARE`],
/// [`PORT_REGULAR_TLS`], [`PORT_SHARD_AWARE_TLS`].
pub const LABEL_PORT: &str = "port";
/// Label: [`OUTCOME_OK`] or [`OUTCOME_ERROR`].
pub const LABEL_OUTCOME: &str = "outcome";
/// Label: why the shard-aware port is not used: `shard_mismatch`, `refused`,
/// `timed_out`, `ports_exhausted`.
pub const LABEL_REASON: &str = "reason";

/// Label: how a TLS handshake ran: [`KIND_FULL`] or [`KIND_RESUMED`].
pub const LABEL_KIND: &str = "kind";
/// `kind`: a full TLS handshake.
pub const KIND_FULL: &str = "full";
/// `kind`: a TLS handshake that resumed an earlier session.
pub const KIND_RESUMED: &str = "resumed";

/// `outcome`: succeeded.
pub const OUTCOME_OK: &str = "ok";
/// `outcome`: failed.
pub const OUTCOME_ERROR: &str = "error";
/// `port`: the regular CQL port (9042).
pub const PORT_REGULAR: &str = "regular";
/// `port`: the shard-aware port (19042).
pub const PORT_SHARD_AWARE: &str = "shard_aware";
/// `port`: the TLS CQL port (9142).
pub const PORT_REGULAR_TLS: &str = "regular_tls";
/// `port`: the TLS shard-aware port (19142).
pub const PORT_SHARD_AWARE_TLS: &str = "shard_aware_tls";
/// `shard`: the node does not shard (Cassandra).
pub const SHARD_NONE: &str = "none";
/// `shard`: not known (the attempt failed before the node said).
pub const SHARD_UNKNOWN: &str = "unknown";
