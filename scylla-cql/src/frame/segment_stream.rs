//! Protocol v5 framing of a whole byte stream (`native_protocol_v5.spec`,
//! sections 1 and 2): envelopes in, segments out ([`SegmentEncoder`]), and
//! segments in, envelopes out ([`SegmentDecoder`]). Built on the
//! single-segment codec of [`segment`]; pure code, no I/O.
//!
//! An envelope is a 9-byte frame header (its body length, big-endian, in
//! bytes 5..9) and its body. Envelopes that fit go, whole, into
//! *self-contained* segments, packed greedily (as many consecutive envelopes
//! as fit in [`MAX_PAYLOAD_LEN`]); an envelope longer than that is cut into
//! its own run of segments that are *not* self-contained, each full except
//! the last, and holding nothing else.
//!
//! # Encoding
//!
//! The writer of a connection hands the encoder the envelopes it has queued,
//! already concatenated in its write buffer; the encoder appends segments to
//! the buffer that goes to the socket. That copies every byte once more, but
//! a copy runs at memory bandwidth (tens of GB/s) while the bytes then cross a
//! system call and the network stack, and the CRC32 the spec demands reads
//! every byte anyway: the copy is in the noise, and in exchange the encoder
//! stays a simple function of two buffers. Packing greedily means a batch of
//! small requests costs one segment (10 or 12 bytes of framing, two
//! checksums) rather than one per request.
//!
//! With LZ4 each segment's payload is compressed on its own (a raw LZ4
//! block, its uncompressed length in the segment header). It is sent
//! compressed only when that made it strictly smaller; otherwise, and for
//! payloads shorter than [`MIN_COMPRESS_LEN`], it is sent as is with an
//! uncompressed length of 0, as the spec allows. Since the uncompressed
//! length is a 17-bit field too, a segment never carries more than
//! [`MAX_PAYLOAD_LEN`] bytes of envelopes, compressed or not, and the
//! compressed form is only used when shorter, so it always fits as well.
//!
//! # Decoding
//!
//! The reader of a connection appends what the socket gave to a `BytesMut`
//! and calls [`SegmentDecoder::decode_next`] until it returns `Ok(None)`.
//! Whole segments only are taken from the front of that buffer, and only
//! after both checksums matched. An uncompressed self-contained segment is
//! split off the read buffer (`split_to` + `freeze`, no copy) and its
//! envelopes are handed out as slices of it: the bytes the socket wrote are
//! the bytes the response decoder reads. A compressed segment is
//! decompressed (into at most 128 KiB - 1, the header's bound) and its
//! envelopes are slices of that. The parts of a large envelope are copied
//! into one buffer, its length checked against the decoder's limit as soon
//! as its header is in, before more is accumulated. A self-contained segment
//! is checked to hold whole envelopes, each within the limit, before the
//! first of them is handed out. The first error is kept: every later call
//! returns it again (the stream cannot be resynchronised; close the
//! connection).
//!
//! # Allocation
//!
//! In steady state, without compression, neither side allocates: the
//! encoder appends to the caller's buffer, and the decoder's envelopes share
//! the read buffer (which `BytesMut::reserve` reclaims once the envelopes
//! are dropped). What allocates:
//!
//! - compressed encoding: the encoder's LZ4 hash table (8 KiB, 16 KiB once a
//!   payload reached 64 KiB) and its scratch output buffer, on first use
//!   (then kept: the table is cleared, not rebuilt, per segment);
//! - compressed decoding: the decompression buffer, 128 KiB at a time; each
//!   segment takes its part of it, and the buffer is reclaimed once the
//!   envelopes of the segments it holds are dropped;
//! - large envelopes: one buffer per envelope, grown as its segments arrive
//!   (never reserved from the announced length), handed out as is.

use bytes::{Buf, Bytes, BytesMut};

use super::header::HEADER_LEN as ENVELOPE_HEADER_LEN;
use super::segment::{self, SegmentError, MAX_PAYLOAD_LEN};

/// Segment payloads shorter than this are never compressed.
///
/// LZ4 needs a 4-byte match and leaves the last bytes of a block as
/// literals, and clearing its hash table costs time per call.
/// Measured (`lz4_flex` 0.11.6, release build, on the 2-core dev machine):
/// a lone 44-byte EXECUTE envelope (16-byte id, one bigint) *grows* to 45
/// bytes in ~155 ns; a 72-byte QUERY envelope shrinks by 1 byte (~190 ns);
/// but two such EXECUTEs in one segment (88 bytes) shrink to 55 and four
/// (176 bytes) to 55 (~200 ns). Below 64 bytes a segment holds about one
/// small envelope, so compressing it only costs time.
pub const MIN_COMPRESS_LEN: usize = 64;

/// Byte offset of the body length (`u32`, big-endian) in an envelope header.
const ENVELOPE_LEN_OFFSET: usize = 5;

/// Decompression buffers are allocated this large, so that several segments
/// share one allocation (the largest payload fits).
const DECOMPRESS_BUF_LEN: usize = MAX_PAYLOAD_LEN + 1;

/// The length (header and body) of the envelope at the start of `buf`, or
/// `None` when `buf` is shorter than an envelope header.
fn envelope_len(buf: &[u8]) -> Option<u64> {
    let len = buf.get(ENVELOPE_LEN_OFFSET..ENVELOPE_HEADER_LEN)?;
    let len = len.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    Some(ENVELOPE_HEADER_LEN as u64 + len)
}

/// Packs whole envelopes into segments; one per connection writer.
pub struct SegmentEncoder {
    /// LZ4 was negotiated: segments use the compressed format.
    compressed: bool,
    /// LZ4 output, reused across calls (grown to the worst case of a full
    /// segment on first use).
    scratch: Vec<u8>,
    /// LZ4's hash table, kept across segments (built on first use).
    table: Option<lz4_flex::block::CompressTable>,
}

impl std::fmt::Debug for SegmentEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentEncoder")
            .field("compressed", &self.compressed)
            .field("scratch_len", &self.scratch.len())
            .finish_non_exhaustive()
    }
}

impl SegmentEncoder {
    /// An encoder for a connection that negotiated LZ4 (`compressed`) or no
    /// compression.
    pub fn new(compressed: bool) -> Self {
        Self {
            compressed,
            scratch: Vec::new(),
            table: None,
        }
    }

    /// Whether segments use the compressed format.
    pub fn is_compressed(&self) -> bool {
        self.compressed
    }

    /// Largest number of bytes [`encode_envelopes`](Self::encode_envelopes)
    /// appends for `envelopes_len` bytes of envelopes, for reserving.
    ///
    /// Payloads never grow (compression is used only when it shrinks them).
    /// Greedy packing makes at most `3 * (envelopes_len / MAX_PAYLOAD_LEN) +
    /// 2` segments: two consecutive self-contained segments carry more than
    /// `MAX_PAYLOAD_LEN` bytes together (else the second's first envelope
    /// would have joined the first), every segment of a large envelope but
    /// the last is full, and only that last one may precede a
    /// self-contained segment without such a sum.
    pub fn encoded_len_bound(&self, envelopes_len: usize) -> usize {
        let per_segment = segment::header_and_crc_len(self.compressed) + segment::TRAILER_LEN;
        let segments = (envelopes_len / MAX_PAYLOAD_LEN)
            .saturating_mul(3)
            .saturating_add(2);
        envelopes_len.saturating_add(segments.saturating_mul(per_segment))
    }

    /// Appends to `out` the segments carrying `envelopes`, a concatenation
    /// of whole envelopes (9-byte header and body each), in order.
    ///
    /// Fails with [`SegmentError::PartialEnvelope`] when `envelopes` ends
    /// inside an envelope; `out` is then left as it was.
    pub fn encode_envelopes(
        &mut self,
        envelopes: &[u8],
        out: &mut BytesMut,
    ) -> Result<(), SegmentError> {
        let start = out.len();
        let result = self.encode_all(envelopes, out);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    fn encode_all(&mut self, envelopes: &[u8], out: &mut BytesMut) -> Result<(), SegmentError> {
        out.reserve(self.encoded_len_bound(envelopes.len()));
        // `envelopes[segment_start..pos]` are whole envelopes not sent yet,
        // at most `MAX_PAYLOAD_LEN` bytes together.
        let mut segment_start = 0;
        let mut pos = 0;
        while pos < envelopes.len() {
            let rest = &envelopes[pos..];
            let len = match envelope_len(rest) {
                Some(len) if len <= rest.len() as u64 => len as usize,
                needed => {
                    return Err(SegmentError::PartialEnvelope {
                        offset: pos,
                        needed: needed.unwrap_or(ENVELOPE_HEADER_LEN as u64),
                        available: rest.len(),
                    })
                }
            };
            if pos - segment_start + len > MAX_PAYLOAD_LEN {
                // It does not fit with the ones before: send those.
                if pos > segment_start {
                    self.put_segment(&envelopes[segment_start..pos], true, out)?;
                }
                segment_start = pos;
            }
            if len > MAX_PAYLOAD_LEN {
                for part in envelopes[pos..pos + len].chunks(MAX_PAYLOAD_LEN) {
                    self.put_segment(part, false, out)?;
                }
                segment_start = pos + len;
            }
            pos += len;
        }
        if pos > segment_start {
            self.put_segment(&envelopes[segment_start..pos], true, out)?;
        }
        Ok(())
    }

    /// Appends one segment carrying `payload` (at most `MAX_PAYLOAD_LEN`
    /// bytes), compressed when that is worth it.
    fn put_segment(
        &mut self,
        payload: &[u8],
        self_contained: bool,
        out: &mut BytesMut,
    ) -> Result<(), SegmentError> {
        if !self.compressed {
            return segment::encode(out, payload, self_contained);
        }
        if payload.len() >= MIN_COMPRESS_LEN {
            let worst = lz4_flex::block::get_maximum_output_size(payload.len());
            if self.scratch.len() < worst {
                // Once, for the largest payload, so that later calls reuse it.
                let full = lz4_flex::block::get_maximum_output_size(MAX_PAYLOAD_LEN);
                self.scratch.resize(worst.max(full), 0);
            }
            // An error cannot happen with a worst-case-sized output; if it
            // did, the payload goes uncompressed, which is always valid.
            let table = self.table.get_or_insert_with(Default::default);
            if let Ok(n) =
                lz4_flex::block::compress_into_with_table(payload, &mut self.scratch, table)
            {
                if n < payload.len() {
                    return segment::encode_compressed(
                        out,
                        &self.scratch[..n],
                        payload.len(),
                        self_contained,
                    );
                }
            }
        }
        segment::encode_compressed(out, payload, 0, self_contained)
    }
}

/// Takes segments off the front of a connection's read buffer and hands out
/// the envelopes they carry, one at a time; one per connection reader.
#[derive(Debug)]
pub struct SegmentDecoder {
    /// LZ4 was negotiated: segments use the compressed format.
    compressed: bool,
    /// Longest envelope (header and body) accepted.
    max_envelope_len: usize,
    /// Envelopes of the last self-contained segment not handed out yet;
    /// checked to be whole and within the limit.
    pending: Bytes,
    /// The part received so far of a large envelope (empty between them).
    large: BytesMut,
    /// That envelope's length, once its header is in `large`.
    large_len: Option<usize>,
    /// Decompressed payloads are carved from this buffer.
    decompressed: BytesMut,
    /// The first error; every later call returns it again.
    failed: Option<SegmentError>,
}

impl SegmentDecoder {
    /// A decoder for a connection that negotiated LZ4 (`compressed`) or no
    /// compression, accepting envelopes (9-byte header and body) of at most
    /// `max_envelope_len` bytes.
    pub fn new(compressed: bool, max_envelope_len: usize) -> Self {
        Self {
            compressed,
            max_envelope_len,
            pending: Bytes::new(),
            large: BytesMut::new(),
            large_len: None,
            decompressed: BytesMut::new(),
            failed: None,
        }
    }

    /// Whether segments use the compressed format.
    pub fn is_compressed(&self) -> bool {
        self.compressed
    }

    /// Bytes of a large envelope received so far (0 when none is under
    /// way): memory this decoder holds on the peer's behalf.
    pub fn partial_envelope_len(&self) -> usize {
        self.large.len()
    }

    /// The next whole envelope (its 9-byte header included), taking whole
    /// segments from the front of `raw` as needed; `Ok(None)` when `raw`
    /// does not hold the rest of a segment yet (append more and call again).
    ///
    /// Call it until it returns `Ok(None)`: one segment may carry several
    /// envelopes, handed out one per call without touching `raw`. Bytes of
    /// an incomplete segment stay in `raw`. An error means the stream is
    /// corrupt or breaks the framing rules; it is returned again by every
    /// later call.
    pub fn decode_next(&mut self, raw: &mut BytesMut) -> Result<Option<Bytes>, SegmentError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.next_envelope(raw);
        if let Err(e) = &result {
            self.failed = Some(e.clone());
            self.pending = Bytes::new();
            self.large = BytesMut::new();
            self.large_len = None;
        }
        result
    }

    /// How long `raw` must be for [`decode_next`](Self::decode_next) to take
    /// the segment at its front: its whole length once its header is in,
    /// the header's length before. 0 when the next call needs no more bytes
    /// (envelopes are pending, or an error is to be reported), so a reader
    /// can size its next read as `needed(raw).saturating_sub(raw.len())`.
    pub fn needed(&self, raw: &[u8]) -> usize {
        if !self.pending.is_empty() || self.failed.is_some() {
            return 0;
        }
        let head = segment::header_and_crc_len(self.compressed);
        match segment::decode_header(raw, self.compressed) {
            Ok(Some(h)) => head + h.payload_len + segment::TRAILER_LEN,
            Ok(None) => head,
            Err(_) => 0,
        }
    }

    fn next_envelope(&mut self, raw: &mut BytesMut) -> Result<Option<Bytes>, SegmentError> {
        // Bounded: every iteration either returns or consumes a segment of
        // at least one payload byte from `raw`.
        loop {
            if !self.pending.is_empty() {
                return Ok(Some(self.pop_pending()));
            }
            let Some(seg) = segment::decode(raw, self.compressed)? else {
                return Ok(None);
            };
            let header = seg.header;
            let seg_len = seg.len;
            let payload =
                segment::header_and_crc_len(self.compressed)..seg_len - segment::TRAILER_LEN;
            if header.payload_len == 0 {
                return Err(SegmentError::EmptySegment {
                    self_contained: header.self_contained,
                });
            }
            if header.self_contained {
                if !self.large.is_empty() {
                    return Err(SegmentError::UnexpectedSelfContained {
                        received: self.large.len(),
                    });
                }
                let envelopes = if header.uncompressed_len == 0 {
                    // Zero-copy: the envelopes are slices of the read buffer.
                    raw.split_to(seg_len).freeze().slice(payload)
                } else {
                    let out = self.decompress(&raw[payload], header.uncompressed_len)?;
                    raw.advance(seg_len);
                    out
                };
                self.check_envelopes(&envelopes)?;
                self.pending = envelopes;
            } else {
                let part_len = match header.uncompressed_len {
                    0 => header.payload_len,
                    n => n,
                };
                let received = self.large.len() + part_len;
                if let Some(envelope_len) = self.large_len {
                    if received > envelope_len {
                        return Err(SegmentError::ExtraBytesInRun {
                            envelope_len,
                            received,
                        });
                    }
                }
                // Grows by doubling (amortised) as parts arrive, never by
                // the announced length.
                self.large.reserve(part_len.max(self.large.len()));
                if header.uncompressed_len == 0 {
                    self.large.extend_from_slice(&raw[payload]);
                } else {
                    let start = self.large.len();
                    self.large.resize(start + part_len, 0);
                    decompress_into(&raw[payload], &mut self.large[start..])?;
                }
                raw.advance(seg_len);
                if let Some(envelope) = self.large_envelope_if_whole()? {
                    return Ok(Some(envelope));
                }
            }
        }
    }

    /// After a part of a large envelope arrived: learns its length once the
    /// header is in (checking the limit), and takes the envelope when whole.
    fn large_envelope_if_whole(&mut self) -> Result<Option<Bytes>, SegmentError> {
        let envelope_len = match self.large_len {
            Some(len) => len,
            None => {
                let Some(len) = envelope_len(&self.large) else {
                    return Ok(None);
                };
                let len = self.check_len(len)?;
                self.large_len = Some(len);
                len
            }
        };
        let received = self.large.len();
        if received > envelope_len {
            return Err(SegmentError::ExtraBytesInRun {
                envelope_len,
                received,
            });
        }
        if received < envelope_len {
            return Ok(None);
        }
        self.large_len = None;
        Ok(Some(self.large.split().freeze()))
    }

    /// `len` as a `usize` if within the limit.
    fn check_len(&self, len: u64) -> Result<usize, SegmentError> {
        match usize::try_from(len) {
            Ok(n) if n <= self.max_envelope_len => Ok(n),
            _ => Err(SegmentError::EnvelopeTooLarge {
                len,
                max: self.max_envelope_len,
            }),
        }
    }

    /// Checks that a self-contained payload is a sequence of whole
    /// envelopes, each within the limit.
    fn check_envelopes(&self, payload: &[u8]) -> Result<(), SegmentError> {
        let mut offset = 0;
        while offset < payload.len() {
            let rest = &payload[offset..];
            let Some(len) = envelope_len(rest) else {
                return Err(SegmentError::SegmentEndsMidEnvelope {
                    offset,
                    needed: ENVELOPE_HEADER_LEN as u64,
                    available: rest.len(),
                });
            };
            let len = self.check_len(len)?;
            if len > rest.len() {
                return Err(SegmentError::SegmentEndsMidEnvelope {
                    offset,
                    needed: len as u64,
                    available: rest.len(),
                });
            }
            offset += len;
        }
        Ok(())
    }

    /// The first pending envelope (`pending` was checked by
    /// `check_envelopes`; the clamps only keep this total).
    fn pop_pending(&mut self) -> Bytes {
        let available = self.pending.len();
        let len = envelope_len(&self.pending)
            .map_or(available, |len| usize::try_from(len).unwrap_or(usize::MAX))
            .min(available);
        self.pending.split_to(len)
    }

    /// Decompresses a self-contained payload into (a part of) the shared
    /// decompression buffer.
    fn decompress(&mut self, input: &[u8], uncompressed_len: usize) -> Result<Bytes, SegmentError> {
        // The field has 17 bits, so this holds by construction; checked
        // because it bounds the allocation below.
        if uncompressed_len > MAX_PAYLOAD_LEN {
            return Err(SegmentError::Decompression(
                "uncompressed length above the segment maximum",
            ));
        }
        if self.decompressed.capacity() < uncompressed_len {
            // Reclaims the previous allocation when all its envelopes were
            // dropped; otherwise allocates a new one.
            self.decompressed.reserve(DECOMPRESS_BUF_LEN);
        }
        self.decompressed.resize(uncompressed_len, 0);
        let result = decompress_into(input, &mut self.decompressed);
        let out = self.decompressed.split().freeze();
        result.map(|()| out)
    }
}

/// Decompresses the LZ4 block `input` into exactly `out`.
fn decompress_into(input: &[u8], out: &mut [u8]) -> Result<(), SegmentError> {
    let n = lz4_flex::block::decompress_into(input, out)
        .map_err(|_| SegmentError::Decompression("corrupt LZ4 block"))?;
    if n != out.len() {
        return Err(SegmentError::Decompression(
            "LZ4 block shorter than the uncompressed length in the segment header",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
