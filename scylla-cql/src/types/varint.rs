//! `varint`: an arbitrary-precision integer, as big-endian two's complement
//! bytes. Kept as bytes (no big-integer dependency); conversions to and from
//! `i64`/`i128` cover the values that fit.

/// A CQL `varint`: big-endian two's complement bytes, normalised (no
/// redundant leading `0x00` or `0xFF` byte, at least one byte), so that equal
/// numbers compare equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CqlVarint(Vec<u8>);

/// A varint does not fit the requested integer type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("varint out of range for {0}")]
pub struct VarintOutOfRange(pub &'static str);

/// How many leading bytes of `b` are redundant sign extension.
fn redundant_prefix(b: &[u8]) -> usize {
    let mut i = 0;
    // A byte is redundant if it is all sign (0x00 / 0xFF) and the next byte's
    // top bit repeats that sign.
    while i + 1 < b.len() {
        let (cur, next) = (b[i], b[i + 1]);
        if (cur == 0x00 && next & 0x80 == 0) || (cur == 0xFF && next & 0x80 != 0) {
            i += 1;
        } else {
            break;
        }
    }
    i
}

impl CqlVarint {
    /// From big-endian two's complement bytes (any padding; empty means 0).
    pub fn from_signed_bytes_be_slice(bytes: &[u8]) -> Self {
        if bytes.is_empty() {
            return CqlVarint(vec![0]);
        }
        CqlVarint(bytes[redundant_prefix(bytes)..].to_vec())
    }

    /// From an owned byte vector (any padding; empty means 0).
    pub fn from_signed_bytes_be(mut bytes: Vec<u8>) -> Self {
        if bytes.is_empty() {
            bytes.push(0);
        }
        let n = redundant_prefix(&bytes);
        bytes.drain(..n);
        CqlVarint(bytes)
    }

    /// The normalised big-endian two's complement bytes (never empty).
    pub fn as_signed_bytes_be_slice(&self) -> &[u8] {
        &self.0
    }

    /// The bytes, consuming the value.
    pub fn into_signed_bytes_be(self) -> Vec<u8> {
        self.0
    }

    /// Sign-extends the value into an `N`-byte array, if it fits.
    fn to_array<const N: usize>(&self) -> Option<[u8; N]> {
        let b = &self.0;
        if b.len() > N {
            return None;
        }
        let fill = if b.first().is_some_and(|f| f & 0x80 != 0) {
            0xFF
        } else {
            0x00
        };
        let mut out = [fill; N];
        out[N - b.len()..].copy_from_slice(b);
        Some(out)
    }
}

impl From<i64> for CqlVarint {
    fn from(v: i64) -> Self {
        CqlVarint::from_signed_bytes_be_slice(&v.to_be_bytes())
    }
}

impl From<i128> for CqlVarint {
    fn from(v: i128) -> Self {
        CqlVarint::from_signed_bytes_be_slice(&v.to_be_bytes())
    }
}

impl From<i32> for CqlVarint {
    fn from(v: i32) -> Self {
        CqlVarint::from(i64::from(v))
    }
}

impl TryFrom<&CqlVarint> for i64 {
    type Error = VarintOutOfRange;
    fn try_from(v: &CqlVarint) -> Result<i64, VarintOutOfRange> {
        v.to_array()
            .map(i64::from_be_bytes)
            .ok_or(VarintOutOfRange("i64"))
    }
}

impl TryFrom<&CqlVarint> for i128 {
    type Error = VarintOutOfRange;
    fn try_from(v: &CqlVarint) -> Result<i128, VarintOutOfRange> {
        v.to_array()
            .map(i128::from_be_bytes)
            .ok_or(VarintOutOfRange("i128"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_answers() {
        let cases: &[(i64, &[u8])] = &[
            (0, &[0x00]),
            (1, &[0x01]),
            (127, &[0x7F]),
            (128, &[0x00, 0x80]),
            (129, &[0x00, 0x81]),
            (-1, &[0xFF]),
            (-128, &[0x80]),
            (-129, &[0xFF, 0x7F]),
            (i64::MIN, &[0x80, 0, 0, 0, 0, 0, 0, 0]),
        ];
        for &(n, bytes) in cases {
            assert_eq!(CqlVarint::from(n).as_signed_bytes_be_slice(), bytes, "{n}");
            assert_eq!(
                i64::try_from(&CqlVarint::from_signed_bytes_be_slice(bytes)),
                Ok(n)
            );
        }
    }

    #[test]
    fn normalises_padding() {
        assert_eq!(
            CqlVarint::from_signed_bytes_be_slice(&[0, 0, 0x7F]),
            CqlVarint::from(127)
        );
        assert_eq!(
            CqlVarint::from_signed_bytes_be_slice(&[0xFF, 0xFF, 0x80]),
            CqlVarint::from(-128)
        );
        assert_eq!(
            CqlVarint::from_signed_bytes_be_slice(&[]),
            CqlVarint::from(0)
        );
        assert_eq!(
            CqlVarint::from_signed_bytes_be(vec![0, 0x80]).as_signed_bytes_be_slice(),
            [0, 0x80]
        );
    }

    #[test]
    fn out_of_range() {
        let big = CqlVarint::from(i128::from(i64::MAX) + 1);
        assert!(i64::try_from(&big).is_err());
        assert_eq!(i128::try_from(&big), Ok(i128::from(i64::MAX) + 1));
        let huge = CqlVarint::from_signed_bytes_be_slice(&[1; 17]);
        assert!(i128::try_from(&huge).is_err());
    }

    proptest! {
        #[test]
        fn i128_round_trip(v in any::<i128>()) {
            prop_assert_eq!(i128::try_from(&CqlVarint::from(v)), Ok(v));
        }

        #[test]
        fn bytes_normalise_idempotently(b in proptest::collection::vec(any::<u8>(), 0..20)) {
            let v = CqlVarint::from_signed_bytes_be_slice(&b);
            prop_assert_eq!(CqlVarint::from_signed_bytes_be_slice(v.as_signed_bytes_be_slice()), v.clone());
            prop_assert_eq!(CqlVarint::from_signed_bytes_be(b), v);
        }
    }
}
