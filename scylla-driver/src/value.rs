//! CQL values as Rust types: what rows deserialize into and statements bind.
//!
//! Most columns read straight into Rust types (`i32`, `String`, `&str`,
//! `Vec<T>`, `HashMap<K, V>`, `Uuid`, `IpAddr`, ...); the types here cover
//! what has no exact Rust counterpart, and [`CqlValue`] / [`Row`] read any
//! value or row without knowing its type ahead of time.
//!
//! ```
//! use scylla_driver::value::{CqlDate, CqlValue};
//!
//! let v = CqlValue::Date(CqlDate::from_unix_days(1));
//! assert!(matches!(v, CqlValue::Date(CqlDate(d)) if d == (1 << 31) + 1));
//! ```

#[doc(no_inline)]
pub use scylla_cql::types::{
    Counter, CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp, CqlTimeuuid, CqlValue,
    CqlVarint, MaybeEmpty, MaybeUnset, Row, Unset,
};
