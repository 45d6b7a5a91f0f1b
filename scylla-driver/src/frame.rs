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
        pub use scylla_cql::types::{ColumnSpec, ColumnType};
    }
}
