//! `vector<T, N>` values: `N` elements, concatenated when `T` is
//! fixed-length, each behind an `[unsigned vint]` length otherwise (see
//! [`element_fixed_len`]). Deserialized into `Vec<T>` (see
//! [`collections`](super::collections)) or `[T; N]`.

use super::{
    check, error, non_null, DeserializationError, DeserializationErrorKind, DeserializeValue,
    TypeCheckError, TypeCheckErrorKind,
};
use crate::types::column_type::ColumnType;
pub use crate::types::serialize::vector::element_fixed_len;
use crate::types::vint;

/// The raw elements of a vector value, checked to be exactly `dimension`
/// elements with no bytes left over.
#[derive(Debug, Clone)]
pub struct VectorElems<'f> {
    rest: &'f [u8],
    remaining: usize,
    fixed: Option<usize>,
}

impl<'f> VectorElems<'f> {
    /// Splits `bytes`, a value of `vector<element, dimension>`.
    pub fn new(element: &ColumnType, dimension: u16, bytes: &'f [u8]) -> Self {
        VectorElems {
            rest: bytes,
            remaining: usize::from(dimension),
            fixed: element_fixed_len(element),
        }
    }

    /// Elements still to come.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    fn next_elem(&mut self) -> Result<&'f [u8], DeserializationErrorKind> {
        let (len, skip) = match self.fixed {
            Some(n) => (n, 0),
            None => {
                let (n, skip) = vint::read_unsigned_vint(self.rest, "vector element length")
                    .map_err(DeserializationErrorKind::Decode)?;
                (usize::try_from(n).unwrap_or(usize::MAX), skip)
            }
        };
        let body = &self.rest[skip..];
        if len > body.len() {
            return Err(DeserializationErrorKind::WrongLength {
                expected: len,
                actual: body.len(),
            });
        }
        let (elem, rest) = body.split_at(len);
        self.rest = rest;
        Ok(elem)
    }
}

impl<'f> Iterator for VectorElems<'f> {
    type Item = Result<&'f [u8], DeserializationErrorKind>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return match self.rest.len() {
                0 => None,
                n => {
                    // Report trailing bytes once, then stop.
                    self.rest = &[];
                    Some(Err(DeserializationErrorKind::TrailingBytes(n)))
                }
            };
        }
        self.remaining -= 1;
        let r = self.next_elem();
        if r.is_err() {
            self.remaining = 0;
            self.rest = &[];
        }
        Some(r)
    }
}

/// Deserializes the elements of a vector value of type `typ` into `C`,
/// element by element into `push`.
pub(crate) fn read_vector<'f, 'm, C: ?Sized, T: DeserializeValue<'f, 'm>>(
    typ: &ColumnType,
    element: &'m ColumnType,
    dimension: u16,
    v: Option<&'f [u8]>,
    mut push: impl FnMut(T),
) -> Result<(), DeserializationError> {
    let bytes = non_null::<C>(typ, v)?;
    for e in VectorElems::new(element, dimension, bytes) {
        let e = e.map_err(|k| error::<C>(typ, k))?;
        push(T::deserialize(element, Some(e))?);
    }
    Ok(())
}

impl<'frame, 'metadata, T: DeserializeValue<'frame, 'metadata>, const N: usize>
    DeserializeValue<'frame, 'metadata> for [T; N]
{
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        match typ {
            ColumnType::Vector {
                typ: element,
                dimensions: dimension,
            } if *dimension as usize == N => T::type_check(element),
            ColumnType::Vector {
                dimensions: dimension,
                ..
            } => Err(TypeCheckError::of::<Self>(
                typ,
                TypeCheckErrorKind::WrongDimension {
                    expected: N,
                    actual: *dimension as usize,
                },
            )),
            _ => check::<Self>(typ, false),
        }
    }

    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let ColumnType::Vector {
            typ: element,
            dimensions: dimension,
        } = typ
        else {
            return Err(TypeCheckError::of::<Self>(typ, TypeCheckErrorKind::Mismatch).into());
        };
        if *dimension as usize != N {
            return Err(TypeCheckError::of::<Self>(
                typ,
                TypeCheckErrorKind::WrongDimension {
                    expected: N,
                    actual: *dimension as usize,
                },
            )
            .into());
        }
        let mut out = Vec::with_capacity(N.min(v.map_or(0, <[u8]>::len)));
        read_vector::<Self, T>(typ, element, *dimension, v, |e| out.push(e))?;
        // read_vector yields exactly `dimension` == N elements or fails.
        out.try_into().map_err(|_| {
            error::<Self>(typ, DeserializationErrorKind::InvalidValue("vector length"))
        })
    }
}
