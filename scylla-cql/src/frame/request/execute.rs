//! EXECUTE (section 4.1.6): a prepared statement id (`[short bytes]`), in v5
//! the id of the result metadata the client holds (`[short bytes]`), and the
//! same parameters as QUERY.
//!
//! ```text
//! v4: <id><query_parameters>
//! v5: <id><result_metadata_id><query_parameters>
//! ```
//!
//! ScyllaDB's `SCYLLA_USE_METADATA_ID` extension brings the v5 layout to v4:
//! on v4 the result metadata id is written when present (a client only has
//! one when the extension was negotiated), and decoding reads it when told
//! the extension is in use.

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
    /// The id of the result metadata the client decodes rows with: required
    /// on v5, written on v4 only when present (`SCYLLA_USE_METADATA_ID`).
    pub result_metadata_id: Option<Cow<'a, [u8]>>,
    /// How to run it.
    pub params: QueryParameters<'a>,
}

impl<'a> Execute<'a> {
    /// A copy that owns all its data.
    pub fn into_owned(self) -> Execute<'static> {
        Execute {
            id: Cow::Owned(self.id.into_owned()),
            result_metadata_id: self.result_metadata_id.map(|m| Cow::Owned(m.into_owned())),
            params: self.params.into_owned(),
        }
    }

    /// Decodes a body written for `version`, borrowing the ids. On v4,
    /// `use_metadata_id` says whether the connection negotiated
    /// `SCYLLA_USE_METADATA_ID` (so that a result metadata id follows the id).
    pub fn decode(
        r: &mut WireReader<'a>,
        version: ProtocolVersion,
        use_metadata_id: bool,
    ) -> Result<Self, DecodeError> {
        let id = Cow::Borrowed(r.read_short_bytes("prepared id")?);
        let result_metadata_id = if version == ProtocolVersion::V5 || use_metadata_id {
            Some(Cow::Borrowed(r.read_short_bytes("result metadata id")?))
        } else {
            None
        };
        let params = QueryParameters::decode(r, version)?;
        Ok(Self {
            id,
            result_metadata_id,
            params,
        })
    }
}

impl MessageBody for Execute<'_> {
    fn opcode(&self) -> Opcode {
        Opcode::Execute
    }

    fn encode_body(&self, buf: &mut BytesMut, version: ProtocolVersion) -> Result<(), EncodeError> {
        match (&self.result_metadata_id, version) {
            (Some(m), _) => put_ids(buf, &self.id, m)?,
            (None, ProtocolVersion::V5) => {
                return Err(EncodeError::Invalid(
                    "EXECUTE on protocol v5 needs the result metadata id of its PREPARED result",
                ))
            }
            (None, ProtocolVersion::V4) => wire::put_short_bytes(buf, &self.id, "prepared id")?,
        }
        self.params.encode(buf, version)
    }
}

/// The prepared id and the result metadata id, each a `[short bytes]`. Ids
/// are short (16 bytes from ScyllaDB and Cassandra): those go out in one
/// append from the stack instead of four.
fn put_ids(buf: &mut BytesMut, id: &[u8], metadata_id: &[u8]) -> Result<(), EncodeError> {
    const ROOM: usize = 64;
    let total = 4 + id.len() + metadata_id.len();
    if total > ROOM {
        wire::put_short_bytes(buf, id, "prepared id")?;
        return wire::put_short_bytes(buf, metadata_id, "result metadata id");
    }
    // Both fit in ROOM (so both lengths fit a [short], and none of the
    // splits and slices below can run past the end of `tmp`).
    let mut tmp = [0u8; ROOM];
    let (id_len, rest) = tmp.split_at_mut(2);
    id_len.copy_from_slice(&(id.len() as u16).to_be_bytes());
    let (id_bytes, rest) = rest.split_at_mut(id.len());
    id_bytes.copy_from_slice(id);
    let (md_len, rest) = rest.split_at_mut(2);
    md_len.copy_from_slice(&(metadata_id.len() as u16).to_be_bytes());
    rest[..metadata_id.len()].copy_from_slice(metadata_id);
    buf.extend_from_slice(&tmp[..total]);
    Ok(())
}
