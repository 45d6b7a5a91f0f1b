//! Unit tests of the stream codec: packing rules, every error, zero-copy.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::frame::segment::decode;

/// An envelope: v5 response header (stream, RESULT opcode) and `body`.
fn envelope(stream: i16, body: &[u8]) -> Vec<u8> {
    let mut e = vec![0x85, 0];
    e.extend_from_slice(&stream.to_be_bytes());
    e.push(0x08);
    e.extend_from_slice(&(body.len() as u32).to_be_bytes());
    e.extend_from_slice(body);
    e
}

/// A body of `len` bytes no compressor can shrink (xorshift).
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    seed |= 1;
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

fn encode_all(compressed: bool, envelopes: &[u8]) -> BytesMut {
    let mut out = BytesMut::new();
    SegmentEncoder::new(compressed)
        .encode_envelopes(envelopes, &mut out)
        .unwrap();
    out
}

/// Every segment of `stream`, decoded with the single-segment codec:
/// (self-contained, payload length, uncompressed length).
fn segments(stream: &[u8], compressed: bool) -> Vec<(bool, usize, usize)> {
    let mut rest = stream;
    let mut out = vec![];
    while !rest.is_empty() {
        let s = decode(rest, compressed).unwrap().unwrap();
        out.push((
            s.header.self_contained,
            s.header.payload_len,
            s.header.uncompressed_len,
        ));
        rest = &rest[s.len..];
    }
    out
}

/// Decodes all of `raw`, expecting no error and no leftover.
fn decode_all(dec: &mut SegmentDecoder, mut raw: BytesMut) -> Vec<Bytes> {
    let mut out = vec![];
    while let Some(e) = dec.decode_next(&mut raw).unwrap() {
        out.push(e);
    }
    assert!(raw.is_empty(), "{} bytes left", raw.len());
    out
}

fn decode_err(compressed: bool, max: usize, raw: &[u8]) -> SegmentError {
    let mut dec = SegmentDecoder::new(compressed, max);
    let mut raw = BytesMut::from(raw);
    loop {
        match dec.decode_next(&mut raw) {
            Ok(Some(_)) => {}
            Ok(None) => panic!("no error"),
            Err(e) => {
                // Sticky.
                assert_eq!(dec.decode_next(&mut raw), Err(e.clone()));
                assert_eq!(dec.needed(&raw), 0);
                return e;
            }
        }
    }
}

#[test]
fn two_small_envelopes_make_one_self_contained_segment() {
    let a = envelope(1, b"hello");
    let b = envelope(2, b"");
    let both = [a.clone(), b.clone()].concat();
    for compressed in [false, true] {
        let out = encode_all(compressed, &both);
        let s = decode(&out, compressed).unwrap().unwrap();
        assert_eq!(s.len, out.len());
        assert!(s.header.self_contained);
        assert_eq!(s.payload, &both[..]);
        // Too short to be worth compressing: sent as is.
        assert_eq!(s.header.uncompressed_len, 0);
        let got = decode_all(&mut SegmentDecoder::new(compressed, 1 << 20), out);
        assert_eq!(got, [a.clone(), b.clone()]);
    }
    // Uncompressed header: length 23, self-contained bit 17, little-endian.
    assert_eq!(&encode_all(false, &both)[..3], &[23, 0, 2]);
}

#[test]
fn greedy_packing_and_exact_fit() {
    // Two envelopes filling a segment exactly, then one byte more.
    let first = envelope(1, &noise(1000, 1));
    let second = envelope(2, &noise(MAX_PAYLOAD_LEN - first.len() - 9, 2));
    let exact = [first.clone(), second.clone()].concat();
    assert_eq!(exact.len(), MAX_PAYLOAD_LEN);
    assert_eq!(
        segments(&encode_all(false, &exact), false),
        [(true, MAX_PAYLOAD_LEN, 0)]
    );
    let third = envelope(3, &[7]);
    let more = [exact.clone(), third.clone()].concat();
    assert_eq!(
        segments(&encode_all(false, &more), false),
        [(true, MAX_PAYLOAD_LEN, 0), (true, 10, 0)]
    );
    // A single envelope of exactly the maximum is self-contained.
    let max = envelope(4, &noise(MAX_PAYLOAD_LEN - 9, 4));
    assert_eq!(
        segments(&encode_all(false, &max), false),
        [(true, MAX_PAYLOAD_LEN, 0)]
    );
}

#[test]
fn large_envelope_gets_its_own_run() {
    let small = envelope(1, b"x");
    let large = envelope(2, &noise(2 * MAX_PAYLOAD_LEN + 5 - 9 + 1, 3));
    assert_eq!(large.len(), 2 * MAX_PAYLOAD_LEN + 6);
    let input = [small.clone(), large.clone(), small.clone()].concat();
    let out = encode_all(false, &input);
    assert_eq!(
        segments(&out, false),
        [
            (true, 10, 0),
            (false, MAX_PAYLOAD_LEN, 0),
            (false, MAX_PAYLOAD_LEN, 0),
            (false, 6, 0),
            (true, 10, 0),
        ]
    );
    assert!(out.len() <= SegmentEncoder::new(false).encoded_len_bound(input.len()));
    let mut dec = SegmentDecoder::new(false, large.len());
    let got = decode_all(&mut dec, out);
    assert_eq!(got, [small.clone(), large, small]);
    assert_eq!(dec.partial_envelope_len(), 0);
}

#[test]
fn compression_only_when_it_pays() {
    let text = b"SELECT name, value FROM ks.table WHERE id = ? ".repeat(100);
    let compressible = envelope(1, &text);
    let out = encode_all(true, &compressible);
    let segs = segments(&out, true);
    assert_eq!(segs.len(), 1);
    let (sc, payload_len, uncompressed_len) = segs[0];
    assert!(sc);
    assert_eq!(uncompressed_len, compressible.len());
    assert!(payload_len < compressible.len() / 4, "{payload_len}");
    // Incompressible: sent as is.
    let random = envelope(2, &noise(5000, 9));
    let out2 = encode_all(true, &random);
    assert_eq!(segments(&out2, true), [(true, random.len(), 0)]);
    // Large and compressible: each part compressed on its own, within the
    // 17-bit uncompressed length.
    let large = envelope(3, &text.repeat(100));
    let out3 = encode_all(true, &large);
    let segs = segments(&out3, true);
    assert_eq!(segs.len(), large.len().div_ceil(MAX_PAYLOAD_LEN));
    for (i, &(sc, payload_len, ul)) in segs.iter().enumerate() {
        assert!(!sc);
        assert!(payload_len < ul);
        if i + 1 < segs.len() {
            assert_eq!(ul, MAX_PAYLOAD_LEN);
        }
    }
    let all = [out, out2, out3].concat();
    let got = decode_all(
        &mut SegmentDecoder::new(true, 1 << 24),
        BytesMut::from(&all[..]),
    );
    assert_eq!(got, [compressible, random, large]);
}

#[test]
fn encoder_rejects_a_partial_envelope_and_restores_out() {
    let whole = envelope(1, b"abcdef");
    let mut enc = SegmentEncoder::new(false);
    for (input, offset, needed, available) in [
        ([&whole[..], &whole[..4]].concat(), whole.len(), 9, 4),
        ([&whole[..], &whole[..12]].concat(), whole.len(), 15, 12),
        (whole[..14].to_vec(), 0, 15, 14),
        // A large envelope cut short: nothing of it may be sent.
        (
            envelope(2, &[0; 200_000])[..150_000].to_vec(),
            0,
            200_009,
            150_000,
        ),
    ] {
        let mut out = BytesMut::from(&b"earlier"[..]);
        assert_eq!(
            enc.encode_envelopes(&input, &mut out),
            Err(SegmentError::PartialEnvelope {
                offset,
                needed,
                available
            })
        );
        assert_eq!(&out[..], b"earlier");
    }
    // Nothing in, nothing out.
    let mut out = BytesMut::new();
    enc.encode_envelopes(&[], &mut out).unwrap();
    assert!(out.is_empty());
}

#[test]
fn uncompressed_envelopes_share_the_read_buffer() {
    let input = [envelope(1, b"one"), envelope(2, b"two")].concat();
    let raw = encode_all(false, &input);
    let range = raw.as_ptr() as usize..raw.as_ptr() as usize + raw.len();
    let got = decode_all(&mut SegmentDecoder::new(false, 1000), raw);
    assert_eq!(got.len(), 2);
    for e in got {
        assert!(range.contains(&(e.as_ptr() as usize)));
    }
}

#[test]
fn fed_byte_by_byte_with_needed() {
    let input = [
        envelope(1, b"one"),
        envelope(2, &noise(300_000, 5)),
        envelope(3, b"three"),
    ]
    .concat();
    for compressed in [false, true] {
        let stream = encode_all(compressed, &input);
        let mut dec = SegmentDecoder::new(compressed, 1 << 20);
        let mut raw = BytesMut::new();
        let mut got = vec![];
        for &b in stream.iter() {
            raw.extend_from_slice(&[b]);
            let len_before = raw.len();
            let short = len_before < dec.needed(&raw);
            while let Some(e) = dec.decode_next(&mut raw).unwrap() {
                got.push(e);
            }
            // Short: nothing could be taken; else the segment was.
            assert_eq!(raw.len() == len_before, short);
        }
        assert!(raw.is_empty());
        assert_eq!(got.concat(), input);
        assert_eq!(got.len(), 3);
    }
    let dec = SegmentDecoder::new(false, 100);
    assert_eq!(dec.needed(&[]), 6);
    let one = encode_all(false, &envelope(1, b"abc"));
    assert_eq!(dec.needed(&one[..6]), one.len());
    assert_eq!(SegmentDecoder::new(true, 100).needed(&[]), 8);
}

#[test]
fn envelope_too_large_in_a_self_contained_segment() {
    let e = envelope(1, &[0; 100]);
    let raw = encode_all(false, &[envelope(0, b""), e].concat());
    assert_eq!(
        decode_err(false, 108, &raw),
        SegmentError::EnvelopeTooLarge { len: 109, max: 108 }
    );
    // The first envelope is not handed out either: the segment is checked
    // as a whole.
    let mut dec = SegmentDecoder::new(false, 108);
    assert!(dec.decode_next(&mut BytesMut::from(&raw[..])).is_err());
}

#[test]
fn envelope_too_large_is_caught_at_its_first_segment() {
    // The header announces 4 GiB: refused after the first segment, and
    // nothing near that size is allocated.
    let mut header = envelope(1, b"");
    header[5..9].copy_from_slice(&u32::MAX.to_be_bytes());
    let mut raw = BytesMut::new();
    segment::encode(&mut raw, &[header.clone(), vec![0; 1000]].concat(), false).unwrap();
    let mut dec = SegmentDecoder::new(false, 1 << 20);
    assert_eq!(
        dec.decode_next(&mut raw),
        Err(SegmentError::EnvelopeTooLarge {
            len: u64::from(u32::MAX) + 9,
            max: 1 << 20
        })
    );
    // A header split over two segments is checked once whole.
    let mut raw = BytesMut::new();
    segment::encode(&mut raw, &header[..4], false).unwrap();
    segment::encode(&mut raw, &header[4..], false).unwrap();
    let mut dec = SegmentDecoder::new(false, 1 << 20);
    assert!(matches!(
        dec.decode_next(&mut raw),
        Err(SegmentError::EnvelopeTooLarge { .. })
    ));
}

#[test]
fn self_contained_segment_ending_mid_envelope() {
    let e = envelope(1, b"abcdef");
    for (payload, offset, needed, available) in [
        (e[..10].to_vec(), 0, 15, 10),
        (e[..5].to_vec(), 0, 9, 5),
        ([&e[..], &e[..3]].concat(), 15, 9, 3),
    ] {
        for compressed in [false, true] {
            let mut raw = BytesMut::new();
            if compressed {
                segment::encode_compressed(&mut raw, &payload, 0, true).unwrap();
            } else {
                segment::encode(&mut raw, &payload, true).unwrap();
            }
            assert_eq!(
                decode_err(compressed, 1000, &raw),
                SegmentError::SegmentEndsMidEnvelope {
                    offset,
                    needed,
                    available
                }
            );
        }
    }
}

#[test]
fn empty_segments() {
    for sc in [true, false] {
        let mut raw = BytesMut::new();
        segment::encode(&mut raw, b"", sc).unwrap();
        assert_eq!(
            decode_err(false, 1000, &raw),
            SegmentError::EmptySegment { self_contained: sc }
        );
    }
}

#[test]
fn self_contained_segment_inside_a_run() {
    let large = envelope(1, &noise(200_000, 1));
    let stream = encode_all(false, &large);
    let first_len = decode(&stream, false).unwrap().unwrap().len;
    let mut raw = BytesMut::from(&stream[..first_len]);
    raw.extend_from_slice(&encode_all(false, &envelope(2, b"x")));
    assert_eq!(
        decode_err(false, 1 << 20, &raw),
        SegmentError::UnexpectedSelfContained {
            received: MAX_PAYLOAD_LEN
        }
    );
}

#[test]
fn run_with_extra_bytes() {
    // A run for a 200-byte envelope carrying 150 + 100 bytes.
    let e = envelope(1, &[1; 191]);
    let mut raw = BytesMut::new();
    segment::encode(&mut raw, &e[..150], false).unwrap();
    segment::encode(&mut raw, &[e[150..].to_vec(), vec![0; 50]].concat(), false).unwrap();
    assert_eq!(
        decode_err(false, 1000, &raw),
        SegmentError::ExtraBytesInRun {
            envelope_len: 200,
            received: 250
        }
    );
    // The envelope and more in the first part already.
    let mut raw = BytesMut::new();
    segment::encode(&mut raw, &[e.clone(), vec![0; 3]].concat(), false).unwrap();
    assert_eq!(
        decode_err(false, 1000, &raw),
        SegmentError::ExtraBytesInRun {
            envelope_len: 200,
            received: 203
        }
    );
    // A run of exactly one segment holding one envelope is accepted.
    let mut raw = BytesMut::new();
    segment::encode(&mut raw, &e, false).unwrap();
    let got = decode_all(&mut SegmentDecoder::new(false, 1000), raw);
    assert_eq!(got, [e]);
}

#[test]
fn corrupt_compressed_payloads() {
    let e = envelope(1, &b"abcd".repeat(50));
    let block = lz4_flex::block::compress(&e);
    for sc in [true, false] {
        // Announced longer than the block decompresses to.
        let mut raw = BytesMut::new();
        segment::encode_compressed(&mut raw, &block, e.len() + 1, sc).unwrap();
        assert!(matches!(
            decode_err(true, 1000, &raw),
            SegmentError::Decompression(_)
        ));
        // Announced shorter: the block overflows its output.
        let mut raw = BytesMut::new();
        segment::encode_compressed(&mut raw, &block, e.len() - 1, sc).unwrap();
        assert!(matches!(
            decode_err(true, 1000, &raw),
            SegmentError::Decompression(_)
        ));
        // Not LZ4 at all (a match offset pointing before the start).
        let mut raw = BytesMut::new();
        segment::encode_compressed(&mut raw, &[0x0f, 0xff, 0xff, 0xff], 100, sc).unwrap();
        assert!(matches!(
            decode_err(true, 1000, &raw),
            SegmentError::Decompression(_)
        ));
        // And the right length decodes.
        let mut raw = BytesMut::new();
        segment::encode_compressed(&mut raw, &block, e.len(), sc).unwrap();
        let got = decode_all(&mut SegmentDecoder::new(true, 1000), raw);
        assert_eq!(got, std::slice::from_ref(&e));
    }
}

#[test]
fn checksum_errors_pass_through() {
    let stream = encode_all(false, &envelope(1, b"abc"));
    let mut bad = stream.to_vec();
    bad[1] ^= 0x40;
    assert!(matches!(
        decode_err(false, 1000, &bad),
        SegmentError::HeaderChecksum { .. }
    ));
    let mut bad = stream.to_vec();
    bad[8] ^= 1;
    assert!(matches!(
        decode_err(false, 1000, &bad),
        SegmentError::PayloadChecksum { .. }
    ));
}

#[test]
fn encoded_len_bound_holds_for_the_worst_packing() {
    // Large envelopes of MAX + 1 bytes separated by tiny ones: three
    // segments per ~MAX bytes, the densest framing greedy packing makes.
    let large = envelope(1, &[0; MAX_PAYLOAD_LEN + 1 - 9]);
    let tiny = envelope(2, b"");
    let input = [large.clone(), tiny.clone()].concat().repeat(5);
    for compressed in [false, true] {
        let enc = SegmentEncoder::new(compressed);
        let out = encode_all(compressed, &input);
        assert_eq!(segments(&out, compressed).len(), 15);
        assert!(out.len() <= enc.encoded_len_bound(input.len()));
    }
}
