//! Serialization of scalar values: numbers, booleans, text, blobs, uuids,
//! addresses, the calendar and big-number types, `Option<T>` (null) and the
//! [`Unset`] marker.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bytes::Bytes;
use uuid::Uuid;

use super::writers::{CellWriter, WrittenCellProof};
use super::{check, SerializationError, SerializationErrorKind, SerializeValue, Written};
use crate::types::column_type::{ColumnType, NativeType};
use crate::types::counter::Counter;
use crate::types::cql_time::{CqlDate, CqlTime, CqlTimestamp};
use crate::types::decimal::CqlDecimal;
use crate::types::duration::CqlDuration;
use crate::types::value::MaybeEmpty;
use crate::types::varint::CqlVarint;

/// Big-endian fixed-size encodings, accepted for the listed column types.
macro_rules! impl_be {
    ($($t:ty => $($ct:ident)|+;)*) => {$(
        impl SerializeValue for $t {
            fn serialize<'b>(&self, typ: &ColumnType, writer: CellWriter<'b>) -> Result<WrittenCellProof<'b>, SerializationError> { writer.write_with(|out| {
                check::<Self>(typ, matches!(typ, ColumnType::Native($(NativeType::$ct)|+)))?;
                out.extend_from_slice(&self.to_be_bytes());
                Ok(Written::Value)
            }) }
        }
    )*};
}

impl_be! {
    i8 => TinyInt;
    i16 => SmallInt;
    i32 => Int;
    i64 => BigInt | Counter;
    f32 => Float;
    f64 => Double;
}

impl SerializeValue for bool {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Boolean)))?;
            out.push(u8::from(*self));
            Ok(Written::Value)
        })
    }
}

/// Text as `text` or (validated) `ascii`.
pub(crate) fn put_text<T: ?Sized>(
    s: &str,
    typ: &ColumnType,
    out: &mut Vec<u8>,
) -> Result<Written, SerializationError> {
    match typ {
        ColumnType::Native(NativeType::Text) => {}
        ColumnType::Native(NativeType::Ascii) if s.is_ascii() => {}
        ColumnType::Native(NativeType::Ascii) => {
            return Err(SerializationError::of::<T>(
                typ,
                SerializationErrorKind::NotAscii,
            ))
        }
        _ => return Err(super::mismatch::<T>(typ)),
    }
    out.extend_from_slice(s.as_bytes());
    Ok(Written::Value)
}

impl SerializeValue for str {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| put_text::<Self>(self, typ, out))
    }
}

impl SerializeValue for String {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| put_text::<Self>(self, typ, out))
    }
}

/// Bytes as a `blob` (or as the raw value of a custom type).
pub(crate) fn put_blob<T: ?Sized>(
    b: &[u8],
    typ: &ColumnType,
    out: &mut Vec<u8>,
) -> Result<Written, SerializationError> {
    check::<T>(
        typ,
        matches!(
            typ,
            ColumnType::Native(NativeType::Blob) | ColumnType::Custom(_)
        ),
    )?;
    out.extend_from_slice(b);
    Ok(Written::Value)
}

impl SerializeValue for [u8] {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| put_blob::<Self>(self, typ, out))
    }
}

impl SerializeValue for Vec<u8> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| put_blob::<Self>(self, typ, out))
    }
}

impl SerializeValue for Bytes {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| put_blob::<Self>(self, typ, out))
    }
}

impl<T: SerializeValue> SerializeValue for Option<T> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        match self {
            Some(v) => v.serialize(typ, writer),
            None => Ok(writer.set_null()),
        }
    }
}

/// The "not set" marker: binding it leaves the column unchanged (only valid
/// as a top-level bound value, not inside a collection, tuple or UDT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Unset;

impl SerializeValue for Unset {
    fn serialize<'b>(
        &self,
        _: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        Ok(writer.set_unset())
    }
}

/// A value that may be left unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaybeUnset<T> {
    /// Leave the column unchanged.
    Unset,
    /// Bind this value.
    Set(T),
}

impl<T: SerializeValue> SerializeValue for MaybeUnset<T> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        match self {
            MaybeUnset::Set(v) => v.serialize(typ, writer),
            MaybeUnset::Unset => Ok(writer.set_unset()),
        }
    }
}

impl<T: SerializeValue> SerializeValue for MaybeEmpty<T> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        match self {
            MaybeEmpty::Value(v) => v.serialize(typ, writer),
            MaybeEmpty::Empty => Ok(writer.set_value(&[])?),
        }
    }
}

impl SerializeValue for Uuid {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            check::<Self>(
                typ,
                matches!(
                    typ,
                    ColumnType::Native(NativeType::Uuid) | ColumnType::Native(NativeType::Timeuuid)
                ),
            )?;
            out.extend_from_slice(self.as_bytes());
            Ok(Written::Value)
        })
    }
}

impl SerializeValue for crate::types::CqlTimeuuid {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Timeuuid)))?;
            out.extend_from_slice(self.as_bytes());
            Ok(Written::Value)
        })
    }
}

impl SerializeValue for IpAddr {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Inet)))?;
            match self {
                IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
            }
            Ok(Written::Value)
        })
    }
}

impl SerializeValue for Ipv4Addr {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Inet)))?;
            out.extend_from_slice(&self.octets());
            Ok(Written::Value)
        })
    }
}

impl SerializeValue for Ipv6Addr {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Inet)))?;
            out.extend_from_slice(&self.octets());
            Ok(Written::Value)
        })
    }
}

/// Newtypes over a big-endian number, written for one column type (the
/// mirror of the deserializers' `impl_newtype!`).
macro_rules! impl_newtype {
    ($($t:ident => $ct:ident;)*) => {$(
        impl SerializeValue for $t {
            fn serialize<'b>(&self, typ: &ColumnType, writer: CellWriter<'b>) -> Result<WrittenCellProof<'b>, SerializationError> { writer.write_with(|out| {
                check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::$ct)))?;
                out.extend_from_slice(&self.0.to_be_bytes());
                Ok(Written::Value)
            }) }
        }
    )*};
}

impl_newtype! {
    Counter => Counter;
    CqlDate => Date;
    CqlTimestamp => Timestamp;
}

impl SerializeValue for CqlTime {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Time)))?;
            if !self.is_valid() {
                return Err(SerializationError::of::<Self>(
                    typ,
                    SerializationErrorKind::InvalidValue("time outside 0..86400 s"),
                ));
            }
            out.extend_from_slice(&self.0.to_be_bytes());
            Ok(Written::Value)
        })
    }
}

impl SerializeValue for CqlDuration {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Duration)))?;
            if !self.is_valid() {
                return Err(SerializationError::of::<Self>(
                    typ,
                    SerializationErrorKind::InvalidValue("duration with mixed signs"),
                ));
            }
            self.encode(out);
            Ok(Written::Value)
        })
    }
}

impl SerializeValue for CqlDecimal {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Decimal)))?;
            self.encode(out);
            Ok(Written::Value)
        })
    }
}

impl SerializeValue for CqlVarint {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Varint)))?;
            out.extend_from_slice(self.as_signed_bytes_be_slice());
            Ok(Written::Value)
        })
    }
}
