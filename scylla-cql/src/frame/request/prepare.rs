//! PREPARE (section 4.1.5): the CQL string to prepare, a `[long string]`.

use crate::frame::ProtocolVersion;
use std::borrow::Cow;

use bytes::BytesMut;

use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// A PREPARE request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepare<'a> {
    /// The CQL text.
    pub query: Cow<'a, str>,
}

impl<'a> Prepare<'a> {
    /// A copy that owns all its data.
    pub fn into_owned(self) -> Prepare<'static> {
        Prepare {
            query: Cow::Owned(self.query.into_owned()),
        }
    }

    /// Decodes the body, borrowing the text.
    pub fn decode(r: &mut WireReader<'a>) -> Result<Self, DecodeError> {
        Ok(Self {
            query: Cow::Borrowed(r.read_long_string("query string")?),
        })
    }
}

impl MessageBody for Prepare<'_> {
    fn opcode(&self) -> Opcode {
        Opcode::Prepare
    }

    fn encode_body(
        &self,
        buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        wire::put_long_string(buf, &self.query, "query string")
    }
}
