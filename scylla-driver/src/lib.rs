//! A fast, shard-aware async CQL driver for ScyllaDB and Apache Cassandra.

pub mod cluster;
pub mod connection;
pub mod pool;
pub mod routing;
