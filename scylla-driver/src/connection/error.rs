//! Errors of one connection: setting it up, and running requests on it.
//!
//! Set-up errors name the step that failed ([`SetupStep`]). Once a connection
//! runs, a failure of the connection itself is a [`BrokenConnection`]: cheap to
//! clone, because one failure ends every request in flight on it. A request
//! that never reached the socket fails with [`RequestError::NotSent`], which a
//! caller may always retry, idempotent or not.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use scylla_cql::frame::response::error::ErrorResponse;
use scylla_cql::{DecodeError, EncodeError};

use super::auth::AuthError;
use super::open::OpenError;

/// A step of connection set-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupStep {
    /// TCP connect.
    Connect,
    /// OPTIONS -> SUPPORTED.
    Options,
    /// STARTUP -> READY / AUTHENTICATE.
    Startup,
    /// The authentication exchange.
    Authenticate,
    /// `USE keyspace`.
    UseKeyspace,
    /// REGISTER for events.
    Register,
}

impl fmt::Display for SetupStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SetupStep::Connect => "connect",
            SetupStep::Options => "OPTIONS",
            SetupStep::Startup => "STARTUP",
            SetupStep::Authenticate => "authentication",
            SetupStep::UseKeyspace => "USE keyspace",
            SetupStep::Register => "REGISTER",
        })
    }
}

/// Opening or setting up a connection failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// The TCP connection could not be opened.
    #[error("opening the connection failed: {0}")]
    Open(#[from] OpenError),
    /// A set-up step took longer than the handshake timeout.
    #[error("{step} timed out after {after:?}")]
    Timeout {
        /// The step.
        step: SetupStep,
        /// The handshake timeout.
        after: Duration,
    },
    /// The socket failed during set-up.
    #[error("{step} failed: {source}")]
    Io {
        /// The step.
        step: SetupStep,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The server closed the connection during set-up.
    #[error("the server closed the connection during {step}")]
    Closed {
        /// The step.
        step: SetupStep,
    },
    /// The server answered a set-up step with an error.
    #[error("{step} was refused by the server: {error}")]
    Server {
        /// The step.
        step: SetupStep,
        /// The server's error.
        error: ErrorResponse,
    },
    /// The server answered a set-up step with an unexpected message.
    #[error("{step}: unexpected {got} response")]
    UnexpectedResponse {
        /// The step.
        step: SetupStep,
        /// What came instead.
        got: &'static str,
    },
    /// A frame of the handshake was malformed.
    #[error("{step}: malformed response: {source}")]
    Decode {
        /// The step.
        step: SetupStep,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// A handshake request could not be encoded.
    #[error("{step}: could not encode the request: {source}")]
    Encode {
        /// The step.
        step: SetupStep,
        /// Why.
        #[source]
        source: EncodeError,
    },
    /// The server requires authentication but none is configured.
    #[error(
        "the server requires authentication ({authenticator}) but no credentials are configured"
    )]
    AuthRequired {
        /// The server's authenticator class.
        authenticator: String,
    },
    /// The authenticator failed.
    #[error(transparent)]
    Auth(#[from] AuthError),
}

impl ConnectionError {
    /// The set-up step that failed.
    pub fn step(&self) -> SetupStep {
        match self {
            ConnectionError::Open(_) => SetupStep::Connect,
            ConnectionError::Timeout { step, .. }
            | ConnectionError::Io { step, .. }
            | ConnectionError::Closed { step }
            | ConnectionError::Server { step, .. }
            | ConnectionError::UnexpectedResponse { step, .. }
            | ConnectionError::Decode { step, .. }
            | ConnectionError::Encode { step, .. } => *step,
            ConnectionError::AuthRequired { .. } | ConnectionError::Auth(_) => {
                SetupStep::Authenticate
            }
        }
    }
}

/// Why a running connection stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokenReason {
    /// Reading or writing the socket failed.
    #[error("I/O error: {0}")]
    Io(#[source] io::Error),
    /// The server closed the connection.
    #[error("the server closed the connection")]
    ClosedByPeer,
    /// A frame from the server could not be decoded (a protocol error).
    #[error("malformed frame from the server: {0}")]
    Decode(#[source] DecodeError),
    /// The server answered a stream id with no request waiting on it.
    #[error("the server answered stream {0}, which has no request in flight")]
    UnknownStream(i16),
    /// The heartbeat got no answer.
    #[error("heartbeat failed: {0}")]
    HeartbeatFailed(String),
    /// Requests were in flight, no response frame arrived for `silent_for`,
    /// and a probe went unanswered: the stream is wedged (typically a
    /// damaged length field that the reader is still waiting to fill).
    #[error("no response frame for {silent_for:?} with requests in flight, and the probe went unanswered ({probe}); recycling the connection")]
    ReadStalled {
        /// How long the reader had completed no frame when the probe failed.
        silent_for: Duration,
        /// Why the probe failed.
        probe: String,
    },
    /// Too many timed-out requests still hold stream ids.
    #[error("{0} requests timed out without a response; recycling the connection")]
    TooManyOrphans(usize),
    /// The client closed the connection.
    #[error("the connection was closed by the client")]
    Closed,
}

/// A connection's failure, shared by every request that was in flight on it.
#[derive(Debug, Clone)]
pub struct BrokenConnection(pub Arc<BrokenReason>);

impl BrokenConnection {
    /// Why the connection stopped.
    pub fn reason(&self) -> &BrokenReason {
        &self.0
    }
}

impl fmt::Display for BrokenConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for BrokenConnection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// A request on an established connection did not get a response.
///
/// Server errors are not request errors: they arrive as an ERROR response,
/// for the layer above to interpret.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The request never reached the socket (the connection was already
    /// broken or closed): retrying it elsewhere is always safe.
    #[error("request not sent: {0}")]
    NotSent(BrokenConnection),
    /// The connection broke while the request was in flight: the server may
    /// or may not have executed it.
    #[error("connection broken while the request was in flight: {0}")]
    Broken(BrokenConnection),
    /// No response within the request's timeout. The server may still
    /// execute it.
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// The request could not be encoded (nothing was sent).
    #[error("the request could not be encoded: {0}")]
    Encode(#[from] EncodeError),
}

impl RequestError {
    /// Whether the server certainly did not see the request.
    pub fn is_not_sent(&self) -> bool {
        matches!(self, RequestError::NotSent(_) | RequestError::Encode(_))
    }
}
