//! Requests (client to server), section 4.1 of the v4 spec.
//!
//! Each message has its own module with a struct that implements
//! [`MessageBody`] (for the driver, which encodes them) and a `decode` (for
//! the in-process test server, which reads them). Structs hold `Cow`s: the
//! driver encodes from borrowed data without copying, and the server decodes
//! borrowing from the frame body.
//!
//! [`Request`] gathers them all, and [`Request::decode`] dispatches on the
//! opcode and insists the body is consumed entirely.

pub mod auth_response;
pub mod batch;
pub mod execute;
pub mod options;
pub mod prepare;
pub mod query;
pub mod query_params;
pub mod register;
pub mod startup;

pub use auth_response::AuthResponse;
pub use batch::{Batch, BatchStatement, BatchStatementKind, BatchType};
pub use execute::Execute;
pub use options::Options;
pub use prepare::Prepare;
pub use query::Query;
pub use query_params::QueryParameters;
pub use register::{EventType, Register};
pub use startup::Startup;

use crate::frame::ProtocolVersion;
use bytes::BytesMut;

use super::wire::WireReader;
use super::{MessageBody, Opcode};
use crate::error::{DecodeError, EncodeError};

/// What decoding a request needs to know about its connection (the server
/// side's counterpart of
/// [`ResponseContext`](crate::frame::response::ResponseContext)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestContext {
    /// The protocol version of the connection.
    pub version: ProtocolVersion,
    /// Whether the connection negotiated `SCYLLA_USE_METADATA_ID`, which puts
    /// a result metadata id into v4 EXECUTE requests (v5 always has it).
    pub use_metadata_id: bool,
    /// Whether the connection negotiated `TABLETS_ROUTING_V2_EXPERIMENTAL`,
    /// which appends a tablet version block to EXECUTE requests.
    pub tablets_routing_v2: bool,
}

impl RequestContext {
    /// The context of a connection speaking `version` without extensions.
    pub const fn new(version: ProtocolVersion) -> Self {
        Self {
            version,
            use_metadata_id: false,
            tablets_routing_v2: false,
        }
    }
}

/// Any request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// STARTUP.
    Startup(Startup<'a>),
    /// OPTIONS.
    Options(Options),
    /// QUERY.
    Query(Query<'a>),
    /// PREPARE.
    Prepare(Prepare<'a>),
    /// EXECUTE.
    Execute(Execute<'a>),
    /// BATCH.
    Batch(Batch<'a>),
    /// REGISTER.
    Register(Register<'a>),
    /// AUTH_RESPONSE.
    AuthResponse(AuthResponse<'a>),
}

impl<'a> Request<'a> {
    /// A copy that owns all its data (to keep a request beyond its frame).
    pub fn into_owned(self) -> Request<'static> {
        match self {
            Request::Startup(m) => Request::Startup(m.into_owned()),
            Request::Options(m) => Request::Options(m),
            Request::Query(m) => Request::Query(m.into_owned()),
            Request::Prepare(m) => Request::Prepare(m.into_owned()),
            Request::Execute(m) => Request::Execute(m.into_owned()),
            Request::Batch(m) => Request::Batch(m.into_owned()),
            Request::Register(m) => Request::Register(m.into_owned()),
            Request::AuthResponse(m) => Request::AuthResponse(m.into_owned()),
        }
    }

    /// Decodes the message body (compression and extras already stripped, see
    /// [`decode_envelope`](crate::frame::envelope::decode_envelope)) of a frame
    /// with `opcode`. A response opcode is a [`DecodeError::WrongDirection`];
    /// bytes left after the message are a [`DecodeError::TrailingBytes`].
    /// `version` is the connection's (some messages differ between v4 and v5).
    /// A connection that negotiated `SCYLLA_USE_METADATA_ID` on v4 decodes
    /// with [`decode_in`](Self::decode_in) instead.
    pub fn decode(
        opcode: Opcode,
        body: &'a [u8],
        version: ProtocolVersion,
    ) -> Result<Request<'a>, DecodeError> {
        Self::decode_in(opcode, body, &RequestContext::new(version))
    }

    /// [`decode`](Self::decode) for a connection in `ctx` (its version and
    /// the extensions that change request layouts).
    pub fn decode_in(
        opcode: Opcode,
        body: &'a [u8],
        ctx: &RequestContext,
    ) -> Result<Request<'a>, DecodeError> {
        let version = ctx.version;
        let mut r = WireReader::new(body);
        let req = match opcode {
            Opcode::Startup => Request::Startup(Startup::decode(&mut r)?),
            Opcode::Options => Request::Options(Options::decode(&mut r)?),
            Opcode::Query => Request::Query(Query::decode(&mut r, version)?),
            Opcode::Prepare => Request::Prepare(Prepare::decode(&mut r, version)?),
            Opcode::Execute => Request::Execute(Execute::decode_v2(
                &mut r,
                version,
                ctx.use_metadata_id,
                ctx.tablets_routing_v2,
            )?),
            Opcode::Batch => Request::Batch(Batch::decode(&mut r, version)?),
            Opcode::Register => Request::Register(Register::decode(&mut r)?),
            Opcode::AuthResponse => Request::AuthResponse(AuthResponse::decode(&mut r)?),
            Opcode::Error
            | Opcode::Ready
            | Opcode::Authenticate
            | Opcode::Supported
            | Opcode::Result
            | Opcode::Event
            | Opcode::AuthChallenge
            | Opcode::AuthSuccess => {
                return Err(DecodeError::WrongDirection {
                    expected: "request",
                })
            }
        };
        r.expect_end(req.name())?;
        Ok(req)
    }

    /// The message as a [`MessageBody`].
    fn inner(&self) -> &dyn MessageBody {
        match self {
            Request::Startup(m) => m,
            Request::Options(m) => m,
            Request::Query(m) => m,
            Request::Prepare(m) => m,
            Request::Execute(m) => m,
            Request::Batch(m) => m,
            Request::Register(m) => m,
            Request::AuthResponse(m) => m,
        }
    }

    /// The spec's name of the message (for errors and logs).
    pub fn name(&self) -> &'static str {
        match self {
            Request::Startup(_) => "STARTUP",
            Request::Options(_) => "OPTIONS",
            Request::Query(_) => "QUERY",
            Request::Prepare(_) => "PREPARE",
            Request::Execute(_) => "EXECUTE",
            Request::Batch(_) => "BATCH",
            Request::Register(_) => "REGISTER",
            Request::AuthResponse(_) => "AUTH_RESPONSE",
        }
    }
}

impl MessageBody for Request<'_> {
    fn opcode(&self) -> Opcode {
        self.inner().opcode()
    }

    fn encode_body(&self, buf: &mut BytesMut, version: ProtocolVersion) -> Result<(), EncodeError> {
        self.inner().encode_body(buf, version)
    }
}

#[cfg(test)]
mod layout_tests;
#[cfg(test)]
mod proptests;
