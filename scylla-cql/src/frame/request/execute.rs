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
//!
//! ScyllaDB's `TABLETS_ROUTING_V2_EXPERIMENTAL` appends one byte, the
//! tablet version block (see [`TabletVersionBlock`](crate::frame::tablets::TabletVersionBlock)),
//! to every EXECUTE of a connection that negotiated it:
//! `<id>[<result_metadata_id>]<query_parameters><tablet_version_block>`.

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
    /// The tablet version block (`TABLETS_ROUTING_V2_EXPERIMENTAL`): written
    /// after the parameters when present (a client only has one on a
    /// connection that negotiated the extension).
    pub tablet_version_block: Option<u8>,
}

impl<'a> Execute<'a> {
    /// A copy that owns all its data.
    pub fn into_owned(self) -> Execute<'static> {
        Execute {
            id: Cow::Owned(self.id.into_owned()),
            result_metadata_id: self.result_metadata_id.map(|m| Cow::Owned(m.into_owned())),
            params: self.params.into_owned(),
            tablet_version_block: self.tablet_version_block,
        }
    }

    /// Decodes a body written for `version`, borrowing the ids. On v4,
    /// `use_metadata_id` says whether the connection negotiated
    /// `SCYLLA_USE_METADATA_ID` (so that a result metadata id follows the id).
    /// Without tablet routing v2 (see [`decode_v2`](Self::decode_v2)).
    pub fn decode(
        r: &mut WireReader<'a>,
        version: ProtocolVersion,
        use_metadata_id: bool,
    ) -> Result<Self, DecodeError> {
        Self::decode_v2(r, version, use_metadata_id, false)
    }

    /// [`decode`](Self::decode); `tablets_v2` says whether the connection
    /// negotiated `TABLETS_ROUTING_V2_EXPERIMENTAL` (a tablet version block
    /// follows the parameters).
    pub fn decode_v2(
        r: &mut WireReader<'a>,
        version: ProtocolVersion,
        use_metadata_id: bool,
        tablets_v2: bool,
    ) -> Result<Self, DecodeError> {
        let id = Cow::Borrowed(r.read_short_bytes("prepared id")?);
        let result_metadata_id = if version == ProtocolVersion::V5 || use_metadata_id {
            Some(Cow::Borrowed(r.read_short_bytes("result metadata id")?))
        } else {
            None
        };
        let params = QueryParameters::decode(r, version)?;
        let tablet_version_block = if tablets_v2 {
            Some(r.read_u8("tablet version block")?)
        } else {
            None
        };
        Ok(Self {
            id,
            result_metadata_id,
            params,
            tablet_version_block,
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
        self.params.encode(buf, version)?;
        if let Some(b) = self.tablet_version_block {
            buf.extend_from_slice(&[b]);
        }
        Ok(())
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
