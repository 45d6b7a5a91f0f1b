//! The checks behind the `cql_frame` fuzz target, and the seed corpus.
//!
//! Every input is `[selector] [bytes...]`. The selector's low three bits
//! pick the decoder, bit 3 turns LZ4 on, bits 4-5 pick the connection
//! (v4, v4 with ScyllaDB's extensions, v5, v5 with them):
//!
//! | mode | decoder |
//! |------|---------|
//! | 0 | a stream of v4/v5 frames: header, envelope (LZ4 when on), message |
//! | 1 | a v5 byte stream through the segment decoder, then each envelope as in 0 |
//! | 2 | the same, with segments built from the input with valid checksums |
//! | 3 | one v5 segment (header CRC24, payload CRC32) |
//! | 4 | an LZ4 frame body (v4 compression) |
//! | 5 | a response body; the next byte picks the opcode |
//! | 6 | a request body; the next byte picks the opcode |
//! | 7 | SUPPORTED options and ScyllaDB's tablet routing payloads |
//!
//! Nothing may panic. Whatever decodes and has an encoder is encoded again
//! and must decode to the same value.
//!
//! The checks of the `tls_records` target (the driver's TLS record layer)
//! are in [`records`].

use bytes::{Bytes, BytesMut};
use scylla_cql::compression::{Compression, Compressor, Decompressor};
use scylla_cql::frame::request::{Request, RequestContext};
use scylla_cql::frame::response::result::SpecCache;
use scylla_cql::frame::response::{Response, ResponseContext, ResultBody, ScyllaExtensions};
use scylla_cql::frame::segment::{self, SegmentError};
use scylla_cql::frame::segment_stream::{SegmentDecoder, SegmentEncoder};
use scylla_cql::frame::tablets::{TabletRoutingInfo, TabletRoutingV2};
use scylla_cql::frame::wire::WireReader;
use scylla_cql::frame::{
    decode_envelope, encode_frame, frame_len, Direction, FrameExtras, MessageBody, Opcode,
    ProtocolVersion, HEADER_LEN,
};

pub mod records;
pub use records::tls_records;

/// Body and envelope limit: small, so that no planted length makes a case
/// slow, large enough for every seed.
pub const MAX_BODY: usize = 256 * 1024;

/// The decoders, as the selector's low three bits name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Mode {
    /// A stream of whole frames.
    Frames = 0,
    /// A v5 byte stream, checksums as received.
    Segments = 1,
    /// A v5 byte stream built from the input with valid checksums.
    BuiltSegments = 2,
    /// One v5 segment.
    Segment = 3,
    /// An LZ4 (v4) body.
    Lz4 = 4,
    /// A response body.
    ResponseBody = 5,
    /// A request body.
    RequestBody = 6,
    /// SUPPORTED options and tablet payloads.
    Payloads = 7,
}

/// The connection a selector describes (bits 4-5).
pub fn context(selector: u8) -> ResponseContext {
    let scylla = selector & 0x10 != 0;
    let v5 = selector & 0x20 != 0;
    ResponseContext {
        version: if v5 {
            ProtocolVersion::V5
        } else {
            ProtocolVersion::V4
        },
        rate_limit_error_code: scylla.then_some(0xF000),
        lwt_metadata_mask: scylla.then_some(0x8000_0000),
        use_metadata_id: scylla,
    }
}

/// The selector byte for `mode` on connection `ctx_bits` (0..4) with or
/// without LZ4.
pub fn selector(mode: Mode, lz4: bool, ctx_bits: u8) -> u8 {
    mode as u8 | u8::from(lz4) << 3 | (ctx_bits & 3) << 4
}

/// The fuzz target's body.
pub fn cql_frame(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let lz4 = sel & 0x08 != 0;
    let ctx = context(sel);
    match sel & 7 {
        0 => frames(rest, lz4, &ctx),
        1 => segments(rest, lz4, &ctx),
        2 => built_segments(rest, lz4, &ctx),
        3 => one_segment(rest, lz4),
        4 => compressed_body(rest),
        5 => {
            let Some((&op, body)) = rest.split_first() else {
                return;
            };
            let responses: Vec<Opcode> = Opcode::ALL
                .iter()
                .copied()
                .filter(|o| o.direction() == Direction::Response)
                .collect();
            let opcode = responses[op as usize % responses.len()];
            response(opcode, Bytes::copy_from_slice(body), &ctx, None);
        }
        6 => {
            let Some((&op, body)) = rest.split_first() else {
                return;
            };
            let opcode = Opcode::ALL[op as usize % Opcode::ALL.len()];
            request(opcode, body, &ctx, sel & 0x40 != 0);
        }
        _ => payloads(rest),
    }
}

/// Decodes a response body; a success must encode again to a body that
/// decodes to the same value, and decoding through a column-spec cache
/// must agree with decoding without.
pub fn response(
    opcode: Opcode,
    body: Bytes,
    ctx: &ResponseContext,
    cache: Option<&mut SpecCache>,
) -> Option<Response> {
    let decoded = Response::decode(opcode, body.clone(), ctx);
    if let Some(cache) = cache {
        let cached = Response::decode_cached(opcode, body, ctx, Some(cache));
        assert_eq!(cached, decoded, "decoding through the spec cache differs");
    }
    let resp = decoded.ok()?;
    match &resp {
        Response::Result(ResultBody::Rows(rows)) if rows.columns_count() > 0 => {
            // Decoded rows iterate without failing, every row whole.
            let cells: usize = rows.raw_iter().map(|r| r.count()).sum();
            assert_eq!(cells, rows.rows_count() * rows.columns_count());
        }
        Response::Supported(s) => {
            let _ = ScyllaExtensions::from_supported(s);
        }
        _ => {}
    }
    let mut again = BytesMut::new();
    resp.encode_body(&mut again, ctx.version)
        .unwrap_or_else(|e| panic!("decoded {resp:?} but cannot encode it: {e}"));
    let back = Response::decode(opcode, again.freeze(), ctx)
        .unwrap_or_else(|e| panic!("re-encoded {resp:?} does not decode: {e}"));
    assert_eq!(back, resp, "a response changed on a second trip");
    Some(resp)
}

/// Decodes a request body (the server side of the in-process cluster).
pub fn request(opcode: Opcode, body: &[u8], ctx: &ResponseContext, tablets_v2: bool) {
    let rctx = RequestContext {
        version: ctx.version,
        use_metadata_id: ctx.use_metadata_id,
        tablets_routing_v2: tablets_v2,
    };
    if let Ok(req) = Request::decode_in(opcode, body, &rctx) {
        let _ = req.into_owned();
    }
}

/// Decodes the frames at the start of `data`, one after the other, until
/// one does not decode.
fn frames(mut data: &[u8], lz4: bool, ctx: &ResponseContext) {
    let mut cache = SpecCache::new();
    while let Ok(Some((_, len))) = frame_len(data, MAX_BODY) {
        if !frame(&data[..len], lz4, ctx, &mut cache) {
            return;
        }
        data = &data[len..];
    }
}

/// Decodes one whole frame (header, envelope, message) on a connection
/// like `ctx` (its version is the frame's own); whether it got as far as
/// the message decoder.
pub fn frame(f: &[u8], lz4: bool, ctx: &ResponseContext, cache: &mut SpecCache) -> bool {
    let Ok(Some((header, len))) = frame_len(f, MAX_BODY) else {
        return false;
    };
    let body = Bytes::copy_from_slice(&f[HEADER_LEN..len]);
    let compression = lz4.then_some(Compression::Lz4);
    let Ok(env) = decode_envelope(&header, body, compression, MAX_BODY) else {
        return false;
    };
    let ctx = ctx.with_version(header.version);
    if header.direction == Direction::Request {
        request(header.opcode, &env.body, &ctx, false);
        return true;
    }
    let Some(resp) = response(header.opcode, env.body.clone(), &ctx, Some(cache)) else {
        return true;
    };
    // The whole frame again, extras included (uncompressed): the same
    // extras and message come back.
    let extras = FrameExtras {
        tracing_id: env.tracing_id,
        warnings: &env.warnings,
        custom_payload: env.custom_payload.as_ref(),
        ..FrameExtras::NONE
    };
    let mut out = BytesMut::new();
    encode_frame(
        &mut out,
        header.version,
        Direction::Response,
        header.stream,
        &resp,
        &extras,
        None,
    )
    .unwrap_or_else(|e| panic!("decoded frame {env:?} but cannot encode it: {e}"));
    let (h2, len2) = frame_len(&out, usize::MAX)
        .ok()
        .flatten()
        .expect("an encoded frame has a whole header");
    assert_eq!(len2, out.len());
    let env2 = decode_envelope(&h2, out.freeze().slice(HEADER_LEN..), None, usize::MAX)
        .expect("an encoded envelope decodes");
    assert_eq!(env2.tracing_id, env.tracing_id);
    assert_eq!(env2.warnings, env.warnings);
    assert_eq!(env2.custom_payload, env.custom_payload);
    let back = Response::decode(h2.opcode, env2.body, &ctx).expect("an encoded message decodes");
    assert_eq!(back, resp, "a frame's message changed on a second trip");
    true
}

/// Runs `raw` through a segment decoder, handed over in pieces of the given
/// sizes (the rest at once), and returns the envelopes it gave out before
/// the end or the first error.
fn deframe(raw: &[u8], compressed: bool, pieces: &[usize]) -> (Vec<Bytes>, Option<SegmentError>) {
    let mut dec = SegmentDecoder::new(compressed, MAX_BODY);
    let mut buf = BytesMut::new();
    let mut envelopes = Vec::new();
    let mut fed = 0;
    let mut pieces = pieces.iter();
    loop {
        let n = pieces
            .next()
            .map_or(raw.len() - fed, |&n| n.min(raw.len() - fed));
        buf.extend_from_slice(&raw[fed..fed + n]);
        fed += n;
        loop {
            match dec.decode_next(&mut buf) {
                Ok(Some(e)) => {
                    assert!(e.len() <= MAX_BODY, "an envelope above the limit");
                    envelopes.push(e);
                }
                Ok(None) => break,
                Err(e) => {
                    // Errors stick.
                    assert_eq!(dec.decode_next(&mut buf), Err(e.clone()));
                    return (envelopes, Some(e));
                }
            }
        }
        let _ = dec.needed(&buf);
        if fed == raw.len() {
            return (envelopes, None);
        }
    }
}

/// Deframes `raw`; every envelope goes through the frame decoders, and the
/// envelopes framed again deframe to the same envelopes.
fn stream(raw: &[u8], compressed: bool, pieces: &[usize], ctx: &ResponseContext) {
    let (envelopes, _) = deframe(raw, compressed, pieces);
    let mut cache = SpecCache::new();
    for e in &envelopes {
        frame(e, false, ctx, &mut cache);
    }
    if envelopes.is_empty() {
        return;
    }
    let joined: Vec<u8> = envelopes.concat();
    let mut enc = SegmentEncoder::new(compressed);
    let mut out = BytesMut::new();
    enc.encode_envelopes(&joined, &mut out)
        .unwrap_or_else(|e| panic!("deframed envelopes do not frame again: {e}"));
    let (again, err) = deframe(&out, compressed, &[]);
    assert_eq!(err, None, "framed envelopes do not deframe");
    assert_eq!(again, envelopes, "envelopes changed on a second trip");
}

fn segments(data: &[u8], lz4: bool, ctx: &ResponseContext) {
    // Whole, then byte by byte for short inputs (the incremental path).
    stream(data, lz4, &[], ctx);
    if data.len() <= 64 {
        let ones = vec![1; data.len()];
        let (a, ea) = deframe(data, lz4, &[]);
        let (b, eb) = deframe(data, lz4, &ones);
        assert_eq!(a, b, "envelopes depend on how the bytes arrived");
        assert_eq!(ea.is_some(), eb.is_some());
    }
}

/// Segments with valid checksums from `data`: a control byte (bit 0
/// self-contained, bit 1 a compressed-format payload with the next two
/// bytes as its uncompressed length, bit 2 cut the stream here for the
/// reader), a length byte, then that many payload bytes.
fn built_segments(mut data: &[u8], lz4: bool, ctx: &ResponseContext) {
    let mut raw = BytesMut::new();
    let mut pieces = Vec::new();
    let mut last_cut = 0;
    while let Some((&control, rest)) = data.split_first() {
        data = rest;
        let mut uncompressed_len = 0;
        if lz4 && control & 2 != 0 {
            let Some((len, rest)) = data.split_first_chunk::<2>() else {
                break;
            };
            data = rest;
            uncompressed_len = usize::from(u16::from_le_bytes(*len)) << (control >> 7);
        }
        let Some((&len, rest)) = data.split_first() else {
            break;
        };
        let len = usize::from(len).min(rest.len());
        let (payload, rest) = rest.split_at(len);
        data = rest;
        let self_contained = control & 1 != 0;
        let built = if lz4 {
            segment::encode_compressed(&mut raw, payload, uncompressed_len, self_contained)
        } else {
            segment::encode(&mut raw, payload, self_contained)
        };
        built.expect("short payloads always fit a segment");
        if control & 4 != 0 {
            pieces.push(raw.len() - last_cut);
            last_cut = raw.len();
        }
    }
    stream(&raw, lz4, &pieces, ctx);
}

/// One segment: if it decodes, the same header and payload encode to a
/// segment that decodes the same.
fn one_segment(data: &[u8], compressed: bool) {
    let header = segment::decode_header(data, compressed);
    let Ok(Some(seg)) = segment::decode(data, compressed) else {
        return;
    };
    assert_eq!(header, Ok(Some(seg.header)));
    assert_eq!(
        seg.len,
        segment::header_and_crc_len(compressed) + seg.payload.len() + segment::TRAILER_LEN
    );
    let mut out = BytesMut::new();
    let h = seg.header;
    if compressed {
        segment::encode_compressed(&mut out, seg.payload, h.uncompressed_len, h.self_contained)
    } else {
        segment::encode(&mut out, seg.payload, h.self_contained)
    }
    .expect("a decoded segment encodes");
    let back = segment::decode(&out, compressed)
        .expect("an encoded segment decodes")
        .expect("an encoded segment is whole");
    assert_eq!(back.header, seg.header);
    assert_eq!(back.payload, seg.payload);
}

/// A compressed body, LZ4 (4-byte length, then a block) and Snappy alike:
/// both decompressors agree, and what decompresses survives a compression
/// round trip.
fn compressed_body(data: &[u8]) {
    compressed_body_in(Compression::Lz4, data);
    compressed_body_in(Compression::Snappy, data);
}

fn compressed_body_in(algorithm: Compression, data: &[u8]) {
    let plain = algorithm.decompress(data, MAX_BODY);
    let mut d = Decompressor::new(algorithm);
    let shared = d.decompress(data, MAX_BODY);
    assert_eq!(plain, shared, "the decompressors disagree");
    // Twice through the reused buffer.
    assert_eq!(d.decompress(data, MAX_BODY), shared);
    let Ok(out) = plain else {
        return;
    };
    assert!(out.len() <= MAX_BODY);
    let mut c = Compressor::new(algorithm);
    let mut packed = BytesMut::new();
    c.compress_into(&out, &mut packed)
        .expect("a decompressed body compresses");
    let back = algorithm
        .decompress(&packed, MAX_BODY)
        .expect("a compressed body decompresses");
    assert_eq!(back, out);
}

/// SUPPORTED options (a `[string multimap]`) and the tablet routing
/// payloads, which arrive as custom payload values.
fn payloads(data: &[u8]) {
    let mut r = WireReader::new(data);
    if let Ok(map) = r.read_string_multimap("fuzz") {
        let _ = map.len();
    }
    if let Ok(Response::Supported(s)) =
        Response::decode(Opcode::Supported, Bytes::copy_from_slice(data), &context(0))
    {
        let ext = ScyllaExtensions::from_supported(&s);
        let _ = ext.to_supported();
    }
    if let Ok(t) = TabletRoutingInfo::decode(data) {
        let bytes = t.encode().expect("a decoded tablet encodes");
        assert_eq!(TabletRoutingInfo::decode(&bytes).ok(), Some(t));
    }
    if let Ok(t) = TabletRoutingV2::decode(data) {
        let bytes = t.encode().expect("a decoded tablet encodes");
        assert_eq!(TabletRoutingV2::decode(&bytes).ok(), Some(t));
    }
}
