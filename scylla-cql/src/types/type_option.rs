//! The `[option]` encoding of a column type (spec section 4.2.5.2, result
//! metadata): [`ColumnType::decode`] and [`ColumnType::encode`]. A custom
//! type travels as its class string, parsed and written by
//! [`custom_class`](super::custom_class) (Cassandra 5's `vector<T, N>` is
//! one).

use bytes::BufMut;

use std::sync::Arc;

use super::column_type::{CollectionType, ColumnType, NativeType, UserDefinedType, MAX_TYPE_DEPTH};
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
        // The `[option]` encoding does not say whether a collection or a UDT
        // is frozen: decoded types are never marked frozen.
        let collection = |typ| ColumnType::Collection { frozen: false, typ };
        Ok(match code {
            id::CUSTOM => {
                let class = r.read_string("custom type class")?;
                custom_class::parse(class, depth)?
            }
            id::ASCII => ColumnType::Native(NativeType::Ascii),
            id::BIGINT => ColumnType::Native(NativeType::BigInt),
            id::BLOB => ColumnType::Native(NativeType::Blob),
            id::BOOLEAN => ColumnType::Native(NativeType::Boolean),
            id::COUNTER => ColumnType::Native(NativeType::Counter),
            id::DECIMAL => ColumnType::Native(NativeType::Decimal),
            id::DOUBLE => ColumnType::Native(NativeType::Double),
            id::FLOAT => ColumnType::Native(NativeType::Float),
            id::INT => ColumnType::Native(NativeType::Int),
            id::TIMESTAMP => ColumnType::Native(NativeType::Timestamp),
            id::UUID => ColumnType::Native(NativeType::Uuid),
            id::VARCHAR => ColumnType::Native(NativeType::Text),
            id::VARINT => ColumnType::Native(NativeType::Varint),
            id::TIMEUUID => ColumnType::Native(NativeType::Timeuuid),
            id::INET => ColumnType::Native(NativeType::Inet),
            id::DATE => ColumnType::Native(NativeType::Date),
            id::TIME => ColumnType::Native(NativeType::Time),
            id::SMALLINT => ColumnType::Native(NativeType::SmallInt),
            id::TINYINT => ColumnType::Native(NativeType::TinyInt),
            id::DURATION => ColumnType::Native(NativeType::Duration),
            id::LIST => collection(CollectionType::List(sub(r)?)),
            id::MAP => {
                let k = sub(r)?;
                collection(CollectionType::Map(k, sub(r)?))
            }
            id::SET => collection(CollectionType::Set(sub(r)?)),
            id::UDT => {
                let keyspace = r.read_string("udt keyspace")?.to_owned();
                let name = r.read_string("udt name")?.to_owned();
                let n = r.read_short_count("udt field count", 4)?;
                let mut fields = Vec::with_capacity(n);
                for _ in 0..n {
                    let fname = r.read_string("udt field name")?.to_owned();
                    fields.push((fname, *sub(r)?));
                }
                ColumnType::UserDefinedType {
                    frozen: false,
                    definition: Arc::new(UserDefinedType {
                        name,
                        keyspace,
                        field_types: fields,
                    }),
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
            ColumnType::Native(NativeType::Ascii) => simple(buf, id::ASCII),
            ColumnType::Native(NativeType::BigInt) => simple(buf, id::BIGINT),
            ColumnType::Native(NativeType::Blob) => simple(buf, id::BLOB),
            ColumnType::Native(NativeType::Boolean) => simple(buf, id::BOOLEAN),
            ColumnType::Native(NativeType::Counter) => simple(buf, id::COUNTER),
            ColumnType::Native(NativeType::Decimal) => simple(buf, id::DECIMAL),
            ColumnType::Native(NativeType::Double) => simple(buf, id::DOUBLE),
            ColumnType::Native(NativeType::Float) => simple(buf, id::FLOAT),
            ColumnType::Native(NativeType::Int) => simple(buf, id::INT),
            ColumnType::Native(NativeType::Text) => simple(buf, id::VARCHAR),
            ColumnType::Native(NativeType::Timestamp) => simple(buf, id::TIMESTAMP),
            ColumnType::Native(NativeType::Uuid) => simple(buf, id::UUID),
            ColumnType::Native(NativeType::Varint) => simple(buf, id::VARINT),
            ColumnType::Native(NativeType::Timeuuid) => simple(buf, id::TIMEUUID),
            ColumnType::Native(NativeType::Inet) => simple(buf, id::INET),
            ColumnType::Native(NativeType::Date) => simple(buf, id::DATE),
            ColumnType::Native(NativeType::Time) => simple(buf, id::TIME),
            ColumnType::Native(NativeType::SmallInt) => simple(buf, id::SMALLINT),
            ColumnType::Native(NativeType::TinyInt) => simple(buf, id::TINYINT),
            ColumnType::Native(NativeType::Duration) => simple(buf, id::DURATION),
            ColumnType::Collection {
                typ: CollectionType::List(t),
                ..
            } => {
                simple(buf, id::LIST);
                t.encode(buf)?;
            }
            ColumnType::Collection {
                typ: CollectionType::Set(t),
                ..
            } => {
                simple(buf, id::SET);
                t.encode(buf)?;
            }
            ColumnType::Collection {
                typ: CollectionType::Map(k, v),
                ..
            } => {
                simple(buf, id::MAP);
                k.encode(buf)?;
                v.encode(buf)?;
            }
            ColumnType::UserDefinedType { definition, .. } => {
                let UserDefinedType {
                    name,
                    keyspace,
                    field_types: fields,
                } = &**definition;
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
