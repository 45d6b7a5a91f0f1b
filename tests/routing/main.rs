//! Connections, pools and routing against the in-process test cluster:
//! shard-aware connections, NAT-free pools, tablets, protocol v5 framing, TLS.
//!
//! One test binary for these modules (each was a binary of its own): fewer
//! links, and one process that runs their tests side by side.
#![allow(clippy::unwrap_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

mod client_routes;
mod connection_smoke;
mod official_routing;
mod pool;
mod protocol_v5;
mod shard_aware_batches;
mod tablets;
mod tablets_layer;
mod tablets_v2;
mod tls_cluster;
