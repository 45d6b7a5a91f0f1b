//! The types of widely used crates as CQL values, each behind an optional
//! feature of this crate (and of `scylla-driver`, which forwards them):
//!
//! | feature | Rust types | CQL types |
//! | --- | --- | --- |
//! | `chrono-04` | `chrono::NaiveDate`, `NaiveTime`, `DateTime<Utc>` | `date`, `time`, `timestamp` |
//! | `time-03` | `time::Date`, `Time`, `OffsetDateTime` | `date`, `time`, `timestamp` |
//! | `num-bigint-03`, `num-bigint-04` | `num_bigint::BigInt` | `varint` |
//! | `bigdecimal-04` | `bigdecimal::BigDecimal` | `decimal` |
//! | `secrecy-10` | `secrecy::SecretBox<T>`, `SecretString`, `SecretSlice<u8>` | those of `T`, `text`, `blob` |
//!
//! Each type implements [`SerializeValue`](super::SerializeValue) and
//! [`DeserializeValue`](super::DeserializeValue), and converts to and from
//! this crate's own type for the CQL type ([`CqlDate`](super::CqlDate),
//! [`CqlTime`](super::CqlTime), [`CqlTimestamp`](super::CqlTimestamp),
//! [`CqlVarint`](super::CqlVarint), [`CqlDecimal`](super::CqlDecimal)).
//! Where the ranges differ (a CQL `date` spans about 5.8 million years each
//! side of 1970, `chrono` and `time` far fewer), the conversion is a
//! `TryFrom` that fails with [`OutOfRange`], and deserialization fails with
//! an [`InvalidValue`](super::DeserializationErrorKind::InvalidValue) error
//! instead of panicking or wrapping around. The crate's own types hold every
//! value the server can store.

#[cfg(feature = "bigdecimal-04")]
pub mod bigdecimal_04;
#[cfg(feature = "chrono-04")]
pub mod chrono_04;
#[cfg(any(feature = "num-bigint-03", feature = "num-bigint-04"))]
pub mod num_bigint;
#[cfg(feature = "secrecy-10")]
pub mod secrecy_10;
#[cfg(feature = "time-03")]
pub mod time_03;

/// A value that the target type of a conversion cannot represent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{value} is outside the range of {target}; {hint}")]
pub struct OutOfRange {
    /// What was converted (e.g. "the CQL date").
    pub value: &'static str,
    /// The type it was converted to.
    pub target: &'static str,
    /// What to check or do instead.
    pub hint: &'static str,
}
