//! When not to trust the shard-aware port: evidence, fallback and probation.
//!
//! The shard-aware port only works if the source port the client binds is the
//! one the server sees. A NAT that rewrites ports defeats it silently: the
//! connection works, but lands on another shard (the server says which in
//! SUPPORTED). A firewall may refuse the port or drop packets to it (the
//! connect times out). Each is evidence against the port for that node:
//!
//! - a wrong-shard landing counts; one can be a server-side fluke, so only
//!   `threshold` in a row disable the port;
//! - a refused or timed-out connect disables it at once (that connection goes
//!   to the regular port straight away), except a refusal within
//!   [`RESTART_GRACE`] of the pool losing connections to the node: a node
//!   that stops closes its listeners one after another, so a reconnect that
//!   falls into that moment finds the shard-aware port refusing while the
//!   regular port still accepts, which says nothing about the port.
//!
//! While disabled, the pool uses the regular port. After a probation period
//! one probe through the shard-aware port decides: success re-enables it,
//! failure disables it again for twice as long (up to a cap). The reason is
//! kept distinct (a timeout is not a NAT), and each transition is reported
//! once so it can be logged and counted.

use std::time::{Duration, Instant};

/// How long after the pool lost connections to its node a refusal of the
/// shard-aware port is not held against the port (see the module doc).
pub const RESTART_GRACE: Duration = Duration::from_secs(2);

/// Why the shard-aware port is not used for a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FallbackReason {
    /// Connections landed on other shards than their source port asked for:
    /// most likely a NAT rewriting source ports.
    ShardMismatch,
    /// The shard-aware port refused the connection.
    Refused,
    /// Connecting to the shard-aware port timed out.
    TimedOut,
    /// No free source port for the wanted shard in the configured range.
    PortsExhausted,
}

impl FallbackReason {
    /// A stable snake_case name (the `reason` label of the
    /// `scylla_driver_shard_aware_fallbacks_total` metric).
    pub fn name(&self) -> &'static str {
        match self {
            FallbackReason::ShardMismatch => "shard_mismatch",
            FallbackReason::Refused => "refused",
            FallbackReason::TimedOut => "timed_out",
            FallbackReason::PortsExhausted => "ports_exhausted",
        }
    }
}

impl std::fmt::Display for FallbackReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FallbackReason::ShardMismatch => {
                "connections land on the wrong shard (NAT rewriting source ports?)"
            }
            FallbackReason::Refused => "the shard-aware port refused the connection",
            FallbackReason::TimedOut => "connecting to the shard-aware port timed out",
            FallbackReason::PortsExhausted => {
                "no free source port for the shard in the configured range"
            }
        })
    }
}

/// A change of mind about the shard-aware port, to log and count once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Stopped using it, for this long.
    Disabled {
        /// Why.
        reason: FallbackReason,
        /// Until the next probe.
        probation: Duration,
    },
    /// A probe succeeded; using it again.
    Restored,
}

/// Tuning of the fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FallbackConfig {
    /// Wrong-shard landings in a row that disable the port.
    pub mismatch_threshold: u32,
    /// First probation period.
    pub probation: Duration,
    /// Longest probation period.
    pub max_probation: Duration,
}

impl Default for FallbackConfig {
    fn default() -> Self {
        Self {
            mismatch_threshold: 3,
            probation: Duration::from_secs(30),
            max_probation: Duration::from_secs(600),
        }
    }
}

/// What the pool should do for its next shard-aware-eligible connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortChoice {
    /// Use the shard-aware port.
    ShardAware,
    /// Use the shard-aware port as a probe (probation is over).
    Probe,
    /// Use the regular port.
    Regular(FallbackReason),
}

/// Evidence about one node's shard-aware port.
#[derive(Debug, Clone)]
pub struct ShardAwareHealth {
    config: FallbackConfig,
    mismatches_in_row: u32,
    disabled: Option<Disabled>,
    /// When the pool last lost connections to the node.
    lost_at: Option<Instant>,
}

#[derive(Debug, Clone, Copy)]
struct Disabled {
    reason: FallbackReason,
    until: Instant,
    probation: Duration,
    probing: bool,
}

impl ShardAwareHealth {
    /// Healthy until proven otherwise.
    pub fn new(config: FallbackConfig) -> Self {
        Self {
            config,
            mismatches_in_row: 0,
            disabled: None,
            lost_at: None,
        }
    }

    /// The reason the port is not in use, if it is not.
    pub fn fallback(&self) -> Option<FallbackReason> {
        self.disabled.map(|d| d.reason)
    }

    /// Which port the next connection should use.
    pub fn choose(&mut self, now: Instant) -> PortChoice {
        match &mut self.disabled {
            None => PortChoice::ShardAware,
            Some(d) if now >= d.until && !d.probing => {
                d.probing = true;
                PortChoice::Probe
            }
            Some(d) => PortChoice::Regular(d.reason),
        }
    }

    fn disable(&mut self, reason: FallbackReason, now: Instant) -> Option<Transition> {
        let probation = match self.disabled {
            // A failed probe: twice as long as last time.
            Some(d) => (d.probation * 2).min(self.config.max_probation),
            None => self.config.probation,
        };
        let was_disabled = self.disabled.is_some();
        self.disabled = Some(Disabled {
            reason,
            until: now + probation,
            probation,
            probing: false,
        });
        self.mismatches_in_row = 0;
        (!was_disabled).then_some(Transition::Disabled { reason, probation })
    }

    /// A shard-aware connection landed on `got` while `wanted` was asked for.
    pub fn on_landed(&mut self, wanted: u16, got: u16, now: Instant) -> Option<Transition> {
        if wanted == got {
            self.mismatches_in_row = 0;
            if self.disabled.is_some_and(|d| d.probing) {
                self.disabled = None;
                return Some(Transition::Restored);
            }
            return None;
        }
        self.mismatches_in_row += 1;
        let probing = self.disabled.is_some_and(|d| d.probing);
        if probing || self.mismatches_in_row >= self.config.mismatch_threshold {
            self.disable(FallbackReason::ShardMismatch, now)
        } else {
            None
        }
    }

    /// The pool lost connections to the node (it may be restarting).
    pub fn on_connections_lost(&mut self, now: Instant) {
        self.lost_at = Some(now);
    }

    /// Whether the pool lost connections to the node less than
    /// [`RESTART_GRACE`] ago: a refused shard-aware port then most likely
    /// means the node is stopping, and the regular port is no better.
    pub fn in_restart_grace(&self, now: Instant) -> bool {
        self.lost_at
            .is_some_and(|at| now.saturating_duration_since(at) < RESTART_GRACE)
    }

    /// Connecting to the shard-aware port failed for `reason` (while the
    /// regular port answered). A refusal within [`RESTART_GRACE`] of lost
    /// connections is not held against the port, except by a probe.
    pub fn on_failure(&mut self, reason: FallbackReason, now: Instant) -> Option<Transition> {
        let probing = self.disabled.is_some_and(|d| d.probing);
        if reason == FallbackReason::Refused && self.in_restart_grace(now) && !probing {
            return None;
        }
        self.disable(reason, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> FallbackConfig {
        FallbackConfig {
            mismatch_threshold: 3,
            probation: Duration::from_secs(10),
            max_probation: Duration::from_secs(25),
        }
    }

    #[test]
    fn one_mismatch_is_tolerated_three_disable() {
        let t0 = Instant::now();
        let mut h = ShardAwareHealth::new(cfg());
        assert_eq!(h.on_landed(1, 2, t0), None);
        assert_eq!(h.on_landed(3, 3, t0), None, "a success resets the count");
        assert_eq!(h.on_landed(1, 2, t0), None);
        assert_eq!(h.on_landed(1, 2, t0), None);
        assert_eq!(
            h.on_landed(1, 2, t0),
            Some(Transition::Disabled {
                reason: FallbackReason::ShardMismatch,
                probation: Duration::from_secs(10)
            })
        );
        assert_eq!(
            h.choose(t0),
            PortChoice::Regular(FallbackReason::ShardMismatch)
        );
    }

    #[test]
    fn probation_then_probe_restores_or_doubles() {
        let t0 = Instant::now();
        let mut h = ShardAwareHealth::new(cfg());
        assert!(h.on_failure(FallbackReason::Refused, t0).is_some());
        assert!(matches!(
            h.choose(t0 + Duration::from_secs(9)),
            PortChoice::Regular(_)
        ));
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(h.choose(t1), PortChoice::Probe);
        // Only one probe at a time.
        assert!(matches!(h.choose(t1), PortChoice::Regular(_)));
        // Probe fails: disabled again, for 20 s, not reported twice.
        assert_eq!(h.on_failure(FallbackReason::Refused, t1), None);
        assert!(matches!(
            h.choose(t1 + Duration::from_secs(19)),
            PortChoice::Regular(_)
        ));
        let t2 = t1 + Duration::from_secs(20);
        assert_eq!(h.choose(t2), PortChoice::Probe);
        assert_eq!(h.on_landed(4, 4, t2), Some(Transition::Restored));
        assert_eq!(h.choose(t2), PortChoice::ShardAware);
    }

    #[test]
    fn a_refusal_right_after_lost_connections_is_not_evidence() {
        let t0 = Instant::now();
        let mut h = ShardAwareHealth::new(cfg());
        h.on_connections_lost(t0);
        // The node is stopping: its shard-aware listener closed first.
        assert_eq!(h.on_failure(FallbackReason::Refused, t0), None);
        assert_eq!(
            h.on_failure(FallbackReason::Refused, t0 + Duration::from_millis(1999)),
            None
        );
        assert_eq!(h.choose(t0), PortChoice::ShardAware);
        assert!(h.in_restart_grace(t0 + Duration::from_millis(1999)));
        assert!(!h.in_restart_grace(t0 + RESTART_GRACE));
        // A timeout is evidence whenever it comes (the grace is for refusals).
        let mut timed_out = h.clone();
        assert!(timed_out.on_failure(FallbackReason::TimedOut, t0).is_some());
        // After the grace, a refusal disables the port (a firewall).
        assert_eq!(
            h.on_failure(FallbackReason::Refused, t0 + RESTART_GRACE),
            Some(Transition::Disabled {
                reason: FallbackReason::Refused,
                probation: Duration::from_secs(10)
            })
        );
    }

    #[test]
    fn probation_is_capped_and_reasons_stay_distinct() {
        let mut t = Instant::now();
        let mut h = ShardAwareHealth::new(cfg());
        h.on_failure(FallbackReason::TimedOut, t);
        assert_eq!(h.fallback(), Some(FallbackReason::TimedOut));
        for _ in 0..5 {
            t += Duration::from_secs(100);
            assert_eq!(h.choose(t), PortChoice::Probe);
            h.on_landed(1, 2, t);
        }
        assert_eq!(h.fallback(), Some(FallbackReason::ShardMismatch));
        assert!(matches!(
            h.choose(t + Duration::from_secs(24)),
            PortChoice::Regular(_)
        ));
        assert_eq!(h.choose(t + Duration::from_secs(25)), PortChoice::Probe);
    }
}
