//! Everything about a [`Session`] that is not running a statement: its
//! keyspace, schema agreement, metadata and tablets, metrics and state,
//! its connections, a read-only view of the cluster, and closing it.

use scylla_cql::frame::ProtocolVersion;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use scylla_cql::frame::request::Query;

use crate::error::{ControlError, ExecutionError, SchemaAgreementError};
use crate::metrics::{Metrics, SessionMetrics};

use super::Session;

impl Session {
    /// Switches the session to the keyspace `keyspace_name` (every
    /// connection follows). With `case_sensitive` the name means itself
    /// (`"MyKs"` is the keyspace `MyKs`); without, it is taken as CQL takes
    /// an unquoted name, in lowercase (`"MyKs"` is `myks`).
    ///
    /// ```no_run
    /// # async fn f(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// session.use_keyspace("shop", false).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancellation
    ///
    /// Dropping the future before the answer leaves the session on its old
    /// keyspace. If `USE` had already been sent, the connection that carried
    /// it may have switched on the server's side. On protocol v5 every QUERY
    /// and BATCH names the session's keyspace, so that does not matter; on v4
    /// that connection runs unqualified statements in the new keyspace until
    /// it is switched again: do not abandon a `USE` on v4, or qualify table
    /// names.
    pub async fn use_keyspace(
        &self,
        keyspace_name: impl Into<String>,
        case_sensitive: bool,
    ) -> Result<(), ExecutionError> {
        let name = keyspace_name_as_given(keyspace_name.into(), case_sensitive);
        let q = Query::use_keyspace(&name).contents.into_owned();
        self.query_unpaged(q, ()).await.map(|_| ())
    }

    /// Waits until every reachable node (every node not reported down) has
    /// the same schema version, and returns that version. The versions are
    /// read from `system.local` and `system.peers` through the control
    /// connection every
    /// [`schema_agreement_interval`](super::SessionBuilder::schema_agreement_interval),
    /// for up to
    /// [`schema_agreement_timeout`](super::SessionBuilder::schema_agreement_timeout)
    /// ([`SchemaAgreementError::Timeout`] after it). Then the metadata is
    /// read again, so that routing knows the new schema.
    ///
    /// Statements that change the schema wait for this by themselves unless
    /// [`auto_await_schema_agreement(false)`](super::SessionBuilder::auto_await_schema_agreement).
    ///
    /// # Cancellation
    ///
    /// Dropping the future stops polling; nothing is left behind.
    pub async fn await_schema_agreement(&self) -> Result<Uuid, SchemaAgreementError> {
        self.inner.after_schema_change(None, None).await
    }

    /// Checks once, without waiting, whether every reachable node has the
    /// same schema version: `Some(version)` if so, `None` if they disagree
    /// (which, straight after a schema change, they legitimately may).
    pub async fn check_schema_agreement(&self) -> Result<Option<Uuid>, SchemaAgreementError> {
        self.inner
            .cluster
            .control
            .check_schema_agreement()
            .await
            .map_err(SchemaAgreementError::Control)
    }

    /// Re-reads the cluster's topology and schema now.
    pub async fn refresh_metadata(&self) -> Result<(), ControlError> {
        self.inner.cluster.control.refresh().await?;
        self.inner.await_rebuild().await;
        Ok(())
    }

    /// Reads the tablets of the keyspaces the session uses (or of every
    /// tablet keyspace, with [`TabletWarmup::All`](crate::cluster::TabletWarmup::All))
    /// from `system.tablets` now, and returns the rows read. The session
    /// does this by itself in the background at start, after topology
    /// changes and for new keyspaces; this waits for a fresh read.
    pub async fn warm_up_tablets(&self) -> Result<u64, ControlError> {
        let inner = &self.inner;
        crate::cluster::tablets::warm_up(
            &inner.cluster.tablets,
            &inner.cluster.control,
            inner.config.tablet_warmup,
            &inner.config.control.query,
        )
        .await
        .map_err(ControlError::from)
    }

    /// The warm-up at session start: read inline (bounded by the request
    /// timeout) so that the first requests are routed right; a failure only
    /// logs.
    pub(crate) async fn initial_tablet_warmup(&self) {
        if self.inner.config.tablet_warmup == crate::cluster::TabletWarmup::Off {
            return;
        }
        let timeout = self.inner.config.request_timeout;
        match tokio::time::timeout(timeout, self.warm_up_tablets()).await {
            Ok(Ok(rows)) => tracing::debug!(rows, "tablets warmed up at session start"),
            Ok(Err(e)) => tracing::warn!(error = %e, "tablet warm-up at session start failed"),
            Err(_) => tracing::warn!("tablet warm-up at session start timed out"),
        }
    }

    /// The session's tablet maps (`unstable-internals` only).
    #[cfg(feature = "unstable-internals")]
    #[doc(hidden)]
    pub fn tablets(&self) -> &Arc<crate::cluster::TabletStore> {
        &self.inner.cluster.tablets
    }

    /// The session's counters.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The session's metrics as the official `scylla` crate reads them:
    /// requests and errors by kind of paging, latency statistics, request
    /// rates, open connections and timeouts (see [`SessionMetrics`]). They
    /// read the session's live counters.
    pub fn get_metrics(&self) -> SessionMetrics {
        let pools = Arc::downgrade(&self.inner.cluster.state);
        SessionMetrics::new(self.inner.metrics.clone(), pools)
    }

    /// The cluster as the session currently sees it (nodes, pools, routing;
    /// `unstable-internals` only).
    #[cfg(feature = "unstable-internals")]
    #[doc(hidden)]
    pub fn cluster_state(&self) -> Arc<crate::cluster::state::Snapshot> {
        self.inner.state()
    }

    /// The protocol version the session's connections speak: pinned, or
    /// what negotiation settled on (`None` before any connection opened,
    /// which `build` rules out).
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        let choice = &self.inner.config.pool.connection.protocol;
        choice.pinned_version().or_else(|| choice.learned())
    }

    /// Statements in the prepared-statement cache (at most
    /// [`SessionConfig::prepared_cache_size`](super::SessionConfig::prepared_cache_size)).
    pub fn prepared_cache_len(&self) -> usize {
        self.inner
            .prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Requests in flight now (at most
    /// [`SessionConfig::max_requests_in_flight`](super::SessionConfig::max_requests_in_flight)).
    pub fn requests_in_flight(&self) -> usize {
        self.inner.limiter.in_flight()
    }

    /// Requests waiting for a place in flight now (at most
    /// [`SessionConfig::max_queued_requests`](super::SessionConfig::max_queued_requests)).
    pub fn requests_queued(&self) -> usize {
        self.inner.limiter.queued()
    }

    /// The keyspace the session is using.
    pub fn keyspace(&self) -> Option<Arc<String>> {
        self.inner.keyspace.load_full()
    }

    /// The keyspace the session is using (the official `scylla` crate's
    /// name for [`keyspace`](Self::keyspace)).
    pub fn get_keyspace(&self) -> Option<Arc<String>> {
        self.keyspace()
    }

    /// Waits until every node's pool has all of its shard connections, or
    /// `timeout` passes; returns whether they all have.
    ///
    /// The nodes are those of the session's current view of the cluster: a
    /// node removed and added back while this waits has a new pool, and it
    /// is that pool that is waited for.
    pub async fn wait_for_all_shards(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let state = self.inner.state();
            let mut all = true;
            for n in &state.nodes {
                let left = deadline.saturating_duration_since(Instant::now());
                all &= n.pool.wait_until_full(left).await;
            }
            if all {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            // A pool stopped before it filled (its node left the view):
            // look again at the current view, until the deadline.
            if Arc::ptr_eq(&state, &self.inner.state()) {
                let pause = Duration::from_millis(20);
                tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now())))
                    .await;
            }
        }
    }

    /// Shuts the session down: refuses new requests at once (they fail with
    /// [`ExecutionError::SessionClosed`], preparations with
    /// [`PrepareError::SessionClosed`](crate::error::PrepareError::SessionClosed), requests queued behind
    /// [`SessionConfig::max_requests_in_flight`](super::SessionConfig::max_requests_in_flight) too), lets the requests in
    /// flight finish for up to `grace`, then stops the control connection
    /// and every pool and closes every connection. A request still running
    /// after `grace` ends with a connection error; every request ends
    /// exactly once. Clones of the session are closed too. Returns whether
    /// every request in flight finished within `grace`.
    ///
    /// Dropping the last clone of a session also closes its connections,
    /// at once and without waiting for requests; `close` is the orderly way.
    ///
    /// ```no_run
    /// # async fn demo(session: scylla_driver::Session) {
    /// use std::time::Duration;
    ///
    /// // On shutdown of the application:
    /// let drained = session.close(Duration::from_secs(5)).await;
    /// if !drained {
    ///     eprintln!("some requests were cut off after 5 s");
    /// }
    /// # }
    /// ```
    pub async fn close(&self, grace: Duration) -> bool {
        let inner = &self.inner;
        inner.limiter.close();
        let until = Instant::now() + grace;
        // Bounded by `grace`: requests end by themselves (each has its own
        // deadline), this only watches the count fall.
        let drained = loop {
            if inner.limiter.in_flight() == 0 {
                break true;
            }
            let now = Instant::now();
            if now >= until {
                break false;
            }
            tokio::time::sleep((until - now).min(Duration::from_millis(5))).await;
        };
        let in_flight = inner.limiter.in_flight();
        if !inner.cluster.shutdown(CLOSE_TIMEOUT).await {
            tracing::warn!(timeout = ?CLOSE_TIMEOUT, "some pools had not closed their connections");
        }
        tracing::info!(drained, cut_off = in_flight, "session closed");
        drained
    }

    /// The session's node events from now on: nodes it can reach again or
    /// no longer, nodes that joined or left the cluster (see
    /// [`cluster::events`](crate::cluster::events)).
    pub fn node_events(&self) -> crate::cluster::events::NodeEvents {
        self.inner.cluster.node_events()
    }

    /// A read-only snapshot of the cluster: nodes, datacenters and racks,
    /// shard counts, and the replicas (node and shard) of a token.
    pub fn cluster(&self) -> crate::cluster::view::ClusterView {
        crate::cluster::view::ClusterView::new(
            self.inner.state(),
            self.inner.cluster.tablets.clone(),
        )
    }

    /// The cluster as the session sees it now, in the official `scylla`
    /// crate's shape (see [`cluster`](Self::cluster) for this crate's). A
    /// snapshot: take another to see later changes.
    pub fn get_cluster_state(&self) -> Arc<crate::cluster::ClusterState> {
        Arc::new(crate::cluster::ClusterState::new(self.cluster()))
    }

    /// Whether [`close`](Self::close) was called (on this session or a
    /// clone).
    pub fn is_closed(&self) -> bool {
        self.inner.limiter.is_closed()
    }
}

/// How long [`Session::close`] waits for the pools to close their
/// connections once told to (they only have to close sockets).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The keyspace `name` means: itself when `case_sensitive`, otherwise in
/// lowercase, as CQL reads an unquoted name (the `USE` then quotes any name
/// that is not a plain lowercase identifier).
pub(crate) fn keyspace_name_as_given(name: String, case_sensitive: bool) -> String {
    if case_sensitive {
        name
    } else {
        name.to_lowercase()
    }
}
