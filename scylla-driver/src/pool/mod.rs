//! Per-node pools of per-shard connections.
pub mod backoff;
pub mod nat;
pub mod shard_port;
