//! The protocol versions this crate speaks.
//!
//! The version is set per connection by its first message (section 2.3 of
//! the v5 spec): every frame of a connection carries the same one. Most
//! messages are written the same way in both versions; where they differ
//! (the flags of QUERY/EXECUTE/BATCH, the result metadata id, the failure
//! bodies of some errors, and the framing itself) encoders and decoders take
//! the version of their connection.

use std::fmt;

/// A native protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum ProtocolVersion {
    /// Protocol v4: ScyllaDB, and Cassandra 2.2 to 5.0. Frames travel bare.
    #[default]
    V4,
    /// Protocol v5: Cassandra 4.0 and later. After the handshake, frames
    /// (now called envelopes) travel inside checksummed segments.
    V5,
}

impl ProtocolVersion {
    /// Every version, oldest first.
    pub const ALL: [ProtocolVersion; 2] = [ProtocolVersion::V4, ProtocolVersion::V5];

    /// The newest version this crate speaks.
    pub const NEWEST: ProtocolVersion = ProtocolVersion::V5;

    /// The version number (the low 7 bits of a frame's first byte).
    pub const fn number(self) -> u8 {
        match self {
            ProtocolVersion::V4 => 4,
            ProtocolVersion::V5 => 5,
        }
    }

    /// The version with this number, if this crate speaks it.
    pub const fn from_number(n: u8) -> Option<Self> {
        match n {
            4 => Some(ProtocolVersion::V4),
            5 => Some(ProtocolVersion::V5),
            _ => None,
        }
    }

    /// The next older version this crate speaks, if any: where negotiation
    /// goes when a server refuses this one.
    pub const fn older(self) -> Option<Self> {
        match self {
            ProtocolVersion::V4 => None,
            ProtocolVersion::V5 => Some(ProtocolVersion::V4),
        }
    }

    /// Whether frames travel inside v5 segments after the handshake.
    pub const fn uses_segments(self) -> bool {
        matches!(self, ProtocolVersion::V5)
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.number())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        for v in ProtocolVersion::ALL {
            assert_eq!(ProtocolVersion::from_number(v.number()), Some(v));
        }
        assert_eq!(ProtocolVersion::from_number(3), None);
        assert_eq!(ProtocolVersion::from_number(6), None);
        assert_eq!(ProtocolVersion::V5.older(), Some(ProtocolVersion::V4));
        assert_eq!(ProtocolVersion::V5.to_string(), "v5");
    }
}
