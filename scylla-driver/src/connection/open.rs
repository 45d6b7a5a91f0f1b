//! Opening the TCP socket: socket2 for the options tokio does not expose
//! (keepalive timing, `SO_REUSEADDR` before an explicit bind), then an async
//! connect bounded by the connect timeout.
//!
//! Binding a chosen source port is how a connection picks its shard on
//! ScyllaDB's shard-aware port (`source_port % nr_shards == shard`).
//! `SO_REUSEADDR` lets one local port serve connections to different nodes:
//! the kernel only refuses a duplicate of the full 4-tuple, and it reports
//! that either at bind (`AddrInUse`) or at connect (`AddrNotAvailable`), which
//! [`OpenError::port_taken`] recognises so the caller can try another port.
//!
//! A connection configured with a Unix-domain socket path
//! ([`ConnectionConfig::unix_socket`](super::ConnectionConfig::unix_socket),
//! ScyllaDB's maintenance socket) connects there instead (`open_unix`),
//! bounded by the same connect timeout; it has no source port to choose.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};
use tokio::net::{TcpSocket, TcpStream};

/// Socket options of a new connection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SocketConfig {
    /// Disable Nagle's algorithm (the writer does its own coalescing).
    pub nodelay: bool,
    /// TCP keepalive: probes after this idle time and then at this
    /// interval, if set.
    pub keepalive: Option<Duration>,
    /// Bound on the TCP connect.
    pub connect_timeout: Duration,
}

impl Default for SocketConfig {
    fn default() -> Self {
        Self {
            nodelay: true,
            keepalive: None,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// Which part of opening the socket failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenStep {
    /// Creating or configuring the socket.
    Configure,
    /// Binding the chosen source address.
    Bind,
    /// Connecting.
    Connect,
}

impl OpenStep {
    fn as_str(self) -> &'static str {
        match self {
            OpenStep::Configure => "configuring the socket",
            OpenStep::Bind => "binding the source address",
            OpenStep::Connect => "connect",
        }
    }
}

/// What to check after an I/O error at `step`, by its kind.
fn hint(step: OpenStep, source: &io::Error) -> &'static str {
    match (step, source.kind()) {
        (OpenStep::Connect, io::ErrorKind::ConnectionRefused) => {
            " (nothing listens there: check the address and port, e.g. 9042 for CQL or 9142 \
             for CQL over TLS, and that the node is up)"
        }
        (OpenStep::Connect, io::ErrorKind::TimedOut) => {
            " (check that the address is reachable from this host: routes, firewalls)"
        }
        (OpenStep::Connect, _) => " (check the address and port, and the network to the node)",
        (OpenStep::Bind, _) => " (check `local_port_range`: the source ports may be in use)",
        (OpenStep::Configure, _) => "",
    }
}

/// What to check after a failed connect to a Unix-domain socket, by the
/// error's kind.
fn unix_hint(source: &io::Error) -> &'static str {
    match source.kind() {
        io::ErrorKind::NotFound => {
            " (no socket at this path: check the path, and that the node enables its \
             maintenance socket: `maintenance_socket` in scylla.yaml, where `workdir` puts it \
             at <workdir>/cql.m and `ignore` disables it)"
        }
        io::ErrorKind::PermissionDenied => {
            " (permission denied: the socket is open to its owner and group only; connect as \
             the node's user or as a member of its `maintenance_socket_group`)"
        }
        io::ErrorKind::ConnectionRefused => {
            " (nothing listens on it: the node is down, the file was left by a node that \
             stopped, or the path is not a socket)"
        }
        io::ErrorKind::InvalidInput => {
            " (check the path: a socket path must be shorter than 108 bytes)"
        }
        io::ErrorKind::Unsupported => " (Unix-domain sockets need a Unix platform)",
        _ => " (check the path and the socket's permissions, and that the node is up)",
    }
}

/// Opening a socket failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// An I/O error at one step.
    #[error("{} to {addr} failed{}", step.as_str(), hint(*step, source))]
    Io {
        /// The step.
        step: OpenStep,
        /// The destination.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The connect did not finish in time.
    #[error("connect to {addr} timed out after {after:?}: check that the address is reachable from this host (routes, firewalls), or raise `connect_timeout`")]
    Timeout {
        /// The destination.
        addr: SocketAddr,
        /// The timeout.
        after: Duration,
    },
    /// Connecting to a Unix-domain socket (ScyllaDB's maintenance socket)
    /// failed: the path does not exist, is not accessible, or nothing
    /// listens on it.
    #[error("connect to the Unix-domain socket {} failed{}", path.display(), unix_hint(source))]
    UnixSocket {
        /// The socket's path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The connect to a Unix-domain socket did not finish in time.
    #[error("connect to the Unix-domain socket {} timed out after {after:?}: check that the node behind it is not stuck or overloaded, or raise `connect_timeout`", path.display())]
    UnixSocketTimeout {
        /// The socket's path.
        path: PathBuf,
        /// The timeout.
        after: Duration,
    },
}

impl OpenError {
    /// Whether the failure means "this source port is taken" (try another).
    pub fn port_taken(&self) -> bool {
        match self {
            OpenError::Io { step, source, .. } => {
                matches!(step, OpenStep::Bind | OpenStep::Connect)
                    && matches!(
                        source.kind(),
                        io::ErrorKind::AddrInUse
                            | io::ErrorKind::AddrNotAvailable
                            | io::ErrorKind::PermissionDenied
                    )
            }
            OpenError::Timeout { .. }
            | OpenError::UnixSocket { .. }
            | OpenError::UnixSocketTimeout { .. } => false,
        }
    }

    /// Whether the peer refused the connection.
    pub fn refused(&self) -> bool {
        match self {
            OpenError::Io { source, .. } | OpenError::UnixSocket { source, .. } => {
                source.kind() == io::ErrorKind::ConnectionRefused
            }
            OpenError::Timeout { .. } | OpenError::UnixSocketTimeout { .. } => false,
        }
    }

    /// Whether the connect timed out.
    pub fn timed_out(&self) -> bool {
        matches!(
            self,
            OpenError::Timeout { .. } | OpenError::UnixSocketTimeout { .. }
        )
    }

    /// The Unix-domain socket path this error is about, if it is about one.
    pub fn unix_socket_path(&self) -> Option<&Path> {
        match self {
            OpenError::UnixSocket { path, .. } | OpenError::UnixSocketTimeout { path, .. } => {
                Some(path)
            }
            OpenError::Io { .. } | OpenError::Timeout { .. } => None,
        }
    }
}

/// Opens a TCP connection to `addr`, optionally from `source` (address and port).
pub(super) async fn open_socket(
    addr: SocketAddr,
    source: Option<SocketAddr>,
    cfg: &SocketConfig,
) -> Result<TcpStream, OpenError> {
    let io_err = |step| move |source| OpenError::Io { step, addr, source };
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(io_err(OpenStep::Configure))?;
    socket
        .set_nonblocking(true)
        .map_err(io_err(OpenStep::Configure))?;
    socket
        .set_tcp_nodelay(cfg.nodelay)
        .map_err(io_err(OpenStep::Configure))?;
    if let Some(idle) = cfg.keepalive {
        socket
            .set_tcp_keepalive(&TcpKeepalive::new().with_time(idle).with_interval(idle))
            .map_err(io_err(OpenStep::Configure))?;
    }
    if let Some(src) = source {
        socket
            .set_reuse_address(true)
            .map_err(io_err(OpenStep::Configure))?;
        socket.bind(&src.into()).map_err(io_err(OpenStep::Bind))?;
    }
    let socket = TcpSocket::from_std_stream(std::net::TcpStream::from(socket));
    match tokio::time::timeout(cfg.connect_timeout, socket.connect(addr)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(io_err(OpenStep::Connect)(e)),
        Err(_) => Err(OpenError::Timeout {
            addr,
            after: cfg.connect_timeout,
        }),
    }
}

/// Connects to the Unix-domain socket at `path`, bounded by the connect
/// timeout (the TCP options do not apply).
#[cfg(unix)]
pub(super) async fn open_unix(
    path: &Path,
    cfg: &SocketConfig,
) -> Result<tokio::net::UnixStream, OpenError> {
    match tokio::time::timeout(cfg.connect_timeout, tokio::net::UnixStream::connect(path)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(source)) => Err(OpenError::UnixSocket {
            path: path.to_owned(),
            source,
        }),
        Err(_) => Err(OpenError::UnixSocketTimeout {
            path: path.to_owned(),
            after: cfg.connect_timeout,
        }),
    }
}

/// Unix-domain sockets exist on Unix only: elsewhere every connect fails.
#[cfg(not(unix))]
pub(super) fn unix_unsupported(path: &Path) -> OpenError {
    OpenError::UnixSocket {
        path: path.to_owned(),
        source: io::Error::new(
            io::ErrorKind::Unsupported,
            "Unix-domain sockets are not supported on this platform",
        ),
    }
}

/// The local address of a connected stream (the source port the server sees,
/// unless a NAT rewrites it).
pub(super) fn local_addr(stream: &TcpStream) -> io::Result<SocketAddr> {
    SockRef::from(stream)
        .local_addr()?
        .as_socket()
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "local address is not an IP socket",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connects_and_binds_a_chosen_port() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = tokio::spawn(async move { listener.accept().await.unwrap().1 });
        // Find a free local port by binding to 0 first.
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let src: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let s = open_socket(addr, Some(src), &SocketConfig::default())
            .await
            .unwrap();
        assert_eq!(local_addr(&s).unwrap().port(), port);
        assert_eq!(accept.await.unwrap().port(), port);
    }

    #[tokio::test]
    async fn refused_is_reported() {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let e = open_socket(addr, None, &SocketConfig::default())
            .await
            .unwrap_err();
        assert!(e.refused(), "{e}");
        assert!(!e.port_taken());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn unix_socket_errors_name_the_path() {
        let dir = std::env::temp_dir().join(format!("open-unix-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("missing.sock");
        let e = open_unix(&path, &SocketConfig::default())
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(text.contains(&*path.to_string_lossy()), "{text}");
        assert!(text.contains("maintenance_socket"), "{text}");
        assert_eq!(e.unix_socket_path(), Some(path.as_path()));
        assert!(!e.refused() && !e.timed_out() && !e.port_taken());
        // A socket file nobody listens on any more: refused.
        let stale = dir.join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        let e = open_unix(&stale, &SocketConfig::default())
            .await
            .unwrap_err();
        assert!(e.refused(), "{e}");
        assert!(e.to_string().contains("nothing listens"), "{e}");
        // And one that listens.
        let live = dir.join("live.sock");
        let _ = std::fs::remove_file(&live);
        let listener = tokio::net::UnixListener::bind(&live).unwrap();
        let accept = tokio::spawn(async move { listener.accept().await.map(|_| ()) });
        open_unix(&live, &SocketConfig::default()).await.unwrap();
        accept.await.unwrap().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn same_4_tuple_is_port_taken() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _keep = tokio::spawn(async move {
            let mut v = Vec::new();
            for _ in 0..2 {
                if let Ok(s) = listener.accept().await {
                    v.push(s);
                }
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        });
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let src: SocketAddr = probe.local_addr().unwrap();
        drop(probe);
        let _first = open_socket(addr, Some(src), &SocketConfig::default())
            .await
            .unwrap();
        let second = open_socket(addr, Some(src), &SocketConfig::default())
            .await
            .unwrap_err();
        assert!(second.port_taken(), "{second}");
    }
}
