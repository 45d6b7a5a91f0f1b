//! Reading rows: the traits a row or value type implements, and their
//! errors. The derive macros of the same names live at the crate root
//! ([`DeserializeRow`](crate::DeserializeRow),
//! [`DeserializeValue`](crate::DeserializeValue)).

pub use scylla_cql::types::deserialize::{ColumnIterator, FrameSlice, RawColumn, RowIterator};
pub use scylla_cql::types::{
    DeserializationError, DeserializationErrorKind, ErrorContext, TypeCheckError,
    TypeCheckErrorKind,
};

/// One value: [`value::DeserializeValue`].
pub mod value {
    pub use scylla_cql::types::DeserializeValue;
}

/// One row: [`row::DeserializeRow`], and
/// [`row::Row`], a row of any columns.
pub mod row {
    pub use scylla_cql::types::deserialize::{ColumnIterator, RawColumn, Row};
    pub use scylla_cql::types::DeserializeRow;
}
