//! RESULT (section 4.2.5): an `[int]` kind, then a kind-specific body.
//!
//! - [`rows`]: rows of a SELECT, kept in the frame's buffer ([`metadata`]
//!   describes their columns).
//! - [`prepared`]: the answer to PREPARE.
//! - `set_keyspace`: the answer to `USE` (a keyspace name, see [`ResultBody::SetKeyspace`]).
//! - [`schema_change`]: the answer to DDL (same body as the schema event).

pub mod metadata;
pub mod prepared;
pub mod rows;
pub mod schema_change;
mod set_keyspace;

pub use metadata::{ResultMetadata, SpecCache, TableSpec};
pub use prepared::{Prepared, PreparedMetadata};
pub use rows::{RawRow, RawRowsIter, Rows};
pub use schema_change::{SchemaChange, SchemaChangeTarget, SchemaChangeType};

/// A column's name, table and type: [`types::ColumnSpec`](crate::types::ColumnSpec)
/// under the official crate's name, which takes the lifetime of the
/// frame it borrows from (unused here, as for [`ColumnType`]).
pub type ColumnSpec<'frame> = crate::types::ColumnSpec;

/// A column's CQL type: [`types::ColumnType`](crate::types::ColumnType)
/// under the official crate's name, which takes the lifetime of the
/// metadata it borrows from (`ColumnType<'metadata>`, or `&ColumnType`
/// with it elided). This crate's column types own their names, so the
/// lifetime is not used: any lifetime names the same type.
pub type ColumnType<'metadata> = crate::types::ColumnType;

/// The collections of a [`ColumnType`]: [`types::CollectionType`](crate::types::CollectionType)
/// under the official crate's name, with its unused lifetime.
pub type CollectionType<'metadata> = crate::types::CollectionType;

/// The definition of a user-defined [`ColumnType`]:
/// [`types::UserDefinedType`](crate::types::UserDefinedType) under the
/// official crate's name, with its unused lifetime.
pub type UserDefinedType<'metadata> = crate::types::UserDefinedType;

use crate::frame::ProtocolVersion;
use bytes::{Bytes, BytesMut};

use super::ResponseContext;
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// Result kinds.
mod kind {
    pub(super) const VOID: i32 = 0x0001;
    pub(super) const ROWS: i32 = 0x0002;
    pub(super) const SET_KEYSPACE: i32 = 0x0003;
    pub(super) const PREPARED: i32 = 0x0004;
    pub(super) const SCHEMA_CHANGE: i32 = 0x0005;
}

/// The body of a RESULT response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultBody {
    /// 0x0001: success, nothing to report.
    Void,
    /// 0x0002: rows of a SELECT.
    Rows(Rows),
    /// 0x0003: the keyspace now in use.
    SetKeyspace(String),
    /// 0x0004: a prepared statement.
    /// (Boxed: it is by far the largest variant, and every response moves
    /// through a few hands; keeping `Response` small keeps those moves cheap.)
    Prepared(Box<Prepared>),
    /// 0x0005: the schema changed.
    SchemaChange(SchemaChange),
}

impl ResultBody {
    /// Decodes a RESULT body received on a connection in `ctx`; rows, paging
    /// state and ids share `body`.
    pub fn decode(
        body: &Bytes,
        r: &mut WireReader<'_>,
        ctx: &ResponseContext,
    ) -> Result<Self, DecodeError> {
        Self::decode_cached(body, r, ctx, None)
    }

    /// [`decode`](Self::decode), with the column specs of rows through
    /// `cache` (see [`SpecCache`]).
    pub fn decode_cached(
        body: &Bytes,
        r: &mut WireReader<'_>,
        ctx: &ResponseContext,
        cache: Option<&mut SpecCache>,
    ) -> Result<Self, DecodeError> {
        Ok(match r.read_int("result kind")? {
            kind::VOID => ResultBody::Void,
            kind::ROWS => ResultBody::Rows(Rows::decode_cached(body, r, cache)?),
            kind::SET_KEYSPACE => ResultBody::SetKeyspace(set_keyspace::decode(r)?),
            kind::PREPARED => ResultBody::Prepared(Box::new(Prepared::decode(body, r, ctx)?)),
            kind::SCHEMA_CHANGE => ResultBody::SchemaChange(SchemaChange::decode(r)?),
            other => {
                return Err(DecodeError::InvalidValue {
                    what: "result kind",
                    value: other as i64,
                })
            }
        })
    }

    fn kind(&self) -> i32 {
        match self {
            ResultBody::Void => kind::VOID,
            ResultBody::Rows(_) => kind::ROWS,
            ResultBody::SetKeyspace(_) => kind::SET_KEYSPACE,
            ResultBody::Prepared(_) => kind::PREPARED,
            ResultBody::SchemaChange(_) => kind::SCHEMA_CHANGE,
        }
    }
}

impl MessageBody for ResultBody {
    fn opcode(&self) -> Opcode {
        Opcode::Result
    }

    fn encode_body(&self, buf: &mut BytesMut, version: ProtocolVersion) -> Result<(), EncodeError> {
        wire::put_int(buf, self.kind());
        match self {
            ResultBody::Void => Ok(()),
            ResultBody::Rows(rows) => rows.encode(buf),
            ResultBody::SetKeyspace(ks) => set_keyspace::encode(buf, ks),
            ResultBody::Prepared(p) => p.encode(buf, version),
            ResultBody::SchemaChange(sc) => sc.encode(buf),
        }
    }
}
