//! The official `scylla` crate's `policies` paths, as aliases of
//! [`policy`](crate::policy): retry, speculative execution, host filters
//! and address translation.
//!
//! Load balancing is not a policy object here: a session routes every
//! request token- and shard-aware by itself, and is told its preferences
//! with [`SessionBuilder::local_datacenter`](crate::SessionBuilder::local_datacenter),
//! [`local_rack`](crate::SessionBuilder::local_rack) and
//! [`latency_aware_routing`](crate::SessionBuilder::latency_aware_routing).

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
        }
    }
}

/// Which nodes the session connects to.
pub mod host_filter {
    pub use crate::policy::{DatacenterFilter, FnHostFilter, HostFilter, HostInfo};
}

/// Translating the addresses nodes advertise into addresses to connect to.
pub mod address_translator {
    pub use crate::policy::TranslationError;
    pub use crate::policy::{AddressTranslator, IdentityTranslator, MapTranslator};
}
