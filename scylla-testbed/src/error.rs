//! [`ClusterError`]: why starting, stopping or changing the cluster failed.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

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
    /// A node's Unix-domain maintenance socket could not be bound.
    BindSocket {
        /// The socket's path.
        path: PathBuf,
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
            ClusterError::BindSocket { path, .. } => write!(
                f,
                "cannot listen on the Unix-domain socket {} (check that its directory exists and is writable, and that the path is shorter than 108 bytes)",
                path.display()
            ),
            ClusterError::NoSuchNode(i) => write!(f, "no node with index {i}"),
        }
    }
}

impl std::error::Error for ClusterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClusterError::Bind { source, .. } | ClusterError::BindSocket { source, .. } => {
                Some(source)
            }
            _ => None,
        }
    }
}
