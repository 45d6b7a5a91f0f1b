//! [`NodeShared`]: what every task of one node runtime shares (identity,
//! topology, stats, faults, configuration, handler, events, TLS, admission,
//! the stop token and the task tracker).

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admission::Admission;
use crate::clients::ClientRegistry;
use crate::config::ClusterConfig;
use crate::events::EventRegistry;
use crate::faults::FaultState;
use crate::handler::{ConnCtx, RequestHandler};
use crate::stats::NodeStats;
use crate::topology::{NodeInfo, Topology};

/// What every task of one node runtime shares.
pub(crate) struct NodeShared {
    pub(crate) info: Arc<NodeInfo>,
    pub(crate) topology: Arc<Topology>,
    pub(crate) stats: Arc<NodeStats>,
    pub(crate) faults: Arc<FaultState>,
    pub(crate) config: Arc<ClusterConfig>,
    pub(crate) handler: Arc<dyn RequestHandler>,
    pub(crate) events: EventRegistry,
    /// The node's open client connections (`system.clients`).
    pub(crate) clients: Arc<ClientRegistry<ConnCtx>>,
    /// The statements prepared on the node in this lifetime.
    pub(crate) prepared: Arc<crate::prepared_ids::PreparedIds>,
    /// The TLS server side of each shard, when the cluster serves TLS (made
    /// for this node lifetime: its own ticket keys).
    pub(crate) tls: Option<Box<[TlsAcceptor]>>,
    pub(crate) admission: Box<[Admission]>,
    pub(crate) cancel: CancellationToken,
    pub(crate) tracker: TaskTracker,
    pub(crate) next_conn_id: AtomicU64,
    pub(crate) silent_now: AtomicUsize,
}

impl std::fmt::Debug for NodeShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeShared")
            .field("node", &self.info.index)
            .finish_non_exhaustive()
    }
}

impl NodeShared {
    /// The TLS acceptor of `shard` (the last one if out of range), when the
    /// cluster serves TLS.
    pub(crate) fn tls_acceptor(&self, shard: usize) -> Option<&TlsAcceptor> {
        let a = self.tls.as_deref()?;
        a.get(shard).or_else(|| a.last())
    }

    /// The admission gate of `shard` (the last one if out of range, which
    /// cannot happen: shards come from the node's own sharder).
    pub(crate) fn admission(&self, shard: usize) -> &Admission {
        let last = self.admission.len().saturating_sub(1);
        &self.admission[shard.min(last)]
    }
}
