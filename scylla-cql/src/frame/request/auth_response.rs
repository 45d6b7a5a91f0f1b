//! AUTH_RESPONSE (section 4.1.2): one SASL token, a `[bytes]` (may be null).

use crate::frame::ProtocolVersion;
use std::borrow::Cow;

use bytes::BytesMut;

use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// An AUTH_RESPONSE request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthResponse<'a> {
    /// The token; `None` is a null `[bytes]`.
    pub token: Option<Cow<'a, [u8]>>,
}

impl<'a> AuthResponse<'a> {
    /// A copy that owns all its data.
    pub fn into_owned(self) -> AuthResponse<'static> {
        AuthResponse {
            token: self.token.map(|t| Cow::Owned(t.into_owned())),
        }
    }

    /// Decodes the body, borrowing the token.
    pub fn decode(r: &mut WireReader<'a>) -> Result<Self, DecodeError> {
        Ok(Self {
            token: r.read_bytes("auth token")?.map(Cow::Borrowed),
        })
    }
}

impl MessageBody for AuthResponse<'_> {
    fn opcode(&self) -> Opcode {
        Opcode::AuthResponse
    }

    fn encode_body(
        &self,
        buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        wire::put_bytes(buf, self.token.as_deref(), "auth token")
    }
}
