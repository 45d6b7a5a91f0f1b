//! Which protocol version a connection offers: pinned by the user, or
//! negotiated once per session and remembered.
//!
//! Negotiation offers the newest version this driver speaks (v5). A server
//! that refuses it (ScyllaDB and Cassandra 3 answer v5 with a protocol
//! error) gets the next older version at once, on a new connection to the
//! same address, and the outcome is remembered: every later connection of
//! the session (pools, reconnects) starts with the version that worked, so
//! the extra round trip is paid on the first connection only.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use scylla_cql::frame::ProtocolVersion;

/// The protocol version connections offer. Cloning shares what was learned
/// (a session's connection configs are clones of one).
///
/// ```
/// use scylla_driver::connection::ProtocolChoice;
/// use scylla_cql::frame::ProtocolVersion;
///
/// let negotiated = ProtocolChoice::negotiate();
/// assert_eq!(negotiated.offer(), ProtocolVersion::V5);
/// let pinned = ProtocolChoice::pinned(ProtocolVersion::V4);
/// assert_eq!(pinned.offer(), ProtocolVersion::V4);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ProtocolChoice {
    pinned: Option<ProtocolVersion>,
    /// The version number that last worked or was last fallen back to;
    /// 0 before the first connection.
    learned: Arc<AtomicU8>,
}

impl ProtocolChoice {
    /// Offer the newest version and fall back when a server refuses it.
    pub fn negotiate() -> Self {
        Self::default()
    }

    /// Always `version`: a server that refuses it fails the connection.
    pub fn pinned(version: ProtocolVersion) -> Self {
        Self {
            pinned: Some(version),
            learned: Arc::default(),
        }
    }

    /// The pinned version, if any.
    pub fn pinned_version(&self) -> Option<ProtocolVersion> {
        self.pinned
    }

    /// The version the next connection offers first.
    pub fn offer(&self) -> ProtocolVersion {
        if let Some(v) = self.pinned {
            return v;
        }
        ProtocolVersion::from_number(self.learned.load(Ordering::Relaxed))
            .unwrap_or(ProtocolVersion::NEWEST)
    }

    /// What negotiation has settled on so far (`None`: nothing yet, or
    /// pinned).
    pub fn learned(&self) -> Option<ProtocolVersion> {
        ProtocolVersion::from_number(self.learned.load(Ordering::Relaxed))
    }

    /// A server refused `offered`: the version to try next (and for every
    /// later connection), or `None` when pinned or nothing older exists.
    pub(crate) fn refused(&self, offered: ProtocolVersion) -> Option<ProtocolVersion> {
        if self.pinned.is_some() {
            return None;
        }
        let older = offered.older()?;
        // Only ever lower: a concurrent connection may have settled lower
        // already.
        self.learned
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
                (cur == 0 || cur > older.number()).then_some(older.number())
            })
            .ok();
        Some(older)
    }

    /// A connection in `version` was set up: remember it if nothing was.
    pub(crate) fn accepted(&self, version: ProtocolVersion) {
        let _ = self.learned.compare_exchange(
            0,
            version.number(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_falls_back_once_and_remembers() {
        let choice = ProtocolChoice::negotiate();
        let other = choice.clone();
        assert_eq!(choice.offer(), ProtocolVersion::V5);
        assert_eq!(
            choice.refused(ProtocolVersion::V5),
            Some(ProtocolVersion::V4)
        );
        // Shared with clones: the next connection starts at v4.
        assert_eq!(other.offer(), ProtocolVersion::V4);
        assert_eq!(other.refused(ProtocolVersion::V4), None);
        other.accepted(ProtocolVersion::V4);
        assert_eq!(choice.learned(), Some(ProtocolVersion::V4));
    }

    #[test]
    fn accepted_is_remembered_and_pinned_never_falls_back() {
        let choice = ProtocolChoice::negotiate();
        choice.accepted(ProtocolVersion::V5);
        assert_eq!(choice.offer(), ProtocolVersion::V5);
        let pinned = ProtocolChoice::pinned(ProtocolVersion::V5);
        assert_eq!(pinned.refused(ProtocolVersion::V5), None);
        assert_eq!(pinned.offer(), ProtocolVersion::V5);
    }
}
