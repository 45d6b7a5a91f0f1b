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
use super::timeuuid::CqlTimeuuid;
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
    UserDefinedType {
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
    Timeuuid(CqlTimeuuid),
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
    pub fn as_blob(&self) -> Option<&Vec<u8>> {
        match self {
            CqlValue::Blob(v) => Some(v),
            _ => None,
        }
    }

    /// The UUID of `uuid` and `timeuuid` values.
    pub fn as_uuid(&self) -> Option<Uuid> {
        match self {
            CqlValue::Uuid(v) => Some(*v),
            CqlValue::Timeuuid(v) => Some((*v).into()),
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
    pub fn as_map(&self) -> Option<&Vec<(CqlValue, CqlValue)>> {
        match self {
            CqlValue::Map(v) => Some(v),
            _ => None,
        }
    }

    /// The text of `ascii` values.
    pub fn as_ascii(&self) -> Option<&String> {
        match self {
            CqlValue::Ascii(s) => Some(s),
            _ => None,
        }
    }

    /// The text of `text` and `ascii` values, taken.
    pub fn into_string(self) -> Option<String> {
        match self {
            CqlValue::Text(s) | CqlValue::Ascii(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes of `blob` values, taken.
    pub fn into_blob(self) -> Option<Vec<u8>> {
        match self {
            CqlValue::Blob(v) => Some(v),
            _ => None,
        }
    }

    /// The value of `tinyint` values.
    pub fn as_tinyint(&self) -> Option<i8> {
        match self {
            CqlValue::TinyInt(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of `smallint` values.
    pub fn as_smallint(&self) -> Option<i16> {
        match self {
            CqlValue::SmallInt(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of `double` values.
    pub fn as_double(&self) -> Option<f64> {
        match self {
            CqlValue::Double(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of `float` values.
    pub fn as_float(&self) -> Option<f32> {
        match self {
            CqlValue::Float(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of `counter` values.
    pub fn as_counter(&self) -> Option<Counter> {
        match self {
            CqlValue::Counter(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of `timeuuid` values.
    pub fn as_timeuuid(&self) -> Option<CqlTimeuuid> {
        match self {
            CqlValue::Timeuuid(v) => Some(*v),
            _ => None,
        }
    }

    /// The address of `inet` values.
    pub fn as_inet(&self) -> Option<IpAddr> {
        match self {
            CqlValue::Inet(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of `date` values.
    pub fn as_cql_date(&self) -> Option<CqlDate> {
        match self {
            CqlValue::Date(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of `timestamp` values.
    pub fn as_cql_timestamp(&self) -> Option<CqlTimestamp> {
        match self {
            CqlValue::Timestamp(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of `time` values.
    pub fn as_cql_time(&self) -> Option<CqlTime> {
        match self {
            CqlValue::Time(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of `duration` values.
    pub fn as_cql_duration(&self) -> Option<CqlDuration> {
        match self {
            CqlValue::Duration(v) => Some(*v),
            _ => None,
        }
    }

    /// The elements of `list` values.
    pub fn as_list(&self) -> Option<&Vec<CqlValue>> {
        match self {
            CqlValue::List(v) => Some(v),
            _ => None,
        }
    }

    /// The elements of `set` values.
    pub fn as_set(&self) -> Option<&Vec<CqlValue>> {
        match self {
            CqlValue::Set(v) => Some(v),
            _ => None,
        }
    }

    /// The fields of user-defined type values.
    pub fn as_udt(&self) -> Option<&Vec<(String, Option<CqlValue>)>> {
        match self {
            CqlValue::UserDefinedType { fields, .. } => Some(fields),
            _ => None,
        }
    }

    /// The elements of `list`, `set` and `vector` values, taken.
    pub fn into_vec(self) -> Option<Vec<CqlValue>> {
        match self {
            CqlValue::List(v) | CqlValue::Set(v) | CqlValue::Vector(v) => Some(v),
            _ => None,
        }
    }

    /// The entries of `map` values, taken.
    pub fn into_pair_vec(self) -> Option<Vec<(CqlValue, CqlValue)>> {
        match self {
            CqlValue::Map(v) => Some(v),
            _ => None,
        }
    }

    /// The fields of user-defined type values, taken.
    pub fn into_udt_pair_vec(self) -> Option<Vec<(String, Option<CqlValue>)>> {
        match self {
            CqlValue::UserDefinedType { fields, .. } => Some(fields),
            _ => None,
        }
    }

    /// The value of `varint` values, taken.
    pub fn into_cql_varint(self) -> Option<CqlVarint> {
        match self {
            CqlValue::Varint(v) => Some(v),
            _ => None,
        }
    }

    /// The value of `decimal` values, taken.
    pub fn into_cql_decimal(self) -> Option<CqlDecimal> {
        match self {
            CqlValue::Decimal(v) => Some(v),
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
