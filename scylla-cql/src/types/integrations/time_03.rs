//! `time` 0.3 (feature `time-03`): [`Date`] as `date`, [`Time`] as `time`
//! and [`OffsetDateTime`] as `timestamp`.
//!
//! - Dates: every `Date` is a valid CQL `date`; a CQL `date` outside
//!   `Date`'s range (years ±9999, or ±999,999 with `time`'s `large-dates`
//!   feature) fails to convert.
//! - Times: nanoseconds since midnight, both ways.
//! - Timestamps: whole milliseconds since 1970 (UTC); writing drops the
//!   sub-millisecond part (rounding down, towards the past) and keeps the
//!   instant whatever the offset; reading gives a UTC `OffsetDateTime` and
//!   fails for a timestamp outside its range.

use time_03::{Date, OffsetDateTime, Time};

use super::OutOfRange;
use crate::types::column_type::{ColumnType, NativeType};
use crate::types::cql_time::{CqlDate, CqlTime, CqlTimestamp};
use crate::types::deserialize::{self, fixed, DeserializationError, DeserializeValue};
use crate::types::error::{DeserializationErrorKind, TypeCheckError};
use crate::types::serialize::writers::{CellWriter, WrittenCellProof};
use crate::types::serialize::{self, SerializationError, SerializeValue, Written};

/// The Julian day number of 1970-01-01.
const UNIX_EPOCH_JULIAN_DAY: i32 = 2_440_588;

const NANOS_PER_SECOND: i64 = 1_000_000_000;

impl From<Date> for CqlDate {
    fn from(d: Date) -> Self {
        // `Date` spans under a million years (under 2^29 days) each side of
        // year 0, so the difference cannot overflow.
        CqlDate::from_unix_days(d.to_julian_day() - UNIX_EPOCH_JULIAN_DAY)
    }
}

impl TryFrom<CqlDate> for Date {
    type Error = OutOfRange;
    fn try_from(d: CqlDate) -> Result<Self, OutOfRange> {
        let out_of_range = OutOfRange {
            value: "the CQL date",
            target: "time::Date",
            hint: "read it as CqlDate to get any stored date",
        };
        let jd = d
            .unix_days()
            .checked_add(UNIX_EPOCH_JULIAN_DAY)
            .ok_or(out_of_range)?;
        Date::from_julian_day(jd).map_err(|_| out_of_range)
    }
}

impl From<Time> for CqlTime {
    fn from(t: Time) -> Self {
        let (h, m, s, ns) = t.as_hms_nano();
        let secs = (i64::from(h) * 60 + i64::from(m)) * 60 + i64::from(s);
        CqlTime(secs * NANOS_PER_SECOND + i64::from(ns))
    }
}

impl TryFrom<CqlTime> for Time {
    type Error = OutOfRange;
    fn try_from(t: CqlTime) -> Result<Self, OutOfRange> {
        let out_of_range = OutOfRange {
            value: "the CQL time",
            target: "time::Time",
            hint: "a time of day is 0 to 86399999999999 nanoseconds",
        };
        if !t.is_valid() {
            return Err(out_of_range);
        }
        let secs = t.0 / NANOS_PER_SECOND;
        // In range: below 24, 60, 60 and 10^9 for a valid time.
        let part = |v: i64| u8::try_from(v).map_err(|_| out_of_range);
        let (h, m, s) = (part(secs / 3600)?, part(secs / 60 % 60)?, part(secs % 60)?);
        let ns = u32::try_from(t.0 % NANOS_PER_SECOND).map_err(|_| out_of_range)?;
        Time::from_hms_nano(h, m, s, ns).map_err(|_| out_of_range)
    }
}

impl From<OffsetDateTime> for CqlTimestamp {
    /// Drops the sub-millisecond part (rounds towards the past).
    fn from(t: OffsetDateTime) -> Self {
        // `unix_timestamp` rounds towards the past and the millisecond of
        // the second does not depend on the offset (offsets are whole
        // seconds); the range (±10^6 years) is far inside i64 milliseconds.
        CqlTimestamp(t.unix_timestamp() * 1000 + i64::from(t.millisecond()))
    }
}

impl TryFrom<CqlTimestamp> for OffsetDateTime {
    type Error = OutOfRange;
    fn try_from(t: CqlTimestamp) -> Result<Self, OutOfRange> {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(t.0) * 1_000_000).map_err(|_| {
            OutOfRange {
                value: "the CQL timestamp",
                target: "time::OffsetDateTime",
                hint: "read it as CqlTimestamp to get any stored timestamp",
            }
        })
    }
}

impl SerializeValue for Date {
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

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for Date {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        deserialize::check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Date)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let d = CqlDate(u32::from_be_bytes(fixed::<Self, 4>(typ, v)?));
        Date::try_from(d).map_err(|_| {
            deserialize::error::<Self>(
                typ,
                DeserializationErrorKind::InvalidValue(
                    "date outside time::Date's range (read it as CqlDate)",
                ),
            )
        })
    }
}

impl SerializeValue for Time {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        writer.write_with(|out| {
            serialize::check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Time)))?;
            out.extend_from_slice(&CqlTime::from(*self).0.to_be_bytes());
            Ok(Written::Value)
        })
    }
}

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for Time {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        deserialize::check::<Self>(typ, matches!(typ, ColumnType::Native(NativeType::Time)))
    }
    fn deserialize(
        typ: &'metadata ColumnType,
        v: Option<&'frame [u8]>,
    ) -> Result<Self, DeserializationError> {
        let t = CqlTime(i64::from_be_bytes(fixed::<Self, 8>(typ, v)?));
        Time::try_from(t).map_err(|_| {
            deserialize::error::<Self>(
                typ,
                DeserializationErrorKind::InvalidValue("time outside 0..86400 s"),
            )
        })
    }
}

impl SerializeValue for OffsetDateTime {
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

impl<'frame, 'metadata> DeserializeValue<'frame, 'metadata> for OffsetDateTime {
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
        OffsetDateTime::try_from(t).map_err(|_| {
            deserialize::error::<Self>(
                typ,
                DeserializationErrorKind::InvalidValue(
                    "timestamp outside time::OffsetDateTime's range (read it as CqlTimestamp)",
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time_03::{Month, UtcOffset};

    #[test]
    fn known_answers() {
        let d = Date::from_calendar_date(2024, Month::February, 29).expect("valid date");
        assert_eq!(CqlDate::from(d).unix_days(), 19_782);
        assert_eq!(Date::try_from(CqlDate::from_unix_days(19_782)), Ok(d));
        assert_eq!(
            CqlDate::from(Date::from_calendar_date(1970, Month::January, 1).expect("valid")),
            CqlDate::UNIX_EPOCH
        );
        assert!(Date::try_from(CqlDate(0)).is_err());
        assert!(Date::try_from(CqlDate(u32::MAX)).is_err());

        let t = Time::from_hms_nano(1, 2, 3, 4).expect("valid time");
        assert_eq!(CqlTime::from(t), CqlTime(3_723_000_000_004));
        assert_eq!(Time::try_from(CqlTime(3_723_000_000_004)), Ok(t));
        assert!(Time::try_from(CqlTime(CqlTime::NANOS_PER_DAY)).is_err());

        // The same instant at two offsets is the same timestamp.
        let utc = OffsetDateTime::from_unix_timestamp_nanos(-1_500_000).expect("valid");
        assert_eq!(CqlTimestamp::from(utc), CqlTimestamp(-2));
        let east = utc.to_offset(UtcOffset::from_hms(5, 30, 0).expect("valid offset"));
        assert_eq!(CqlTimestamp::from(east), CqlTimestamp(-2));
        assert!(OffsetDateTime::try_from(CqlTimestamp(i64::MIN)).is_err());
    }
}
