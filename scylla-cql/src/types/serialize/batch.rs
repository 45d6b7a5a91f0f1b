//! [`BatchValues`]: the value lists of a batch, one row per statement, in
//! order. Implemented for slices, arrays and vectors of rows of one type,
//! for tuples of rows of different types (up to 16), and for references to
//! any of these, so that a batch's values need no casts:
//!
//! ```
//! use scylla_driver_cql::types::serialize::batch::BatchValues;
//!
//! // Three statements, rows of different types.
//! let values = ((1i32, "a"), (2i64,), ());
//! assert_eq!(values.len(), 3);
//! // Many statements, rows of one type.
//! let rows: Vec<(i32, String)> = (0..10).map(|i| (i, format!("v{i}"))).collect();
//! assert_eq!(rows.len(), 10);
//! assert!(rows.row(10).is_none());
//! ```

use super::SerializeRow;

/// The value lists of a batch: one row of values per statement, in order.
pub trait BatchValues {
    /// The number of rows (one per statement).
    fn len(&self) -> usize;

    /// Whether there are no rows.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The row of statement `i`, or `None` past the end.
    fn row(&self, i: usize) -> Option<&dyn SerializeRow>;
}

impl<T: SerializeRow> BatchValues for [T] {
    fn len(&self) -> usize {
        <[T]>::len(self)
    }

    fn row(&self, i: usize) -> Option<&dyn SerializeRow> {
        self.get(i).map(|r| r as &dyn SerializeRow)
    }
}

impl<T: SerializeRow, const N: usize> BatchValues for [T; N] {
    fn len(&self) -> usize {
        N
    }

    fn row(&self, i: usize) -> Option<&dyn SerializeRow> {
        self.as_slice().row(i)
    }
}

impl<T: SerializeRow> BatchValues for Vec<T> {
    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn row(&self, i: usize) -> Option<&dyn SerializeRow> {
        self.as_slice().row(i)
    }
}

impl<B: BatchValues + ?Sized> BatchValues for &B {
    fn len(&self) -> usize {
        (**self).len()
    }

    fn row(&self, i: usize) -> Option<&dyn SerializeRow> {
        (**self).row(i)
    }
}

/// No statements.
impl BatchValues for () {
    fn len(&self) -> usize {
        0
    }

    fn row(&self, _i: usize) -> Option<&dyn SerializeRow> {
        None
    }
}

/// Implements [`BatchValues`] for one tuple arity: element `i` is the row of
/// statement `i`.
macro_rules! impl_batch_tuple {
    ($n:expr; $($T:ident $idx:tt),+) => {
        impl<$($T: SerializeRow),+> BatchValues for ($($T,)+) {
            fn len(&self) -> usize {
                $n
            }

            fn row(&self, i: usize) -> Option<&dyn SerializeRow> {
                match i {
                    $($idx => Some(&self.$idx as &dyn SerializeRow),)+
                    _ => None,
                }
            }
        }
    };
}

impl_batch_tuple!(1; A 0);
impl_batch_tuple!(2; A 0, B 1);
impl_batch_tuple!(3; A 0, B 1, C 2);
impl_batch_tuple!(4; A 0, B 1, C 2, D 3);
impl_batch_tuple!(5; A 0, B 1, C 2, D 3, E 4);
impl_batch_tuple!(6; A 0, B 1, C 2, D 3, E 4, F 5);
impl_batch_tuple!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
impl_batch_tuple!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
impl_batch_tuple!(9; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
impl_batch_tuple!(10; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
impl_batch_tuple!(11; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
impl_batch_tuple!(12; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
impl_batch_tuple!(13; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12);
impl_batch_tuple!(14; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13);
impl_batch_tuple!(15; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14);
impl_batch_tuple!(16; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14, P 15);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::serialized_values::SerializedValues;
    use crate::types::{ColumnSpec, ColumnType, NativeType};

    fn spec(name: &str, typ: ColumnType) -> ColumnSpec {
        ColumnSpec {
            keyspace: "ks".into(),
            table: "t".into(),
            name: name.into(),
            typ,
        }
    }

    fn serialized(v: &dyn SerializeRow, specs: &[ColumnSpec]) -> SerializedValues {
        let mut out = SerializedValues::new();
        v.serialize_row(specs, &mut out).unwrap();
        out
    }

    #[test]
    fn tuples_hold_rows_of_different_types() {
        let values = ((1i32, "a"), (7i64,), ());
        assert_eq!(values.len(), 3);
        let int_text = [
            spec("k", ColumnType::Native(NativeType::Int)),
            spec("v", ColumnType::Native(NativeType::Text)),
        ];
        let bigint = [spec("k", ColumnType::Native(NativeType::BigInt))];
        assert_eq!(serialized(values.row(0).unwrap(), &int_text).len(), 2);
        assert_eq!(serialized(values.row(1).unwrap(), &bigint).len(), 1);
        assert_eq!(serialized(values.row(2).unwrap(), &[]).len(), 0);
        assert!(values.row(3).is_none());
    }

    #[test]
    fn slices_vectors_arrays_and_references() {
        let rows = vec![(1i32,), (2,), (3,)];
        assert_eq!(BatchValues::len(&rows), 3);
        assert_eq!(BatchValues::len(&rows[..2]), 2);
        assert_eq!(BatchValues::len(&[(1i32,), (2,)]), 2);
        let by_ref = &&rows;
        assert!(by_ref.row(2).is_some() && by_ref.row(3).is_none());
        // Rows as trait objects, the old way, still work.
        let dyns: [&(dyn SerializeRow + Sync); 2] = [&(1i32,), &()];
        assert_eq!(dyns.len(), 2);
        assert!(BatchValues::is_empty(&()));
    }
}
