//! AUTH_CHALLENGE and AUTH_SUCCESS (sections 4.2.7 and 4.2.8): the server's
//! steps of a SASL exchange. Each body is a single `[bytes]` token, which may
//! be null; its meaning belongs to the authenticator.

use crate::frame::ProtocolVersion;
use bytes::{Bytes, BytesMut};

use super::share;
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// An AUTH_CHALLENGE response: a token the client must answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthChallenge {
    /// The challenge token (`None` if null).
    pub token: Option<Bytes>,
}

/// An AUTH_SUCCESS response: authentication finished.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthSuccess {
    /// Final information from the server (`None` if null).
    pub token: Option<Bytes>,
}

fn decode_token(
    body: &Bytes,
    r: &mut WireReader<'_>,
    what: &'static str,
) -> Result<Option<Bytes>, DecodeError> {
    Ok(r.read_bytes(what)?.map(|t| share(body, t)))
}

impl AuthChallenge {
    /// Decodes an AUTH_CHALLENGE body; the token shares `body`'s buffer.
    pub fn decode(body: &Bytes, r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            token: decode_token(body, r, "auth challenge token")?,
        })
    }
}

impl AuthSuccess {
    /// Decodes an AUTH_SUCCESS body; the token shares `body`'s buffer.
    pub fn decode(body: &Bytes, r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            token: decode_token(body, r, "auth success token")?,
        })
    }
}

impl MessageBody for AuthChallenge {
    fn opcode(&self) -> Opcode {
        Opcode::AuthChallenge
    }

    fn encode_body(
        &self,
        buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        wire::put_bytes(buf, self.token.as_deref(), "auth challenge token")
    }
}

impl MessageBody for AuthSuccess {
    fn opcode(&self) -> Opcode {
        Opcode::AuthSuccess
    }

    fn encode_body(
        &self,
        buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        wire::put_bytes(buf, self.token.as_deref(), "auth success token")
    }
}
