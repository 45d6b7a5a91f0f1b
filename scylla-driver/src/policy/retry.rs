//! What to do when an attempt fails.
//!
//! The default policy retries only what is safe to retry:
//!
//! | failure | decision |
//! | --- | --- |
//! | request never sent (connection already broken) | next target |
//! | `Unavailable` | next target, once |
//! | `IsBootstrapping`, `TruncateError` | next target (the node did not run it) |
//! | `Overloaded`, ScyllaDB's rate limit | next target after a jittered delay ([`OVERLOAD_BACKOFF`]), only if idempotent |
//! | read timeout with enough replicas but no data | same target, once |
//! | write timeout | same target, once, only if idempotent (and only for a batch-log write otherwise) |
//! | connection broken in flight, client timeout | next target only if idempotent |
//! | syntax, invalid, unauthorized, already exists, ... | never |
//!
//! A non-idempotent statement is never retried once it may have been applied.
//!
//! Overload is answered with backoff: the retry waits
//! [`OverloadBackoff::delay`] before it goes to the next replica, and a delay
//! that would pass the request's deadline is not taken (the error is
//! returned). For the rate limit, ScyllaDB's protocol extension asks drivers
//! to return the error rather than retry it at once, and a write rejected by
//! the replicas may have been applied on some of them: a non-idempotent
//! statement gets the error, an idempotent one (which the user declared safe
//! to run twice) tries again later, elsewhere. `Overloaded` is treated alike
//! (retried only if idempotent, after a delay), as other drivers do.

use std::fmt;
use std::time::Duration;

use scylla_cql::frame::response::error::{DbError, WriteType};
use scylla_cql::Consistency;

use crate::connection::ConnectionRequestError;
use crate::handle::Handle;

/// Why an attempt failed.
#[derive(Debug, Clone, Copy)]
pub enum AttemptFailure<'a> {
    /// The server answered with an error.
    Server(&'a DbError),
    /// The connection failed (before or after sending).
    Connection(&'a ConnectionRequestError),
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
    /// Wait, then try the next node of the plan (backoff from an overloaded
    /// node). A delay that would pass the request's deadline is not taken:
    /// the error is returned instead.
    RetryNextTargetAfter(Option<Consistency>, Duration),
    /// Give up and return the error.
    Fail,
}

/// Decides whether and where to retry a failed attempt.
pub trait RetryPolicy: Send + Sync + fmt::Debug {
    /// The decision for `failure`.
    fn decide(&self, failure: AttemptFailure<'_>, ctx: &RetryContext) -> RetryDecision;
}

/// A retry policy as a statement holds it (see [`Handle`]).
pub type RetryPolicyHandle = Handle<dyn RetryPolicy>;

/// Delays before retrying after overload: after the n-th retry (n = 0, 1,
/// ...) a delay drawn uniformly from `[b/2, b)`, where
/// `b = min(max, base * 2^n)`. Half the bound is fixed so that a retry
/// always gives the cluster some relief; the other half is jitter, so that
/// clients rejected at the same instant do not come back together.
///
/// ```
/// use std::time::Duration;
/// use scylla_driver::policy::retry::OverloadBackoff;
///
/// let b = OverloadBackoff::new(Duration::from_millis(20), Duration::from_millis(500));
/// let d = b.delay(0);
/// assert!(d >= Duration::from_millis(10) && d < Duration::from_millis(20));
/// assert!(b.delay(10) < Duration::from_millis(500));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverloadBackoff {
    /// The bound of the first delay.
    pub base: Duration,
    /// The largest bound.
    pub max: Duration,
}

/// The overload backoff of [`DefaultRetryPolicy`]: 10-20 ms for the first
/// retry, doubling up to 250-500 ms.
pub const OVERLOAD_BACKOFF: OverloadBackoff = OverloadBackoff {
    base: Duration::from_millis(20),
    max: Duration::from_millis(500),
};

impl OverloadBackoff {
    /// Backoff from `base` up to `max` (at least `base`).
    pub fn new(base: Duration, max: Duration) -> Self {
        OverloadBackoff {
            base,
            max: max.max(base),
        }
    }

    /// The shortest delay after `retries` retries (half the bound).
    pub fn min_delay(&self, retries: u32) -> Duration {
        self.bound(retries) / 2
    }

    fn bound(&self, retries: u32) -> Duration {
        let factor = 1u32.checked_shl(retries.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The delay before the retry that follows `retries` retries.
    pub fn delay(&self, retries: u32) -> Duration {
        let bound = u64::try_from(self.bound(retries).as_nanos()).unwrap_or(u64::MAX);
        let half = bound / 2;
        if half == 0 {
            return Duration::from_nanos(bound);
        }
        Duration::from_nanos(half + fastrand::u64(0..bound - half))
    }
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
                DbError::IsBootstrapping | DbError::TruncateError => {
                    RetryDecision::RetryNextTarget(None)
                }
                DbError::Overloaded | DbError::RateLimitReached { .. } if ctx.idempotent => {
                    RetryDecision::RetryNextTargetAfter(None, OVERLOAD_BACKOFF.delay(ctx.retries))
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

impl DefaultRetryPolicy {
    /// The default policy (see the [module documentation](crate::policy::retry)).
    pub fn new() -> Self {
        DefaultRetryPolicy
    }
}

impl FallthroughRetryPolicy {
    /// A policy that never retries.
    pub fn new() -> Self {
        FallthroughRetryPolicy
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
        let broken =
            ConnectionRequestError::Broken(BrokenConnection(Arc::new(BrokenReason::ClosedByPeer)));
        assert_eq!(
            p.decide(AttemptFailure::Connection(&broken), &ctx(false, 0)),
            RetryDecision::Fail
        );
        let timeout = ConnectionRequestError::Timeout(Duration::from_secs(1));
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
        let e = ConnectionRequestError::NotSent(BrokenConnection(Arc::new(BrokenReason::Closed)));
        assert_eq!(
            p.decide(AttemptFailure::Connection(&e), &ctx(false, 3)),
            RetryDecision::RetryNextTarget(None)
        );
    }

    #[test]
    fn overload_and_rate_limit_back_off_to_the_next_target_if_idempotent() {
        let p = DefaultRetryPolicy;
        let rate_limit = |rejected_by_coordinator| DbError::RateLimitReached {
            code: 0xF000,
            op_type: scylla_cql::frame::response::error::OperationType::Write,
            rejected_by_coordinator,
        };
        for e in [DbError::Overloaded, rate_limit(true), rate_limit(false)] {
            assert_eq!(
                p.decide(AttemptFailure::Server(&e), &ctx(false, 0)),
                RetryDecision::Fail,
                "{e}"
            );
            for retries in [0, 1, 5, 40] {
                let RetryDecision::RetryNextTargetAfter(None, d) =
                    p.decide(AttemptFailure::Server(&e), &ctx(true, retries))
                else {
                    panic!("{e}: not a delayed retry");
                };
                assert!(d >= OVERLOAD_BACKOFF.min_delay(retries), "{d:?}");
                assert!(d < OVERLOAD_BACKOFF.bound(retries), "{d:?}");
                assert!(d < OVERLOAD_BACKOFF.max, "{d:?}");
            }
        }
    }

    #[test]
    fn overload_backoff_is_jittered() {
        let b = OverloadBackoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let delays: std::collections::HashSet<Duration> = (0..50).map(|_| b.delay(0)).collect();
        assert!(delays.len() > 10, "{delays:?}");
        assert!(delays
            .iter()
            .all(|d| *d >= Duration::from_millis(50) && *d < Duration::from_millis(100)));
        assert_eq!(b.min_delay(3), Duration::from_millis(400));
        assert_eq!(b.min_delay(30), Duration::from_millis(500));
        // A zero base never waits.
        assert_eq!(
            OverloadBackoff::new(Duration::ZERO, Duration::ZERO).delay(3),
            Duration::ZERO
        );
    }

    #[test]
    fn unavailability_moves_on() {
        let p = DefaultRetryPolicy;
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
