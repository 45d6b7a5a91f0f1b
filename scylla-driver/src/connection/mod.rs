//! One TCP connection to one shard of one node, in plaintext or over TLS
//! (or a plaintext connection over a Unix-domain socket: ScyllaDB's
//! maintenance socket, [`ConnectionConfig::unix_socket`]).
//!
//! [`open()`](fn@open) connects (`open` module: socket2, optional bind of a
//! chosen source port; or the Unix-domain socket), runs the TLS handshake if
//! configured (`tls` module, feature `tls`), runs the handshake
//! (`handshake`), and spawns three tasks that own the socket; the caller gets
//! a cheap, clonable [`Connection`] handle:
//!
//! - the **writer** (`writer`) takes the frames that requests encoded into the
//!   shared pending buffer and writes them, several per syscall when the
//!   [`Coalescing`] policy says so;
//! - the **reader** (`reader`) splits the incoming bytes into frames, decodes
//!   them, and completes the `stream_slots` of their stream ids (events go to
//!   a channel);
//! - the **tick** (`housekeeping`) times out requests past their deadline
//!   (no timer per request), sends heartbeats on idle connections, probes a
//!   busy connection whose reader has completed no frame for a while (a
//!   damaged length field makes the reader wait for bytes that never come),
//!   and recycles a connection with too many orphaned stream ids.
//!
//! # The life of a request
//! 1. [`Connection::request`] reserves a stream id and its slot (waiting, within
//!    the request's timeout, if all 32,768 are busy: the `permits` count the
//!    free ids).
//! 2. It encodes the frame straight into the pending buffer (no per-request
//!    buffer), and wakes the writer if the buffer was empty.
//! 3. The writer swaps the pending buffer with its own (both are reused) and
//!    writes it.
//! 4. The reader decodes the response and completes the slot, waking the
//!    requester, which takes the response and frees the id.
//!
//! # Dropping and cancelling
//! Dropping the future of a request that was already encoded does not unsend
//! it: its stream id stays reserved until the response arrives and is
//! discarded. A request that fails before its frame reached the socket fails
//! with [`ConnectionRequestError::NotSent`], so it can be retried safely. Dropping the
//! last [`Connection`] handle closes the connection.

// Internals: what users need is re-exported below (or in `tls`).
mod auth;
pub(crate) mod client_options;
mod coalescing;
mod config;
mod error;
mod establish;
mod handle;
pub(crate) mod handshake;
mod housekeeping;
mod negotiation;
mod open;
mod permits;
mod reader;
mod response;
mod shared;
pub(crate) mod stats;
mod stream_slots;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(feature = "openssl-010")]
mod tls_openssl;
#[cfg(feature = "tls")]
mod tls_records;
#[cfg(feature = "tls")]
pub mod tls_tickets;
// For the `tls_records` fuzz target only (see the function).
#[cfg(all(feature = "tls", feature = "unstable-internals"))]
#[doc(hidden)]
pub use self::tls_records::fuzz_receiver;
mod writer;

pub use self::auth::{
    AuthError, AuthenticationFailed, AuthenticatorProvider, AuthenticatorSession,
    PlainTextAuthenticator,
};
pub use self::coalescing::Coalescing;
pub(crate) use self::error::Chain;
pub use self::error::{
    BrokenConnection, BrokenReason, ConnectionError, ConnectionRequestError, SetupStep,
    TlsErrorKind,
};
pub use self::handshake::{ServerInfo, SetupTimes};
pub use self::negotiation::ProtocolChoice;
pub use self::open::{OpenError, OpenStep, SocketConfig};
pub use self::stats::{IoCounters, IoSnapshot};

pub use self::config::{ConnectionConfig, RequestOptions, UNIX_SOCKET_NODE_ADDRESS};
#[cfg(any(test, feature = "unstable-internals"))]
pub use self::config::{DEFAULT_DRIVER_NAME, DEFAULT_DRIVER_VERSION, DEFAULT_MAX_FRAME_LEN};
pub use self::establish::open;
use self::handle::Handle;
pub use self::handle::{Connection, ConnectionInfo};
pub(crate) use self::response::Extras;
pub use self::response::{ResponseExtras, ResponseFrame};
use self::shared::{Pending, Shared};
