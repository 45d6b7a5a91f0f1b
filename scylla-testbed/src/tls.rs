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
//!
//! Session tickets and handshake costs follow ScyllaDB (see
//! `docs/testbed.md`, "TLS session tickets", for the sources):
//! - TLS 1.3 session tickets are on by default ([`TicketScope::Node`]):
//!   every lifetime of a node makes a new ticket key, shared by all its
//!   shards and both TLS ports, so a ticket resumes on any shard of the node
//!   that issued it and on no node after a restart. [`TicketScope::Shard`]
//!   gives each shard its own key (ScyllaDB before seastar's shared resume
//!   key): a ticket resumes only on the shard that issued it.
//!   [`TicketScope::Off`] issues none. Each handshake gets
//!   [`TlsOptions::tickets_per_handshake`] tickets (2, as ScyllaDB sends).
//! - Each TLS handshake is charged a modelled CPU cost on its shard,
//!   [`TlsOptions::full_handshake_cost`] or
//!   [`TlsOptions::resumed_handshake_cost`], inside the shard's handshake
//!   admission (see [`crate::admission`]); the node counts full and resumed
//!   handshakes ([`crate::StatsCounters::tls_handshakes_full`],
//!   [`crate::StatsCounters::tls_handshakes_resumed`]).

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{NoServerSessionStorage, WebPkiClientVerifier};
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// The DNS name in the server certificate besides `localhost`.
pub const SERVER_DNS_NAME: &str = "testbed.local";

/// Which handshakes a node's TLS session tickets resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TicketScope {
    /// One ticket key per node lifetime, shared by all its shards and TLS
    /// ports: a ticket resumes on any shard of the node that issued it
    /// (ScyllaDB since `enable_session_tickets` defaults to true).
    #[default]
    Node,
    /// One ticket key per shard and node lifetime: a ticket resumes only on
    /// the shard that issued it; elsewhere the handshake is a full one.
    Shard,
    /// No tickets: every handshake is a full one.
    Off,
}

impl TicketScope {
    /// The name used by the command line (`node`, `shard`, `off`).
    pub fn name(self) -> &'static str {
        match self {
            TicketScope::Node => "node",
            TicketScope::Shard => "shard",
            TicketScope::Off => "off",
        }
    }
}

impl std::str::FromStr for TicketScope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "node" => Ok(TicketScope::Node),
            "shard" => Ok(TicketScope::Shard),
            "off" => Ok(TicketScope::Off),
            other => Err(format!(
                "unknown ticket scope {other:?} (expected node, shard or off)"
            )),
        }
    }
}

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
    /// Which handshakes the session tickets resume (default: any shard of
    /// the issuing node, until it restarts).
    pub tickets: TicketScope,
    /// TLS 1.3 tickets sent after each handshake (default 2, as ScyllaDB).
    pub tickets_per_handshake: usize,
    /// Modelled server CPU time of a full handshake, spent on the shard
    /// inside its handshake admission (default 1 ms).
    pub full_handshake_cost: Duration,
    /// Modelled server CPU time of a resumed handshake (default 100 us).
    pub resumed_handshake_cost: Duration,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            require_client_cert: false,
            port: 9142,
            shard_aware_port: Some(19142),
            tickets: TicketScope::Node,
            tickets_per_handshake: 2,
            full_handshake_cost: Duration::from_millis(1),
            resumed_handshake_cost: Duration::from_micros(100),
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

    /// Which handshakes the session tickets resume.
    #[must_use]
    pub fn tickets(mut self, scope: TicketScope) -> Self {
        self.tickets = scope;
        self
    }

    /// TLS 1.3 tickets sent after each handshake.
    #[must_use]
    pub fn tickets_per_handshake(mut self, n: usize) -> Self {
        self.tickets_per_handshake = n;
        self
    }

    /// Modelled server CPU time of a full and of a resumed handshake.
    #[must_use]
    pub fn handshake_costs(mut self, full: Duration, resumed: Duration) -> Self {
        self.full_handshake_cost = full;
        self.resumed_handshake_cost = resumed;
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
    /// The server configuration without tickets; each node lifetime derives
    /// its own from it ([`TlsMaterial::node_acceptors`]).
    base: Arc<ServerConfig>,
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
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| TlsSetupError(format!("server certificate: {e}")))?;
        // No server-side session cache (stateful TLS 1.2 session ids or
        // TLS 1.3 tickets): resumption exists only through the ticket keys
        // of a node lifetime, as with ScyllaDB's stateless tickets.
        config.session_storage = Arc::new(NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
        Ok(TlsMaterial {
            options,
            ca_pem: ca.pem(),
            client_cert_pem: client.pem(),
            client_key_pem: client_key.serialize_pem(),
            base: Arc::new(config),
        })
    }

    /// The acceptors of one node lifetime, one per shard: fresh ticket keys
    /// (so no ticket of an earlier lifetime resumes), shared by the shards
    /// or not as [`TlsOptions::tickets`] says.
    pub(crate) fn node_acceptors(&self, shards: u16) -> Result<Box<[TlsAcceptor]>, TlsSetupError> {
        let with_new_key = || -> Result<TlsAcceptor, TlsSetupError> {
            let mut c = (*self.base).clone();
            c.ticketer = rustls::crypto::ring::Ticketer::new()
                .map_err(|e| TlsSetupError(format!("ticket key: {e}")))?;
            c.send_tls13_tickets = self.options.tickets_per_handshake;
            Ok(TlsAcceptor::from(Arc::new(c)))
        };
        let n = usize::from(shards.max(1));
        Ok(match self.options.tickets {
            TicketScope::Off => vec![TlsAcceptor::from(self.base.clone()); n].into(),
            TicketScope::Node => vec![with_new_key()?; n].into(),
            TicketScope::Shard => (0..n)
                .map(|_| with_new_key())
                .collect::<Result<Vec<_>, _>>()?
                .into(),
        })
    }
}
