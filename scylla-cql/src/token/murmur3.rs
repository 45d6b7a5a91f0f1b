//! Cassandra's Murmur3 partitioner hash.
//!
//! This is MurmurHash3 x64/128 with seed 0, as implemented by Cassandra's
//! `org.apache.cassandra.utils.MurmurHash.hash3_x64_128`, which differs from the
//! reference algorithm in one place: when it folds the trailing 1..15 bytes into
//! `k1`/`k2` it reads them as Java (signed) bytes, so a tail byte >= 0x80 is
//! sign-extended to 64 bits before it is shifted and XORed in. Keys whose tail
//! bytes are all < 0x80 hash exactly as the reference does. The token is the
//! first 64-bit half of the hash, read as signed, with `i64::MIN` mapped to
//! `i64::MAX` (`Murmur3Partitioner.normalize`) so that `i64::MIN` stays the
//! ring's minimum token, which no key can own.

use super::Token;

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

#[inline]
fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[inline]
fn mix_k1(k1: u64) -> u64 {
    k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
}

#[inline]
fn mix_k2(k2: u64) -> u64 {
    k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
}

/// A Java `byte` widened to `long`: sign-extended (Cassandra's quirk).
#[inline]
fn sx(b: u8) -> u64 {
    b as i8 as i64 as u64
}

/// The 128-bit hash as Cassandra computes it: `(h1, h2)`.
pub fn hash3_x64_128(data: &[u8]) -> (u64, u64) {
    let mut h1: u64 = 0;
    let mut h2: u64 = 0;
    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        let (a, b) = block.split_at(8);
        // Both halves are exactly 8 bytes: `chunks_exact(16)` split at 8.
        let k1 = u64::from_le_bytes(a.try_into().unwrap_or([0; 8]));
        let k2 = u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));

        h1 ^= mix_k1(k1);
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(k2);
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }

    let tail = blocks.remainder();
    let mut k1: u64 = 0;
    let mut k2: u64 = 0;
    for (i, &b) in tail.iter().enumerate().rev() {
        if i >= 8 {
            k2 ^= sx(b) << ((i - 8) * 8);
        } else {
            k1 ^= sx(b) << (i * 8);
        }
    }
    if tail.len() > 8 {
        h2 ^= mix_k2(k2);
    }
    if !tail.is_empty() {
        h1 ^= mix_k1(k1);
    }

    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// The Murmur3 partitioner's token for a serialized partition key.
///
/// ```
/// use scylla_driver_cql::token::{murmur3_token, Token};
/// // An empty key hashes to token 0.
/// assert_eq!(murmur3_token(b""), Token(0));
/// ```
pub fn murmur3_token(partition_key: &[u8]) -> Token {
    let h1 = hash3_x64_128(partition_key).0 as i64;
    Token(if h1 == i64::MIN { i64::MAX } else { h1 })
}
