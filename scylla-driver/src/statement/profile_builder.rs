//! The official crate's way of building execution profiles:
//! [`ExecutionProfile::builder()`] `...build().into_handle()`, a thin
//! wrapper of [`statement::ExecutionProfile`](crate::statement::ExecutionProfile)
//! (the official path is `client::execution_profile`).

use std::sync::Arc;
use std::time::Duration;

use super::ExecutionProfileHandle;

use crate::policy::retry::RetryPolicy;
use crate::policy::speculative::SpeculativeExecutionPolicy;
use crate::statement::{Consistency, SerialConsistency};

/// A bundle of request settings, built with
/// [`builder`](Self::builder); unset fields mean "the session's".
///
/// ```
/// use std::time::Duration;
/// use scylla_driver::client::execution_profile::ExecutionProfile;
/// use scylla_driver::statement::{Consistency, SerialConsistency};
///
/// use scylla_driver::policies::load_balancing::DefaultPolicy;
///
/// let profile = ExecutionProfile::builder()
///     .consistency(Consistency::One)
///     .serial_consistency(Some(SerialConsistency::LocalSerial))
///     .request_timeout(Some(Duration::from_secs(3)))
///     .load_balancing_policy(DefaultPolicy::builder().prefer_datacenter("dc1".into()).build())
///     .build();
/// let policy = profile.get_load_balancing_policy().unwrap();
/// assert_eq!(policy.name(), "DefaultPolicy");
/// assert_eq!(profile.get_consistency(), Some(Consistency::One));
/// assert_eq!(profile.get_serial_consistency(), Some(SerialConsistency::LocalSerial));
/// let handle = profile.into_handle();
/// assert_eq!(handle.profile().request_timeout, Some(Duration::from_secs(3)));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ExecutionProfile {
    profile: crate::statement::ExecutionProfile,
}

impl ExecutionProfile {
    /// A builder starting with every field unset.
    pub fn builder() -> ExecutionProfileBuilder {
        ExecutionProfileBuilder {
            profile: crate::statement::ExecutionProfile::new(),
        }
    }

    /// A builder starting from this profile.
    pub fn to_builder(&self) -> ExecutionProfileBuilder {
        ExecutionProfileBuilder {
            profile: self.profile.clone(),
        }
    }

    /// A handle to this profile, with an empty label.
    pub fn into_handle(self) -> ExecutionProfileHandle {
        self.profile.into_handle(String::new())
    }

    /// A handle to this profile labelled `label` (shown by the handle's
    /// `Debug` and [`name`](ExecutionProfileHandle::name)).
    pub fn into_handle_with_label(self, label: String) -> ExecutionProfileHandle {
        self.profile.into_handle(label)
    }

    /// The consistency level, if set.
    pub fn get_consistency(&self) -> Option<Consistency> {
        self.profile.consistency
    }

    /// The serial consistency level, if set.
    pub fn get_serial_consistency(&self) -> Option<SerialConsistency> {
        self.profile
            .serial_consistency
            .and_then(|c| SerialConsistency::try_from(c).ok())
    }

    /// The request timeout, if set.
    pub fn get_request_timeout(&self) -> Option<Duration> {
        self.profile.request_timeout
    }

    /// The load-balancing policy, if set.
    pub fn get_load_balancing_policy(
        &self,
    ) -> Option<&Arc<dyn crate::policy::load_balancing::LoadBalancingPolicy>> {
        self.profile.load_balancing.as_ref()
    }

    /// This crate's form of the profile.
    pub fn as_profile(&self) -> &crate::statement::ExecutionProfile {
        &self.profile
    }
}

impl From<ExecutionProfile> for crate::statement::ExecutionProfile {
    fn from(p: ExecutionProfile) -> Self {
        p.profile
    }
}

impl From<crate::statement::ExecutionProfile> for ExecutionProfile {
    fn from(profile: crate::statement::ExecutionProfile) -> Self {
        ExecutionProfile { profile }
    }
}

/// Builds an [`ExecutionProfile`], with the official `scylla` crate's
/// method signatures.
#[derive(Debug, Clone)]
pub struct ExecutionProfileBuilder {
    profile: crate::statement::ExecutionProfile,
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

    /// Sets speculative execution (`None`: none, even where the
    /// session has it on).
    #[must_use]
    pub fn speculative_execution_policy(
        mut self,
        p: Option<Arc<dyn SpeculativeExecutionPolicy>>,
    ) -> Self {
        self.profile.speculative_execution = Some(match p {
            Some(p) => p.schedule(),
            None => crate::policy::speculative::SpeculativeExecution::new(1, Duration::ZERO),
        });
        self
    }

    /// Sets the page size.
    #[must_use]
    pub fn page_size(mut self, rows: i32) -> Self {
        self.profile.page_size = Some(rows);
        self
    }

    /// Sets the load-balancing policy (see
    /// [`policies::load_balancing`](crate::policies::load_balancing)).
    #[must_use]
    pub fn load_balancing_policy(
        mut self,
        p: Arc<dyn crate::policy::load_balancing::LoadBalancingPolicy>,
    ) -> Self {
        self.profile.load_balancing = Some(p);
        self
    }

    /// The profile.
    pub fn build(self) -> ExecutionProfile {
        ExecutionProfile {
            profile: self.profile,
        }
    }
}
