//! Responses (server to client): every v4 response message, decoded for the
//! driver and encoded for the in-process test cluster.
//!
//! [`Response::decode`] takes a frame body that the envelope code has already
//! stripped of its tracing id, warnings and custom payload, and decompressed.
//! The body is a shared [`Bytes`]: the parts of a response that can be large
//! (rows, paging state, prepared ids, auth tokens) are kept as slices of it
//! rather than copied.
//!
//! Some of the wire format depends on what the connection negotiated (the
//! error code ScyllaDB uses for its rate-limit error is advertised in
//! SUPPORTED, not fixed); [`ResponseContext`] carries that state.
//!
//! - [`error`]: ERROR and every error code with its body.
//! - [`ready`], [`authenticate`], [`auth`]: the handshake messages.
//! - [`supported`]: SUPPORTED and ScyllaDB's extensions parsed from it.
//! - [`result`]: RESULT (void, rows, set keyspace, prepared, schema change).
//! - [`event`]: EVENT (topology, status, schema and client-routes changes).

pub mod auth;
pub mod authenticate;
pub mod error;
pub mod event;
pub mod ready;
pub mod result;
pub mod supported;

pub use auth::{AuthChallenge, AuthSuccess};
pub use authenticate::Authenticate;
pub use error::{DbError, ErrorResponse, OperationType, WriteType};
pub use event::Event;
pub use ready::Ready;
pub use result::ResultBody;
pub use supported::{ExtensionError, ScyllaExtensions, ShardingInfo, Supported};

use crate::frame::ProtocolVersion;
use bytes::{Bytes, BytesMut};

use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::WireReader;
use crate::frame::{Direction, MessageBody, Opcode};

/// What decoding a response needs to know about its connection.
///
/// Built from the SUPPORTED response of the handshake (see
/// [`ResponseContext::from_extensions`]); the default suits a connection that
/// negotiated no ScyllaDB extension (Cassandra).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResponseContext {
    /// The protocol version of the connection.
    pub version: ProtocolVersion,
    /// The error code of ScyllaDB's rate-limit error (`SCYLLA_RATE_LIMIT_ERROR`),
    /// if the extension was negotiated.
    pub rate_limit_error_code: Option<i32>,
    /// The bit of prepared metadata flags that marks an LWT statement
    /// (`SCYLLA_LWT_ADD_METADATA_MARK`), if the extension was negotiated.
    pub lwt_metadata_mask: Option<u32>,
    /// Whether PREPARED results carry a result metadata id on v4
    /// (`SCYLLA_USE_METADATA_ID`, which the driver asks for in STARTUP).
    /// v5 carries it regardless.
    pub use_metadata_id: bool,
}

impl ResponseContext {
    /// The context implied by a parsed SUPPORTED response (protocol v4;
    /// see [`with_version`](Self::with_version)).
    pub fn from_extensions(ext: &ScyllaExtensions) -> Self {
        Self {
            version: ProtocolVersion::V4,
            rate_limit_error_code: ext.rate_limit_error_code,
            lwt_metadata_mask: ext.lwt_metadata_mask,
            use_metadata_id: ext.use_metadata_id,
        }
    }

    /// Whether PREPARED results on this connection carry a result metadata
    /// id (v5, or v4 with `SCYLLA_USE_METADATA_ID`).
    pub fn has_metadata_id(&self) -> bool {
        self.version == ProtocolVersion::V5 || self.use_metadata_id
    }

    /// This context for a connection speaking `version`.
    pub fn with_version(self, version: ProtocolVersion) -> Self {
        Self { version, ..self }
    }
}

/// A decoded response message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// ERROR
    Error(ErrorResponse),
    /// READY
    Ready(Ready),
    /// AUTHENTICATE
    Authenticate(Authenticate),
    /// SUPPORTED
    Supported(Supported),
    /// RESULT
    Result(ResultBody),
    /// EVENT
    Event(Event),
    /// AUTH_CHALLENGE
    AuthChallenge(AuthChallenge),
    /// AUTH_SUCCESS
    AuthSuccess(AuthSuccess),
}

impl Response {
    /// Decodes the body of a response frame with opcode `opcode`.
    ///
    /// The whole body must be consumed (except after an ERROR with an unknown
    /// code, whose extra content cannot be known). A request opcode fails with
    /// [`DecodeError::WrongDirection`].
    pub fn decode(
        opcode: Opcode,
        body: Bytes,
        ctx: &ResponseContext,
    ) -> Result<Response, DecodeError> {
        Self::decode_cached(opcode, body, ctx, None)
    }

    /// [`decode`](Self::decode), with the column specs of rows through
    /// `cache`: a connection's reader keeps one, so results with columns it
    /// has seen before decode without allocating (see [`SpecCache`]).
    ///
    /// [`SpecCache`]: result::SpecCache
    pub fn decode_cached(
        opcode: Opcode,
        body: Bytes,
        ctx: &ResponseContext,
        cache: Option<&mut result::SpecCache>,
    ) -> Result<Response, DecodeError> {
        if opcode.direction() != Direction::Response {
            return Err(DecodeError::WrongDirection {
                expected: "response",
            });
        }
        let mut r = WireReader::new(&body);
        let (what, response) = match opcode {
            Opcode::Error => {
                let e = ErrorResponse::decode(&body, &mut r, ctx)?;
                if matches!(e.error, DbError::Other(_)) {
                    // The body of an unknown error code is unknown past the
                    // message: what follows is not ours to reject.
                    return Ok(Response::Error(e));
                }
                ("ERROR", Response::Error(e))
            }
            Opcode::Ready => ("READY", Response::Ready(Ready)),
            Opcode::Authenticate => (
                "AUTHENTICATE",
                Response::Authenticate(Authenticate::decode(&mut r)?),
            ),
            Opcode::Supported => ("SUPPORTED", Response::Supported(Supported::decode(&mut r)?)),
            Opcode::Result => (
                "RESULT",
                Response::Result(ResultBody::decode_cached(&body, &mut r, ctx, cache)?),
            ),
            Opcode::Event => ("EVENT", Response::Event(Event::decode(&mut r)?)),
            Opcode::AuthChallenge => (
                "AUTH_CHALLENGE",
                Response::AuthChallenge(AuthChallenge::decode(&body, &mut r)?),
            ),
            Opcode::AuthSuccess => (
                "AUTH_SUCCESS",
                Response::AuthSuccess(AuthSuccess::decode(&body, &mut r)?),
            ),
            // Checked above: every other opcode is a request.
            _ => {
                return Err(DecodeError::WrongDirection {
                    expected: "response",
                })
            }
        };
        r.expect_end(what)?;
        Ok(response)
    }
}

impl MessageBody for Response {
    fn opcode(&self) -> Opcode {
        match self {
            Response::Error(m) => m.opcode(),
            Response::Ready(m) => m.opcode(),
            Response::Authenticate(m) => m.opcode(),
            Response::Supported(m) => m.opcode(),
            Response::Result(m) => m.opcode(),
            Response::Event(m) => m.opcode(),
            Response::AuthChallenge(m) => m.opcode(),
            Response::AuthSuccess(m) => m.opcode(),
        }
    }

    fn encode_body(&self, buf: &mut BytesMut, version: ProtocolVersion) -> Result<(), EncodeError> {
        match self {
            Response::Error(m) => m.encode_body(buf, version),
            Response::Ready(m) => m.encode_body(buf, version),
            Response::Authenticate(m) => m.encode_body(buf, version),
            Response::Supported(m) => m.encode_body(buf, version),
            Response::Result(m) => m.encode_body(buf, version),
            Response::Event(m) => m.encode_body(buf, version),
            Response::AuthChallenge(m) => m.encode_body(buf, version),
            Response::AuthSuccess(m) => m.encode_body(buf, version),
        }
    }
}

/// Shares `part`, a sub-slice of `body` read through a [`WireReader`] over it,
/// without copying. Falls back to a copy if `part` is not inside `body` (which
/// the callers rule out), so that this can never panic.
pub(crate) fn share(body: &Bytes, part: &[u8]) -> Bytes {
    let base = body.as_ptr() as usize;
    let start = (part.as_ptr() as usize).wrapping_sub(base);
    match start.checked_add(part.len()) {
        Some(end) if start <= body.len() && end <= body.len() => body.slice(start..end),
        _ => Bytes::copy_from_slice(part),
    }
}

#[cfg(test)]
mod tests;
