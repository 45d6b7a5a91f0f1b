//! Tokens and shards ([`Token`], [`Shard`]): where a partition lives.
//!
//! With the `unstable-internals` feature, this module also holds the
//! driver's precomputed token- and shard-aware routing table (pure data, no
//! I/O; see `table`); without it, only the items above are public.

#[cfg_attr(
    not(feature = "unstable-internals"),
    allow(unreachable_pub, dead_code, unused_imports)
)]
mod directory;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod load;
#[cfg(not(feature = "unstable-internals"))]
#[allow(unreachable_pub, dead_code, unused_imports)]
pub(crate) mod load;
pub(crate) mod partition_key;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod plan;
#[cfg(not(feature = "unstable-internals"))]
#[allow(unreachable_pub, dead_code, unused_imports)]
pub(crate) mod plan;
#[cfg_attr(
    not(feature = "unstable-internals"),
    allow(unreachable_pub, dead_code, unused_imports)
)]
mod replicas;
#[cfg_attr(
    not(feature = "unstable-internals"),
    allow(unreachable_pub, dead_code, unused_imports)
)]
mod ring;
#[cfg_attr(
    not(feature = "unstable-internals"),
    allow(unreachable_pub, dead_code, unused_imports)
)]
mod table;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod tablets;
#[cfg(not(feature = "unstable-internals"))]
#[allow(unreachable_pub, dead_code, unused_imports)]
pub(crate) mod tablets;
#[cfg(test)]
mod tests;
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub mod topology;
#[cfg(not(feature = "unstable-internals"))]
#[allow(unreachable_pub, dead_code, unused_imports)]
pub(crate) mod topology;

/// A shard of a ScyllaDB node, by number.
pub use scylla_cql::sharding::Shard;
/// A position on the token ring (the Murmur3 token of a partition key).
pub use scylla_cql::token::Token;

#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub use table::*;
#[cfg(not(feature = "unstable-internals"))]
#[allow(unused_imports)]
pub(crate) use table::*;
