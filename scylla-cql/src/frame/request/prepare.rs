//! PREPARE (section 4.1.5): the CQL string to prepare, a `[long string]`; in
//! v5 followed by `[int]` flags and, with flag 0x01, the keyspace to prepare
//! the statement in (a `[string]`).
//!
//! ```text
//! v4: <query>
//! v5: <query><flags>[<keyspace>]
//! ```

use crate::frame::ProtocolVersion;
use std::borrow::Cow;

use bytes::BytesMut;

use super::query_params::KEYSPACE_NEEDS_V5;
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// PREPARE flag: a keyspace follows (v5).
const WITH_KEYSPACE: i32 = 0x01;

/// A PREPARE request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepare<'a> {
    /// The CQL text.
    pub query: Cow<'a, str>,
    /// The keyspace to prepare in, overriding the connection's (v5 only: on
    /// v4 it is an [`EncodeError::Invalid`]).
    pub keyspace: Option<Cow<'a, str>>,
}

impl<'a> Prepare<'a> {
    /// A PREPARE of `query` without a keyspace of its own.
    pub fn new(query: impl Into<Cow<'a, str>>) -> Self {
        Self {
            query: query.into(),
            keyspace: None,
        }
    }

    /// A copy that owns all its data.
    pub fn into_owned(self) -> Prepare<'static> {
        Prepare {
            query: Cow::Owned(self.query.into_owned()),
            keyspace: self.keyspace.map(|k| Cow::Owned(k.into_owned())),
        }
    }

    /// Decodes a body written for `version`, borrowing the text.
    pub fn decode(r: &mut WireReader<'a>, version: ProtocolVersion) -> Result<Self, DecodeError> {
        let query = Cow::Borrowed(r.read_long_string("query string")?);
        let keyspace = match version {
            ProtocolVersion::V4 => None,
            ProtocolVersion::V5 => {
                let flags = r.read_int("prepare flags")?;
                if flags & !WITH_KEYSPACE != 0 {
                    return Err(DecodeError::InvalidValue {
                        what: "prepare flags",
                        value: i64::from(flags),
                    });
                }
                if flags & WITH_KEYSPACE != 0 {
                    Some(Cow::Borrowed(r.read_string("keyspace")?))
                } else {
                    None
                }
            }
        };
        Ok(Self { query, keyspace })
    }
}

impl MessageBody for Prepare<'_> {
    fn opcode(&self) -> Opcode {
        Opcode::Prepare
    }

    fn encode_body(&self, buf: &mut BytesMut, version: ProtocolVersion) -> Result<(), EncodeError> {
        if version == ProtocolVersion::V4 && self.keyspace.is_some() {
            return Err(EncodeError::Invalid(KEYSPACE_NEEDS_V5));
        }
        wire::put_long_string(buf, &self.query, "query string")?;
        if version == ProtocolVersion::V5 {
            match &self.keyspace {
                Some(ks) => {
                    wire::put_int(buf, WITH_KEYSPACE);
                    wire::put_string(buf, ks, "keyspace")?;
                }
                None => wire::put_int(buf, 0),
            }
        }
        Ok(())
    }
}
