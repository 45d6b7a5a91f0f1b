//! An in-process, ScyllaDB-like test cluster on loopback.
