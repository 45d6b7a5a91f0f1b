//! CQL data types: the [`ColumnType`] tree parsed from metadata, and how Rust
//! values are serialized to and deserialized from their CQL encodings.
//!
//! - [`column_type`]: [`ColumnType`] and [`ColumnSpec`] (result metadata);
//!   the `[option]` encoding of a type is in the private `type_option`.
//! - [`custom_class`]: `org.apache.cassandra.db.marshal.*` class strings.
//! - [`cql_syntax`]: CQL type syntax (`map<text, int>`) and `Display`.
//! - [`value`]: [`CqlValue`], an owned value of any type.
//! - [`serialize`]: [`SerializeValue`] / [`SerializeRow`], Rust values to bytes.
//! - [`deserialize`]: [`DeserializeValue`] / [`DeserializeRow`], bytes to Rust
//!   values (borrowing from the frame where possible), and [`RowIterator`].
//! - [`error`]: type-check, serialization and deserialization errors.
//! - [`serialized_values`]: [`SerializedValues`], encoded bound values.
//! - Types with no std equivalent: [`cql_time`] (`date`, `time`,
//!   `timestamp`), [`duration`], [`decimal`], [`varint`], [`counter`]; and
//!   [`vint`], the variable-length integers of durations and vectors.
//! - `integrations` (with any of the features `chrono-04`, `time-03`,
//!   `num-bigint-03`, `num-bigint-04`, `bigdecimal-04`, `secrecy-10`): the
//!   types of those crates as CQL values.

pub mod column_type;
pub mod counter;
pub mod cql_syntax;
pub mod cql_time;
pub mod custom_class;
pub mod decimal;
pub mod deserialize;
pub mod duration;
pub mod error;
#[cfg(any(
    feature = "chrono-04",
    feature = "time-03",
    feature = "num-bigint-03",
    feature = "num-bigint-04",
    feature = "bigdecimal-04",
    feature = "secrecy-10"
))]
pub mod integrations;
pub mod serialize;
pub mod serialized_values;
pub mod timeuuid;
mod type_option;
pub mod value;
pub mod varint;
pub mod vint;

pub use column_type::{
    CollectionType, ColumnSpec, ColumnSpecs, ColumnType, NativeType, TableSpec, UserDefinedType,
};
pub use counter::Counter;
pub use cql_syntax::CqlTypeParseError;
pub use cql_time::{CqlDate, CqlTime, CqlTimestamp};
pub use decimal::CqlDecimal;
pub use deserialize::{DeserializeRow, DeserializeValue, Row, RowIterator};
pub use duration::CqlDuration;
pub use error::{
    BuiltinTypeCheckError, BuiltinTypeCheckErrorKind, DeserializationError,
    DeserializationErrorKind, ErrorContext, SerializationError, SerializationErrorKind,
    SharedError, TypeCheckError, TypeCheckErrorKind,
};
pub use serialize::{MaybeUnset, SerializeRow, SerializeValue, Unset, Written};
pub use serialized_values::SerializedValues;
pub use timeuuid::CqlTimeuuid;
pub use value::{CqlValue, MaybeEmpty};
pub use varint::CqlVarint;
