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

impl Query<'static> {
    /// `USE keyspace`, the name quoted where CQL needs it (the one way the
    /// driver builds this statement: at connection set-up, when a
    /// connection follows the session's keyspace, and for
    /// `Session::use_keyspace`).
    pub fn use_keyspace(keyspace: &str) -> Self {
        Query {
            contents: Cow::Owned(format!("USE {}", quote_identifier(keyspace))),
            params: QueryParameters::default(),
        }
    }
}

/// `name` as a CQL identifier: as is when it is a plain lowercase
/// identifier, otherwise double-quoted (inner quotes doubled), so that a
/// case-sensitive or unusual name means itself.
///
/// ```
/// use scylla_driver_cql::frame::request::query::quote_identifier;
/// assert_eq!(quote_identifier("ks_1"), "ks_1");
/// assert_eq!(quote_identifier("MyKs"), "\"MyKs\"");
/// assert_eq!(quote_identifier("a\"b"), "\"a\"\"b\"");
/// assert_eq!(quote_identifier("1ks"), "\"1ks\"");
/// ```
pub fn quote_identifier(name: &str) -> Cow<'_, str> {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(format!("\"{}\"", name.replace('"', "\"\"")))
    }
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
