//! Reading rows: the traits a row or value type implements, and their
//! errors. The derive macros of the same names live at the crate root
//! ([`DeserializeRow`](crate::DeserializeRow),
//! [`DeserializeValue`](crate::DeserializeValue)).

#[doc(no_inline)]
pub use scylla_cql::types::deserialize::{ColumnIterator, FrameSlice, RawColumn, RowIterator};
#[doc(no_inline)]
pub use scylla_cql::types::{
    DeserializationError, DeserializationErrorKind, ErrorContext, TypeCheckError,
    TypeCheckErrorKind,
};

/// One value: [`value::DeserializeValue`].
pub mod value {
    #[doc(no_inline)]
    pub use scylla_cql::types::DeserializeValue;
}

/// One row: [`row::DeserializeRow`], and
/// [`row::Row`], a row of any columns.
pub mod row {
    #[doc(no_inline)]
    pub use scylla_cql::types::deserialize::{ColumnIterator, RawColumn, Row};
    #[doc(no_inline)]
    pub use scylla_cql::types::DeserializeRow;
}
