//! `counter`: a 64-bit value that can only be incremented or decremented. A
//! newtype, so that binding a counter is explicit (a plain `i64` serializes
//! as `bigint` and also as `counter`).

/// A CQL `counter` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Counter(pub i64);
