//! `date`, `time` and `timestamp`: CQL's calendar types, kept as the raw
//! numbers of their encodings so that every representable value round-trips
//! (conversions to a calendar library are left to the user).

/// A CQL `date`: days since -5877641-06-23, i.e. with the Unix epoch
/// (1970-01-01) at 2^31. Encoded as a 4-byte unsigned integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CqlDate(pub u32);

impl CqlDate {
    /// The encoding of the Unix epoch, 1970-01-01.
    pub const UNIX_EPOCH: CqlDate = CqlDate(1 << 31);

    /// The date `days` days after (or before, if negative) 1970-01-01.
    pub const fn from_unix_days(days: i32) -> Self {
        // Flipping the sign bit adds 2^31 modulo 2^32: exact for every i32.
        CqlDate((days as u32) ^ (1 << 31))
    }

    /// Days since 1970-01-01 (negative before it).
    pub const fn unix_days(self) -> i32 {
        (self.0 ^ (1 << 31)) as i32
    }
}

/// A CQL `time`: nanoseconds since midnight, valid in `0..86_400_000_000_000`.
/// Encoded as an 8-byte signed integer; out-of-range values are rejected by
/// both the serializer and the deserializer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CqlTime(pub i64);

impl CqlTime {
    /// Nanoseconds in a day: the exclusive upper bound of valid values.
    pub const NANOS_PER_DAY: i64 = 86_400_000_000_000;

    /// A time of day, if `nanos` is within a day.
    pub const fn new(nanos: i64) -> Option<Self> {
        if nanos >= 0 && nanos < Self::NANOS_PER_DAY {
            Some(CqlTime(nanos))
        } else {
            None
        }
    }

    /// Whether the value is a valid time of day.
    pub const fn is_valid(self) -> bool {
        self.0 >= 0 && self.0 < Self::NANOS_PER_DAY
    }
}

/// A CQL `timestamp`: milliseconds since the Unix epoch (negative before it).
/// Encoded as an 8-byte signed integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CqlTimestamp(pub i64);

impl CqlTimestamp {
    /// The earliest timestamp.
    pub const MIN: CqlTimestamp = CqlTimestamp(i64::MIN);
    /// The latest timestamp.
    pub const MAX: CqlTimestamp = CqlTimestamp(i64::MAX);

    /// The current time of the system clock, in whole milliseconds (the
    /// epoch if the clock reads earlier than it).
    pub fn now() -> Self {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        CqlTimestamp(i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX))
    }

    /// How long after `earlier` this is; `None` if it is before `earlier`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use scylla_driver_cql::types::CqlTimestamp;
    ///
    /// let t = CqlTimestamp(1_000);
    /// assert_eq!((t + Duration::from_secs(2)).checked_duration_since(t), Some(Duration::from_secs(2)));
    /// assert_eq!(t.checked_duration_since(CqlTimestamp(1_001)), None);
    /// assert_eq!(CqlTimestamp::MAX + Duration::from_millis(1), CqlTimestamp::MAX);
    /// ```
    pub fn checked_duration_since(self, earlier: CqlTimestamp) -> Option<std::time::Duration> {
        let millis = self.0.checked_sub(earlier.0)?;
        u64::try_from(millis)
            .ok()
            .map(std::time::Duration::from_millis)
    }
}

/// Later by a duration (whole milliseconds), saturating at
/// [`CqlTimestamp::MAX`].
impl std::ops::Add<std::time::Duration> for CqlTimestamp {
    type Output = CqlTimestamp;

    fn add(self, d: std::time::Duration) -> CqlTimestamp {
        let millis = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        CqlTimestamp(self.0.saturating_add(millis))
    }
}

/// Earlier by a duration (whole milliseconds), saturating at
/// [`CqlTimestamp::MIN`].
impl std::ops::Sub<std::time::Duration> for CqlTimestamp {
    type Output = CqlTimestamp;

    fn sub(self, d: std::time::Duration) -> CqlTimestamp {
        let millis = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        CqlTimestamp(self.0.saturating_sub(millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_epoch() {
        assert_eq!(CqlDate::from_unix_days(0), CqlDate(2_147_483_648));
        assert_eq!(CqlDate::from_unix_days(-1).0, 2_147_483_647);
        assert_eq!(CqlDate(0).unix_days(), i32::MIN);
        assert_eq!(CqlDate(u32::MAX).unix_days(), i32::MAX);
        for d in [i32::MIN, -1, 0, 1, 19_000, i32::MAX] {
            assert_eq!(CqlDate::from_unix_days(d).unix_days(), d);
        }
    }

    #[test]
    fn time_range() {
        assert!(CqlTime::new(0).is_some());
        assert!(CqlTime::new(CqlTime::NANOS_PER_DAY - 1).is_some());
        assert!(CqlTime::new(CqlTime::NANOS_PER_DAY).is_none());
        assert!(CqlTime::new(-1).is_none());
        assert!(!CqlTime(-5).is_valid());
    }
}
