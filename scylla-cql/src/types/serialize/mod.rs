//! Serialization of Rust values into CQL values, checked against the
//! [`ColumnType`] they are bound to.
//!
//! [`SerializeValue`] writes one value's bytes (no length prefix) into a
//! `Vec<u8>` and reports whether it wrote a value, a null or an unset; that is
//! exactly what [`SerializedValues::push_serialized`] needs, so bound values
//! are written in place, with no intermediate buffer. [`SerializeRow`] writes
//! all the bound values of a statement.
//!
//! - [`native`]: numbers, text, blobs, uuids, addresses, the calendar types,
//!   `Option<T>` (null) and [`Unset`].
//! - [`collections`]: lists, sets and maps.
//! - [`tuple`](mod@tuple): Rust tuples as CQL tuples.
//! - [`udt`]: user-defined types ([`serialize_udt`] for user structs).
//! - [`vector`]: `vector<T, N>`, with its fixed/variable element layout.
//! - [`cql_value`]: [`CqlValue`](super::CqlValue), for any type.
//! - [`row`]: [`SerializeRow`] for tuples, slices and `()`.
//! - [`batch`]: [`BatchValues`], the rows of a batch (tuples of rows of
//!   different types, slices and vectors of rows).
//!
//! # Implementing for your own type
//!
//! Check the [`ColumnType`], append the bytes, return [`Written::Value`]; for
//! a struct mapped to a UDT call [`serialize_udt`] with its fields.

pub mod batch;
pub mod collections;
pub mod cql_value;
pub mod native;
pub mod row;
pub mod tuple;
pub mod udt;
pub mod vector;

pub use batch::BatchValues;
pub use native::{MaybeUnset, Unset};
pub use row::SerializeRow;
pub use udt::serialize_udt;

use super::column_type::ColumnType;
pub use super::error::{SerializationError, SerializationErrorKind};
#[cfg(doc)]
use super::serialized_values::SerializedValues;

/// What a serializer wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The value's bytes (possibly zero of them: an "empty" value).
    Value,
    /// Nothing: the value is null.
    Null,
    /// Nothing: the value is "not set" (only valid as a top-level bound value).
    Unset,
}

/// A Rust value that can be serialized as a CQL value.
pub trait SerializeValue {
    /// Appends the encoding of `self` as a value of type `typ` to `out`,
    /// without a length prefix, and says what was written. Writes nothing for
    /// [`Written::Null`] and [`Written::Unset`]. Fails (naming the Rust and
    /// CQL types) if `self` cannot represent a `typ` value.
    fn serialize(&self, typ: &ColumnType, out: &mut Vec<u8>)
        -> Result<Written, SerializationError>;
}

/// The error for a Rust type `T` that cannot be serialized as `typ`.
pub fn mismatch<T: ?Sized>(typ: &ColumnType) -> SerializationError {
    SerializationError::of::<T>(typ, SerializationErrorKind::Mismatch)
}

/// Fails with [`mismatch`] unless `ok`.
pub(crate) fn check<T: ?Sized>(typ: &ColumnType, ok: bool) -> Result<(), SerializationError> {
    if ok {
        Ok(())
    } else {
        Err(mismatch::<T>(typ))
    }
}

/// Appends an `[int]` element count.
pub(crate) fn put_count<T: ?Sized>(
    typ: &ColumnType,
    out: &mut Vec<u8>,
    n: usize,
) -> Result<(), SerializationError> {
    let n = i32::try_from(n).map_err(|_| {
        SerializationError::of::<T>(
            typ,
            SerializationErrorKind::Encode(crate::error::EncodeError::TooMany {
                what: "collection elements",
                count: n,
                max: i32::MAX as usize,
            }),
        )
    })?;
    out.extend_from_slice(&n.to_be_bytes());
    Ok(())
}

/// Appends `v` as a `[bytes]` element of type `typ`: a back-filled `[int]`
/// length, or -1 for a null when `null_ok` (tuple and UDT fields). Unset is
/// never allowed inside a value.
pub(crate) fn put_element<T: SerializeValue + ?Sized>(
    v: &T,
    typ: &ColumnType,
    out: &mut Vec<u8>,
    null_ok: bool,
) -> Result<(), SerializationError> {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    let len: i32 = match v.serialize(typ, out)? {
        Written::Value => {
            let n = out.len() - at - 4;
            i32::try_from(n).map_err(|_| {
                SerializationError::of::<T>(
                    typ,
                    SerializationErrorKind::Encode(crate::error::EncodeError::TooLong {
                        what: "element",
                        length: n,
                        max: i32::MAX as usize,
                    }),
                )
            })?
        }
        Written::Null if null_ok => {
            out.truncate(at + 4);
            -1
        }
        Written::Null => {
            return Err(SerializationError::of::<T>(
                typ,
                SerializationErrorKind::NullNotAllowed,
            ))
        }
        Written::Unset => {
            return Err(SerializationError::of::<T>(
                typ,
                SerializationErrorKind::UnsetNotAllowed,
            ))
        }
    };
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

impl<T: SerializeValue + ?Sized> SerializeValue for &T {
    fn serialize(
        &self,
        typ: &ColumnType,
        out: &mut Vec<u8>,
    ) -> Result<Written, SerializationError> {
        (**self).serialize(typ, out)
    }
}

impl<T: SerializeValue + ?Sized> SerializeValue for Box<T> {
    fn serialize(
        &self,
        typ: &ColumnType,
        out: &mut Vec<u8>,
    ) -> Result<Written, SerializationError> {
        (**self).serialize(typ, out)
    }
}

impl<T: SerializeValue + ?Sized> SerializeValue for std::sync::Arc<T> {
    fn serialize(
        &self,
        typ: &ColumnType,
        out: &mut Vec<u8>,
    ) -> Result<Written, SerializationError> {
        (**self).serialize(typ, out)
    }
}
