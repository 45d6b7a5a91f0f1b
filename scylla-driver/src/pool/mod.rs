//! Per-node pools of per-shard connections.
pub mod backoff;
