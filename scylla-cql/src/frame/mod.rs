//! Frames: a 9-byte [`header`] and a body, for every opcode in both directions.
//!
//! - [`header`]: version/direction, flags, stream id, opcode, body length (checked
//!   against a maximum before the body is read).
//! - [`envelope`]: whole frames: flags, extras (tracing, warnings, custom
//!   payload), compression; encode for either direction and decode.
//! - [`wire`]: the spec's notation types (`[short]`, `[string]`, `[value]`, ...).
//! - [`request`]: messages a client sends (STARTUP, OPTIONS, QUERY, ...).
//! - [`response`]: messages a server sends (ERROR, READY, RESULT, EVENT, ...).
//! - [`tablets`]: ScyllaDB's `tablets-routing-v1` custom payload.
//! - [`segment`]: protocol v5 framing (checksummed segments around envelopes).
//! - [`segment_stream`]: v5 framing of a whole stream: envelopes packed into
//!   segments (LZ4 per segment), and a deframer handing envelopes back out.
//! - [`version`]: the protocol versions (v4, v5) and where they differ.
//!
//! Encoding appends to a caller-owned `BytesMut` (the connection writer's
//! reusable buffer); decoding reads from a slice or a shared `Bytes` and
//! reports "not enough bytes yet" as `Ok(None)`, never as an error.

pub mod envelope;
pub mod header;
pub mod request;
pub mod response;
pub mod segment;
pub mod segment_stream;
pub mod tablets;
pub mod version;
pub mod wire;

pub use envelope::{
    decode_envelope, encode_frame, encode_frame_limited, frame_len, CustomPayload, Envelope,
    FrameExtras,
};
pub use header::{Direction, Flags, FrameHeader, Opcode, DEFAULT_MAX_BODY_LEN, HEADER_LEN};
pub use version::ProtocolVersion;

use bytes::BytesMut;

use crate::error::EncodeError;

/// A message that can be written as the body of a frame.
///
/// Requests and responses implement it; the envelope code (header, flags,
/// compression) is shared.
pub trait MessageBody {
    /// The frame opcode of this message.
    fn opcode(&self) -> Opcode;
    /// Appends the (uncompressed) body to `buf`, as `version` writes it.
    fn encode_body(&self, buf: &mut BytesMut, version: ProtocolVersion) -> Result<(), EncodeError>;
}
