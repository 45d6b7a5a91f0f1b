//! ERROR (section 4.2.1 of the v4 spec, codes in section 9; section 8 of the
//! v5 spec): an `[int]` code, a `[string]` message and, for some codes, a
//! code-specific body.
//!
//! v5 changes three bodies: READ_FAILURE and WRITE_FAILURE carry a
//! `<reasonmap>` (replica address to failure code) where v4 has
//! `<numfailures>`, and WRITE_TIMEOUT of a CAS write ends with
//! `<contentions>`. One variant per error holds both forms (see
//! [`DbError::ReadFailure`]); the body is read and written for the
//! connection's version. v5 also defines CDC_WRITE_FAILURE and
//! CAS_WRITE_UNKNOWN, decoded on any version.
//!
//! Every code of the spec is its own [`DbError`] variant with its typed body,
//! so that retry policies can match on them. ScyllaDB's rate-limit error has
//! no fixed code (SUPPORTED advertises it), so its decoding depends on the
//! [`ResponseContext`]. Unknown codes decode to [`DbError::Other`] instead of
//! failing: a new server error must still reach the user with its message.

use crate::frame::ProtocolVersion;
use std::net::IpAddr;

use bytes::{Bytes, BytesMut};

use super::{share, ResponseContext};
use crate::consistency::Consistency;
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// Error codes of section 9.
mod code {
    pub(super) const SERVER_ERROR: i32 = 0x0000;
    pub(super) const PROTOCOL_ERROR: i32 = 0x000A;
    pub(super) const AUTHENTICATION_ERROR: i32 = 0x0100;
    pub(super) const UNAVAILABLE: i32 = 0x1000;
    pub(super) const OVERLOADED: i32 = 0x1001;
    pub(super) const IS_BOOTSTRAPPING: i32 = 0x1002;
    pub(super) const TRUNCATE_ERROR: i32 = 0x1003;
    pub(super) const WRITE_TIMEOUT: i32 = 0x1100;
    pub(super) const READ_TIMEOUT: i32 = 0x1200;
    pub(super) const READ_FAILURE: i32 = 0x1300;
    pub(super) const FUNCTION_FAILURE: i32 = 0x1400;
    pub(super) const WRITE_FAILURE: i32 = 0x1500;
    pub(super) const CDC_WRITE_FAILURE: i32 = 0x1600;
    pub(super) const CAS_WRITE_UNKNOWN: i32 = 0x1700;
    pub(super) const SYNTAX_ERROR: i32 = 0x2000;
    pub(super) const UNAUTHORIZED: i32 = 0x2100;
    pub(super) const INVALID: i32 = 0x2200;
    pub(super) const CONFIG_ERROR: i32 = 0x2300;
    pub(super) const ALREADY_EXISTS: i32 = 0x2400;
    pub(super) const UNPREPARED: i32 = 0x2500;
}

/// Every error code defined by the v4 and v5 specs.
pub const KNOWN_CODES: [i32; 20] = [
    code::SERVER_ERROR,
    code::PROTOCOL_ERROR,
    code::AUTHENTICATION_ERROR,
    code::UNAVAILABLE,
    code::OVERLOADED,
    code::IS_BOOTSTRAPPING,
    code::TRUNCATE_ERROR,
    code::WRITE_TIMEOUT,
    code::READ_TIMEOUT,
    code::READ_FAILURE,
    code::FUNCTION_FAILURE,
    code::WRITE_FAILURE,
    code::CDC_WRITE_FAILURE,
    code::CAS_WRITE_UNKNOWN,
    code::SYNTAX_ERROR,
    code::UNAUTHORIZED,
    code::INVALID,
    code::CONFIG_ERROR,
    code::ALREADY_EXISTS,
    code::UNPREPARED,
];

/// An ERROR response: what went wrong and the server's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}: {message}")]
pub struct ErrorResponse {
    /// The error code and its body.
    pub error: DbError,
    /// The server's human-readable message.
    pub message: String,
}

/// The kind of write that timed out or failed (`<writeType>`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WriteType {
    /// A non-batched, non-counter write.
    Simple,
    /// A logged batch (the batch log was written).
    Batch,
    /// An unlogged batch.
    UnloggedBatch,
    /// A counter write.
    Counter,
    /// The write to the batch log of a logged batch.
    BatchLog,
    /// The Paxos (compare-and-set) phase of a lightweight transaction.
    Cas,
    /// A materialized-view update.
    View,
    /// A write to CDC-tracked data exceeding `cdc_total_space`.
    Cdc,
    /// A write type this crate does not know, as sent.
    Other(String),
}

impl WriteType {
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            WriteType::Simple => "SIMPLE",
            WriteType::Batch => "BATCH",
            WriteType::UnloggedBatch => "UNLOGGED_BATCH",
            WriteType::Counter => "COUNTER",
            WriteType::BatchLog => "BATCH_LOG",
            WriteType::Cas => "CAS",
            WriteType::View => "VIEW",
            WriteType::Cdc => "CDC",
            WriteType::Other(s) => s,
        }
    }

    /// Parses a wire name; unknown names are kept as [`WriteType::Other`].
    pub fn from_name(name: &str) -> Self {
        match name {
            "SIMPLE" => WriteType::Simple,
            "BATCH" => WriteType::Batch,
            "UNLOGGED_BATCH" => WriteType::UnloggedBatch,
            "COUNTER" => WriteType::Counter,
            "BATCH_LOG" => WriteType::BatchLog,
            "CAS" => WriteType::Cas,
            "VIEW" => WriteType::View,
            "CDC" => WriteType::Cdc,
            other => WriteType::Other(other.to_owned()),
        }
    }
}

impl std::fmt::Display for WriteType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The operation a rate-limit error rejected (`<op_type>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationType {
    /// A read (0).
    Read,
    /// A write (1).
    Write,
    /// A value the extension does not define yet, as sent.
    Other(u8),
}

impl OperationType {
    /// The wire byte.
    pub fn code(self) -> u8 {
        match self {
            OperationType::Read => 0,
            OperationType::Write => 1,
            OperationType::Other(b) => b,
        }
    }

    /// Parses the wire byte.
    pub fn from_code(b: u8) -> Self {
        match b {
            0 => OperationType::Read,
            1 => OperationType::Write,
            other => OperationType::Other(other),
        }
    }
}

/// An error code with its code-specific body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// 0x0000: a server-side bug.
    #[error("server error")]
    ServerError,
    /// 0x000A: the client violated the protocol.
    #[error("protocol error")]
    ProtocolError,
    /// 0x0100: authentication failed.
    #[error("authentication error")]
    AuthenticationError,
    /// 0x1000: not enough replicas alive to satisfy the consistency level.
    #[error("unavailable (consistency {consistency}, {required} required, {alive} alive)")]
    Unavailable {
        /// Consistency of the request.
        consistency: Consistency,
        /// Replicas required.
        required: i32,
        /// Replicas known alive.
        alive: i32,
    },
    /// 0x1001: the coordinator is overloaded.
    #[error("overloaded")]
    Overloaded,
    /// 0x1002: the coordinator is bootstrapping.
    #[error("node is bootstrapping")]
    IsBootstrapping,
    /// 0x1003: a truncation failed.
    #[error("truncate error")]
    TruncateError,
    /// 0x1100: a write timed out.
    #[error("write timeout (consistency {consistency}, {received}/{block_for} acknowledged, {write_type} write)")]
    WriteTimeout {
        /// Consistency of the request.
        consistency: Consistency,
        /// Replicas that acknowledged.
        received: i32,
        /// Acknowledgements required.
        block_for: i32,
        /// What kind of write it was.
        write_type: WriteType,
        /// v5, CAS writes only: how many contentions the Paxos round met
        /// (`None` on v4 and for other write types; encoding a CAS write
        /// timeout for v5 writes 0 for `None`).
        contentions: Option<u16>,
    },
    /// 0x1200: a read timed out.
    #[error("read timeout (consistency {consistency}, {received}/{block_for} answered, data present: {data_present})")]
    ReadTimeout {
        /// Consistency of the request.
        consistency: Consistency,
        /// Replicas that answered.
        received: i32,
        /// Answers required.
        block_for: i32,
        /// Whether the replica asked for data answered.
        data_present: bool,
    },
    /// 0x1300: a read failed (not a timeout).
    #[error("read failure (consistency {consistency}, {received}/{block_for} answered, {num_failures} failed, data present: {data_present})")]
    ReadFailure {
        /// Consistency of the request.
        consistency: Consistency,
        /// Replicas that answered.
        received: i32,
        /// Answers required.
        block_for: i32,
        /// Replicas that failed (v4 `<numfailures>`; on v5 the size of
        /// `reasons`).
        num_failures: i32,
        /// v5 `<reasonmap>`: each failed replica with its failure code
        /// (empty on v4, which sends only the count).
        reasons: Vec<(IpAddr, u16)>,
        /// Whether the replica asked for data answered.
        data_present: bool,
    },
    /// 0x1400: a user-defined function failed.
    #[error("function {keyspace}.{function}({}) failed", arg_types.join(", "))]
    FunctionFailure {
        /// Keyspace of the function.
        keyspace: String,
        /// Name of the function.
        function: String,
        /// CQL types of its arguments.
        arg_types: Vec<String>,
    },
    /// 0x1500: a write failed (not a timeout).
    #[error("write failure (consistency {consistency}, {received}/{block_for} acknowledged, {num_failures} failed, {write_type} write)")]
    WriteFailure {
        /// Consistency of the request.
        consistency: Consistency,
        /// Replicas that acknowledged.
        received: i32,
        /// Acknowledgements required.
        block_for: i32,
        /// Replicas that failed (v4 `<numfailures>`; on v5 the size of
        /// `reasons`).
        num_failures: i32,
        /// v5 `<reasonmap>`: each failed replica with its failure code
        /// (empty on v4, which sends only the count).
        reasons: Vec<(IpAddr, u16)>,
        /// What kind of write it was.
        write_type: WriteType,
    },
    /// 0x1600 (v5): a write to CDC-tracked data failed (the spec defines no
    /// body beyond the message).
    #[error("CDC write failure")]
    CdcWriteFailure,
    /// 0x1700 (v5): a contended compare-and-set write may or may not have
    /// been applied.
    #[error("CAS write unknown (consistency {consistency}, {received}/{block_for} acknowledged)")]
    CasWriteUnknown {
        /// Consistency of the request.
        consistency: Consistency,
        /// Replicas that acknowledged.
        received: i32,
        /// Acknowledgements required.
        block_for: i32,
    },
    /// 0x2000: the query has a syntax error.
    #[error("syntax error")]
    SyntaxError,
    /// 0x2100: the user may not run the query.
    #[error("unauthorized")]
    Unauthorized,
    /// 0x2200: the query is invalid.
    #[error("invalid query")]
    Invalid,
    /// 0x2300: the query conflicts with the configuration.
    #[error("configuration error")]
    ConfigError,
    /// 0x2400: the keyspace or table to create exists (`table` is empty for a keyspace).
    #[error("already exists: {keyspace}.{table}")]
    AlreadyExists {
        /// The keyspace (that exists, or of the table that exists).
        keyspace: String,
        /// The table that exists, or empty.
        table: String,
    },
    /// 0x2500: the prepared statement id is unknown to this node.
    #[error("unprepared statement")]
    Unprepared {
        /// The unknown id.
        statement_id: Bytes,
    },
    /// ScyllaDB's per-partition rate limit was exceeded; its code is the one
    /// advertised in SUPPORTED (`SCYLLA_RATE_LIMIT_ERROR`).
    #[error("rate limit reached ({op_type:?}, rejected by {})", if *rejected_by_coordinator { "coordinator" } else { "replicas" })]
    RateLimitReached {
        /// The negotiated error code this error travels with.
        code: i32,
        /// The rejected operation.
        op_type: OperationType,
        /// Whether the coordinator (rather than a replica) rejected it.
        rejected_by_coordinator: bool,
    },
    /// A code this crate does not know; any body after the message is ignored.
    #[error("error code 0x{0:04x}")]
    Other(i32),
}

impl DbError {
    /// The wire error code.
    pub fn code(&self) -> i32 {
        match self {
            DbError::ServerError => code::SERVER_ERROR,
            DbError::ProtocolError => code::PROTOCOL_ERROR,
            DbError::AuthenticationError => code::AUTHENTICATION_ERROR,
            DbError::Unavailable { .. } => code::UNAVAILABLE,
            DbError::Overloaded => code::OVERLOADED,
            DbError::IsBootstrapping => code::IS_BOOTSTRAPPING,
            DbError::TruncateError => code::TRUNCATE_ERROR,
            DbError::WriteTimeout { .. } => code::WRITE_TIMEOUT,
            DbError::ReadTimeout { .. } => code::READ_TIMEOUT,
            DbError::ReadFailure { .. } => code::READ_FAILURE,
            DbError::FunctionFailure { .. } => code::FUNCTION_FAILURE,
            DbError::WriteFailure { .. } => code::WRITE_FAILURE,
            DbError::CdcWriteFailure => code::CDC_WRITE_FAILURE,
            DbError::CasWriteUnknown { .. } => code::CAS_WRITE_UNKNOWN,
            DbError::SyntaxError => code::SYNTAX_ERROR,
            DbError::Unauthorized => code::UNAUTHORIZED,
            DbError::Invalid => code::INVALID,
            DbError::ConfigError => code::CONFIG_ERROR,
            DbError::AlreadyExists { .. } => code::ALREADY_EXISTS,
            DbError::Unprepared { .. } => code::UNPREPARED,
            DbError::RateLimitReached { code, .. } => *code,
            DbError::Other(code) => *code,
        }
    }

    /// Decodes the code-specific body of `code` (the message already read).
    fn decode(
        code: i32,
        body: &Bytes,
        r: &mut WireReader<'_>,
        ctx: &ResponseContext,
    ) -> Result<DbError, DecodeError> {
        // The negotiated rate-limit code is checked first: the server said
        // what it means on this connection.
        if ctx.rate_limit_error_code == Some(code) {
            return Ok(DbError::RateLimitReached {
                code,
                op_type: OperationType::from_code(r.read_u8("rate limit op_type")?),
                rejected_by_coordinator: r.read_u8("rate limit rejected_by_coordinator")? != 0,
            });
        }
        let v5 = ctx.version == ProtocolVersion::V5;
        Ok(match code {
            code::SERVER_ERROR => DbError::ServerError,
            code::PROTOCOL_ERROR => DbError::ProtocolError,
            code::AUTHENTICATION_ERROR => DbError::AuthenticationError,
            code::UNAVAILABLE => DbError::Unavailable {
                consistency: r.read_consistency("unavailable consistency")?,
                required: r.read_int("unavailable required")?,
                alive: r.read_int("unavailable alive")?,
            },
            code::OVERLOADED => DbError::Overloaded,
            code::IS_BOOTSTRAPPING => DbError::IsBootstrapping,
            code::TRUNCATE_ERROR => DbError::TruncateError,
            code::WRITE_TIMEOUT => {
                let consistency = r.read_consistency("write timeout consistency")?;
                let received = r.read_int("write timeout received")?;
                let block_for = r.read_int("write timeout block_for")?;
                let write_type = WriteType::from_name(r.read_string("write timeout write_type")?);
                let contentions = if v5 && write_type == WriteType::Cas {
                    Some(r.read_short("write timeout contentions")?)
                } else {
                    None
                };
                DbError::WriteTimeout {
                    consistency,
                    received,
                    block_for,
                    write_type,
                    contentions,
                }
            }
            code::READ_TIMEOUT => DbError::ReadTimeout {
                consistency: r.read_consistency("read timeout consistency")?,
                received: r.read_int("read timeout received")?,
                block_for: r.read_int("read timeout block_for")?,
                data_present: r.read_u8("read timeout data_present")? != 0,
            },
            code::READ_FAILURE => {
                let consistency = r.read_consistency("read failure consistency")?;
                let received = r.read_int("read failure received")?;
                let block_for = r.read_int("read failure block_for")?;
                let (num_failures, reasons) = read_failures(r, v5, "read failure")?;
                DbError::ReadFailure {
                    consistency,
                    received,
                    block_for,
                    num_failures,
                    reasons,
                    data_present: r.read_u8("read failure data_present")? != 0,
                }
            }
            code::FUNCTION_FAILURE => DbError::FunctionFailure {
                keyspace: r.read_string("function failure keyspace")?.to_owned(),
                function: r.read_string("function failure function")?.to_owned(),
                arg_types: r.read_string_list("function failure arg_types")?,
            },
            code::WRITE_FAILURE => {
                let consistency = r.read_consistency("write failure consistency")?;
                let received = r.read_int("write failure received")?;
                let block_for = r.read_int("write failure block_for")?;
                let (num_failures, reasons) = read_failures(r, v5, "write failure")?;
                DbError::WriteFailure {
                    consistency,
                    received,
                    block_for,
                    num_failures,
                    reasons,
                    write_type: WriteType::from_name(r.read_string("write failure write_type")?),
                }
            }
            code::CDC_WRITE_FAILURE => DbError::CdcWriteFailure,
            code::CAS_WRITE_UNKNOWN => DbError::CasWriteUnknown {
                consistency: r.read_consistency("cas write unknown consistency")?,
                received: r.read_int("cas write unknown received")?,
                block_for: r.read_int("cas write unknown block_for")?,
            },
            code::SYNTAX_ERROR => DbError::SyntaxError,
            code::UNAUTHORIZED => DbError::Unauthorized,
            code::INVALID => DbError::Invalid,
            code::CONFIG_ERROR => DbError::ConfigError,
            code::ALREADY_EXISTS => DbError::AlreadyExists {
                keyspace: r.read_string("already exists keyspace")?.to_owned(),
                table: r.read_string("already exists table")?.to_owned(),
            },
            code::UNPREPARED => DbError::Unprepared {
                statement_id: share(body, r.read_short_bytes("unprepared statement id")?),
            },
            other => DbError::Other(other),
        })
    }

    /// Appends the code-specific body (after the message) for `version`.
    fn encode(&self, buf: &mut BytesMut, version: ProtocolVersion) -> Result<(), EncodeError> {
        let v5 = version == ProtocolVersion::V5;
        match self {
            DbError::Unavailable {
                consistency,
                required,
                alive,
            } => {
                wire::put_consistency(buf, *consistency);
                wire::put_int(buf, *required);
                wire::put_int(buf, *alive);
            }
            DbError::WriteTimeout {
                consistency,
                received,
                block_for,
                write_type,
                contentions,
            } => {
                wire::put_consistency(buf, *consistency);
                wire::put_int(buf, *received);
                wire::put_int(buf, *block_for);
                wire::put_string(buf, write_type.as_str(), "write type")?;
                if v5 && *write_type == WriteType::Cas {
                    wire::put_short(buf, contentions.unwrap_or(0));
                }
            }
            DbError::ReadTimeout {
                consistency,
                received,
                block_for,
                data_present,
            } => {
                wire::put_consistency(buf, *consistency);
                wire::put_int(buf, *received);
                wire::put_int(buf, *block_for);
                wire::put_u8(buf, u8::from(*data_present));
            }
            DbError::ReadFailure {
                consistency,
                received,
                block_for,
                num_failures,
                reasons,
                data_present,
            } => {
                wire::put_consistency(buf, *consistency);
                wire::put_int(buf, *received);
                wire::put_int(buf, *block_for);
                put_failures(buf, v5, *num_failures, reasons)?;
                wire::put_u8(buf, u8::from(*data_present));
            }
            DbError::FunctionFailure {
                keyspace,
                function,
                arg_types,
            } => {
                wire::put_string(buf, keyspace, "function keyspace")?;
                wire::put_string(buf, function, "function name")?;
                wire::put_string_list(buf, arg_types, "function arg types")?;
            }
            DbError::WriteFailure {
                consistency,
                received,
                block_for,
                num_failures,
                reasons,
                write_type,
            } => {
                wire::put_consistency(buf, *consistency);
                wire::put_int(buf, *received);
                wire::put_int(buf, *block_for);
                put_failures(buf, v5, *num_failures, reasons)?;
                wire::put_string(buf, write_type.as_str(), "write type")?;
            }
            DbError::CasWriteUnknown {
                consistency,
                received,
                block_for,
            } => {
                wire::put_consistency(buf, *consistency);
                wire::put_int(buf, *received);
                wire::put_int(buf, *block_for);
            }
            DbError::AlreadyExists { keyspace, table } => {
                wire::put_string(buf, keyspace, "already exists keyspace")?;
                wire::put_string(buf, table, "already exists table")?;
            }
            DbError::Unprepared { statement_id } => {
                wire::put_short_bytes(buf, statement_id, "unprepared statement id")?;
            }
            DbError::RateLimitReached {
                op_type,
                rejected_by_coordinator,
                ..
            } => {
                wire::put_u8(buf, op_type.code());
                wire::put_u8(buf, u8::from(*rejected_by_coordinator));
            }
            DbError::ServerError
            | DbError::ProtocolError
            | DbError::AuthenticationError
            | DbError::Overloaded
            | DbError::IsBootstrapping
            | DbError::TruncateError
            | DbError::SyntaxError
            | DbError::Unauthorized
            | DbError::Invalid
            | DbError::ConfigError
            | DbError::CdcWriteFailure
            | DbError::Other(_) => {}
        }
        Ok(())
    }
}

/// Reads `<numfailures>` (v4) or `<reasonmap>` (v5, whose size becomes the
/// count).
fn read_failures(
    r: &mut WireReader<'_>,
    v5: bool,
    what: &'static str,
) -> Result<(i32, Vec<(IpAddr, u16)>), DecodeError> {
    if !v5 {
        return Ok((r.read_int(what)?, Vec::new()));
    }
    // An entry is at least an IPv4 [inetaddr] (5 bytes) and a [short].
    let n = r.read_count(what, 7)?;
    let mut reasons = Vec::with_capacity(n);
    for _ in 0..n {
        let ip = r.read_inetaddr(what)?;
        reasons.push((ip, r.read_short(what)?));
    }
    // `n` came from a non-negative [int]: it fits.
    Ok((i32::try_from(n).unwrap_or(i32::MAX), reasons))
}

/// Writes `<numfailures>` (v4) or `<reasonmap>` (v5).
fn put_failures(
    buf: &mut BytesMut,
    v5: bool,
    num_failures: i32,
    reasons: &[(IpAddr, u16)],
) -> Result<(), EncodeError> {
    if !v5 {
        wire::put_int(buf, num_failures);
        return Ok(());
    }
    wire::put_int_len(buf, reasons.len(), "failure reasons")?;
    for (ip, code) in reasons {
        wire::put_inetaddr(buf, ip);
        wire::put_short(buf, *code);
    }
    Ok(())
}

impl ErrorResponse {
    /// Decodes an ERROR body. For [`DbError::Other`] the reader is left after
    /// the message, wherever the unknown body continues.
    pub fn decode(
        body: &Bytes,
        r: &mut WireReader<'_>,
        ctx: &ResponseContext,
    ) -> Result<ErrorResponse, DecodeError> {
        let code = r.read_int("error code")?;
        let message = r.read_string("error message")?.to_owned();
        let error = DbError::decode(code, body, r, ctx)?;
        Ok(ErrorResponse { error, message })
    }
}

impl MessageBody for ErrorResponse {
    fn opcode(&self) -> Opcode {
        Opcode::Error
    }

    fn encode_body(&self, buf: &mut BytesMut, version: ProtocolVersion) -> Result<(), EncodeError> {
        wire::put_int(buf, self.error.code());
        wire::put_string(buf, &self.message, "error message")?;
        self.error.encode(buf, version)
    }
}
