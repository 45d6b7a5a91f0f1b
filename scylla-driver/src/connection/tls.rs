//! Client encryption (TLS) of a connection, through rustls.
//!
//! A [`TlsConfig`] holds a ready [`rustls::ClientConfig`] and how to name each
//! node for certificate verification ([`ServerName`]). Build it from a
//! [`TlsConfigBuilder`] (PEM files, the OS trust store, an optional client
//! certificate for mutual TLS) or from a `ClientConfig` you made yourself.
//!
//! The TLS handshake runs right after the TCP connect (from the chosen source
//! port, so shard-aware routing is unchanged) and before the CQL handshake; it
//! is bounded by the connect timeout. Failures are classified into a
//! [`TlsErrorKind`] that says what to fix.
//!
//! After the handshake the records are sealed and opened by rustls (through
//! tokio-rustls), with the configuration's own crypto provider: the default,
//! [`RecordLayer::Rustls`]. [`RecordLayer::Driver`] is an opt-in where the
//! driver seals and opens the records itself, in each connection's own
//! buffers (AES-GCM and ChaCha20-Poly1305 through `ring`; session tickets
//! and key updates still through rustls), so that a request over TLS
//! allocates nothing; see [`RecordLayer`] for the trade-off.
//!
//! ```no_run
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use scylla_driver::connection::tls::{ServerName, TlsConfig};
//!
//! let tls = TlsConfig::builder()
//!     .ca_pem_file("/etc/scylla/ca.pem")?
//!     .client_cert_pem_files("/etc/scylla/client.pem", "/etc/scylla/client.key")?
//!     .server_name(ServerName::Fixed("scylla.example.com".into()))
//!     .build()?;
//! # let _ = tls; Ok(()) }
//! ```

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::{
    AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore,
};
use tokio::net::TcpStream;

use super::error::{ConnectionError, SetupStep, TlsErrorKind};

/// Who seals and opens a TLS connection's records after the handshake.
///
/// Both run rustls' handshake with your [`ClientConfig`] (certificates,
/// key exchange, session tickets, the handshake timeout and the error
/// classification are the same); they differ in what encrypts the traffic.
///
/// | | [`Rustls`](RecordLayer::Rustls) (default) | [`Driver`](RecordLayer::Driver) (opt-in) |
/// | --- | --- | --- |
/// | record encryption | rustls, with the `ClientConfig`'s crypto provider | the driver's record layer, with `ring` |
/// | `ClientConfig` | used as given | cloned with secret extraction enabled |
/// | FIPS provider, other providers | yes | refused ([`TlsConfigError::DriverRecordLayerUnsupported`]) |
/// | allocations per request | about 2 (rustls' record buffers) | 0 |
/// | maintained by | the rustls project | this project |
///
/// The opt-in saves about 2 allocations and about 15 % of the client's
/// instructions per request at concurrency 1 over TLS, 2 to 5 % at
/// concurrency 64 (where many requests share a record; the cost gate's
/// `tls-*` and `rustls-*` cells, 2026-11-28), at the price of a
/// record layer that this project maintains and that has not had rustls'
/// review (its coverage-guided fuzzing, the `tls_records` target of the
/// repository's `fuzz/`, is this project's own and young). Pick it only
/// when that difference matters and your security review accepts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordLayer {
    /// rustls seals and opens the records (tokio-rustls), with the
    /// configuration's crypto provider. The default.
    #[default]
    Rustls,
    /// The driver seals and opens the records in each connection's own
    /// buffers, with `ring` (AES-GCM and ChaCha20-Poly1305); rustls still
    /// runs the handshake and handles session tickets and key updates. Needs
    /// a configuration whose cipher suites are `ring`'s own and that is not
    /// FIPS ([`ClientConfig::fips`]): the records would not be encrypted by
    /// its provider.
    Driver,
}

impl fmt::Display for RecordLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RecordLayer::Rustls => "rustls",
            RecordLayer::Driver => "driver",
        })
    }
}

/// Why `client` cannot have its records sealed by the driver's record
/// layer (`ring`), if it cannot.
fn driver_record_layer_refusal(client: &ClientConfig) -> Option<String> {
    if client.fips() {
        return Some(
            "the ClientConfig is FIPS (ClientConfig::fips()): its records must be encrypted by \
             its own provider, not by the driver's record layer with ring; use \
             RecordLayer::Rustls"
                .to_owned(),
        );
    }
    let ring_suites = rustls::crypto::ring::ALL_CIPHER_SUITES;
    // A suite is ring's when it is one of ring's suite values, or has the
    // same identifier and ring's own hash and AEAD implementations (named
    // statics in rustls' ring module, so their addresses identify them).
    // The suite values alone are not enough: a TLS 1.2 suite's description
    // is a reference made in a static's initializer, and a copy of it was
    // seen to point elsewhere (TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 taken
    // from rustls::crypto::ring::cipher_suite was refused).
    let is_ring = |s: &rustls::SupportedCipherSuite| {
        ring_suites.iter().any(|r| match (s, r) {
            (rustls::SupportedCipherSuite::Tls13(a), rustls::SupportedCipherSuite::Tls13(b)) => {
                std::ptr::eq(*a, *b)
                    || (a.common.suite == b.common.suite
                        && std::ptr::addr_eq(a.common.hash_provider, b.common.hash_provider)
                        && std::ptr::addr_eq(a.aead_alg, b.aead_alg))
            }
            (rustls::SupportedCipherSuite::Tls12(a), rustls::SupportedCipherSuite::Tls12(b)) => {
                std::ptr::eq(*a, *b)
                    || (a.common.suite == b.common.suite
                        && std::ptr::addr_eq(a.common.hash_provider, b.common.hash_provider)
                        && std::ptr::addr_eq(a.aead_alg, b.aead_alg))
            }
            _ => false,
        })
    };
    let provider = client.crypto_provider();
    if let Some(other) = provider.cipher_suites.iter().find(|s| !is_ring(s)) {
        return Some(format!(
            "the ClientConfig's crypto provider offers the cipher suite {:?}, which is not \
             ring's own: the driver's record layer would encrypt its records with ring instead \
             of that provider; use RecordLayer::Rustls, or a ClientConfig built on \
             rustls::crypto::ring::default_provider()",
            other.suite()
        ));
    }
    None
}

/// A TLS connection after its handshake, on either record layer.
pub(crate) enum TlsStream {
    /// rustls' records (tokio-rustls).
    Rustls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    /// The driver's records.
    Driver(Box<super::tls_records::TlsStream>),
}

impl TlsStream {
    /// Whether the handshake resumed an earlier session (the server accepted
    /// a session ticket) rather than running in full.
    pub(crate) fn resumed(&self) -> bool {
        match self {
            TlsStream::Rustls(s) => {
                s.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
            }
            TlsStream::Driver(s) => s.resumed(),
        }
    }
}

/// How a node is named when its certificate is verified.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum ServerName {
    /// The node's IP address, matched against the certificate's IP SANs
    /// (nodes are usually known by address).
    #[default]
    PeerIp,
    /// One name for every node (a DNS name or an IP address), e.g. the
    /// cluster's wildcard certificate name.
    Fixed(String),
    /// A name computed from the node's address.
    Custom(Arc<dyn Fn(SocketAddr) -> String + Send + Sync>),
}

impl fmt::Debug for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerName::PeerIp => f.write_str("PeerIp"),
            ServerName::Fixed(n) => f.debug_tuple("Fixed").field(n).finish(),
            ServerName::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl ServerName {
    /// The name to verify for the node at `addr`.
    pub fn for_addr(
        &self,
        addr: SocketAddr,
    ) -> Result<rustls::pki_types::ServerName<'static>, TlsConfigError> {
        use rustls::pki_types::ServerName as Sn;
        let name = match self {
            ServerName::PeerIp => return Ok(Sn::IpAddress(addr.ip().into())),
            ServerName::Fixed(n) => n.clone(),
            ServerName::Custom(f) => f(addr),
        };
        Sn::try_from(name.clone()).map_err(|_| TlsConfigError::InvalidServerName(name))
    }
}

/// TLS settings of the driver's connections.
#[derive(Clone)]
#[non_exhaustive]
pub struct TlsConfig {
    /// The rustls configuration.
    pub client: Arc<ClientConfig>,
    /// How each node is named for verification.
    pub server_name: ServerName,
    /// Where the trust roots came from, for logs (paths only).
    pub description: String,
    /// The session store installed in `client` by [`TlsConfigBuilder::build`]
    /// (`None` for a `ClientConfig` made elsewhere): the pools read its
    /// per-node ticket counts to open a node's connections so that they can
    /// resume (see [`TicketStore`](crate::tls::TicketStore)).
    pub tickets: Option<Arc<super::tls_tickets::TicketStore>>,
    /// Who seals and opens the records (see [`RecordLayer`]); set with
    /// [`TlsConfig::with_record_layer`] or [`TlsConfigBuilder::record_layer`].
    record_layer: RecordLayer,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("server_name", &self.server_name)
            .field("description", &self.description)
            .field("record_layer", &self.record_layer)
            .finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// A builder from PEM files or the system trust store.
    pub fn builder() -> TlsConfigBuilder {
        TlsConfigBuilder::default()
    }

    /// Uses a ready rustls configuration (its crypto provider, roots, client
    /// certificate and verifier). Nodes are named by IP address unless
    /// [`TlsConfig::with_server_name`] says otherwise.
    ///
    /// The configuration is used as given, for the handshake and for the
    /// records (its crypto provider, a FIPS-validated one included, encrypts
    /// everything): the default [`RecordLayer::Rustls`].
    pub fn from_client_config(client: Arc<ClientConfig>) -> TlsConfig {
        TlsConfig {
            client,
            server_name: ServerName::PeerIp,
            description: "custom rustls ClientConfig".to_owned(),
            tickets: None,
            record_layer: RecordLayer::Rustls,
        }
    }

    /// Sets who seals and opens the records (see [`RecordLayer`]).
    /// [`RecordLayer::Driver`] is refused
    /// ([`TlsConfigError::DriverRecordLayerUnsupported`]) when the
    /// configuration is FIPS or its cipher suites are not `ring`'s own.
    pub fn with_record_layer(mut self, layer: RecordLayer) -> Result<TlsConfig, TlsConfigError> {
        if layer == RecordLayer::Driver {
            if let Some(reason) = driver_record_layer_refusal(&self.client) {
                return Err(TlsConfigError::DriverRecordLayerUnsupported(reason));
            }
        }
        self.record_layer = layer;
        Ok(self)
    }

    /// Who seals and opens the records.
    pub fn record_layer(&self) -> RecordLayer {
        self.record_layer
    }

    /// Sets how nodes are named for verification.
    pub fn with_server_name(mut self, server_name: ServerName) -> TlsConfig {
        self.server_name = server_name;
        self
    }

    /// The configuration the driver's record layer runs the handshake with:
    /// this one, with secret extraction enabled (after the handshake the
    /// driver seals and opens the records itself: `tls_records`). A clone
    /// shares the original's session store, certificate resolver and
    /// verifier. Not used on the default path, which leaves the
    /// configuration as it is.
    fn engine_config(&self) -> Arc<ClientConfig> {
        if self.client.enable_secret_extraction {
            return self.client.clone();
        }
        let mut c = (*self.client).clone();
        c.enable_secret_extraction = true;
        Arc::new(c)
    }

    /// Runs the TLS handshake on a connected socket, bounded by `timeout`.
    pub(crate) async fn connect(
        &self,
        addr: SocketAddr,
        tcp: TcpStream,
        timeout: Duration,
    ) -> Result<TlsStream, ConnectionError> {
        let step = SetupStep::Tls;
        let name = self
            .server_name
            .for_addr(addr)
            .map_err(|e| ConnectionError::Tls {
                step,
                kind: TlsErrorKind::InvalidServerName,
                source: Some(Box::new(e)),
            })?;
        let outcome = match self.record_layer {
            RecordLayer::Rustls => {
                let connector = tokio_rustls::TlsConnector::from(self.client.clone());
                tokio::time::timeout(timeout, connector.connect(name, tcp))
                    .await
                    .map(|r| r.map(|s| TlsStream::Rustls(Box::new(s))))
            }
            RecordLayer::Driver => {
                // The `client` field is public: checked again here, as it
                // may have changed since `with_record_layer`.
                if let Some(reason) = driver_record_layer_refusal(&self.client) {
                    return Err(ConnectionError::Tls {
                        step,
                        kind: TlsErrorKind::DriverRecordLayerUnsupported,
                        source: Some(Box::new(TlsConfigError::DriverRecordLayerUnsupported(
                            reason,
                        ))),
                    });
                }
                let conn =
                    rustls::client::UnbufferedClientConnection::new(self.engine_config(), name)
                        .map_err(|e| ConnectionError::Tls {
                            step,
                            kind: classify(&e),
                            source: Some(Box::new(io::Error::new(io::ErrorKind::InvalidInput, e))),
                        })?;
                tokio::time::timeout(timeout, super::tls_records::handshake(tcp, conn))
                    .await
                    .map(|r| r.map(|s| TlsStream::Driver(Box::new(s))))
            }
        };
        match outcome {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(handshake_error(step, e)),
            Err(_) => Err(ConnectionError::Tls {
                step,
                kind: TlsErrorKind::HandshakeTimeout(timeout),
                source: None,
            }),
        }
    }
}

/// Classifies an error of the TLS handshake (rustls errors arrive wrapped
/// in `io::Error`).
pub(crate) fn handshake_error(step: SetupStep, e: io::Error) -> ConnectionError {
    let kind = classify_io(&e).unwrap_or(match e.kind() {
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => TlsErrorKind::ClosedDuringHandshake,
        _ => TlsErrorKind::Other,
    });
    ConnectionError::Tls {
        step,
        kind,
        source: Some(Box::new(e)),
    }
}

/// An error of the first CQL exchange over a fresh TLS connection: when this
/// client offered no certificate and the server just closed or reset the
/// connection, the likely cause is a required client certificate whose
/// rejection alert never arrived (TLS 1.3 rejects it only after the
/// handshake, and a server that resets at once loses the alert). Other
/// errors pass unchanged.
pub(crate) fn closed_after_handshake(e: ConnectionError, offered_cert: bool) -> ConnectionError {
    if offered_cert {
        return e;
    }
    let closed = |k: io::ErrorKind| {
        matches!(
            k,
            io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
        )
    };
    match e {
        ConnectionError::Io {
            step: step @ SetupStep::Options,
            source,
        } if closed(source.kind()) => ConnectionError::Tls {
            step,
            kind: TlsErrorKind::ClosedAfterHandshakeWithoutClientCert,
            source: Some(Box::new(source)),
        },
        ConnectionError::Closed {
            step: step @ SetupStep::Options,
        } => ConnectionError::Tls {
            step,
            kind: TlsErrorKind::ClosedAfterHandshakeWithoutClientCert,
            source: None,
        },
        other => other,
    }
}

/// The TLS kind of an I/O error that wraps a rustls error, if it does.
pub(crate) fn classify_io(e: &io::Error) -> Option<TlsErrorKind> {
    let inner = e.get_ref()?;
    #[cfg(feature = "openssl-010")]
    if let Some(openssl) = inner.downcast_ref::<openssl::ssl::Error>() {
        return super::tls_openssl::reason_kind(openssl);
    }
    Some(classify(inner.downcast_ref::<rustls::Error>()?))
}

fn classify(e: &rustls::Error) -> TlsErrorKind {
    use rustls::Error as E;
    match e {
        E::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                TlsErrorKind::UnknownCa
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                TlsErrorKind::NameMismatch
            }
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => TlsErrorKind::Expired,
            _ => TlsErrorKind::BadCertificate,
        },
        E::InvalidMessage(_) => TlsErrorKind::NotTls,
        // A server rejecting (or missing) the client certificate. A bare
        // `handshake_failure` is ambiguous (no common cipher suite...): Other.
        E::AlertReceived(
            AlertDescription::CertificateRequired
            | AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::CertificateExpired
            | AlertDescription::AccessDenied,
        ) => TlsErrorKind::ClientCertRejected,
        _ => TlsErrorKind::Other,
    }
}

/// A TLS configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsConfigError {
    /// A file could not be read.
    #[error("cannot read {what} file {path}: {source}")]
    Read {
        /// What the file should hold.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A file holds no usable PEM item of the expected kind.
    #[error("{path}: no {what} found in PEM ({problem})")]
    Pem {
        /// What the file should hold.
        what: &'static str,
        /// The file (or `<memory>`).
        path: PathBuf,
        /// Why.
        problem: String,
    },
    /// A CA certificate was rejected by rustls.
    #[error("{path}: invalid CA certificate")]
    BadCa {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// The system trust store could not be loaded or is empty.
    #[error("no usable certificates in the system trust store: {0}")]
    NativeRoots(String),
    /// No trust roots were given.
    #[error(
        "no trust roots: call ca_pem_file, ca_pem or native_roots (or danger_accept_invalid_certs)"
    )]
    NoRoots,
    /// The client certificate and key do not form a usable pair.
    #[error("client certificate {cert} / key {key} cannot be used")]
    ClientCert {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// rustls refused the configuration.
    #[error("rustls refused the TLS configuration")]
    Rustls(#[source] rustls::Error),
    /// The server name is not a valid DNS name or IP address.
    #[error("invalid TLS server name {0:?}")]
    InvalidServerName(String),
    /// [`RecordLayer::Driver`] was asked for with a configuration whose
    /// records it cannot encrypt as the configuration requires (a FIPS
    /// configuration, or cipher suites of a provider other than `ring`).
    #[error(
        "the driver's TLS record layer (RecordLayer::Driver) cannot serve this configuration: {0}"
    )]
    DriverRecordLayerUnsupported(String),
}

/// Builds a [`TlsConfig`] from PEM files or the system trust store.
#[derive(Debug, Default)]
pub struct TlsConfigBuilder {
    roots: Vec<CertificateDer<'static>>,
    root_sources: Vec<String>,
    client: Option<(
        Vec<CertificateDer<'static>>,
        PrivateKeyDer<'static>,
        PathBuf,
        PathBuf,
    )>,
    server_name: ServerName,
    accept_invalid: bool,
    record_layer: RecordLayer,
}

impl TlsConfigBuilder {
    /// Trusts the CA certificates in a PEM file.
    pub fn ca_pem_file(mut self, path: impl AsRef<Path>) -> Result<Self, TlsConfigError> {
        let path = path.as_ref();
        let bytes = read(path, "CA certificate")?;
        self.add_ca_pem(&bytes, path)?;
        self.root_sources.push(path.display().to_string());
        Ok(self)
    }

    /// Trusts the CA certificates in PEM text.
    pub fn ca_pem(mut self, pem: &[u8]) -> Result<Self, TlsConfigError> {
        self.add_ca_pem(pem, Path::new("<memory>"))?;
        self.root_sources.push("<memory>".to_owned());
        Ok(self)
    }

    /// Trusts the operating system's trust store (what operators configure),
    /// in addition to any CA given.
    pub fn native_roots(mut self) -> Result<Self, TlsConfigError> {
        let found = rustls_native_certs::load_native_certs();
        if found.certs.is_empty() {
            let why = found
                .errors
                .first()
                .map(|e| e.to_string())
                .unwrap_or_else(|| "no certificates found".to_owned());
            return Err(TlsConfigError::NativeRoots(why));
        }
        for e in &found.errors {
            tracing::warn!(error = %e, "skipping part of the system trust store");
        }
        self.roots.extend(found.certs);
        self.root_sources.push("system trust store".to_owned());
        Ok(self)
    }

    /// Presents a client certificate (mutual TLS): a PEM certificate chain
    /// and its PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub fn client_cert_pem_files(
        mut self,
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<Self, TlsConfigError> {
        let (cert, key) = (cert.as_ref(), key.as_ref());
        let chain = parse_certs(
            &read(cert, "client certificate")?,
            cert,
            "client certificate",
        )?;
        let key_bytes = read(key, "client key")?;
        let key_der =
            PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|e| TlsConfigError::Pem {
                what: "private key",
                path: key.to_owned(),
                problem: e.to_string(),
            })?;
        self.client = Some((chain, key_der, cert.to_owned(), key.to_owned()));
        Ok(self)
    }

    /// Presents a client certificate given as PEM text.
    pub fn client_cert_pem(mut self, cert: &[u8], key: &[u8]) -> Result<Self, TlsConfigError> {
        let mem = Path::new("<memory>");
        let chain = parse_certs(cert, mem, "client certificate")?;
        let key_der = PrivateKeyDer::from_pem_slice(key).map_err(|e| TlsConfigError::Pem {
            what: "private key",
            path: mem.to_owned(),
            problem: e.to_string(),
        })?;
        self.client = Some((chain, key_der, mem.to_owned(), mem.to_owned()));
        Ok(self)
    }

    /// How nodes are named for verification (default: their IP address).
    pub fn server_name(mut self, name: ServerName) -> Self {
        self.server_name = name;
        self
    }

    /// Who seals and opens the records after the handshake (default:
    /// [`RecordLayer::Rustls`]; see [`RecordLayer`] for the trade-off).
    pub fn record_layer(mut self, layer: RecordLayer) -> Self {
        self.record_layer = layer;
        self
    }

    /// **Disables server certificate verification.** Any certificate is
    /// accepted, so the connection is open to interception: for tests only.
    pub fn danger_accept_invalid_certs(mut self) -> Self {
        self.accept_invalid = true;
        self
    }

    /// Builds the configuration (TLS 1.2 and 1.3, the `ring` provider).
    pub fn build(self) -> Result<TlsConfig, TlsConfigError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsConfigError::Rustls)?;
        let with_verifier = if self.accept_invalid {
            tracing::warn!(
                "TLS certificate verification is DISABLED (danger_accept_invalid_certs)"
            );
            versions
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
        } else {
            if self.roots.is_empty() {
                return Err(TlsConfigError::NoRoots);
            }
            let mut store = RootCertStore::empty();
            for c in self.roots {
                store.add(c).map_err(|source| TlsConfigError::BadCa {
                    path: PathBuf::from(self.root_sources.join(", ")),
                    source,
                })?;
            }
            versions.with_root_certificates(store)
        };
        let mut client = match self.client {
            Some((chain, key, cert_path, key_path)) => with_verifier
                .with_client_auth_cert(chain, key)
                .map_err(|source| TlsConfigError::ClientCert {
                    cert: cert_path,
                    key: key_path,
                    source,
                })?,
            None => with_verifier.with_no_client_auth(),
        };
        // The driver's record layer takes the traffic secrets over once
        // rustls' handshake is done; the default path never extracts them.
        client.enable_secret_extraction = self.record_layer == RecordLayer::Driver;
        let description = if self.accept_invalid {
            "certificate verification disabled".to_owned()
        } else {
            format!("roots: {}", self.root_sources.join(", "))
        };
        // A store with room for every node and per-node ticket counts.
        let tickets = Arc::new(super::tls_tickets::TicketStore::default());
        client.resumption = rustls::client::Resumption::store(tickets.clone());
        TlsConfig {
            client: Arc::new(client),
            server_name: self.server_name,
            description,
            tickets: Some(tickets),
            record_layer: RecordLayer::Rustls,
        }
        .with_record_layer(self.record_layer)
    }

    fn add_ca_pem(&mut self, pem: &[u8], path: &Path) -> Result<(), TlsConfigError> {
        let certs = parse_certs(pem, path, "CA certificate")?;
        // Check each now, so the error names the file.
        let mut probe = RootCertStore::empty();
        for c in &certs {
            probe
                .add(c.clone())
                .map_err(|source| TlsConfigError::BadCa {
                    path: path.to_owned(),
                    source,
                })?;
        }
        self.roots.extend(certs);
        Ok(())
    }
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsConfigError> {
    std::fs::read(path).map_err(|source| TlsConfigError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

fn parse_certs(
    pem: &[u8],
    path: &Path,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsConfigError::Pem {
            what,
            path: path.to_owned(),
            problem: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsConfigError::Pem {
            what,
            path: path.to_owned(),
            problem: "no CERTIFICATE block".to_owned(),
        });
    }
    Ok(certs)
}

/// Accepts any server certificate (still checks handshake signatures).
#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_ip_is_the_default_name() {
        let addr: SocketAddr = "127.0.0.2:9142".parse().unwrap();
        let n = ServerName::default().for_addr(addr).unwrap();
        assert_eq!(n.to_str(), "127.0.0.2");
        let n = ServerName::Fixed("node.example".into())
            .for_addr(addr)
            .unwrap();
        assert_eq!(n.to_str(), "node.example");
        assert!(ServerName::Fixed("bad name!".into())
            .for_addr(addr)
            .is_err());
    }

    /// A hash implementation of another provider (here: ring's behind a
    /// wrapper, at another address).
    struct OtherHash(&'static dyn rustls::crypto::hash::Hash);

    impl rustls::crypto::hash::Hash for OtherHash {
        fn start(&self) -> Box<dyn rustls::crypto::hash::Context> {
            self.0.start()
        }
        fn hash(&self, data: &[u8]) -> rustls::crypto::hash::Output {
            self.0.hash(data)
        }
        fn output_len(&self) -> usize {
            self.0.output_len()
        }
        fn algorithm(&self) -> rustls::crypto::hash::HashAlgorithm {
            self.0.algorithm()
        }
    }

    /// The opt-in record layer takes `ring`'s own suites only: a provider
    /// whose suites are other implementations (here: ring's suites with
    /// another hash implementation, as another provider's would be) is
    /// refused, at configuration and again at connect time; the default
    /// path takes any.
    #[tokio::test]
    async fn the_driver_record_layer_refuses_other_providers() {
        let ring = rustls::crypto::ring::default_provider();
        let copies = ring
            .cipher_suites
            .iter()
            .map(|s| match s {
                rustls::SupportedCipherSuite::Tls13(s) => {
                    let copy: &'static rustls::Tls13CipherSuite =
                        Box::leak(Box::new(rustls::Tls13CipherSuite {
                            common: rustls::crypto::CipherSuiteCommon {
                                hash_provider: Box::leak(Box::new(OtherHash(
                                    s.common.hash_provider,
                                ))),
                                ..s.common
                            },
                            hkdf_provider: s.hkdf_provider,
                            aead_alg: s.aead_alg,
                            quic: s.quic,
                        }));
                    rustls::SupportedCipherSuite::Tls13(copy)
                }
                other => *other,
            })
            .collect();
        let other = Arc::new(CryptoProvider {
            cipher_suites: copies,
            ..ring
        });
        let client = ClientConfig::builder_with_provider(other)
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))))
            .with_no_client_auth();
        let tls = TlsConfig::from_client_config(Arc::new(client));
        assert_eq!(tls.record_layer(), RecordLayer::Rustls);
        let e = tls
            .clone()
            .with_record_layer(RecordLayer::Driver)
            .unwrap_err();
        assert!(matches!(e, TlsConfigError::DriverRecordLayerUnsupported(_)));
        let text = e.to_string();
        assert!(
            text.contains("not ring's own") && text.contains("RecordLayer::Rustls"),
            "{text}"
        );
        // A configuration changed after the check is refused at connect.
        let mut sneaky = TlsConfig::builder()
            .danger_accept_invalid_certs()
            .record_layer(RecordLayer::Driver)
            .build()
            .unwrap();
        assert_eq!(sneaky.record_layer(), RecordLayer::Driver);
        sneaky.client = tls.client.clone();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let tcp = TcpStream::connect(addr).await.unwrap();
        let Err(e) = sneaky.connect(addr, tcp, Duration::from_secs(1)).await else {
            panic!("connected");
        };
        assert_eq!(
            e.tls_kind(),
            Some(TlsErrorKind::DriverRecordLayerUnsupported)
        );
        assert!(e.to_string().contains("RecordLayer::Rustls"), "{e}");
        // ring's own provider is accepted.
        let ring_config = TlsConfig::builder()
            .danger_accept_invalid_certs()
            .build()
            .unwrap();
        assert!(!ring_config.client.enable_secret_extraction);
        assert!(ring_config.with_record_layer(RecordLayer::Driver).is_ok());
    }

    /// ring's provider narrowed to any one of its suites is ring's own: the
    /// TLS 1.2 suites taken from `rustls::crypto::ring::cipher_suite` were
    /// once refused (their descriptions are not at one address).
    #[test]
    fn each_of_rings_suites_alone_is_accepted_by_the_driver_record_layer() {
        use rustls::crypto::ring::cipher_suite as s;
        let suites = [
            (&rustls::version::TLS13, s::TLS13_AES_128_GCM_SHA256),
            (&rustls::version::TLS13, s::TLS13_AES_256_GCM_SHA384),
            (&rustls::version::TLS13, s::TLS13_CHACHA20_POLY1305_SHA256),
            (
                &rustls::version::TLS12,
                s::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            ),
            (
                &rustls::version::TLS12,
                s::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            ),
            (
                &rustls::version::TLS12,
                s::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            ),
            (
                &rustls::version::TLS12,
                s::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            ),
            (
                &rustls::version::TLS12,
                s::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            ),
            (
                &rustls::version::TLS12,
                s::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            ),
        ];
        for (version, suite) in suites {
            let mut provider = rustls::crypto::ring::default_provider();
            provider.cipher_suites = vec![suite];
            let client = ClientConfig::builder_with_provider(Arc::new(provider))
                .with_protocol_versions(&[version])
                .unwrap()
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAny(Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))))
                .with_no_client_auth();
            let r = TlsConfig::from_client_config(Arc::new(client))
                .with_record_layer(RecordLayer::Driver);
            assert!(r.is_ok(), "{:?}: {:?}", suite.suite(), r.err());
        }
    }

    #[test]
    fn a_close_after_the_handshake_without_a_certificate_is_named() {
        let reset = || ConnectionError::Io {
            step: SetupStep::Options,
            source: io::Error::from(io::ErrorKind::ConnectionReset),
        };
        let e = closed_after_handshake(reset(), false);
        assert_eq!(
            e.tls_kind(),
            Some(TlsErrorKind::ClosedAfterHandshakeWithoutClientCert)
        );
        assert!(e.to_string().contains("client certificate"), "{e}");
        let e = closed_after_handshake(
            ConnectionError::Closed {
                step: SetupStep::Options,
            },
            false,
        );
        assert_eq!(
            e.tls_kind(),
            Some(TlsErrorKind::ClosedAfterHandshakeWithoutClientCert)
        );
        // With a certificate offered, or another error, nothing is guessed.
        assert!(matches!(
            closed_after_handshake(reset(), true),
            ConnectionError::Io { .. }
        ));
        let refused = ConnectionError::Io {
            step: SetupStep::Options,
            source: io::Error::from(io::ErrorKind::InvalidData),
        };
        assert!(matches!(
            closed_after_handshake(refused, false),
            ConnectionError::Io { .. }
        ));
    }
}
