//! The public error catalogue.
//!
//! [`ExecutionError`] is what running a statement can fail with; its
//! variants can be matched (a server error with its code, a timeout, no
//! connection, a bad query, ...), its `Display` is meant for logs, and a
//! server error keeps the server's own message. [`NewSessionError`] is what
//! building a session can fail with.

use std::net::SocketAddr;
use std::time::Duration;

use scylla_cql::frame::response::error::DbError;

#[cfg(doc)]
use crate::cluster::control::ControlError;
use scylla_cql::types::{DeserializationError, SerializationError, TypeCheckError};

pub use crate::connection::{BrokenConnection, ConnectionError, RequestError};

/// Running a statement failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutionError {
    /// The server answered with an error (boxed: it is large, and errors
    /// travel through every `Result` of the driver).
    #[error(transparent)]
    Server(Box<ServerError>),
    /// No response within the statement's timeout.
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// No node could take the request (all down, or none connected yet).
    #[error("no connection available: {0}")]
    NoConnection(String),
    /// The connection broke while the request was in flight (and it was not
    /// retried: the statement is not idempotent, or the retry policy said no).
    #[error("connection to {node} failed: {error}")]
    Connection {
        /// The node.
        node: SocketAddr,
        /// What happened.
        error: RequestError,
    },
    /// The statement or its values are invalid on the client side.
    #[error("bad query: {0}")]
    BadQuery(String),
    /// The values could not be serialized for the statement's bind markers.
    #[error("serialization failed: {0}")]
    Serialization(#[from] SerializationError),
    /// The rows do not have the requested Rust type.
    #[error("type check failed: {0}")]
    TypeCheck(#[from] TypeCheckError),
    /// A value could not be deserialized.
    #[error("deserialization failed: {0}")]
    Deserialization(#[from] DeserializationError),
    /// The server sent something the protocol does not allow here.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The schema did not settle in time after DDL.
    #[error("schema agreement not reached within {0:?}")]
    SchemaAgreementTimeout(Duration),
    /// [`Session::execution_profile`](crate::Session::execution_profile)
    /// was asked for a name no profile was registered under.
    #[error("no execution profile named {0:?} is registered on the session")]
    UnknownExecutionProfile(String),
    /// The session's bound on requests in flight was reached and its queue
    /// of waiting requests was full: the request was not sent (safe to try
    /// again later). See [`SessionConfig::max_requests_in_flight`](crate::SessionConfig::max_requests_in_flight).
    #[error("overloaded: client queue full ({max_queued} requests already wait behind {max_in_flight} in flight)")]
    ClientOverloaded {
        /// The session's bound on requests in flight.
        max_in_flight: usize,
        /// The session's bound on queued requests.
        max_queued: usize,
    },
}

impl ExecutionError {
    /// The server's error, if the server answered with one.
    pub fn db_error(&self) -> Option<&DbError> {
        match self {
            ExecutionError::Server(e) => Some(&e.error),
            _ => None,
        }
    }

    pub(crate) fn server(error: DbError, message: String, node: SocketAddr) -> Self {
        ExecutionError::Server(Box::new(ServerError {
            error,
            message,
            node,
        }))
    }
}

/// An error answered by a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{node} answered: {error}: {message}")]
pub struct ServerError {
    /// The error, with its code ([`DbError::code`]) and details.
    pub error: DbError,
    /// The server's message, as sent.
    pub message: String,
    /// The node that answered.
    pub node: SocketAddr,
}

/// Building a session failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NewSessionError {
    /// No contact point was given.
    #[error("no contact points were given")]
    NoContactPoints,
    /// A contact point could not be resolved.
    #[error("cannot resolve contact point {contact_point:?}: {source}")]
    Resolve {
        /// The contact point as given.
        contact_point: String,
        /// The resolver's error.
        #[source]
        source: std::io::Error,
    },
    /// The control connection could not be established to any contact
    /// point: [`ControlError::Unreachable`] lists each contact point with
    /// its typed failure (refused, TLS, bad credentials as the server's
    /// `AuthenticationError`, ...).
    #[error("cannot connect to any contact point: {0}")]
    Control(#[source] crate::cluster::control::ControlError),
    /// Metadata could not be read.
    #[error("reading cluster metadata failed: {0}")]
    Metadata(String),
    /// `USE keyspace` failed.
    #[error("cannot use keyspace: {0}")]
    Keyspace(#[from] Box<ExecutionError>),
}
