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
/// takes, as the official `scylla` crate names it: a [`TlsConfig`].
pub type TlsContext = TlsConfig;

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
