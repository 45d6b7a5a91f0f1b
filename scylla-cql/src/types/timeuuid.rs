//! [`CqlTimeuuid`]: a `timeuuid` value, ordered as the server orders them.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

/// A CQL `timeuuid` (a version 1 UUID), ordered as Cassandra and ScyllaDB
/// order the column: by the 60-bit timestamp, then by the remaining 8 bytes
/// (clock sequence and node) compared as signed bytes. A plain [`Uuid`]
/// orders by its bytes, which for a version 1 UUID is not time order.
///
/// Binds to and reads from `timeuuid` columns only (a [`Uuid`] fits `uuid`
/// and `timeuuid` alike).
///
/// ```
/// use scylla_driver_cql::types::CqlTimeuuid;
///
/// // 10:00 and 10:01 on the same day, same clock sequence and node:
/// let earlier: CqlTimeuuid = "8d4b6fa0-cd25-11ee-8000-000000000001".parse().unwrap();
/// let later: CqlTimeuuid = "b10d8fa0-cd25-11ee-8000-000000000001".parse().unwrap();
/// assert!(earlier < later);
/// assert_eq!(later.to_string(), "b10d8fa0-cd25-11ee-8000-000000000001");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CqlTimeuuid(Uuid);

impl CqlTimeuuid {
    /// The all-zero UUID.
    pub fn nil() -> Self {
        Self(Uuid::nil())
    }

    /// From its 16 bytes (big-endian, as on the wire).
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(Uuid::from_bytes(bytes))
    }

    /// From 16 bytes of a slice; fails if it is not 16 bytes long.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, uuid::Error> {
        Uuid::from_slice(bytes).map(Self)
    }

    /// From its value as one number.
    pub fn from_u128(v: u128) -> Self {
        Self(Uuid::from_u128(v))
    }

    /// From its high and low 64 bits.
    pub fn from_u64_pair(high: u64, low: u64) -> Self {
        Self(Uuid::from_u64_pair(high, low))
    }

    /// Its 16 bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        self.0.as_bytes()
    }

    /// Its value as one number.
    pub fn as_u128(&self) -> u128 {
        self.0.as_u128()
    }

    /// Its high and low 64 bits.
    pub fn as_u64_pair(&self) -> (u64, u64) {
        self.0.as_u64_pair()
    }

    /// The UUID.
    pub fn as_uuid(&self) -> &Uuid {
        &self.0
    }

    /// The 60-bit timestamp (100 ns units since 1582-10-15), from the
    /// version 1 layout: `time_low`, `time_mid`, then `time_hi` without the
    /// version nibble.
    fn timestamp(&self) -> u64 {
        let b = self.0.as_bytes();
        let time_low = u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        let time_mid = u64::from(u16::from_be_bytes([b[4], b[5]]));
        let time_hi = u64::from(u16::from_be_bytes([b[6], b[7]]) & 0x0fff);
        (time_hi << 48) | (time_mid << 32) | time_low
    }

    /// Clock sequence and node, each byte taken as signed (what the
    /// servers' comparison does).
    fn tail_signed(&self) -> [i8; 8] {
        let b = self.0.as_bytes();
        std::array::from_fn(|i| b[8 + i] as i8)
    }
}

impl Ord for CqlTimeuuid {
    fn cmp(&self, other: &Self) -> Ordering {
        self.timestamp()
            .cmp(&other.timestamp())
            .then_with(|| self.tail_signed().cmp(&other.tail_signed()))
            // Equal timestamps and tails differ at most in the version
            // nibble: order by the bytes, so that `Ord` agrees with `Eq`.
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for CqlTimeuuid {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl From<Uuid> for CqlTimeuuid {
    fn from(u: Uuid) -> Self {
        Self(u)
    }
}

impl From<CqlTimeuuid> for Uuid {
    fn from(t: CqlTimeuuid) -> Self {
        t.0
    }
}

impl AsRef<Uuid> for CqlTimeuuid {
    fn as_ref(&self) -> &Uuid {
        &self.0
    }
}

impl FromStr for CqlTimeuuid {
    type Err = uuid::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::from_str(s).map(Self)
    }
}

impl fmt::Display for CqlTimeuuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A version 1 UUID from its parts.
    fn v1(timestamp: u64, tail: [u8; 8]) -> CqlTimeuuid {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&(timestamp as u32).to_be_bytes());
        b[4..6].copy_from_slice(&((timestamp >> 32) as u16).to_be_bytes());
        b[6..8].copy_from_slice(&((((timestamp >> 48) as u16) & 0x0fff) | 0x1000).to_be_bytes());
        b[8..16].copy_from_slice(&tail);
        CqlTimeuuid::from_bytes(b)
    }

    #[test]
    fn time_first_then_signed_tail() {
        let a = v1(1, [0xff; 8]);
        let b = v1(2, [0; 8]);
        assert!(a < b, "the timestamp decides first");
        // Same time: 0x80 (-128) sorts before 0x7f (127).
        assert!(v1(5, [0x80, 0, 0, 0, 0, 0, 0, 0]) < v1(5, [0x7f, 0, 0, 0, 0, 0, 0, 0]));
        // The bytes alone would say the opposite of time order here.
        let late_low = v1(0x0000_0001_0000_0000, [0; 8]);
        let early_high = v1(0x0000_0000_ffff_ffff, [0; 8]);
        assert!(early_high < late_low);
        assert!(early_high.as_uuid() > late_low.as_uuid());
    }

    proptest! {
        #[test]
        fn order_is_total_and_follows_time(
            t1 in 0u64..(1 << 60), t2 in 0u64..(1 << 60),
            tail1 in any::<[u8; 8]>(), tail2 in any::<[u8; 8]>(),
        ) {
            let (a, b) = (v1(t1, tail1), v1(t2, tail2));
            prop_assert_eq!(a.timestamp(), t1);
            if t1 != t2 {
                prop_assert_eq!(a.cmp(&b), t1.cmp(&t2));
            }
            prop_assert_eq!(a.cmp(&b), b.cmp(&a).reverse());
            prop_assert_eq!(a.cmp(&b) == Ordering::Equal, a == b);
            prop_assert_eq!(a.to_string().parse::<CqlTimeuuid>().unwrap(), a);
        }
    }
}
