//! The official `scylla` crate's `frame` paths, as aliases of this crate's
//! types: [`Compression`], [`ProtocolVersion`] and, under
//! [`response::result`], the column types.

pub use scylla_cql::compression::Compression;
pub use scylla_cql::frame::ProtocolVersion;

/// Responses: the server's error codes ([`DbError`](response::DbError)).
pub mod response {
    pub use scylla_cql::frame::response::error::{DbError, OperationType, WriteType};

    /// The columns of a result: [`ColumnType`](result::ColumnType),
    /// [`ColumnSpec`](result::ColumnSpec).
    pub mod result {
        pub use scylla_cql::types::ColumnSpec;

        /// A column's CQL type: [`types::ColumnType`](crate::types::ColumnType)
        /// under the official crate's name, which takes the lifetime of the
        /// metadata it borrows from (`ColumnType<'metadata>`, or `&ColumnType`
        /// with it elided). This crate's column types own their names, so the
        /// lifetime is not used: any lifetime names the same type.
        pub type ColumnType<'metadata> = scylla_cql::types::ColumnType;
    }
}
