//! Consistency levels (`[consistency]` in the spec, a `[short]` on the wire).

use crate::error::DecodeError;

/// How many replicas must answer before a request succeeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u16)]
#[allow(missing_docs)] // the names are the protocol's own
pub enum Consistency {
    Any = 0x0000,
    One = 0x0001,
    Two = 0x0002,
    Three = 0x0003,
    Quorum = 0x0004,
    All = 0x0005,
    #[default]
    LocalQuorum = 0x0006,
    EachQuorum = 0x0007,
    Serial = 0x0008,
    LocalSerial = 0x0009,
    LocalOne = 0x000A,
}

/// From a wire code (`Consistency::try_from(0x0006)` is `LocalQuorum`).
impl TryFrom<u16> for Consistency {
    type Error = DecodeError;

    fn try_from(code: u16) -> Result<Self, DecodeError> {
        Self::from_code(code)
    }
}

impl Consistency {
    /// The wire code.
    pub fn code(self) -> u16 {
        self as u16
    }

    /// Parses a wire code.
    pub fn from_code(code: u16) -> Result<Self, DecodeError> {
        Ok(match code {
            0x0000 => Self::Any,
            0x0001 => Self::One,
            0x0002 => Self::Two,
            0x0003 => Self::Three,
            0x0004 => Self::Quorum,
            0x0005 => Self::All,
            0x0006 => Self::LocalQuorum,
            0x0007 => Self::EachQuorum,
            0x0008 => Self::Serial,
            0x0009 => Self::LocalSerial,
            0x000A => Self::LocalOne,
            other => {
                return Err(DecodeError::InvalidValue {
                    what: "consistency",
                    value: other as i64,
                })
            }
        })
    }

    /// Whether this is a serial consistency (for the Paxos phase of LWT).
    pub fn is_serial(self) -> bool {
        matches!(self, Self::Serial | Self::LocalSerial)
    }

    /// All levels, for tests and exhaustive matching.
    pub const ALL: [Consistency; 11] = [
        Self::Any,
        Self::One,
        Self::Two,
        Self::Three,
        Self::Quorum,
        Self::All,
        Self::LocalQuorum,
        Self::EachQuorum,
        Self::Serial,
        Self::LocalSerial,
        Self::LocalOne,
    ];
}

impl std::fmt::Display for Consistency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// The consistency of a lightweight transaction's Paxos round: the
/// serial levels of [`Consistency`], what
/// what a statement's serial consistency is set to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SerialConsistency {
    /// `SERIAL`: linearizable across all datacenters.
    Serial,
    /// `LOCAL_SERIAL`: linearizable within the local datacenter.
    LocalSerial,
}

impl From<SerialConsistency> for Consistency {
    fn from(c: SerialConsistency) -> Self {
        match c {
            SerialConsistency::Serial => Consistency::Serial,
            SerialConsistency::LocalSerial => Consistency::LocalSerial,
        }
    }
}

/// A [`Consistency`] that is not a serial level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a serial consistency level; use Serial or LocalSerial")]
pub struct NotSerialConsistency(pub Consistency);

impl TryFrom<Consistency> for SerialConsistency {
    type Error = NotSerialConsistency;

    fn try_from(c: Consistency) -> Result<Self, Self::Error> {
        match c {
            Consistency::Serial => Ok(SerialConsistency::Serial),
            Consistency::LocalSerial => Ok(SerialConsistency::LocalSerial),
            other => Err(NotSerialConsistency(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_errors() {
        for code in 0..=0x000A_u16 {
            let c = Consistency::try_from(code).unwrap();
            assert_eq!(c.code(), code);
        }
        assert!(Consistency::try_from(0x000B).is_err());
        assert_eq!(
            Consistency::try_from(0x0006).unwrap(),
            Consistency::LocalQuorum
        );
    }
}
