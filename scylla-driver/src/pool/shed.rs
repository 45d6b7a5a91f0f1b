//! Handshakes a node dropped under load: what a failed open means.
//!
//! ScyllaDB admits only a few handshakes per shard into their CPU stage at
//! once (`uninitialized_connections_semaphore_cpu_concurrency`); one that
//! waits too long is shed: the node closes the connection after OPTIONS was
//! answered, during STARTUP or the authentication exchange, without an
//! answer (the test cluster does exactly that, `src/admission.rs`). A node
//! may instead answer the step with an OVERLOADED error, or be so slow that
//! the client's handshake timeout passes first.
//!
//! Either way the port worked: the TCP connect succeeded and OPTIONS was
//! answered. So a shed handshake is not evidence against the shard-aware
//! port (no NAT, no firewall: see [`super::nat`]), and it is not a request
//! failure either (no request was on the connection). It is the node asking
//! for fewer handshakes: the pool answers it with its jittered reconnect
//! backoff ([`super::backoff`]) for that node, and counts it
//! ([`crate::metrics::Metrics::handshakes_shed`]).

use scylla_cql::frame::response::error::DbError;

use crate::connection::{ConnectionError, SetupStep};

/// Why opening a pool connection failed, in terms of what the pool does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenFailure {
    /// The node shed the handshake under load (closed it during STARTUP or
    /// authentication, answered it with OVERLOADED, or did not answer it in
    /// time): back off this node's reconnects. Not a port problem.
    Shed,
    /// Anything else (the node is unreachable, refused the handshake, ...).
    Other,
}

impl OpenFailure {
    /// Classifies a failed open.
    pub fn of(error: &ConnectionError) -> OpenFailure {
        if is_shed(error) {
            OpenFailure::Shed
        } else {
            OpenFailure::Other
        }
    }
}

/// Whether `step` comes after the port has answered (OPTIONS done): a failure
/// there is the node's, not the network's.
fn after_options(step: SetupStep) -> bool {
    matches!(step, SetupStep::Startup | SetupStep::Authenticate)
}

/// Whether the error is a handshake shed by the node's admission control.
pub fn is_shed(error: &ConnectionError) -> bool {
    match error {
        ConnectionError::Closed { step } | ConnectionError::Timeout { step, .. } => {
            after_options(*step)
        }
        ConnectionError::Io { step, source } => {
            after_options(*step)
                && matches!(
                    source.kind(),
                    std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::BrokenPipe
                        | std::io::ErrorKind::UnexpectedEof
                )
        }
        ConnectionError::Server { step, error } => {
            after_options(*step) && matches!(error.error, DbError::Overloaded)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn closed_or_slow_after_options_is_shed() {
        for step in [SetupStep::Startup, SetupStep::Authenticate] {
            assert_eq!(
                OpenFailure::of(&ConnectionError::Closed { step }),
                OpenFailure::Shed
            );
            assert_eq!(
                OpenFailure::of(&ConnectionError::Timeout {
                    step,
                    after: Duration::from_secs(1)
                }),
                OpenFailure::Shed
            );
            let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
            assert!(is_shed(&ConnectionError::Io {
                step,
                source: reset
            }));
        }
    }

    #[test]
    fn port_and_network_failures_are_not_shed() {
        // A silent port times out at connect or OPTIONS: that is port
        // evidence (see `nat`), not load.
        for step in [SetupStep::Connect, SetupStep::Options, SetupStep::Tls] {
            assert!(!is_shed(&ConnectionError::Closed { step }));
            assert!(!is_shed(&ConnectionError::Timeout {
                step,
                after: Duration::from_secs(1)
            }));
        }
        let other = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(!is_shed(&ConnectionError::Io {
            step: SetupStep::Startup,
            source: other
        }));
    }
}
