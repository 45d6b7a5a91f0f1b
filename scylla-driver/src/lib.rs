//! A fast, shard-aware async CQL driver for ScyllaDB and Apache Cassandra.

pub mod connection;
pub mod metrics;
pub mod pool;
pub mod routing;
