//! Errors of the wire layer.
//!
//! [`DecodeError`] is deliberately small and `Copy`: decoders run on the hot path
//! and on hostile input, so the error path never allocates. It names *what* was
//! being decoded and *where* (a byte offset into the body being read) so that a
//! bad frame can be diagnosed from a log line.

/// A malformed, truncated or unsupported input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended before a complete item could be read.
    #[error("unexpected end of input while reading {what} at offset {offset}: needed {needed} bytes, {available} available")]
    UnexpectedEof {
        /// What was being read.
        what: &'static str,
        /// Offset of the read in the input.
        offset: usize,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// A length prefix is negative (where that is not allowed) or impossible.
    #[error("invalid length {length} for {what} at offset {offset}")]
    InvalidLength {
        /// What was being read.
        what: &'static str,
        /// The length found.
        length: i64,
        /// Offset of the length in the input.
        offset: usize,
    },
    /// Text that must be UTF-8 (or ASCII) is not.
    #[error("invalid {what} text at offset {offset}")]
    InvalidText {
        /// What was being read.
        what: &'static str,
        /// Offset of the text in the input.
        offset: usize,
    },
    /// A value is outside the set the protocol allows (an unknown enum code, ...).
    #[error("invalid value {value} for {what}")]
    InvalidValue {
        /// What was being read.
        what: &'static str,
        /// The offending value.
        value: i64,
    },
    /// The frame header carries an opcode this implementation does not know.
    #[error("unknown opcode 0x{0:02x}")]
    UnknownOpcode(u8),
    /// The frame header carries a protocol version other than the one spoken.
    #[error("unsupported protocol version 0x{0:02x}")]
    UnsupportedVersion(u8),
    /// The frame's direction bit is not the one expected on this side.
    #[error("frame has the wrong direction (expected a {expected})")]
    WrongDirection {
        /// "request" or "response".
        expected: &'static str,
    },
    /// The frame body is longer than the configured maximum.
    #[error("frame body of {length} bytes exceeds the limit of {limit} bytes")]
    FrameTooLarge {
        /// The length announced by the header (or the decompressed length).
        length: u64,
        /// The configured maximum.
        limit: usize,
    },
    /// Bytes remained after a message that should have consumed the whole body.
    #[error("{remaining} unexpected trailing bytes after {what}")]
    TrailingBytes {
        /// The message that was decoded.
        what: &'static str,
        /// How many bytes were left over.
        remaining: usize,
    },
    /// A compressed body could not be decompressed.
    #[error("corrupt compressed body: {0}")]
    Decompression(&'static str),
    /// A type was nested deeper than the decoder accepts (protects the stack).
    #[error("type nesting deeper than {limit} levels")]
    TooDeep {
        /// The nesting limit.
        limit: usize,
    },
}

/// A value that cannot be represented on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// An item is longer than its length prefix can express.
    #[error("{what} of {length} bytes is too long for its length prefix (max {max})")]
    TooLong {
        /// What was being written.
        what: &'static str,
        /// Its length.
        length: usize,
        /// The largest length the prefix can hold.
        max: usize,
    },
    /// Too many items for a count prefix (values, batch statements, ...).
    #[error("{count} {what} is more than the protocol allows (max {max})")]
    TooMany {
        /// What was being counted.
        what: &'static str,
        /// The count.
        count: usize,
        /// The maximum.
        max: usize,
    },
    /// The frame body exceeds the configured maximum.
    #[error("frame body of {length} bytes exceeds the limit of {limit} bytes")]
    FrameTooLarge {
        /// The body length.
        length: usize,
        /// The configured maximum.
        limit: usize,
    },
    /// A request asked for something the protocol cannot express.
    #[error("invalid request: {0}")]
    Invalid(&'static str),
}
