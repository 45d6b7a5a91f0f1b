//! READY (section 4.2.2): the server accepted STARTUP without authentication.
//! Its body is empty.

use crate::frame::ProtocolVersion;
use bytes::BytesMut;

use crate::error::EncodeError;
use crate::frame::{MessageBody, Opcode};

/// A READY response (empty body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ready;

impl MessageBody for Ready {
    fn opcode(&self) -> Opcode {
        Opcode::Ready
    }

    fn encode_body(
        &self,
        _buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        Ok(())
    }
}
