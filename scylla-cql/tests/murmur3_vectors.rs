//! Known-answer vectors for Cassandra's Murmur3 partitioner.
//!
//! The string keys are hashed as `text` partition keys (their UTF-8 bytes).
//! "kremówki" ends in bytes >= 0x80 inside the 1..15-byte tail, which is where
//! Cassandra's signed-byte quirk changes the result.

use scylla_driver_cql::token::{murmur3_token, Token};

#[test]
fn text_keys() {
    for (key, token) in [
        ("test", -6_017_608_668_500_074_083_i64),
        ("xd", 4_507_812_186_440_344_727),
        ("primary_key", -1_632_642_444_691_073_360),
        ("kremówki", 4_354_931_215_268_080_151),
    ] {
        assert_eq!(murmur3_token(key.as_bytes()), Token(token), "key {key:?}");
    }
}

#[test]
fn empty_key_is_token_zero() {
    assert_eq!(murmur3_token(b""), Token(0));
}

#[test]
fn all_lengths_do_not_panic() {
    let data: Vec<u8> = (0..=255u8).collect();
    for n in 0..data.len() {
        let _ = murmur3_token(&data[..n]);
    }
}
