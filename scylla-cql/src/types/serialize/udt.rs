//! User-defined types: a UDT value is a sequence of `[bytes]` field values in
//! the type's field order (null allowed). [`serialize_udt`] matches named
//! fields to the type, so a user struct maps to a UDT in a few lines:
//!
//! ```
//! use scylla_driver_cql::types::serialize::writers::{CellWriter, WrittenCellProof};
//! use scylla_driver_cql::types::serialize::{serialize_udt, SerializeValue, SerializationError};
//! use scylla_driver_cql::types::ColumnType;
//!
//! struct Address { street: String, number: i32 }
//!
//! impl SerializeValue for Address {
//!     fn serialize<'b>(
//!         &self,
//!         typ: &ColumnType,
//!         writer: CellWriter<'b>,
//!     ) -> Result<WrittenCellProof<'b>, SerializationError> {
//!         serialize_udt::<Self, _>(typ, writer, [
//!             ("street", &self.street as &dyn SerializeValue),
//!             ("number", &self.number),
//!         ])
//!     }
//! }
//! ```

use super::writers::{CellWriter, WrittenCellProof};
use super::{mismatch, put_element, SerializationError, SerializationErrorKind, SerializeValue};
use crate::types::column_type::ColumnType;

/// Serializes the named `fields` of a `T` as a value of the UDT `typ`.
///
/// Fields are matched by name, in any order; the type's fields missing from
/// `fields` are written as null; a name the type lacks is an error (so a
/// renamed field is not silently dropped). [`serialize_udt_with`] relaxes
/// or tightens those rules.
pub fn serialize_udt<'a, 'b, T: ?Sized, V: SerializeValue + 'a>(
    typ: &ColumnType,
    writer: CellWriter<'b>,
    fields: impl IntoIterator<Item = (&'a str, V)> + Clone,
) -> Result<WrittenCellProof<'b>, SerializationError> {
    serialize_udt_with::<T, V>(typ, writer, fields, UdtRules::default())
}

/// How [`serialize_udt_with`] matches a struct's fields to a UDT's (what the
/// derive's `allow_missing` and `forbid_excess_udt_fields` attributes ask).
#[derive(Debug, Clone, Copy, Default)]
pub struct UdtRules<'r> {
    /// Fields that may be missing from the type: then they are not written
    /// (any other field the type lacks is an error).
    pub optional: &'r [&'r str],
    /// A field of the type that `fields` lacks is an error
    /// ([`SerializationErrorKind::NoValueForUdtField`]) instead of a null.
    pub forbid_excess: bool,
}

/// [`serialize_udt`] with `rules`.
pub fn serialize_udt_with<'a, 'b, T: ?Sized, V: SerializeValue + 'a>(
    typ: &ColumnType,
    writer: CellWriter<'b>,
    fields: impl IntoIterator<Item = (&'a str, V)> + Clone,
    rules: UdtRules<'_>,
) -> Result<WrittenCellProof<'b>, SerializationError> {
    let ColumnType::UserDefinedType { definition, .. } = typ else {
        return Err(mismatch::<T>(typ));
    };
    let type_fields = &definition.field_types;
    for (name, _) in fields.clone() {
        if !type_fields.iter().any(|(f, _)| f == name) && !rules.optional.contains(&name) {
            return Err(SerializationError::of::<T>(
                typ,
                SerializationErrorKind::UnknownUdtField(name.to_owned()),
            ));
        }
    }
    let mut value = writer.into_value_builder();
    for (fname, ftype) in type_fields {
        match fields.clone().into_iter().find(|(n, _)| *n == fname) {
            Some((_, v)) => put_element(&v, ftype, value.make_sub_writer(), true)?,
            None if rules.forbid_excess => {
                return Err(SerializationError::of::<T>(
                    typ,
                    SerializationErrorKind::NoValueForUdtField(fname.clone()),
                ));
            }
            None => {
                value.make_sub_writer().set_null();
            }
        }
    }
    value
        .finish()
        .map_err(|e| SerializationError::from(e).with_types::<T>(typ))
}
