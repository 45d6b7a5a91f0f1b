//! Speculative execution: for idempotent statements, start another attempt on
//! the next target of the plan when the current ones are slow; the first
//! answer wins.

use std::time::Duration;

/// When to start speculative attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpeculativeExecution {
    /// Attempts in flight at most (1 = no speculation).
    pub max_attempts: usize,
    /// Start the next attempt after this long without an answer.
    pub delay: Duration,
}

impl SpeculativeExecution {
    /// Up to `max_attempts` attempts, one more every `delay`.
    pub fn new(max_attempts: usize, delay: Duration) -> Self {
        Self {
            max_attempts: max_attempts.max(1),
            delay,
        }
    }
}
