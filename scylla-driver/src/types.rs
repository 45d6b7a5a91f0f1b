//! The protocol's vocabulary that a program meets: column types and specs,
//! partition tokens and shards, protocol versions, compression, consistency.

#[doc(no_inline)]
pub use scylla_cql::compression::Compression;
#[doc(no_inline)]
pub use scylla_cql::frame::ProtocolVersion;
#[doc(no_inline)]
pub use scylla_cql::sharding::Shard;
#[doc(no_inline)]
pub use scylla_cql::types::{
    CollectionType, ColumnSpec, ColumnType, CqlTypeParseError, NativeType, UserDefinedType,
};
#[doc(no_inline)]
pub use scylla_cql::{Consistency, Token};
