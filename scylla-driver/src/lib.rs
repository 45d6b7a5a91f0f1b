//! A fast, shard-aware async CQL driver for ScyllaDB and Apache Cassandra.
pub mod routing;
