//! REGISTER (section 4.1.8): the event types to receive, a `[string list]`.

use crate::frame::ProtocolVersion;
use std::borrow::Cow;

use bytes::BytesMut;

use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// A type of server-pushed event (section 4.2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Nodes joining, leaving or moving.
    TopologyChange,
    /// Nodes going up or down.
    StatusChange,
    /// Keyspaces, tables, types, functions created, altered or dropped.
    SchemaChange,
    /// ScyllaDB: rows of `system.client_routes` inserted, updated or
    /// deleted (not in [`EventType::ALL`]: other servers refuse it).
    ClientRoutesChange,
}

impl EventType {
    /// Every event type of the CQL specification.
    pub const ALL: [EventType; 3] = [
        EventType::TopologyChange,
        EventType::StatusChange,
        EventType::SchemaChange,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::TopologyChange => "TOPOLOGY_CHANGE",
            EventType::StatusChange => "STATUS_CHANGE",
            EventType::SchemaChange => "SCHEMA_CHANGE",
            EventType::ClientRoutesChange => "CLIENT_ROUTES_CHANGE",
        }
    }

    /// Parses a wire name (exact, as the spec spells it).
    pub fn from_name(name: &str) -> Option<Self> {
        EventType::ALL
            .into_iter()
            .chain([EventType::ClientRoutesChange])
            .find(|e| e.as_str() == name)
    }

    /// Reads a `[string]` event type name.
    pub fn decode(r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        let offset = r.position();
        let name = r.read_string("event type")?;
        EventType::from_name(name).ok_or(DecodeError::InvalidText {
            what: "event type (unknown name)",
            offset,
        })
    }
}

/// A REGISTER request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Register<'a> {
    /// The event types to receive.
    pub event_types: Cow<'a, [EventType]>,
}

impl Register<'_> {
    /// A copy that owns all its data.
    pub fn into_owned(self) -> Register<'static> {
        Register {
            event_types: Cow::Owned(self.event_types.into_owned()),
        }
    }

    /// Decodes the body; an unknown event type is an error.
    pub fn decode(r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        let n = r.read_short_count("event types", 2)?;
        let mut event_types = Vec::with_capacity(n);
        for _ in 0..n {
            event_types.push(EventType::decode(r)?);
        }
        Ok(Self {
            event_types: Cow::Owned(event_types),
        })
    }
}

impl MessageBody for Register<'_> {
    fn opcode(&self) -> Opcode {
        Opcode::Register
    }

    fn encode_body(
        &self,
        buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        wire::put_short_len(buf, self.event_types.len(), "event types")?;
        for e in self.event_types.iter() {
            wire::put_string(buf, e.as_str(), "event type")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::EventType;

    #[test]
    fn names_round_trip_and_all_stays_the_specification_s() {
        for e in EventType::ALL
            .into_iter()
            .chain([EventType::ClientRoutesChange])
        {
            assert_eq!(EventType::from_name(e.as_str()), Some(e));
        }
        assert_eq!(
            EventType::from_name("CLIENT_ROUTES_CHANGE"),
            Some(EventType::ClientRoutesChange)
        );
        assert!(!EventType::ALL.contains(&EventType::ClientRoutesChange));
        assert_eq!(EventType::from_name("client_routes_change"), None);
    }
}
