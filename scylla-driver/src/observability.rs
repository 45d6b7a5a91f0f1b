//! The official `scylla` crate's `observability` paths: server-side
//! [`tracing`] of requests and the session's [`metrics`]. (Request history
//! listeners are not offered: see `docs/migrating-from-scylla.md`; the
//! driver logs through the `tracing` crate.)

/// Fetching the trace of a traced request
/// ([`Session::get_tracing_info`](crate::Session::get_tracing_info)).
pub mod tracing {
    pub use crate::session::{TraceFetchOptions, TracingError, TracingEvent, TracingInfo};
}

/// The session's metrics as the official crate reads them
/// ([`Session::get_metrics`](crate::Session::get_metrics)).
pub mod metrics {
    pub use crate::metrics::{MetricsError, SessionMetrics as Metrics, Snapshot};
}
