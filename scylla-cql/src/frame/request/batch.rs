//! BATCH (section 4.1.7):
//!
//! ```text
//! <type><n><query_1>...<query_n><consistency><flags>[<serial_consistency>][<timestamp>]
//!     [<keyspace>][<now_in_seconds>]
//! <query_i> = <kind><string_or_id><n>[<name_1>]<value_1>...
//! ```
//!
//! The flags are a `[byte]` in v4 and an `[int]` in v5, which adds the
//! keyspace (0x80) and `now_in_seconds` (0x100), as in QUERY.
//!
//! Named values (flag 0x40) are specified but cannot work (the spec itself
//! says so, CASSANDRA-10246): encoding a batch with named values is an
//! [`EncodeError::Invalid`], and decoding rejects the flag: it comes after the
//! statements whose layout it would change, so a decoder cannot know it in
//! time (which is why no server implements it).
//! The four low flag bits must be zero, and unknown bits are rejected.

use crate::frame::ProtocolVersion;
use std::borrow::Cow;

use bytes::{BufMut, BytesMut};

use super::query_params::{
    check_v5_parts, put_flags, read_flags, Tail, DEFAULT_TIMESTAMP, NAMES_FOR_VALUES,
    SERIAL_CONSISTENCY, WITH_KEYSPACE, WITH_NOW_IN_SECONDS,
};
use crate::consistency::Consistency;
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};
use crate::types::SerializedValues;

/// Every flag a v4 BATCH may carry (names included, though unsupported).
const KNOWN_V4: u32 = SERIAL_CONSISTENCY | DEFAULT_TIMESTAMP | NAMES_FOR_VALUES;
/// Every flag a v5 BATCH may carry.
const KNOWN_V5: u32 = KNOWN_V4 | WITH_KEYSPACE | WITH_NOW_IN_SECONDS;

/// The kind of batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum BatchType {
    /// Atomic, through the batch log.
    #[default]
    Logged = 0,
    /// Not atomic across partitions.
    Unlogged = 1,
    /// Counter updates only.
    Counter = 2,
}

impl BatchType {
    /// Parses the wire byte.
    pub fn from_u8(b: u8) -> Result<Self, DecodeError> {
        match b {
            0 => Ok(BatchType::Logged),
            1 => Ok(BatchType::Unlogged),
            2 => Ok(BatchType::Counter),
            other => Err(DecodeError::InvalidValue {
                what: "batch type",
                value: other as i64,
            }),
        }
    }
}

/// What a batch statement runs: CQL text or a prepared id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchStatementKind<'a> {
    /// kind 0: a `[long string]` query.
    Query(Cow<'a, str>),
    /// kind 1: a `[short bytes]` prepared statement id.
    Prepared(Cow<'a, [u8]>),
}

/// One statement of a batch with its bound values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchStatement<'a> {
    /// Query text or prepared id.
    pub kind: BatchStatementKind<'a>,
    /// Bound values (positional; see the module doc about names).
    pub values: Cow<'a, SerializedValues>,
}

/// A BATCH request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch<'a> {
    /// Logged, unlogged or counter.
    pub batch_type: BatchType,
    /// The statements, in order (at most 65535).
    pub statements: Cow<'a, [BatchStatement<'a>]>,
    /// The consistency level.
    pub consistency: Consistency,
    /// The consistency of the Paxos phase of conditional updates.
    pub serial_consistency: Option<Consistency>,
    /// The default write timestamp in microseconds.
    pub default_timestamp: Option<i64>,
    /// The keyspace to run in, overriding the connection's (v5 only).
    pub keyspace: Option<Cow<'a, str>>,
    /// The time ("now") the batch runs at, in seconds (v5 only).
    pub now_in_seconds: Option<i32>,
}

impl<'a> Batch<'a> {
    /// Decodes a body written for `version`, borrowing query texts and ids.
    pub fn decode(r: &mut WireReader<'a>, version: ProtocolVersion) -> Result<Self, DecodeError> {
        let batch_type = BatchType::from_u8(r.read_u8("batch type")?)?;
        // Smallest statement: kind, an empty [short bytes] id, a zero count.
        let n = r.read_short_count("batch statements", 5)?;
        let mut statements = Vec::with_capacity(n);
        for _ in 0..n {
            statements.push(BatchStatement::decode(r)?);
        }
        let consistency = r.read_consistency("consistency")?;
        let flags = read_flags(r, version, "batch flags", KNOWN_V4, KNOWN_V5)?;
        if flags & NAMES_FOR_VALUES != 0 {
            // The statements were read as positional: the flag comes too late
            // to decide their layout, which is why no server supports it.
            return Err(DecodeError::InvalidValue {
                what: "batch flags (named values are unsupported)",
                value: i64::from(flags),
            });
        }
        let tail = Tail::decode(r, flags)?;
        Ok(Self {
            batch_type,
            statements: Cow::Owned(statements),
            consistency,
            serial_consistency: tail.serial_consistency,
            default_timestamp: tail.default_timestamp,
            keyspace: tail.keyspace,
            now_in_seconds: tail.now_in_seconds,
        })
    }
}

impl<'a> BatchStatement<'a> {
    /// A copy that owns all its data.
    pub fn into_owned(self) -> BatchStatement<'static> {
        BatchStatement {
            kind: match self.kind {
                BatchStatementKind::Query(q) => {
                    BatchStatementKind::Query(Cow::Owned(q.into_owned()))
                }
                BatchStatementKind::Prepared(id) => {
                    BatchStatementKind::Prepared(Cow::Owned(id.into_owned()))
                }
            },
            values: Cow::Owned(self.values.into_owned()),
        }
    }

    /// Reads one statement with positional values.
    pub fn decode(r: &mut WireReader<'a>) -> Result<Self, DecodeError> {
        let kind = match r.read_u8("batch statement kind")? {
            0 => BatchStatementKind::Query(Cow::Borrowed(r.read_long_string("query string")?)),
            1 => BatchStatementKind::Prepared(Cow::Borrowed(r.read_short_bytes("prepared id")?)),
            other => {
                return Err(DecodeError::InvalidValue {
                    what: "batch statement kind",
                    value: other as i64,
                })
            }
        };
        let values = Cow::Owned(SerializedValues::decode(r, false)?);
        Ok(Self { kind, values })
    }

    /// Appends the statement; named values are an error.
    pub fn encode(&self, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        if self.values.is_named() && !self.values.is_empty() {
            return Err(EncodeError::Invalid(
                "named values are not supported in batches",
            ));
        }
        match &self.kind {
            BatchStatementKind::Query(q) => {
                buf.put_u8(0);
                wire::put_long_string(buf, q, "query string")?;
            }
            BatchStatementKind::Prepared(id) => {
                buf.put_u8(1);
                wire::put_short_bytes(buf, id, "prepared id")?;
            }
        }
        self.values.encode(buf);
        Ok(())
    }
}

impl Batch<'_> {
    /// A copy that owns all its data.
    pub fn into_owned(self) -> Batch<'static> {
        Batch {
            batch_type: self.batch_type,
            statements: Cow::Owned(
                self.statements
                    .into_owned()
                    .into_iter()
                    .map(BatchStatement::into_owned)
                    .collect(),
            ),
            consistency: self.consistency,
            serial_consistency: self.serial_consistency,
            default_timestamp: self.default_timestamp,
            keyspace: self.keyspace.map(|k| Cow::Owned(k.into_owned())),
            now_in_seconds: self.now_in_seconds,
        }
    }

    /// The flags this batch is written with (a `[byte]` in v4, an `[int]`
    /// in v5).
    pub fn flags(&self) -> u32 {
        self.tail().flags()
    }

    /// The optional parts shared with the QUERY/EXECUTE parameters, borrowed.
    fn tail(&self) -> Tail<'_> {
        Tail {
            serial_consistency: self.serial_consistency,
            default_timestamp: self.default_timestamp,
            keyspace: self.keyspace.as_deref().map(Cow::Borrowed),
            now_in_seconds: self.now_in_seconds,
        }
    }
}

impl MessageBody for Batch<'_> {
    fn opcode(&self) -> Opcode {
        Opcode::Batch
    }

    fn encode_body(&self, buf: &mut BytesMut, version: ProtocolVersion) -> Result<(), EncodeError> {
        check_v5_parts(
            self.keyspace.is_some(),
            self.now_in_seconds.is_some(),
            version,
        )?;
        buf.put_u8(self.batch_type as u8);
        let n = self.statements.len();
        let n = u16::try_from(n).map_err(|_| EncodeError::TooMany {
            what: "batch statements",
            count: n,
            max: u16::MAX as usize,
        })?;
        buf.put_u16(n);
        for s in self.statements.iter() {
            s.encode(buf)?;
        }
        wire::put_consistency(buf, self.consistency);
        put_flags(buf, self.flags(), version);
        self.tail().encode(buf)
    }
}
