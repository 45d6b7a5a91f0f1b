//! EVENT (section 4.2.6, plus ScyllaDB's CLIENT_ROUTES_CHANGE): changes the
//! server pushes on stream -1 to connections that REGISTERed for them.

use crate::frame::ProtocolVersion;
use std::net::SocketAddr;

use bytes::BytesMut;

use super::result::SchemaChange;
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// An EVENT response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// "TOPOLOGY_CHANGE": a node joined or left the cluster.
    TopologyChange {
        /// Joined or left.
        change: TopologyChangeType,
        /// The node's native-protocol address.
        addr: SocketAddr,
    },
    /// "STATUS_CHANGE": a node went up or down.
    StatusChange {
        /// Up or down.
        change: StatusChangeType,
        /// The node's native-protocol address.
        addr: SocketAddr,
    },
    /// "SCHEMA_CHANGE": the schema changed.
    SchemaChange(SchemaChange),
    /// "CLIENT_ROUTES_CHANGE" (ScyllaDB): `system.client_routes` changed.
    ClientRoutesChange {
        /// What changed (only `UPDATE_NODES` is defined).
        change: ClientRoutesChangeType,
        /// Connection ids affected.
        connection_ids: Vec<String>,
        /// Host ids affected.
        host_ids: Vec<String>,
    },
}

/// A topology change (`NEW_NODE` / `REMOVED_NODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TopologyChangeType {
    /// "NEW_NODE"
    NewNode,
    /// "REMOVED_NODE"
    RemovedNode,
}

/// A status change (`UP` / `DOWN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusChangeType {
    /// "UP"
    Up,
    /// "DOWN"
    Down,
}

/// A client-routes change (only `UPDATE_NODES` is defined).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientRoutesChangeType {
    /// "UPDATE_NODES": at least one route was inserted, updated or deleted.
    UpdateNodes,
}

/// The event type names, as REGISTER and EVENT spell them.
pub mod event_type {
    /// Topology changes.
    pub const TOPOLOGY_CHANGE: &str = "TOPOLOGY_CHANGE";
    /// Status changes.
    pub const STATUS_CHANGE: &str = "STATUS_CHANGE";
    /// Schema changes.
    pub const SCHEMA_CHANGE: &str = "SCHEMA_CHANGE";
    /// ScyllaDB client-routes changes.
    pub const CLIENT_ROUTES_CHANGE: &str = "CLIENT_ROUTES_CHANGE";
}

fn unknown(what: &'static str, name: &str) -> DecodeError {
    // DecodeError does not allocate, so it carries the name's length only.
    DecodeError::InvalidValue {
        what,
        value: name.len() as i64,
    }
}

impl Event {
    /// The event type name of this event.
    pub fn event_type(&self) -> &'static str {
        match self {
            Event::TopologyChange { .. } => event_type::TOPOLOGY_CHANGE,
            Event::StatusChange { .. } => event_type::STATUS_CHANGE,
            Event::SchemaChange(_) => event_type::SCHEMA_CHANGE,
            Event::ClientRoutesChange { .. } => event_type::CLIENT_ROUTES_CHANGE,
        }
    }

    /// Decodes an EVENT body.
    pub fn decode(r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        Ok(match r.read_string("event type")? {
            event_type::TOPOLOGY_CHANGE => {
                let change = match r.read_string("topology change")? {
                    "NEW_NODE" => TopologyChangeType::NewNode,
                    "REMOVED_NODE" => TopologyChangeType::RemovedNode,
                    other => return Err(unknown("topology change (name length)", other)),
                };
                Event::TopologyChange {
                    change,
                    addr: r.read_inet("topology change address")?,
                }
            }
            event_type::STATUS_CHANGE => {
                let change = match r.read_string("status change")? {
                    "UP" => StatusChangeType::Up,
                    "DOWN" => StatusChangeType::Down,
                    other => return Err(unknown("status change (name length)", other)),
                };
                Event::StatusChange {
                    change,
                    addr: r.read_inet("status change address")?,
                }
            }
            event_type::SCHEMA_CHANGE => Event::SchemaChange(SchemaChange::decode(r)?),
            event_type::CLIENT_ROUTES_CHANGE => {
                let change = match r.read_string("client routes change")? {
                    "UPDATE_NODES" => ClientRoutesChangeType::UpdateNodes,
                    other => return Err(unknown("client routes change (name length)", other)),
                };
                Event::ClientRoutesChange {
                    change,
                    connection_ids: r.read_string_list("client routes connection ids")?,
                    host_ids: r.read_string_list("client routes host ids")?,
                }
            }
            other => return Err(unknown("event type (name length)", other)),
        })
    }
}

impl MessageBody for Event {
    fn opcode(&self) -> Opcode {
        Opcode::Event
    }

    fn encode_body(
        &self,
        buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        wire::put_string(buf, self.event_type(), "event type")?;
        match self {
            Event::TopologyChange { change, addr } => {
                let name = match change {
                    TopologyChangeType::NewNode => "NEW_NODE",
                    TopologyChangeType::RemovedNode => "REMOVED_NODE",
                };
                wire::put_string(buf, name, "topology change")?;
                wire::put_inet(buf, addr);
            }
            Event::StatusChange { change, addr } => {
                let name = match change {
                    StatusChangeType::Up => "UP",
                    StatusChangeType::Down => "DOWN",
                };
                wire::put_string(buf, name, "status change")?;
                wire::put_inet(buf, addr);
            }
            Event::SchemaChange(sc) => sc.encode(buf)?,
            Event::ClientRoutesChange {
                change: ClientRoutesChangeType::UpdateNodes,
                connection_ids,
                host_ids,
            } => {
                wire::put_string(buf, "UPDATE_NODES", "client routes change")?;
                wire::put_string_list(buf, connection_ids, "client routes connection ids")?;
                wire::put_string_list(buf, host_ids, "client routes host ids")?;
            }
        }
        Ok(())
    }
}
