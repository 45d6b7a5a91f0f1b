//! The body of a Schema_change result (section 4.2.5.5), shared with the
//! SCHEMA_CHANGE event (section 4.2.6): `<change_type><target><options>`,
//! where the options depend on the target.

use bytes::BytesMut;

use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};

/// A schema change: what happened to which object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SchemaChange {
    /// Created, updated or dropped.
    pub change: SchemaChangeType,
    /// The object affected.
    pub target: SchemaChangeTarget,
}

/// What happened to a schema object (`<change_type>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaChangeType {
    /// "CREATED"
    Created,
    /// "UPDATED"
    Updated,
    /// "DROPPED"
    Dropped,
}

impl SchemaChangeType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaChangeType::Created => "CREATED",
            SchemaChangeType::Updated => "UPDATED",
            SchemaChangeType::Dropped => "DROPPED",
        }
    }
}

/// The object of a schema change (`<target>` and its `<options>`).
///
/// A change to an index is reported as a change to its table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SchemaChangeTarget {
    /// "KEYSPACE": the keyspace itself.
    Keyspace {
        /// The keyspace.
        keyspace: String,
    },
    /// "TABLE"
    Table {
        /// Keyspace of the table.
        keyspace: String,
        /// The table.
        name: String,
    },
    /// "TYPE": a user-defined type.
    Type {
        /// Keyspace of the type.
        keyspace: String,
        /// The type.
        name: String,
    },
    /// "FUNCTION": a user-defined function.
    Function {
        /// Keyspace of the function.
        keyspace: String,
        /// The function.
        name: String,
        /// CQL types of its arguments (functions may be overloaded).
        arg_types: Vec<String>,
    },
    /// "AGGREGATE": a user-defined aggregate.
    Aggregate {
        /// Keyspace of the aggregate.
        keyspace: String,
        /// The aggregate.
        name: String,
        /// CQL types of its arguments.
        arg_types: Vec<String>,
    },
}

impl SchemaChangeTarget {
    /// The keyspace the changed object belongs to (or is).
    pub fn keyspace(&self) -> &str {
        match self {
            SchemaChangeTarget::Keyspace { keyspace }
            | SchemaChangeTarget::Table { keyspace, .. }
            | SchemaChangeTarget::Type { keyspace, .. }
            | SchemaChangeTarget::Function { keyspace, .. }
            | SchemaChangeTarget::Aggregate { keyspace, .. } => keyspace,
        }
    }

    /// The wire name of the target kind.
    pub fn kind(&self) -> &'static str {
        match self {
            SchemaChangeTarget::Keyspace { .. } => "KEYSPACE",
            SchemaChangeTarget::Table { .. } => "TABLE",
            SchemaChangeTarget::Type { .. } => "TYPE",
            SchemaChangeTarget::Function { .. } => "FUNCTION",
            SchemaChangeTarget::Aggregate { .. } => "AGGREGATE",
        }
    }
}

/// The error for an unknown name in a closed set of strings. The value is a
/// length, since [`DecodeError`] must not allocate to carry the string.
fn unknown_name(what: &'static str, name: &str) -> DecodeError {
    DecodeError::InvalidValue {
        what,
        value: name.len() as i64,
    }
}

impl SchemaChange {
    /// Decodes `<change_type><target><options>`.
    pub fn decode(r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        let change = match r.read_string("schema change type")? {
            "CREATED" => SchemaChangeType::Created,
            "UPDATED" => SchemaChangeType::Updated,
            "DROPPED" => SchemaChangeType::Dropped,
            other => return Err(unknown_name("schema change type (name length)", other)),
        };
        let kind = r.read_string("schema change target")?;
        let keyspace = r.read_string("schema change keyspace")?.to_owned();
        let target = match kind {
            "KEYSPACE" => SchemaChangeTarget::Keyspace { keyspace },
            "TABLE" => SchemaChangeTarget::Table {
                keyspace,
                name: r.read_string("schema change table")?.to_owned(),
            },
            "TYPE" => SchemaChangeTarget::Type {
                keyspace,
                name: r.read_string("schema change type name")?.to_owned(),
            },
            "FUNCTION" => SchemaChangeTarget::Function {
                keyspace,
                name: r.read_string("schema change function")?.to_owned(),
                arg_types: r.read_string_list("schema change function arg types")?,
            },
            "AGGREGATE" => SchemaChangeTarget::Aggregate {
                keyspace,
                name: r.read_string("schema change aggregate")?.to_owned(),
                arg_types: r.read_string_list("schema change aggregate arg types")?,
            },
            other => return Err(unknown_name("schema change target (name length)", other)),
        };
        Ok(Self { change, target })
    }

    /// Encodes `<change_type><target><options>`.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        wire::put_string(buf, self.change.as_str(), "schema change type")?;
        wire::put_string(buf, self.target.kind(), "schema change target")?;
        wire::put_string(buf, self.target.keyspace(), "schema change keyspace")?;
        match &self.target {
            SchemaChangeTarget::Keyspace { .. } => {}
            SchemaChangeTarget::Table { name, .. } | SchemaChangeTarget::Type { name, .. } => {
                wire::put_string(buf, name, "schema change name")?;
            }
            SchemaChangeTarget::Function {
                name, arg_types, ..
            }
            | SchemaChangeTarget::Aggregate {
                name, arg_types, ..
            } => {
                wire::put_string(buf, name, "schema change name")?;
                wire::put_string_list(buf, arg_types, "schema change arg types")?;
            }
        }
        Ok(())
    }
}
