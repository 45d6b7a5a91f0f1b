//! Custom class strings (`org.apache.cassandra.db.marshal.*`), as sent for
//! custom types in result metadata and found in schema tables.
//!
//! Placeholder: only the identity mapping to [`ColumnType::Custom`] so far;
//! the types module replaces it with a full parser (vector, reversed, frozen,
//! collections, ...).

use super::column_type::ColumnType;
use crate::error::DecodeError;

/// Parses a custom class string into a column type.
pub(crate) fn parse(class: &str, _depth: usize) -> Result<ColumnType, DecodeError> {
    Ok(ColumnType::Custom(class.to_owned()))
}

/// The class string of a type that travels as a custom type.
pub(crate) fn to_class_string(t: &ColumnType) -> String {
    match t {
        ColumnType::Custom(c) => c.clone(),
        other => format!("{other:?}"),
    }
}
