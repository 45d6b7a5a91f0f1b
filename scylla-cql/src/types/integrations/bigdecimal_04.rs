//! `bigdecimal::BigDecimal` 0.4 (feature `bigdecimal-04`) as `decimal`, and
//! its conversions with [`CqlDecimal`].
//!
//! A `BigDecimal`'s scale is an `i64`, a CQL `decimal`'s an `i32`: a value
//! whose scale does not fit fails to convert or serialize (scales that
//! large only come from arithmetic that has lost track of its precision).

use bigdecimal_04::num_bigint::BigInt;
use bigdecimal_04::BigDecimal;

use super::OutOfRange;
use crate::types::column_type::{ColumnType, NativeType};
use crate::types::decimal::CqlDecimal;
use crate::types::deserialize::native::non_empty;
use crate::types::deserialize::{self, DeserializationError, DeserializeValue};
use crate::types::error::{DeserializationErrorKind, SerializationErrorKind, TypeCheckError};
use crate::types::serialize::writers::{CellWriter, WrittenCellProof};
use crate::types::serialize::{self, SerializationError, SerializeValue, Written};
use crate::types::varint::CqlVarint;

const SCALE_OUT_OF_RANGE: OutOfRange = OutOfRange {
    value: "the BigDecimal's scale",
    target: "CQL decimal (an i32 scale)",
    hint: "round the value (BigDecimal::with_scale) before writing it",
};

impl From<CqlDecimal> for BigDecimal {
    fn from(d: CqlDecimal) -> Self {
        BigDecimal::new(
            BigInt::from_signed_bytes_be(d.unscaled.as_signed_bytes_be_slice()),
            i64::from(d.scale),
        )
    }
}

impl From<&CqlDecimal> for BigDecimal {
    fn from(d: &CqlDecimal) -> Self {
        BigDecimal::new(
            BigInt::from_signed_bytes_be(d.unscaled.as_signed_bytes_be_slice()),
            i64::from(d.scale),
        )
    }
}

impl TryFrom<BigDecimal> for CqlDecimal {
    type Error = OutOfRange;
    fn try_from(d: BigDecimal) -> Result<Self, OutOfRange> {
        let (unscaled, scale) = d.into_bigint_and_exponent();
        Ok(CqlDecimal {
            unscaled: CqlVarint::from_signed_bytes_be(unscaled.to_signed_bytes_be()),
            scale: i32::try_from(scale).map_err(|_| SCALE_OUT_OF_RANGE)?,
        })
    }
}

impl TryFrom<&BigDecimal> for CqlDecimal {
    type Error = OutOfRange;
    fn try_from(d: &BigDecimal) -> Result<Self, OutOfRange> {
        let (unscaled, scale) = d.as_bigint_and_scale();
        Ok(CqlDecimal {
            unscaled: CqlVarint::from_signed_bytes_be(unscaled.to_signed_bytes_be()),
            scale: i32::try_from(scale).map_err(|_| SCALE_OUT_OF_RANGE)?,
        })
    }
}

impl SerializeValue for BigDecimal {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            serialize::check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Decimal)))?;
            let (unscaled, scale) = self.as_bigint_and_scale();
            let scale = i32::try_from(scale).map_err(|_| {
                SerializationError::of::<Self>(
                    typ,
                    SerializationErrorKind::InvalidValue(
                        "decimal scale outside i32 (round the value with BigDecimal::with_scale)",
                    ),
                )
            })?;
            out.extend_from_slice(&scale.to_be_bytes());
            out.extend_from_slice(&unscaled.to_signed_bytes_be());
            Ok(Written::Value)
        })
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for BigDecimal {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        deserialize::check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Decimal)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let b = non_empty::<Self>(typ, v)?;
        match b.split_first_chunk::<4>() {
            Some((scale, unscaled)) if !unscaled.is_empty() => Ok(BigDecimal::new(
                BigInt::from_signed_bytes_be(unscaled),
                i64::from(i32::from_be_bytes(*scale)),
            )),
            _ => Err(deserialize::error::<Self>(
                typ,
                DeserializationErrorKind::InvalidValue("decimal shorter than 5 bytes"),
            )),
        }
    }
}
