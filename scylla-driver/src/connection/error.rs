//! Errors of one connection: setting it up, and running requests on it.
//!
//! Set-up errors name the step that failed ([`SetupStep`]). Once a connection
//! runs, a failure of the connection itself is a [`BrokenConnection`]: cheap to
//! clone, because one failure ends every request in flight on it. A request
//! that never reached the socket fails with [`ConnectionRequestError::NotSent`], which a
//! caller may always retry, idempotent or not.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use scylla_cql::frame::response::error::ErrorResponse;
use scylla_cql::frame::segment::SegmentError;
use scylla_cql::frame::ProtocolVersion;
use scylla_cql::{DecodeError, EncodeError};

use super::auth::AuthenticationFailed;
use super::open::OpenError;

/// A step of connection set-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupStep {
    /// TCP connect.
    Connect,
    /// The TLS handshake.
    Tls,
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
            SetupStep::Tls => "TLS handshake",
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
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A set-up step took longer than the handshake timeout.
    #[error("{step} timed out after {after:?}: check that the node is not overloaded, or raise the handshake timeout")]
    Timeout {
        /// The step.
        step: SetupStep,
        /// The handshake timeout.
        after: Duration,
    },
    /// The socket failed during set-up.
    #[error("{step} failed on the socket{}", io_hint(*step, source))]
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
    #[error("{step}: malformed response")]
    Decode {
        /// The step.
        step: SetupStep,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// A v5 segment of the handshake was damaged or malformed.
    #[error("{step}: damaged or malformed segment")]
    Segment {
        /// The step.
        step: SetupStep,
        /// Why.
        #[source]
        source: SegmentError,
    },
    /// The server does not speak the protocol version offered (it answered
    /// the first request with a protocol error or an older version).
    /// Negotiation then tries the next older version on a new connection.
    #[error("the server does not speak protocol {offered}: {message}")]
    VersionRefused {
        /// The version offered.
        offered: ProtocolVersion,
        /// What the server said.
        message: String,
    },
    /// A handshake request could not be encoded.
    #[error("{step}: could not encode the request")]
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
    Auth(#[from] AuthenticationFailed),
    /// TLS failed: a certificate problem, a TLS/plaintext mismatch, or a
    /// handshake that did not finish.
    #[error("TLS error during {step}: {kind}")]
    Tls {
        /// The step (the TLS handshake, or the first CQL exchange for a
        /// client certificate rejected after a TLS 1.3 handshake).
        step: SetupStep,
        /// What went wrong.
        kind: TlsErrorKind,
        /// The rustls or I/O error, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

/// What to check after an I/O error at set-up `step`: a node that resets a
/// plaintext connection at its first request is most often a TLS port.
fn io_hint(step: SetupStep, source: &io::Error) -> &'static str {
    match (step, source.kind()) {
        (
            SetupStep::Options,
            io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof | io::ErrorKind::BrokenPipe,
        ) => " (the node dropped the connection at its first request: if this is its TLS port, enable TLS with `SessionBuilder::tls`)",
        _ => "",
    }
}

/// What went wrong with TLS, in terms of what to fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsErrorKind {
    /// The server's certificate is not signed by a trusted CA.
    UnknownCa,
    /// The server's certificate is not valid for the name verified.
    NameMismatch,
    /// The server's certificate has expired (or is not yet valid).
    Expired,
    /// The server's certificate was rejected for another reason.
    BadCertificate,
    /// The server did not answer in TLS (a plaintext port?).
    NotTls,
    /// The server speaks TLS but this connection does not use it.
    ServerRequiresTls,
    /// The server rejected or required a client certificate.
    ClientCertRejected,
    /// The server ended the connection during the TLS handshake.
    ClosedDuringHandshake,
    /// The server ended the connection at the first CQL request after a TLS
    /// handshake in which this client offered no certificate: what a server
    /// requiring client certificates does under TLS 1.3 when its alert is
    /// lost to the reset (Cassandra 5.0.6 here, sometimes).
    ClosedAfterHandshakeWithoutClientCert,
    /// The TLS handshake did not finish in time.
    HandshakeTimeout(Duration),
    /// The configured server name is not a valid DNS name or IP address.
    InvalidServerName,
    /// The driver's record layer (`RecordLayer::Driver`) was asked for with
    /// a configuration it cannot serve (FIPS, or cipher suites not `ring`'s).
    DriverRecordLayerUnsupported,
    /// Another TLS alert or protocol error.
    Other,
}

impl fmt::Display for TlsErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsErrorKind::UnknownCa => f.write_str(
                "the server's certificate is not signed by a trusted CA (check the CA file)",
            ),
            TlsErrorKind::NameMismatch => f.write_str(
                "the server's certificate does not match the node's name (set the TLS server name)",
            ),
            TlsErrorKind::Expired => f.write_str("the server's certificate has expired or is not yet valid"),
            TlsErrorKind::BadCertificate => f.write_str("the server's certificate was rejected"),
            TlsErrorKind::NotTls => f.write_str(
                "the server does not speak TLS on this port (a plaintext port? disable TLS or use the TLS port)",
            ),
            TlsErrorKind::ServerRequiresTls => {
                f.write_str("the server speaks TLS on this port; enable TLS")
            }
            TlsErrorKind::ClientCertRejected => f.write_str(
                "the server rejected the client certificate or requires one (configure a client certificate)",
            ),
            TlsErrorKind::ClosedDuringHandshake => f.write_str(
                "the server closed the connection during the TLS handshake (a plaintext port, or a client certificate required?)",
            ),
            TlsErrorKind::ClosedAfterHandshakeWithoutClientCert => f.write_str(
                "the server closed the connection right after the TLS handshake; it may require a \
                 client certificate, and none is configured",
            ),
            TlsErrorKind::HandshakeTimeout(d) => {
                write!(f, "the TLS handshake did not finish within {d:?}")
            }
            TlsErrorKind::InvalidServerName => f.write_str("invalid TLS server name"),
            TlsErrorKind::DriverRecordLayerUnsupported => f.write_str(
                "the driver's TLS record layer (RecordLayer::Driver) cannot serve this ClientConfig \
                 (FIPS, or a crypto provider other than ring): use RecordLayer::Rustls",
            ),
            TlsErrorKind::Other => f.write_str("TLS failed"),
        }
    }
}

/// Whether bytes a plaintext connection received look like a TLS record
/// (an alert or a handshake record of TLS 1.0 to 1.3): the server expects TLS.
pub(crate) fn looks_like_tls_record(buf: &[u8]) -> bool {
    matches!(buf, [0x15 | 0x16, 0x03, 0x00..=0x04, ..])
}

impl ConnectionError {
    /// What went wrong with TLS, if this is a TLS failure.
    pub fn tls_kind(&self) -> Option<TlsErrorKind> {
        match self {
            ConnectionError::Tls { kind, .. } => Some(*kind),
            _ => None,
        }
    }

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
            | ConnectionError::Encode { step, .. }
            | ConnectionError::Segment { step, .. }
            | ConnectionError::Tls { step, .. } => *step,
            ConnectionError::VersionRefused { .. } => SetupStep::Options,
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
    #[error("I/O error on the connection")]
    Io(#[source] io::Error),
    /// The server closed the connection.
    #[error("the server closed the connection")]
    ClosedByPeer,
    /// A frame from the server could not be decoded (a protocol error).
    #[error("malformed frame from the server")]
    Decode(#[source] DecodeError),
    /// A protocol v5 segment failed its checksum or framing checks: the
    /// bytes on the wire were damaged (or the server is broken). Nothing
    /// from the segment reached a request.
    #[error("damaged or malformed segment from the server")]
    Segment(#[source] SegmentError),
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

// Transparent: displays as its reason, and its source is the reason's.
impl fmt::Display for BrokenConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for BrokenConnection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&*self.0)
    }
}

/// A request on an established connection did not get a response.
///
/// Server errors are not request errors: they arrive as an ERROR response,
/// for the layer above to interpret.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionRequestError {
    /// The request never reached the socket (the connection was already
    /// broken or closed): retrying it elsewhere is always safe.
    #[error("request not sent: the connection had already stopped")]
    NotSent(#[source] BrokenConnection),
    /// The connection broke while the request was in flight: the server may
    /// or may not have executed it.
    #[error("the connection broke while the request was in flight")]
    Broken(#[source] BrokenConnection),
    /// No response within the request's timeout. The server may still
    /// execute it.
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// The request could not be encoded (nothing was sent).
    #[error("the request could not be encoded")]
    Encode(#[from] EncodeError),
}

impl ConnectionRequestError {
    /// Whether the server certainly did not see the request.
    pub fn is_not_sent(&self) -> bool {
        matches!(
            self,
            ConnectionRequestError::NotSent(_) | ConnectionRequestError::Encode(_)
        )
    }
}

/// Displays an error and each of its sources, joined by `": "` (as
/// anyhow's `{:#}` does): for the errors a list holds (the contact points
/// tried), whose causes no `source()` reaches.
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        // Bounded: a cyclic chain would be a bug, not a reason to hang.
        for _ in 0..16 {
            let Some(e) = next else { break };
            write!(f, ": {e}")?;
            next = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_at_the_first_request_suggests_tls() {
        let reset = ConnectionError::Io {
            step: SetupStep::Options,
            source: io::Error::from(io::ErrorKind::ConnectionReset),
        };
        assert!(reset.to_string().contains("enable TLS"), "{reset}");
        let later = ConnectionError::Io {
            step: SetupStep::Startup,
            source: io::Error::from(io::ErrorKind::ConnectionReset),
        };
        assert!(!later.to_string().contains("TLS"), "{later}");
        // The source's own text is not repeated.
        assert!(!reset.to_string().contains("reset by peer"), "{reset}");
    }

    #[test]
    fn tls_records_are_recognised() {
        assert!(looks_like_tls_record(&[0x15, 0x03, 0x03, 0x00, 0x02]));
        assert!(looks_like_tls_record(&[0x16, 0x03, 0x01]));
        // A CQL v4 response header.
        assert!(!looks_like_tls_record(&[0x84, 0x00, 0x00, 0x00, 0x06]));
        assert!(!looks_like_tls_record(&[0x15]));
    }
}
