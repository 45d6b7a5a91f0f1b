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
    /// [`ColumnSpec`](result::ColumnSpec), [`TableSpec`](result::TableSpec).
    pub mod result {
        pub use scylla_cql::types::TableSpec;

        /// A column's name, table and type: [`types::ColumnSpec`](crate::types::ColumnSpec)
        /// under the official crate's name, which takes the lifetime of the
        /// frame it borrows from (unused here, as for [`ColumnType`]).
        pub type ColumnSpec<'frame> = scylla_cql::types::ColumnSpec;

        /// A column's CQL type: [`types::ColumnType`](crate::types::ColumnType)
        /// under the official crate's name, which takes the lifetime of the
        /// metadata it borrows from (`ColumnType<'metadata>`, or `&ColumnType`
        /// with it elided). This crate's column types own their names, so the
        /// lifetime is not used: any lifetime names the same type.
        pub type ColumnType<'metadata> = scylla_cql::types::ColumnType;

        /// The collections of a [`ColumnType`]: [`types::CollectionType`](crate::types::CollectionType)
        /// under the official crate's name, with its unused lifetime.
        pub type CollectionType<'metadata> = scylla_cql::types::CollectionType;

        /// The definition of a user-defined [`ColumnType`]:
        /// [`types::UserDefinedType`](crate::types::UserDefinedType) under the
        /// official crate's name, with its unused lifetime.
        pub type UserDefinedType<'metadata> = scylla_cql::types::UserDefinedType;

        pub use scylla_cql::types::NativeType;
    }
}

/// Protocol-level types under the official crate's `frame::types` path.
pub mod types {
    pub use crate::statement::{Consistency, SerialConsistency};
}
