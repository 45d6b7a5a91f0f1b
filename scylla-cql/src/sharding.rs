//! ScyllaDB's intranode sharding math (`biased-token-round-robin`), and the
//! source-port rule of the shard-aware port.
//!
//! All of it is pure arithmetic shared by the driver (to route a request to the
//! shard that owns its token, and to pick a source port that lands a new
//! connection on a chosen shard) and by the test cluster (to decide which shard
//! a connection belongs to, and whether a request arrived at the right one).

use std::num::NonZeroU16;

use crate::token::Token;

/// The sharding algorithm ScyllaDB advertises in `SCYLLA_SHARDING_ALGORITHM`.
pub const BIASED_TOKEN_ROUND_ROBIN: &str = "biased-token-round-robin";

/// The partitioner ScyllaDB advertises in `SCYLLA_PARTITIONER` (and the only
/// one this crate computes tokens for).
pub const MURMUR3_PARTITIONER: &str = "org.apache.cassandra.dht.Murmur3Partitioner";

/// A shard number on one node (0-based).
pub type Shard = u16;

/// Maps tokens and source ports to the shards of one node.
///
/// ```
/// use std::num::NonZeroU16;
/// use scylla_driver_cql::sharding::Sharder;
/// use scylla_driver_cql::token::Token;
///
/// let s = Sharder::new(NonZeroU16::new(4).unwrap(), 12);
/// assert_eq!(s.shard_of(Token(i64::MIN)), 0);
/// assert_eq!(s.shard_of_source_port(50003), 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sharder {
    /// The node's number of shards (the official crate's public field).
    pub nr_shards: NonZeroU16,
    ignore_msb: u8,
}

impl Sharder {
    /// A sharder for `nr_shards` shards and `SCYLLA_SHARDING_IGNORE_MSB` bits.
    pub const fn new(nr_shards: NonZeroU16, ignore_msb: u8) -> Self {
        Self {
            nr_shards,
            ignore_msb,
        }
    }

    /// Number of shards.
    pub const fn nr_shards(&self) -> NonZeroU16 {
        self.nr_shards
    }

    /// The `ignore_msb` parameter.
    pub const fn ignore_msb(&self) -> u8 {
        self.ignore_msb
    }

    /// The shard that owns `token`:
    /// `((((token - i64::MIN) << ignore_msb) mod 2^64) * nr_shards) >> 64`.
    #[inline]
    pub fn shard_of(&self, token: Token) -> Shard {
        // token - i64::MIN as an unsigned 64-bit value: flip the sign bit.
        let biased = (token.0 as u64) ^ (1u64 << 63);
        // Shifting by >= 64 discards every bit (the spec's "mod 2^64").
        let shifted = biased.checked_shl(self.ignore_msb as u32).unwrap_or(0);
        let shard = ((shifted as u128 * self.nr_shards.get() as u128) >> 64) as u64;
        // shard < nr_shards <= u16::MAX because shifted < 2^64.
        shard as Shard
    }

    /// The shard a connection from `source_port` lands on at the shard-aware port.
    #[inline]
    pub fn shard_of_source_port(&self, source_port: u16) -> Shard {
        source_port % self.nr_shards.get()
    }

    /// Source ports in `[range.start, range.end)` that land on `shard`, in
    /// increasing order starting from the first such port at or after `start`
    /// and wrapping around once. Pass a random `start` so that clients do not
    /// all try the same ports first.
    pub fn source_ports_for_shard(
        &self,
        shard: Shard,
        range: std::ops::Range<u16>,
        start: u16,
    ) -> impl Iterator<Item = u16> {
        let n = self.nr_shards.get() as u32;
        let (lo, hi) = (range.start as u32, range.end as u32);
        let shard = shard as u32 % n;
        // First port >= x that is congruent to `shard` mod n.
        let first_from = move |x: u32| x + (shard + n - x % n) % n;
        let start = (start as u32).clamp(lo, hi.max(lo));
        let upper = (first_from(start)..hi).step_by(n as usize);
        let lower = (first_from(lo)..start.min(hi)).step_by(n as usize);
        upper.chain(lower).map(|p| p as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sharder(n: u16, msb: u8) -> Sharder {
        Sharder::new(NonZeroU16::new(n).unwrap(), msb)
    }

    /// Java reference from the protocol-extensions spec, transcribed literally.
    fn java_shard_of(token: i64, nr_shards: i64, ignore_msb: u32) -> i32 {
        let mut token = token.wrapping_add(i64::MIN);
        token = token.wrapping_shl(ignore_msb);
        let tok_lo = token & 0xffff_ffff;
        let tok_hi = ((token as u64) >> 32) as i64 & 0xffff_ffff;
        let mul1 = tok_lo.wrapping_mul(nr_shards);
        let mul2 = tok_hi.wrapping_mul(nr_shards);
        let sum = (((mul1 as u64) >> 32) as i64).wrapping_add(mul2);
        ((sum as u64) >> 32) as i32
    }

    #[test]
    fn agrees_with_the_spec_reference() {
        let tokens = [
            i64::MIN,
            i64::MIN + 1,
            -1,
            0,
            1,
            i64::MAX,
            0x1234_5678_9abc_def0,
            -0x0fed_cba9_8765_4321,
        ];
        for n in [1u16, 2, 3, 7, 8, 12, 30, 64, 255] {
            for msb in [0u8, 1, 12, 20] {
                for t in tokens {
                    assert_eq!(
                        sharder(n, msb).shard_of(Token(t)) as i32,
                        java_shard_of(t, n as i64, msb as u32),
                        "token {t} shards {n} msb {msb}"
                    );
                }
            }
        }
    }

    #[test]
    fn source_ports_cover_the_range_once() {
        let s = sharder(7, 12);
        for shard in 0..7 {
            let ports: Vec<u16> = s.source_ports_for_shard(shard, 1000..1100, 1050).collect();
            let expected: Vec<u16> = (1000..1100).filter(|p| p % 7 == shard).collect();
            let mut sorted = ports.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, expected);
            assert!(ports[0] >= 1050);
        }
        // Edge: the very top of the port space.
        let top: Vec<u16> = s
            .source_ports_for_shard(3, 65500..u16::MAX, 65530)
            .collect();
        assert!(top.iter().all(|p| p % 7 == 3 && *p >= 65500));
    }
}
