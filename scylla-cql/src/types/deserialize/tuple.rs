//! Rust tuples (up to 16 elements) from CQL `tuple<...>` values: `[bytes]`
//! elements, null allowed. Elements missing at the end of the value are read
//! as null (Cassandra allows a value shorter than its type).

use super::collections::end;
use super::{
    check, error, non_null, DeserializationError, DeserializationErrorKind, DeserializeValue,
    TypeCheckError, TypeCheckErrorKind,
};
use crate::frame::wire::WireReader;
use crate::types::column_type::ColumnType;

/// The next element of a tuple (or UDT) value; `None` (null) past the end.
pub(crate) fn next_elem<'f, C: ?Sized>(
    typ: &ColumnType,
    r: &mut WireReader<'f>,
) -> Result<Option<&'f [u8]>, DeserializationError> {
    if r.is_empty() {
        return Ok(None);
    }
    r.read_bytes("tuple element")
        .map_err(|e| error::<C>(typ, DeserializationErrorKind::Decode(e)))
}

fn arity<C: ?Sized>(typ: &ColumnType, expected: usize, actual: usize) -> TypeCheckError {
    TypeCheckError::of::<C>(typ, TypeCheckErrorKind::WrongArity { expected, actual })
}

/// Implements [`DeserializeValue`] for one tuple arity.
macro_rules! impl_tuple {
    ($n:expr; $($T:ident $t:ident $idx:tt),+) => {
        impl<'frame, 'metadata, $($T: DeserializeValue<'frame, 'metadata>),+> DeserializeValue<'frame, 'metadata> for ($($T,)+) {
            fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
                let ColumnType::Tuple(types) = typ else {
                    return check::<Self>(typ, false);
                };
                let [$($t),+] = types.as_slice() else {
                    return Err(arity::<Self>(typ, $n, types.len()));
                };
                $($T::type_check($t)?;)+
                Ok(())
            }

            fn deserialize(typ: &'metadata ColumnType, v: Option<&'frame [u8]>) -> Result<Self, DeserializationError> {
                let ColumnType::Tuple(types) = typ else {
                    return Err(TypeCheckError::of::<Self>(typ, TypeCheckErrorKind::Mismatch).into());
                };
                let [$($t),+] = types.as_slice() else {
                    return Err(arity::<Self>(typ, $n, types.len()).into());
                };
                let mut r = WireReader::new(non_null::<Self>(typ, v)?);
                let out = ($($T::deserialize($t, next_elem::<Self>(typ, &mut r)?)?,)+);
                end::<Self>(typ, &r)?;
                Ok(out)
            }
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
