//! Node events for the application: a node the session can reach again or
//! no longer, a node that joined or left the cluster, as the session sees
//! them ([`Session::node_events`](crate::Session::node_events)).
//!
//! - [`NodeEventKind::Added`] / [`NodeEventKind::Removed`]: the session's
//!   view of the topology gained or lost the node (from the server's
//!   topology events and the control connection's checks);
//! - [`NodeEventKind::Up`] / [`NodeEventKind::Down`]: the session's pool to
//!   the node opened its first connection after having none, or lost its
//!   last one. This is the session's own reachability, not the server's
//!   gossip: a node the cluster reports up but the session cannot reach
//!   stays down here (the server's report only makes the pool retry at
//!   once).

use std::collections::HashMap;
use std::net::SocketAddr;

use tokio::sync::broadcast;
use uuid::Uuid;

/// What happened to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeEventKind {
    /// The session has a connection to the node again (or for the first
    /// time).
    Up,
    /// The session lost its last connection to the node.
    Down,
    /// The node joined the session's view of the cluster.
    Added,
    /// The node left the session's view of the cluster.
    Removed,
}

/// One node event (see the [module documentation](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeEvent {
    /// What happened.
    pub kind: NodeEventKind,
    /// The node's host id.
    pub host_id: Uuid,
    /// The address the driver connects to.
    pub address: SocketAddr,
    /// Its datacenter.
    pub datacenter: String,
    /// Its rack.
    pub rack: String,
    /// Up and Down: which flip of the node's pool (between no connection
    /// and some) this is, to skip the ones a subscriber started after.
    pub(crate) flip: u64,
}

/// The node events of a session from the moment of subscription
/// ([`Session::node_events`](crate::Session::node_events)).
///
/// ```no_run
/// # async fn demo(session: &scylla_driver::Session) {
/// use scylla_driver::cluster::events::NodeEventKind;
///
/// let mut events = session.node_events();
/// while let Some(event) = events.next().await {
///     if event.kind == NodeEventKind::Down {
///         eprintln!("lost {} ({}, {})", event.address, event.datacenter, event.rack);
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct NodeEvents {
    rx: broadcast::Receiver<NodeEvent>,
    missed: u64,
    /// Per node, the pool flips made before the subscription.
    seen: HashMap<Uuid, u64>,
}

impl NodeEvents {
    pub(crate) fn new(rx: broadcast::Receiver<NodeEvent>, seen: HashMap<Uuid, u64>) -> Self {
        NodeEvents {
            rx,
            missed: 0,
            seen,
        }
    }

    /// Whether `e` is news: not an Up or Down of a flip made before the
    /// subscription. A node removed since has a new pool if it returns.
    fn news(&mut self, e: &NodeEvent) -> bool {
        match e.kind {
            NodeEventKind::Up | NodeEventKind::Down => {
                self.seen.get(&e.host_id).is_none_or(|&seen| e.flip > seen)
            }
            NodeEventKind::Removed => {
                self.seen.remove(&e.host_id);
                true
            }
            NodeEventKind::Added => true,
        }
    }

    /// The next event; `None` once the session is closed or dropped. A
    /// subscriber that falls more than the buffer behind (256 events) skips
    /// the oldest ones: [`missed`](Self::missed) counts them.
    pub async fn next(&mut self) -> Option<NodeEvent> {
        loop {
            match self.rx.recv().await {
                Ok(event) if self.news(&event) => return Some(event),
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => self.missed += n,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// The next event if one is waiting, without waiting.
    pub fn try_next(&mut self) -> Option<NodeEvent> {
        loop {
            match self.rx.try_recv() {
                Ok(event) if self.news(&event) => return Some(event),
                Ok(_) => {}
                Err(broadcast::error::TryRecvError::Lagged(n)) => self.missed += n,
                Err(_) => return None,
            }
        }
    }

    /// Events skipped because this subscriber fell behind.
    pub fn missed(&self) -> u64 {
        self.missed
    }
}
