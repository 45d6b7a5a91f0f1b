//! [`CqlValue`] as a bound value of any type: each variant is checked against
//! the column type and written by the matching typed serializer.
//!
//! Leniencies, for generic callers: `Text` and `Ascii` values both fit `text`
//! and `ascii` columns (ASCII checked); `Uuid` and `Timeuuid` both fit `uuid`
//! and `timeuuid`; `BigInt` fits `counter`; `List`, `Set` and `Vector` fit
//! any of `list`, `set` and `vector`; `Blob` fits a custom type (raw bytes);
//! [`CqlValue::Empty`] fits every type (a zero-length value).

use super::native::{put_blob, put_text};
use super::{
    mismatch, put_element, serialize_udt, SerializationError, SerializationErrorKind,
    SerializeValue, Written,
};
use crate::types::column_type::ColumnType;
use crate::types::value::CqlValue;

impl SerializeValue for CqlValue {
    fn serialize(
        &self,
        typ: &ColumnType,
        out: &mut Vec<u8>,
    ) -> Result<Written, SerializationError> {
        match self {
            CqlValue::Empty => Ok(Written::Value),
            CqlValue::Ascii(s) | CqlValue::Text(s) => put_text::<Self>(s, typ, out),
            CqlValue::Blob(b) => put_blob::<Self>(b, typ, out),
            CqlValue::Boolean(v) => v.serialize(typ, out),
            CqlValue::Counter(v) => v.serialize(typ, out),
            CqlValue::Decimal(v) => v.serialize(typ, out),
            CqlValue::Date(v) => v.serialize(typ, out),
            CqlValue::Double(v) => v.serialize(typ, out),
            CqlValue::Duration(v) => v.serialize(typ, out),
            CqlValue::Float(v) => v.serialize(typ, out),
            CqlValue::Int(v) => v.serialize(typ, out),
            CqlValue::BigInt(v) => v.serialize(typ, out),
            CqlValue::Timestamp(v) => v.serialize(typ, out),
            CqlValue::Inet(v) => v.serialize(typ, out),
            CqlValue::SmallInt(v) => v.serialize(typ, out),
            CqlValue::TinyInt(v) => v.serialize(typ, out),
            CqlValue::Time(v) => v.serialize(typ, out),
            CqlValue::Uuid(v) | CqlValue::Timeuuid(v) => v.serialize(typ, out),
            CqlValue::Varint(v) => v.serialize(typ, out),
            CqlValue::List(v) | CqlValue::Set(v) | CqlValue::Vector(v) => {
                super::collections::put_seq::<Self, CqlValue>(typ, v.iter(), out, true)
            }
            CqlValue::Map(entries) => super::collections::put_map::<Self, CqlValue, CqlValue>(
                typ,
                entries.iter().map(|(k, v)| (k, v)),
                out,
            ),
            CqlValue::Tuple(elems) => {
                let ColumnType::Tuple(types) = typ else {
                    return Err(mismatch::<Self>(typ));
                };
                if types.len() != elems.len() {
                    return Err(SerializationError::of::<Self>(
                        typ,
                        SerializationErrorKind::WrongArity {
                            expected: types.len(),
                            actual: elems.len(),
                        },
                    ));
                }
                for (e, t) in elems.iter().zip(types) {
                    put_element(e, t, out, true)?;
                }
                Ok(Written::Value)
            }
            CqlValue::Udt { fields, .. } => serialize_udt::<Self, &Option<CqlValue>>(
                typ,
                out,
                fields.iter().map(|(n, v)| (n.as_str(), v)),
            ),
        }
    }
}
