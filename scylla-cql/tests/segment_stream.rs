//! Protocol v5 framing of whole streams (`frame::segment_stream`): random
//! envelope sequences (bodies up to ~300 KiB, so large envelopes cross
//! segment boundaries), compressed or not, encoded and fed to the decoder in
//! random pieces come back whole and in order; the encoder keeps the framing
//! rules; random and corrupted input never panics, and a corrupted stream
//! never yields an envelope that differs from the one sent.
#![allow(clippy::unwrap_used, missing_docs)]

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use scylla_driver_cql::frame::segment::{self, SegmentError, MAX_PAYLOAD_LEN};
use scylla_driver_cql::frame::segment_stream::{SegmentDecoder, SegmentEncoder};

/// What an envelope's body looks like.
#[derive(Debug, Clone, Copy)]
enum Content {
    /// Repeated text: LZ4 shrinks it.
    Text,
    /// Pseudo-random: LZ4 cannot.
    Noise,
}

#[derive(Debug, Clone)]
struct EnvelopeSpec {
    stream: i16,
    body_len: usize,
    content: Content,
    seed: u64,
}

impl EnvelopeSpec {
    fn bytes(&self) -> Vec<u8> {
        let mut e = vec![0x05, 0];
        e.extend_from_slice(&self.stream.to_be_bytes());
        e.push(0x07);
        e.extend_from_slice(&(self.body_len as u32).to_be_bytes());
        match self.content {
            Content::Text => {
                let text = format!("row {} of stream {}; ", self.seed % 1000, self.stream);
                e.extend(text.bytes().cycle().take(self.body_len));
            }
            Content::Noise => {
                let mut x = self.seed | 1;
                e.extend((0..self.body_len).map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                }));
            }
        }
        e
    }
}

fn envelope_spec(max_large: usize) -> impl Strategy<Value = EnvelopeSpec> {
    let body_len = prop_oneof![
        6 => 0..200usize,
        3 => 200..20_000usize,
        1 => 100_000..max_large,
    ];
    let content = prop_oneof![Just(Content::Text), Just(Content::Noise)];
    (any::<i16>(), body_len, content, any::<u64>()).prop_map(|(stream, body_len, content, seed)| {
        EnvelopeSpec {
            stream,
            body_len,
            content,
            seed,
        }
    })
}

/// Piece sizes the socket hands the reader: tiny to several segments.
fn pieces() -> impl Strategy<Value = Vec<usize>> {
    vec(
        prop_oneof![1..16usize, 16..4096usize, 4096..300_000usize],
        1..6,
    )
}

/// Feeds `stream` to `dec` in pieces of the given sizes (cycled), draining
/// after each; returns the envelopes handed out and the first error.
fn feed(
    dec: &mut SegmentDecoder,
    stream: &[u8],
    pieces: &[usize],
) -> (Vec<Bytes>, Option<SegmentError>, BytesMut) {
    let mut raw = BytesMut::new();
    let mut got = vec![];
    let mut offset = 0;
    for &piece in pieces.iter().cycle() {
        let end = (offset + piece).min(stream.len());
        raw.extend_from_slice(&stream[offset..end]);
        offset = end;
        // Bounded: each call takes a segment off `raw` or hands out a
        // pending envelope, or ends the inner loop.
        loop {
            match dec.decode_next(&mut raw) {
                Ok(Some(e)) => got.push(e),
                Ok(None) => break,
                Err(e) => return (got, Some(e), raw),
            }
        }
        if offset == stream.len() {
            break;
        }
    }
    (got, None, raw)
}

fn encode(compressed: bool, envelopes: &[Vec<u8>]) -> BytesMut {
    let mut enc = SegmentEncoder::new(compressed);
    let mut out = BytesMut::new();
    enc.encode_envelopes(&envelopes.concat(), &mut out).unwrap();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn round_trip(
        specs in vec(envelope_spec(300_000), 0..10),
        compressed in any::<bool>(),
        pieces in pieces(),
    ) {
        let envelopes: Vec<Vec<u8>> = specs.iter().map(EnvelopeSpec::bytes).collect();
        let input = envelopes.concat();
        let enc = SegmentEncoder::new(compressed);
        let stream = encode(compressed, &envelopes);
        prop_assert!(stream.len() <= enc.encoded_len_bound(input.len()));

        // The framing rules, checked with the single-segment codec: payloads
        // (uncompressed) within the maximum; a run of segments that are not
        // self-contained holds one envelope, every part full but the last.
        let mut rest = &stream[..];
        let mut parts = vec![];
        let mut payloads = vec![];
        while !rest.is_empty() {
            let s = segment::decode(rest, compressed).unwrap().unwrap();
            let data = if s.header.uncompressed_len == 0 {
                s.payload.to_vec()
            } else {
                prop_assert!(s.payload.len() < s.header.uncompressed_len);
                lz4_flex::block::decompress(s.payload, s.header.uncompressed_len).unwrap()
            };
            prop_assert!(!data.is_empty() && data.len() <= MAX_PAYLOAD_LEN);
            if s.header.self_contained {
                prop_assert!(parts.is_empty());
                payloads.push(data);
            } else {
                parts.push(data);
                let whole: usize = parts.iter().map(Vec::len).sum();
                let envelope_len = 9 + u32::from_be_bytes(parts[0][5..9].try_into().unwrap()) as usize;
                if whole == envelope_len {
                    prop_assert!(envelope_len > MAX_PAYLOAD_LEN);
                    let (last, full) = parts.split_last().unwrap();
                    prop_assert!(full.iter().all(|p| p.len() == MAX_PAYLOAD_LEN));
                    prop_assert!(!last.is_empty());
                    payloads.push(parts.concat());
                    parts.clear();
                }
            }
            rest = &rest[s.len..];
        }
        prop_assert!(parts.is_empty());
        prop_assert_eq!(payloads.concat(), input);

        let mut dec = SegmentDecoder::new(compressed, 400_000);
        let (got, err, raw) = feed(&mut dec, &stream, &pieces);
        prop_assert_eq!(err, None);
        prop_assert!(raw.is_empty());
        prop_assert_eq!(dec.partial_envelope_len(), 0);
        prop_assert_eq!(got.len(), envelopes.len());
        for (g, e) in got.iter().zip(&envelopes) {
            prop_assert!(g[..] == e[..]);
        }
    }

    /// Well-formed segments (checksums right) around random payloads,
    /// lengths and flags: the decoder reports errors, never panics.
    #[test]
    fn random_segments_never_panic(
        segs in vec((vec(any::<u8>(), 0..300), any::<bool>(), 0..400usize), 0..12),
        compressed in any::<bool>(),
        max in 0..1000usize,
        pieces in pieces(),
    ) {
        let mut stream = BytesMut::new();
        for (payload, sc, ul) in &segs {
            if compressed {
                segment::encode_compressed(&mut stream, payload, *ul, *sc).unwrap();
            } else {
                segment::encode(&mut stream, payload, *sc).unwrap();
            }
        }
        let mut dec = SegmentDecoder::new(compressed, max);
        let (got, _err, _raw) = feed(&mut dec, &stream, &pieces);
        for e in got {
            prop_assert!(e.len() >= 9 && e.len() <= max);
        }
    }

    #[test]
    fn random_bytes_never_panic(
        bytes in vec(any::<u8>(), 0..4096),
        compressed in any::<bool>(),
        max in 0..100_000usize,
        pieces in pieces(),
    ) {
        let mut dec = SegmentDecoder::new(compressed, max);
        let _ = feed(&mut dec, &bytes, &pieces);
    }

    /// One byte changed anywhere: an error (a checksum catches it), and
    /// every envelope handed out before it is the one sent at that place.
    #[test]
    fn a_changed_byte_never_yields_a_wrong_envelope(
        specs in vec(envelope_spec(150_000), 1..6),
        compressed in any::<bool>(),
        at in any::<prop::sample::Index>(),
        xor in 1..=255u8,
        pieces in pieces(),
    ) {
        let envelopes: Vec<Vec<u8>> = specs.iter().map(EnvelopeSpec::bytes).collect();
        let mut stream = encode(compressed, &envelopes).to_vec();
        let i = at.index(stream.len());
        stream[i] ^= xor;
        let mut dec = SegmentDecoder::new(compressed, 400_000);
        let (got, err, _raw) = feed(&mut dec, &stream, &pieces);
        prop_assert!(err.is_some(), "change at {} of {} not caught", i, stream.len());
        prop_assert!(got.len() < envelopes.len());
        for (g, e) in got.iter().zip(&envelopes) {
            prop_assert!(g[..] == e[..]);
        }
    }

    /// A stream cut anywhere: no error, the envelopes of the segments that
    /// arrived whole, and the rest waits in the buffer.
    #[test]
    fn a_cut_stream_yields_a_prefix(
        specs in vec(envelope_spec(150_000), 1..6),
        compressed in any::<bool>(),
        at in any::<prop::sample::Index>(),
        pieces in pieces(),
    ) {
        let envelopes: Vec<Vec<u8>> = specs.iter().map(EnvelopeSpec::bytes).collect();
        let stream = encode(compressed, &envelopes);
        let cut = at.index(stream.len() + 1);
        let mut dec = SegmentDecoder::new(compressed, 400_000);
        let (got, err, raw) = feed(&mut dec, &stream[..cut], &pieces);
        prop_assert_eq!(err, None);
        prop_assert!(got.len() <= envelopes.len());
        prop_assert_eq!(got.len() == envelopes.len(), cut == stream.len());
        for (g, e) in got.iter().zip(&envelopes) {
            prop_assert!(g[..] == e[..]);
        }
        // What is left is less than one segment.
        prop_assert!(raw.len() < dec.needed(&raw) || raw.is_empty());
    }
}
