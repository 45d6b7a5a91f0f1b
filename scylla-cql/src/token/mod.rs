//! Tokens of the Murmur3 partitioner and the bytes they are computed from.
//!
//! - [`murmur3`]: Cassandra's variant of MurmurHash3 (x64, 128-bit), quirks included.
//! - [`partition_key`]: the serialized partition key (single or composite) that is hashed.

pub mod murmur3;
pub mod partition_key;

pub use murmur3::murmur3_token;
pub use partition_key::PartitionKeyBuilder;

/// A position on the Murmur3 token ring.
///
/// The partitioner never produces `i64::MIN` for a key (it maps that hash to
/// `i64::MAX`), so `i64::MIN` is free to act as the ring's minimum token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token(pub i64);

impl Token {
    /// The ring's minimum token; no partition key hashes to it.
    pub const MIN: Token = Token(i64::MIN);
    /// The ring's maximum token.
    pub const MAX: Token = Token(i64::MAX);

    /// The token of value `value` (the same as `Token(value)`).
    pub const fn new(value: i64) -> Self {
        Token(value)
    }

    /// The token's value.
    pub const fn value(self) -> i64 {
        self.0
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
