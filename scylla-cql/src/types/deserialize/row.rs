//! Rows: [`DeserializeRow`] builds a Rust value from the cells of one row,
//! [`RowIterator`] walks the rows of a RESULT Rows payload (each row is one
//! `[bytes]` cell per column).
//!
//! # Implementing for a struct
//!
//! Implement [`DeserializeRow`] by hand (check the specs in `type_check`,
//! pull cells from the [`ColumnIterator`] in `deserialize`), or let
//! [`impl_deserialize_row!`](crate::impl_deserialize_row) generate an
//! implementation that matches the struct's named fields to columns by name:
//!
//! ```
//! use scylla_driver_cql::types::{ColumnSpec, ColumnType, NativeType, RowIterator};
//!
//! struct User { id: i32, name: Option<String> }
//! scylla_driver_cql::impl_deserialize_row!(User { id: i32, name: Option<String> });
//!
//! let spec = |name: &str, typ| ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ };
//! let specs = [
//!     spec("name", ColumnType::Native(NativeType::Text)),
//!     spec("id", ColumnType::Native(NativeType::Int)),
//! ];
//! // One row: name = "ann", id = 7.
//! let rows = [&[0, 0, 0, 3][..], b"ann", &[0, 0, 0, 4], &[0, 0, 0, 7]].concat();
//! let users: Vec<User> = RowIterator::<User>::new(&specs, &rows, 1)?.collect::<Result<_, _>>()?;
//! assert_eq!((users[0].id, users[0].name.as_deref()), (7, Some("ann")));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::marker::PhantomData;

use super::{
    DeserializationError, DeserializationErrorKind, DeserializeValue, TypeCheckError,
    TypeCheckErrorKind,
};
use crate::frame::wire::WireReader;
use crate::types::column_type::ColumnSpec;
use crate::types::value::CqlValue;

/// One cell of a row, with its column.
#[derive(Debug, Clone, Copy)]
pub struct RawColumn<'frame> {
    /// The column.
    pub spec: &'frame ColumnSpec,
    /// The cell's bytes; `None` is null.
    pub value: Option<&'frame [u8]>,
}

impl<'frame> RawColumn<'frame> {
    /// Deserializes the cell as a `T`, naming the column in errors.
    pub fn get<T: DeserializeValue<'frame, 'frame>>(&self) -> Result<T, DeserializationError> {
        T::deserialize(&self.spec.typ, self.value).map_err(|e| e.with_column(&self.spec.name))
    }
}

/// The cells of one row, in column order.
#[derive(Debug, Clone)]
pub struct ColumnIterator<'frame> {
    specs: std::slice::Iter<'frame, ColumnSpec>,
    reader: WireReader<'frame>,
}

impl<'frame> ColumnIterator<'frame> {
    /// The cells of the row at the start of `bytes` (one `[bytes]` per spec).
    pub fn new(specs: &'frame [ColumnSpec], bytes: &'frame [u8]) -> Self {
        ColumnIterator {
            specs: specs.iter(),
            reader: WireReader::new(bytes),
        }
    }

    /// Columns not yet read.
    pub fn remaining(&self) -> usize {
        self.specs.len()
    }

    /// The next cell, or [`DeserializationErrorKind::MissingColumns`].
    pub fn next_column(&mut self) -> Result<RawColumn<'frame>, DeserializationError> {
        self.next().unwrap_or_else(|| {
            Err(DeserializationError::new(
                DeserializationErrorKind::MissingColumns,
            ))
        })
    }
}

impl<'frame> Iterator for ColumnIterator<'frame> {
    type Item = Result<RawColumn<'frame>, DeserializationError>;

    fn next(&mut self) -> Option<Self::Item> {
        let spec = self.specs.next()?;
        match self.reader.read_bytes("cell") {
            Ok(value) => Some(Ok(RawColumn { spec, value })),
            Err(e) => {
                // The rest of the row cannot be located: stop here.
                self.specs = [].iter();
                Some(Err(DeserializationError::from(e).with_column(&spec.name)))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.specs.len()))
    }
}

/// A Rust value built from one row.
///
/// The lifetimes are the official `scylla` crate's: `'frame`, the response
/// frame the row's cells borrow from, and `'metadata`, the result metadata
/// its column specs live in. Here a row's specs live as long as its frame,
/// so the driver asks for `DeserializeRow<'frame, 'frame>`; implement it for
/// every `'metadata` (as the derive does) so that bounds written for the
/// official crate (`for<'frame, 'metadata> DeserializeRow<'frame, 'metadata>`)
/// hold.
pub trait DeserializeRow<'frame, 'metadata>: Sized {
    /// Whether rows with these columns can be deserialized into `Self`.
    fn type_check(specs: &[ColumnSpec]) -> Result<(), TypeCheckError>;

    /// Builds a value from the row's cells. Need not consume every cell
    /// ([`RowIterator`] skips the rest). Call
    /// [`type_check`](Self::type_check) first.
    fn deserialize(row: &mut ColumnIterator<'frame>) -> Result<Self, DeserializationError>;
}

/// A row of any columns, as owned values.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// One value per column; `None` is null.
    pub columns: Vec<Option<CqlValue>>,
}

impl<'frame, 'metadata> DeserializeRow<'frame, 'metadata> for Row {
    fn type_check(_: &[ColumnSpec]) -> Result<(), TypeCheckError> {
        Ok(())
    }

    fn deserialize(row: &mut ColumnIterator<'frame>) -> Result<Self, DeserializationError> {
        let mut columns = Vec::with_capacity(row.remaining());
        for col in row {
            columns.push(col?.get::<Option<CqlValue>>()?);
        }
        Ok(Row { columns })
    }
}

/// Fails unless there are exactly `n` columns.
pub fn check_column_count<T: ?Sized>(specs: &[ColumnSpec], n: usize) -> Result<(), TypeCheckError> {
    if specs.len() == n {
        return Ok(());
    }
    let mut e = TypeCheckError::new(TypeCheckErrorKind::WrongArity {
        expected: n,
        actual: specs.len(),
    });
    e = e.with_rust_type::<T>();
    Err(e)
}

/// Implements [`DeserializeRow`] for one tuple arity.
macro_rules! impl_row_tuple {
    ($n:expr; $($T:ident $idx:tt),+) => {
        impl<'frame, 'metadata, $($T: DeserializeValue<'frame, 'frame>),+> DeserializeRow<'frame, 'metadata> for ($($T,)+) {
            fn type_check(specs: &[ColumnSpec]) -> Result<(), TypeCheckError> {
                check_column_count::<Self>(specs, $n)?;
                $($T::type_check(&specs[$idx].typ).map_err(|e| e.with_column(&specs[$idx].name))?;)+
                Ok(())
            }

            fn deserialize(row: &mut ColumnIterator<'frame>) -> Result<Self, DeserializationError> {
                Ok(($(row.next_column()?.get::<$T>()?,)+))
            }
        }
    };
}

impl_row_tuple!(1; A 0);
impl_row_tuple!(2; A 0, B 1);
impl_row_tuple!(3; A 0, B 1, C 2);
impl_row_tuple!(4; A 0, B 1, C 2, D 3);
impl_row_tuple!(5; A 0, B 1, C 2, D 3, E 4);
impl_row_tuple!(6; A 0, B 1, C 2, D 3, E 4, F 5);
impl_row_tuple!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
impl_row_tuple!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
impl_row_tuple!(9; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
impl_row_tuple!(10; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
impl_row_tuple!(11; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
impl_row_tuple!(12; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
impl_row_tuple!(13; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12);
impl_row_tuple!(14; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13);
impl_row_tuple!(15; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14);
impl_row_tuple!(16; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14, P 15);

/// Typed iteration over the rows of a RESULT Rows payload.
///
/// Built from the column specs, the raw rows (the `rows_count` rows, each
/// one `[bytes]` cell per column) and the row count; [`new`](Self::new)
/// type-checks `R` once. Each item is one row; after an error the iterator
/// ends (the position of the next row is unknown). With zero columns a row
/// has no bytes, so `rows_count` alone bounds the iteration: the RESULT
/// decoder should sanity-check it.
pub struct RowIterator<'frame, R> {
    specs: &'frame [ColumnSpec],
    reader: WireReader<'frame>,
    remaining: usize,
    _row: PhantomData<fn() -> R>,
}

impl<R> fmt::Debug for RowIterator<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowIterator")
            .field("columns", &self.specs.len())
            .field("remaining", &self.remaining)
            .field("row_type", &std::any::type_name::<R>())
            .finish()
    }
}

impl<'frame, R: DeserializeRow<'frame, 'frame>> RowIterator<'frame, R> {
    /// Rows of `raw_rows`, after checking that `R` fits `specs`.
    pub fn new(
        specs: &'frame [ColumnSpec],
        raw_rows: &'frame [u8],
        rows_count: usize,
    ) -> Result<Self, TypeCheckError> {
        R::type_check(specs)?;
        Ok(RowIterator {
            specs,
            reader: WireReader::new(raw_rows),
            remaining: rows_count,
            _row: PhantomData,
        })
    }

    /// Rows not yet read.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    fn next_row(&mut self) -> Result<R, DeserializationError> {
        let mut cols = ColumnIterator {
            specs: self.specs.iter(),
            reader: self.reader.clone(),
        };
        let row = R::deserialize(&mut cols)?;
        // Skip the cells `R` did not read, to find the next row.
        for c in &mut cols {
            c?;
        }
        self.reader = cols.reader;
        Ok(row)
    }
}

impl<'frame, R: DeserializeRow<'frame, 'frame>> Iterator for RowIterator<'frame, R> {
    type Item = Result<R, DeserializationError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let r = self.next_row();
        if r.is_err() {
            self.remaining = 0;
        }
        Some(r)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining))
    }
}

/// Implements [`DeserializeRow`] for a struct with named fields, matching
/// fields to columns by name (in any order). Every column must have a field
/// and every field a column. The struct must own its data (no lifetimes).
///
/// `impl_deserialize_row!(MyRow { id: i32, name: Option<String> });`
#[macro_export]
macro_rules! impl_deserialize_row {
    ($name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        impl<'frame, 'metadata> $crate::types::deserialize::DeserializeRow<'frame, 'metadata> for $name {
            fn type_check(
                specs: &[$crate::types::ColumnSpec],
            ) -> ::std::result::Result<(), $crate::types::TypeCheckError> {
                use $crate::types::{DeserializeValue, TypeCheckError, TypeCheckErrorKind};
                $(
                    match specs.iter().find(|s| s.name == stringify!($field)) {
                        Some(s) => <$ty as DeserializeValue<'frame, 'frame>>::type_check(&s.typ)
                            .map_err(|e| e.with_column(&s.name))?,
                        None => {
                            return Err(TypeCheckError::new(TypeCheckErrorKind::MissingColumn(
                                stringify!($field).to_owned(),
                            ))
                            .with_rust_type::<Self>())
                        }
                    }
                )*
                for s in specs {
                    if ![$(stringify!($field)),*].contains(&s.name.as_str()) {
                        return Err(TypeCheckError::new(TypeCheckErrorKind::UnexpectedColumn(
                            s.name.clone(),
                        ))
                        .with_rust_type::<Self>());
                    }
                }
                Ok(())
            }

            fn deserialize(
                row: &mut $crate::types::deserialize::ColumnIterator<'frame>,
            ) -> ::std::result::Result<Self, $crate::types::DeserializationError> {
                use $crate::types::{DeserializationError, DeserializationErrorKind};
                $(let mut $field: ::std::option::Option<$ty> = None;)*
                for col in row {
                    let col = col?;
                    match col.spec.name.as_str() {
                        $(stringify!($field) => $field = Some(col.get::<$ty>()?),)*
                        other => {
                            return Err(DeserializationError::new(DeserializationErrorKind::Custom(
                                format!("unexpected column `{other}`"),
                            )))
                        }
                    }
                }
                Ok($name {
                    $($field: $field.ok_or_else(|| {
                        DeserializationError::new(DeserializationErrorKind::MissingColumns)
                            .with_column(stringify!($field))
                    })?,)*
                })
            }
        }
    };
}
