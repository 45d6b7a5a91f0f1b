//! The `[option]` encoding of a column type (spec section 4.2.5.2, result
//! metadata): [`ColumnType::decode`] and [`ColumnType::encode`]. A custom
//! type travels as its class string, parsed and written by
//! [`custom_class`](super::custom_class) (Cassandra 5's `vector<T, N>` is
//! one).

use bytes::BufMut;

use super::column_type::{ColumnType, MAX_TYPE_DEPTH};
use super::custom_class;
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};

/// Option ids of the `[option]` type encoding.
mod id {
    pub(super) const CUSTOM: u16 = 0x0000;
    pub(super) const ASCII: u16 = 0x0001;
    pub(super) const BIGINT: u16 = 0x0002;
    pub(super) const BLOB: u16 = 0x0003;
    pub(super) const BOOLEAN: u16 = 0x0004;
    pub(super) const COUNTER: u16 = 0x0005;
    pub(super) const DECIMAL: u16 = 0x0006;
    pub(super) const DOUBLE: u16 = 0x0007;
    pub(super) const FLOAT: u16 = 0x0008;
    pub(super) const INT: u16 = 0x0009;
    pub(super) const TIMESTAMP: u16 = 0x000B;
    pub(super) const UUID: u16 = 0x000C;
    pub(super) const VARCHAR: u16 = 0x000D;
    pub(super) const VARINT: u16 = 0x000E;
    pub(super) const TIMEUUID: u16 = 0x000F;
    pub(super) const INET: u16 = 0x0010;
    pub(super) const DATE: u16 = 0x0011;
    pub(super) const TIME: u16 = 0x0012;
    pub(super) const SMALLINT: u16 = 0x0013;
    pub(super) const TINYINT: u16 = 0x0014;
    pub(super) const DURATION: u16 = 0x0015;
    pub(super) const LIST: u16 = 0x0020;
    pub(super) const MAP: u16 = 0x0021;
    pub(super) const SET: u16 = 0x0022;
    pub(super) const UDT: u16 = 0x0030;
    pub(super) const TUPLE: u16 = 0x0031;
}

impl ColumnType {
    /// Decodes an `[option]` type description.
    pub fn decode(r: &mut WireReader<'_>) -> Result<ColumnType, DecodeError> {
        Self::decode_at_depth(r, 0)
    }

    fn decode_at_depth(r: &mut WireReader<'_>, depth: usize) -> Result<ColumnType, DecodeError> {
        if depth > MAX_TYPE_DEPTH {
            return Err(DecodeError::TooDeep {
                limit: MAX_TYPE_DEPTH,
            });
        }
        let code = r.read_short("type id")?;
        let sub = |r: &mut WireReader<'_>| Self::decode_at_depth(r, depth + 1).map(Box::new);
        Ok(match code {
            id::CUSTOM => {
                let class = r.read_string("custom type class")?;
                custom_class::parse(class, depth)?
            }
            id::ASCII => ColumnType::Ascii,
            id::BIGINT => ColumnType::BigInt,
            id::BLOB => ColumnType::Blob,
            id::BOOLEAN => ColumnType::Boolean,
            id::COUNTER => ColumnType::Counter,
            id::DECIMAL => ColumnType::Decimal,
            id::DOUBLE => ColumnType::Double,
            id::FLOAT => ColumnType::Float,
            id::INT => ColumnType::Int,
            id::TIMESTAMP => ColumnType::Timestamp,
            id::UUID => ColumnType::Uuid,
            id::VARCHAR => ColumnType::Text,
            id::VARINT => ColumnType::Varint,
            id::TIMEUUID => ColumnType::Timeuuid,
            id::INET => ColumnType::Inet,
            id::DATE => ColumnType::Date,
            id::TIME => ColumnType::Time,
            id::SMALLINT => ColumnType::SmallInt,
            id::TINYINT => ColumnType::TinyInt,
            id::DURATION => ColumnType::Duration,
            id::LIST => ColumnType::List(sub(r)?),
            id::MAP => {
                let k = sub(r)?;
                ColumnType::Map(k, sub(r)?)
            }
            id::SET => ColumnType::Set(sub(r)?),
            id::UDT => {
                let keyspace = r.read_string("udt keyspace")?.to_owned();
                let name = r.read_string("udt name")?.to_owned();
                let n = r.read_short_count("udt field count", 4)?;
                let mut fields = Vec::with_capacity(n);
                for _ in 0..n {
                    let fname = r.read_string("udt field name")?.to_owned();
                    fields.push((fname, *sub(r)?));
                }
                ColumnType::Udt {
                    keyspace,
                    name,
                    fields,
                }
            }
            id::TUPLE => {
                let n = r.read_short_count("tuple arity", 2)?;
                let mut elems = Vec::with_capacity(n);
                for _ in 0..n {
                    elems.push(*sub(r)?);
                }
                ColumnType::Tuple(elems)
            }
            other => {
                return Err(DecodeError::InvalidValue {
                    what: "type id",
                    value: other as i64,
                })
            }
        })
    }

    /// Encodes as an `[option]` (the test cluster sends result metadata).
    pub fn encode(&self, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        let simple = |buf: &mut dyn BufMut, code: u16| buf.put_u16(code);
        match self {
            ColumnType::Custom(class) => {
                wire::put_short(buf, id::CUSTOM);
                wire::put_string(buf, class, "custom type class")?;
            }
            ColumnType::Vector { .. } => {
                wire::put_short(buf, id::CUSTOM);
                wire::put_string(
                    buf,
                    &custom_class::to_class_string(self),
                    "custom type class",
                )?;
            }
            ColumnType::Ascii => simple(buf, id::ASCII),
            ColumnType::BigInt => simple(buf, id::BIGINT),
            ColumnType::Blob => simple(buf, id::BLOB),
            ColumnType::Boolean => simple(buf, id::BOOLEAN),
            ColumnType::Counter => simple(buf, id::COUNTER),
            ColumnType::Decimal => simple(buf, id::DECIMAL),
            ColumnType::Double => simple(buf, id::DOUBLE),
            ColumnType::Float => simple(buf, id::FLOAT),
            ColumnType::Int => simple(buf, id::INT),
            ColumnType::Text => simple(buf, id::VARCHAR),
            ColumnType::Timestamp => simple(buf, id::TIMESTAMP),
            ColumnType::Uuid => simple(buf, id::UUID),
            ColumnType::Varint => simple(buf, id::VARINT),
            ColumnType::Timeuuid => simple(buf, id::TIMEUUID),
            ColumnType::Inet => simple(buf, id::INET),
            ColumnType::Date => simple(buf, id::DATE),
            ColumnType::Time => simple(buf, id::TIME),
            ColumnType::SmallInt => simple(buf, id::SMALLINT),
            ColumnType::TinyInt => simple(buf, id::TINYINT),
            ColumnType::Duration => simple(buf, id::DURATION),
            ColumnType::List(t) => {
                simple(buf, id::LIST);
                t.encode(buf)?;
            }
            ColumnType::Set(t) => {
                simple(buf, id::SET);
                t.encode(buf)?;
            }
            ColumnType::Map(k, v) => {
                simple(buf, id::MAP);
                k.encode(buf)?;
                v.encode(buf)?;
            }
            ColumnType::Udt {
                keyspace,
                name,
                fields,
            } => {
                simple(buf, id::UDT);
                wire::put_string(buf, keyspace, "udt keyspace")?;
                wire::put_string(buf, name, "udt name")?;
                wire::put_short_len(buf, fields.len(), "udt fields")?;
                for (fname, t) in fields {
                    wire::put_string(buf, fname, "udt field name")?;
                    t.encode(buf)?;
                }
            }
            ColumnType::Tuple(elems) => {
                simple(buf, id::TUPLE);
                wire::put_short_len(buf, elems.len(), "tuple arity")?;
                for t in elems {
                    t.encode(buf)?;
                }
            }
        }
        Ok(())
    }
}
