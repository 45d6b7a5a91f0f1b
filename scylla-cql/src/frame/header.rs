//! The 9-byte frame header (v4), called the envelope header in v5:
//!
//! ```text
//! 0         8        16        24        32         40
//! +---------+---------+---------+---------+---------+
//! | version |  flags  |      stream       | opcode  |
//! +---------+---------+---------+---------+---------+
//! |                length                 |
//! +---------+---------+---------+---------+
//! ```
//!
//! The high bit of `version` is the direction (0 = request, 1 = response),
//! the low bits the [`ProtocolVersion`].
//! The body length is checked against a configurable maximum *here*, before
//! any byte of the body is buffered, so a peer cannot make us allocate an
//! unbounded buffer.

use bytes::BufMut;

use super::version::ProtocolVersion;
use crate::error::DecodeError;

/// Length of a frame (envelope) header.
pub const HEADER_LEN: usize = 9;

/// Default maximum body length (256 MiB, the protocol's own limit).
pub const DEFAULT_MAX_BODY_LEN: usize = 256 * 1024 * 1024;

/// Which way a frame travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client to server.
    Request,
    /// Server to client.
    Response,
}

/// Header flags (a bit set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u8);

impl Flags {
    /// The body is compressed with the algorithm chosen at STARTUP.
    pub const COMPRESSION: Flags = Flags(0x01);
    /// Tracing requested (request) / a tracing id precedes the body (response).
    pub const TRACING: Flags = Flags(0x02);
    /// A `[bytes map]` custom payload precedes the body.
    pub const CUSTOM_PAYLOAD: Flags = Flags(0x04);
    /// A `[string list]` of warnings precedes the body (responses only).
    pub const WARNING: Flags = Flags(0x08);
    /// The frame uses a beta protocol version.
    pub const BETA: Flags = Flags(0x10);

    /// No flag set.
    pub const fn empty() -> Self {
        Flags(0)
    }

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of two sets.
    #[must_use]
    pub const fn with(self, other: Flags) -> Self {
        Flags(self.0 | other.0)
    }

    /// This set without the bits of `other`.
    #[must_use]
    pub const fn without(self, other: Flags) -> Self {
        Flags(self.0 & !other.0)
    }
}

macro_rules! opcodes {
    ($($(#[$m:meta])* $name:ident = $code:expr,)*) => {
        /// The operation of a frame.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum Opcode {
            $($(#[$m])* $name = $code,)*
        }

        impl Opcode {
            /// Parses an opcode byte.
            pub fn from_u8(code: u8) -> Result<Self, DecodeError> {
                match code {
                    $($code => Ok(Opcode::$name),)*
                    other => Err(DecodeError::UnknownOpcode(other)),
                }
            }

            /// Every opcode, for tests.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$name,)*];
        }
    };
}

opcodes! {
    /// ERROR (response).
    Error = 0x00,
    /// STARTUP (request).
    Startup = 0x01,
    /// READY (response).
    Ready = 0x02,
    /// AUTHENTICATE (response).
    Authenticate = 0x03,
    /// OPTIONS (request).
    Options = 0x05,
    /// SUPPORTED (response).
    Supported = 0x06,
    /// QUERY (request).
    Query = 0x07,
    /// RESULT (response).
    Result = 0x08,
    /// PREPARE (request).
    Prepare = 0x09,
    /// EXECUTE (request).
    Execute = 0x0A,
    /// REGISTER (request).
    Register = 0x0B,
    /// EVENT (response, stream -1).
    Event = 0x0C,
    /// BATCH (request).
    Batch = 0x0D,
    /// AUTH_CHALLENGE (response).
    AuthChallenge = 0x0E,
    /// AUTH_RESPONSE (request).
    AuthResponse = 0x0F,
    /// AUTH_SUCCESS (response).
    AuthSuccess = 0x10,
}

impl Opcode {
    /// The direction a frame with this opcode travels.
    pub fn direction(self) -> Direction {
        match self {
            Opcode::Startup
            | Opcode::Options
            | Opcode::Query
            | Opcode::Prepare
            | Opcode::Execute
            | Opcode::Register
            | Opcode::Batch
            | Opcode::AuthResponse => Direction::Request,
            _ => Direction::Response,
        }
    }
}

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// The protocol version the frame is written in.
    pub version: ProtocolVersion,
    /// Request or response.
    pub direction: Direction,
    /// Header flags.
    pub flags: Flags,
    /// Stream id; -1 is reserved for server-pushed events.
    pub stream: i16,
    /// The operation.
    pub opcode: Opcode,
    /// Length of the body that follows.
    pub body_len: u32,
}

impl FrameHeader {
    /// Decodes a header from the start of `buf`.
    ///
    /// Returns `Ok(None)` if fewer than [`HEADER_LEN`] bytes are available. Fails
    /// on a version this crate does not speak, an unknown opcode, or a body longer than
    /// `max_body_len`. The direction bit is reported, not checked: callers that
    /// expect one direction use [`FrameHeader::expect_direction`].
    pub fn decode(buf: &[u8], max_body_len: usize) -> Result<Option<FrameHeader>, DecodeError> {
        let Some(h) = buf.get(..HEADER_LEN) else {
            return Ok(None);
        };
        let Some(version) = ProtocolVersion::from_number(h[0] & 0x7f) else {
            return Err(DecodeError::UnsupportedVersion(h[0]));
        };
        let direction = if h[0] & 0x80 != 0 {
            Direction::Response
        } else {
            Direction::Request
        };
        let body_len = u32::from_be_bytes([h[5], h[6], h[7], h[8]]);
        // The spec's [int] length is signed; anything above i32::MAX is invalid
        // as well as anything above the configured limit.
        if body_len as u64 > max_body_len.min(i32::MAX as usize) as u64 {
            return Err(DecodeError::FrameTooLarge {
                length: body_len as u64,
                limit: max_body_len,
            });
        }
        Ok(Some(FrameHeader {
            version,
            direction,
            flags: Flags(h[1]),
            stream: i16::from_be_bytes([h[2], h[3]]),
            opcode: Opcode::from_u8(h[4])?,
            body_len,
        }))
    }

    /// Decodes the header of `frame`, a whole frame (a v5 segment decoder
    /// hands out whole envelopes): fewer than [`HEADER_LEN`] bytes is an
    /// error here, not "more bytes needed".
    pub fn decode_whole(frame: &[u8], max_body_len: usize) -> Result<FrameHeader, DecodeError> {
        FrameHeader::decode(frame, max_body_len)?.ok_or(DecodeError::UnexpectedEof {
            what: "frame header",
            offset: 0,
            needed: HEADER_LEN,
            available: frame.len(),
        })
    }

    /// Fails unless this header carries `expected`, the version of its
    /// connection (every frame of a connection has the same one).
    pub fn expect_version(&self, expected: ProtocolVersion) -> Result<(), DecodeError> {
        if self.version == expected {
            Ok(())
        } else {
            let dir = match self.direction {
                Direction::Request => 0x00,
                Direction::Response => 0x80,
            };
            Err(DecodeError::UnsupportedVersion(self.version.number() | dir))
        }
    }

    /// Fails unless this header travels in `expected` direction.
    pub fn expect_direction(&self, expected: Direction) -> Result<(), DecodeError> {
        if self.direction == expected {
            Ok(())
        } else {
            Err(DecodeError::WrongDirection {
                expected: match expected {
                    Direction::Request => "request",
                    Direction::Response => "response",
                },
            })
        }
    }

    /// Total frame length (header and body).
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.body_len as usize
    }

    /// Appends the encoded header.
    pub fn encode(&self, buf: &mut impl BufMut) {
        let dir = match self.direction {
            Direction::Request => 0x00,
            Direction::Response => 0x80,
        };
        let [s0, s1] = self.stream.to_be_bytes();
        let [l0, l1, l2, l3] = self.body_len.to_be_bytes();
        // One append of the nine bytes: for a `BytesMut` every put is a
        // call with its own capacity check and copy.
        buf.put_slice(&[
            self.version.number() | dir,
            self.flags.0,
            s0,
            s1,
            self.opcode as u8,
            l0,
            l1,
            l2,
            l3,
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        for &opcode in Opcode::ALL {
            let h = FrameHeader {
                version: ProtocolVersion::V5,
                direction: opcode.direction(),
                flags: Flags::COMPRESSION.with(Flags::WARNING),
                stream: -1,
                opcode,
                body_len: 1234,
            };
            let mut b = Vec::new();
            h.encode(&mut b);
            assert_eq!(b.len(), HEADER_LEN);
            assert_eq!(
                FrameHeader::decode(&b, DEFAULT_MAX_BODY_LEN).unwrap(),
                Some(h)
            );
        }
    }

    #[test]
    fn whole_frames_and_versions() {
        let v5 = [0x85, 0, 0, 1, 0x02, 0, 0, 0, 0];
        let h = FrameHeader::decode_whole(&v5, 10).unwrap();
        assert!(h.expect_version(ProtocolVersion::V5).is_ok());
        assert_eq!(
            h.expect_version(ProtocolVersion::V4),
            Err(DecodeError::UnsupportedVersion(0x85))
        );
        assert!(matches!(
            FrameHeader::decode_whole(&v5[..4], 10),
            Err(DecodeError::UnexpectedEof { available: 4, .. })
        ));
    }

    #[test]
    fn short_input_is_incomplete() {
        assert_eq!(FrameHeader::decode(&[4, 0, 0], 100).unwrap(), None);
    }

    #[test]
    fn rejects_bad_headers() {
        let ok = [0x84, 0, 0, 1, 0x02, 0, 0, 0, 0];
        assert!(FrameHeader::decode(&ok, 10).unwrap().is_some());
        let mut v5 = ok;
        v5[0] = 0x85;
        assert_eq!(
            FrameHeader::decode(&v5, 10).unwrap().unwrap().version,
            ProtocolVersion::V5
        );
        let mut v3 = ok;
        v3[0] = 0x83;
        assert_eq!(
            FrameHeader::decode(&v3, 10),
            Err(DecodeError::UnsupportedVersion(0x83))
        );
        let mut bad_op = ok;
        bad_op[4] = 0x04;
        assert_eq!(
            FrameHeader::decode(&bad_op, 10),
            Err(DecodeError::UnknownOpcode(4))
        );
        let mut big = ok;
        big[8] = 11;
        assert!(matches!(
            FrameHeader::decode(&big, 10),
            Err(DecodeError::FrameTooLarge {
                length: 11,
                limit: 10
            })
        ));
        let mut huge = ok;
        huge[5] = 0xff;
        assert!(matches!(
            FrameHeader::decode(&huge, usize::MAX),
            Err(DecodeError::FrameTooLarge { .. })
        ));
    }
}
