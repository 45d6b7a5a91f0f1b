//! What to do when an attempt fails.
//!
//! The default policy retries only what is safe to retry:
//!
//! | failure | decision |
//! | --- | --- |
//! | request never sent (connection already broken) | next target |
//! | `Unavailable` | next target, once |
//! | `Overloaded`, `IsBootstrapping`, `TruncateError` | next target (the node did not run it) |
//! | read timeout with enough replicas but no data | same target, once |
//! | write timeout | same target, once, only if idempotent (and only for a batch-log write otherwise) |
//! | connection broken in flight, client timeout | next target only if idempotent |
//! | ScyllaDB's rate limit | never (the server asks clients not to) |
//! | syntax, invalid, unauthorized, already exists, ... | never |
//!
//! A non-idempotent statement is never retried once it may have been applied.

use std::fmt;

use scylla_cql::frame::response::error::{DbError, WriteType};
use scylla_cql::Consistency;

use crate::connection::RequestError;

/// Why an attempt failed.
#[derive(Debug, Clone, Copy)]
pub enum AttemptFailure<'a> {
    /// The server answered with an error.
    Server(&'a DbError),
    /// The connection failed (before or after sending).
    Connection(&'a RequestError),
}

/// What the retry policy knows about the request.
#[derive(Debug, Clone, Copy)]
pub struct RetryContext {
    /// Whether the statement is idempotent.
    pub idempotent: bool,
    /// Retries already made for this request.
    pub retries: u32,
    /// The consistency of the failed attempt.
    pub consistency: Consistency,
}

/// The policy's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Try the same node again (optionally at another consistency).
    RetrySameTarget(Option<Consistency>),
    /// Try the next node of the plan.
    RetryNextTarget(Option<Consistency>),
    /// Give up and return the error.
    Fail,
}

/// Decides whether and where to retry a failed attempt.
pub trait RetryPolicy: Send + Sync + fmt::Debug {
    /// The decision for `failure`.
    fn decide(&self, failure: AttemptFailure<'_>, ctx: &RetryContext) -> RetryDecision;
}

/// The default: retry only when it is safe (see the module documentation).
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultRetryPolicy;

impl RetryPolicy for DefaultRetryPolicy {
    fn decide(&self, failure: AttemptFailure<'_>, ctx: &RetryContext) -> RetryDecision {
        let first = ctx.retries == 0;
        match failure {
            AttemptFailure::Connection(e) => {
                if e.is_not_sent() || ctx.idempotent {
                    RetryDecision::RetryNextTarget(None)
                } else {
                    RetryDecision::Fail
                }
            }
            AttemptFailure::Server(e) => match e {
                DbError::Unavailable { .. } if first => RetryDecision::RetryNextTarget(None),
                DbError::Overloaded | DbError::IsBootstrapping | DbError::TruncateError => {
                    RetryDecision::RetryNextTarget(None)
                }
                DbError::ReadTimeout {
                    received,
                    block_for,
                    data_present,
                    ..
                } if first && received >= block_for && !data_present => {
                    RetryDecision::RetrySameTarget(None)
                }
                DbError::WriteTimeout { write_type, .. }
                    if first && (ctx.idempotent || *write_type == WriteType::BatchLog) =>
                {
                    RetryDecision::RetrySameTarget(None)
                }
                _ => RetryDecision::Fail,
            },
        }
    }
}

/// Never retries.
#[derive(Debug, Clone, Copy, Default)]
pub struct FallthroughRetryPolicy;

impl RetryPolicy for FallthroughRetryPolicy {
    fn decide(&self, _: AttemptFailure<'_>, _: &RetryContext) -> RetryDecision {
        RetryDecision::Fail
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::{BrokenConnection, BrokenReason};
    use std::sync::Arc;
    use std::time::Duration;

    fn ctx(idempotent: bool, retries: u32) -> RetryContext {
        RetryContext {
            idempotent,
            retries,
            consistency: Consistency::Quorum,
        }
    }

    #[test]
    fn never_retries_non_idempotent_writes_that_may_have_applied() {
        let p = DefaultRetryPolicy;
        let broken = RequestError::Broken(BrokenConnection(Arc::new(BrokenReason::ClosedByPeer)));
        assert_eq!(
            p.decide(AttemptFailure::Connection(&broken), &ctx(false, 0)),
            RetryDecision::Fail
        );
        let timeout = RequestError::Timeout(Duration::from_secs(1));
        assert_eq!(
            p.decide(AttemptFailure::Connection(&timeout), &ctx(false, 0)),
            RetryDecision::Fail
        );
        let wt = DbError::WriteTimeout {
            consistency: Consistency::Quorum,
            received: 1,
            block_for: 2,
            write_type: WriteType::Simple,
            contentions: None,
        };
        assert_eq!(
            p.decide(AttemptFailure::Server(&wt), &ctx(false, 0)),
            RetryDecision::Fail
        );
        assert_eq!(
            p.decide(AttemptFailure::Server(&wt), &ctx(true, 0)),
            RetryDecision::RetrySameTarget(None)
        );
        assert_eq!(
            p.decide(AttemptFailure::Server(&wt), &ctx(true, 1)),
            RetryDecision::Fail
        );
    }

    #[test]
    fn not_sent_is_always_retried_elsewhere() {
        let p = DefaultRetryPolicy;
        let e = RequestError::NotSent(BrokenConnection(Arc::new(BrokenReason::Closed)));
        assert_eq!(
            p.decide(AttemptFailure::Connection(&e), &ctx(false, 3)),
            RetryDecision::RetryNextTarget(None)
        );
    }

    #[test]
    fn overload_and_unavailability_move_on() {
        let p = DefaultRetryPolicy;
        assert_eq!(
            p.decide(AttemptFailure::Server(&DbError::Overloaded), &ctx(false, 0)),
            RetryDecision::RetryNextTarget(None)
        );
        let un = DbError::Unavailable {
            consistency: Consistency::Quorum,
            required: 2,
            alive: 1,
        };
        assert_eq!(
            p.decide(AttemptFailure::Server(&un), &ctx(false, 0)),
            RetryDecision::RetryNextTarget(None)
        );
        assert_eq!(
            p.decide(AttemptFailure::Server(&un), &ctx(false, 1)),
            RetryDecision::Fail
        );
        assert_eq!(
            p.decide(AttemptFailure::Server(&DbError::SyntaxError), &ctx(true, 0)),
            RetryDecision::Fail
        );
    }
}
