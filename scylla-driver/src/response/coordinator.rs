//! The node that coordinated a request, in the official `scylla` crate's
//! shape ([`QueryRowsResult::request_coordinator`](super::query_result::QueryRowsResult::request_coordinator)).

use std::net::SocketAddr;
use std::sync::Arc;

use crate::cluster::view::Node;
use crate::result::Coordinated;

/// The node that answered a request, and the connection's shard.
///
/// The node is the one the session's cluster state held when the answer
/// arrived: its host id and address. Its datacenter and rack are not
/// recorded with a result (they are `None` here); find them in
/// [`Session::get_cluster_state`](crate::Session::get_cluster_state) by
/// host id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinator {
    connection_address: SocketAddr,
    node: Arc<Node>,
    shard: Option<u16>,
}

impl Coordinator {
    pub(crate) fn new(address: SocketAddr, who: Coordinated) -> Self {
        Coordinator {
            connection_address: address,
            node: Arc::new(Node::recorded(who.host_id, address)),
            shard: who.shard,
        }
    }

    /// The address of the connection the answer came on (the node's, after
    /// address translation).
    pub fn connection_address(&self) -> SocketAddr {
        self.connection_address
    }

    /// The node: its host id and address (see the type's documentation for
    /// its datacenter and rack).
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// The shard that answered (`None`: the node does not shard, as
    /// Cassandra).
    pub fn shard(&self) -> Option<u16> {
        self.shard
    }
}
