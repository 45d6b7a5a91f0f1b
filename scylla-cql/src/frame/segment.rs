//! Protocol v5 framing (`native_protocol_v5.spec`, section 2): after the
//! handshake, envelopes travel inside *segments*, each a little-endian header
//! protected by a CRC24, a payload of at most 128 KiB - 1, and a CRC32 of the
//! payload.
//!
//! ```text
//! uncompressed: [payload_len:17 | self_contained:1 | pad:6] (3 bytes) [crc24] (3 bytes)
//! compressed:   [compressed_len:17 | uncompressed_len:17 | self_contained:1 | pad:5] (5 bytes) [crc24] (3 bytes)
//! then:         payload, [crc32 of payload] (4 bytes)
//! ```
//!
//! A self-contained segment holds whole envelopes; a large envelope is cut
//! into a sequence of segments that are not self-contained. In the compressed
//! format an uncompressed length of 0 means the payload was sent as is. This
//! module codes one segment; packing envelopes into segments and taking them
//! back out of a byte stream is [`segment_stream`](super::segment_stream)'s.
//!
//! Both checksums are Cassandra's: the CRC24 starts at 0x875060 with the
//! polynomial 0x1974F0B, fed the header's bytes least significant first; the
//! CRC32 is zlib's (IEEE) with the four bytes `FA 2D 55 CA` fed before the
//! payload. The spec text gives the CRC24 parameters only; the CRC32's
//! initial bytes come from what servers and the Python driver do, and the
//! known-answer tests below are segments that driver encoded. Lengths are
//! checked before anything is allocated, and a payload is handed out only
//! after its CRC32 matched.

use bytes::{BufMut, BytesMut};

/// Largest payload of one segment.
pub const MAX_PAYLOAD_LEN: usize = 128 * 1024 - 1;
/// Header length without compression (before its CRC24).
pub const HEADER_LEN: usize = 3;
/// Header length with compression (before its CRC24).
pub const COMPRESSED_HEADER_LEN: usize = 5;
const CRC24_LEN: usize = 3;
const CRC32_LEN: usize = 4;
const CRC24_INIT: u32 = 0x0087_5060;
const CRC24_POLY: u32 = 0x0197_4F0B;
const CRC32_INITIAL_BYTES: [u8; 4] = [0xFA, 0x2D, 0x55, 0xCA];

/// Why a segment could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    /// The header's CRC24 does not match: its lengths cannot be trusted.
    #[error("segment header checksum mismatch (received {received:06x}, computed {computed:06x})")]
    HeaderChecksum {
        /// The CRC24 sent.
        received: u32,
        /// The CRC24 of the header as received.
        computed: u32,
    },
    /// The payload's CRC32 does not match.
    #[error(
        "segment payload checksum mismatch (received {received:08x}, computed {computed:08x})"
    )]
    PayloadChecksum {
        /// The CRC32 sent.
        received: u32,
        /// The CRC32 of the payload as received.
        computed: u32,
    },
    /// A payload longer than a segment may carry (encoding only: 17 bits
    /// cannot say more when decoding).
    #[error("segment payload of {0} bytes exceeds the maximum of {MAX_PAYLOAD_LEN}")]
    TooLong(usize),
    /// Encoding: the bytes given as whole envelopes end inside an envelope
    /// (its 9-byte header or its body).
    #[error(
        "envelope at offset {offset} needs {needed} bytes but only {available} remain: \
         the input does not end on an envelope boundary"
    )]
    PartialEnvelope {
        /// Where the envelope starts in the input.
        offset: usize,
        /// Its length (header and body), or the header length when even the
        /// header is cut.
        needed: u64,
        /// Bytes left from `offset` to the end of the input.
        available: usize,
    },
    /// Decoding: an envelope (9-byte header and body) longer than the
    /// decoder accepts; checked before its bytes are accumulated.
    #[error("envelope of {len} bytes exceeds the maximum of {max}")]
    EnvelopeTooLarge {
        /// The envelope's length from its header (body length + 9).
        len: u64,
        /// The decoder's limit.
        max: usize,
    },
    /// Decoding: a self-contained segment whose payload ends inside an
    /// envelope (self-contained segments hold whole envelopes only).
    #[error(
        "self-contained segment ends inside an envelope at payload offset {offset} \
         ({needed} bytes needed, {available} left)"
    )]
    SegmentEndsMidEnvelope {
        /// Where the cut envelope starts in the (uncompressed) payload.
        offset: usize,
        /// The envelope's length, or the header length when even its header
        /// is cut.
        needed: u64,
        /// Bytes left in the payload from `offset`.
        available: usize,
    },
    /// Decoding: a segment with an empty payload (a self-contained one must
    /// hold at least one envelope, a part of a large envelope at least one
    /// byte of it).
    #[error("segment with an empty payload (self-contained: {self_contained})")]
    EmptySegment {
        /// The segment's self-contained flag.
        self_contained: bool,
    },
    /// Decoding: a self-contained segment arrived while the segments of a
    /// large envelope were still being received.
    #[error(
        "self-contained segment received in the middle of a large envelope \
         ({received} bytes of it received so far)"
    )]
    UnexpectedSelfContained {
        /// Bytes of the large envelope received before it.
        received: usize,
    },
    /// Decoding: the segments of a large envelope carry more bytes than the
    /// envelope's header announces (each such run holds one envelope only).
    #[error(
        "segments of a large envelope carry {received} bytes, more than the \
         envelope's {envelope_len}"
    )]
    ExtraBytesInRun {
        /// The envelope's length from its header.
        envelope_len: usize,
        /// Bytes the run carried up to and including the offending segment.
        received: usize,
    },
    /// Decoding: a compressed payload could not be decompressed to the
    /// length its header announces.
    #[error("LZ4 segment payload: {0}")]
    Decompression(&'static str),
}

/// A decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Length of the payload as sent (compressed, if it was).
    pub payload_len: usize,
    /// With compression: the payload's length before compression, or 0
    /// when it was sent uncompressed. Always 0 without compression.
    pub uncompressed_len: usize,
    /// Whether the payload holds whole envelopes only.
    pub self_contained: bool,
}

/// One segment found in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment<'a> {
    /// Its header.
    pub header: SegmentHeader,
    /// The payload as sent, its CRC32 verified.
    pub payload: &'a [u8],
    /// Bytes the whole segment took in the buffer.
    pub len: usize,
}

/// Cassandra's CRC24 of the `len` low bytes of `value`, least significant
/// byte first. Table-driven (a byte per step instead of a bit: every segment
/// header is checked on reading and stamped on writing); `len` is at most 8.
pub fn crc24(mut value: u64, len: usize) -> u32 {
    let mut crc = CRC24_INIT;
    for _ in 0..len.min(8) {
        let index = ((crc >> 16) ^ (value as u32 & 0xFF)) & 0xFF;
        crc = ((crc << 8) & 0x00FF_FFFF) ^ CRC24_TABLE[index as usize];
        value >>= 8;
    }
    crc
}

/// The CRC24 of each byte value on its own (shifted to the top of the
/// register, then eight steps of the polynomial).
const CRC24_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut b = 0;
    while b < 256 {
        let mut crc = (b as u32) << 16;
        let mut bit = 0;
        while bit < 8 {
            crc <<= 1;
            if crc & 0x0100_0000 != 0 {
                crc ^= CRC24_POLY;
            }
            bit += 1;
        }
        table[b] = crc & 0x00FF_FFFF;
        b += 1;
    }
    table
};

/// The CRC32 of a segment payload (zlib's CRC32 after the initial bytes).
pub fn crc32(payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&CRC32_INITIAL_BYTES);
    h.update(payload);
    h.finalize()
}

fn put_uint_le(buf: &mut BytesMut, v: u64, len: usize) {
    buf.put_slice(&v.to_le_bytes()[..len]);
}

fn uint_le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// Appends one uncompressed segment carrying `payload`.
pub fn encode(
    buf: &mut BytesMut,
    payload: &[u8],
    self_contained: bool,
) -> Result<(), SegmentError> {
    if payload.len() > MAX_PAYLOAD_LEN {
        return Err(SegmentError::TooLong(payload.len()));
    }
    let header = payload.len() as u64 | u64::from(self_contained) << 17;
    buf.reserve(HEADER_LEN + CRC24_LEN + payload.len() + CRC32_LEN);
    put_uint_le(buf, header, HEADER_LEN);
    put_uint_le(buf, u64::from(crc24(header, HEADER_LEN)), CRC24_LEN);
    buf.put_slice(payload);
    buf.put_u32_le(crc32(payload));
    Ok(())
}

/// Appends one segment in the compressed format: `payload` as sent (LZ4
/// block data, or the plain bytes when `uncompressed_len` is 0) and the
/// length it decompresses to.
pub fn encode_compressed(
    buf: &mut BytesMut,
    payload: &[u8],
    uncompressed_len: usize,
    self_contained: bool,
) -> Result<(), SegmentError> {
    if payload.len() > MAX_PAYLOAD_LEN {
        return Err(SegmentError::TooLong(payload.len()));
    }
    if uncompressed_len > MAX_PAYLOAD_LEN {
        return Err(SegmentError::TooLong(uncompressed_len));
    }
    let header =
        payload.len() as u64 | (uncompressed_len as u64) << 17 | u64::from(self_contained) << 34;
    buf.reserve(COMPRESSED_HEADER_LEN + CRC24_LEN + payload.len() + CRC32_LEN);
    put_uint_le(buf, header, COMPRESSED_HEADER_LEN);
    put_uint_le(
        buf,
        u64::from(crc24(header, COMPRESSED_HEADER_LEN)),
        CRC24_LEN,
    );
    buf.put_slice(payload);
    buf.put_u32_le(crc32(payload));
    Ok(())
}

/// Decodes the segment at the start of `buf` (`compressed`: the connection
/// negotiated LZ4). `Ok(None)` when more bytes are needed; the header is
/// verified before its length is believed, the payload before it is
/// returned.
pub fn decode(buf: &[u8], compressed: bool) -> Result<Option<Segment<'_>>, SegmentError> {
    let Some(header) = decode_header(buf, compressed)? else {
        return Ok(None);
    };
    let start = header_and_crc_len(compressed);
    let len = start + header.payload_len + CRC32_LEN;
    let Some(rest) = buf.get(start..len) else {
        return Ok(None);
    };
    let (payload, trailer) = rest.split_at(header.payload_len);
    let received = uint_le(trailer) as u32;
    let computed = crc32(payload);
    if received != computed {
        return Err(SegmentError::PayloadChecksum { received, computed });
    }
    Ok(Some(Segment {
        header,
        payload,
        len,
    }))
}

/// Bytes a segment takes before its payload: the header and its CRC24.
pub const fn header_and_crc_len(compressed: bool) -> usize {
    if compressed {
        COMPRESSED_HEADER_LEN + CRC24_LEN
    } else {
        HEADER_LEN + CRC24_LEN
    }
}

/// Bytes a segment takes after its payload (the CRC32).
pub const TRAILER_LEN: usize = CRC32_LEN;

/// Decodes and verifies (CRC24) only the header of the segment at the start
/// of `buf`; `Ok(None)` when `buf` is shorter than a header. The whole
/// segment then takes `header_and_crc_len(compressed) + payload_len +`
/// [`TRAILER_LEN`] bytes.
pub fn decode_header(buf: &[u8], compressed: bool) -> Result<Option<SegmentHeader>, SegmentError> {
    let header_len = if compressed {
        COMPRESSED_HEADER_LEN
    } else {
        HEADER_LEN
    };
    let Some(head) = buf.get(..header_len + CRC24_LEN) else {
        return Ok(None);
    };
    let raw = uint_le(&head[..header_len]);
    let received = uint_le(&head[header_len..]) as u32;
    let computed = crc24(raw, header_len);
    if received != computed {
        return Err(SegmentError::HeaderChecksum { received, computed });
    }
    let mask = MAX_PAYLOAD_LEN as u64;
    let payload_len = (raw & mask) as usize;
    let (uncompressed_len, flag_bit) = if compressed {
        (((raw >> 17) & mask) as usize, 34)
    } else {
        (0, 17)
    };
    Ok(Some(SegmentHeader {
        payload_len,
        uncompressed_len,
        self_contained: (raw >> flag_bit) & 1 == 1,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The CRC24 one bit at a time, as the protocol spec describes it: the
    /// reference the table-driven [`crc24`] must match.
    fn crc24_bitwise(mut value: u64, len: usize) -> u32 {
        let mut crc = CRC24_INIT;
        for _ in 0..len {
            crc ^= ((value & 0xFF) as u32) << 16;
            value >>= 8;
            for _ in 0..8 {
                crc <<= 1;
                if crc & 0x0100_0000 != 0 {
                    crc ^= CRC24_POLY;
                }
            }
        }
        crc & 0x00FF_FFFF
    }

    proptest! {
        #[test]
        fn crc24_table_matches_the_bitwise_definition(value: u64, len in 0usize..=8) {
            prop_assert_eq!(crc24(value, len), crc24_bitwise(value, len));
        }
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Segments encoded by the Python driver for ScyllaDB and Cassandra
    /// (`cassandra.segment.SegmentCodec`, scylla-driver 3.29.3), an
    /// implementation independent of this one.
    #[test]
    fn known_answers_from_another_implementation() {
        let cases: [(&[u8], bool, &str, &str); 2] = [
            (b"hello", true, "05000219999a", "74800eb6"),
            (b"", true, "0000026a36c4", "d37e7744"),
        ];
        for (payload, sc, head, trailer) in cases {
            let mut b = BytesMut::new();
            encode(&mut b, payload, sc).unwrap();
            assert_eq!(hex(&b[..6]), head);
            assert_eq!(hex(&b[b.len() - 4..]), trailer);
        }
        let long: Vec<u8> = (0..=255u8).cycle().take(768).collect();
        let mut b = BytesMut::new();
        encode(&mut b, &long, false).unwrap();
        assert_eq!(hex(&b[..6]), "0003009d420d");
        assert_eq!(hex(&b[b.len() - 4..]), "28bd2563");
        assert_eq!(b.len(), 778);
        // Compressed headers (lengths and flag only).
        for (pl, ul, sc, want) in [
            (5usize, 9usize, true, "0500120004785685"),
            (1000, 70000, false, "e803e02202199163"),
            (0x1FFFF, 0x1FFFF, true, "ffffffff07936557"),
        ] {
            let payload = vec![0u8; pl];
            let mut b = BytesMut::new();
            encode_compressed(&mut b, &payload, ul, sc).unwrap();
            assert_eq!(hex(&b[..8]), want, "{pl} {ul} {sc}");
        }
    }

    #[test]
    fn incomplete_input_asks_for_more() {
        let mut b = BytesMut::new();
        encode(&mut b, b"some payload", true).unwrap();
        for cut in 0..b.len() {
            assert_eq!(decode(&b[..cut], false), Ok(None), "cut at {cut}");
        }
        let s = decode(&b, false).unwrap().unwrap();
        assert_eq!(s.payload, b"some payload");
        assert_eq!(s.len, b.len());
    }

    #[test]
    fn limits() {
        let big = vec![0u8; MAX_PAYLOAD_LEN + 1];
        let mut b = BytesMut::new();
        assert_eq!(
            encode(&mut b, &big, true),
            Err(SegmentError::TooLong(MAX_PAYLOAD_LEN + 1))
        );
        assert!(encode(&mut b, &big[1..], true).is_ok());
        assert_eq!(
            encode_compressed(&mut b, b"x", MAX_PAYLOAD_LEN + 1, true),
            Err(SegmentError::TooLong(MAX_PAYLOAD_LEN + 1))
        );
    }
}
