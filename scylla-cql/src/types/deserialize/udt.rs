//! User-defined type values: `[bytes]` field values in the type's field
//! order; a value may have fewer fields than its type (the rest are null).
//! [`UdtIterator`] pairs each field of the type with its raw value, which is
//! all a user needs to implement [`DeserializeValue`](super::DeserializeValue)
//! for a struct:
//!
//! ```
//! use scylla_driver_cql::types::deserialize::{udt::UdtIterator, DeserializeValue, DeserializationError, TypeCheckError};
//! use scylla_driver_cql::types::ColumnType;
//!
//! struct Address { street: String, number: Option<i32> }
//!
//! impl<'f, 'm> DeserializeValue<'f, 'm> for Address {
//!     fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
//!         // Check that the UDT has the expected fields (omitted here).
//!         Ok(())
//!     }
//!     fn deserialize(typ: &'m ColumnType, v: Option<&'f [u8]>) -> Result<Self, DeserializationError> {
//!         let mut a = Address { street: String::new(), number: None };
//!         for field in UdtIterator::new::<Self>(typ, v)? {
//!             let (name, ftype, value) = field?;
//!             match name {
//!                 "street" => a.street = String::deserialize(ftype, value)?,
//!                 "number" => a.number = Option::<i32>::deserialize(ftype, value)?,
//!                 _ => {}
//!             }
//!         }
//!         Ok(a)
//!     }
//! }
//! ```

use std::slice;

use super::tuple::next_elem;
use super::{
    error, non_null, DeserializationError, DeserializationErrorKind, TypeCheckError,
    TypeCheckErrorKind,
};
use crate::frame::wire::WireReader;
use crate::types::column_type::ColumnType;

/// The fields of a UDT value: `(name, type, raw value)` in type order, then
/// an error if bytes are left over.
#[derive(Debug, Clone)]
pub struct UdtIterator<'f, 't> {
    typ: &'t ColumnType,
    fields: slice::Iter<'t, (String, ColumnType)>,
    r: WireReader<'f>,
}

impl<'f, 't> UdtIterator<'f, 't> {
    /// Iterates over `v`, a value of the UDT `typ`, deserialized as a `C`
    /// (named in errors).
    pub fn new<C: ?Sized>(
        typ: &'t ColumnType,
        v: Option<&'f [u8]>,
    ) -> Result<Self, DeserializationError> {
        let ColumnType::UserDefinedType { definition, .. } = typ else {
            return Err(TypeCheckError::of::<C>(typ, TypeCheckErrorKind::Mismatch).into());
        };
        let bytes = non_null::<C>(typ, v)?;
        Ok(UdtIterator {
            typ,
            fields: definition.field_types.iter(),
            r: WireReader::new(bytes),
        })
    }
}

impl<'f, 't> Iterator for UdtIterator<'f, 't> {
    type Item = Result<(&'t str, &'t ColumnType, Option<&'f [u8]>), DeserializationError>;

    fn next(&mut self) -> Option<Self::Item> {
        let Some((name, ftype)) = self.fields.next() else {
            let n = self.r.remaining();
            if n == 0 {
                return None;
            }
            self.r = WireReader::new(&[]);
            return Some(Err(error::<Self>(
                self.typ,
                DeserializationErrorKind::TrailingBytes(n),
            )));
        };
        match next_elem::<Self>(self.typ, &mut self.r) {
            Ok(v) => Some(Ok((name.as_str(), ftype, v))),
            Err(e) => {
                // Stop after the first malformed field.
                self.fields = [].iter();
                self.r = WireReader::new(&[]);
                Some(Err(e))
            }
        }
    }
}
