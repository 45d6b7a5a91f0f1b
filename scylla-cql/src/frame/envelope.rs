//! The frame envelope: header, optional compression, and the extras that
//! precede the message in the body (section 2.2 and the start of section 4 of
//! the v4 spec):
//!
//! ```text
//! header | [tracing id (responses)] [warnings (responses)] [custom payload] message
//!        '------------- compressed together if the COMPRESSION flag is set -------'
//! ```
//!
//! This is the one place that writes and reads whole frames, for both
//! directions: the driver encodes requests and decodes responses, the
//! in-process test server does the opposite. Message bodies come from any
//! [`MessageBody`].
//!
//! [`encode_frame`] *appends* a frame to a buffer that may already hold other
//! frames (the connection writer coalesces frames), and never leaves a partial
//! frame behind on error. [`frame_len`] tells a reader whether a whole frame is
//! buffered; [`decode_envelope`] then strips compression and extras and hands
//! back the message body as a shared [`Bytes`].

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use uuid::Uuid;

use super::header::{Direction, Flags, FrameHeader, Opcode, DEFAULT_MAX_BODY_LEN, HEADER_LEN};
use super::version::ProtocolVersion;
use super::wire::{self, WireReader};
use super::MessageBody;
use crate::compression::{Compression, Compressor, Decompressor};
use crate::error::{DecodeError, EncodeError};

/// A custom payload (`[bytes map]`): names to optional byte values.
pub type CustomPayload = HashMap<String, Option<Vec<u8>>>;

/// What a frame carries besides its message: flags and the items that precede
/// the message in the body. Borrowed, so encoding needs no copies;
/// `FrameExtras::default()` is "nothing".
#[derive(Debug, Clone, Copy, Default)]
pub struct FrameExtras<'a> {
    /// Requests only: ask the server to trace this request (TRACING flag, no bytes).
    pub tracing: bool,
    /// Responses only: the tracing session id (TRACING flag, a `[uuid]` first in the body).
    pub tracing_id: Option<Uuid>,
    /// Responses only: server warnings (WARNING flag, a `[string list]`); empty = no flag.
    pub warnings: &'a [String],
    /// Both directions: a custom payload (CUSTOM_PAYLOAD flag, a `[bytes map]`).
    /// `Some` of an empty map still sets the flag.
    pub custom_payload: Option<&'a CustomPayload>,
    /// Sets the BETA flag (this crate speaks v4, which is not a beta version).
    pub beta: bool,
}

impl FrameExtras<'_> {
    /// No extras.
    pub const NONE: FrameExtras<'static> = FrameExtras {
        tracing: false,
        tracing_id: None,
        warnings: &[],
        custom_payload: None,
        beta: false,
    };
}

/// Appends one whole frame to `buf`, with a body length limit of
/// [`DEFAULT_MAX_BODY_LEN`] (the protocol's 256 MiB). See [`encode_frame_limited`].
pub fn encode_frame(
    buf: &mut BytesMut,
    version: ProtocolVersion,
    direction: Direction,
    stream: i16,
    msg: &(impl MessageBody + ?Sized),
    extras: &FrameExtras<'_>,
    compression: Option<&mut Compressor>,
) -> Result<(), EncodeError> {
    encode_frame_limited(
        buf,
        version,
        direction,
        stream,
        msg,
        extras,
        compression,
        DEFAULT_MAX_BODY_LEN,
    )
}

/// Appends one whole frame (header, extras, message) to `buf`, which may
/// already hold other frames.
///
/// - The header carries `version`, and the message is written as that
///   version writes it.
/// - `direction` must be the direction of `msg`'s opcode; a request's `stream`
///   must be non-negative (negative ids are reserved for the server).
/// - Request frames may carry `tracing` and a custom payload; a `tracing_id` or
///   warnings on a request is an [`EncodeError::Invalid`]. Response frames set
///   the TRACING flag iff `tracing_id` is given (`tracing: true` without an id
///   is invalid).
/// - With a `compression`, the body (extras included) is written to the
///   compressor's scratch buffer and compressed into `buf`, and the COMPRESSION
///   flag is set. STARTUP and OPTIONS are never compressed: they may precede
///   the negotiation (section 5). In v5 envelopes are never compressed (the
///   segments around them are): a `compression` there is an
///   [`EncodeError::Invalid`].
/// - Without compression the body is written in place and the header's length
///   back-filled: no allocation beyond `buf`'s growth.
/// - A body longer than `max_body_len` gives [`EncodeError::FrameTooLarge`].
///
/// On any error `buf` is truncated back to its length before the call.
// Each argument is a separate part of the frame or a limit; bundling them
// would only move the list into a struct literal at every call.
#[allow(clippy::too_many_arguments)]
pub fn encode_frame_limited(
    buf: &mut BytesMut,
    version: ProtocolVersion,
    direction: Direction,
    stream: i16,
    msg: &(impl MessageBody + ?Sized),
    extras: &FrameExtras<'_>,
    compression: Option<&mut Compressor>,
    max_body_len: usize,
) -> Result<(), EncodeError> {
    let start = buf.len();
    let result = encode_inner(
        buf,
        version,
        direction,
        stream,
        msg,
        extras,
        compression,
        max_body_len,
    );
    if result.is_err() {
        buf.truncate(start);
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn encode_inner(
    buf: &mut BytesMut,
    version: ProtocolVersion,
    direction: Direction,
    stream: i16,
    msg: &(impl MessageBody + ?Sized),
    extras: &FrameExtras<'_>,
    compression: Option<&mut Compressor>,
    max_body_len: usize,
) -> Result<(), EncodeError> {
    let opcode = msg.opcode();
    if opcode.direction() != direction {
        return Err(EncodeError::Invalid(
            "message opcode does not travel in the frame's direction",
        ));
    }
    if direction == Direction::Request && stream < 0 {
        // Negative ids are reserved for server-initiated streams (section 2.3).
        return Err(EncodeError::Invalid(
            "request stream ids must be non-negative",
        ));
    }
    let mut flags = extras_flags(direction, extras)?;
    if compression.is_some() && version.uses_segments() {
        return Err(EncodeError::Invalid(
            "v5 envelopes are not compressed (their segments are)",
        ));
    }
    let compression = compression.filter(|_| !matches!(opcode, Opcode::Startup | Opcode::Options));
    if compression.is_some() {
        flags = flags.with(Flags::COMPRESSION);
    }
    let header_at = buf.len();
    FrameHeader {
        version,
        direction,
        flags,
        stream,
        opcode,
        body_len: 0,
    }
    .encode(buf);
    let body_at = buf.len();
    match compression {
        None => {
            write_extras(buf, extras)?;
            msg.encode_body(buf, version)?;
        }
        Some(c) => {
            let scratch = c.scratch();
            write_extras(scratch, extras)?;
            msg.encode_body(scratch, version)?;
            // Check the uncompressed size too: the peer checks it when decompressing.
            check_len(scratch.len(), max_body_len)?;
            c.compress_scratch_into(buf)?;
        }
    }
    let body_len = buf.len() - body_at;
    check_len(body_len, max_body_len)?;
    // check_len bounds body_len by i32::MAX, so it fits in u32.
    buf[header_at + 5..header_at + HEADER_LEN].copy_from_slice(&(body_len as u32).to_be_bytes());
    Ok(())
}

fn check_len(len: usize, max_body_len: usize) -> Result<(), EncodeError> {
    let limit = max_body_len.min(i32::MAX as usize);
    if len > limit {
        return Err(EncodeError::FrameTooLarge { length: len, limit });
    }
    Ok(())
}

fn extras_flags(direction: Direction, extras: &FrameExtras<'_>) -> Result<Flags, EncodeError> {
    let mut flags = Flags::empty();
    match direction {
        Direction::Request => {
            if extras.tracing_id.is_some() {
                return Err(EncodeError::Invalid("a request cannot carry a tracing id"));
            }
            if !extras.warnings.is_empty() {
                return Err(EncodeError::Invalid("a request cannot carry warnings"));
            }
            if extras.tracing {
                flags = flags.with(Flags::TRACING);
            }
        }
        Direction::Response => {
            if extras.tracing && extras.tracing_id.is_none() {
                return Err(EncodeError::Invalid(
                    "a traced response must carry its tracing id",
                ));
            }
            if extras.tracing_id.is_some() {
                flags = flags.with(Flags::TRACING);
            }
            if !extras.warnings.is_empty() {
                flags = flags.with(Flags::WARNING);
            }
        }
    }
    if extras.custom_payload.is_some() {
        flags = flags.with(Flags::CUSTOM_PAYLOAD);
    }
    if extras.beta {
        flags = flags.with(Flags::BETA);
    }
    Ok(flags)
}

/// Writes the extras in the spec's order: tracing id, warnings, custom payload.
/// Which of them apply was validated by [`extras_flags`].
fn write_extras(buf: &mut BytesMut, extras: &FrameExtras<'_>) -> Result<(), EncodeError> {
    if let Some(id) = &extras.tracing_id {
        wire::put_uuid(buf, id);
    }
    if !extras.warnings.is_empty() {
        wire::put_string_list(buf, extras.warnings, "warnings")?;
    }
    if let Some(payload) = extras.custom_payload {
        wire::put_bytes_map(
            buf,
            payload.iter().map(|(k, v)| (k.as_str(), v.as_deref())),
            "custom payload",
        )?;
    }
    Ok(())
}

/// Whether `buf` starts with a whole frame: `Ok(None)` if more bytes are needed,
/// else the header and the total frame length (header included). Fails on a bad
/// header or a body longer than `max_body_len` as soon as the header is buffered.
pub fn frame_len(
    buf: &[u8],
    max_body_len: usize,
) -> Result<Option<(FrameHeader, usize)>, DecodeError> {
    match FrameHeader::decode(buf, max_body_len)? {
        Some(h) if buf.len() >= h.frame_len() => Ok(Some((h, h.frame_len()))),
        _ => Ok(None),
    }
}

/// A decoded frame: header, extras, and the message body (decompressed, extras
/// stripped), ready for `Request::decode` or the response decoder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The frame header as received.
    pub header: FrameHeader,
    /// Responses: the tracing session id (TRACING flag). Always `None` on requests.
    pub tracing_id: Option<Uuid>,
    /// Responses: server warnings (WARNING flag). Always empty on requests.
    pub warnings: Vec<String>,
    /// The custom payload (CUSTOM_PAYLOAD flag).
    pub custom_payload: Option<CustomPayload>,
    /// The message body.
    pub body: Bytes,
}

impl Envelope {
    /// Requests: whether the client asked for tracing.
    pub fn tracing_requested(&self) -> bool {
        self.header.flags.contains(Flags::TRACING)
    }
}

/// Decodes a frame body received with `header`.
///
/// `body` must be exactly the `header.body_len` bytes after the header.
/// If the COMPRESSION flag is set on a v4 frame the body is decompressed with `compression`
/// (an error if none was negotiated), its uncompressed size bounded by
/// `max_body_len`. Then the extras the flags announce are read: on a response,
/// tracing id, warnings, custom payload; on a request, only the custom payload
/// (the TRACING flag of a request carries no bytes, and the WARNING flag is
/// meaningless there and ignored, like the unused flag bits). In v5 the
/// COMPRESSION flag is ignored, as the spec says: segments carry compression.
pub fn decode_envelope(
    header: &FrameHeader,
    body: Bytes,
    compression: Option<Compression>,
    max_body_len: usize,
) -> Result<Envelope, DecodeError> {
    decode_envelope_in(
        header,
        body,
        compression.map(|c| move |b: &[u8], max| c.decompress(b, max)),
        max_body_len,
    )
}

/// [`decode_envelope`] decompressing v4 bodies with `decompressor`, whose
/// shared buffer spares an allocation per compressed frame (one per
/// connection reader).
pub fn decode_envelope_with(
    header: &FrameHeader,
    body: Bytes,
    decompressor: Option<&mut Decompressor>,
    max_body_len: usize,
) -> Result<Envelope, DecodeError> {
    decode_envelope_in(
        header,
        body,
        decompressor.map(|d| |b: &[u8], max| d.decompress(b, max)),
        max_body_len,
    )
}

fn decode_envelope_in(
    header: &FrameHeader,
    body: Bytes,
    decompress: Option<impl FnOnce(&[u8], usize) -> Result<Bytes, DecodeError>>,
    max_body_len: usize,
) -> Result<Envelope, DecodeError> {
    if body.len() != header.body_len as usize {
        return Err(DecodeError::InvalidLength {
            what: "frame body",
            length: body.len() as i64,
            offset: HEADER_LEN,
        });
    }
    let compressed = header.flags.contains(Flags::COMPRESSION) && !header.version.uses_segments();
    let body = if compressed {
        let decompress = decompress.ok_or(DecodeError::Decompression(
            "compressed frame but no compression was negotiated",
        ))?;
        decompress(&body, max_body_len)?
    } else {
        body
    };
    let flags = header.flags;
    let mut r = WireReader::new(&body);
    let mut tracing_id = None;
    let mut warnings = Vec::new();
    if header.direction == Direction::Response {
        if flags.contains(Flags::TRACING) {
            tracing_id = Some(r.read_uuid("tracing id")?);
        }
        if flags.contains(Flags::WARNING) {
            warnings = r.read_string_list("warnings")?;
        }
    }
    let custom_payload = if flags.contains(Flags::CUSTOM_PAYLOAD) {
        Some(r.read_bytes_map("custom payload")?)
    } else {
        None
    };
    let body = body.slice(r.position()..);
    Ok(Envelope {
        header: *header,
        tracing_id,
        warnings,
        custom_payload,
        body,
    })
}

#[cfg(test)]
#[path = "envelope_tests.rs"]
mod tests;
