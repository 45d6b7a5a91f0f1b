//! Every error type of the driver in one place (the official `scylla`
//! crate's `errors` path): those of [`error`](crate::error), and those they
//! carry (connections, the control connection, TLS, frames,
//! (de)serialization, tracing, the server's error codes).

#[doc(no_inline)]
pub use crate::cluster::{ContactError, ContactFailure, MetadataError, TranslationError};
#[doc(no_inline)]
pub use crate::connection::{
    AuthenticationFailed, BrokenReason, OpenError, OpenStep, SetupStep, TlsErrorKind,
};
#[doc(no_inline)]
pub use crate::error::*;
#[doc(no_inline)]
pub use crate::response::query_result::{
    FirstRowError, IntoRowsResultError, MaybeFirstRowError, RowsError, SingleRowError,
};
#[doc(no_inline)]
pub use crate::session::{RowsStreamError, TracingError};

/// The error a row stream yields for a row (the official crate's name): a
/// page that could not be fetched or a row that could not be read, which is
/// an [`ExecutionError`] here.
pub type NextRowError = ExecutionError;
/// The error of [`Session::query_iter`](crate::Session::query_iter) and
/// [`Session::execute_iter`](crate::Session::execute_iter) (the official
/// crate's name): an [`ExecutionError`] here.
pub type PagerExecutionError = ExecutionError;
#[doc(no_inline)]
pub use crate::statement::NotSerialConsistency;
#[cfg(feature = "tls")]
#[doc(no_inline)]
pub use crate::tls::TlsConfigError;
#[doc(no_inline)]
pub use scylla_cql::frame::response::error::{DbError, OperationType, WriteType};
#[doc(no_inline)]
pub use scylla_cql::frame::response::ErrorResponse;
#[doc(no_inline)]
pub use scylla_cql::frame::segment::SegmentError;
#[doc(no_inline)]
pub use scylla_cql::types::CqlTypeParseError;
#[doc(no_inline)]
pub use scylla_cql::types::{
    DeserializationError, DeserializationErrorKind, SerializationError, SerializationErrorKind,
    TypeCheckError, TypeCheckErrorKind,
};
#[doc(no_inline)]
pub use scylla_cql::{DecodeError, EncodeError};
