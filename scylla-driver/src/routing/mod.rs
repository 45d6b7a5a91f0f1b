//! Tokens and shards ([`Token`], [`Shard`]): where a partition lives.
//!
//! With the `unstable-internals` feature, this module also holds the
//! driver's precomputed token- and shard-aware routing table (pure data, no
//! I/O; see `table`); without it, only the items above are public.

internal_mods!(directory);
internal_mods!(load);
pub(crate) mod partition_key;
internal_mods!(plan);
internal_mods!(replicas);
internal_mods!(ring);
internal_mods!(table);
internal_mods!(tablets);
#[cfg(test)]
mod tests;
internal_mods!(topology);

/// A shard of a ScyllaDB node, by number.
pub use scylla_cql::sharding::Shard;
/// A position on the token ring (the Murmur3 token of a partition key).
pub use scylla_cql::token::Token;

#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub use table::*;
#[cfg(not(feature = "unstable-internals"))]
pub(crate) use table::*;
