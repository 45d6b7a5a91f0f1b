//! `vector<T, N>` (Cassandra 5, v5 spec section 6 "vector"): no count (the
//! dimension is part of the type); elements of fixed-length types are
//! concatenated, elements of variable-length types are each prefixed with an
//! `[unsigned vint]` length. Null elements are not allowed.

use super::writers::CellWriter;
use super::{SerializationError, SerializationErrorKind, SerializeValue, Written};
use crate::types::column_type::ColumnType;
use crate::types::vint;

/// The encoded length of every value of `typ`, if the type is fixed-length
/// in Cassandra's sense (`AbstractType.valueLengthIfFixed`): `boolean`,
/// `int`, `bigint`, `float`, `double`, `timestamp`, `uuid`, `timeuuid`.
/// Other types (including `smallint`, `tinyint`, `date` and `time`, whose
/// values may be empty in Cassandra) are variable-length in vectors.
pub fn element_fixed_len(typ: &ColumnType) -> Option<usize> {
    typ.type_size_for_vector()
}

/// Writes the elements of a `C` (a Rust sequence type) as a vector of
/// `element` with `dimension` elements (`typ` is the vector type, for errors).
pub(crate) fn put_vector<'a, C: ?Sized, T: SerializeValue + 'a>(
    typ: &ColumnType,
    element: &ColumnType,
    dimension: u16,
    items: impl ExactSizeIterator<Item = &'a T>,
    out: &mut Vec<u8>,
) -> Result<Written, SerializationError> {
    if items.len() != dimension as usize {
        return Err(SerializationError::of::<C>(
            typ,
            SerializationErrorKind::WrongDimension {
                expected: dimension as usize,
                actual: items.len(),
            },
        ));
    }
    let fixed = element_fixed_len(element);
    let mut vint_buf = Vec::with_capacity(9);
    for item in items {
        let at = out.len();
        match item.serialize(element, CellWriter::new(out))?.written() {
            Written::Value => {}
            Written::Null => {
                return Err(SerializationError::of::<T>(
                    element,
                    SerializationErrorKind::NullNotAllowed,
                ))
            }
            Written::Unset => {
                return Err(SerializationError::of::<T>(
                    element,
                    SerializationErrorKind::UnsetNotAllowed,
                ))
            }
        }
        // The element was written with an `[int]` length, which a vector
        // element does not have: it is dropped, or replaced by a vint.
        let len = out.len() - at - 4;
        match fixed {
            Some(n) if n == len => {
                out.drain(at..at + 4);
            }
            Some(_) => {
                // An "empty" value of a fixed-length type cannot be told
                // apart from its neighbours without a length.
                return Err(SerializationError::of::<T>(
                    element,
                    SerializationErrorKind::InvalidValue(
                        "a vector element of a fixed-length type has the wrong size",
                    ),
                ));
            }
            None => {
                // The length prefix is variable-length, so it is inserted in
                // front of the element once the element's size is known.
                vint_buf.clear();
                vint::put_unsigned_vint(&mut vint_buf, len as u64);
                out.splice(at..at + 4, vint_buf.iter().copied());
            }
        }
    }
    Ok(Written::Value)
}
