//! Deserialization of CQL values into Rust values, borrowing from the frame
//! where possible (`&'frame str`, `&'frame [u8]`).
//!
//! [`DeserializeValue`] has two steps: `type_check`, run once per result
//! against the column types, and `deserialize`, run per value. `deserialize`
//! trusts that the type check passed only for *meaning* (it does not re-check
//! the type); it never trusts the bytes: malformed input yields an error,
//! never a panic or an unbounded allocation. [`DeserializeRow`] does the same
//! for whole rows, and [`RowIterator`] walks the rows of a result.
//!
//! - [`native`]: scalars, `Option<T>` (null), [`MaybeEmpty<T>`](super::MaybeEmpty).
//! - [`collections`]: `Vec`, sets and maps from lists, sets and maps.
//! - [`tuple`](mod@tuple): Rust tuples from CQL tuples.
//! - [`udt`]: [`UdtIterator`](udt::UdtIterator) for user structs.
//! - [`vector`]: `vector<T, N>` into `Vec<T>` or `[T; N]`.
//! - [`cql_value`]: [`CqlValue`](super::CqlValue) for any type.
//! - [`row`]: [`DeserializeRow`], [`Row`], [`RowIterator`], and
//!   [`impl_deserialize_row!`](crate::impl_deserialize_row) for structs.

pub mod collections;
pub mod cql_value;
pub mod native;
pub mod row;
pub mod tuple;
pub mod udt;
pub mod vector;

pub use row::{ColumnIterator, DeserializeRow, RawColumn, Row, RowIterator};

use super::column_type::ColumnType;
pub use super::error::{
    DeserializationError, DeserializationErrorKind, TypeCheckError, TypeCheckErrorKind,
};

/// A Rust type that can be built from a CQL value.
pub trait DeserializeValue<'frame>: Sized {
    /// Whether values of `typ` can be deserialized into `Self`.
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError>;

    /// Builds a value from `v` (`None` is null), a value of `typ`. Call
    /// [`type_check`](Self::type_check) first.
    fn deserialize(typ: &ColumnType, v: Option<&'frame [u8]>)
        -> Result<Self, DeserializationError>;
}

/// Fails with a mismatch naming `T` and `typ` unless `ok`.
pub(crate) fn check<T: ?Sized>(typ: &ColumnType, ok: bool) -> Result<(), TypeCheckError> {
    if ok {
        Ok(())
    } else {
        Err(TypeCheckError::of::<T>(typ, TypeCheckErrorKind::Mismatch))
    }
}

/// An error of `kind` about `T` and `typ`.
pub(crate) fn error<T: ?Sized>(
    typ: &ColumnType,
    kind: DeserializationErrorKind,
) -> DeserializationError {
    DeserializationError::of::<T>(typ, kind)
}

/// The bytes of a non-null value.
pub(crate) fn non_null<'f, T: ?Sized>(
    typ: &ColumnType,
    v: Option<&'f [u8]>,
) -> Result<&'f [u8], DeserializationError> {
    v.ok_or_else(|| error::<T>(typ, DeserializationErrorKind::UnexpectedNull))
}

/// The bytes of a non-null, non-empty value of exactly `N` bytes.
pub(crate) fn fixed<T: ?Sized, const N: usize>(
    typ: &ColumnType,
    v: Option<&[u8]>,
) -> Result<[u8; N], DeserializationError> {
    let b = non_null::<T>(typ, v)?;
    if b.is_empty() && N != 0 {
        return Err(error::<T>(typ, DeserializationErrorKind::UnexpectedEmpty));
    }
    b.try_into().map_err(|_| {
        error::<T>(
            typ,
            DeserializationErrorKind::WrongLength {
                expected: N,
                actual: b.len(),
            },
        )
    })
}
