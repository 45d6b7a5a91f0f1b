//! Errors of CQL statements and their ERROR responses.

use bytes::{Bytes, BytesMut};
use scylla_cql::frame::response::{DbError, ErrorResponse};
use scylla_cql::frame::MessageBody;
use scylla_cql::frame::ProtocolVersion;

use crate::handler::{error_code, Response};

/// Why a statement failed; each maps to the CQL error code a server sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CqlError {
    /// 0x2000
    Syntax(String),
    /// 0x2200 (unknown keyspace/table/column, unsupported statement, bad values)
    Invalid(String),
    /// 0x2400
    AlreadyExists {
        keyspace: String,
        table: String,
        message: String,
    },
    /// 0x2500 with the unknown id.
    Unprepared(Bytes),
    /// 0x000A (a malformed request body)
    Protocol(String),
    /// 0x1000: too few replicas up for the consistency level.
    Unavailable {
        consistency: scylla_cql::Consistency,
        required: i32,
        alive: i32,
    },
}

/// Shorthand for an Invalid error.
pub(crate) fn invalid<T>(msg: impl Into<String>) -> Result<T, CqlError> {
    Err(CqlError::Invalid(msg.into()))
}

impl CqlError {
    /// The ERROR response, its body as `version` writes it.
    pub(crate) fn into_response(self, version: ProtocolVersion) -> Response {
        let (error, message) = match self {
            CqlError::Syntax(m) => (DbError::SyntaxError, m),
            CqlError::Invalid(m) => (DbError::Invalid, m),
            CqlError::AlreadyExists {
                keyspace,
                table,
                message,
            } => (DbError::AlreadyExists { keyspace, table }, message),
            CqlError::Unprepared(statement_id) => (
                DbError::Unprepared { statement_id },
                "Prepared query with ID not found (either the query was not prepared on this host (maybe the host has been restarted?) or you have prepared too many queries and it has been evicted from the internal cache)".to_owned(),
            ),
            CqlError::Protocol(m) => (DbError::ProtocolError, m),
            CqlError::Unavailable {
                consistency,
                required,
                alive,
            } => (
                DbError::Unavailable {
                    consistency,
                    required,
                    alive,
                },
                format!("Cannot achieve consistency level {consistency:?}"),
            ),
        };
        let mut b = BytesMut::new();
        let e = ErrorResponse { error, message };
        match e.encode_body(&mut b, version) {
            Ok(()) => Response::new(scylla_cql::frame::header::Opcode::Error, b.freeze()),
            Err(_) => Response::error(error_code::SERVER_ERROR, &e.message),
        }
    }
}
