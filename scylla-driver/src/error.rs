//! The public error catalogue, one type per operation, in the official
//! `scylla` crate's shapes (programs written for it match on the same
//! variants).
//!
//! | operation | error |
//! |---|---|
//! | building a session | [`NewSessionError`] |
//! | running a statement (query, execute, batch, a page of a stream) | [`ExecutionError`] |
//! | preparing a statement | [`PrepareError`] (inside an [`ExecutionError::PrepareError`] when a `query_*` call prepared implicitly) |
//! | waiting for schema agreement | [`SchemaAgreementError`] (inside an [`ExecutionError::SchemaAgreementError`] after DDL) |
//! | refreshing metadata, reading tablets | [`ControlError`] |
//!
//! A request that failed says how its **last attempt** failed
//! ([`ExecutionError::LastAttemptError`] with a [`RequestAttemptError`]: the
//! server's error code and message, a broken connection, ...), or that its
//! deadline passed ([`ExecutionError::RequestTimeout`]), or that the node it
//! reached last had no open connection ([`ExecutionError::ConnectionPoolError`],
//! with the error that node's last connection attempt failed with). The
//! earlier attempts of a request, each with its node, are told to a
//! [`HistoryListener`](crate::observability::history::HistoryListener) and
//! logged (`tracing`, level `debug`).
//!
//! Every variant is matched by its shape, never by its text. Causes are
//! reachable through [`std::error::Error::source`], and `Display` is one
//! line, meant for logs: it says what happened at its own level (and, for the
//! failures a user can fix, what to check) and never repeats the text of its
//! source, so a report that walks the chain (as anyhow's `{:#}` does) shows
//! every cause once.
//!
//! ```
//! use scylla_driver::errors::{DbError, ExecutionError, RequestAttemptError};
//!
//! /// What to do with a failed request.
//! fn describe(e: &ExecutionError) -> &'static str {
//!     match e {
//!         ExecutionError::RequestTimeout(_) => "slow: retry later if idempotent",
//!         ExecutionError::LastAttemptError(RequestAttemptError::DbError(DbError::SyntaxError, _)) => {
//!             "a syntax error: fix the statement"
//!         }
//!         ExecutionError::LastAttemptError(RequestAttemptError::DbError(_, _)) => "the server refused it",
//!         ExecutionError::ConnectionPoolError(_) => "no node reachable",
//!         _ => "other",
//!     }
//! }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use scylla_cql::frame::response::error::DbError;
use scylla_cql::{DecodeError, EncodeError};

#[doc(no_inline)]
pub use crate::cluster::control::ControlError;
use crate::cluster::MetadataError;
use crate::connection::Chain;
use scylla_cql::types::{DeserializationError, SerializationError, TypeCheckError};

pub use crate::connection::{BrokenConnection, ConnectionError, ConnectionRequestError};

/// Running a statement failed.
///
/// The first nine variants are the official crate's; the others are
/// failures it reports elsewhere or not at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutionError {
    /// The statement or its values are invalid on the client side (nothing
    /// was sent).
    #[error(transparent)]
    BadQuery(BadQuery),
    /// The load-balancing plan held no node for the request: a policy set
    /// on the session, a profile or the statement offered none, or the
    /// session knows no node. Nothing was sent. (The default plan leaves
    /// out only nodes that are down: when it has none left, the request
    /// fails with [`ExecutionError::ConnectionPoolError`].)
    #[error("the load-balancing plan held no node for the request (check the nodes, datacenters or filters the policy chooses by)")]
    EmptyPlan,
    /// A `query_*` call with values, or a batch, had to prepare its
    /// statement, and that failed.
    #[error(transparent)]
    PrepareError(PrepareError),
    /// The last node of the plan had no open connection: nothing was sent
    /// to it.
    #[error(transparent)]
    ConnectionPoolError(ConnectionPoolError),
    /// The last attempt of the request failed, and the retry policy did not
    /// try again (or the plan had no node left).
    #[error(transparent)]
    LastAttemptError(RequestAttemptError),
    /// No response within the request's deadline (the statement's timeout,
    /// or the stream's deadline for a page of a [`RowStream`](crate::session::RowStream)).
    #[error("no response within {0:?} (the request timeout: check the nodes' load, or raise `request_timeout` on the session, profile or statement)")]
    RequestTimeout(Duration),
    /// The connection the request went to could not be switched to the
    /// session's keyspace.
    #[error("switching the connection to the session's keyspace failed")]
    UseKeyspaceError(#[source] UseKeyspaceError),
    /// A schema change ran, but the nodes did not agree on the new schema
    /// (the change itself was applied by the coordinator).
    #[error("the schema change was applied, but the nodes did not confirm they agree on it")]
    SchemaAgreementError(#[source] SchemaAgreementError),
    /// Reading the cluster's metadata failed. Requests do not return it
    /// today (the official crate does, while awaiting schema agreement,
    /// which here is a [`SchemaAgreementError::Control`]); kept so that
    /// matches written for the official crate compile.
    #[error("reading the cluster's metadata failed")]
    MetadataError(#[source] MetadataError),
    /// The rows do not have the requested Rust type.
    #[error(transparent)]
    TypeCheck(#[from] TypeCheckError),
    /// A value could not be deserialized.
    #[error(transparent)]
    Deserialization(#[from] DeserializationError),
    /// A stream failed fetching a page after it had delivered earlier ones:
    /// retrying the whole query would repeat those rows; resume from
    /// [`RowStream::paging_state`](crate::session::RowStream::paging_state)
    /// instead.
    #[error(transparent)]
    Page(Box<PageError>),
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
    /// The session was closed ([`Session::close`](crate::Session::close)):
    /// the request was not sent.
    #[error("the session is closed (Session::close was called): the request was not sent")]
    SessionClosed,
    /// A state the driver's own invariants rule out (a bug in the driver:
    /// please report it with the message).
    #[error("internal error: {0}")]
    Internal(&'static str),
}

impl ExecutionError {
    /// The server's error, if a node answered with one (also when a
    /// preparation made for this request failed, or a page of a stream).
    pub fn db_error(&self) -> Option<&DbError> {
        match self {
            ExecutionError::LastAttemptError(e) => e.db_error(),
            ExecutionError::PrepareError(e) => e.db_error(),
            ExecutionError::UseKeyspaceError(e) => e.db_error(),
            ExecutionError::Page(p) => p.source.db_error(),
            _ => None,
        }
    }

    /// Whether the request ran out of time (also for a page of a stream).
    pub fn is_timeout(&self) -> bool {
        match self {
            ExecutionError::RequestTimeout(_) => true,
            ExecutionError::Page(p) => p.source.is_timeout(),
            _ => false,
        }
    }

    /// The request's final error when its last attempt failed with `error`
    /// (a deadline that cut the attempt short is the request's timeout,
    /// `timeout`).
    pub(crate) fn last_attempt(error: RequestAttemptError, timeout: Duration) -> Self {
        match error {
            RequestAttemptError::Timeout(_) => ExecutionError::RequestTimeout(timeout),
            e => ExecutionError::LastAttemptError(e),
        }
    }
}

impl From<PrepareError> for ExecutionError {
    fn from(e: PrepareError) -> Self {
        ExecutionError::PrepareError(e)
    }
}

impl From<BadQuery> for ExecutionError {
    fn from(e: BadQuery) -> Self {
        ExecutionError::BadQuery(e)
    }
}

impl From<SerializationError> for ExecutionError {
    fn from(e: SerializationError) -> Self {
        ExecutionError::BadQuery(BadQuery::SerializationError(e))
    }
}

impl From<RequestAttemptError> for ExecutionError {
    fn from(e: RequestAttemptError) -> Self {
        ExecutionError::LastAttemptError(e)
    }
}

impl From<ConnectionPoolError> for ExecutionError {
    fn from(e: ConnectionPoolError) -> Self {
        ExecutionError::ConnectionPoolError(e)
    }
}

impl From<UseKeyspaceError> for ExecutionError {
    fn from(e: UseKeyspaceError) -> Self {
        ExecutionError::UseKeyspaceError(e)
    }
}

impl From<SchemaAgreementError> for ExecutionError {
    fn from(e: SchemaAgreementError) -> Self {
        ExecutionError::SchemaAgreementError(e)
    }
}

impl From<RequestError> for ExecutionError {
    fn from(e: RequestError) -> Self {
        match e {
            RequestError::EmptyPlan => ExecutionError::EmptyPlan,
            RequestError::ConnectionPoolError(e) => ExecutionError::ConnectionPoolError(e),
            RequestError::RequestTimeout(d) => ExecutionError::RequestTimeout(d),
            RequestError::LastAttemptError(e) => ExecutionError::LastAttemptError(e),
        }
    }
}

/// How running a request over its plan failed: the part of an
/// [`ExecutionError`] that is about the plan's nodes and attempts (the
/// official crate's name and shape).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The load-balancing plan held no node.
    #[error("the load-balancing plan held no node for the request (check the nodes, datacenters or filters the policy chooses by)")]
    EmptyPlan,
    /// The last node of the plan had no open connection.
    #[error(transparent)]
    ConnectionPoolError(#[from] ConnectionPoolError),
    /// No response within the request's deadline.
    #[error("no response within {0:?} (the request timeout: check the nodes' load, or raise `request_timeout` on the session, profile or statement)")]
    RequestTimeout(Duration),
    /// The last attempt failed.
    #[error(transparent)]
    LastAttemptError(#[from] RequestAttemptError),
}

impl RequestError {
    /// As an [`ExecutionError`].
    pub fn into_execution_error(self) -> ExecutionError {
        self.into()
    }
}

/// A node of the plan had no open connection to take the request.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionPoolError {
    /// The node's connections are down; its last connection attempt failed
    /// with `last_connection_error` (the pool keeps trying, backing off).
    #[error("the node has no open connection (its last connection attempt failed; check that it is up and reachable from this host)")]
    Broken {
        /// How the node's last connection attempt failed.
        #[source]
        last_connection_error: Arc<ConnectionError>,
    },
    /// The node's pool has not opened a connection yet, and none of its
    /// attempts failed so far.
    #[error("the node's connections are still being opened")]
    Initializing,
    /// The node is excluded by the session's host filter.
    #[error("the node is excluded by the session's host filter")]
    NodeDisabledByHostFilter,
}

impl ConnectionPoolError {
    /// A pool's error, from how its latest connection attempt failed.
    pub(crate) fn from_last(last: Option<Arc<ConnectionError>>) -> Self {
        match last {
            Some(last_connection_error) => ConnectionPoolError::Broken {
                last_connection_error,
            },
            None => ConnectionPoolError::Initializing,
        }
    }
}

/// How one attempt of a request failed (the official crate's shape): what
/// [`ExecutionError::LastAttemptError`] carries, and what
/// [`HistoryListener`](crate::observability::history::HistoryListener)s and
/// [`LoadBalancingPolicy::on_request_failure`](crate::policies::load_balancing::LoadBalancingPolicy::on_request_failure)
/// are told of each failed attempt.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RequestAttemptError {
    /// The values could not be serialized for the statement (nothing was
    /// sent).
    #[error(transparent)]
    SerializationError(SerializationError),
    /// The request could not be encoded for the connection (nothing was
    /// sent).
    #[error("the request could not be encoded")]
    CqlRequestSerialization(#[source] EncodeError),
    /// Every stream id of the connection was in use.
    #[error("every stream id of the connection was in use")]
    UnableToAllocStreamId,
    /// The connection failed: before the request was written (then the
    /// server did not see it: [`BrokenConnectionError::is_not_sent`]), or
    /// while it was in flight.
    #[error(transparent)]
    BrokenConnectionError(BrokenConnectionError),
    /// The response's frame extensions (tracing id, warnings, custom
    /// payload) were malformed.
    #[error("the response's frame extensions were malformed")]
    BodyExtensionsParseError(#[source] DecodeError),
    /// A RESULT response was malformed.
    #[error("the RESULT response was malformed")]
    CqlResultParseError(#[source] DecodeError),
    /// An ERROR response was malformed.
    #[error("the ERROR response was malformed")]
    CqlErrorParseError(#[source] DecodeError),
    /// The node answered with an error: its code and details (the replicas
    /// required and alive of an `Unavailable`, say), and its message as
    /// sent.
    #[error("the node answered {0}: {1}")]
    DbError(DbError, String),
    /// The node answered with a message the protocol does not allow for the
    /// request.
    #[error(transparent)]
    UnexpectedResponse(UnexpectedResponse),
    /// A statement prepared again got another id than before.
    #[error("preparing {statement:?} again gave another id")]
    RepreparedIdChanged {
        /// The statement's text.
        statement: String,
        /// The id it had.
        expected_id: Vec<u8>,
        /// The id it got.
        reprepared_id: Vec<u8>,
    },
    /// A node forgot a statement of a batch, and the batch does not hold
    /// its text to prepare it again.
    #[error("a statement of the batch is unknown to the node and cannot be prepared again")]
    RepreparedIdMissingInBatch,
    /// A request that must fit one page got a paging state back.
    #[error("the result has more pages than the request reads")]
    NonfinishedPagingState,
    /// The request's deadline passed while this attempt waited (a request
    /// that ends so fails with [`ExecutionError::RequestTimeout`]; this is
    /// what history listeners and policies are told of the attempt).
    #[error("no response within {0:?}")]
    Timeout(Duration),
}

impl PartialEq for RequestAttemptError {
    /// Equal when of the same variant with the same server error and
    /// message, or (for the others, whose I/O causes do not compare) the
    /// same text through their whole chain of causes.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (RequestAttemptError::DbError(a, m), RequestAttemptError::DbError(b, n)) => {
                a == b && m == n
            }
            _ => {
                std::mem::discriminant(self) == std::mem::discriminant(other)
                    && Chain(self).to_string() == Chain(other).to_string()
            }
        }
    }
}

impl RequestAttemptError {
    /// The server's error, if the node answered with one.
    pub fn db_error(&self) -> Option<&DbError> {
        match self {
            RequestAttemptError::DbError(e, _) => Some(e),
            _ => None,
        }
    }
}

impl From<ConnectionRequestError> for RequestAttemptError {
    fn from(e: ConnectionRequestError) -> Self {
        match e {
            ConnectionRequestError::Timeout(d) => RequestAttemptError::Timeout(d),
            ConnectionRequestError::Encode(e) => RequestAttemptError::CqlRequestSerialization(e),
            e @ (ConnectionRequestError::NotSent(_) | ConnectionRequestError::Broken(_)) => {
                RequestAttemptError::BrokenConnectionError(BrokenConnectionError(e))
            }
        }
    }
}

/// A request's connection failed (the official crate's name): how, through
/// [`source`](std::error::Error::source) and [`Self::get_inner`].
#[derive(Debug, Clone, thiserror::Error)]
#[error("the request's connection failed")]
pub struct BrokenConnectionError(#[source] ConnectionRequestError);

impl BrokenConnectionError {
    /// How the connection failed.
    pub fn get_inner(&self) -> &ConnectionRequestError {
        &self.0
    }

    /// Whether the request never reached the socket (the server did not see
    /// it, so retrying it is safe, idempotent or not).
    pub fn is_not_sent(&self) -> bool {
        self.0.is_not_sent()
    }
}

/// Switching a connection to the session's keyspace failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum UseKeyspaceError {
    /// The `USE` request failed (the server refused it, say: the keyspace
    /// was dropped).
    #[error("the USE request failed")]
    RequestError(#[source] RequestAttemptError),
    /// No response to `USE` within the request's deadline.
    #[error("no response to USE within {0:?}")]
    RequestTimeout(Duration),
}

impl UseKeyspaceError {
    /// The server's error, if the node refused the `USE`.
    pub fn db_error(&self) -> Option<&DbError> {
        match self {
            UseKeyspaceError::RequestError(e) => e.db_error(),
            UseKeyspaceError::RequestTimeout(_) => None,
        }
    }
}

/// A page of a stream could not be fetched (after earlier pages were).
#[derive(Debug, thiserror::Error)]
#[error("fetching page {page} of the stream failed (resume from the stream's paging state to avoid repeating rows)")]
#[non_exhaustive]
pub struct PageError {
    /// The page that failed (1 is the second page of the stream).
    pub page: usize,
    /// Why.
    #[source]
    pub source: ExecutionError,
}

impl PageError {
    pub(crate) fn new(page: usize, source: ExecutionError) -> Self {
        PageError { page, source }
    }
}

/// A statement or its values are invalid on the client side.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BadQuery {
    /// The values could not be serialized for the statement's bind markers.
    #[error(transparent)]
    SerializationError(SerializationError),
    /// A batch was given another number of value lists than it has
    /// statements.
    #[error("the batch has {statements} statements but {value_lists} value lists were given")]
    BatchValuesCount {
        /// Statements in the batch.
        statements: usize,
        /// Value lists given.
        value_lists: usize,
    },
    /// A [`BatchValues`](crate::BatchValues) implementation has no row for a
    /// statement although its length says it has.
    #[error("the batch's values have no row for statement {0}")]
    BatchValuesMissing(usize),
    /// Rows were asked of a result that has none (not a SELECT).
    #[error("the statement returned no rows (it is not a SELECT)")]
    NoRows,
    /// [`QueryResult::single_row`](crate::QueryResult::single_row) found
    /// another number of rows.
    #[error("expected exactly one row, got {0}")]
    NotOneRow(usize),
    /// The request cannot be written for the connection's protocol (a
    /// v5-only option on v4, say).
    #[error("{0}")]
    Unsupported(&'static str),
}

/// A node answered with a message the protocol does not allow for the
/// request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{node} answered {request} with an unexpected {response} message")]
#[non_exhaustive]
pub struct UnexpectedResponse {
    /// The node.
    pub node: SocketAddr,
    /// The request (`"PREPARE"`, `"USE"`, ...).
    pub request: &'static str,
    /// The response it sent (`"READY"`, ...).
    pub response: &'static str,
}

impl UnexpectedResponse {
    pub(crate) fn new(node: SocketAddr, request: &'static str, response: &'static str) -> Self {
        UnexpectedResponse {
            node,
            request,
            response,
        }
    }
}

/// Preparing a statement failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrepareError {
    /// No node had an open connection (the first node's pool says why).
    #[error(transparent)]
    ConnectionPoolError(ConnectionPoolError),
    /// No node prepared the statement: a node refused it (a syntax error, an
    /// unknown table, ...: the same everywhere, so the other nodes were not
    /// waited for), or every node failed (connections broken, timeouts,
    /// ...; the other nodes' failures are logged). `first_attempt` is the
    /// first failure.
    #[error("preparing failed")]
    AllAttemptsFailed {
        /// The first node's failure.
        #[source]
        first_attempt: RequestAttemptError,
    },
    /// Switching a connection to the session's keyspace before the PREPARE
    /// failed.
    #[error("preparing failed: switching the connection to the session's keyspace failed")]
    UseKeyspaceError(#[source] UseKeyspaceError),
    /// The session was closed ([`Session::close`](crate::Session::close)):
    /// nothing was sent.
    #[error("the session is closed (Session::close was called): nothing was prepared")]
    SessionClosed,
    /// A state the driver's invariants rule out (a bug in the driver).
    #[error("preparing failed: internal error: {0}")]
    Internal(&'static str),
}

impl PrepareError {
    /// The server's error, if a node refused the statement.
    pub fn db_error(&self) -> Option<&DbError> {
        match self {
            PrepareError::AllAttemptsFailed { first_attempt } => first_attempt.db_error(),
            PrepareError::UseKeyspaceError(e) => e.db_error(),
            _ => None,
        }
    }
}

/// Waiting for the nodes to agree on the schema failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaAgreementError {
    /// The nodes did not report one schema version within the timeout
    /// (`SessionConfig::schema_agreement_timeout`).
    #[error("schema agreement not reached within {0:?}")]
    Timeout(Duration),
    /// The control connection could not read the nodes' schema versions.
    #[error("the nodes' schema versions could not be read")]
    Control(#[source] ControlError),
}

/// Building a session failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NewSessionError {
    /// No contact point was given.
    #[error("no contact points were given")]
    EmptyKnownNodesList,
    /// A contact point could not be resolved.
    #[error("cannot resolve contact point {contact_point:?}: check the host name")]
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
    #[error(transparent)]
    Control(ControlError),
    /// `USE keyspace` failed.
    #[error("cannot use the session's keyspace (check that it exists)")]
    Keyspace(#[from] Box<ExecutionError>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::BrokenReason;

    #[test]
    fn a_deadline_that_cut_the_last_attempt_is_the_requests_timeout() {
        let ms = Duration::from_millis(300);
        let e = ExecutionError::last_attempt(
            RequestAttemptError::from(ConnectionRequestError::Timeout(Duration::from_millis(20))),
            ms,
        );
        assert!(
            matches!(e, ExecutionError::RequestTimeout(d) if d == ms),
            "{e:?}"
        );
        assert!(e.is_timeout());
        let text = e.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(
            text.starts_with("no response within 300ms (the request timeout"),
            "{text}"
        );
        let e = ExecutionError::last_attempt(
            RequestAttemptError::DbError(DbError::Overloaded, "busy".into()),
            ms,
        );
        assert!(
            matches!(&e, ExecutionError::LastAttemptError(RequestAttemptError::DbError(DbError::Overloaded, m)) if m == "busy"),
            "{e:?}"
        );
        assert_eq!(e.db_error(), Some(&DbError::Overloaded));
    }

    #[test]
    fn connection_failures_keep_whether_the_request_was_sent() {
        let not_sent = RequestAttemptError::from(ConnectionRequestError::NotSent(
            BrokenConnection(Arc::new(BrokenReason::Closed)),
        ));
        let RequestAttemptError::BrokenConnectionError(b) = &not_sent else {
            panic!("{not_sent:?}")
        };
        assert!(b.is_not_sent());
        let broken = RequestAttemptError::from(ConnectionRequestError::Broken(BrokenConnection(
            Arc::new(BrokenReason::ClosedByPeer),
        )));
        let RequestAttemptError::BrokenConnectionError(b) = &broken else {
            panic!("{broken:?}")
        };
        assert!(!b.is_not_sent());
        assert!(matches!(b.get_inner(), ConnectionRequestError::Broken(_)));
    }

    #[test]
    fn sources_chain_to_the_cause() {
        use std::error::Error as _;
        let e = ExecutionError::Page(Box::new(PageError::new(
            1,
            ExecutionError::from(PrepareError::AllAttemptsFailed {
                first_attempt: RequestAttemptError::DbError(DbError::SyntaxError, "line 1".into()),
            }),
        )));
        let inner = e.source().expect("page -> execution error");
        assert!(
            matches!(
                inner.downcast_ref::<ExecutionError>(),
                Some(ExecutionError::PrepareError(
                    PrepareError::AllAttemptsFailed { .. }
                ))
            ),
            "{inner:?}"
        );
        // A prepare error inside an execution error is transparent: it
        // displays as itself, and the page's text does not repeat it.
        assert!(inner.to_string().starts_with("preparing failed"), "{inner}");
        assert!(!e.to_string().contains(&inner.to_string()), "{e}");
        let cause = inner.source().expect("prepare -> its first attempt");
        assert_eq!(
            cause.to_string(),
            format!("the node answered {}: line 1", DbError::SyntaxError)
        );
        // The error stays small: it travels through every `Result` (the
        // largest variants hold a server error with its message: the
        // official shapes, unboxed).
        let size = std::mem::size_of::<ExecutionError>();
        assert!(size <= 120, "{size}");
        assert_eq!(e.db_error(), Some(&DbError::SyntaxError));
    }
}
