//! QUERY (section 4.1.4): a CQL string (`[long string]`) and its parameters.

use crate::frame::ProtocolVersion;
use std::borrow::Cow;

use bytes::BytesMut;

use super::query_params::QueryParameters;
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// A QUERY request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query<'a> {
    /// The CQL text.
    pub contents: Cow<'a, str>,
    /// How to run it.
    pub params: QueryParameters<'a>,
}

impl<'a> Query<'a> {
    /// A copy that owns all its data.
    pub fn into_owned(self) -> Query<'static> {
        Query {
            contents: Cow::Owned(self.contents.into_owned()),
            params: self.params.into_owned(),
        }
    }

    /// Decodes a body written for `version`, borrowing the text.
    pub fn decode(r: &mut WireReader<'a>, version: ProtocolVersion) -> Result<Self, DecodeError> {
        let contents = Cow::Borrowed(r.read_long_string("query string")?);
        let params = QueryParameters::decode(r, version)?;
        Ok(Self { contents, params })
    }
}

impl MessageBody for Query<'_> {
    fn opcode(&self) -> Opcode {
        Opcode::Query
    }

    fn encode_body(&self, buf: &mut BytesMut, version: ProtocolVersion) -> Result<(), EncodeError> {
        wire::put_long_string(buf, &self.contents, "query string")?;
        self.params.encode(buf, version)
    }
}
