//! The official `scylla` crate's `frame` paths, as aliases of this crate's
//! types: [`Compression`], [`ProtocolVersion`] and, under
//! [`response::result`], the column types.

#[doc(no_inline)]
pub use scylla_cql::compression::Compression;
#[doc(no_inline)]
pub use scylla_cql::frame::ProtocolVersion;

/// Responses: the server's error codes ([`DbError`](response::DbError)).
pub mod response {
    #[doc(no_inline)]
    pub use scylla_cql::frame::response::error::{DbError, OperationType, WriteType};

    /// The columns of a result: [`ColumnType`](result::ColumnType) (with
    /// [`NativeType`](result::NativeType), [`CollectionType`](result::CollectionType)
    /// and [`UserDefinedType`](result::UserDefinedType)),
    /// [`ColumnSpec`](result::ColumnSpec), [`TableSpec`](result::TableSpec):
    /// the protocol crate's aliases, which carry the official lifetimes.
    pub mod result {
        #[doc(no_inline)]
        pub use scylla_cql::types::TableSpec;

        #[doc(no_inline)]
        pub use scylla_cql::frame::response::result::{
            CollectionType, ColumnSpec, ColumnType, UserDefinedType,
        };
        #[doc(no_inline)]
        pub use scylla_cql::types::NativeType;
    }
}

/// Protocol-level types under the official crate's `frame::types` path.
pub mod types {
    #[doc(no_inline)]
    pub use scylla_cql::{Consistency, SerialConsistency};
}
