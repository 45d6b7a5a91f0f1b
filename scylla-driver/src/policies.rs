//! The official `scylla` crate's `policies` paths, as aliases of
//! [`policy`](crate::policy): retry, speculative execution, load
//! balancing, host filters and address translation.
//!
//! A session routes every request token- and shard-aware by itself, with
//! the preferences of
//! [`SessionBuilder::local_datacenter`](crate::SessionBuilder::local_datacenter),
//! [`local_rack`](crate::SessionBuilder::local_rack) and
//! [`latency_aware_routing`](crate::SessionBuilder::latency_aware_routing);
//! the [`load_balancing`] policies of a profile or statement change those
//! preferences for the requests they apply to.

/// Load-balancing preferences of a profile or statement:
/// [`DefaultPolicy`](load_balancing::DefaultPolicy) and
/// [`SingleTargetLoadBalancingPolicy`](load_balancing::SingleTargetLoadBalancingPolicy)
/// (see [`policy::load_balancing`](crate::policy::load_balancing)).
pub mod load_balancing {
    pub use crate::policy::load_balancing::*;
}

/// What to do when an attempt fails.
pub mod retry {
    pub use crate::policy::retry::*;

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
}

/// Speculative execution: another attempt on the next target when the
/// current ones are slow (idempotent statements only).
pub mod speculative_execution {
    use std::time::Duration;

    pub use crate::policy::speculative::SpeculativeExecution;

    /// A speculative execution policy, for
    /// [`ExecutionProfileBuilder::speculative_execution_policy`](crate::client::execution_profile::ExecutionProfileBuilder::speculative_execution_policy).
    pub trait SpeculativeExecutionPolicy: std::fmt::Debug + Send + Sync {
        /// The schedule the policy asks for.
        fn schedule(&self) -> SpeculativeExecution;
    }

    /// Up to `max_retry_count` extra attempts, one more each
    /// `retry_interval` without an answer.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct SimpleSpeculativeExecutionPolicy {
        /// Most extra attempts (0: no speculation).
        pub max_retry_count: usize,
        /// Pause before each extra attempt.
        pub retry_interval: Duration,
    }

    impl SpeculativeExecutionPolicy for SimpleSpeculativeExecutionPolicy {
        fn schedule(&self) -> SpeculativeExecution {
            SpeculativeExecution::new(self.max_retry_count.saturating_add(1), self.retry_interval)
        }
    }

    /// Up to `max_retry_count` extra attempts, one more each time the
    /// request has waited as long as the session's requests take at
    /// `percentile` (0.0 to 100.0), read from the session's latency
    /// histogram when a request starts speculating (100 ms before any
    /// request has finished); see [`SpeculativeExecution::percentile`].
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct PercentileSpeculativeExecutionPolicy {
        /// Most extra attempts (0: no speculation).
        pub max_retry_count: usize,
        /// The latency percentile, 0.0 to 100.0.
        pub percentile: f64,
    }

    impl SpeculativeExecutionPolicy for PercentileSpeculativeExecutionPolicy {
        fn schedule(&self) -> SpeculativeExecution {
            SpeculativeExecution::percentile(
                self.max_retry_count.saturating_add(1),
                self.percentile,
            )
        }
    }

    impl From<PercentileSpeculativeExecutionPolicy> for SpeculativeExecution {
        fn from(p: PercentileSpeculativeExecutionPolicy) -> Self {
            p.schedule()
        }
    }

    impl From<SimpleSpeculativeExecutionPolicy> for SpeculativeExecution {
        fn from(p: SimpleSpeculativeExecutionPolicy) -> Self {
            p.schedule()
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn retry_count_counts_extra_attempts() {
            let p = SimpleSpeculativeExecutionPolicy {
                max_retry_count: 2,
                retry_interval: Duration::from_millis(5),
            };
            let s = p.schedule();
            assert_eq!((s.max_attempts, s.delay), (3, Duration::from_millis(5)));
            let none = SimpleSpeculativeExecutionPolicy {
                max_retry_count: 0,
                retry_interval: Duration::ZERO,
            };
            assert_eq!(SpeculativeExecution::from(none).max_attempts, 1);
            let p = PercentileSpeculativeExecutionPolicy {
                max_retry_count: 2,
                percentile: 99.0,
            }
            .schedule();
            assert_eq!(p.max_attempts, 3);
            assert_eq!(p.latency_percentile(), Some(99.0));
        }
    }
}

/// Which nodes the session connects to.
pub mod host_filter {
    pub use crate::policy::{
        AllowListHostFilter, DatacenterFilter, FnHostFilter, HostFilter, HostInfo,
    };
}

/// Translating the addresses nodes advertise into addresses to connect to.
pub mod address_translator {
    pub use crate::policy::TranslationError;
    pub use crate::policy::{
        AddressTranslator, IdentityTranslator, MapTranslator, UntranslatedPeer,
    };
}
