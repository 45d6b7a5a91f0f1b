//! Frame body compression (section 5 of the v4 spec).
//!
//! In protocol v4 a frame body is compressed with LZ4 (a 4-byte big-endian
//! *uncompressed* length followed by one LZ4 block) or Snappy (the raw Snappy
//! format, whose varint header is the uncompressed length). Protocol v5
//! compresses segments, with LZ4 only ([`Compression::in_segments`]).
//!
//! Decompression reads the announced length first and checks it against a
//! caller-supplied maximum *before* allocating, so a 10-byte body announcing
//! 4 GiB costs nothing. A connection compresses through a [`Compressor`],
//! which keeps a scratch buffer for the uncompressed body and LZ4's hash
//! table (or Snappy's encoder) between frames, and decompresses through a
//! [`Decompressor`], which
//! carves bodies out of one shared buffer: in steady state neither
//! allocates per frame.

use bytes::{BufMut, Bytes, BytesMut};
use lz4_flex::block::CompressTable;

use crate::error::{DecodeError, EncodeError};

/// Length of the uncompressed-length prefix of an LZ4 body.
const LZ4_LEN_PREFIX: usize = 4;

/// A frame compression algorithm, negotiated in STARTUP (`COMPRESSION` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// LZ4 block format with a 4-byte big-endian uncompressed length prefix.
    Lz4,
    /// The raw Snappy format (protocol v4 only: v5 segments are LZ4 or
    /// uncompressed).
    Snappy,
}

impl Compression {
    /// The name used in the STARTUP `COMPRESSION` option and in SUPPORTED.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Lz4 => "lz4",
            Compression::Snappy => "snappy",
        }
    }

    /// Parses an algorithm name (case-insensitive); `None` for others.
    pub fn from_name(name: &str) -> Option<Self> {
        if name.eq_ignore_ascii_case("lz4") {
            Some(Compression::Lz4)
        } else if name.eq_ignore_ascii_case("snappy") {
            Some(Compression::Snappy)
        } else {
            None
        }
    }

    /// Whether protocol v5 can compress its segments with this algorithm
    /// (LZ4 only: the v5 spec, section 2.2).
    pub fn in_segments(self) -> bool {
        matches!(self, Compression::Lz4)
    }

    /// Appends the compressed form of `input` to `out`.
    ///
    /// `out` grows by at most [`max_compressed_len`](Self::max_compressed_len)
    /// bytes; on error it is left as it was. Builds LZ4's hash table for
    /// this call: to compress many bodies, use a [`Compressor`].
    pub fn compress_into(self, input: &[u8], out: &mut BytesMut) -> Result<(), EncodeError> {
        match self {
            Compression::Lz4 => lz4_compress_into(input, out, &mut CompressTable::default()),
            Compression::Snappy => snappy_compress_into(input, out, &mut snap::raw::Encoder::new()),
        }
    }

    /// An upper bound of the compressed size of `input_len` bytes.
    pub fn max_compressed_len(self, input_len: usize) -> usize {
        match self {
            Compression::Lz4 => {
                LZ4_LEN_PREFIX + lz4_flex::block::get_maximum_output_size(input_len)
            }
            Compression::Snappy => snap::raw::max_compress_len(input_len),
        }
    }

    /// Decompresses a whole body. Fails with [`DecodeError::FrameTooLarge`] if
    /// the announced uncompressed length exceeds `max_len` (checked before any
    /// allocation) and with [`DecodeError::Decompression`] on corrupt input.
    pub fn decompress(self, input: &[u8], max_len: usize) -> Result<Bytes, DecodeError> {
        match self {
            Compression::Lz4 => lz4_decompress(input, max_len),
            Compression::Snappy => {
                let len = snappy_len(input, max_len)?;
                if len == 0 {
                    return Ok(Bytes::new());
                }
                let mut out = vec![0u8; len];
                snappy_decompress_into(input, &mut out)?;
                Ok(Bytes::from(out))
            }
        }
    }
}

fn snappy_compress_into(
    input: &[u8],
    out: &mut BytesMut,
    encoder: &mut snap::raw::Encoder,
) -> Result<(), EncodeError> {
    let start = out.len();
    let max = snap::raw::max_compress_len(input.len());
    if max == 0 {
        // Snappy's limit (about 6 GiB of input), never a frame.
        return Err(EncodeError::TooLong {
            what: "compressed body",
            length: input.len(),
            max: u32::MAX as usize,
        });
    }
    out.resize(start + max, 0);
    match encoder.compress(input, &mut out[start..]) {
        Ok(n) => {
            out.truncate(start + n);
            Ok(())
        }
        Err(_) => {
            out.truncate(start);
            Err(EncodeError::Invalid("Snappy compression failed"))
        }
    }
}

/// The uncompressed length a Snappy body announces, checked against
/// `max_len` and against what the input can produce, before any allocation.
fn snappy_len(input: &[u8], max_len: usize) -> Result<usize, DecodeError> {
    if input.is_empty() {
        // Flagged but empty, as for LZ4: nothing to decompress.
        return Ok(0);
    }
    let announced = snap::raw::decompress_len(input)
        .map_err(|_| DecodeError::Decompression("Snappy body without a valid length header"))?;
    if announced > max_len {
        return Err(DecodeError::FrameTooLarge {
            length: announced as u64,
            limit: max_len,
        });
    }
    // A Snappy element expands at most ~22x (a 3-byte copy of 64 bytes).
    if announced / 32 > input.len() + 16 {
        return Err(DecodeError::Decompression(
            "Snappy announced length impossible for the compressed size",
        ));
    }
    Ok(announced)
}

/// Decompresses the Snappy body `input` into exactly `out`.
fn snappy_decompress_into(input: &[u8], out: &mut [u8]) -> Result<(), DecodeError> {
    let n = snap::raw::Decoder::new()
        .decompress(input, out)
        .map_err(|_| DecodeError::Decompression("corrupt Snappy body"))?;
    if n != out.len() {
        return Err(DecodeError::Decompression(
            "Snappy body shorter than its announced length",
        ));
    }
    Ok(())
}

fn lz4_compress_into(
    input: &[u8],
    out: &mut BytesMut,
    table: &mut CompressTable,
) -> Result<(), EncodeError> {
    let len = u32::try_from(input.len()).map_err(|_| EncodeError::TooLong {
        what: "compressed body",
        length: input.len(),
        max: u32::MAX as usize,
    })?;
    let start = out.len();
    out.put_u32(len);
    let block_start = out.len();
    let max = lz4_flex::block::get_maximum_output_size(input.len());
    // The LZ4 API writes into an initialised slice; zero-fill the worst case
    // (reusing the buffer's capacity) and cut it back to the real size.
    out.resize(block_start + max, 0);
    match lz4_flex::block::compress_into_with_table(input, &mut out[block_start..], table) {
        Ok(n) => {
            out.truncate(block_start + n);
            Ok(())
        }
        Err(_) => {
            // Cannot happen with a worst-case-sized output, but never leave
            // a half-written body behind.
            out.truncate(start);
            Err(EncodeError::Invalid("LZ4 compression failed"))
        }
    }
}

fn lz4_decompress(input: &[u8], max_len: usize) -> Result<Bytes, DecodeError> {
    let (block, len) = lz4_body(input, max_len)?;
    if len == 0 && block.is_empty() {
        // Some servers send an empty body uncompressed-but-flagged; there is
        // nothing to decompress and nothing can go wrong.
        return Ok(Bytes::new());
    }
    let mut out = vec![0u8; len];
    lz4_decompress_block(block, &mut out)?;
    Ok(Bytes::from(out))
}

/// The LZ4 block and the uncompressed length a v4 compressed body announces,
/// checked against `max_len` and against what the block can produce.
fn lz4_body(input: &[u8], max_len: usize) -> Result<(&[u8], usize), DecodeError> {
    let Some((prefix, block)) = input.split_first_chunk::<LZ4_LEN_PREFIX>() else {
        // Some servers send an empty body uncompressed-but-flagged.
        if input.is_empty() {
            return Ok((&[], 0));
        }
        return Err(DecodeError::Decompression(
            "LZ4 body shorter than its length prefix",
        ));
    };
    let announced = u32::from_be_bytes(*prefix) as u64;
    if announced > max_len as u64 {
        return Err(DecodeError::FrameTooLarge {
            length: announced,
            limit: max_len,
        });
    }
    // `announced <= max_len`, a usize, so the conversion is lossless.
    let announced = announced as usize;
    // An LZ4 block expands at most ~255x; reject announcements the input
    // cannot possibly produce before allocating for them.
    if announced / 255 > block.len() + 16 {
        return Err(DecodeError::Decompression(
            "LZ4 announced length impossible for the compressed size",
        ));
    }
    Ok((block, announced))
}

/// Decompresses the LZ4 block `block` into exactly `out`.
fn lz4_decompress_block(block: &[u8], out: &mut [u8]) -> Result<(), DecodeError> {
    let n = lz4_flex::block::decompress_into(block, out)
        .map_err(|_| DecodeError::Decompression("corrupt LZ4 block"))?;
    if n != out.len() {
        return Err(DecodeError::Decompression(
            "LZ4 block shorter than its announced length",
        ));
    }
    Ok(())
}

/// A compression algorithm with a reusable scratch buffer for the uncompressed
/// body, so that compressing frames allocates no buffer in steady state.
///
/// One per connection writer; [`encode_frame`](crate::frame::envelope::encode_frame)
/// writes the uncompressed body into [`scratch`](Self::scratch) and compresses it
/// into the output buffer.
pub struct Compressor {
    compression: Compression,
    scratch: BytesMut,
    /// LZ4's hash table (8 KiB, 16 KiB once a body reached 64 KiB), kept
    /// between bodies instead of being built per call.
    table: CompressTable,
    /// Snappy's encoder (its hash table), kept likewise.
    snappy: snap::raw::Encoder,
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor")
            .field("compression", &self.compression)
            .field("scratch_capacity", &self.scratch.capacity())
            .finish_non_exhaustive()
    }
}

impl Compressor {
    /// A compressor for `compression` with an empty scratch buffer.
    pub fn new(compression: Compression) -> Self {
        Self {
            compression,
            scratch: BytesMut::new(),
            table: CompressTable::default(),
            snappy: snap::raw::Encoder::new(),
        }
    }

    /// The algorithm.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The scratch buffer, cleared (its capacity is kept across frames).
    pub fn scratch(&mut self) -> &mut BytesMut {
        self.scratch.clear();
        &mut self.scratch
    }

    /// Compresses the current content of the scratch buffer, appending to `out`.
    pub fn compress_scratch_into(&mut self, out: &mut BytesMut) -> Result<(), EncodeError> {
        match self.compression {
            Compression::Lz4 => lz4_compress_into(&self.scratch, out, &mut self.table),
            Compression::Snappy => snappy_compress_into(&self.scratch, out, &mut self.snappy),
        }
    }

    /// Compresses `input`, appending to `out`.
    pub fn compress_into(&mut self, input: &[u8], out: &mut BytesMut) -> Result<(), EncodeError> {
        match self.compression {
            Compression::Lz4 => lz4_compress_into(input, out, &mut self.table),
            Compression::Snappy => snappy_compress_into(input, out, &mut self.snappy),
        }
    }
}

/// Decompressed bodies are carved from buffers of at least this size, so
/// that many small bodies share one allocation.
const DECOMPRESS_BUF_LEN: usize = 128 * 1024;

/// A compression algorithm with a shared output buffer: each decompressed
/// body is a part of it, and the buffer is reused once every body carved
/// from it was dropped. One per connection reader.
#[derive(Debug)]
pub struct Decompressor {
    compression: Compression,
    buf: BytesMut,
}

impl Decompressor {
    /// A decompressor for `compression`; its buffer is allocated on first
    /// use.
    pub fn new(compression: Compression) -> Self {
        Self {
            compression,
            buf: BytesMut::new(),
        }
    }

    /// The algorithm.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Decompresses a whole body, as [`Compression::decompress`] does (the
    /// same checks, before any allocation), into the shared buffer.
    pub fn decompress(&mut self, input: &[u8], max_len: usize) -> Result<Bytes, DecodeError> {
        match self.compression {
            Compression::Lz4 => {
                let (block, len) = lz4_body(input, max_len)?;
                if len == 0 && block.is_empty() {
                    return Ok(Bytes::new());
                }
                if self.buf.capacity() < len {
                    // Reclaims the buffer when every body carved from it was
                    // dropped; otherwise allocates another.
                    self.buf.reserve(len.max(DECOMPRESS_BUF_LEN));
                }
                self.buf.resize(len, 0);
                let result = lz4_decompress_block(block, &mut self.buf);
                let out = self.buf.split().freeze();
                result.map(|()| out)
            }
            Compression::Snappy => {
                let len = snappy_len(input, max_len)?;
                if len == 0 {
                    return Ok(Bytes::new());
                }
                if self.buf.capacity() < len {
                    self.buf.reserve(len.max(DECOMPRESS_BUF_LEN));
                }
                self.buf.resize(len, 0);
                let result = snappy_decompress_into(input, &mut self.buf);
                let out = self.buf.split().freeze();
                result.map(|()| out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(Compression::Lz4.name(), "lz4");
        assert_eq!(Compression::from_name("LZ4"), Some(Compression::Lz4));
        assert_eq!(Compression::Snappy.name(), "snappy");
        assert_eq!(Compression::from_name("Snappy"), Some(Compression::Snappy));
        assert_eq!(Compression::from_name("zstd"), None);
        assert!(Compression::Lz4.in_segments());
        assert!(!Compression::Snappy.in_segments());
    }

    #[test]
    fn round_trip_and_prefix() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 7) as u8).collect();
        let mut out = BytesMut::from(&b"xx"[..]);
        Compression::Lz4.compress_into(&data, &mut out).unwrap();
        assert_eq!(&out[..2], b"xx");
        assert_eq!(&out[2..6], &5000u32.to_be_bytes());
        assert!(out.len() < 5000);
        let back = Compression::Lz4.decompress(&out[2..], 5000).unwrap();
        assert_eq!(&back[..], &data[..]);
        assert!(matches!(
            Compression::Lz4.decompress(&out[2..], 4999),
            Err(DecodeError::FrameTooLarge { length: 5000, .. })
        ));
    }

    #[test]
    fn corrupt_and_huge_bodies_are_typed_errors() {
        // 4 GiB announced, 3 bytes of block: rejected before allocating.
        let huge = [0xff, 0xff, 0xff, 0xff, 0x10, 0x61, 0x00];
        assert!(matches!(
            Compression::Lz4.decompress(&huge, usize::MAX),
            Err(DecodeError::Decompression(_))
        ));
        assert!(matches!(
            Compression::Lz4.decompress(&huge, 1 << 20),
            Err(DecodeError::FrameTooLarge { .. })
        ));
        assert!(matches!(
            Compression::Lz4.decompress(&[0, 0], 100),
            Err(DecodeError::Decompression(_))
        ));
        assert!(matches!(
            Compression::Lz4.decompress(&[0, 0, 0, 10, 0xf0, 1, 2], 100),
            Err(DecodeError::Decompression(_))
        ));
        // Block decodes to fewer bytes than announced.
        let mut ok = BytesMut::new();
        Compression::Lz4.compress_into(b"hello", &mut ok).unwrap();
        ok[3] = 6;
        assert!(matches!(
            Compression::Lz4.decompress(&ok, 100),
            Err(DecodeError::Decompression(_))
        ));
    }

    #[test]
    fn empty_input_round_trips() {
        let mut out = BytesMut::new();
        Compression::Lz4.compress_into(&[], &mut out).unwrap();
        assert_eq!(&out[..4], &[0, 0, 0, 0]);
        assert!(Compression::Lz4.decompress(&out, 0).unwrap().is_empty());
        assert!(Compression::Lz4.decompress(&[], 0).unwrap().is_empty());
    }

    #[test]
    fn decompressor_matches_decompress_and_shares_its_buffer() {
        let mut d = Decompressor::new(Compression::Lz4);
        let mut c = Compressor::new(Compression::Lz4);
        let mut bodies = Vec::new();
        for i in 0..50u32 {
            let data: Vec<u8> = (0..1000 + i).map(|j| (j % 13) as u8).collect();
            let mut out = BytesMut::new();
            c.compress_into(&data, &mut out).unwrap();
            let back = d.decompress(&out, 1 << 20).unwrap();
            assert_eq!(back, Compression::Lz4.decompress(&out, 1 << 20).unwrap());
            assert_eq!(&back[..], &data[..]);
            bodies.push(back);
        }
        // Fifty bodies of about 1 KiB came out of one 128 KiB buffer.
        let first = bodies[0].as_ptr() as usize;
        assert!(bodies
            .iter()
            .all(|b| (b.as_ptr() as usize).abs_diff(first) < DECOMPRESS_BUF_LEN));
        // The same checks as `decompress`.
        let huge = [0xff, 0xff, 0xff, 0xff, 0x10, 0x61, 0x00];
        assert!(matches!(
            d.decompress(&huge, 1 << 20),
            Err(DecodeError::FrameTooLarge { .. })
        ));
        assert!(d.decompress(&[], 0).unwrap().is_empty());
        assert!(matches!(
            d.decompress(&[0, 0, 0, 10, 0xf0, 1, 2], 100),
            Err(DecodeError::Decompression(_))
        ));
    }

    #[test]
    fn compressor_reuses_scratch() {
        let mut c = Compressor::new(Compression::Lz4);
        c.scratch().extend_from_slice(&[1; 1000]);
        let cap = c.scratch.capacity();
        let mut out = BytesMut::new();
        c.compress_scratch_into(&mut out).unwrap();
        assert_eq!(c.scratch().len(), 0);
        assert_eq!(c.scratch.capacity(), cap);
    }

    #[test]
    fn snappy_round_trip_limits_and_corruption() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 7) as u8).collect();
        let mut out = BytesMut::from(&b"xx"[..]);
        Compression::Snappy.compress_into(&data, &mut out).unwrap();
        assert_eq!(&out[..2], b"xx");
        assert!(out.len() < 5000);
        let back = Compression::Snappy.decompress(&out[2..], 5000).unwrap();
        assert_eq!(&back[..], &data[..]);
        assert!(matches!(
            Compression::Snappy.decompress(&out[2..], 4999),
            Err(DecodeError::FrameTooLarge { length: 5000, .. })
        ));
        // A header announcing 4 GiB in a few bytes: refused before allocating.
        let huge = [0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0];
        assert!(matches!(
            Compression::Snappy.decompress(&huge, usize::MAX),
            Err(DecodeError::Decompression(_))
        ));
        // Truncated and garbled bodies are typed errors.
        let cut = &out[2..out.len() - 3];
        assert!(Compression::Snappy.decompress(cut, 5000).is_err());
        assert!(Compression::Snappy
            .decompress(&[5, 0xff, 0xff], 100)
            .is_err());
        let mut d = Decompressor::new(Compression::Snappy);
        assert!(d.decompress(cut, 5000).is_err());
        assert_eq!(&d.decompress(&out[2..], 5000).unwrap()[..], &data[..]);
        assert!(Compression::Snappy.decompress(&[], 0).unwrap().is_empty());
    }

    proptest::proptest! {
        /// Each algorithm's compressor and decompressor are inverse, through
        /// the one-shot and the reusing forms alike, and a decompressor fed
        /// arbitrary bytes returns an error, never a panic.
        #[test]
        fn compress_decompress_round_trip(
            snappy in proptest::prelude::any::<bool>(),
            bodies in proptest::collection::vec(
                proptest::collection::vec(0u8..4, 0..3000), 1..4),
            garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            let algorithm = if snappy { Compression::Snappy } else { Compression::Lz4 };
            let mut c = Compressor::new(algorithm);
            let mut d = Decompressor::new(algorithm);
            for body in &bodies {
                let mut out = BytesMut::new();
                c.compress_into(body, &mut out).unwrap();
                proptest::prop_assert!(out.len() <= algorithm.max_compressed_len(body.len()));
                proptest::prop_assert_eq!(&algorithm.decompress(&out, body.len()).unwrap()[..], &body[..]);
                proptest::prop_assert_eq!(&d.decompress(&out, body.len()).unwrap()[..], &body[..]);
            }
            let _ = algorithm.decompress(&garbage, 1 << 16);
            let _ = d.decompress(&garbage, 1 << 16);
        }
    }
}
