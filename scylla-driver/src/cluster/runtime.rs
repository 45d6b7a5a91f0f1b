//! The running cluster: `Cluster` owns the control connection, the tablet
//! store and the task that keeps the [`Snapshot`] current. On a new
//! metadata snapshot the task builds the next state
//! (`Snapshot::build`); on a node's UP event it tells that node's pool
//! to reconnect now; when a pool learns its node's sharding it rebuilds the
//! routing table; on schema changes it updates the tablet store.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use scylla_cql::frame::response::result::{SchemaChange, SchemaChangeTarget, SchemaChangeType};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::{CancellationToken, DropGuard};
use uuid::Uuid;

use super::control::{ControlHandle, NodeEvent};
use super::events::{NodeEvent as AppNodeEvent, NodeEventKind};
use super::state::Snapshot;
use super::system_tables::Metadata;
use super::tablets::{TabletStore, TabletWarmup};
use crate::metrics::Metrics;
use crate::pool::PoolConfig;
use crate::routing::NodeIdx;

/// The control connection, the pools and the current [`Snapshot`].
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) state: Arc<ArcSwap<Snapshot>>,
    pub(crate) control: ControlHandle,
    pub(crate) tablets: Arc<TabletStore>,
    /// The application's node events ([`NodeEvents`](super::events::NodeEvents)):
    /// the worker holds the sender, so subscribers see the end of the
    /// stream when it stops.
    node_events: broadcast::WeakSender<AppNodeEvent>,
    /// Stops the background tasks on [`shutdown`](Self::shutdown).
    cancel: CancellationToken,
    _stop: DropGuard,
}

impl Cluster {
    /// Builds the first state from the control connection's metadata and
    /// starts the task that keeps it current.
    pub(crate) fn start(
        control: ControlHandle,
        updates: watch::Receiver<Arc<Metadata>>,
        pool_config: PoolConfig,
        metrics: Arc<Metrics>,
        local_dc: Option<String>,
        local_rack: Option<String>,
        warmup: TabletWarmup,
    ) -> Cluster {
        // Pools push their sharding as they learn it; the worker rebuilds the
        // routing table with it (the table is the one that routes requests).
        let sharding_changed = Arc::new(tokio::sync::Notify::new());
        let connectivity_changed = Arc::new(tokio::sync::Notify::new());
        let mut pool_config = pool_config;
        pool_config.sharding_changed = Some(sharding_changed.clone());
        pool_config.connectivity_changed = Some(connectivity_changed.clone());
        // The session's pools open their connections within one window.
        pool_config.session_opens = Some(Default::default());
        let first = Snapshot::build(
            control.metadata(),
            None,
            &pool_config,
            &metrics,
            local_dc.as_deref(),
            local_rack.as_deref(),
        );
        let state = Arc::new(ArcSwap::from_pointee(first));
        let cancel = CancellationToken::new();
        let tablets = Arc::new(
            TabletStore::new(state.clone(), metrics.clone())
                .with_node_options(control.options().nodes.clone()),
        );
        let query = control.options().query;
        tokio::spawn(super::tablets::warmup_task(
            tablets.clone(),
            control.clone(),
            warmup,
            query,
            cancel.clone(),
        ));
        let node_events = broadcast::channel(control.options().node_event_buffer.max(1)).0;
        let node_events_weak = node_events.downgrade();
        let worker = Worker {
            state: state.clone(),
            pool_config,
            metrics,
            local_dc,
            local_rack,
            tablets: tablets.clone(),
            node_events,
            reachable: HashMap::new(),
            cancel: cancel.clone(),
        };
        tokio::spawn(worker.run(
            updates,
            control.node_events(),
            control.schema_changes(),
            Notifications {
                sharding_changed,
                connectivity_changed,
            },
            cancel.clone(),
        ));
        Cluster {
            state,
            control,
            tablets,
            node_events: node_events_weak,
            cancel: cancel.clone(),
            _stop: cancel.drop_guard(),
        }
    }

    /// The application's node events from now on (ended at once if the
    /// cluster was shut down).
    pub(crate) fn node_events(&self) -> super::events::NodeEvents {
        let rx = match self.node_events.upgrade() {
            Some(tx) => tx.subscribe(),
            None => broadcast::channel(1).1,
        };
        // The flips already made: their events may still be on their way,
        // and are not news to this subscriber.
        let seen = self
            .state
            .load()
            .nodes
            .iter()
            .map(|n| (n.host_id, n.pool.connectivity_flips()))
            .collect();
        super::events::NodeEvents::new(rx, seen)
    }

    /// Stops everything the cluster runs: the state and tablet tasks, the
    /// control connection, and every node's pool (which closes its
    /// connections); then waits, up to `timeout`, until every pool has
    /// closed its connections. Returns whether they all did.
    pub(crate) async fn shutdown(&self, timeout: Duration) -> bool {
        self.cancel.cancel();
        self.control.shutdown();
        let state = self.state.load_full();
        for n in &state.nodes {
            n.pool.shutdown();
        }
        let mut waits = tokio::task::JoinSet::new();
        for n in &state.nodes {
            let n = n.clone();
            waits.spawn(async move { n.pool.wait_for(timeout, |s| s.is_empty()).await });
        }
        let mut all = true;
        while let Some(joined) = waits.join_next().await {
            all &= joined.unwrap_or(false);
        }
        all
    }

    /// Waits until every node's pool has a connection (or `timeout` passes).
    /// Returns the addresses of the nodes still without one.
    pub(crate) async fn wait_for_pools(&self, timeout: Duration) -> Vec<SocketAddr> {
        let state = self.state.load_full();
        let mut waits = tokio::task::JoinSet::new();
        for n in &state.nodes {
            let n = n.clone();
            waits.spawn(
                async move { (n.address, n.pool.wait_for(timeout, |s| !s.is_empty()).await) },
            );
        }
        let mut missing = Vec::new();
        while let Some(joined) = waits.join_next().await {
            if let Ok((addr, false)) = joined {
                missing.push(addr);
            }
        }
        missing
    }
}

struct Worker {
    state: Arc<ArcSwap<Snapshot>>,
    pool_config: PoolConfig,
    metrics: Arc<Metrics>,
    local_dc: Option<String>,
    local_rack: Option<String>,
    tablets: Arc<TabletStore>,
    node_events: broadcast::Sender<AppNodeEvent>,
    /// How many times each node's pool had flipped between no connection
    /// and some when last looked at (odd: connected).
    reachable: HashMap<Uuid, u64>,
    /// Cancelled when the cluster shuts down: its pools closing then is
    /// not news for the application.
    cancel: CancellationToken,
}

/// What the pools tell the worker.
struct Notifications {
    /// A pool learned (or its node changed) its sharding.
    sharding_changed: Arc<tokio::sync::Notify>,
    /// A pool gained its first connection or lost its last.
    connectivity_changed: Arc<tokio::sync::Notify>,
}

impl Worker {
    async fn run(
        mut self,
        mut updates: watch::Receiver<Arc<Metadata>>,
        mut events: broadcast::Receiver<NodeEvent>,
        mut schema: broadcast::Receiver<SchemaChange>,
        notifications: Notifications,
        cancel: CancellationToken,
    ) {
        let Notifications {
            sharding_changed,
            connectivity_changed,
        } = notifications;
        // Pools learn each node's sharding after their first connection and
        // say so through `sharding_changed`; the routing table carries
        // shards too, so it is rebuilt then (a permit stored while a rebuild
        // ran is not lost: `Notify` keeps it).
        loop {
            tokio::select! {
                // Cancellation first: once the cluster shuts down, the pools'
                // closing is not news for the application.
                biased;
                _ = cancel.cancelled() => break,
                changed = updates.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    let metadata = updates.borrow_and_update().clone();
                    self.rebuild(metadata);
                }
                event = events.recv() => match event {
                    Ok(NodeEvent { address, up: true, .. }) => {
                        let state = self.state.load();
                        for n in state.nodes.iter().filter(|n| n.address.ip() == address.ip()) {
                            tracing::debug!(node = %n.address, "node reported up; reconnecting");
                            n.pool.node_up_hint();
                        }
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                change = schema.recv() => match change {
                    Ok(change) => self.on_schema_change(&change),
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = connectivity_changed.notified() => self.announce_reachability(),
                _ = sharding_changed.notified() => {
                    let state = self.state.load_full();
                    let stale = state.nodes.iter().enumerate().any(|(i, n)| {
                        n.pool.sharder() != state.routing.sharder(NodeIdx(i as u32))
                    });
                    if stale {
                        self.rebuild(state.metadata.clone());
                    }
                }
            }
        }
        for n in self.state.load().nodes.iter() {
            n.pool.shutdown();
        }
    }

    /// Tells the application which nodes the pools can reach now and could
    /// not before, and the reverse.
    /// Every flip since the last look is told, in order (at most the last
    /// two: a node that flipped more often between two looks needs only
    /// its last change told, and the one before, which shows it was gone).
    fn announce_reachability(&mut self) {
        let state = self.state.load_full();
        for n in &state.nodes {
            let now = n.pool.connectivity_flips();
            // After the flips are read: a flip made by the shutdown (which
            // cancels first) shows as cancelled here.
            if self.cancel.is_cancelled() {
                return;
            }
            let before = self.reachable.insert(n.host_id, now).unwrap_or(0);
            for flip in (before + 1).max(now.saturating_sub(1))..=now {
                let kind = if flip % 2 == 1 {
                    NodeEventKind::Up
                } else {
                    NodeEventKind::Down
                };
                tracing::debug!(node = %n.address, ?kind, "node event");
                let _ = self.node_events.send(app_event(kind, n, flip));
            }
        }
    }

    fn rebuild(&mut self, metadata: Arc<Metadata>) {
        let previous = self.state.load_full();
        let next = Snapshot::build(
            metadata,
            Some(&previous),
            &self.pool_config,
            &self.metrics,
            self.local_dc.as_deref(),
            self.local_rack.as_deref(),
        );
        let layout_changed = next.layout != previous.layout;
        let next = Arc::new(next);
        self.state.store(next.clone());
        // Nodes that joined or left the session's view.
        let known = |state: &Snapshot, id: Uuid| state.nodes.iter().any(|n| n.host_id == id);
        for n in next.nodes.iter().filter(|n| !known(&previous, n.host_id)) {
            let _ = self.node_events.send(app_event(NodeEventKind::Added, n, 0));
        }
        for n in previous.nodes.iter().filter(|n| !known(&next, n.host_id)) {
            // Its pool is gone: a node that was up goes down first.
            if let Some(flips) = self.reachable.remove(&n.host_id) {
                if flips % 2 == 1 {
                    let down = app_event(NodeEventKind::Down, n, flips + 1);
                    let _ = self.node_events.send(down);
                }
            }
            let _ = self
                .node_events
                .send(app_event(NodeEventKind::Removed, n, 0));
        }
        self.announce_reachability();
        self.tablets.sync(&previous, &next);
        if layout_changed {
            // Nodes came or went: tablets moved; read them again.
            self.tablets.request_warmup();
        }
    }

    /// DROP TABLE / DROP KEYSPACE forget tablets at once (a table recreated
    /// under the same name before the next refresh must not inherit them);
    /// a created or altered table of a used keyspace is warmed up.
    fn on_schema_change(&self, change: &SchemaChange) {
        let (keyspace, table) = match &change.target {
            SchemaChangeTarget::Keyspace { keyspace } => (keyspace, None),
            SchemaChangeTarget::Table { keyspace, name } => (keyspace, Some(name)),
            _ => return,
        };
        match (change.change, table) {
            (SchemaChangeType::Dropped, Some(t)) => self.tablets.drop_table(keyspace, t),
            (SchemaChangeType::Dropped, None) => self.tablets.drop_keyspace(keyspace),
            (_, Some(_)) if self.tablets.used_keyspaces().contains(keyspace) => {
                self.tablets.request_warmup()
            }
            _ => {}
        }
    }
}

/// The application's event of `kind` about node `n` (`flip`: the pool's
/// flip it reports, for Up and Down).
fn app_event(kind: NodeEventKind, n: &super::state::PooledNode, flip: u64) -> AppNodeEvent {
    AppNodeEvent {
        kind,
        host_id: n.host_id,
        address: n.address,
        datacenter: n.datacenter.clone(),
        rack: n.rack.clone(),
        flip,
    }
}
