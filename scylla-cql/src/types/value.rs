//! [`CqlValue`]: an owned value of any CQL type, for code that does not know
//! its types at compile time (generic tools, and the in-process test cluster,
//! which stores and returns values of every type).
//!
//! # Empty values
//!
//! The protocol allows a non-null, zero-length value for most types (an
//! "empty" `int`, for instance, which Cassandra stores and returns as such).
//! Such values deserialize to [`CqlValue::Empty`] for every type whose normal
//! encoding is never zero bytes long; for `text`, `ascii` and `blob` a
//! zero-length value is simply the empty string or blob. Serializing
//! [`CqlValue::Empty`] writes a zero-length value for any type, so empty
//! values round-trip. Typed Rust values (`i32`, ...) reject empty values; use
//! [`MaybeEmpty<T>`] to accept them.

use std::net::IpAddr;

use uuid::Uuid;

use super::counter::Counter;
use super::cql_time::{CqlDate, CqlTime, CqlTimestamp};
use super::decimal::CqlDecimal;
use super::duration::CqlDuration;
use super::varint::CqlVarint;

/// An owned CQL value of any type.
///
/// Equality is structural; floats compare with `==` (so `NaN != NaN`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CqlValue {
    /// `ascii`
    Ascii(String),
    /// `boolean`
    Boolean(bool),
    /// `blob` (also the raw bytes of a custom type this crate does not interpret)
    Blob(Vec<u8>),
    /// `counter`
    Counter(Counter),
    /// `decimal`
    Decimal(CqlDecimal),
    /// `date`
    Date(CqlDate),
    /// `double`
    Double(f64),
    /// `duration`
    Duration(CqlDuration),
    /// A non-null zero-length value of a type that normally has bytes.
    Empty,
    /// `float`
    Float(f32),
    /// `int`
    Int(i32),
    /// `bigint`
    BigInt(i64),
    /// `text` / `varchar`
    Text(String),
    /// `timestamp`
    Timestamp(CqlTimestamp),
    /// `inet`
    Inet(IpAddr),
    /// `list<T>`
    List(Vec<CqlValue>),
    /// `map<K, V>`, as pairs in wire order.
    Map(Vec<(CqlValue, CqlValue)>),
    /// `set<T>`, in wire order.
    Set(Vec<CqlValue>),
    /// A user-defined type value.
    Udt {
        /// Keyspace of the type.
        keyspace: String,
        /// Name of the type.
        name: String,
        /// Field values by name; `None` is null.
        fields: Vec<(String, Option<CqlValue>)>,
    },
    /// `smallint`
    SmallInt(i16),
    /// `tinyint`
    TinyInt(i8),
    /// `time`
    Time(CqlTime),
    /// `timeuuid`
    Timeuuid(Uuid),
    /// `tuple<...>`; `None` elements are null.
    Tuple(Vec<Option<CqlValue>>),
    /// `uuid`
    Uuid(Uuid),
    /// `varint`
    Varint(CqlVarint),
    /// `vector<T, N>`
    Vector(Vec<CqlValue>),
}

impl CqlValue {
    /// The text of `text` and `ascii` values. A `&String`, as the official
    /// `scylla` crate returns, so that `.unwrap_or(&default_string)` works;
    /// it derefs to `&str` wherever one is wanted.
    pub fn as_text(&self) -> Option<&String> {
        match self {
            CqlValue::Text(s) | CqlValue::Ascii(s) => Some(s),
            _ => None,
        }
    }

    /// The value of `int` values.
    pub fn as_int(&self) -> Option<i32> {
        match self {
            CqlValue::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of `bigint` and `counter` values.
    pub fn as_bigint(&self) -> Option<i64> {
        match self {
            CqlValue::BigInt(v) | CqlValue::Counter(Counter(v)) => Some(*v),
            _ => None,
        }
    }

    /// The value of `boolean` values.
    pub fn as_boolean(&self) -> Option<bool> {
        match self {
            CqlValue::Boolean(v) => Some(*v),
            _ => None,
        }
    }

    /// The bytes of `blob` values.
    pub fn as_blob(&self) -> Option<&[u8]> {
        match self {
            CqlValue::Blob(v) => Some(v),
            _ => None,
        }
    }

    /// The UUID of `uuid` and `timeuuid` values.
    pub fn as_uuid(&self) -> Option<Uuid> {
        match self {
            CqlValue::Uuid(v) | CqlValue::Timeuuid(v) => Some(*v),
            _ => None,
        }
    }

    /// The elements of `list`, `set` and `vector` values.
    pub fn as_seq(&self) -> Option<&[CqlValue]> {
        match self {
            CqlValue::List(v) | CqlValue::Set(v) | CqlValue::Vector(v) => Some(v),
            _ => None,
        }
    }

    /// The entries of `map` values.
    pub fn as_map(&self) -> Option<&[(CqlValue, CqlValue)]> {
        match self {
            CqlValue::Map(v) => Some(v),
            _ => None,
        }
    }
}

/// A typed value that may also be "empty" (a non-null zero-length value; see
/// the module documentation). `i32` rejects an empty `int`;
/// `MaybeEmpty<i32>` accepts it as [`MaybeEmpty::Empty`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MaybeEmpty<T> {
    /// A zero-length value.
    Empty,
    /// A regular value.
    Value(T),
}
