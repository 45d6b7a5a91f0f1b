//! The control connection: one connection, to any node, that REGISTERs for
//! cluster events and reads the system tables, keeping a [`Metadata`]
//! snapshot current for the layers above.
//!
//! [`ControlHandle::start`] connects to the first contact point that answers,
//! reads the metadata, publishes it and spawns a task that
//! - refreshes on events, debounced: the first event of a burst starts a
//!   short wait ([`ControlOptions::refresh_debounce`]) and every event until it
//!   ends is served by the same refresh (a DDL storm is one refresh, not one
//!   per statement); schema events re-read only the schema, topology events
//!   only the nodes;
//! - refreshes periodically ([`ControlOptions::refresh_interval`]), which also
//!   repairs what a lost event would have missed;
//! - forwards STATUS_CHANGE events as [`NodeEvent`]s (pools reconnect sooner
//!   to a node that came up, and stop waiting on one that went down);
//! - when the connection dies, or its queries keep failing, reconnects to
//!   another known node (the latest metadata's, then the contact points,
//!   the failed node last), pausing between rounds as the
//!   [`ReconnectPolicy`] says, and re-reads everything on the new connection
//!   (events may have been missed meanwhile).
//!
//! Snapshots are published through an [`ArcSwap`] (read with
//! [`ControlHandle::metadata`]: lock-free) and a `watch` channel (to react to
//! changes). A snapshot equal to the previous one is not republished.
//!
//! # Stopping
//! The task stops, closing the connection, when the last [`ControlHandle`]
//! clone is dropped. Every wait in it (refresh, reconnect, backoff) also
//! watches for that, so the stop is prompt.

mod task;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use scylla_cql::frame::request::EventType;
use scylla_cql::frame::response::result::SchemaChange;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_util::sync::{CancellationToken, DropGuard};
use uuid::Uuid;

use super::system_tables::{
    check_schema_agreement, read_schema, read_topology, wait_for_schema_agreement, Agreement,
    AgreementOptions, Metadata, MetadataError, NodeOptions, QueryOptions, SchemaFetch,
};
use crate::connection::{open, Connection, ConnectionConfig, ConnectionError};
use crate::pool::backoff::{ExponentialBackoff, ReconnectPolicy};

/// How the control connection behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ControlOptions {
    /// Timeout and page size of metadata queries.
    pub query: QueryOptions,
    /// How long to wait after the first event of a burst before refreshing.
    pub refresh_debounce: Duration,
    /// Check the cluster this often: the topology is read again, the schema
    /// only if a node's schema version changed since the last read (events
    /// drive the other refreshes); `None` disables the check.
    pub refresh_interval: Option<Duration>,
    /// Pauses between rounds of reconnect attempts.
    pub reconnect: Arc<dyn ReconnectPolicy>,
    /// Schema agreement checks ([`ControlHandle::agreed_schema_version`]).
    pub agreement: AgreementOptions,
    /// Events buffered between the connection and the control task (more
    /// are dropped; the periodic refresh repairs what they would have done).
    pub event_buffer: usize,
    /// [`NodeEvent`]s buffered per subscriber (a slow subscriber misses the
    /// oldest ones).
    pub node_event_buffer: usize,
    /// Consecutive failed refreshes (on a connection that still looks alive)
    /// after which the control connection moves to another node.
    pub max_refresh_failures: u32,
    /// Address translation and host filter applied to the nodes read (and
    /// to the addresses in events).
    pub nodes: NodeOptions,
    /// Which schema is read: the full model or only what routing needs, of
    /// every keyspace or some.
    pub schema: SchemaFetch,
}

impl Default for ControlOptions {
    /// 50 ms debounce, a check every 60 s, reconnects backing off from
    /// 100 ms to 10 s, 5 s per query, move after 2 failed refreshes.
    fn default() -> Self {
        Self {
            query: QueryOptions::default(),
            refresh_debounce: Duration::from_millis(50),
            refresh_interval: Some(Duration::from_secs(60)),
            reconnect: Arc::new(ExponentialBackoff::default()),
            agreement: AgreementOptions::default(),
            event_buffer: 1024,
            node_event_buffer: 256,
            max_refresh_failures: 2,
            nodes: NodeOptions::default(),
            schema: SchemaFetch::default(),
        }
    }
}

/// A node went up or down (a STATUS_CHANGE event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeEvent {
    /// The node's host id, if the current metadata knows its address.
    pub host_id: Option<Uuid>,
    /// Where the driver connects to it (the metadata's address; for an
    /// unknown node, the event's IP with the control connection's port).
    pub address: SocketAddr,
    /// Up (`true`) or down.
    pub up: bool,
}

/// Why one contact point could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContactError {
    /// Opening the connection failed.
    #[error(transparent)]
    Connect(#[from] ConnectionError),
    /// The connection opened, but reading the metadata failed.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// The node is rejected by the host filter; `accepted` lists the nodes
    /// it knows that the filter accepts (where to go instead).
    #[error("the node is rejected by the host filter ({} accepted nodes known)", .accepted.len())]
    Filtered {
        /// The accepted nodes' addresses.
        accepted: Vec<SocketAddr>,
    },
}

/// A failed attempt at one contact point.
#[derive(Debug)]
pub struct ContactFailure {
    /// The contact point.
    pub address: SocketAddr,
    /// What went wrong.
    pub error: ContactError,
}

/// The control connection failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The session was given no contact point.
    #[error("no contact points were given")]
    EmptyKnownNodesList,
    /// No contact point could be connected to and read.
    #[error("no contact point could be used: {}", Failures(.0))]
    Unreachable(Vec<ContactFailure>),
    /// The control connection is reconnecting.
    #[error("the control connection is not connected")]
    NotConnected,
    /// A metadata query failed.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// The control task has stopped.
    #[error("the control connection has stopped")]
    Stopped,
}

struct Failures<'a>(&'a [ContactFailure]);

impl fmt::Display for Failures<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", c.address, crate::connection::Chain(&c.error))?;
        }
        Ok(())
    }
}

/// What a refresh re-reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Refresh {
    nodes: bool,
    schema: bool,
    /// Re-read the schema only if a node reports another schema version
    /// than the snapshot's nodes did (needs `nodes`).
    schema_if_changed: bool,
    /// Re-read the schema of the keyspaces that events reported changed
    /// (`Shared::stale_keyspaces`); moot with `schema`.
    keyspaces: bool,
}

impl Refresh {
    const ALL: Refresh = Refresh {
        nodes: true,
        schema: true,
        schema_if_changed: false,
        keyspaces: false,
    };

    /// The periodic check: the topology (whose rows carry every node's
    /// schema version), and the schema only if a version changed. On a
    /// stable cluster that is two small queries per period and no schema
    /// read; a missed event is still caught.
    const CHECK: Refresh = Refresh {
        nodes: true,
        schema: false,
        schema_if_changed: true,
        keyspaces: false,
    };

    fn union(self, other: Refresh) -> Refresh {
        Refresh {
            nodes: self.nodes || other.nodes,
            schema: self.schema || other.schema,
            schema_if_changed: self.schema_if_changed || other.schema_if_changed,
            keyspaces: self.keyspaces || other.keyspaces,
        }
    }
}

enum Command {
    /// Everything.
    Refresh(oneshot::Sender<Result<Arc<Metadata>, ControlError>>),
    /// The schema of one keyspace.
    RefreshKeyspace(String, oneshot::Sender<Result<Arc<Metadata>, ControlError>>),
}

/// What the handles and the task share.
struct Shared {
    metadata: ArcSwap<Metadata>,
    watch: watch::Sender<Arc<Metadata>>,
    node_events: broadcast::Sender<NodeEvent>,
    schema_changes: broadcast::Sender<SchemaChange>,
    /// The current connection; `None` while reconnecting.
    connection: ArcSwapOption<Connection>,
    /// IPs that STATUS_CHANGE last reported down.
    down: Mutex<HashSet<IpAddr>>,
    /// Keyspaces whose schema events reported changed since their last
    /// read.
    stale_keyspaces: Mutex<BTreeSet<String>>,
    options: ControlOptions,
}

impl Shared {
    fn stale_keyspaces(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        // Every critical section is one insert, extend or take.
        self.stale_keyspaces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn down(&self) -> std::sync::MutexGuard<'_, HashSet<IpAddr>> {
        // Every critical section is a single insert/remove/lookup: a
        // poisoned set is still consistent.
        self.down.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes `next` unless it equals the current snapshot.
    fn publish(&self, next: Metadata) -> Arc<Metadata> {
        let current = self.metadata.load_full();
        if *current == next {
            return current;
        }
        let next = Arc::new(next);
        self.metadata.store(next.clone());
        self.watch.send_replace(next.clone());
        tracing::debug!(
            nodes = next.nodes.len(),
            keyspaces = next.keyspaces.len(),
            "metadata published"
        );
        next
    }
}

/// A handle to the control connection: the current metadata, its changes,
/// node up/down events, forced refreshes and schema agreement.
///
/// Cheap to clone. The control connection stops when the last clone is
/// dropped.
#[derive(Clone)]
pub struct ControlHandle {
    shared: Arc<Shared>,
    commands: mpsc::Sender<Command>,
    /// Stops the task on [`shutdown`](Self::shutdown).
    cancel: CancellationToken,
    _stop: Arc<DropGuard>,
}

impl fmt::Debug for ControlHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlHandle")
            .field("connected_to", &self.connected_to())
            .field("nodes", &self.shared.metadata.load().nodes.len())
            .finish()
    }
}

impl ControlHandle {
    /// Connects to the first usable contact point (in order), registers for
    /// TOPOLOGY_CHANGE, STATUS_CHANGE and SCHEMA_CHANGE, reads the metadata,
    /// publishes it and spawns the control task (on the current tokio
    /// runtime). Returns the handle and a receiver of every snapshot
    /// published from now on (holding the first one).
    ///
    /// `config` is used for every control connection, with
    /// `register_events`, `events` and `keyspace` overridden.
    ///
    /// Fails with [`ControlError::Unreachable`], listing every contact
    /// point's failure, if none could be used.
    pub async fn start(
        contact_points: Vec<SocketAddr>,
        config: ConnectionConfig,
        options: ControlOptions,
    ) -> Result<(ControlHandle, watch::Receiver<Arc<Metadata>>), ControlError> {
        if contact_points.is_empty() {
            return Err(ControlError::EmptyKnownNodesList);
        }
        let (events_tx, events_rx) = mpsc::channel(options.event_buffer.max(1));
        let mut config = config;
        config.register_events = EventType::ALL.to_vec();
        if options.nodes.client_routes.is_some() {
            // ScyllaDB only: other servers refuse the name, and sessions
            // without client routes do not ask for it.
            config.register_events.push(EventType::ClientRoutesChange);
        }
        config.events = Some(events_tx);
        config.keyspace = None;

        let mut failures = Vec::new();
        let mut first = None;
        // The contact points, then (bounded: each address once) the accepted
        // nodes that a filtered contact point lists.
        let mut candidates = contact_points.clone();
        let mut i = 0;
        while let Some(&address) = candidates.get(i) {
            i += 1;
            match connect_and_read(address, &config, &options).await {
                Ok(ok) => {
                    first = Some(ok);
                    break;
                }
                Err(error) => {
                    tracing::info!(%address, %error, "contact point unusable");
                    if let ContactError::Filtered { accepted } = &error {
                        for a in accepted {
                            if !candidates.contains(a) {
                                candidates.push(*a);
                            }
                        }
                    }
                    failures.push(ContactFailure { address, error });
                }
            }
        }
        let Some((conn, metadata)) = first else {
            return Err(ControlError::Unreachable(failures));
        };
        tracing::info!(peer = %conn.info().peer, nodes = metadata.nodes.len(), "control connection up");

        let metadata = Arc::new(metadata);
        let (watch_tx, watch_rx) = watch::channel(metadata.clone());
        let (node_events, _) = broadcast::channel(options.node_event_buffer.max(1));
        let (schema_changes, _) = broadcast::channel(options.node_event_buffer.max(1));
        let shared = Arc::new(Shared {
            metadata: ArcSwap::new(metadata),
            watch: watch_tx,
            node_events,
            schema_changes,
            connection: ArcSwapOption::new(Some(Arc::new(conn.clone()))),
            down: Mutex::new(HashSet::new()),
            stale_keyspaces: Mutex::new(BTreeSet::new()),
            options,
        });
        let (commands_tx, commands_rx) = mpsc::channel(16);
        let cancel = CancellationToken::new();
        let task = task::ControlTask {
            shared: shared.clone(),
            contact_points,
            config,
            events: events_rx,
            commands: commands_rx,
            cancel: cancel.clone(),
            schedule: shared.options.reconnect.new_schedule(),
        };
        tokio::spawn(task.run(conn));
        Ok((
            ControlHandle {
                shared,
                commands: commands_tx,
                cancel: cancel.clone(),
                _stop: Arc::new(cancel.drop_guard()),
            },
            watch_rx,
        ))
    }

    /// Stops the control connection now (as dropping the last handle
    /// does): its task ends and closes the connection.
    pub(crate) fn shutdown(&self) {
        self.cancel.cancel();
    }

    /// The options it runs with.
    pub(crate) fn options(&self) -> &ControlOptions {
        &self.shared.options
    }

    /// The current snapshot (lock-free).
    pub fn metadata(&self) -> Arc<Metadata> {
        self.shared.metadata.load_full()
    }

    /// A receiver of node up/down events from now on.
    pub fn node_events(&self) -> broadcast::Receiver<NodeEvent> {
        self.shared.node_events.subscribe()
    }

    /// A receiver of SCHEMA_CHANGE events (keyspaces and tables) from now on.
    pub fn schema_changes(&self) -> broadcast::Receiver<SchemaChange> {
        self.shared.schema_changes.subscribe()
    }

    /// The control connection, if connected (for reads besides the
    /// metadata, such as the tablet warm-up).
    pub(crate) fn connection(&self) -> Option<Arc<Connection>> {
        self.shared.connection.load_full().filter(|c| c.is_usable())
    }

    /// The node the control connection is on, if connected.
    pub fn connected_to(&self) -> Option<SocketAddr> {
        self.shared
            .connection
            .load()
            .as_ref()
            .filter(|c| c.is_usable())
            .map(|c| c.info().peer)
    }

    /// Re-reads everything now and returns the resulting snapshot (also
    /// published). Waits for a reconnect in progress to finish first.
    pub async fn refresh(&self) -> Result<Arc<Metadata>, ControlError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Refresh(tx))
            .await
            .map_err(|_| ControlError::Stopped)?;
        rx.await.map_err(|_| ControlError::Stopped)?
    }

    /// Re-reads the schema of `keyspace` now (what a statement that changed
    /// it needs) and returns the resulting snapshot (also published); a
    /// keyspace that no longer exists leaves the snapshot.
    pub async fn refresh_keyspace(&self, keyspace: &str) -> Result<Arc<Metadata>, ControlError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::RefreshKeyspace(keyspace.to_owned(), tx))
            .await
            .map_err(|_| ControlError::Stopped)?;
        rx.await.map_err(|_| ControlError::Stopped)?
    }

    /// Waits until every node not reported down has the same schema version
    /// (see [`wait_for_schema_agreement`]), or the agreement timeout passes
    /// ([`Agreement::Disagree`]). With `expected` (pass the version of the
    /// node that ran a DDL statement), agreement on another version is
    /// [`Agreement::Other`], returned at once.
    pub async fn agreed_schema_version(
        &self,
        expected: Option<Uuid>,
    ) -> Result<Agreement, ControlError> {
        let conn = self.usable_connection()?;
        let metadata = self.metadata();
        let is_reachable = |host: &Uuid| self.counts_for_agreement(&metadata, host);
        let opts = &self.shared.options;
        Ok(
            wait_for_schema_agreement(&conn, &opts.agreement, &opts.query, &is_reachable, expected)
                .await?,
        )
    }

    /// One check without waiting: the schema version every node not
    /// reported down has, or `None` if they disagree.
    pub async fn check_schema_agreement(&self) -> Result<Option<Uuid>, ControlError> {
        let conn = self.usable_connection()?;
        let metadata = self.metadata();
        let is_reachable = |host: &Uuid| self.counts_for_agreement(&metadata, host);
        Ok(check_schema_agreement(&conn, &self.shared.options.query, &is_reachable, None).await?)
    }

    fn usable_connection(&self) -> Result<Arc<Connection>, ControlError> {
        self.shared
            .connection
            .load_full()
            .filter(|c| c.is_usable())
            .ok_or(ControlError::NotConnected)
    }

    /// Whether `host`'s schema version counts for agreement: it is not
    /// known to be down (a node not in the metadata yet counts).
    fn counts_for_agreement(&self, metadata: &Metadata, host: &Uuid) -> bool {
        metadata
            .node(host)
            .is_none_or(|n| !self.shared.down().contains(&n.address.ip()))
    }
}

/// Opens a control connection to `address` and reads the metadata through
/// it; a node the host filter rejects is not kept.
async fn connect_and_read(
    address: SocketAddr,
    config: &ConnectionConfig,
    options: &ControlOptions,
) -> Result<(Connection, Metadata), ContactError> {
    let (query, node_opts) = (&options.query, &options.nodes);
    let conn = open(address, None, config).await?;
    let read = read_topology(&conn, query, node_opts).await?;
    if read.local_rejected {
        conn.close();
        return Err(ContactError::Filtered {
            accepted: read.nodes.iter().map(|n| n.address).collect(),
        });
    }
    let keyspaces = read_schema(&conn, query, &options.schema, None).await?;
    Ok((
        conn,
        Metadata {
            nodes: read.nodes,
            keyspaces,
        },
    ))
}
