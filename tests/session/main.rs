//! The session API against the in-process test cluster: queries, prepared
//! statements, paging, batches, errors, profiles, policies, failover, the
//! cluster view, address translation, metadata, credentials kept out of logs
//! and errors. (The official crate's paths, as programs written for it use
//! them, are tested in `as-scylla/`.)
//!
//! One test binary for these modules (each was a binary of its own): fewer
//! links, and one process that runs their tests side by side.
#![allow(clippy::unwrap_used, missing_docs)]

#[path = "../common/mod.rs"]
mod common;

mod address_translation;
mod cassandra_metadata;
mod client_options;
mod cluster_view;
mod compat_observability;
mod credentials;
mod derive_session;
mod error_texts;
mod execution_profiles;
mod future_sizes;
mod maintenance_socket;
mod node_events;
mod quiet_metadata;
mod reprepare_storm;
mod request_history;
mod schema_metadata;
mod session;
mod session_deadline;
mod session_errors;
mod session_failover;
mod session_policies;
mod session_v5;
mod tls_tickets;
