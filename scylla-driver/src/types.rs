//! The protocol's vocabulary that a program meets: column types and specs,
//! partition tokens and shards, protocol versions, compression, consistency.

pub use scylla_cql::compression::Compression;
pub use scylla_cql::frame::ProtocolVersion;
pub use scylla_cql::sharding::Shard;
pub use scylla_cql::types::{
    CollectionType, ColumnSpec, ColumnType, CqlTypeParseError, NativeType, UserDefinedType,
};
pub use scylla_cql::{Consistency, Token};
