//! Protocol v5 segments: every encoded segment decodes to what was encoded,
//! in both formats, whole or fed in pieces; any single flipped bit is caught
//! by a checksum (never a wrong payload delivered).
#![allow(clippy::unwrap_used, missing_docs)]

use bytes::BytesMut;
use proptest::collection::vec;
use proptest::prelude::*;
use scylla_driver_cql::frame::segment::{self, SegmentError, MAX_PAYLOAD_LEN};

fn encoded(payload: &[u8], uncompressed_len: Option<usize>, sc: bool) -> BytesMut {
    let mut b = BytesMut::new();
    match uncompressed_len {
        None => segment::encode(&mut b, payload, sc).unwrap(),
        Some(u) => segment::encode_compressed(&mut b, payload, u, sc).unwrap(),
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn round_trip(
        payload in vec(any::<u8>(), 0..2048),
        compressed in any::<bool>(),
        uncompressed_len in 0..=MAX_PAYLOAD_LEN,
        sc in any::<bool>(),
        trailing in vec(any::<u8>(), 0..16),
    ) {
        let ul = compressed.then_some(uncompressed_len);
        let mut b = encoded(&payload, ul, sc);
        let whole = b.len();
        b.extend_from_slice(&trailing);
        let s = segment::decode(&b, compressed).unwrap().unwrap();
        prop_assert_eq!(s.payload, &payload[..]);
        prop_assert_eq!(s.len, whole);
        prop_assert_eq!(s.header.self_contained, sc);
        prop_assert_eq!(s.header.payload_len, payload.len());
        prop_assert_eq!(s.header.uncompressed_len, ul.unwrap_or(0));
        for cut in 0..whole {
            prop_assert_eq!(segment::decode(&b[..cut], compressed), Ok(None));
        }
    }

    #[test]
    fn a_flipped_bit_is_caught(
        payload in vec(any::<u8>(), 0..512),
        compressed in any::<bool>(),
        sc in any::<bool>(),
        bit in any::<prop::sample::Index>(),
    ) {
        let ul = compressed.then_some(payload.len());
        let mut b = encoded(&payload, ul, sc);
        let i = bit.index(b.len() * 8);
        b[i / 8] ^= 1 << (i % 8);
        match segment::decode(&b, compressed) {
            // The header is checked before its length is believed, so a flip
            // in the lengths is a header error, never a wait for more bytes.
            Err(SegmentError::HeaderChecksum { .. } | SegmentError::PayloadChecksum { .. }) => {}
            other => prop_assert!(false, "flip of bit {} not caught: {:?}", i, other),
        }
    }
}
