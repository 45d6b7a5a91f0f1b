//! Execution profiles: named bundles of request settings (consistency,
//! serial consistency, timeout, retry, speculative and load-balancing
//! policies, page size), built with [`ExecutionProfile::builder`] (the
//! official `scylla` crate's shape; its path `client::execution_profile`
//! names these same types), registered on the session and selected per
//! statement.
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
use std::time::Duration;

use arc_swap::ArcSwap;

use scylla_cql::Consistency;

use crate::policy::load_balancing::LoadBalancingPolicy;
use crate::policy::retry::RetryPolicy;
use crate::policy::speculative::{SpeculativeExecution, SpeculativeExecutionPolicy};
use crate::statement::SerialConsistency;

/// A bundle of request settings, built with [`builder`](Self::builder);
/// unset fields mean "the level below" (see the [module documentation](self)).
///
/// ```
/// use std::time::Duration;
/// use scylla_driver::policies::load_balancing::DefaultPolicy;
/// use scylla_driver::statement::{Consistency, ExecutionProfile, SerialConsistency};
///
/// let analytics = ExecutionProfile::builder()
///     .consistency(Consistency::One)
///     .request_timeout(Some(Duration::from_secs(60)))
///     .page_size(10_000)
///     .load_balancing_policy(DefaultPolicy::builder().prefer_datacenter("dc1".into()).build())
///     .build();
/// assert_eq!(analytics.get_consistency(), Some(Consistency::One));
/// assert_eq!(analytics.get_serial_consistency(), None);
/// assert_eq!(analytics.get_load_balancing_policy().unwrap().name(), "DefaultPolicy");
/// let handle = analytics.into_handle_with_label("analytics".to_owned());
/// assert_eq!(handle.profile().get_page_size(), Some(10_000));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ExecutionProfile {
    pub(crate) consistency: Option<Consistency>,
    /// Serial consistency (for lightweight transactions).
    pub(crate) serial_consistency: Option<Consistency>,
    /// Overall timeout of a request (all its attempts).
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) retry_policy: Option<Arc<dyn RetryPolicy>>,
    /// `SpeculativeExecution::new(1, _)` turns it off where the session has
    /// it on.
    pub(crate) speculative_execution: Option<SpeculativeExecution>,
    /// Rows per page for paged execution.
    pub(crate) page_size: Option<i32>,
    /// `None`: the session's routing.
    pub(crate) load_balancing: Option<Arc<dyn LoadBalancingPolicy>>,
}

impl ExecutionProfile {
    /// A builder starting with every field unset.
    pub fn builder() -> ExecutionProfileBuilder {
        ExecutionProfileBuilder {
            profile: ExecutionProfile::default(),
        }
    }

    /// A builder starting from this profile.
    pub fn to_builder(&self) -> ExecutionProfileBuilder {
        ExecutionProfileBuilder {
            profile: self.clone(),
        }
    }

    /// A handle to this profile, with an empty label.
    pub fn into_handle(self) -> ExecutionProfileHandle {
        self.into_handle_with_label(String::new())
    }

    /// A handle to this profile labelled `label` (shown by the handle's
    /// `Debug` and [`name`](ExecutionProfileHandle::name)), without
    /// registering it on a session (for a profile that only some statements
    /// use).
    pub fn into_handle_with_label(self, label: String) -> ExecutionProfileHandle {
        ExecutionProfileHandle(Arc::new(Named {
            name: label,
            profile: ArcSwap::from_pointee(self),
        }))
    }

    /// The consistency level, if set.
    pub fn get_consistency(&self) -> Option<Consistency> {
        self.consistency
    }

    /// The serial consistency level, if set.
    pub fn get_serial_consistency(&self) -> Option<SerialConsistency> {
        self.serial_consistency
            .and_then(|c| SerialConsistency::try_from(c).ok())
    }

    /// The request timeout, if set.
    pub fn get_request_timeout(&self) -> Option<Duration> {
        self.request_timeout
    }

    /// The retry policy, if set.
    pub fn get_retry_policy(&self) -> Option<&Arc<dyn RetryPolicy>> {
        self.retry_policy.as_ref()
    }

    /// The speculative-execution schedule, if set.
    pub fn get_speculative_execution(&self) -> Option<SpeculativeExecution> {
        self.speculative_execution
    }

    /// The page size, if set.
    pub fn get_page_size(&self) -> Option<i32> {
        self.page_size
    }

    /// The load-balancing policy, if set.
    pub fn get_load_balancing_policy(&self) -> Option<&Arc<dyn LoadBalancingPolicy>> {
        self.load_balancing.as_ref()
    }
}

/// Builds an [`ExecutionProfile`], with the official `scylla` crate's method
/// signatures (and `page_size` and `speculative_execution` besides).
#[derive(Debug, Clone)]
pub struct ExecutionProfileBuilder {
    profile: ExecutionProfile,
}

impl ExecutionProfileBuilder {
    /// Sets the consistency level.
    #[must_use]
    pub fn consistency(mut self, c: Consistency) -> Self {
        self.profile.consistency = Some(c);
        self
    }

    /// Sets (or clears) the serial consistency level.
    #[must_use]
    pub fn serial_consistency(mut self, c: Option<SerialConsistency>) -> Self {
        self.profile.serial_consistency = c.map(Consistency::from);
        self
    }

    /// Sets (or clears) the request timeout.
    #[must_use]
    pub fn request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.profile.request_timeout = timeout;
        self
    }

    /// Sets the retry policy.
    #[must_use]
    pub fn retry_policy(mut self, p: Arc<dyn RetryPolicy>) -> Self {
        self.profile.retry_policy = Some(p);
        self
    }

    /// Sets speculative execution by policy (`None`: none, even where the
    /// session has it on).
    #[must_use]
    pub fn speculative_execution_policy(
        mut self,
        p: Option<Arc<dyn SpeculativeExecutionPolicy>>,
    ) -> Self {
        self.profile.speculative_execution = Some(match p {
            Some(p) => p.schedule(),
            None => SpeculativeExecution::new(1, Duration::ZERO),
        });
        self
    }

    /// Sets speculative execution by schedule.
    #[must_use]
    pub fn speculative_execution(mut self, s: SpeculativeExecution) -> Self {
        self.profile.speculative_execution = Some(s);
        self
    }

    /// Sets the page size.
    #[must_use]
    pub fn page_size(mut self, rows: i32) -> Self {
        self.profile.page_size = Some(rows);
        self
    }

    /// Sets the load-balancing policy (see
    /// [`policy::load_balancing`](crate::policy::load_balancing)).
    #[must_use]
    pub fn load_balancing_policy(mut self, p: Arc<dyn LoadBalancingPolicy>) -> Self {
        self.profile.load_balancing = Some(p);
        self
    }

    /// The profile.
    pub fn build(self) -> ExecutionProfile {
        self.profile
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
/// (an unknown name is an error), or from [`ExecutionProfile::into_handle`]
/// and [`into_handle_with_label`](ExecutionProfile::into_handle_with_label).
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
    /// let one = ExecutionProfile::builder().consistency(Consistency::One).build();
    /// let mut handle = one.into_handle();
    /// let held_by_a_statement = handle.clone();
    /// let all = ExecutionProfile::builder().consistency(Consistency::All).build();
    /// handle.map_to_another_profile(all);
    /// assert_eq!(held_by_a_statement.profile().get_consistency(), Some(Consistency::All));
    /// ```
    pub fn map_to_another_profile(&mut self, profile: ExecutionProfile) {
        self.0.profile.store(Arc::new(profile));
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

    fn with(c: Consistency) -> ExecutionProfile {
        ExecutionProfile::builder().consistency(c).build()
    }

    #[test]
    fn handles_compare_by_identity_and_keep_their_name() {
        let a = with(Consistency::One).into_handle_with_label("a".to_owned());
        let same = a.clone();
        let other = with(Consistency::One).into_handle_with_label("a".to_owned());
        assert_eq!(a, same);
        assert_ne!(a, other);
        assert_eq!(a.name(), "a");
        assert_eq!(a.profile().get_consistency(), Some(Consistency::One));
        assert_eq!(format!("{a:?}"), "ExecutionProfileHandle(\"a\")");
    }

    #[test]
    fn a_remap_is_seen_through_every_clone_and_from_other_threads() {
        let mut h = with(Consistency::One).into_handle_with_label("h".to_owned());
        let held = h.clone();
        h.map_to_another_profile(with(Consistency::Two));
        assert_eq!(held.profile().get_consistency(), Some(Consistency::Two));
        assert_eq!(h, held, "still the same handle");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let mut h = h.clone();
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        h.map_to_another_profile(with(Consistency::Three));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("remapping thread");
        }
        assert_eq!(held.profile().get_consistency(), Some(Consistency::Three));
        h.map_to_another_profile(with(Consistency::All));
        assert_eq!(held.profile().get_consistency(), Some(Consistency::All));
    }
}
