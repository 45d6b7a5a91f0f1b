//! Serialization of Rust values into CQL values, checked against the
//! [`ColumnType`] they are bound to.
//!
//! [`SerializeValue`] writes one value through a [`CellWriter`]: the place
//! of exactly one `[bytes]` value in the request being built (see
//! [`writers`]), so bound values, collection elements and UDT fields are
//! all written in place, with no intermediate buffer. [`SerializeRow`]
//! writes all the bound values of a statement.
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
//! Check the [`ColumnType`], then write through the writer (or hand it to a
//! type that already serializes); for a struct mapped to a UDT call
//! [`serialize_udt`] with its fields:
//!
//! ```
//! use scylla_driver_cql::types::serialize::writers::{CellWriter, WrittenCellProof};
//! use scylla_driver_cql::types::serialize::{SerializationError, SerializeValue};
//! use scylla_driver_cql::types::{ColumnType, NativeType};
//!
//! /// Stored as `text`, upper-cased.
//! struct Shout<'a>(&'a str);
//!
//! impl SerializeValue for Shout<'_> {
//!     fn serialize<'b>(
//!         &self,
//!         typ: &ColumnType,
//!         writer: CellWriter<'b>,
//!     ) -> Result<WrittenCellProof<'b>, SerializationError> {
//!         self.0.to_uppercase().serialize(typ, writer)
//!     }
//! }
//!
//! let mut buf = Vec::new();
//! let (text, int) = (ColumnType::Native(NativeType::Text), ColumnType::Native(NativeType::Int));
//! Shout("hi").serialize(&text, CellWriter::new(&mut buf)).unwrap();
//! assert_eq!(buf, [0, 0, 0, 2, b'H', b'I']);
//! assert!(Shout("hi").serialize(&int, CellWriter::new(&mut Vec::new())).is_err());
//! ```

pub mod batch;
pub mod collections;
pub mod cql_value;
pub mod native;
pub mod row;
pub mod tuple;
pub mod udt;
pub mod vector;
pub mod writers;

pub use batch::BatchValues;
pub use native::{MaybeUnset, Unset};
pub use row::SerializeRow;
pub use udt::{serialize_udt, serialize_udt_with, UdtRules};
pub use writers::{CellWriter, WrittenCellProof};

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
    /// Writes `self` as a value of type `typ` through `writer` (a value, a
    /// null or an unset) and returns the writer's proof. Fails (naming the
    /// Rust and CQL types) if `self` cannot represent a `typ` value; what was
    /// written before the failure is then discarded by the caller.
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError>;
}

/// Serializes `v` as a value of type `typ` and appends its bytes (without
/// the `[bytes]` length) to `out`; says what was written (nothing is
/// appended for a null or an unset). For code that needs a value's bytes on
/// their own, outside a request.
pub fn serialize_bytes<T: SerializeValue + ?Sized>(
    v: &T,
    typ: &ColumnType,
    out: &mut Vec<u8>,
) -> Result<Written, SerializationError> {
    let at = out.len();
    let written = match v.serialize(typ, CellWriter::new(out)) {
        Ok(proof) => proof.written(),
        Err(e) => {
            out.truncate(at);
            return Err(e);
        }
    };
    out.drain(at..at + 4);
    Ok(written)
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

/// Writes `v` as a `[bytes]` element of type `typ` through `writer`; a
/// null is allowed only when `null_ok` (tuple and UDT fields), an unset
/// never.
pub(crate) fn put_element<T: SerializeValue + ?Sized>(
    v: &T,
    typ: &ColumnType,
    writer: CellWriter<'_>,
    null_ok: bool,
) -> Result<(), SerializationError> {
    let written = v
        .serialize(typ, writer)
        .map_err(|e| e.with_types::<T>(typ))?
        .written();
    let kind = match written {
        Written::Value => return Ok(()),
        Written::Null if null_ok => return Ok(()),
        Written::Null => SerializationErrorKind::NullNotAllowed,
        Written::Unset => SerializationErrorKind::UnsetNotAllowed,
    };
    Err(SerializationError::of::<T>(typ, kind))
}

impl<T: SerializeValue + ?Sized> SerializeValue for &T {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        (**self).serialize(typ, writer)
    }
}

impl<T: SerializeValue + ?Sized> SerializeValue for Box<T> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        (**self).serialize(typ, writer)
    }
}

impl<T: SerializeValue + ?Sized> SerializeValue for std::sync::Arc<T> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        (**self).serialize(typ, writer)
    }
}
