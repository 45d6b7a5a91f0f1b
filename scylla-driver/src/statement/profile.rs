//! Execution profiles: named bundles of request settings (consistency,
//! serial consistency, timeout, retry, speculative and load-balancing
//! policies, page size)
//! registered on the session and selected per statement.
//!
//! Every field is optional: an unset field falls through to the next level.
//! The precedence, first set wins:
//!
//! 1. the statement's own option (`with_consistency`, `with_timeout`, ...);
//! 2. the statement's profile ([`with_execution_profile`](crate::Statement::with_execution_profile));
//! 3. the session's default profile
//!    ([`SessionBuilder::default_execution_profile`](crate::SessionBuilder::default_execution_profile));
//! 4. the session configuration ([`SessionConfig`](crate::SessionConfig)).
//!
//! A statement holds an [`ExecutionProfileHandle`] (an `Arc`), never a name:
//! the lookup by name happens once, in
//! [`Session::execution_profile`](crate::Session::execution_profile), which
//! fails on an unknown name, so a typo cannot silently run with defaults and
//! a request resolves its settings without a map lookup or an allocation.
//!
//! A handle can be pointed at another profile
//! ([`ExecutionProfileHandle::map_to_another_profile`]): every statement and
//! session holding it (or a clone) uses the new profile from their next
//! request.

use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use std::time::Duration;

use scylla_cql::Consistency;

use crate::policy::load_balancing::LoadBalancingPolicy;
use crate::policy::retry::RetryPolicy;
use crate::policy::speculative::SpeculativeExecution;

/// A bundle of request settings; unset fields mean "the level below"
/// (see the [module documentation](self)).
///
/// ```
/// use std::time::Duration;
/// use scylla_driver::statement::{Consistency, ExecutionProfile};
///
/// let analytics = ExecutionProfile::new()
///     .consistency(Consistency::One)
///     .request_timeout(Duration::from_secs(60))
///     .page_size(10_000);
/// assert_eq!(analytics.consistency, Some(Consistency::One));
/// assert_eq!(analytics.serial_consistency, None);
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ExecutionProfile {
    /// Consistency level.
    pub consistency: Option<Consistency>,
    /// Serial consistency (for lightweight transactions).
    pub serial_consistency: Option<Consistency>,
    /// Overall timeout of a request (all its attempts).
    pub request_timeout: Option<Duration>,
    /// What to do when an attempt fails.
    pub retry_policy: Option<Arc<dyn RetryPolicy>>,
    /// Speculative execution of idempotent statements
    /// (`SpeculativeExecution::new(1, _)` turns it off where the session
    /// has it on).
    pub speculative_execution: Option<SpeculativeExecution>,
    /// Rows per page for paged execution.
    pub page_size: Option<i32>,
    /// Load-balancing preferences (see
    /// [`policy::load_balancing`](crate::policy::load_balancing)); `None`:
    /// the session's routing.
    pub load_balancing: Option<Arc<dyn LoadBalancingPolicy>>,
}

impl ExecutionProfile {
    /// A profile with every field unset.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the consistency level.
    #[must_use]
    pub fn consistency(mut self, c: Consistency) -> Self {
        self.consistency = Some(c);
        self
    }

    /// Sets the serial consistency level.
    #[must_use]
    pub fn serial_consistency(mut self, c: Consistency) -> Self {
        self.serial_consistency = Some(c);
        self
    }

    /// Sets the request timeout.
    #[must_use]
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = Some(d);
        self
    }

    /// Sets the retry policy.
    #[must_use]
    pub fn retry_policy(mut self, p: Arc<dyn RetryPolicy>) -> Self {
        self.retry_policy = Some(p);
        self
    }

    /// Sets speculative execution.
    #[must_use]
    pub fn speculative_execution(mut self, s: SpeculativeExecution) -> Self {
        self.speculative_execution = Some(s);
        self
    }

    /// Sets the page size.
    #[must_use]
    pub fn page_size(mut self, rows: i32) -> Self {
        self.page_size = Some(rows);
        self
    }

    /// Sets the load-balancing policy.
    #[must_use]
    pub fn load_balancing_policy(mut self, p: Arc<dyn LoadBalancingPolicy>) -> Self {
        self.load_balancing = Some(p);
        self
    }

    /// A handle to this profile under `name`, without registering it on a
    /// session (for a profile that only some statements use).
    pub fn into_handle(self, name: impl Into<String>) -> ExecutionProfileHandle {
        ExecutionProfileHandle(Arc::new(Named {
            name: name.into(),
            profile: ArcSwap::from_pointee(self),
        }))
    }
}

struct Named {
    name: String,
    /// The profile it points to now.
    profile: ArcSwap<ExecutionProfile>,
}

/// A shared, re-pointable reference to an [`ExecutionProfile`], what a
/// statement (or a session, as its default) carries. Cheap to clone; two
/// handles are equal when one is a clone of the other. A request reads the
/// profile it points to once, when it starts.
///
/// Get one by name from [`Session::execution_profile`](crate::Session::execution_profile)
/// (an unknown name is an error), or from [`ExecutionProfile::into_handle`].
#[derive(Clone)]
pub struct ExecutionProfileHandle(Arc<Named>);

impl ExecutionProfileHandle {
    /// The name it was registered (or made) under.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The profile it points to now.
    pub fn profile(&self) -> Arc<ExecutionProfile> {
        self.0.profile.load_full()
    }

    /// Points this handle, and every clone of it, at `profile`: the
    /// statements and sessions holding it use `profile` from their next
    /// request (requests in flight finish with the settings they started
    /// with). Takes `&mut self` as the official `scylla` crate does; the
    /// change is seen through every clone all the same.
    ///
    /// ```
    /// use scylla_driver::statement::{Consistency, ExecutionProfile};
    ///
    /// let mut handle = ExecutionProfile::new().consistency(Consistency::One).into_handle("p");
    /// let held_by_a_statement = handle.clone();
    /// handle.map_to_another_profile(ExecutionProfile::new().consistency(Consistency::All));
    /// assert_eq!(held_by_a_statement.profile().consistency, Some(Consistency::All));
    /// ```
    pub fn map_to_another_profile(&mut self, profile: impl Into<ExecutionProfile>) {
        self.0.profile.store(Arc::new(profile.into()));
    }
}

impl fmt::Debug for ExecutionProfileHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ExecutionProfileHandle")
            .field(&self.0.name)
            .finish()
    }
}

impl PartialEq for ExecutionProfileHandle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ExecutionProfileHandle {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_compare_by_identity_and_keep_their_name() {
        let a = ExecutionProfile::new()
            .consistency(Consistency::One)
            .into_handle("a");
        let same = a.clone();
        let other = ExecutionProfile::new()
            .consistency(Consistency::One)
            .into_handle("a");
        assert_eq!(a, same);
        assert_ne!(a, other);
        assert_eq!(a.name(), "a");
        assert_eq!(a.profile().consistency, Some(Consistency::One));
        assert_eq!(format!("{a:?}"), "ExecutionProfileHandle(\"a\")");
    }

    #[test]
    fn a_remap_is_seen_through_every_clone_and_from_other_threads() {
        let mut h = ExecutionProfile::new()
            .consistency(Consistency::One)
            .into_handle("h");
        let held = h.clone();
        h.map_to_another_profile(ExecutionProfile::new().consistency(Consistency::Two));
        assert_eq!(held.profile().consistency, Some(Consistency::Two));
        assert_eq!(h, held, "still the same handle");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let mut h = h.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        h.map_to_another_profile(
                            ExecutionProfile::new().consistency(Consistency::Three),
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("remapping thread");
        }
        assert_eq!(held.profile().consistency, Some(Consistency::Three));
        h.map_to_another_profile(ExecutionProfile::new().consistency(Consistency::All));
        assert_eq!(held.profile().consistency, Some(Consistency::All));
    }
}
