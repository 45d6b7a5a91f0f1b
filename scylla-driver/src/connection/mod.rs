//! One TCP connection to one shard of one node.
pub mod auth;
pub mod coalescing;
pub mod open;
pub mod stream_slots;
