//! The official `scylla` crate's `frame` paths, as aliases of this crate's
//! types: [`Compression`], [`ProtocolVersion`] and, under
//! [`response::result`], the column types.

pub use scylla_cql::compression::Compression;
pub use scylla_cql::frame::ProtocolVersion;

/// Responses: the server's error codes ([`DbError`](response::DbError)).
pub mod response {
    pub use scylla_cql::frame::response::error::{DbError, OperationType, WriteType};

    /// The columns of a result: [`ColumnType`](result::ColumnType) (with
    /// [`NativeType`](result::NativeType), [`CollectionType`](result::CollectionType)
    /// and [`UserDefinedType`](result::UserDefinedType)),
    /// [`ColumnSpec`](result::ColumnSpec), [`TableSpec`](result::TableSpec):
    /// the protocol crate's aliases, which carry the official lifetimes.
    pub mod result {
        pub use scylla_cql::types::TableSpec;

        pub use scylla_cql::frame::response::result::{
            CollectionType, ColumnSpec, ColumnType, UserDefinedType,
        };
        pub use scylla_cql::types::NativeType;
    }
}

/// Protocol-level types under the official crate's `frame::types` path.
pub mod types {
    pub use scylla_cql::{Consistency, SerialConsistency};
}
