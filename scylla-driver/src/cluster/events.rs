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
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::ReusableBoxFuture;
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
pub struct NodeEvents {
    /// The pending receive, which owns the receiver while it waits and
    /// hands it back with the result (a broadcast receive borrows its
    /// receiver, and a stream must keep it across polls).
    recv: ReusableBoxFuture<'static, Received>,
    missed: u64,
    /// Per node, the pool flips made before the subscription.
    seen: HashMap<Uuid, u64>,
}

/// A receive's result, and the receiver back.
type Received = (Result<NodeEvent, RecvError>, broadcast::Receiver<NodeEvent>);

async fn receive(mut rx: broadcast::Receiver<NodeEvent>) -> Received {
    let result = rx.recv().await;
    (result, rx)
}

impl std::fmt::Debug for NodeEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeEvents")
            .field("missed", &self.missed)
            .finish_non_exhaustive()
    }
}

impl NodeEvents {
    pub(crate) fn new(rx: broadcast::Receiver<NodeEvent>, seen: HashMap<Uuid, u64>) -> Self {
        NodeEvents {
            recv: ReusableBoxFuture::new(receive(rx)),
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

    /// The next event, or `None` once the session is closed or dropped
    /// (what [`next`](Self::next) and the `Stream` implementation poll).
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<NodeEvent>> {
        loop {
            let (result, rx) = std::task::ready!(self.recv.poll(cx));
            self.recv.set(receive(rx));
            match result {
                Ok(event) if self.news(&event) => return Poll::Ready(Some(event)),
                Ok(_) => {}
                Err(RecvError::Lagged(n)) => self.missed += n,
                Err(RecvError::Closed) => return Poll::Ready(None),
            }
        }
    }

    /// The next event; `None` once the session is closed or dropped. A
    /// subscriber that falls more than the buffer behind (256 events) skips
    /// the oldest ones: [`missed`](Self::missed) counts them. (`NodeEvents`
    /// is also a `futures::Stream` of the same events.)
    pub async fn next(&mut self) -> Option<NodeEvent> {
        std::future::poll_fn(|cx| self.poll_event(cx)).await
    }

    /// The next event if one is waiting, without waiting.
    pub fn try_next(&mut self) -> Option<NodeEvent> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match self.poll_event(&mut cx) {
            Poll::Ready(event) => event,
            Poll::Pending => None,
        }
    }

    /// Events skipped because this subscriber fell behind.
    pub fn missed(&self) -> u64 {
        self.missed
    }
}

impl futures_core::Stream for NodeEvents {
    type Item = NodeEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<NodeEvent>> {
        self.get_mut().poll_event(cx)
    }
}
