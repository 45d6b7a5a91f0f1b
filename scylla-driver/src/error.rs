//! The public error catalogue, one type per operation.
//!
//! | operation | error |
//! |---|---|
//! | building a session | [`NewSessionError`] |
//! | running a statement (query, execute, batch, a page of a stream) | [`ExecutionError`] |
//! | preparing a statement | [`PrepareError`] (inside an [`ExecutionError::Prepare`] when a `query_*` call prepared implicitly) |
//! | waiting for schema agreement | [`SchemaAgreementError`] (inside an [`ExecutionError::SchemaAgreement`] after DDL) |
//! | refreshing metadata, reading tablets | [`ControlError`] |
//!
//! Every variant is matched by its shape, never by its text: a server error
//! keeps the node that answered, the server's code ([`ServerError::code`])
//! and its message as data; a failed execution lists the earlier attempts
//! it made ([`ExecutionError::attempts`]), each with its node and error.
//! Causes are reachable through [`std::error::Error::source`], and
//! `Display` is one line, meant for logs: it says what happened at its own
//! level (and, for the failures a user can fix, what to check) and never
//! repeats the text of its source, so a report that walks the chain (as
//! anyhow's `{:#}` does) shows every cause once. Lists of failures (the
//! attempts of a request, the contact points tried) are data rather than
//! one cause: they are displayed inline, each with its full chain.
//!
//! ```
//! use scylla_driver::ExecutionError;
//!
//! /// What to do with a failed request.
//! fn describe(e: &ExecutionError) -> &'static str {
//!     match e {
//!         ExecutionError::Timeout { .. } => "slow: retry later if idempotent",
//!         ExecutionError::Server(s) if s.code() == 0x2000 => "a syntax error: fix the statement",
//!         ExecutionError::Server(_) => "the server refused it",
//!         ExecutionError::NoConnection { .. } => "no node reachable",
//!         _ => "other",
//!     }
//! }
//! ```

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use scylla_cql::frame::response::error::DbError;

pub use crate::cluster::control::ControlError;
use scylla_cql::types::{DeserializationError, SerializationError, TypeCheckError};

pub use crate::connection::{BrokenConnection, ConnectionError, RequestError};

/// Running a statement failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutionError {
    /// The server answered with an error (boxed: it is large, and errors
    /// travel through every `Result` of the driver). The earlier attempts
    /// of the request are in [`ServerError::attempts`].
    #[error(transparent)]
    Server(Box<ServerError>),
    /// No response within the request's deadline (the statement's timeout,
    /// or the stream's deadline for a page of a [`RowStream`](crate::session::RowStream)).
    #[error("{}", TimeoutText(*.timeout, .attempts))]
    Timeout {
        /// The timeout that ran out.
        timeout: Duration,
        /// The request's attempts, oldest first: those that failed before
        /// the deadline and, last, the one it cut short while waiting on a
        /// node (its error a [`RequestError::Timeout`]; the text names that
        /// node as where no response came from).
        attempts: Attempts,
    },
    /// No node could take the request: all down, none connected yet, or
    /// every node of the plan was tried. `attempts` lists each node tried
    /// and why it could not take the request.
    #[error("no node could take the request (check that the nodes are up and reachable from this host){attempts}")]
    NoConnection {
        /// Each node tried and how it failed (empty when the plan had no
        /// node at all).
        attempts: Attempts,
    },
    /// The statement's load-balancing policy offered no node for the
    /// request (neither [`pick`](crate::policies::load_balancing::LoadBalancingPolicy::pick)
    /// nor its fallback): nothing was sent.
    #[error("the load-balancing policy offered no node for the request (check the nodes, datacenters or filters it chooses by)")]
    EmptyPlan,
    /// The connection broke while the request was in flight (and it was not
    /// retried: the statement is not idempotent, or the retry policy said no).
    #[error("the request to {node} failed on its connection{attempts}")]
    Connection {
        /// The node.
        node: SocketAddr,
        /// What happened.
        #[source]
        error: RequestError,
        /// The attempts before this one.
        attempts: Attempts,
    },
    /// The statement or its values are invalid on the client side.
    #[error(transparent)]
    BadQuery(BadQuery),
    /// The values could not be serialized for the statement's bind markers.
    #[error(transparent)]
    Serialization(#[from] SerializationError),
    /// The rows do not have the requested Rust type.
    #[error(transparent)]
    TypeCheck(#[from] TypeCheckError),
    /// A value could not be deserialized.
    #[error(transparent)]
    Deserialization(#[from] DeserializationError),
    /// A node sent a response the protocol does not allow here.
    #[error(transparent)]
    Protocol(UnexpectedResponse),
    /// A `query_*` call with values, or a batch, had to prepare its
    /// statement, and that failed.
    #[error(transparent)]
    Prepare(PrepareError),
    /// A stream failed fetching a page after it had delivered earlier ones:
    /// retrying the whole query would repeat those rows; resume from
    /// [`RowStream::paging_state`](crate::session::RowStream::paging_state)
    /// instead.
    #[error(transparent)]
    Page(Box<PageError>),
    /// A schema change ran, but the nodes did not agree on the new schema
    /// (the change itself was applied by the coordinator).
    #[error("the schema change was applied, but the nodes did not confirm they agree on it")]
    SchemaAgreement(#[source] SchemaAgreementError),
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
        self.server_error().map(|e| &e.error)
    }

    /// The node's error answer, with its node, code and message, if a node
    /// answered with one (looking into [`Prepare`](Self::Prepare) and
    /// [`Page`](Self::Page)).
    pub fn server_error(&self) -> Option<&ServerError> {
        match self {
            ExecutionError::Server(e) => Some(e),
            ExecutionError::Prepare(PrepareError::Server(e)) => Some(e),
            ExecutionError::Page(p) => p.source.server_error(),
            _ => None,
        }
    }

    /// The failed attempts that came before this error, oldest first (empty
    /// when the request failed on its first attempt, or before any).
    pub fn attempts(&self) -> &[Attempt] {
        match self {
            ExecutionError::Server(e) => &e.attempts,
            ExecutionError::Timeout { attempts, .. }
            | ExecutionError::NoConnection { attempts }
            | ExecutionError::Connection { attempts, .. } => attempts,
            ExecutionError::Page(p) => p.source.attempts(),
            _ => &[],
        }
    }

    /// Whether the request ran out of time (also for a page of a stream).
    pub fn is_timeout(&self) -> bool {
        match self {
            ExecutionError::Timeout { .. } => true,
            ExecutionError::Page(p) => p.source.is_timeout(),
            _ => false,
        }
    }

    pub(crate) fn server(error: DbError, message: String, node: SocketAddr) -> Self {
        ExecutionError::Server(Box::new(ServerError::new(error, message, node)))
    }

    pub(crate) fn timeout(timeout: Duration, attempts: Vec<Attempt>) -> Self {
        ExecutionError::Timeout {
            timeout,
            attempts: Attempts::from(attempts),
        }
    }

    /// The request's final error: `error`, the last attempt's failure on
    /// `node`, after `earlier` failed attempts.
    pub(crate) fn from_attempt(
        node: SocketAddr,
        error: AttemptError,
        earlier: Vec<Attempt>,
    ) -> Self {
        match error {
            AttemptError::Server { error, message } => {
                ExecutionError::Server(Box::new(ServerError {
                    attempts: Attempts::from(earlier),
                    ..ServerError::new(error, message, node)
                }))
            }
            AttemptError::Connection(error) => ExecutionError::Connection {
                node,
                error,
                attempts: Attempts::from(earlier),
            },
            AttemptError::NoConnection => {
                let mut all = earlier;
                all.push(Attempt {
                    node,
                    error: AttemptError::NoConnection,
                });
                ExecutionError::NoConnection {
                    attempts: Attempts::from(all),
                }
            }
        }
    }
}

impl From<PrepareError> for ExecutionError {
    fn from(e: PrepareError) -> Self {
        ExecutionError::Prepare(e)
    }
}

impl From<BadQuery> for ExecutionError {
    fn from(e: BadQuery) -> Self {
        ExecutionError::BadQuery(e)
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

/// An error answered by a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{node} answered: {error}: {message}{attempts}")]
#[non_exhaustive]
pub struct ServerError {
    /// The error, with its code ([`DbError::code`]) and details (the
    /// replicas required and alive of an `Unavailable`, say).
    pub error: DbError,
    /// The server's message, as sent.
    pub message: String,
    /// The node that answered (the coordinator).
    pub node: SocketAddr,
    /// The failed attempts of the same request before this answer.
    pub attempts: Attempts,
}

impl ServerError {
    pub(crate) fn new(error: DbError, message: String, node: SocketAddr) -> Self {
        ServerError {
            error,
            message,
            node,
            attempts: Attempts::default(),
        }
    }

    /// The protocol's error code (`0x1000` for Unavailable, ...).
    pub fn code(&self) -> i32 {
        self.error.code()
    }
}

/// Displays an error and each of its sources, joined by `": "` (as
/// anyhow's `{:#}` does): for the errors a list holds (the attempts of a
/// request, the contact points tried), whose causes no `source()` reaches.
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        // Bounded: a cyclic chain would be a bug, not a reason to hang.
        for _ in 0..16 {
            let Some(e) = next else { break };
            write!(f, ": {e}")?;
            next = e.source();
        }
        Ok(())
    }
}

/// One failed attempt of a request: where it went and how it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// The node the attempt went to.
    pub node: SocketAddr,
    /// How it failed.
    pub error: AttemptError,
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.node, Chain(&self.error))
    }
}

/// How one attempt failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AttemptError {
    /// The node answered with an error.
    #[error("{error}: {message}")]
    Server {
        /// The error, with its code.
        error: DbError,
        /// The server's message.
        message: String,
    },
    /// The request failed on its connection (broke, timed out, ...).
    #[error(transparent)]
    Connection(RequestError),
    /// The node had no open connection: nothing was sent.
    #[error("no open connection")]
    NoConnection,
}

impl PartialEq for AttemptError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (
                AttemptError::Server { error, message },
                AttemptError::Server {
                    error: e2,
                    message: m2,
                },
            ) => error == e2 && message == m2,
            // Connection errors carry I/O errors, which do not compare:
            // equal when they display the same.
            (AttemptError::Connection(a), AttemptError::Connection(b)) => {
                a.to_string() == b.to_string()
            }
            (AttemptError::NoConnection, AttemptError::NoConnection) => true,
            _ => false,
        }
    }
}

impl Eq for AttemptError {}

/// The failed attempts of a request, oldest first. Costs one pointer and
/// allocates nothing while empty (a request that succeeds at once never
/// records any); dereferences to `[Attempt]`. Displays as
/// `" (after: node: error; ...)"`, or nothing when empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
// Boxed on purpose: one thin pointer in every error instead of a Vec's
// three words (or a boxed slice's two); only failures allocate it.
#[allow(clippy::box_collection)]
pub struct Attempts(Option<Box<Vec<Attempt>>>);

impl From<Vec<Attempt>> for Attempts {
    fn from(v: Vec<Attempt>) -> Self {
        Attempts((!v.is_empty()).then(|| Box::new(v)))
    }
}

impl std::ops::Deref for Attempts {
    type Target = [Attempt];

    fn deref(&self) -> &[Attempt] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}

impl fmt::Display for Attempts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_attempts(f, self)
    }
}

/// `" (after: node: error; ...)"`, or nothing for no attempts.
fn write_attempts(f: &mut fmt::Formatter<'_>, attempts: &[Attempt]) -> fmt::Result {
    if attempts.is_empty() {
        return Ok(());
    }
    f.write_str(" (after: ")?;
    for (i, a) in attempts.iter().enumerate() {
        if i > 0 {
            f.write_str("; ")?;
        }
        write!(f, "{a}")?;
    }
    f.write_str(")")
}

/// [`ExecutionError::Timeout`]'s text: the attempt the deadline cut short
/// (if it was waiting on a node) is named once, as where no response came
/// from, rather than listed with its own "no response within" text; the
/// attempts that failed before it follow as usual.
struct TimeoutText<'a>(Duration, &'a Attempts);

impl fmt::Display for TimeoutText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let TimeoutText(timeout, attempts) = *self;
        let (waiting_on, earlier) = match attempts.split_last() {
            Some((last, earlier))
                if matches!(
                    last.error,
                    AttemptError::Connection(RequestError::Timeout(_))
                ) =>
            {
                (Some(last.node), earlier)
            }
            _ => (None, &attempts[..]),
        };
        write!(f, "no response within {timeout:?}")?;
        if let Some(node) = waiting_on {
            write!(f, " from {node}")?;
        }
        f.write_str(
            " (the request timeout: check the nodes' load, or raise `request_timeout` on the session, profile or statement)",
        )?;
        write_attempts(f, earlier)
    }
}

/// A statement or its values are invalid on the client side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadQuery {
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
    /// A node refused the statement (a syntax error, an unknown table, ...:
    /// the same everywhere, so the other nodes were not waited for).
    #[error("preparing refused: {0}")]
    Server(Box<ServerError>),
    /// No node had an open connection.
    #[error("preparing failed: no node is connected")]
    NoConnection,
    /// Every node tried failed (connections broken, timeouts, ...): each
    /// with its node and error.
    #[error("preparing failed on every node{attempts}")]
    AllNodesFailed {
        /// Each node and its failure.
        attempts: Attempts,
    },
    /// Switching a connection to the session's keyspace before the PREPARE
    /// failed.
    #[error("preparing failed: switching the connection to the session's keyspace failed")]
    Keyspace(#[source] Box<ExecutionError>),
    /// A node answered PREPARE with another message.
    #[error(transparent)]
    Protocol(UnexpectedResponse),
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
            PrepareError::Server(e) => Some(&e.error),
            PrepareError::Keyspace(e) => e.db_error(),
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
    NoContactPoints,
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

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, last], 9042))
    }

    #[test]
    fn attempts_cost_a_pointer_and_display_on_one_line() {
        assert_eq!(
            std::mem::size_of::<Attempts>(),
            std::mem::size_of::<usize>()
        );
        let e = ExecutionError::from_attempt(
            addr(2),
            AttemptError::Server {
                error: DbError::Overloaded,
                message: "busy".into(),
            },
            vec![Attempt {
                node: addr(1),
                error: AttemptError::NoConnection,
            }],
        );
        let text = e.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.starts_with("127.0.0.2:9042 answered"), "{text}");
        assert!(
            text.ends_with("(after: 127.0.0.1:9042: no open connection)"),
            "{text}"
        );
        assert_eq!(e.attempts().len(), 1);
        assert_eq!(e.server_error().map(|s| s.node), Some(addr(2)));
        // The last attempt of an exhausted plan without connections is
        // listed too.
        let e = ExecutionError::from_attempt(addr(3), AttemptError::NoConnection, Vec::new());
        assert!(
            matches!(&e, ExecutionError::NoConnection { attempts } if attempts[0].node == addr(3)),
            "{e:?}"
        );
    }

    #[test]
    fn a_timeout_names_the_node_it_waited_on_once() {
        let ms = Duration::from_millis(300);
        let cut = Attempt {
            node: addr(2),
            error: AttemptError::Connection(RequestError::Timeout(ms)),
        };
        let refused = Attempt {
            node: addr(1),
            error: AttemptError::NoConnection,
        };
        let text = ExecutionError::timeout(ms, vec![refused.clone(), cut.clone()]).to_string();
        assert_eq!(text.matches("no response within").count(), 1, "{text}");
        assert!(
            text.starts_with("no response within 300ms from 127.0.0.2:9042 (the request timeout"),
            "{text}"
        );
        assert!(
            text.ends_with("(after: 127.0.0.1:9042: no open connection)"),
            "{text}"
        );
        // Cut short while between attempts (a retry's pause): no node named.
        let text = ExecutionError::timeout(ms, vec![refused]).to_string();
        assert!(
            text.starts_with("no response within 300ms (the request timeout"),
            "{text}"
        );
        assert!(text.ends_with("(after: 127.0.0.1:9042: no open connection)"));
        let text = ExecutionError::timeout(ms, Vec::new()).to_string();
        assert!(text.ends_with("statement)"), "{text}");
    }

    #[test]
    fn sources_chain_to_the_cause() {
        use std::error::Error as _;
        let e = ExecutionError::Page(Box::new(PageError::new(
            1,
            ExecutionError::from(PrepareError::Server(Box::new(ServerError::new(
                DbError::SyntaxError,
                "line 1".into(),
                addr(1),
            )))),
        )));
        let inner = e.source().expect("page -> execution error");
        assert!(
            matches!(
                inner.downcast_ref::<ExecutionError>(),
                Some(ExecutionError::Prepare(PrepareError::Server(_)))
            ),
            "{inner:?}"
        );
        // A prepare error inside an execution error is transparent: it
        // displays as itself, and the page's text does not repeat it.
        assert!(
            inner.to_string().starts_with("preparing refused"),
            "{inner}"
        );
        assert!(!e.to_string().contains(&inner.to_string()), "{e}");
        // The error stays small: it travels through every `Result` (the
        // largest variant is a connection error with its node).
        let size = std::mem::size_of::<ExecutionError>();
        assert!(size <= 112, "{size}");
        assert_eq!(e.db_error(), Some(&DbError::SyntaxError));
    }
}
