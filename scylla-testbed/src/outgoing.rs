//! [`Outgoing`]: what a connection's writer is handed (by its reader, its
//! request tasks and the event registry).

use bytes::Bytes;

/// What the reader, the request tasks and the event registry hand the writer.
#[derive(Debug)]
pub(crate) enum Outgoing {
    /// One whole frame (v4) or envelope (v5): 9-byte header and body.
    Frame(Bytes),
    /// Every later frame goes out inside v5 segments (compressed with LZ4
    /// if `compressed`). Queued right behind the READY or AUTHENTICATE of
    /// a v5 connection.
    StartSegments {
        /// The connection negotiated LZ4.
        compressed: bool,
    },
}
