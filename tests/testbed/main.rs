//! The test cluster itself, spoken to by raw clients and by the driver: its
//! CQL, its network behaviour, tablets, TLS, tracing, UDTs and vector search,
//! protocol v5.
//!
//! One test binary for these modules (each was a binary of its own): fewer
//! links, and one process that runs their tests side by side.
#![allow(clippy::unwrap_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/raw_client.rs"]
mod raw_client;

mod testbed_cql;
mod testbed_fuzz;
mod testbed_network;
mod testbed_routes;
mod testbed_tablets;
mod testbed_tls;
mod testbed_traces;
mod testbed_tracing;
mod testbed_udt_vector;
mod testbed_v5;
