//! Deserialization of scalar values: numbers, booleans, text and blobs
//! (borrowed or owned), uuids, addresses, the calendar and big-number types,
//! `Option<T>` (null) and [`MaybeEmpty<T>`] (empty values).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bytes::Bytes;
use uuid::Uuid;

use super::{
    check, error, fixed, non_null, DeserializationError, DeserializationErrorKind,
    DeserializeValue, TypeCheckError,
};
use crate::types::column_type::{ColumnType, NativeType};
use crate::types::counter::Counter;
use crate::types::cql_time::{CqlDate, CqlTime, CqlTimestamp};
use crate::types::decimal::CqlDecimal;
use crate::types::duration::CqlDuration;
use crate::types::value::MaybeEmpty;
use crate::types::varint::CqlVarint;

/// Big-endian fixed-size numbers, accepted from the listed column types.
macro_rules! impl_be {
    ($($t:ty => $($ct:ident)|+;)*) => {$(
        impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for $t {
            fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
                check::<Self>(typ, matches!(typ, ColumnType::Native($(NativeType::$ct)|+)))
            }
            fn deserialize(typ: &'metadata ColumnType, v: Option<&'frame [u8]>) -> Result<Self, DeserializationError> {
                Ok(<$t>::from_be_bytes(fixed::<Self, { std::mem::size_of::<$t>() }>(typ, v)?))
            }
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

/// Newtypes over a big-endian number, accepted from one column type.
macro_rules! impl_newtype {
    ($($t:ident($inner:ty) => $ct:ident;)*) => {$(
        impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for $t {
            fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
                check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::$ct)))
            }
            fn deserialize(typ: &'metadata ColumnType, v: Option<&'frame [u8]>) -> Result<Self, DeserializationError> {
                Ok($t(<$inner>::from_be_bytes(fixed::<Self, { std::mem::size_of::<$inner>() }>(typ, v)?)))
            }
        }
    )*};
}

impl_newtype! {
    Counter(i64) => Counter;
    CqlDate(u32) => Date;
    CqlTimestamp(i64) => Timestamp;
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for CqlTime {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Time)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let t = CqlTime(i64::from_be_bytes(fixed::<Self, 8>(typ, v)?));
        if !t.is_valid() {
            return Err(error::<Self>(
                typ,
                DeserializationErrorKind::InvalidValue("time outside 0..86400 s"),
            ));
        }
        Ok(t)
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for bool {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Boolean)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        Ok(fixed::<Self, 1>(typ, v)?[0] != 0)
    }
}

fn text_type_check<T: ?Sized>(typ: &ColumnType) -> Result<(), TypeCheckError> {
    check::<T>(
        typ,
        matches!(
            typ,
            ColumnType::Native(NativeType::Text) | ColumnType::Native(NativeType::Ascii)
        ),
    )
}

/// The text of a `text` or `ascii` value (ASCII checked for `ascii`).
pub(crate) fn text<'f, T: ?Sized>(
    typ: &ColumnType,
    v: Option<&'f [u8]>,
) -> Result<&'f str, DeserializationError> {
    let b = non_null::<T>(typ, v)?;
    if matches!(typ, ColumnType::Native(NativeType::Ascii)) && !b.is_ascii() {
        return Err(error::<T>(typ, DeserializationErrorKind::NotAscii));
    }
    std::str::from_utf8(b).map_err(|_| error::<T>(typ, DeserializationErrorKind::InvalidUtf8))
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for &'frame str {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        text_type_check::<Self>(typ)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        text::<Self>(typ, v)
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for String {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        text_type_check::<Self>(typ)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        text::<Self>(typ, v).map(str::to_owned)
    }
}

fn blob_type_check<T: ?Sized>(typ: &ColumnType) -> Result<(), TypeCheckError> {
    check::<T>(
        typ,
        matches!(
            typ,
            ColumnType::Native(NativeType::Blob) | ColumnType::Custom(_)
        ),
    )
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for &'frame [u8] {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        blob_type_check::<Self>(typ)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        non_null::<Self>(typ, v)
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for Vec<u8> {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        blob_type_check::<Self>(typ)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        non_null::<Self>(typ, v).map(<[u8]>::to_vec)
    }
}

/// A copy (the frame is a borrowed slice here; borrow `&[u8]` to avoid it).
impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for Bytes {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        blob_type_check::<Self>(typ)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        non_null::<Self>(typ, v).map(Bytes::copy_from_slice)
    }
}

impl<'frame, 'metadata, T: DeserializeValue<'frame, 'metadata>> DeserializeValue<'frame, 'metadata>
    for Option<T>
{
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        T::type_check(typ)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        v.map(|b| T::deserialize(typ, Some(b))).transpose()
    }
}

impl<'frame, 'metadata, T: DeserializeValue<'frame, 'metadata>> DeserializeValue<'frame, 'metadata>
    for MaybeEmpty<T>
{
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        T::type_check(typ)
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        match v {
            Some([]) => Ok(MaybeEmpty::Empty),
            v => T::deserialize(typ, v).map(MaybeEmpty::Value),
        }
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for Uuid {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(
            typ,
            matches!(
                typ,
                ColumnType::Native(NativeType::Uuid) | ColumnType::Native(NativeType::Timeuuid)
            ),
        )
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        Ok(Uuid::from_bytes(fixed::<Self, 16>(typ, v)?))
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for crate::types::CqlTimeuuid {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Timeuuid)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        Ok(Self::from_bytes(fixed::<Self, 16>(typ, v)?))
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for IpAddr {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Inet)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let b = non_null::<Self>(typ, v)?;
        if let Ok(a) = <[u8; 4]>::try_from(b) {
            Ok(IpAddr::V4(Ipv4Addr::from(a)))
        } else if let Ok(a) = <[u8; 16]>::try_from(b) {
            Ok(IpAddr::V6(Ipv6Addr::from(a)))
        } else if b.is_empty() {
            Err(error::<Self>(
                typ,
                DeserializationErrorKind::UnexpectedEmpty,
            ))
        } else {
            Err(error::<Self>(
                typ,
                DeserializationErrorKind::InvalidValue("inet of neither 4 nor 16 bytes"),
            ))
        }
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for Ipv4Addr {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Inet)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        Ok(Ipv4Addr::from(fixed::<Self, 4>(typ, v)?))
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for Ipv6Addr {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Inet)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        Ok(Ipv6Addr::from(fixed::<Self, 16>(typ, v)?))
    }
}

/// The bytes of a non-null, non-empty value.
pub(crate) fn non_empty<'f, T: ?Sized>(
    typ: &ColumnType,
    v: Option<&'f [u8]>,
) -> Result<&'f [u8], DeserializationError> {
    match non_null::<T>(typ, v)? {
        [] => Err(error::<T>(typ, DeserializationErrorKind::UnexpectedEmpty)),
        b => Ok(b),
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for CqlVarint {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Varint)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        non_empty::<Self>(typ, v).map(CqlVarint::from_signed_bytes_be_slice)
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for CqlDecimal {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Decimal)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let b = non_empty::<Self>(typ, v)?;
        CqlDecimal::decode(b).ok_or_else(|| {
            error::<Self>(
                typ,
                DeserializationErrorKind::InvalidValue("decimal shorter than 5 bytes"),
            )
        })
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for CqlDuration {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Duration)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let b = non_empty::<Self>(typ, v)?;
        CqlDuration::decode(b).map_err(|e| error::<Self>(typ, DeserializationErrorKind::Decode(e)))
    }
}
