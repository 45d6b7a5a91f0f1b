//! [`ClusterError`]: why starting, stopping or changing the cluster failed.

use std::fmt;
use std::io;
use std::net::SocketAddr;

/// Why a cluster operation failed.
#[derive(Debug)]
pub enum ClusterError {
    /// The configuration is unusable.
    InvalidConfig(String),
    /// A listener could not be bound.
    Bind {
        /// The address that failed.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// No node has this index.
    NoSuchNode(usize),
}

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterError::InvalidConfig(m) => write!(f, "invalid test cluster configuration: {m}"),
            ClusterError::Bind { addr, .. } => write!(
                f,
                "cannot listen on {addr} (is another process using it? a fixed --block or port may collide)"
            ),
            ClusterError::NoSuchNode(i) => write!(f, "no node with index {i}"),
        }
    }
}

impl std::error::Error for ClusterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClusterError::Bind { source, .. } => Some(source),
            _ => None,
        }
    }
}
