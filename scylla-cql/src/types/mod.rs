//! CQL data types: the [`ColumnType`] tree parsed from metadata, and how Rust
//! values are serialized to and deserialized from their CQL encodings.

pub mod column_type;
mod custom_class;

pub use column_type::{ColumnSpec, ColumnType};
pub mod serialized_values;

pub use serialized_values::SerializedValues;
