//! Rust tuples (up to 16 elements) as CQL `tuple<...>` values: each element
//! is a `[bytes]` (null allowed, written as length -1). The arity must match
//! the type's.

use super::writers::{CellWriter, WrittenCellProof};
use super::{
    mismatch, put_element, SerializationError, SerializationErrorKind, SerializeValue, Written,
};
use crate::types::column_type::ColumnType;

/// Implements [`SerializeValue`] for one tuple arity.
macro_rules! impl_tuple {
    ($n:expr; $($T:ident $t:ident $idx:tt),+) => {
        impl<$($T: SerializeValue),+> SerializeValue for ($($T,)+) {
            fn serialize<'b>(&self, typ: &ColumnType, writer: CellWriter<'b>) -> Result<WrittenCellProof<'b>, SerializationError> { writer.write_with(|out| {
                let ColumnType::Tuple(types) = typ else {
                    return Err(mismatch::<Self>(typ));
                };
                let [$($t),+] = types.as_slice() else {
                    return Err(SerializationError::of::<Self>(
                        typ,
                        SerializationErrorKind::WrongArity { expected: types.len(), actual: $n },
                    ));
                };
                $(put_element(&self.$idx, $t, CellWriter::new(out), true)?;)+
                Ok(Written::Value)
            }) }
        }
    };
}

impl_tuple!(1; A a 0);
impl_tuple!(2; A a 0, B b 1);
impl_tuple!(3; A a 0, B b 1, C c 2);
impl_tuple!(4; A a 0, B b 1, C c 2, D d 3);
impl_tuple!(5; A a 0, B b 1, C c 2, D d 3, E e 4);
impl_tuple!(6; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5);
impl_tuple!(7; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6);
impl_tuple!(8; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7);
impl_tuple!(9; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8);
impl_tuple!(10; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9);
impl_tuple!(11; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10);
impl_tuple!(12; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11);
impl_tuple!(13; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11, M m 12);
impl_tuple!(14; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11, M m 12, N n 13);
impl_tuple!(15; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11, M m 12, N n 13, O o 14);
impl_tuple!(16; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11, M m 12, N n 13, O o 14, P p 15);
