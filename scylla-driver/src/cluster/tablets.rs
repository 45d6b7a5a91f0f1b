//! Tablet routing state of the session: per (keyspace, table) a slot
//! holding an immutable [`TabletMap`] snapshot, kept current by three
//! sources, and the eager warm-up.
//!
//! - **Learning** ([`TabletStore::learn`]): a `tablets-routing-v1` payload on
//!   a response (the request was misrouted), or a `tablets-routing-v2` one
//!   (the request's tablet version was stale), replaces the overlapping
//!   tablets; a v2 tablet keeps its version and its replica order.
//! - **Warm-up** (`warm_up`): reading `system.tablets` through the control
//!   connection, at session start, after a topology change, after a schema
//!   change in a keyspace the session uses, and when a statement of a new
//!   keyspace is prepared, so that the first requests are routed right.
//!   Which keyspaces: see [`TabletWarmup`]. Failures only log.
//! - **Invalidation** (`TabletStore::sync`, [`TabletStore::drop_keyspace`],
//!   [`TabletStore::drop_table`]): DROP TABLE / DROP KEYSPACE empty the
//!   slots; a new node numbering (the cluster state was rebuilt with other
//!   nodes) re-resolves every map, dropping tablets that name a removed node.
//!
//! Requests read a slot with one `ArcSwap` load (no lock, no allocation):
//! the slot is resolved once per prepared statement, and a snapshot's node
//! indices are only trusted when its `layout` matches the cluster state's
//! (otherwise the tablet counts as unknown until the re-resolution lands).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::control::ControlHandle;
use super::state::Snapshot;
use super::system_tables::tablets::{TabletRowsReader, TABLETS_QUERY};
use super::system_tables::{Metadata, MetadataError, NodeOptions, QueryOptions};
use crate::metrics::Metrics;
use crate::routing::tablets::{ResolvedTablets, TabletTable};
use crate::routing::{Tablet, TabletMap};

/// Which keyspaces' tablets the session reads from `system.tablets` ahead
/// of the first requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TabletWarmup {
    /// Every keyspace that uses tablets.
    All,
    /// The session's keyspace and the keyspaces of prepared statements (the
    /// default).
    #[default]
    UsedKeyspaces,
    /// None: tablets are only learned from misrouted requests.
    Off,
}

/// Every tablet slot of a session.
#[derive(Debug)]
pub struct TabletStore {
    tables: RwLock<HashMap<(String, String), Arc<TabletTable>>>,
    /// Keyspaces the session uses (its keyspace, prepared statements').
    used: Mutex<BTreeSet<String>>,
    state: Arc<ArcSwap<Snapshot>>,
    metrics: Arc<Metrics>,
    warmup: Notify,
    /// Warm-ups asked for so far.
    warmups_requested: AtomicU64,
    /// `warmups_requested` when the latest warm-up started: a warm-up
    /// asked for before that one started is served by it.
    warmups_served: AtomicU64,
    /// A topology refresh asked for an unknown host is under way.
    refreshing: AtomicBool,
    /// Which hosts the host filter left out (replicas on them are skipped
    /// without asking for a refresh).
    nodes: NodeOptions,
}

/// What learning a tablet found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Learned {
    /// A replica names a host the cluster state does not know (refresh the
    /// topology; the replica was skipped).
    pub unknown_host: bool,
}

impl TabletStore {
    pub(crate) fn new(state: Arc<ArcSwap<Snapshot>>, metrics: Arc<Metrics>) -> Self {
        Self {
            tables: RwLock::new(HashMap::new()),
            used: Mutex::new(BTreeSet::new()),
            state,
            metrics,
            warmup: Notify::new(),
            warmups_requested: AtomicU64::new(0),
            warmups_served: AtomicU64::new(0),
            refreshing: AtomicBool::new(false),
            nodes: NodeOptions::default(),
        }
    }

    /// The same store, told which hosts the host filter leaves out.
    pub(crate) fn with_node_options(mut self, nodes: NodeOptions) -> Self {
        self.nodes = nodes;
        self
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<(String, String), Arc<TabletTable>>> {
        // Critical sections are single map operations: a poisoned map is
        // still consistent.
        self.tables.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, HashMap<(String, String), Arc<TabletTable>>> {
        self.tables.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The slot of `keyspace.table`, if a request or a warm-up created it.
    pub(crate) fn existing(&self, keyspace: &str, table: &str) -> Option<Arc<TabletTable>> {
        self.read()
            .get(&(keyspace.to_owned(), table.to_owned()))
            .cloned()
    }

    /// The slot of `keyspace.table`, created if new (empty, enabled if the
    /// metadata says the keyspace uses tablets). Called once per prepared
    /// statement, not per request.
    pub fn table(&self, keyspace: &str, table: &str) -> Arc<TabletTable> {
        let key = (keyspace.to_owned(), table.to_owned());
        if let Some(t) = self.read().get(&key) {
            return t.clone();
        }
        let (enabled, leader_first) = self
            .state
            .load()
            .metadata
            .keyspaces
            .get(keyspace)
            .map_or((false, false), |k| (k.tablets, k.strongly_consistent));
        self.write()
            .entry(key)
            .or_insert_with(|| {
                let t = TabletTable::new(keyspace, table, enabled);
                t.set_leader_first(leader_first);
                Arc::new(t)
            })
            .clone()
    }

    /// Records that the session uses `keyspace`; returns whether it is new
    /// (the caller then asks for a warm-up).
    pub(crate) fn use_keyspace(&self, keyspace: &str) -> bool {
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(keyspace.to_owned())
    }

    /// The keyspaces the session uses.
    pub fn used_keyspaces(&self) -> BTreeSet<String> {
        self.used.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Asks the warm-up task for a warm-up (coalesced with pending ones).
    pub(crate) fn request_warmup(&self) {
        self.warmups_requested.fetch_add(1, Ordering::AcqRel);
        self.warmup.notify_one();
    }

    /// Records that a warm-up starts now (serving every request so far).
    fn warmup_starts(&self) {
        let requested = self.warmups_requested.load(Ordering::Acquire);
        self.warmups_served.fetch_max(requested, Ordering::AcqRel);
    }

    /// Whether every requested warm-up has started since it was requested.
    fn warmups_served(&self) -> bool {
        self.warmups_served.load(Ordering::Acquire)
            >= self.warmups_requested.load(Ordering::Acquire)
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// Number of tablets known over all tables.
    pub fn tablets_known(&self) -> usize {
        self.read().values().map(|t| t.snapshot().map.len()).sum()
    }

    fn update_known(&self, before: usize, after: usize) {
        // Two's complement: adding the wrapped difference subtracts.
        let delta = (after as u64).wrapping_sub(before as u64);
        let now = self
            .metrics
            .tablets_known
            .fetch_add(delta, Ordering::Relaxed)
            .wrapping_add(delta);
        crate::metrics::record::tablets_known(now);
    }

    /// Replaces `slot`'s map by `f(current map, state)`, resolved against
    /// the current cluster state.
    fn update(&self, slot: &TabletTable, f: impl Fn(&TabletMap, &Snapshot) -> TabletMap) {
        let sizes = slot.update(|current| {
            let state = self.state.load();
            let resolve = |h: &uuid::Uuid| state.node_of_host(h);
            // A snapshot of another numbering is re-resolved first.
            let base = if current.layout == state.layout {
                None
            } else {
                Some(current.map.reresolve(&resolve))
            };
            let map = f(base.as_ref().unwrap_or(&current.map), &state);
            ResolvedTablets {
                layout: state.layout,
                map,
            }
        });
        self.update_known(sizes.0, sizes.1);
    }

    /// Inserts a tablet learned from a response for `slot`'s table (the
    /// tablets it overlaps go). Marks the table as a tablet table.
    pub fn learn(&self, slot: &TabletTable, tablet: Tablet) -> Learned {
        slot.set_uses_tablets(true);
        let unknown_host = {
            let state = self.state.load();
            tablet
                .replicas
                .iter()
                .any(|(h, _)| state.node_of_host(h).is_none() && !self.nodes.is_rejected(h))
        };
        self.update(slot, |map, state| {
            map.with_tablet(tablet.clone(), &|h| state.node_of_host(h))
        });
        Learned { unknown_host }
    }

    /// Replaces the tablets of `keyspace.table` (a warm-up read them all).
    /// A tablet learned from a v2 payload that `system.tablets` still
    /// describes alike (same range, same replicas) is kept as learned: its
    /// version and its replica order (the leader first on a strongly
    /// consistent table), which `system.tablets` does not have.
    pub fn replace(&self, keyspace: &str, table: &str, tablets: Vec<Tablet>) {
        let slot = self.table(keyspace, table);
        slot.set_uses_tablets(true);
        self.update(&slot, |current, state| {
            let kept = tablets.iter().map(|t| match current.tablet(t.last_token) {
                Some(old) if old.version.is_some() && same_tablet(&old, t) => old,
                _ => t.clone(),
            });
            TabletMap::from_tablets(kept, &|h| state.node_of_host(h))
        });
    }

    fn clear(&self, slot: &TabletTable) {
        let before = slot.clear();
        self.update_known(before, 0);
    }

    /// Forgets the tablets of `keyspace.table` (DROP TABLE).
    pub fn drop_table(&self, keyspace: &str, table: &str) {
        let slot = self
            .read()
            .get(&(keyspace.to_owned(), table.to_owned()))
            .cloned();
        if let Some(slot) = slot {
            tracing::debug!(%keyspace, %table, "table dropped; forgetting its tablets");
            self.clear(&slot);
        }
    }

    /// Forgets the tablets of every table of `keyspace` (DROP KEYSPACE).
    pub fn drop_keyspace(&self, keyspace: &str) {
        let slots: Vec<Arc<TabletTable>> = self
            .read()
            .values()
            .filter(|t| t.keyspace() == keyspace)
            .cloned()
            .collect();
        for slot in slots {
            self.clear(&slot);
        }
    }

    /// Follows a new cluster state: which keyspaces use tablets, which
    /// tables are gone (their tablets dropped), and a new node numbering
    /// (every map re-resolved, tablets naming removed nodes dropped).
    pub(crate) fn sync(&self, previous: &Snapshot, state: &Snapshot) {
        let slots: Vec<Arc<TabletTable>> = self.read().values().cloned().collect();
        for slot in slots {
            let ks = state.metadata.keyspaces.get(slot.keyspace());
            // The metadata decides for the keyspaces it knows (a keyspace
            // recreated with vnodes, its tablets forgotten by the DROP,
            // stops routing by tablets), unless tablets were learned: the
            // server sent them, whatever `scylla_keyspaces` said.
            if let Some(ks) = ks {
                slot.set_uses_tablets(ks.tablets || !slot.snapshot().map.is_empty());
                slot.set_leader_first(ks.strongly_consistent);
            }
            let exists = |s: &Snapshot| s.metadata.table(slot.keyspace(), slot.table()).is_some();
            // Only a disappearance counts (a table created since the state's
            // metadata was read is not gone).
            if exists(previous) && !exists(state) {
                if !slot.snapshot().map.is_empty() {
                    tracing::debug!(keyspace = %slot.keyspace(), table = %slot.table(), "table gone; forgetting its tablets");
                    self.clear(&slot);
                }
                continue;
            }
            if slot.snapshot().layout != state.layout {
                self.update(&slot, |map, _| map.clone());
            }
        }
    }

    /// Starts a topology refresh (one at a time) because a payload named a
    /// host the cluster state does not know.
    pub(crate) fn refresh_for_unknown_host(self: &Arc<Self>, control: &ControlHandle) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let control = control.clone();
        let me = self.clone();
        tokio::spawn(async move {
            tracing::debug!("a tablet names an unknown host; refreshing the topology");
            if let Err(e) = control.refresh().await {
                tracing::warn!(error = %e, "topology refresh for an unknown tablet replica failed");
            }
            me.refreshing.store(false, Ordering::Release);
        });
    }
}

/// Whether `a` and `b` have the same range and the same replicas, in any
/// order.
fn same_tablet(a: &Tablet, b: &Tablet) -> bool {
    a.first_token == b.first_token
        && a.last_token == b.last_token
        && a.replicas.len() == b.replicas.len()
        && a.replicas.iter().all(|r| b.replicas.contains(r))
}

/// Reads `system.tablets` through the control connection and fills the maps
/// of the keyspaces `mode` selects (`UsedKeyspaces` for `Off`: an explicit
/// warm-up still reads the used ones). Returns the rows read.
pub(crate) async fn warm_up(
    store: &TabletStore,
    control: &ControlHandle,
    mode: TabletWarmup,
    query: &QueryOptions,
) -> Result<u64, MetadataError> {
    store.warmup_starts();
    let metadata: Arc<Metadata> = control.metadata();
    let tablet_keyspaces: BTreeSet<String> = metadata
        .keyspaces
        .iter()
        .filter(|(_, k)| k.tablets)
        .map(|(n, _)| n.clone())
        .collect();
    let wanted: BTreeSet<String> = match mode {
        TabletWarmup::All => tablet_keyspaces,
        TabletWarmup::UsedKeyspaces | TabletWarmup::Off => store
            .used_keyspaces()
            .intersection(&tablet_keyspaces)
            .cloned()
            .collect(),
    };
    if wanted.is_empty() {
        return Ok(0);
    }
    let Some(conn) = control.connection() else {
        tracing::debug!("tablet warm-up skipped: the control connection is down");
        return Ok(0);
    };
    let keep = |ks: &str| wanted.contains(ks);
    let mut reader = TabletRowsReader::new(&keep);
    super::system_tables::for_each_page(&conn, TABLETS_QUERY, query, |page| reader.page(&page))
        .await?;
    let rows = reader.rows;
    let tables = reader.tables;
    store
        .metrics
        .tablet_warmup_rows
        .fetch_add(rows, Ordering::Relaxed);
    for ((ks, table), tablets) in tables {
        tracing::debug!(keyspace = %ks, %table, tablets = tablets.len(), "tablets warmed up");
        store.replace(&ks, &table, tablets);
    }
    Ok(rows)
}

/// The background warm-up: runs [`warm_up`] whenever asked
/// (`TabletStore::request_warmup`), coalescing requests that arrive
/// within a short delay. Failures are logged.
pub(crate) async fn warmup_task(
    store: Arc<TabletStore>,
    control: ControlHandle,
    mode: TabletWarmup,
    query: QueryOptions,
    cancel: CancellationToken,
) {
    if mode == TabletWarmup::Off {
        return;
    }
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = store.warmup.notified() => {}
        }
        // Let a burst of triggers (DDL, prepares) settle into one read.
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        if store.warmups_served() {
            continue; // a warm-up started meanwhile (e.g. inline at start)
        }
        let run = warm_up(&store, &control, mode, &query);
        tokio::select! {
            _ = cancel.cancelled() => return,
            result = run => match result {
                Ok(rows) => tracing::debug!(rows, "tablet warm-up done"),
                Err(e) => tracing::warn!(error = %e, "tablet warm-up failed"),
            },
        }
    }
}

/// Counts tablets learned from payloads (misroutes observed).
pub(crate) fn count_payload(metrics: &Metrics) {
    metrics.tablet_payloads.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::SocketAddr;

    use scylla_cql::token::Token;
    use uuid::Uuid;

    use super::*;
    use crate::cluster::system_tables::{KeyspaceMeta, NodeMeta, TableMeta};
    use crate::pool::PoolConfig;
    use crate::routing::{NodeIdx, ReplicationStrategy};

    fn metadata(hosts: &[u128], with_table: bool) -> Arc<Metadata> {
        let nodes = hosts
            .iter()
            .map(|&h| NodeMeta {
                host_id: Uuid::from_u128(h),
                // Nothing listens there: the pools just keep backing off.
                address: SocketAddr::from(([127, 0, 0, 1], 1)),
                datacenter: "dc1".into(),
                rack: "r1".into(),
                tokens: vec![Token(h as i64)],
                schema_version: None,
                release_version: None,
                via_client_route: false,
                own_address: None,
            })
            .collect();
        let mut tables = BTreeMap::new();
        if with_table {
            tables.insert("t".to_owned(), TableMeta::default());
        }
        let mut keyspaces = BTreeMap::new();
        keyspaces.insert(
            "ks".to_owned(),
            KeyspaceMeta {
                schema: None,
                strategy: ReplicationStrategy::Simple { rf: 3 },
                tables,
                tablets: true,
                strongly_consistent: false,
            },
        );
        Arc::new(Metadata { nodes, keyspaces })
    }

    fn tablet(first: i64, last: i64, hosts: &[(u128, u16)]) -> Tablet {
        Tablet {
            first_token: Token(first),
            last_token: Token(last),
            replicas: hosts
                .iter()
                .map(|&(h, s)| (Uuid::from_u128(h), s))
                .collect(),
            version: None,
        }
    }

    #[tokio::test]
    async fn learn_reresolve_and_invalidate() {
        let metrics = Arc::new(Metrics::default());
        let config = PoolConfig::default();
        let first = Snapshot::build(
            metadata(&[1, 2, 3], true),
            None,
            &config,
            &metrics,
            None,
            None,
        );
        let swap = Arc::new(ArcSwap::from_pointee(first));
        let store = TabletStore::new(swap.clone(), metrics.clone());
        let slot = store.table("ks", "t");
        assert!(slot.uses_tablets());
        assert!(Arc::ptr_eq(&slot, &store.table("ks", "t")));

        let layout = swap.load().layout;
        let learned = store.learn(&slot, tablet(0, 100, &[(2, 5), (9, 1)]));
        assert!(learned.unknown_host);
        let learned = store.learn(&slot, tablet(100, 200, &[(1, 0), (3, 7)]));
        assert!(!learned.unknown_host);
        // A replica on a host the filter left out is expected: no refresh.
        let nodes = NodeOptions::default();
        nodes.set_rejected([Uuid::from_u128(9)].into_iter().collect());
        let filtered =
            TabletStore::new(swap.clone(), Arc::new(Metrics::default())).with_node_options(nodes);
        let fslot = filtered.table("ks", "t");
        assert!(
            !filtered
                .learn(&fslot, tablet(0, 100, &[(2, 5), (9, 1)]))
                .unknown_host
        );
        assert!(
            filtered
                .learn(&fslot, tablet(0, 100, &[(2, 5), (8, 1)]))
                .unknown_host
        );
        let snap = slot.snapshot();
        let r = snap.lookup(layout, Token(50)).unwrap();
        assert_eq!((r.nodes, r.shards), (&[NodeIdx(1)][..], &[5u16][..]));
        assert!(snap.lookup(layout.wrapping_add(1), Token(50)).is_none());
        assert_eq!(metrics.tablets_known.load(Ordering::Relaxed), 2);

        // Node 2 leaves: its tablet goes, the other is renumbered.
        let previous = swap.load_full();
        let next = Snapshot::build(
            metadata(&[1, 3], true),
            Some(&previous),
            &config,
            &metrics,
            None,
            None,
        );
        assert_ne!(next.layout, previous.layout);
        // Per-node load follows its node (by host id) into the new numbering.
        assert_eq!(next.loads.len(), 2);
        assert!(Arc::ptr_eq(&next.loads[0], &previous.loads[0]));
        assert!(Arc::ptr_eq(&next.loads[1], &previous.loads[2]));
        // The local rack resolves within the local datacenter only.
        let rack = |dc: Option<&str>, rack: Option<&str>| {
            let s = Snapshot::build(
                metadata(&[1, 3], true),
                Some(&previous),
                &config,
                &metrics,
                dc,
                rack,
            );
            s.local_rack
        };
        assert!(rack(Some("dc1"), Some("r1")).is_some());
        assert_eq!(rack(Some("dc1"), Some("r2")), None);
        assert_eq!(rack(None, Some("r1")), None);
        let next = Arc::new(next);
        swap.store(next.clone());
        store.sync(&previous, &next);
        let snap = slot.snapshot();
        assert_eq!(snap.layout, next.layout);
        assert!(snap.lookup(next.layout, Token(50)).is_none());
        let r = snap.lookup(next.layout, Token(150)).unwrap();
        assert_eq!(r.nodes, &[NodeIdx(0), NodeIdx(1)]);
        assert_eq!(r.shards, &[0, 7]);
        assert_eq!(metrics.tablets_known.load(Ordering::Relaxed), 1);

        // DROP TABLE.
        store.drop_table("ks", "t");
        assert!(slot.snapshot().map.is_empty());
        assert_eq!(metrics.tablets_known.load(Ordering::Relaxed), 0);

        // A table that disappears from the metadata is forgotten too.
        store.replace("ks", "t", vec![tablet(i64::MIN, 0, &[(1, 1)])]);
        assert_eq!(store.tablets_known(), 1);
        let previous = swap.load_full();
        let next = Arc::new(Snapshot::build(
            metadata(&[1, 3], false),
            Some(&previous),
            &config,
            &metrics,
            None,
            None,
        ));
        swap.store(next.clone());
        store.sync(&previous, &next);
        assert_eq!(store.tablets_known(), 0);
        assert_eq!(metrics.tablets_known.load(Ordering::Relaxed), 0);
        for n in &next.nodes {
            n.pool.shutdown();
        }
    }
}
