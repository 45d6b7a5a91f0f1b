//! Client encryption through the system's OpenSSL (feature `openssl-010`):
//! the TLS handshake on a connected socket, bounded by the connect timeout,
//! and its failures classified into a [`TlsErrorKind`] as rustls' are.
//!
//! The context ([`openssl::ssl::SslContext`]) is the application's: it
//! decides the protocol versions, the trust store and what is verified. As
//! with the official crate, no server name is set on the connection (no SNI,
//! no host check); a context that verifies peers checks the node's
//! certificate chain.

use std::pin::Pin;
use std::time::Duration;

use openssl::ssl::{ErrorCode, Ssl, SslContext, SslRef};
use openssl::x509::X509VerifyResult;
use tokio::net::TcpStream;
use tokio_openssl::SslStream;

use super::error::{ConnectionError, SetupStep, TlsErrorKind};

/// A connection encrypted by OpenSSL.
pub(crate) type OpenSslStream = SslStream<TcpStream>;

/// Runs the TLS handshake on a connected socket, bounded by `timeout`.
pub(crate) async fn connect(
    context: &SslContext,
    tcp: TcpStream,
    timeout: Duration,
) -> Result<OpenSslStream, ConnectionError> {
    let step = SetupStep::Tls;
    let setup = |e: openssl::error::ErrorStack| ConnectionError::Tls {
        step,
        kind: TlsErrorKind::Other,
        source: Some(Box::new(e)),
    };
    let ssl = Ssl::new(context).map_err(setup)?;
    let mut stream = SslStream::new(ssl, tcp).map_err(setup)?;
    match tokio::time::timeout(timeout, Pin::new(&mut stream).connect()).await {
        Ok(Ok(())) => Ok(stream),
        Ok(Err(e)) => Err(ConnectionError::Tls {
            step,
            kind: classify(&e, stream.ssl()),
            source: Some(Box::new(e)),
        }),
        Err(_) => Err(ConnectionError::Tls {
            step,
            kind: TlsErrorKind::HandshakeTimeout(timeout),
            source: None,
        }),
    }
}

/// Whether the handshake resumed an earlier session.
pub(crate) fn resumed(stream: &OpenSslStream) -> bool {
    stream.ssl().session_reused()
}

// OpenSSL's certificate verification results (`X509_V_ERR_*` in
// openssl/x509_vfy.h, stable across 1.1 and 3.x).
const DEPTH_ZERO_SELF_SIGNED_CERT: i32 = 18;
const SELF_SIGNED_CERT_IN_CHAIN: i32 = 19;
const UNABLE_TO_GET_ISSUER_CERT_LOCALLY: i32 = 20;
const UNABLE_TO_GET_ISSUER_CERT: i32 = 2;
const CERT_NOT_YET_VALID: i32 = 9;
const CERT_HAS_EXPIRED: i32 = 10;
const HOSTNAME_MISMATCH: i32 = 62;
const IP_ADDRESS_MISMATCH: i32 = 64;

/// What a failed handshake means, from the verification result and
/// OpenSSL's error.
fn classify(e: &openssl::ssl::Error, ssl: &SslRef) -> TlsErrorKind {
    let verify = ssl.verify_result();
    if verify != X509VerifyResult::OK {
        return match verify.as_raw() {
            DEPTH_ZERO_SELF_SIGNED_CERT
            | SELF_SIGNED_CERT_IN_CHAIN
            | UNABLE_TO_GET_ISSUER_CERT_LOCALLY
            | UNABLE_TO_GET_ISSUER_CERT => TlsErrorKind::UnknownCa,
            CERT_NOT_YET_VALID | CERT_HAS_EXPIRED => TlsErrorKind::Expired,
            HOSTNAME_MISMATCH | IP_ADDRESS_MISMATCH => TlsErrorKind::NameMismatch,
            _ => TlsErrorKind::BadCertificate,
        };
    }
    if e.code() == ErrorCode::SYSCALL || e.code() == ErrorCode::ZERO_RETURN {
        // The peer closed (or reset) the connection mid-handshake.
        return TlsErrorKind::ClosedDuringHandshake;
    }
    reason_kind(e).unwrap_or(TlsErrorKind::Other)
}

/// What OpenSSL's error reasons say: a plaintext peer, or an alert about
/// the client's certificate (which TLS 1.3 servers send after the
/// handshake, so it also arrives inside the first CQL exchange's I/O error).
pub(crate) fn reason_kind(e: &openssl::ssl::Error) -> Option<TlsErrorKind> {
    let stack = e.ssl_error()?;
    let reasons: Vec<&str> = stack.errors().iter().filter_map(|r| r.reason()).collect();
    let any = |needles: &[&str]| {
        reasons
            .iter()
            .any(|r| needles.iter().any(|n| r.contains(n)))
    };
    if any(&["wrong version number", "packet length too long"]) {
        return Some(TlsErrorKind::NotTls);
    }
    if reasons.iter().any(|r| r.contains("alert"))
        && any(&[
            "certificate required",
            "bad certificate",
            "unknown ca",
            "certificate unknown",
            "certificate expired",
            "access denied",
        ])
    {
        return Some(TlsErrorKind::ClientCertRejected);
    }
    None
}
