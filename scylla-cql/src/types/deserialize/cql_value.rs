//! [`CqlValue`] from a value of any type: the type tree drives the decoding,
//! so it accepts every well-formed value (see the `value` module for how
//! empty values map).

use super::collections::read_map;
use super::tuple::next_elem;
use super::udt::UdtIterator;
use super::{non_null, DeserializationError, DeserializeValue, TypeCheckError};
use crate::frame::wire::WireReader;
use crate::types::column_type::{CollectionType, ColumnType, NativeType};
use crate::types::value::CqlValue;

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for CqlValue {
    fn type_check(_: &ColumnType) -> Result<(), TypeCheckError> {
        Ok(())
    }

    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let b = non_null::<Self>(typ, v)?;
        let v = Some(b);
        Ok(match typ {
            ColumnType::Native(NativeType::Ascii) => CqlValue::Ascii(String::deserialize(typ, v)?),
            ColumnType::Native(NativeType::Text) => CqlValue::Text(String::deserialize(typ, v)?),
            ColumnType::Native(NativeType::Blob) | ColumnType::Custom(_) => {
                CqlValue::Blob(b.to_vec())
            }
            _ if b.is_empty() => CqlValue::Empty,
            ColumnType::Native(NativeType::BigInt) => {
                CqlValue::BigInt(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Boolean) => {
                CqlValue::Boolean(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Counter) => {
                CqlValue::Counter(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Decimal) => {
                CqlValue::Decimal(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Double) => {
                CqlValue::Double(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Float) => {
                CqlValue::Float(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Int) => {
                CqlValue::Int(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Timestamp) => {
                CqlValue::Timestamp(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Uuid) => {
                CqlValue::Uuid(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Varint) => {
                CqlValue::Varint(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Timeuuid) => {
                CqlValue::Timeuuid(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Inet) => {
                CqlValue::Inet(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Date) => {
                CqlValue::Date(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Time) => {
                CqlValue::Time(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::SmallInt) => {
                CqlValue::SmallInt(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::TinyInt) => {
                CqlValue::TinyInt(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Native(NativeType::Duration) => {
                CqlValue::Duration(DeserializeValue::deserialize(typ, v)?)
            }
            ColumnType::Collection {
                typ: CollectionType::List(_),
                ..
            } => CqlValue::List(DeserializeValue::deserialize(typ, v)?),
            ColumnType::Collection {
                typ: CollectionType::Set(_),
                ..
            } => CqlValue::Set(DeserializeValue::deserialize(typ, v)?),
            ColumnType::Vector { .. } => CqlValue::Vector(DeserializeValue::deserialize(typ, v)?),
            ColumnType::Collection {
                typ: CollectionType::Map(..),
                ..
            } => {
                let mut entries = Vec::new();
                read_map::<Self, CqlValue, CqlValue>(typ, v, |k, v| entries.push((k, v)))?;
                CqlValue::Map(entries)
            }
            ColumnType::Tuple(types) => {
                let mut r = WireReader::new(b);
                let mut elems = Vec::with_capacity(types.len().min(b.len()));
                for t in types {
                    elems.push(Option::<CqlValue>::deserialize(
                        t,
                        next_elem::<Self>(typ, &mut r)?,
                    )?);
                }
                super::collections::end::<Self>(typ, &r)?;
                CqlValue::Tuple(elems)
            }
            ColumnType::UserDefinedType { definition, .. } => {
                let mut fields = Vec::new();
                for f in UdtIterator::new::<Self>(typ, v)? {
                    let (fname, ftype, fv) = f?;
                    let value = Option::<CqlValue>::deserialize(ftype, fv)?;
                    fields.push((fname.to_owned(), value));
                }
                CqlValue::UserDefinedType {
                    keyspace: definition.keyspace.clone(),
                    name: definition.name.clone(),
                    fields,
                }
            }
        })
    }
}
