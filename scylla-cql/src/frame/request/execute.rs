//! EXECUTE (section 4.1.6): a prepared statement id (`[short bytes]`) and the
//! same parameters as QUERY.

use crate::frame::ProtocolVersion;
use std::borrow::Cow;

use bytes::BytesMut;

use super::query_params::QueryParameters;
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// An EXECUTE request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execute<'a> {
    /// The prepared statement id returned by PREPARE.
    pub id: Cow<'a, [u8]>,
    /// How to run it.
    pub params: QueryParameters<'a>,
}

impl<'a> Execute<'a> {
    /// A copy that owns all its data.
    pub fn into_owned(self) -> Execute<'static> {
        Execute {
            id: Cow::Owned(self.id.into_owned()),
            params: self.params.into_owned(),
        }
    }

    /// Decodes the body, borrowing the id.
    pub fn decode(r: &mut WireReader<'a>) -> Result<Self, DecodeError> {
        let id = Cow::Borrowed(r.read_short_bytes("prepared id")?);
        let params = QueryParameters::decode(r)?;
        Ok(Self { id, params })
    }
}

impl MessageBody for Execute<'_> {
    fn opcode(&self) -> Opcode {
        Opcode::Execute
    }

    fn encode_body(
        &self,
        buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        wire::put_short_bytes(buf, &self.id, "prepared id")?;
        self.params.encode(buf)
    }
}
