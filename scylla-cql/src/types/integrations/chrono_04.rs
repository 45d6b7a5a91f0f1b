//! `chrono` 0.4 (feature `chrono-04`): [`NaiveDate`] as `date`, [`NaiveTime`]
//! as `time` and [`DateTime<Utc>`] as `timestamp`.
//!
//! - Dates: every `NaiveDate` is a valid CQL `date`; a CQL `date` more than
//!   about 262,000 years from 1970 has no `NaiveDate` and fails to convert.
//! - Times: nanoseconds since midnight, both ways; a leap second
//!   (`23:59:60.5` in chrono's representation) has no CQL `time` and fails.
//! - Timestamps: whole milliseconds since 1970; writing drops the
//!   sub-millisecond part (rounding down, towards the past), reading a
//!   timestamp outside `DateTime<Utc>`'s range fails.

use chrono_04::{DateTime, Datelike, NaiveDate, NaiveTime, Timelike, Utc};

use super::OutOfRange;
use crate::types::column_type::{ColumnType, NativeType};
use crate::types::cql_time::{CqlDate, CqlTime, CqlTimestamp};
use crate::types::deserialize::{self, fixed, DeserializationError, DeserializeValue};
use crate::types::error::{DeserializationErrorKind, SerializationErrorKind, TypeCheckError};
use crate::types::serialize::writers::{CellWriter, WrittenCellProof};
use crate::types::serialize::{self, SerializationError, SerializeValue, Written};

/// `NaiveDate::num_days_from_ce` of 1970-01-01 (day 1 is 0001-01-01).
const UNIX_EPOCH_DAYS_FROM_CE: i32 = 719_163;

const NANOS_PER_SECOND: i64 = 1_000_000_000;

impl From<NaiveDate> for CqlDate {
    fn from(d: NaiveDate) -> Self {
        // chrono's dates span fewer than 2^27 days each side of year 1, so
        // the difference cannot overflow.
        CqlDate::from_unix_days(d.num_days_from_ce() - UNIX_EPOCH_DAYS_FROM_CE)
    }
}

impl TryFrom<CqlDate> for NaiveDate {
    type Error = OutOfRange;
    fn try_from(d: CqlDate) -> Result<Self, OutOfRange> {
        d.unix_days()
            .checked_add(UNIX_EPOCH_DAYS_FROM_CE)
            .and_then(NaiveDate::from_num_days_from_ce_opt)
            .ok_or(OutOfRange {
                value: "the CQL date",
                target: "chrono::NaiveDate",
                hint: "read it as CqlDate to get any stored date",
            })
    }
}

impl TryFrom<NaiveTime> for CqlTime {
    type Error = OutOfRange;
    fn try_from(t: NaiveTime) -> Result<Self, OutOfRange> {
        let nanos = i64::from(t.nanosecond());
        if nanos >= NANOS_PER_SECOND {
            return Err(OutOfRange {
                value: "a leap second",
                target: "CQL time",
                hint: "CQL time has no leap seconds: use the second before it",
            });
        }
        Ok(CqlTime(
            i64::from(t.num_seconds_from_midnight()) * NANOS_PER_SECOND + nanos,
        ))
    }
}

impl TryFrom<CqlTime> for NaiveTime {
    type Error = OutOfRange;
    fn try_from(t: CqlTime) -> Result<Self, OutOfRange> {
        let out_of_range = OutOfRange {
            value: "the CQL time",
            target: "chrono::NaiveTime",
            hint: "a time of day is 0 to 86399999999999 nanoseconds",
        };
        if !t.is_valid() {
            return Err(out_of_range);
        }
        let secs = u32::try_from(t.0 / NANOS_PER_SECOND).map_err(|_| out_of_range)?;
        let nanos = u32::try_from(t.0 % NANOS_PER_SECOND).map_err(|_| out_of_range)?;
        NaiveTime::from_num_seconds_from_midnight_opt(secs, nanos).ok_or(out_of_range)
    }
}

impl From<DateTime<Utc>> for CqlTimestamp {
    /// Drops the sub-millisecond part (rounds towards the past).
    fn from(t: DateTime<Utc>) -> Self {
        // chrono's range, in milliseconds, is far inside i64.
        CqlTimestamp(t.timestamp_millis())
    }
}

impl TryFrom<CqlTimestamp> for DateTime<Utc> {
    type Error = OutOfRange;
    fn try_from(t: CqlTimestamp) -> Result<Self, OutOfRange> {
        DateTime::from_timestamp_millis(t.0).ok_or(OutOfRange {
            value: "the CQL timestamp",
            target: "chrono::DateTime<Utc>",
            hint: "read it as CqlTimestamp to get any stored timestamp",
        })
    }
}

impl SerializeValue for NaiveDate {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            serialize::check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Date)))?;
            out.extend_from_slice(&CqlDate::from(*self).0.to_be_bytes());
            Ok(Written::Value)
        })
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for NaiveDate {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        deserialize::check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Date)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let d = CqlDate(u32::from_be_bytes(fixed::<Self, 4>(typ, v)?));
        NaiveDate::try_from(d).map_err(|_| {
            deserialize::error::<Self>(
                typ,
                DeserializationErrorKind::InvalidValue(
                    "date outside chrono::NaiveDate's range (read it as CqlDate)",
                ),
            )
        })
    }
}

impl SerializeValue for NaiveTime {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            serialize::check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Time)))?;
            let t = CqlTime::try_from(*self).map_err(|_| {
                SerializationError::of::<Self>(
                    typ,
                    SerializationErrorKind::InvalidValue("a leap second has no CQL time"),
                )
            })?;
            out.extend_from_slice(&t.0.to_be_bytes());
            Ok(Written::Value)
        })
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for NaiveTime {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        deserialize::check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Time)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let t = CqlTime(i64::from_be_bytes(fixed::<Self, 8>(typ, v)?));
        NaiveTime::try_from(t).map_err(|_| {
            deserialize::error::<Self>(
                typ,
                DeserializationErrorKind::InvalidValue("time outside 0..86400 s"),
            )
        })
    }
}

impl SerializeValue for DateTime<Utc> {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            serialize::check::<Self>(
                typ,
                matches!(typ, ColumnType::Native(NativeType::Timestamp)),
            )?;
            out.extend_from_slice(&CqlTimestamp::from(*self).0.to_be_bytes());
            Ok(Written::Value)
        })
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for DateTime<Utc> {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        deserialize::check::<Self>(
            typ,
            matches!(typ, ColumnType::Native(NativeType::Timestamp)),
        )
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let t = CqlTimestamp(i64::from_be_bytes(fixed::<Self, 8>(typ, v)?));
        DateTime::try_from(t).map_err(|_| {
            deserialize::error::<Self>(
                typ,
                DeserializationErrorKind::InvalidValue(
                    "timestamp outside chrono::DateTime's range (read it as CqlTimestamp)",
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers() {
        let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).expect("valid date");
        assert_eq!(CqlDate::from(epoch), CqlDate::UNIX_EPOCH);
        let d = NaiveDate::from_ymd_opt(2024, 2, 29).expect("valid date");
        assert_eq!(CqlDate::from(d).unix_days(), 19_782);
        assert_eq!(NaiveDate::try_from(CqlDate::from_unix_days(19_782)), Ok(d));
        assert!(NaiveDate::try_from(CqlDate(0)).is_err());
        assert!(NaiveDate::try_from(CqlDate(u32::MAX)).is_err());

        let t = NaiveTime::from_hms_nano_opt(1, 2, 3, 4).expect("valid time");
        assert_eq!(CqlTime::try_from(t), Ok(CqlTime(3_723_000_000_004)));
        let leap = NaiveTime::from_hms_nano_opt(23, 59, 59, 1_500_000_000).expect("leap");
        assert!(CqlTime::try_from(leap).is_err());
        assert!(NaiveTime::try_from(CqlTime(CqlTime::NANOS_PER_DAY)).is_err());
        assert!(NaiveTime::try_from(CqlTime(-1)).is_err());

        let ts = DateTime::from_timestamp(-1, 999_999).expect("valid timestamp");
        // 1969-12-31T23:59:59.000999: the millisecond before is kept.
        assert_eq!(CqlTimestamp::from(ts), CqlTimestamp(-1000));
        assert!(DateTime::<Utc>::try_from(CqlTimestamp(i64::MAX)).is_err());
    }
}
