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
///
/// `'frame` is the lifetime of the response's bytes (a value may borrow
/// them: `&'frame str`), `'metadata` that of the column types (the official
/// `scylla` crate's shape, so hand-written implementations carry over). An
/// implementation is usually generic over both:
///
/// ```
/// use scylla_driver_cql::types::{
///     ColumnType, DeserializationError, DeserializeValue, NativeType, TypeCheckError,
/// };
///
/// /// A CQL `text` that must not be empty.
/// struct Name<'a>(&'a str);
///
/// impl<'frame, 'metadata, 'a> DeserializeValue<'frame, 'metadata> for Name<'a>
/// where
///     'frame: 'a,
/// {
///     fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
///         <&str as DeserializeValue<'frame, 'metadata>>::type_check(typ)
///     }
///
///     fn deserialize(
///         typ: &'metadata ColumnType,
///         v: Option<&'frame [u8]>,
///     ) -> Result<Self, DeserializationError> {
///         let s = <&str as DeserializeValue<'frame, 'metadata>>::deserialize(typ, v)?;
///         Ok(Name(s))
///     }
/// }
///
/// let text = ColumnType::Native(NativeType::Text);
/// let name = <Name as DeserializeValue>::deserialize(&text, Some(b"ada")).unwrap();
/// assert_eq!(name.0, "ada");
/// ```
pub trait DeserializeValue<'frame, 'metadata>: Sized {
    /// Whether values of `typ` can be deserialized into `Self`.
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError>;

    /// Builds a value from `v` (`None` is null), a value of `typ`. Call
    /// [`type_check`](Self::type_check) first.
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<FrameSlice<'frame>>,
    ) -> Result<Self, DeserializationError>;
}

/// The bytes of one value in a response: a plain slice of the frame here
/// (the official `scylla` crate wraps it in a struct of this name; its
/// methods are not offered, the slice is used directly).
pub type FrameSlice<'frame> = &'frame [u8];

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
