//! `num_bigint::BigInt` (features `num-bigint-03` and `num-bigint-04`, one
//! impl per major version) as `varint`, and its conversions with
//! [`CqlVarint`]. Both hold any integer, so every conversion is exact.

use crate::types::column_type::{ColumnType, NativeType};
use crate::types::deserialize::native::non_empty;
use crate::types::deserialize::{self, DeserializationError, DeserializeValue};
use crate::types::error::TypeCheckError;
use crate::types::serialize::writers::{CellWriter, WrittenCellProof};
use crate::types::serialize::{self, SerializationError, SerializeValue, Written};
use crate::types::varint::CqlVarint;

macro_rules! impl_bigint {
    ($krate:ident) => {
        impl From<$krate::BigInt> for CqlVarint {
            fn from(v: $krate::BigInt) -> Self {
                CqlVarint::from_signed_bytes_be(v.to_signed_bytes_be())
            }
        }

        impl From<&$krate::BigInt> for CqlVarint {
            fn from(v: &$krate::BigInt) -> Self {
                CqlVarint::from_signed_bytes_be(v.to_signed_bytes_be())
            }
        }

        impl From<CqlVarint> for $krate::BigInt {
            fn from(v: CqlVarint) -> Self {
                $krate::BigInt::from_signed_bytes_be(v.as_signed_bytes_be_slice())
            }
        }

        impl From<&CqlVarint> for $krate::BigInt {
            fn from(v: &CqlVarint) -> Self {
                $krate::BigInt::from_signed_bytes_be(v.as_signed_bytes_be_slice())
            }
        }

        impl SerializeValue for $krate::BigInt {
            fn serialize<'b>(
                &self,
                typ: &ColumnType,
                writer: CellWriter<'b>,
            ) -> Result<WrittenCellProof<'b>, SerializationError> {
                writer.write_with(|out| {
                    serialize::check::<Self>(
                        typ,
                        matches!(typ, ColumnType::Native(NativeType::Varint)),
                    )?;
                    // Minimal two's complement, at least one byte (0 is `[0]`).
                    out.extend_from_slice(&self.to_signed_bytes_be());
                    Ok(Written::Value)
                })
            }
        }

        impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for $krate::BigInt {
            fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
                deserialize::check::<Self>(
                    typ,
                    matches!(typ, ColumnType::Native(NativeType::Varint)),
                )
            }
            fn deserialize(
                typ: &'metadata ColumnType,
                v: Option<&'frame [u8]>,
            ) -> Result<Self, DeserializationError> {
                non_empty::<Self>(typ, v).map($krate::BigInt::from_signed_bytes_be)
            }
        }
    };
}

#[cfg(feature = "num-bigint-03")]
impl_bigint!(num_bigint_03);
#[cfg(feature = "num-bigint-04")]
impl_bigint!(num_bigint_04);
