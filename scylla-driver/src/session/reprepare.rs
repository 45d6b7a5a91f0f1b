//! Preparing statements again after a node forgot them (a restart empties
//! its prepared statement cache): every request that meets UNPREPARED there
//! would otherwise send its own PREPARE, so a restarted node would get one
//! PREPARE per request in flight, of every statement, from every session.
//!
//! Here a statement is prepared again on a node once per session, however
//! many requests meet UNPREPARED for it at the same time: the first one
//! sends the PREPARE, the others wait for its outcome (within their own
//! deadlines) and then send their request again. A request sent before that
//! PREPARE was answered may still meet UNPREPARED after it ended (the node
//! read it first): it is sent again without another PREPARE, since the node
//! knows the statement since. Only a request sent after the node learned it
//! that still meets UNPREPARED (the node forgot it again) prepares anew. And at most
//! [`MAX_PER_NODE`] PREPAREs of a session are in flight to one node: a
//! restarted node is not flooded with the PREPAREs of every statement at
//! once.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::{watch, Semaphore};

/// PREPAREs of one session in flight to one node, at most.
pub(crate) const MAX_PER_NODE: usize = 8;

/// What a re-preparation ended with, as its waiters see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The node knows the statement again.
    Prepared,
    /// The PREPARE failed: the waiters prepare for themselves.
    Failed,
}

/// Where the waiters of one re-preparation learn its outcome.
type OutcomeRx = watch::Receiver<Option<Outcome>>;

/// Where one statement's re-preparation on one node stands.
#[derive(Debug)]
enum State {
    /// A PREPARE is in flight; its outcome arrives here.
    InFlight(OutcomeRx),
    /// The node answered a PREPARE of it at this instant.
    PreparedAt(Instant),
}

/// The session's re-preparations in progress and done, and its per-node
/// bounds.
#[derive(Debug, Default)]
pub(crate) struct Repreparations {
    /// By node and statement id: one entry per statement a node forgot
    /// (bounded by the session's statements times its nodes).
    states: Mutex<HashMap<(SocketAddr, Bytes), State>>,
    per_node: Mutex<HashMap<SocketAddr, Arc<Semaphore>>>,
}

/// What a request that met UNPREPARED does: prepare (it is the first),
/// wait for the one that does, or just send again (the node learned the
/// statement after this request was sent).
pub(crate) enum Role<'a> {
    /// Send the PREPARE (after taking a [`Leader::permit`]), then
    /// [`Leader::finish`].
    Leader(Leader<'a>),
    /// Wait for the leader's outcome.
    Follower(OutcomeRx),
    /// The node was answered a PREPARE of the statement after this request
    /// was sent: the UNPREPARED is stale, send the request again.
    PreparedSince,
}

/// The request that prepares the statement again for everyone. Dropped
/// without [`finish`](Self::finish) (its request was cancelled), it tells
/// the waiters it failed, so none waits forever.
pub(crate) struct Leader<'a> {
    registry: &'a Repreparations,
    key: (SocketAddr, Bytes),
    tx: Option<watch::Sender<Option<Outcome>>>,
}

impl Repreparations {
    /// The role of a request sent at `sent` that met UNPREPARED for
    /// statement `id` on `node`.
    pub(crate) fn join(&self, node: SocketAddr, id: &[u8], sent: Instant) -> Role<'_> {
        let key = (node, Bytes::copy_from_slice(id));
        let mut map = self.states.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(&key) {
            Some(State::InFlight(rx)) => return Role::Follower(rx.clone()),
            Some(State::PreparedAt(at)) if *at >= sent => return Role::PreparedSince,
            _ => {}
        }
        let (tx, rx) = watch::channel(None);
        map.insert(key.clone(), State::InFlight(rx));
        Role::Leader(Leader {
            registry: self,
            key,
            tx: Some(tx),
        })
    }

    /// The bound on PREPAREs in flight to `node`.
    fn semaphore(&self, node: SocketAddr) -> Arc<Semaphore> {
        self.per_node
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(node)
            .or_insert_with(|| Arc::new(Semaphore::new(MAX_PER_NODE)))
            .clone()
    }

    /// Re-preparations in progress (for tests).
    #[cfg(test)]
    fn in_progress(&self) -> usize {
        self.states
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|s| matches!(s, State::InFlight(_)))
            .count()
    }
}

impl Leader<'_> {
    /// Waits for room among the PREPAREs in flight to the node.
    pub(crate) async fn permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.registry
            .semaphore(self.key.0)
            .acquire_owned()
            .await
            .ok()
    }

    /// Tells the waiters the outcome and ends the re-preparation.
    pub(crate) fn finish(mut self, outcome: Outcome) {
        self.end(outcome);
    }

    fn end(&mut self, outcome: Outcome) {
        if let Some(tx) = self.tx.take() {
            let mut map = self
                .registry
                .states
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if outcome == Outcome::Prepared {
                map.insert(self.key.clone(), State::PreparedAt(Instant::now()));
            } else {
                map.remove(&self.key);
            }
            drop(map);
            let _ = tx.send(Some(outcome));
        }
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        self.end(Outcome::Failed);
    }
}

/// Waits for the leader's outcome (`None`: it went away without one).
pub(crate) async fn outcome(mut rx: OutcomeRx) -> Option<Outcome> {
    match rx.wait_for(Option::is_some).await {
        Ok(v) => v.clone(),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> SocketAddr {
        "127.0.0.1:9042".parse().unwrap()
    }

    #[tokio::test]
    async fn concurrent_requests_share_one_preparation() {
        let r = Repreparations::default();
        let Role::Leader(leader) = r.join(node(), b"id", Instant::now()) else {
            panic!("the first is the leader");
        };
        let followers: Vec<_> = (0..5)
            .map(|_| match r.join(node(), b"id", Instant::now()) {
                Role::Follower(rx) => rx,
                _ => panic!("one leader per statement and node"),
            })
            .collect();
        // Another statement, or another node: a preparation of its own.
        assert!(matches!(
            r.join(node(), b"other", Instant::now()),
            Role::Leader(_)
        ));
        assert_eq!(r.in_progress(), 1, "the other leader was dropped");
        let _permit = leader.permit().await.unwrap();
        leader.finish(Outcome::Prepared);
        for rx in followers {
            assert_eq!(outcome(rx).await, Some(Outcome::Prepared));
        }
        assert_eq!(r.in_progress(), 0);
        // Later, the statement is forgotten again: a new preparation.
        assert!(matches!(
            r.join(node(), b"id", Instant::now()),
            Role::Leader(_)
        ));
    }

    #[tokio::test]
    async fn a_request_sent_before_the_prepare_ended_does_not_prepare_again() {
        let r = Repreparations::default();
        let sent_before = Instant::now();
        let Role::Leader(leader) = r.join(node(), b"id", sent_before) else {
            panic!("the first is the leader");
        };
        leader.finish(Outcome::Prepared);
        // Answered UNPREPARED after the PREPARE ended, but sent before it.
        assert!(matches!(
            r.join(node(), b"id", sent_before),
            Role::PreparedSince
        ));
        // Sent after: the node forgot it again.
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(matches!(
            r.join(node(), b"id", Instant::now()),
            Role::Leader(_)
        ));
    }

    #[tokio::test]
    async fn a_dropped_leader_releases_its_followers() {
        let r = Repreparations::default();
        let leader = r.join(node(), b"id", Instant::now());
        let Role::Follower(rx) = r.join(node(), b"id", Instant::now()) else {
            panic!("second is a follower");
        };
        drop(leader);
        assert_eq!(outcome(rx).await, Some(Outcome::Failed));
    }

    #[tokio::test]
    async fn preparations_to_one_node_are_bounded() {
        let r = Repreparations::default();
        let mut permits = Vec::new();
        for i in 0..MAX_PER_NODE {
            let Role::Leader(l) = r.join(node(), &[i as u8], Instant::now()) else {
                panic!("distinct statements");
            };
            permits.push(l.permit().await.unwrap());
            l.finish(Outcome::Prepared);
        }
        let Role::Leader(l) = r.join(node(), b"one more", Instant::now()) else {
            panic!("distinct statement");
        };
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), l.permit()).await;
        assert!(waited.is_err(), "a ninth PREPARE waits");
        permits.pop();
        assert!(l.permit().await.is_some());
    }
}
