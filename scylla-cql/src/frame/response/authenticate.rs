//! AUTHENTICATE (section 4.2.3): the server requires SASL authentication and
//! names the authenticator class, which tells the client what to send.

use crate::frame::ProtocolVersion;
use bytes::BytesMut;

use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// An AUTHENTICATE response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticate {
    /// Full class name of the server's authenticator, e.g.
    /// `org.apache.cassandra.auth.PasswordAuthenticator`.
    pub authenticator: String,
}

impl Authenticate {
    /// Decodes an AUTHENTICATE body.
    pub fn decode(r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            authenticator: r.read_string("authenticator class")?.to_owned(),
        })
    }
}

impl MessageBody for Authenticate {
    fn opcode(&self) -> Opcode {
        Opcode::Authenticate
    }

    fn encode_body(
        &self,
        buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        wire::put_string(buf, &self.authenticator, "authenticator class")
    }
}
