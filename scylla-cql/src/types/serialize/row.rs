//! Row-level serialization: all the bound values of a statement, written into
//! a reusable [`SerializedValues`] and checked against the statement's bind
//! markers (count, then each value's type; errors name the marker).

use super::writers::RowWriter;
use super::{SerializationError, SerializationErrorKind, SerializeValue};
use crate::types::column_type::ColumnSpec;
use crate::types::serialized_values::SerializedValues;

/// The bound values of one statement execution.
///
/// Implement either [`serialize_row`](Self::serialize_row) (this crate's
/// form, what the derive writes) or [`serialize`](Self::serialize) and
/// [`is_empty`](Self::is_empty) (the official `scylla` crate's form, through
/// a [`RowWriter`]); each has a default that goes through the other, so an
/// implementation must provide at least one of the two forms.
pub trait SerializeRow {
    /// Appends one value per bind marker described by `specs` to `out`.
    /// Fails if the number of values differs from `specs.len()` or a value
    /// does not fit its marker's type.
    ///
    /// The default goes through [`serialize`](Self::serialize); on error,
    /// what it wrote to `out` is removed.
    fn serialize_row(
        &self,
        specs: &[ColumnSpec],
        out: &mut SerializedValues,
    ) -> Result<(), SerializationError> {
        let mark = out.mark();
        let mut writer = RowWriter::new(out);
        let written = self
            .serialize(&RowSerializationContext::from_specs(specs), &mut writer)
            .and_then(|()| writer.finish());
        if written.is_err() {
            out.rewind(mark);
        }
        written
    }

    /// Writes one value per column of `ctx` through `writer` (the official
    /// crate's form). The default goes through
    /// [`serialize_row`](Self::serialize_row).
    fn serialize(
        &self,
        ctx: &RowSerializationContext<'_>,
        writer: &mut RowWriter<'_>,
    ) -> Result<(), SerializationError> {
        self.serialize_row(ctx.columns(), writer.values())
    }

    /// Whether the row has no values (a statement without bind markers
    /// takes it). The default asks [`serialize_row`](Self::serialize_row)
    /// for a row of no columns.
    fn is_empty(&self) -> bool {
        let mut none = SerializedValues::new();
        self.serialize_row(&[], &mut none).is_ok() && none.is_empty()
    }
}

/// What a row is serialized for: the statement's bind markers (the official
/// `scylla` crate's context of [`SerializeRow::serialize`]).
#[derive(Debug, Clone, Copy)]
pub struct RowSerializationContext<'a> {
    columns: &'a [ColumnSpec],
}

impl<'a> RowSerializationContext<'a> {
    /// The context of a statement with these bind markers.
    pub fn from_specs(columns: &'a [ColumnSpec]) -> Self {
        RowSerializationContext { columns }
    }

    /// A statement without bind markers.
    pub const fn empty() -> Self {
        RowSerializationContext { columns: &[] }
    }

    /// The bind markers, in order.
    pub fn columns(&self) -> &'a [ColumnSpec] {
        self.columns
    }
}

/// Appends `v` as the value of the bind marker `spec`, in place.
pub fn serialize_value_to<T: SerializeValue + ?Sized>(
    v: &T,
    spec: &ColumnSpec,
    out: &mut SerializedValues,
) -> Result<(), SerializationError> {
    out.push_serialized(|writer| v.serialize(&spec.typ, writer))
        .map_err(|e: SerializationError| e.with_types::<T>(&spec.typ).with_column(&spec.name))
}

fn wrong_count(expected: usize, actual: usize) -> SerializationError {
    SerializationError::new(SerializationErrorKind::WrongValueCount { expected, actual })
}

impl SerializeRow for () {
    fn serialize_row(
        &self,
        specs: &[ColumnSpec],
        _: &mut SerializedValues,
    ) -> Result<(), SerializationError> {
        match specs.len() {
            0 => Ok(()),
            n => Err(wrong_count(n, 0)),
        }
    }
}

/// No values, written `&[]`: the empty array literal infers this type, so
/// `session.query_unpaged(text, &[])` reads as "no values" (as `()` does).
impl SerializeRow for [u8; 0] {
    fn serialize_row(
        &self,
        specs: &[ColumnSpec],
        out: &mut SerializedValues,
    ) -> Result<(), SerializationError> {
        ().serialize_row(specs, out)
    }
}

impl<T: SerializeValue> SerializeRow for [T] {
    fn serialize_row(
        &self,
        specs: &[ColumnSpec],
        out: &mut SerializedValues,
    ) -> Result<(), SerializationError> {
        if specs.len() != self.len() {
            return Err(wrong_count(specs.len(), self.len()));
        }
        for (v, spec) in self.iter().zip(specs) {
            serialize_value_to(v, spec, out)?;
        }
        Ok(())
    }
}

impl<T: SerializeValue> SerializeRow for Vec<T> {
    fn serialize_row(
        &self,
        specs: &[ColumnSpec],
        out: &mut SerializedValues,
    ) -> Result<(), SerializationError> {
        self.as_slice().serialize_row(specs, out)
    }
}

impl<R: SerializeRow + ?Sized> SerializeRow for &R {
    fn serialize_row(
        &self,
        specs: &[ColumnSpec],
        out: &mut SerializedValues,
    ) -> Result<(), SerializationError> {
        (**self).serialize_row(specs, out)
    }
}

/// Implements [`SerializeRow`] for one tuple arity.
macro_rules! impl_row_tuple {
    ($n:expr; $($T:ident $s:ident $idx:tt),+) => {
        impl<$($T: SerializeValue),+> SerializeRow for ($($T,)+) {
            fn serialize_row(
                &self,
                specs: &[ColumnSpec],
                out: &mut SerializedValues,
            ) -> Result<(), SerializationError> {
                let [$($s),+] = specs else {
                    return Err(wrong_count(specs.len(), $n));
                };
                $(serialize_value_to(&self.$idx, $s, out)?;)+
                Ok(())
            }
        }
    };
}

impl_row_tuple!(1; A a 0);
impl_row_tuple!(2; A a 0, B b 1);
impl_row_tuple!(3; A a 0, B b 1, C c 2);
impl_row_tuple!(4; A a 0, B b 1, C c 2, D d 3);
impl_row_tuple!(5; A a 0, B b 1, C c 2, D d 3, E e 4);
impl_row_tuple!(6; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5);
impl_row_tuple!(7; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6);
impl_row_tuple!(8; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7);
impl_row_tuple!(9; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8);
impl_row_tuple!(10; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9);
impl_row_tuple!(11; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10);
impl_row_tuple!(12; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11);
impl_row_tuple!(13; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11, M m 12);
impl_row_tuple!(14; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11, M m 12, N n 13);
impl_row_tuple!(15; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11, M m 12, N n 13, O o 14);
impl_row_tuple!(16; A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11, M m 12, N n 13, O o 14, P p 15);

#[cfg(test)]
mod empty_array_tests {
    use super::*;
    use crate::types::column_type::{ColumnType, NativeType};

    fn marker(name: &str) -> ColumnSpec {
        ColumnSpec {
            keyspace: "ks".into(),
            table: "t".into(),
            name: name.into(),
            typ: ColumnType::Native(NativeType::Int),
        }
    }

    fn serialize(
        values: &impl SerializeRow,
        specs: &[ColumnSpec],
    ) -> Result<SerializedValues, SerializationError> {
        let mut out = SerializedValues::new();
        values.serialize_row(specs, &mut out).map(|()| out)
    }

    #[test]
    fn empty_array_literal_binds_no_values() {
        // `&[]` with no annotation: the literal's element type is inferred.
        let none = serialize(&&[], &[]).expect("no markers, no values");
        assert_eq!(none, serialize(&(), &[]).expect("unit binds nothing"));
        let err = serialize(&&[], &[marker("a")]).expect_err("one marker, no value");
        assert!(matches!(
            err.kind(),
            SerializationErrorKind::WrongValueCount {
                expected: 1,
                actual: 0
            }
        ));
    }
}
