//! The official `scylla` crate's `observability` paths: server-side
//! [`tracing`] of requests, the session's [`metrics`], and the [`history`]
//! of a statement's requests (attempts, retries, speculative attempts) told
//! to a listener. The driver's own logs go through the `tracing` crate.

/// What happened while a statement's requests ran: attempts, retries and
/// speculative attempts, told to a [`HistoryListener`](history::HistoryListener).
pub mod history {
    pub use crate::history::*;
}

/// Fetching the trace of a traced request
/// ([`Session::get_tracing_info`](crate::Session::get_tracing_info)).
pub mod tracing {
    #[doc(no_inline)]
    pub use crate::session::{TraceFetchOptions, TracingError, TracingEvent, TracingInfo};
}

/// The session's metrics as the official crate reads them
/// ([`Session::get_metrics`](crate::Session::get_metrics)).
pub mod metrics {
    #[doc(no_inline)]
    pub use crate::metrics::{MetricsError, SessionMetrics as Metrics, Snapshot};
}
