//! A Prepared result (section 4.2.5.4): the statement id, the metadata of its
//! bind markers (with the partition-key indexes token-aware routing needs) and
//! the metadata of the rows it will return.
//!
//! ```text
//! v4: <id><metadata><result_metadata>
//! v5: <id><result_metadata_id><metadata><result_metadata>
//! <metadata> = <flags><columns_count><pk_count>[<pk_index_1>...<pk_index_n>]
//!              [<global_table_spec>?<col_spec_1>...<col_spec_n>]
//! ```
//!
//! The `<result_metadata_id>` (`[short bytes]`) also travels on v4 when the
//! connection negotiated ScyllaDB's `SCYLLA_USE_METADATA_ID`
//! ([`ResponseContext::use_metadata_id`]).
//!
//! The raw flags are kept: ScyllaDB marks lightweight transactions with a bit
//! of them whose position SUPPORTED advertises (`SCYLLA_LWT_ADD_METADATA_MARK`).

use bytes::{Bytes, BytesMut};

use super::super::{share, ResponseContext};
use super::metadata::{
    decode_col_specs, encode_col_specs, ResultMetadata, TableSpec, GLOBAL_TABLES_SPEC,
};
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::ProtocolVersion;
use crate::types::ColumnSpec;

/// A Prepared result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// The prepared statement id, to send in EXECUTE.
    pub id: Bytes,
    /// The id of `result_metadata`, to send in EXECUTE (v5, or v4 with
    /// `SCYLLA_USE_METADATA_ID`; `None` otherwise). Required when encoding
    /// for v5.
    pub result_metadata_id: Option<Bytes>,
    /// The bind markers.
    pub metadata: PreparedMetadata,
    /// The columns of the rows the statement returns (often empty, with
    /// No_metadata, for statements other than SELECT).
    pub result_metadata: ResultMetadata,
}

/// The bind markers of a prepared statement.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PreparedMetadata {
    /// The flags as received. When encoding, the Global_tables_spec bit is
    /// set from [`global_table_spec`](Self::global_table_spec) instead.
    pub flags: i32,
    /// For each partition-key column in order, the index of its bind marker;
    /// empty if some partition-key column has no (plain) bind marker.
    pub pk_indexes: Vec<u16>,
    /// The table all bind markers belong to, when sent once.
    pub global_table_spec: Option<TableSpec>,
    /// The bind markers, in order.
    pub col_specs: Vec<ColumnSpec>,
}

impl PreparedMetadata {
    /// Whether the flags carry ScyllaDB's LWT mark for `mask` (`false`
    /// without the extension).
    pub fn is_lwt(&self, mask: Option<u32>) -> bool {
        // The mask is a bit pattern: reinterpreting the flags as u32 keeps bits.
        mask.is_some_and(|m| (self.flags as u32) & m != 0)
    }

    /// Decodes the bind-marker metadata.
    pub fn decode(r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        let flags = r.read_int("prepared metadata flags")?;
        let columns_count = r.read_len("prepared metadata columns_count")?;
        let pk_count = r.read_count("prepared metadata pk_count", 2)?;
        let mut pk_indexes = Vec::with_capacity(pk_count);
        for _ in 0..pk_count {
            pk_indexes.push(r.read_short("pk index")?);
        }
        let global_table_spec = if flags & GLOBAL_TABLES_SPEC != 0 {
            Some(TableSpec::decode(r)?)
        } else {
            None
        };
        let col_specs = decode_col_specs(r, columns_count, global_table_spec.as_ref())?;
        Ok(Self {
            flags,
            pk_indexes,
            global_table_spec,
            col_specs,
        })
    }

    /// Encodes the bind-marker metadata.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        let flags = if self.global_table_spec.is_some() {
            self.flags | GLOBAL_TABLES_SPEC
        } else {
            self.flags & !GLOBAL_TABLES_SPEC
        };
        wire::put_int(buf, flags);
        wire::put_int_len(buf, self.col_specs.len(), "bind marker count")?;
        wire::put_int_len(buf, self.pk_indexes.len(), "pk index count")?;
        for &i in &self.pk_indexes {
            wire::put_short(buf, i);
        }
        if let Some(g) = &self.global_table_spec {
            g.encode(buf)?;
        }
        encode_col_specs(buf, &self.col_specs, self.global_table_spec.as_ref())
    }
}

impl Prepared {
    /// Whether ScyllaDB marked the statement as a lightweight transaction
    /// (always `false` when the connection did not negotiate the mark).
    pub fn is_lwt(&self, ctx: &ResponseContext) -> bool {
        self.metadata.is_lwt(ctx.lwt_metadata_mask)
    }

    /// Decodes a Prepared result (after the kind) received on a connection
    /// in `ctx`. The ids share `body`'s buffer.
    pub fn decode(
        body: &Bytes,
        r: &mut WireReader<'_>,
        ctx: &ResponseContext,
    ) -> Result<Self, DecodeError> {
        let id = share(body, r.read_short_bytes("prepared id")?);
        let result_metadata_id = if ctx.has_metadata_id() {
            Some(share(body, r.read_short_bytes("result metadata id")?))
        } else {
            None
        };
        let metadata = PreparedMetadata::decode(r)?;
        let result_metadata = ResultMetadata::decode(body, r)?;
        Ok(Self {
            id,
            result_metadata_id,
            metadata,
            result_metadata,
        })
    }

    /// Appends a Prepared result (after the kind) for `version`: the result
    /// metadata id is required on v5, and written on v4 when present (the
    /// test cluster sets it only when `SCYLLA_USE_METADATA_ID` was negotiated).
    pub(crate) fn encode(
        &self,
        buf: &mut BytesMut,
        version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        wire::put_short_bytes(buf, &self.id, "prepared id")?;
        match (&self.result_metadata_id, version) {
            (Some(m), _) => wire::put_short_bytes(buf, m, "result metadata id")?,
            (None, ProtocolVersion::V5) => {
                return Err(EncodeError::Invalid(
                    "a PREPARED result on protocol v5 needs a result metadata id",
                ))
            }
            (None, ProtocolVersion::V4) => {}
        }
        self.metadata.encode(buf)?;
        self.result_metadata.encode(buf)
    }
}
