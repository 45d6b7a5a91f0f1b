//! TLS as ScyllaDB serves it: certificates made at cluster start and the
//! server configuration of the TLS ports.
//!
//! [`TlsOptions`] turns TLS on (builder: [`crate::TestClusterBuilder::tls`]).
//! At start the cluster makes a CA, a server certificate signed by it (SANs:
//! every node's IP address, `localhost`, [`SERVER_DNS_NAME`]) and a client
//! certificate signed by the same CA (for mutual TLS). Each node then
//! listens for TLS on a regular TLS port (ScyllaDB's
//! `native_transport_port_ssl`) and, optionally, a TLS shard-aware port
//! (advertised as `SCYLLA_SHARD_AWARE_PORT_SSL`).

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// The DNS name in the server certificate besides `localhost`.
pub const SERVER_DNS_NAME: &str = "testbed.local";

/// TLS settings of the test cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsOptions {
    /// Refuse handshakes without a client certificate signed by the CA.
    pub require_client_cert: bool,
    /// The regular TLS port of every node (default 9142).
    pub port: u16,
    /// The TLS shard-aware port (default `Some(19142)`; `None`: none).
    pub shard_aware_port: Option<u16>,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            require_client_cert: false,
            port: 9142,
            shard_aware_port: Some(19142),
        }
    }
}

impl TlsOptions {
    /// Requires (or not) a client certificate.
    #[must_use]
    pub fn require_client_cert(mut self, on: bool) -> Self {
        self.require_client_cert = on;
        self
    }

    /// The regular TLS port.
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// The TLS shard-aware port.
    #[must_use]
    pub fn shard_aware_port(mut self, port: Option<u16>) -> Self {
        self.shard_aware_port = port;
        self
    }
}

/// Why the TLS material could not be made.
#[derive(Debug)]
pub struct TlsSetupError(String);

impl fmt::Display for TlsSetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TLS setup failed: {}", self.0)
    }
}

impl std::error::Error for TlsSetupError {}

fn err(what: &str) -> impl FnOnce(rcgen::Error) -> TlsSetupError + '_ {
    move |e| TlsSetupError(format!("{what}: {e}"))
}

/// Certificates (PEM) and the server configuration made at cluster start.
pub(crate) struct TlsMaterial {
    pub(crate) options: TlsOptions,
    pub(crate) ca_pem: String,
    pub(crate) client_cert_pem: String,
    pub(crate) client_key_pem: String,
    pub(crate) acceptor: TlsAcceptor,
}

impl fmt::Debug for TlsMaterial {
    // Key material is never printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsMaterial {
    /// Makes a CA, a server certificate for `ips` and a client certificate.
    pub(crate) fn generate(options: TlsOptions, ips: &[IpAddr]) -> Result<Self, TlsSetupError> {
        let ca_key = KeyPair::generate().map_err(err("CA key"))?;
        let mut ca_params = CertificateParams::default();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "scylla-testbed CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = ca_params
            .self_signed(&ca_key)
            .map_err(err("CA certificate"))?;

        let server_key = KeyPair::generate().map_err(err("server key"))?;
        let mut sans = vec!["localhost".to_string(), SERVER_DNS_NAME.to_string()];
        sans.extend(ips.iter().map(IpAddr::to_string));
        let mut server_params = CertificateParams::new(sans).map_err(err("server SANs"))?;
        // `CertificateParams::new` parses IP strings as IP SANs already; make
        // sure anyway (older rcgen made them DNS names).
        for ip in ips {
            if !server_params
                .subject_alt_names
                .contains(&SanType::IpAddress(*ip))
            {
                server_params
                    .subject_alt_names
                    .push(SanType::IpAddress(*ip));
            }
        }
        server_params
            .distinguished_name
            .push(DnType::CommonName, SERVER_DNS_NAME);
        server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server = server_params
            .signed_by(&server_key, &ca, &ca_key)
            .map_err(err("server certificate"))?;

        let client_key = KeyPair::generate().map_err(err("client key"))?;
        let mut client_params = CertificateParams::default();
        client_params
            .distinguished_name
            .push(DnType::CommonName, "scylla-testbed client");
        client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client = client_params
            .signed_by(&client_key, &ca, &ca_key)
            .map_err(err("client certificate"))?;

        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsSetupError(format!("protocol versions: {e}")))?;
        let builder = if options.require_client_cert {
            let mut roots = RootCertStore::empty();
            roots
                .add(ca.der().clone())
                .map_err(|e| TlsSetupError(format!("CA into root store: {e}")))?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| TlsSetupError(format!("client verifier: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let chain: Vec<CertificateDer<'static>> = vec![server.der().clone(), ca.der().clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| TlsSetupError(format!("server certificate: {e}")))?;
        Ok(TlsMaterial {
            options,
            ca_pem: ca.pem(),
            client_cert_pem: client.pem(),
            client_key_pem: client_key.serialize_pem(),
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }
}
