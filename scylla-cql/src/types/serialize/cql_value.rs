//! [`CqlValue`] as a bound value of any type: each variant is checked against
//! the column type and written by the matching typed serializer.
//!
//! Leniencies, for generic callers: `Text` and `Ascii` values both fit `text`
//! and `ascii` columns (ASCII checked); `Uuid` and `Timeuuid` both fit `uuid`
//! and `timeuuid`; `BigInt` fits `counter`; `List`, `Set` and `Vector` fit
//! any of `list`, `set` and `vector`; `Blob` fits a custom type (raw bytes);
//! [`CqlValue::Empty`] fits every type (a zero-length value).

use super::native::{put_blob, put_text};
use super::writers::{CellWriter, WrittenCellProof};
use super::{
    mismatch, put_element, serialize_udt, SerializationError, SerializationErrorKind,
    SerializeValue, Written,
};
use crate::types::column_type::ColumnType;
use crate::types::value::CqlValue;

impl SerializeValue for CqlValue {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        match self {
            CqlValue::Boolean(v) => return v.serialize(typ, writer),
            CqlValue::Counter(v) => return v.serialize(typ, writer),
            CqlValue::Decimal(v) => return v.serialize(typ, writer),
            CqlValue::Date(v) => return v.serialize(typ, writer),
            CqlValue::Double(v) => return v.serialize(typ, writer),
            CqlValue::Duration(v) => return v.serialize(typ, writer),
            CqlValue::Float(v) => return v.serialize(typ, writer),
            CqlValue::Int(v) => return v.serialize(typ, writer),
            CqlValue::BigInt(v) => return v.serialize(typ, writer),
            CqlValue::Timestamp(v) => return v.serialize(typ, writer),
            CqlValue::Inet(v) => return v.serialize(typ, writer),
            CqlValue::SmallInt(v) => return v.serialize(typ, writer),
            CqlValue::TinyInt(v) => return v.serialize(typ, writer),
            CqlValue::Time(v) => return v.serialize(typ, writer),
            CqlValue::Uuid(v) => return v.serialize(typ, writer),
            CqlValue::Timeuuid(v) => return v.as_uuid().serialize(typ, writer),
            CqlValue::Varint(v) => return v.serialize(typ, writer),
            CqlValue::UserDefinedType { fields, .. } => {
                return serialize_udt::<Self, &Option<CqlValue>>(
                    typ,
                    writer,
                    fields.iter().map(|(n, v)| (n.as_str(), v)),
                )
            }
            _ => {}
        }
        writer.write_with(|out| match self {
            CqlValue::Empty => Ok(Written::Value),
            CqlValue::Ascii(s) | CqlValue::Text(s) => put_text::<Self>(s, typ, out),
            CqlValue::Blob(b) => put_blob::<Self>(b, typ, out),
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
                    put_element(e, t, CellWriter::new(out), true)?;
                }
                Ok(Written::Value)
            }
            // Written above.
            _ => Ok(Written::Value),
        })
    }
}
