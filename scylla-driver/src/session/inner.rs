//! What every request of a session reads ([`SessionInner`]: the cluster,
//! the configuration resolved into defaults, the prepared-statement cache,
//! the keyspace, the limiter, the metrics) and the steps that every kind of
//! request shares: following the session's keyspace, resolving a
//! statement's options, building its parameters, and finishing its result
//! (schema changes wait for agreement and refresh the metadata).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use uuid::Uuid;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use scylla_cql::frame::request::{Query, QueryParameters};
use scylla_cql::frame::response::result::SchemaChange;
use scylla_cql::frame::response::{Response, ResultBody};
use scylla_cql::types::SerializedValues;

use super::builder::SessionConfig;
use super::request::{Answer, RunOptions};
use super::{limiter, prepared_cache};
use crate::cluster::runtime::Cluster;
use crate::cluster::state::Snapshot;
use crate::cluster::system_tables::Agreement;
use crate::connection::{Connection, ConnectionRequestError, RequestOptions};
use crate::error::{
    ExecutionError, RequestAttemptError, SchemaAgreementError, UnexpectedResponse, UseKeyspaceError,
};
use crate::metrics::{Metrics, Paging};
use crate::policy::retry::RetryPolicy;
use crate::policy::speculative::SpeculativeExecution;
use crate::result::{Coordinated, QueryResult, ResultExtras};
use crate::statement::prepared::{PreparedShared, ResultShape};
use crate::statement::{ExecutionProfile, ExecutionProfileHandle, StatementOptions};

/// Longest a refresh waits for the cluster state to be rebuilt from what
/// it read.
const REBUILD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) struct SessionInner {
    pub(super) cluster: Cluster,
    pub(super) config: SessionConfig,
    pub(super) metrics: Arc<Metrics>,
    /// Prepared statements by (session keyspace when prepared, text): an
    /// unqualified table name means another table after `USE`.
    pub(super) prepared: Mutex<prepared_cache::PreparedCache>,
    pub(super) keyspace: SessionKeyspace,
    /// The session configuration with the default execution profile
    /// applied: what a statement falls back to.
    pub(super) defaults: Defaults,
    /// Backpressure: the bound on requests in flight, and the queue.
    pub(super) limiter: limiter::RequestLimiter,
    /// Statements being prepared again on nodes that forgot them.
    pub(super) repreparations: super::reprepare::Repreparations,
    /// The cluster as user load-balancing policies see it.
    pub(super) policy_cluster: super::policy_plan::PolicyClusterCache,
}

/// The session's keyspace (`USE`), and whether it has one: most sessions
/// never do, and their requests then do not load it to compare it with
/// each connection's.
#[derive(Debug, Default)]
pub(super) struct SessionKeyspace {
    current: ArcSwapOption<String>,
    /// Set (for good) once `current` is: a session's keyspace can change
    /// but never goes back to none.
    set: AtomicBool,
}

impl SessionKeyspace {
    pub(super) fn new(keyspace: Option<Arc<String>>) -> Self {
        SessionKeyspace {
            set: AtomicBool::new(keyspace.is_some()),
            current: ArcSwapOption::new(keyspace),
        }
    }

    pub(super) fn load_full(&self) -> Option<Arc<String>> {
        self.current.load_full()
    }

    pub(super) fn load(&self) -> arc_swap::Guard<Option<Arc<String>>> {
        self.current.load()
    }

    pub(super) fn store(&self, keyspace: Arc<String>) {
        self.current.store(Some(keyspace));
        self.set.store(true, Ordering::Release);
    }

    /// Whether the session has a keyspace: until then, one relaxed load
    /// instead of the keyspace's.
    fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }
}

/// The session-wide request settings: the configuration, overridden by the
/// default execution profile's set fields (resolved once, at start).
#[derive(Debug)]
pub(super) struct Defaults {
    pub(super) consistency: scylla_cql::Consistency,
    pub(super) serial_consistency: Option<scylla_cql::Consistency>,
    pub(super) timeout: Duration,
    pub(super) page_size: i32,
    pub(super) retry_policy: Arc<dyn RetryPolicy>,
    pub(super) speculative: Option<SpeculativeExecution>,
    pub(super) load_balancing: Option<Arc<dyn crate::policy::load_balancing::LoadBalancingPolicy>>,
    /// The default profile given as a handle
    /// ([`SessionBuilder::default_execution_profile_handle`](crate::SessionBuilder::default_execution_profile_handle)):
    /// read per request, since it can be re-pointed while the session runs.
    pub(super) handle: Option<ExecutionProfileHandle>,
}

/// The execution profiles one request reads, each loaded once when it
/// starts: its statement's and the session's default handle's. Nothing to
/// load (and no reference count) without handles.
#[derive(Default)]
pub(super) struct Profiles {
    statement: Option<Arc<ExecutionProfile>>,
    session: Option<Arc<ExecutionProfile>>,
}

impl Profiles {
    /// The first profile (the statement's, then the session's) that sets
    /// the field `f` reads.
    fn get<'a, T: 'a>(&'a self, f: impl Fn(&'a ExecutionProfile) -> Option<T>) -> Option<T> {
        self.statement
            .as_deref()
            .and_then(&f)
            .or_else(|| self.session.as_deref().and_then(&f))
    }
}

impl Defaults {
    pub(super) fn new(config: &SessionConfig) -> Self {
        let p = &config.default_profile;
        Defaults {
            consistency: p.consistency.unwrap_or(config.consistency),
            serial_consistency: p.serial_consistency,
            timeout: p.request_timeout.unwrap_or(config.request_timeout),
            page_size: p.page_size.unwrap_or(config.page_size),
            retry_policy: p
                .retry_policy
                .clone()
                .unwrap_or_else(|| config.retry_policy.clone()),
            speculative: p.speculative_execution.or(config.speculative),
            load_balancing: p.load_balancing.clone(),
            handle: config.default_profile_handle.clone(),
        }
    }
}

/// A page and the paging state of the next (`None` after the last).
pub(super) fn with_next_page(result: QueryResult) -> (QueryResult, Option<Bytes>) {
    let next = result.paging_state().cloned();
    (result, next)
}

impl std::fmt::Debug for SessionInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionInner")
            .field("nodes", &self.cluster.state.load().nodes.len())
            .field("keyspace", &self.keyspace.load())
            .finish()
    }
}

/// A result [`SessionInner::finish_now`] has handled.
pub(super) enum Finished {
    /// Ready to hand over.
    Done(QueryResult),
    /// A schema change that `SocketAddr` coordinated, of that keyspace:
    /// hand it over once the schema agrees. Boxed: a schema change can
    /// afford it, and every request's result is not made larger by it.
    SchemaChanged(Box<(QueryResult, SocketAddr, String)>),
}
/// How switching a connection to the session's keyspace failed.
pub(crate) enum SwitchFailed {
    /// On the connection: the request's retry policy decides.
    Connection(ConnectionRequestError),
    /// For good (the server refused `USE`, or the deadline passed).
    Refused(UseKeyspaceError),
}

impl SessionInner {
    /// Switches `conn` to the session's keyspace if it is on another one,
    /// within the request's `deadline`. A `USE` the server refuses (the
    /// keyspace was dropped, say) is an error of the request, never
    /// silently skipped: the statement would otherwise run in another
    /// keyspace.
    pub(super) async fn ensure_keyspace(
        &self,
        conn: &Connection,
        deadline: Instant,
    ) -> Result<(), SwitchFailed> {
        match self.keyspace_switch(conn) {
            None => Ok(()),
            // Rare (a connection's first request after a keyspace change):
            // boxed, so that every request's future does not carry the
            // state of a `USE` round trip.
            Some(want) => Box::pin(self.switch_keyspace(conn, want, deadline)).await,
        }
    }

    /// The keyspace `conn` must switch to before a request, if it is not on
    /// the session's already. Compares without touching reference counts.
    pub(crate) fn keyspace_switch(&self, conn: &Connection) -> Option<Arc<String>> {
        if !self.keyspace.is_set() {
            return None;
        }
        let want = self.keyspace.load();
        let want = want.as_ref()?;
        if conn.is_on_keyspace(want) {
            return None;
        }
        Some(Arc::clone(want))
    }

    /// Sends `USE want` on `conn`, within `deadline`.
    pub(crate) async fn switch_keyspace(
        &self,
        conn: &Connection,
        want: Arc<String>,
        deadline: Instant,
    ) -> Result<(), SwitchFailed> {
        let query = Query::use_keyspace(&want);
        let now = Instant::now();
        let opts = RequestOptions {
            deadline: Some(deadline),
            ..RequestOptions::default()
        };
        let node = conn.info().peer;
        let refused = |e| Err(SwitchFailed::Refused(UseKeyspaceError::RequestError(e)));
        match conn.request_at(&query, &opts, now).await {
            Ok(f) => match f.response {
                Response::Result(ResultBody::SetKeyspace(_)) => {
                    conn.set_keyspace(Some(want));
                    Ok(())
                }
                Response::Error(e) => refused(RequestAttemptError::DbError(e.error, e.message)),
                other => refused(RequestAttemptError::UnexpectedResponse(
                    UnexpectedResponse::new(
                        node,
                        "USE",
                        crate::connection::handshake::response_name(&other),
                    ),
                )),
            },
            Err(ConnectionRequestError::Timeout(_)) if Instant::now() >= deadline => {
                Err(SwitchFailed::Refused(UseKeyspaceError::RequestTimeout(
                    deadline.saturating_duration_since(now),
                )))
            }
            Err(error) => Err(SwitchFailed::Connection(error)),
        }
    }

    /// The profiles a request with options `o` reads (see [`Profiles`]).
    pub(super) fn profiles(&self, o: &StatementOptions) -> Profiles {
        Profiles {
            statement: o.profile.as_ref().map(ExecutionProfileHandle::profile),
            session: self
                .defaults
                .handle
                .as_ref()
                .map(ExecutionProfileHandle::profile),
        }
    }

    /// How a statement with options `o` runs: each setting from the
    /// statement, else its profile, else the session's default handle's
    /// profile, else the session defaults. Borrows the retry policy;
    /// allocates nothing.
    ///
    /// Inlined: called, it wrote the options (with the load-balancing
    /// policy and history listener, 104 bytes) to its caller's stack and the
    /// caller copied them into the request's future; inlined they are built
    /// there.
    #[inline]
    pub(super) fn run_options<'a>(
        &'a self,
        o: &'a StatementOptions,
        p: &'a Profiles,
    ) -> RunOptions<'a> {
        let d = &self.defaults;
        RunOptions {
            consistency: self.consistency(o, p),
            idempotent: o.idempotent,
            timeout: o
                .timeout
                .or_else(|| p.get(|p| p.request_timeout))
                .unwrap_or(d.timeout),
            deadline: None,
            tracing: o.tracing,
            retry_policy: match &o.retry_policy {
                Some(h) => &**h.get(),
                None => p
                    .get(|p| p.retry_policy.as_deref())
                    .unwrap_or(&*d.retry_policy),
            },
            speculative: p.get(|p| p.speculative_execution).or(d.speculative),
            serial_consistency: self.serial_consistency(o, p),
            load_balancing: match &o.load_balancing {
                Some(h) => Some(h.get()),
                None => p
                    .get(|p| p.load_balancing.as_ref())
                    .or(d.load_balancing.as_ref()),
            },
            history: o.history_listener.as_ref().map(|h| h.get()),
        }
    }

    /// The consistency of a statement with options `o`.
    pub(super) fn consistency(
        &self,
        o: &StatementOptions,
        p: &Profiles,
    ) -> scylla_cql::Consistency {
        o.consistency
            .or_else(|| p.get(|p| p.consistency))
            .unwrap_or(self.defaults.consistency)
    }

    /// The serial consistency of a statement with options `o`.
    pub(super) fn serial_consistency(
        &self,
        o: &StatementOptions,
        p: &Profiles,
    ) -> Option<scylla_cql::Consistency> {
        o.serial_consistency
            .or_else(|| p.get(|p| p.serial_consistency))
            .or(self.defaults.serial_consistency)
    }

    /// The page size of a statement with options `o`.
    pub(super) fn page_size(&self, o: &StatementOptions, p: &Profiles) -> i32 {
        o.page_size
            .or_else(|| p.get(|p| p.page_size))
            .unwrap_or(self.defaults.page_size)
    }

    pub(super) fn params<'a>(
        &self,
        o: &StatementOptions,
        p: &Profiles,
        values: &'a SerializedValues,
    ) -> QueryParameters<'a> {
        QueryParameters {
            consistency: self.consistency(o, p),
            values: std::borrow::Cow::Borrowed(values),
            skip_metadata: false,
            page_size: None,
            paging_state: None,
            serial_consistency: self.serial_consistency(o, p),
            default_timestamp: o.timestamp,
            // The session's keyspace is added per attempt (v5 only).
            keyspace: None,
            now_in_seconds: o.now_in_seconds,
        }
    }

    /// What the session does with a result before handing it over. For an
    /// execution, `prepared` is the statement with the result columns it was
    /// executed with: rows without columns (skipped metadata) are read with
    /// them, and rows whose metadata changed give the statement its new
    /// columns and id.
    ///
    /// Synchronous, so that a request's future holds no state for it: only
    /// a schema change has more to wait for, returned as
    /// [`Finished::SchemaChanged`] (see [`SessionInner::finish`]).
    ///
    /// Inlined: called, it took the answer (192 bytes) and returned the
    /// result (160) through memory, two `memcpy` calls per request; inlined
    /// into `execute_page`, the compiler builds the result in place
    /// (`scripts/instructions-per-request.sh`: 108 instructions per prepared
    /// INSERT fewer, of 7,641).
    #[inline(always)]
    pub(super) fn finish_now(
        &self,
        answer: Answer<'_>,
        prepared: Option<(&PreparedShared, Arc<ResultShape>)>,
    ) -> Result<Finished, ExecutionError> {
        let (response, extras) = answer.frame.into_parts();
        let node = answer.node.address;
        let mut result = QueryResult {
            rows: None,
            shape: None,
            extras: ResultExtras::from(extras),
            coordinator: Some(node),
            coordinated: Some(Coordinated {
                host_id: answer.node.host_id,
                shard: answer.shard,
                location: answer.node.location,
            }),
        };
        match response {
            Response::Result(ResultBody::Rows(rows)) => {
                let md = rows.metadata();
                match (prepared, &md.col_specs, &md.new_metadata_id) {
                    (Some((_, shape)), None, _) => result.shape = Some(shape),
                    (Some((shared, _)), Some(specs), Some(id)) => {
                        shared.adopt_result(Bytes::clone(id), specs.clone());
                    }
                    _ => {}
                }
                result.rows = Some(rows);
            }
            Response::Result(ResultBody::SetKeyspace(ks)) => {
                tracing::debug!(keyspace = %ks, "session keyspace changed");
                if self.cluster.tablets.use_keyspace(&ks) {
                    self.cluster.tablets.request_warmup();
                }
                self.keyspace.store(Arc::new(ks));
            }
            Response::Result(ResultBody::SchemaChange(change)) => {
                tracing::debug!(?change, "schema changed; awaiting agreement");
                self.forget_dropped_tablets(&change);
                let keyspace = change.target.keyspace().to_owned();
                return Ok(Finished::SchemaChanged(Box::new((result, node, keyspace))));
            }
            Response::Result(_) => {}
            other => {
                return Err(ExecutionError::LastAttemptError(
                    RequestAttemptError::UnexpectedResponse(UnexpectedResponse::new(
                        node,
                        "a statement",
                        crate::connection::handshake::response_name(&other),
                    )),
                ))
            }
        }
        Ok(Finished::Done(result))
    }

    /// [`SessionInner::finish_now`], then the schema agreement a schema
    /// change waits for.
    pub(super) async fn finish(
        &self,
        answer: Answer<'_>,
        prepared: Option<(&PreparedShared, Arc<ResultShape>)>,
    ) -> Result<QueryResult, ExecutionError> {
        match self.finish_now(answer, prepared)? {
            Finished::Done(result) => Ok(result),
            Finished::SchemaChanged(changed) => {
                let (result, node, keyspace) = *changed;
                self.agree_after_change(result, node, keyspace).await
            }
        }
    }

    /// Waits for schema agreement after a schema change that `node`
    /// coordinated, then hands over its result. Boxed: the agreement wait is
    /// a large future, and held inline it would make every request's future
    /// (moved and copied at each await layer) that much larger; a schema
    /// change can afford the allocation.
    pub(super) fn agree_after_change(
        &self,
        result: QueryResult,
        node: SocketAddr,
        keyspace: String,
    ) -> Pin<Box<dyn Future<Output = Result<QueryResult, ExecutionError>> + Send + '_>> {
        Box::pin(async move {
            if self.config.auto_await_schema_agreement {
                self.after_schema_change(Some(node), Some(&keyspace))
                    .await
                    .map_err(ExecutionError::SchemaAgreementError)?;
            } else {
                self.refresh_after_schema_change(Some(&keyspace)).await;
            }
            Ok(result)
        })
    }

    /// DROP TABLE / DROP KEYSPACE run by this session forget the tablets at
    /// once (the control connection's event does it for other sessions).
    pub(super) fn forget_dropped_tablets(&self, change: &SchemaChange) {
        use scylla_cql::frame::response::result::{SchemaChangeTarget, SchemaChangeType};
        if change.change != SchemaChangeType::Dropped {
            return;
        }
        match &change.target {
            SchemaChangeTarget::Table { keyspace, name } => {
                self.cluster.tablets.drop_table(keyspace, name)
            }
            SchemaChangeTarget::Keyspace { keyspace } => {
                self.cluster.tablets.drop_keyspace(keyspace)
            }
            _ => {}
        }
    }

    /// Waits for schema agreement (on the coordinator's new version, when the
    /// change ran on `coordinator`), then refreshes the metadata. Returns the
    /// version the nodes agreed on.
    pub(super) async fn after_schema_change(
        &self,
        coordinator: Option<SocketAddr>,
        keyspace: Option<&str>,
    ) -> Result<Uuid, SchemaAgreementError> {
        let timeout = self.config.schema_agreement_timeout;
        let interval = self.config.control.agreement.interval;
        let coordinator_version = || async move {
            match coordinator {
                Some(addr) => self.schema_version_of(addr).await,
                None => None,
            }
        };
        let wait = async {
            let mut expected = coordinator_version().await;
            loop {
                match self.cluster.control.agreed_schema_version(expected).await? {
                    Agreement::Agreed(version) => return Ok(Some(version)),
                    Agreement::Disagree => return Ok(None),
                    Agreement::Other(version) => {
                        // Every node is on another version than the one read
                        // from the coordinator after the change. If the
                        // coordinator is on it too, it moved on to a later
                        // change (another client's DDL, say), which includes
                        // this one; if not, the control node has not heard
                        // of the change yet: look again.
                        let now = coordinator_version().await;
                        if now == Some(version) {
                            return Ok(Some(version));
                        }
                        expected = now.or(expected);
                        tokio::time::sleep(interval).await;
                    }
                }
            }
        };
        let outcome = tokio::time::timeout(timeout, wait).await;
        // Routing needs the new keyspaces and tables now, not at the next
        // debounced refresh.
        self.refresh_after_schema_change(keyspace).await;
        match outcome {
            Ok(Ok(Some(version))) => Ok(version),
            Ok(Ok(None)) | Err(_) => Err(SchemaAgreementError::Timeout(timeout)),
            Ok(Err(e)) => Err(SchemaAgreementError::Control(e)),
        }
    }

    /// Re-reads the metadata after a schema change (of `keyspace`, if
    /// known: that keyspace's schema only); a failure only logs (the
    /// control connection's event refreshes it again later).
    pub(super) async fn refresh_after_schema_change(&self, keyspace: Option<&str>) {
        let refreshed = match keyspace {
            Some(ks) => self.cluster.control.refresh_keyspace(ks).await,
            None => self.cluster.control.refresh().await,
        };
        match refreshed {
            Ok(_) => self.await_rebuild().await,
            Err(e) => {
                tracing::warn!(error = %e, "metadata refresh after a schema change failed")
            }
        }
    }

    /// Waits, bounded, until the session's cluster state (routing table,
    /// `get_cluster_state`) is built from the control connection's latest
    /// snapshot: the cluster task rebuilds it from each publication, so
    /// right after a refresh it may still hold the one before (on a busy
    /// machine, a table just created was then unknown to the caller).
    pub(super) async fn await_rebuild(&self) {
        let deadline = tokio::time::Instant::now() + REBUILD_WAIT;
        loop {
            let latest = self.cluster.control.metadata();
            if Arc::ptr_eq(&self.state().metadata, &latest) {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::debug!("the cluster state was not rebuilt within {REBUILD_WAIT:?} of a metadata refresh");
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// The schema version node `addr` reports for itself.
    pub(super) async fn schema_version_of(&self, addr: SocketAddr) -> Option<Uuid> {
        let state = self.state();
        let node = state.nodes.iter().find(|n| n.address == addr)?;
        let conn = node.pool.connection_for(None)?;
        let query = crate::cluster::system_tables::QueryOptions::default();
        match crate::cluster::system_tables::local_schema_version(&conn, &query).await {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(node = %addr, error = %e, "cannot read the coordinator's schema version");
                None
            }
        }
    }

    /// Counts a request that succeeded by its kind of paging
    /// ([`Metrics::request_ended`]): for an unpaged one, one branch and
    /// nothing more.
    #[inline]
    pub(crate) fn count_ok(&self, paging: Paging) {
        if paging != Paging::Unpaged {
            self.metrics.request_ended(paging, false, false);
        }
    }

    /// Counts a request that failed by its kind of paging, and as a
    /// timeout if it was one.
    #[inline(never)]
    pub(crate) fn count_failed(&self, paging: Paging, error: &ExecutionError) {
        self.metrics.request_ended(paging, true, error.is_timeout());
    }

    pub(super) fn state(&self) -> Arc<Snapshot> {
        self.cluster.state.load_full()
    }
}
