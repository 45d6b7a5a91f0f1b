//! Client encryption (feature `tls`): [`TlsConfig`] for
//! [`SessionBuilder::tls`](crate::SessionBuilder::tls), built from PEM
//! files, the system trust store, or a ready rustls [`ClientConfig`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use scylla_driver::tls::TlsConfig;
//! use scylla_driver::SessionBuilder;
//!
//! let tls = TlsConfig::builder().ca_pem_file("ca.crt")?.build()?;
//! let session = SessionBuilder::new()
//!     .known_node("10.0.0.1:9142")
//!     .tls(tls)
//!     .build()
//!     .await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;

pub use crate::connection::tls::{
    RecordLayer, ServerName, TlsConfig, TlsConfigBuilder, TlsConfigError,
};
pub use crate::connection::tls_tickets::TicketStore;
pub use rustls::ClientConfig;

/// What [`SessionBuilder::tls_context`](crate::SessionBuilder::tls_context)
/// takes, as the official `scylla` crate names it: a [`TlsConfig`] (rustls,
/// also made from a rustls [`ClientConfig`]) or, with the feature
/// `openssl-010`, an OpenSSL `SslContext`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum TlsContext {
    /// rustls, with this crate's settings (server name, record layer,
    /// session tickets).
    Rustls(TlsConfig),
    /// The system's OpenSSL (feature `openssl-010`): the handshake and the
    /// records through `openssl::ssl::SslStream`. The context decides what
    /// is verified: with `SslVerifyMode::PEER`, the node's certificate chain
    /// against the context's trust store. The node's name is not checked
    /// unless the context's verify callback does (as with the official
    /// crate); prefer [`TlsContext::Rustls`], which checks it by default.
    #[cfg(feature = "openssl-010")]
    OpenSsl010(openssl::ssl::SslContext),
}

impl From<TlsConfig> for TlsContext {
    fn from(tls: TlsConfig) -> Self {
        TlsContext::Rustls(tls)
    }
}

impl From<Arc<ClientConfig>> for TlsContext {
    /// As [`TlsConfig`]'s: nodes named by IP address.
    fn from(client: Arc<ClientConfig>) -> Self {
        TlsContext::Rustls(TlsConfig::from(client))
    }
}

impl From<ClientConfig> for TlsContext {
    /// As [`TlsConfig`]'s: nodes named by IP address.
    fn from(client: ClientConfig) -> Self {
        TlsContext::Rustls(TlsConfig::from(client))
    }
}

#[cfg(feature = "openssl-010")]
impl From<openssl::ssl::SslContext> for TlsContext {
    fn from(context: openssl::ssl::SslContext) -> Self {
        TlsContext::OpenSsl010(context)
    }
}

impl From<Arc<ClientConfig>> for TlsConfig {
    /// [`TlsConfig::from_client_config`]: nodes named by IP address.
    fn from(client: Arc<ClientConfig>) -> Self {
        TlsConfig::from_client_config(client)
    }
}

impl From<ClientConfig> for TlsConfig {
    /// [`TlsConfig::from_client_config`]: nodes named by IP address.
    fn from(client: ClientConfig) -> Self {
        TlsConfig::from_client_config(Arc::new(client))
    }
}
