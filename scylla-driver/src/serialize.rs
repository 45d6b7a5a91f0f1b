//! Binding values: the traits a statement's values implement, and their
//! errors. The derive macros of the same names live at the crate root
//! ([`SerializeRow`](crate::SerializeRow), [`SerializeValue`](crate::SerializeValue)).
//!
//! A statement's values are one [`row::SerializeRow`]: a tuple,
//! a struct with `#[derive(SerializeRow)]`, a slice or `Vec` of one value
//! type, `()` or `&[]` for none.

#[doc(no_inline)]
pub use scylla_cql::types::serialize::{
    serialize_bytes, serialize_udt, serialize_udt_with, BatchValues, MaybeUnset,
    SerializationError, SerializationErrorKind, UdtRules, Unset,
};
#[doc(no_inline)]
pub use scylla_cql::types::{SerializedValues, Written};

/// One value: [`value::SerializeValue`].
pub mod value {
    #[doc(no_inline)]
    pub use scylla_cql::types::{BuiltinTypeCheckError, BuiltinTypeCheckErrorKind, SerializeValue};
}

/// Where a [`value::SerializeValue`] writes: [`writers::CellWriter`], and the
/// [`writers::WrittenCellProof`] it returns.
pub mod writers {
    #[doc(no_inline)]
    pub use scylla_cql::types::serialize::writers::{
        CellOverflowError, CellValueBuilder, CellWriter, RowWriter, WrittenCellProof,
    };
}

/// A statement's values: [`row::SerializeRow`].
pub mod row {
    #[doc(no_inline)]
    pub use scylla_cql::types::serialize::row::RowSerializationContext;
    #[doc(no_inline)]
    pub use scylla_cql::types::{SerializeRow, SerializedValues};
}

/// A batch's values, one row per statement: [`batch::BatchValues`].
pub mod batch {
    #[doc(no_inline)]
    pub use scylla_cql::types::serialize::BatchValues;
}
