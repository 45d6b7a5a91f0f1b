//! The control task: one loop that owns the control connection, turns
//! events into debounced refreshes, runs periodic and requested refreshes,
//! forwards node status changes, and reconnects elsewhere when the
//! connection dies or keeps failing.
//!
//! Every wait is bounded or watches the cancellation token: the loop ends
//! promptly when the last handle is dropped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use scylla_cql::frame::response::event::{Event, StatusChangeType};
use scylla_cql::frame::response::result::SchemaChangeTarget;
use tokio::sync::mpsc;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{connect_and_read, Command, ControlError, NodeEvent, Refresh, Shared};
use crate::cluster::system_tables::{
    read_schema, read_topology, Metadata, MetadataError, NodeMeta,
};
use crate::connection::{Connection, ConnectionConfig};
use crate::pool::backoff::ReconnectSchedule;

/// The control task's state.
pub(super) struct ControlTask {
    pub(super) shared: Arc<Shared>,
    pub(super) contact_points: Vec<SocketAddr>,
    pub(super) config: ConnectionConfig,
    pub(super) events: mpsc::Receiver<Event>,
    pub(super) commands: mpsc::Receiver<Command>,
    pub(super) cancel: CancellationToken,
    pub(super) schedule: Box<dyn ReconnectSchedule>,
}

/// The pending debounced refresh: when it runs and what it re-reads.
///
/// The first stale-making event of a burst fixes the deadline; later events
/// only widen what the refresh reads, so a steady stream of events cannot
/// postpone the refresh forever.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Debounce {
    due: Option<(Instant, Refresh)>,
}

impl Debounce {
    /// Records that `what` went stale at `now`.
    pub(super) fn add(&mut self, now: Instant, debounce: Duration, what: Refresh) {
        let (at, prev) = self.due.unwrap_or((now + debounce, Refresh::default()));
        self.due = Some((at, prev.union(what)));
    }

    /// When the pending refresh is due.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.due.map(|(at, _)| at)
    }

    /// Takes the pending refresh.
    pub(super) fn take(&mut self) -> Option<Refresh> {
        self.due.take().map(|(_, what)| what)
    }

    /// Forgets the pending refresh (a full read covers it).
    pub(super) fn clear(&mut self) {
        self.due = None;
    }
}

/// Completes with `fut`'s output, or `None` once `cancel` fires.
async fn unless_cancelled<T>(
    cancel: &CancellationToken,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        _ = cancel.cancelled() => None,
        out = fut => Some(out),
    }
}

/// Ticks of `interval`, or never.
async fn tick(interval: &mut Option<Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

impl ControlTask {
    pub(super) async fn run(mut self, mut conn: Connection) {
        let mut periodic = self.shared.options.refresh_interval.map(|period| {
            let period = period.max(Duration::from_millis(1));
            let mut i = tokio::time::interval_at(Instant::now() + period, period);
            i.set_missed_tick_behavior(MissedTickBehavior::Delay);
            i
        });
        let debounce = self.shared.options.refresh_debounce;
        let mut pending = Debounce::default();
        let mut failures = 0u32;
        loop {
            let deadline = pending.deadline();
            let (what, reply) = tokio::select! {
                _ = self.cancel.cancelled() => break,
                _ = conn.closed() => {
                    match self.reconnect(&conn).await {
                        Some(next) => conn = next,
                        None => break,
                    }
                    pending.clear();
                    failures = 0;
                    continue;
                }
                Some(event) = self.events.recv() => {
                    if let Some(what) = self.on_event(event) {
                        pending.add(Instant::now(), debounce, what);
                    }
                    continue;
                }
                _ = sleep_until_opt(deadline) => {
                    let Some(what) = pending.take() else { continue };
                    (what, None)
                }
                _ = tick(&mut periodic) => (Refresh::CHECK, None),
                command = self.commands.recv() => match command {
                    Some(Command::Refresh(reply)) => (Refresh::ALL, Some(reply)),
                    Some(Command::RefreshKeyspace(keyspace, reply)) => {
                        self.shared.stale_keyspaces().insert(keyspace);
                        let what = Refresh {
                            keyspaces: true,
                            ..Default::default()
                        };
                        (what, Some(reply))
                    }
                    // Every handle is gone.
                    None => break,
                },
            };
            let Some(result) =
                unless_cancelled(&self.cancel, refresh(&self.shared, &conn, what)).await
            else {
                break;
            };
            match &result {
                Ok(_) => {
                    failures = 0;
                    if what == Refresh::ALL {
                        // A full read that started after the pending events
                        // arrived already reflects them.
                        pending.clear();
                    }
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(peer = %conn.info().peer, error = %e, failures, "metadata refresh failed");
                    if e.is_connection_failure()
                        || failures >= self.shared.options.max_refresh_failures
                    {
                        // Move to another node: the closed() branch reconnects.
                        conn.close();
                    }
                }
            }
            if let Some(reply) = reply {
                let _ = reply.send(result.map_err(ControlError::from));
            }
        }
        self.shared.connection.store(None);
        tracing::debug!("control connection stopped");
    }

    /// Handles an event; returns what it makes stale.
    pub(super) fn on_event(&self, event: Event) -> Option<Refresh> {
        tracing::debug!(?event, "control connection event");
        match event {
            Event::TopologyChange { .. } => Some(Refresh {
                nodes: true,
                schema: false,
                ..Default::default()
            }),
            Event::StatusChange { change, addr } => {
                let up = change == StatusChangeType::Up;
                // Events name nodes by the address they report: use the
                // translation the latest metadata read made of it (an
                // address not seen there stays as it is: the control
                // connection's own node, or one not known yet).
                let addr = self.shared.options.nodes.translated(addr);
                let metadata = self.shared.metadata.load();
                let known = metadata.node_by_ip(addr.ip());
                {
                    // Kept by the address the driver dials (a routed node's
                    // route, not the address the event names).
                    let ip = known.map_or(addr.ip(), |n| n.address.ip());
                    let mut down = self.shared.down();
                    if up {
                        down.remove(&ip);
                    } else {
                        down.insert(ip);
                    }
                }
                let port = self
                    .shared
                    .connection
                    .load()
                    .as_ref()
                    .map_or(addr.port(), |c| c.info().peer.port());
                let event = NodeEvent {
                    host_id: known.map(|n| n.host_id),
                    address: known.map_or(SocketAddr::new(addr.ip(), port), |n| n.address),
                    up,
                };
                // No subscriber is not an error.
                let _ = self.shared.node_events.send(event);
                // A node we do not know came up: the topology is stale.
                (up && known.is_none()).then_some(Refresh {
                    nodes: true,
                    schema: false,
                    ..Default::default()
                })
            }
            Event::SchemaChange(change) => {
                let keyspace = match &change.target {
                    SchemaChangeTarget::Keyspace { keyspace }
                    | SchemaChangeTarget::Table { keyspace, .. }
                    | SchemaChangeTarget::Type { keyspace, .. } => keyspace.clone(),
                    // Functions and aggregates are not part of the snapshot.
                    _ => return None,
                };
                if matches!(
                    change.target,
                    SchemaChangeTarget::Keyspace { .. } | SchemaChangeTarget::Table { .. }
                ) {
                    // No subscriber is not an error.
                    let _ = self.shared.schema_changes.send(change);
                }
                // Only that keyspace is read again.
                self.shared.stale_keyspaces().insert(keyspace);
                Some(Refresh {
                    keyspaces: true,
                    ..Default::default()
                })
            }
            // A route was inserted, updated or deleted: the topology read
            // reads the routes too.
            Event::ClientRoutesChange { .. }
                if self.shared.options.nodes.client_routes.is_some() =>
            {
                Some(Refresh {
                    nodes: true,
                    schema: false,
                    ..Default::default()
                })
            }
            Event::ClientRoutesChange { .. } => None,
        }
    }

    /// Reconnects to another node; `None` if stopped meanwhile. Commands
    /// that arrive while no node answers are refused as not connected.
    async fn reconnect(&mut self, failed: &Connection) -> Option<Connection> {
        let failed_addr = failed.info().peer;
        self.shared.connection.store(None);
        tracing::info!(peer = %failed_addr, reason = ?failed.broken().map(|b| b.reason().to_string()), "control connection lost; reconnecting");
        loop {
            for address in self.candidates(failed_addr) {
                let attempt = connect_and_read(address, &self.config, &self.shared.options);
                match unless_cancelled(&self.cancel, attempt).await? {
                    Ok((conn, metadata)) => {
                        self.schedule.reset();
                        // The whole schema was read.
                        self.shared.stale_keyspaces().clear();
                        self.shared.connection.store(Some(Arc::new(conn.clone())));
                        self.shared.publish(metadata);
                        tracing::info!(peer = %address, "control connection up");
                        return Some(conn);
                    }
                    Err(error) => {
                        tracing::info!(%address, %error, "control connection attempt failed")
                    }
                }
            }
            let pause = tokio::time::sleep(self.schedule.next_delay());
            tokio::pin!(pause);
            loop {
                tokio::select! {
                    _ = self.cancel.cancelled() => return None,
                    _ = &mut pause => break,
                    command = self.commands.recv() => match command {
                        Some(Command::Refresh(reply) | Command::RefreshKeyspace(_, reply)) => {
                            let _ = reply.send(Err(ControlError::NotConnected));
                        }
                        None => return None,
                    },
                }
            }
        }
    }

    /// Where to reconnect, in order: the known nodes not reported down
    /// (shuffled, so that many clients spread over the cluster), those
    /// reported down, the contact points, and the failed node last.
    pub(super) fn candidates(&self, failed: SocketAddr) -> Vec<SocketAddr> {
        let metadata = self.shared.metadata.load();
        let down = self.shared.down().clone();
        let mut known: Vec<SocketAddr> = metadata.nodes.iter().map(|n| n.address).collect();
        fastrand::shuffle(&mut known);
        known.sort_by_key(|a| down.contains(&a.ip()));
        let mut out: Vec<SocketAddr> =
            Vec::with_capacity(known.len() + self.contact_points.len() + 1);
        for a in known.into_iter().chain(self.contact_points.iter().copied()) {
            if a != failed && !out.contains(&a) {
                out.push(a);
            }
        }
        out.push(failed);
        out
    }
}

/// Re-reads what `what` says (the rest is kept from the current snapshot)
/// and publishes the result.
async fn refresh(
    shared: &Shared,
    conn: &Connection,
    what: Refresh,
) -> Result<Arc<Metadata>, MetadataError> {
    let q = &shared.options.query;
    let current = shared.metadata.load_full();
    let nodes = if what.nodes {
        let read = read_topology(conn, q, &shared.options.nodes).await?;
        if read.local_rejected {
            // The filter rejects this node now: move to an accepted one.
            tracing::info!(peer = %conn.info().peer, "control connection's node rejected by the host filter; moving");
            conn.close();
        }
        if route_moved_away(&current, &read.nodes, read.local, conn.info().peer) {
            // The control connection came in through this node's client
            // route, and the route moved: follow it (the old endpoint may be
            // going away), as the node's pool does.
            tracing::info!(peer = %conn.info().peer, "control connection's node has a new client route; moving");
            conn.close();
        }
        read.nodes
    } else {
        current.nodes.clone()
    };
    let fetch = &shared.options.schema;
    let keyspaces = if what.schema
        || (what.schema_if_changed && schema_versions_differ(&current.nodes, &nodes))
    {
        // Covers every keyspace events reported changed.
        let stale = std::mem::take(&mut *shared.stale_keyspaces());
        match read_schema(conn, q, fetch, None).await {
            Ok(read) => read,
            Err(e) => {
                shared.stale_keyspaces().extend(stale);
                return Err(e);
            }
        }
    } else if what.keyspaces || !shared.stale_keyspaces().is_empty() {
        // (Also when an earlier read of them failed.)
        let stale: Vec<String> = std::mem::take(&mut *shared.stale_keyspaces())
            .into_iter()
            .collect();
        match read_schema(conn, q, fetch, Some(&stale)).await {
            Ok(read) => {
                // A keyspace read again replaces the one known; one that
                // is gone (dropped) is not in `read`.
                let mut keyspaces = current.keyspaces.clone();
                for name in &stale {
                    keyspaces.remove(name);
                }
                keyspaces.extend(read);
                keyspaces
            }
            Err(e) => {
                // Read again at the next refresh.
                shared.stale_keyspaces().extend(stale);
                return Err(e);
            }
        }
    } else {
        current.keyspaces.clone()
    };
    Ok(shared.publish(Metadata { nodes, keyspaces }))
}

/// Whether the control connection (to `peer`, on node `local`) came in
/// through that node's client route in `old`, and `new` routes the node
/// elsewhere. A connection through some other endpoint (a contact point
/// that is no node's route) stays.
pub(super) fn route_moved_away(
    old: &Metadata,
    new: &[NodeMeta],
    local: Uuid,
    peer: SocketAddr,
) -> bool {
    let was_route = old
        .node(&local)
        .is_some_and(|n| n.via_client_route && n.address == peer);
    let now = new
        .binary_search_by_key(&local, |n| n.host_id)
        .ok()
        .and_then(|i| new.get(i));
    was_route && now.is_some_and(|n| n.via_client_route && n.address != peer)
}

/// Whether a node was added or removed, or reports another schema version,
/// between `old` and `new` (both sorted by host id, as snapshots are).
pub(super) fn schema_versions_differ(old: &[NodeMeta], new: &[NodeMeta]) -> bool {
    old.len() != new.len()
        || old
            .iter()
            .zip(new)
            .any(|(a, b)| (a.host_id, a.schema_version) != (b.host_id, b.schema_version))
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
