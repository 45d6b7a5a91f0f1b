//! `duration`: months, days and nanoseconds, kept apart because a month or a
//! day has no fixed length. Encoded as three zig-zag `[vint]`s (v5 spec,
//! section 6 "duration").

use super::vint;
use crate::error::DecodeError;

/// A CQL `duration`. Valid when all three parts are `>= 0` or all are `<= 0`
/// (the spec forbids mixed signs); see [`is_valid`](Self::is_valid).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CqlDuration {
    /// Months.
    pub months: i32,
    /// Days.
    pub days: i32,
    /// Nanoseconds.
    pub nanoseconds: i64,
}

impl CqlDuration {
    /// Whether the parts do not mix signs.
    pub const fn is_valid(&self) -> bool {
        let non_neg = self.months >= 0 && self.days >= 0 && self.nanoseconds >= 0;
        let non_pos = self.months <= 0 && self.days <= 0 && self.nanoseconds <= 0;
        non_neg || non_pos
    }

    /// Appends the encoding (three vints, no length).
    pub fn encode(&self, out: &mut Vec<u8>) {
        vint::put_vint(out, i64::from(self.months));
        vint::put_vint(out, i64::from(self.days));
        vint::put_vint(out, self.nanoseconds);
    }

    /// Decodes a whole value: three vints and nothing after them. Months and
    /// days must fit in 32 bits; mixed signs are rejected.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let (months, a) = vint::read_vint(buf, "duration months")?;
        let (days, b) = vint::read_vint(&buf[a..], "duration days")?;
        let (nanoseconds, c) = vint::read_vint(&buf[a + b..], "duration nanoseconds")?;
        let rest = buf.len() - (a + b + c);
        if rest != 0 {
            return Err(DecodeError::TrailingBytes {
                what: "duration",
                remaining: rest,
            });
        }
        let narrow = |v: i64, what| {
            i32::try_from(v).map_err(|_| DecodeError::InvalidValue { what, value: v })
        };
        let d = CqlDuration {
            months: narrow(months, "duration months")?,
            days: narrow(days, "duration days")?,
            nanoseconds,
        };
        if !d.is_valid() {
            return Err(DecodeError::InvalidValue {
                what: "duration with mixed signs",
                value: d.nanoseconds,
            });
        }
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_answers() {
        let mut out = Vec::new();
        CqlDuration {
            months: 1,
            days: 2,
            nanoseconds: 3,
        }
        .encode(&mut out);
        assert_eq!(out, [2, 4, 6]);
        out.clear();
        CqlDuration {
            months: -1,
            days: 0,
            nanoseconds: -64,
        }
        .encode(&mut out);
        // -64 zig-zags to 127 (one byte), -65 would need two.
        assert_eq!(out, [1, 0, 0x7F]);
        out.clear();
        CqlDuration {
            months: 0,
            days: 0,
            nanoseconds: 64,
        }
        .encode(&mut out);
        assert_eq!(out, [0, 0, 0x80, 0x80]);
    }

    #[test]
    fn rejects_bad_encodings() {
        assert!(CqlDuration::decode(&[2, 4]).is_err());
        assert!(CqlDuration::decode(&[2, 4, 6, 0]).is_err());
        // months = 1, days = -1: mixed signs.
        assert!(CqlDuration::decode(&[2, 1, 0]).is_err());
        // months = 2^32 does not fit an i32.
        let mut out = Vec::new();
        vint::put_vint(&mut out, 1 << 32);
        out.extend_from_slice(&[0, 0]);
        assert!(CqlDuration::decode(&out).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(m in 0..=i32::MAX, d in 0..=i32::MAX, n in 0..=i64::MAX, neg in any::<bool>()) {
            let v = if neg {
                CqlDuration { months: -m, days: -d, nanoseconds: -n }
            } else {
                CqlDuration { months: m, days: d, nanoseconds: n }
            };
            let mut out = Vec::new();
            v.encode(&mut out);
            prop_assert_eq!(CqlDuration::decode(&out), Ok(v));
        }
    }
}
