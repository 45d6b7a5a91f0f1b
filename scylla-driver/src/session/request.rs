//! What every request of the session carries: where it should go
//! ([`RoutingInfo`]), how it runs ([`RunOptions`]), and the answer it comes
//! back with ([`Answer`]). The request path (`execute`) takes and returns
//! them; the session's shared state (`inner`) resolves and reads them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_cql::token::Token;
use scylla_cql::Consistency;

use crate::cluster::state::PooledNode;
use crate::connection::ResponseFrame;
use crate::history::HistoryListener;
use crate::policy::load_balancing::LoadBalancingPolicy;
use crate::policy::retry::RetryPolicy;
use crate::policy::speculative::SpeculativeExecution;
use crate::routing::{KeyspaceId, TabletTable};

/// Where a request should go.
#[derive(Debug, Clone, Default)]
pub(crate) struct RoutingInfo<'a> {
    pub(crate) keyspace: Option<KeyspaceId>,
    pub(crate) token: Option<Token>,
    pub(crate) lwt: bool,
    /// The statement's table's tablet slot (resolved when prepared).
    /// Borrowed: a reference count bumped by every request from every
    /// worker thread is a cache line they pass between them.
    pub(crate) tablets: Option<&'a TabletTable>,
}

/// How a request runs (resolved from the statement, its execution profile
/// and the session defaults).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunOptions<'a> {
    pub(crate) consistency: Consistency,
    pub(crate) idempotent: bool,
    pub(crate) timeout: Duration,
    /// A deadline set before the request started (a stream's, covering all
    /// its pages): the request ends by the earlier of it and `timeout`.
    pub(crate) deadline: Option<Instant>,
    pub(crate) tracing: bool,
    pub(crate) retry_policy: &'a dyn RetryPolicy,
    pub(crate) speculative: Option<SpeculativeExecution>,
    /// The serial consistency, for a user's load-balancing policy.
    pub(crate) serial_consistency: Option<Consistency>,
    /// The statement's or its profile's load-balancing policy (`None`: the
    /// session's routing, unchanged).
    /// (A thin reference: these options are copied into request futures.)
    pub(crate) load_balancing: Option<&'a Arc<dyn LoadBalancingPolicy>>,
    /// The statement's history listener, told of the request's start and
    /// end, its attempts and speculative fibers (`None`: nothing is told,
    /// at the cost of one check per request).
    pub(crate) history: Option<&'a Arc<dyn HistoryListener>>,
}

/// A request's answer.
pub(crate) struct Answer<'s> {
    pub(crate) frame: ResponseFrame,
    /// The node that answered, in the request's cluster state: a
    /// reference, so that the answer, moved out through every future on
    /// its way, is a word here instead of its address and host id.
    pub(crate) node: &'s PooledNode,
    /// The shard of the connection that carried the attempt.
    pub(crate) shard: Option<u16>,
}
