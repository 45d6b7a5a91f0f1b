//! The CQL native protocol (v4) with ScyllaDB's extensions: wire format, data
//! types, compression, Murmur3 tokens and shard math. No I/O: everything here
//! encodes into caller-owned buffers and decodes from byte slices, so the same
//! code serves the driver (requests out, responses in) and the in-process test
//! cluster (requests in, responses out).
//!
//! # Layout
//! - [`frame`]: header, notation types, every request and response message.
//! - [`types`]: column types and (de)serialization of values.
//! - [`token`]: the Murmur3 partitioner and partition-key bytes.
//! - [`sharding`]: ScyllaDB's shard-of-token and shard-of-source-port rules.
//! - [`compression`]: LZ4 frame body compression.
//! - [`consistency`]: consistency levels.
//! - [`error`]: decode and encode errors.

pub mod compression;
pub mod consistency;
pub mod error;
pub mod frame;
pub mod sharding;
pub mod token;
pub mod types;

/// The items the derive macros of `scylla-driver-macros` generate code
/// against. Not a stable API: use the traits from [`types`].
#[doc(hidden)]
pub mod _macro_internal {
    pub use crate::types::deserialize::udt::UdtIterator;
    pub use crate::types::deserialize::ColumnIterator;
    pub use crate::types::serialize::row::{serialize_value_to, RowSerializationContext};
    pub use crate::types::serialize::writers::{CellWriter, RowWriter, WrittenCellProof};
    pub use crate::types::serialize::{serialize_udt, serialize_udt_with, UdtRules};

    /// The column type under the official crate's name for it here, which
    /// takes the lifetime of the metadata it borrows from; this crate's
    /// [`ColumnType`](crate::types::ColumnType) borrows nothing, so the
    /// lifetime is unused.
    pub type ColumnType<'metadata> = crate::types::ColumnType;
    pub use crate::types::{CollectionType, NativeType, UserDefinedType};
    pub use crate::types::{
        ColumnSpec, DeserializationError, DeserializationErrorKind, DeserializeRow,
        DeserializeValue, SerializationError, SerializationErrorKind, SerializeRow, SerializeValue,
        SerializedValues, TypeCheckError, TypeCheckErrorKind, Written,
    };
}

pub use compression::Compression;
pub use consistency::{Consistency, NotSerialConsistency, SerialConsistency};
pub use error::{DecodeError, EncodeError};
pub use token::Token;
