//! AUTH_RESPONSE (section 4.1.2): one SASL token, a `[bytes]` (may be null).

use crate::frame::ProtocolVersion;
use std::borrow::Cow;
use std::fmt;

use bytes::BytesMut;

use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// An AUTH_RESPONSE request.
///
/// Its `Debug` output shows the token's length, never its bytes (a SASL
/// PLAIN token holds the password).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct AuthResponse<'a> {
    /// The token; `None` is a null `[bytes]`.
    pub token: Option<Cow<'a, [u8]>>,
}

impl fmt::Debug for AuthResponse<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Redacted(usize);
        impl fmt::Debug for Redacted {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "<{} bytes redacted>", self.0)
            }
        }
        f.debug_struct("AuthResponse")
            .field("token", &self.token.as_ref().map(|t| Redacted(t.len())))
            .finish()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_the_length_of_the_token_not_its_bytes() {
        let r = AuthResponse {
            token: Some(Cow::Borrowed(b"\0u\0pw")),
        };
        assert_eq!(
            format!("{r:?}"),
            "AuthResponse { token: Some(<5 bytes redacted>) }"
        );
        let null = AuthResponse { token: None };
        assert_eq!(format!("{null:?}"), "AuthResponse { token: None }");
    }
}
