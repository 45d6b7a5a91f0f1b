//! OPTIONS (section 4.1.3): asks for the server's supported STARTUP options.
//! The body is empty.

use crate::frame::ProtocolVersion;
use bytes::BytesMut;

use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::WireReader;
use crate::frame::{MessageBody, Opcode};

/// An OPTIONS request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options;

impl Options {
    /// Decodes the (empty) body.
    pub fn decode(_r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        Ok(Options)
    }
}

impl MessageBody for Options {
    fn opcode(&self) -> Opcode {
        Opcode::Options
    }

    fn encode_body(
        &self,
        _buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        Ok(())
    }
}
