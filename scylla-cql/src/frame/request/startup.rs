//! STARTUP (section 4.1.1): a `[string map]` of connection options.
//!
//! Options are kept as an ordered list of pairs, so the driver can encode from
//! string literals without building a map, and the server decodes them
//! borrowing from the body.

use crate::frame::ProtocolVersion;
use std::borrow::Cow;

use bytes::BytesMut;

use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};

/// The mandatory CQL version option.
pub const CQL_VERSION: &str = "CQL_VERSION";
/// The compression algorithm option (see [`crate::Compression::name`]).
pub const COMPRESSION: &str = "COMPRESSION";
/// The client's driver name (shown in `system.clients`).
pub const DRIVER_NAME: &str = "DRIVER_NAME";
/// The client's driver version (shown in `system.clients`).
pub const DRIVER_VERSION: &str = "DRIVER_VERSION";
/// The name of the application using the driver (Cassandra 4+ and ScyllaDB
/// keep it with the connection; the DataStax drivers send it too).
pub const APPLICATION_NAME: &str = "APPLICATION_NAME";
/// The version of the application using the driver.
pub const APPLICATION_VERSION: &str = "APPLICATION_VERSION";
/// An identifier of this client instance (a host name, a pod, a UUID).
pub const CLIENT_ID: &str = "CLIENT_ID";
/// The driver's main settings as a JSON object (ScyllaDB's protocol
/// extensions, "Client options": stored with the other STARTUP options in
/// `system.clients.client_options`).
pub const CLIENT_OPTIONS: &str = "CLIENT_OPTIONS";

/// A STARTUP request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Startup<'a> {
    /// Option names and values, in wire order.
    pub options: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

impl<'a> Startup<'a> {
    /// A copy that owns all its data.
    pub fn into_owned(self) -> Startup<'static> {
        Startup {
            options: self
                .options
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k.into_owned()), Cow::Owned(v.into_owned())))
                .collect(),
        }
    }

    /// The value of option `name` (the first one, if the peer repeated it).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_ref())
    }

    /// Decodes the body, borrowing the strings.
    pub fn decode(r: &mut WireReader<'a>) -> Result<Self, DecodeError> {
        let n = r.read_short_count("startup options", 4)?;
        let mut options = Vec::with_capacity(n);
        for _ in 0..n {
            let k = r.read_string("startup option name")?;
            let v = r.read_string("startup option value")?;
            options.push((Cow::Borrowed(k), Cow::Borrowed(v)));
        }
        Ok(Self { options })
    }
}

impl MessageBody for Startup<'_> {
    fn opcode(&self) -> Opcode {
        Opcode::Startup
    }

    fn encode_body(
        &self,
        buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        wire::put_string_map(
            buf,
            self.options.iter().map(|(k, v)| (k.as_ref(), v.as_ref())),
            "startup options",
        )
    }
}
