//! User-defined types: a UDT value is a sequence of `[bytes]` field values in
//! the type's field order (null allowed). [`serialize_udt`] matches named
//! fields to the type, so a user struct maps to a UDT in a few lines:
//!
//! ```
//! use scylla_driver_cql::types::serialize::{serialize_udt, SerializeValue, SerializationError, Written};
//! use scylla_driver_cql::types::ColumnType;
//!
//! struct Address { street: String, number: i32 }
//!
//! impl SerializeValue for Address {
//!     fn serialize(&self, typ: &ColumnType, out: &mut Vec<u8>) -> Result<Written, SerializationError> {
//!         serialize_udt::<Self, _>(typ, out, [
//!             ("street", &self.street as &dyn SerializeValue),
//!             ("number", &self.number),
//!         ])
//!     }
//! }
//! ```

use super::{
    mismatch, put_element, SerializationError, SerializationErrorKind, SerializeValue, Written,
};
use crate::types::column_type::ColumnType;

/// Serializes the named `fields` of a `T` as a value of the UDT `typ`.
///
/// Fields are matched by name, in any order; the type's fields missing from
/// `fields` are written as null; a name the type lacks is an error (so a
/// renamed field is not silently dropped).
pub fn serialize_udt<'a, T: ?Sized, V: SerializeValue + 'a>(
    typ: &ColumnType,
    out: &mut Vec<u8>,
    fields: impl IntoIterator<Item = (&'a str, V)> + Clone,
) -> Result<Written, SerializationError> {
    let ColumnType::Udt {
        fields: type_fields,
        ..
    } = typ
    else {
        return Err(mismatch::<T>(typ));
    };
    for (name, _) in fields.clone() {
        if !type_fields.iter().any(|(f, _)| f == name) {
            return Err(SerializationError::of::<T>(
                typ,
                SerializationErrorKind::UnknownUdtField(name.to_owned()),
            ));
        }
    }
    for (fname, ftype) in type_fields {
        match fields.clone().into_iter().find(|(n, _)| *n == fname) {
            Some((_, v)) => put_element(&v, ftype, out, true)?,
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    Ok(Written::Value)
}
