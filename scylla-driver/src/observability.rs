//! The official `scylla` crate's `observability` paths: server-side
//! [`tracing`] of requests. (Request history listeners are not offered;
//! the driver logs through the `tracing` crate and counts in
//! [`metrics`](crate::metrics).)

/// Fetching the trace of a traced request
/// ([`Session::get_tracing_info`](crate::Session::get_tracing_info)).
pub mod tracing {
    pub use crate::session::{TraceFetchOptions, TracingError, TracingEvent, TracingInfo};
}
