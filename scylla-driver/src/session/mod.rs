//! The public API: [`Session`].
//!
//! - [`builder`]: [`SessionBuilder`] and [`SessionConfig`].
//! - `execute`: running one request along its routing plan (retries,
//!   re-prepare, speculative execution).
//! - [`pager`]: paged results as an async stream of typed rows.
//! - `prepared_cache`: prepared statements by keyspace and text, bounded
//!   (least recently used evicted).
//! - [`trace`]: fetching a traced request's trace ([`Session::get_tracing_info`]).
//! - `limiter`: backpressure, the bound on requests in flight and the queue
//!   behind it.
//!
//! Every method's future can be dropped at any time: a request already
//! handed to a connection still completes there (its stream id is released
//! when the late response arrives), and nothing else is left behind.

mod batch;
pub mod builder;
mod execute;
mod limiter;
mod message;
pub mod pager;
mod prepare;
mod prepared_cache;
pub mod trace;
pub(crate) mod values;

use scylla_cql::frame::ProtocolVersion;
use scylla_cql::types::serialize::BatchValues;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use uuid::Uuid;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use scylla_cql::frame::request::{Query, QueryParameters};
use scylla_cql::frame::response::result::SchemaChange;
use scylla_cql::frame::response::{Response, ResultBody};
use scylla_cql::types::{SerializeRow, SerializedValues};

pub use self::builder::{SessionBuilder, SessionConfig};
pub use self::pager::{RowStream, RowsStreamError};
pub use self::trace::{TraceFetchOptions, TracingError, TracingEvent, TracingInfo};

use self::execute::{Answer, RoutingInfo, RunOptions};
use self::message::{ExecuteMessage, QueryMessage};
use crate::cluster::runtime::Cluster;
use crate::cluster::state::ClusterState;
use crate::connection::{Connection, RequestOptions};
use crate::error::{
    ControlError, ExecutionError, PrepareError, SchemaAgreementError, UnexpectedResponse,
};
use crate::metrics::{Metrics, Paging, SessionMetrics};
use crate::policy::retry::RetryPolicy;
use crate::policy::speculative::SpeculativeExecution;
use crate::response::PageStart;
use crate::result::QueryResult;
use crate::statement::prepared::{PreparedShared, ResultShape};
use crate::statement::{
    Batch, ExecutionProfile, ExecutionProfileHandle, PreparedStatement, Statement, StatementOptions,
};

/// A session: connections to every shard of every node, and the API to run
/// statements on them. Cheap to clone, `Send + Sync`.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use scylla_driver::SessionBuilder;
///
/// let session = SessionBuilder::new().known_node("127.0.0.1:9042").build().await?;
/// session.query_unpaged(
///     "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
///     (),
/// ).await?;
/// session.query_unpaged("CREATE TABLE IF NOT EXISTS ks.t (a int PRIMARY KEY, b text)", ()).await?;
/// let insert = session.prepare("INSERT INTO ks.t (a, b) VALUES (?, ?)").await?;
/// session.execute_unpaged(&insert, (1, "one")).await?;
/// let result = session.query_unpaged("SELECT a, b FROM ks.t WHERE a = ?", (1,)).await?;
/// let (a, b): (i32, &str) = result.single_row()?;
/// assert_eq!((a, b), (1, "one"));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Session {
    inner: Arc<SessionInner>,
}

pub(crate) struct SessionInner {
    cluster: Cluster,
    config: SessionConfig,
    metrics: Arc<Metrics>,
    /// Prepared statements by (session keyspace when prepared, text): an
    /// unqualified table name means another table after `USE`.
    prepared: Mutex<prepared_cache::PreparedCache>,
    keyspace: ArcSwapOption<String>,
    /// The session configuration with the default execution profile
    /// applied: what a statement falls back to.
    defaults: Defaults,
    /// Backpressure: the bound on requests in flight, and the queue.
    limiter: limiter::RequestLimiter,
}

/// The session-wide request settings: the configuration, overridden by the
/// default execution profile's set fields (resolved once, at start).
#[derive(Debug)]
struct Defaults {
    consistency: scylla_cql::Consistency,
    serial_consistency: Option<scylla_cql::Consistency>,
    timeout: Duration,
    page_size: i32,
    retry_policy: Arc<dyn RetryPolicy>,
    speculative: Option<SpeculativeExecution>,
    load_balancing: Option<Arc<dyn crate::policy::load_balancing::LoadBalancingPolicy>>,
}

impl Defaults {
    fn new(config: &SessionConfig) -> Self {
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
        }
    }
}

/// A page and the paging state of the next (`None` after the last).
fn with_next_page(result: QueryResult) -> (QueryResult, Option<Bytes>) {
    let next = result.paging_state().cloned();
    (result, next)
}

/// The statement's profile, if it has one.
fn profile_of(o: &StatementOptions) -> Option<&ExecutionProfile> {
    o.profile.as_ref().map(ExecutionProfileHandle::profile)
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
enum Finished {
    /// Ready to hand over.
    Done(QueryResult),
    /// A schema change that `SocketAddr` coordinated: hand it over once the
    /// schema agrees.
    SchemaChanged(QueryResult, SocketAddr),
}
impl SessionInner {
    /// Switches `conn` to the session's keyspace if it is on another one,
    /// within the request's `deadline`. A `USE` the server refuses (the
    /// keyspace was dropped, say) is an error of the request, never
    /// silently skipped: the statement would otherwise run in another
    /// keyspace.
    async fn ensure_keyspace(
        &self,
        conn: &Connection,
        deadline: Instant,
    ) -> Result<(), ExecutionError> {
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
    ) -> Result<(), ExecutionError> {
        let query = Query::use_keyspace(&want);
        let now = Instant::now();
        let opts = RequestOptions {
            deadline: Some(deadline),
            ..RequestOptions::default()
        };
        let node = conn.info().peer;
        match conn.request_at(&query, &opts, now).await {
            Ok(f) => match f.response {
                Response::Result(ResultBody::SetKeyspace(_)) => {
                    conn.set_keyspace(Some(want));
                    Ok(())
                }
                Response::Error(e) => Err(ExecutionError::server(e.error, e.message, node)),
                other => Err(ExecutionError::Protocol(UnexpectedResponse::new(
                    node,
                    "USE",
                    crate::connection::handshake::response_name(&other),
                ))),
            },
            Err(error) => Err(ExecutionError::Connection {
                node,
                error,
                attempts: Default::default(),
            }),
        }
    }

    /// How a statement with options `o` runs: each setting from the
    /// statement, else its profile, else the session defaults. Borrows the
    /// retry policy; allocates nothing.
    fn run_options<'a>(&'a self, o: &'a StatementOptions) -> RunOptions<'a> {
        let p = profile_of(o);
        let d = &self.defaults;
        RunOptions {
            consistency: self.consistency(o),
            idempotent: o.idempotent,
            timeout: o
                .timeout
                .or_else(|| p?.request_timeout)
                .unwrap_or(d.timeout),
            deadline: None,
            tracing: o.tracing,
            retry_policy: p
                .and_then(|p| p.retry_policy.as_deref())
                .unwrap_or(&*d.retry_policy),
            speculative: p.and_then(|p| p.speculative_execution).or(d.speculative),
            load_balancing: match &o.load_balancing {
                Some(h) => Some(&*h.0),
                None => p
                    .and_then(|p| p.load_balancing.as_ref())
                    .or(d.load_balancing.as_ref()),
            },
            history: o.history_listener.as_ref().map(|h| h.listener()),
        }
    }

    /// The consistency of a statement with options `o`.
    fn consistency(&self, o: &StatementOptions) -> scylla_cql::Consistency {
        o.consistency
            .or_else(|| profile_of(o)?.consistency)
            .unwrap_or(self.defaults.consistency)
    }

    /// The serial consistency of a statement with options `o`.
    fn serial_consistency(&self, o: &StatementOptions) -> Option<scylla_cql::Consistency> {
        o.serial_consistency
            .or_else(|| profile_of(o)?.serial_consistency)
            .or(self.defaults.serial_consistency)
    }

    /// The page size of a statement with options `o`.
    fn page_size(&self, o: &StatementOptions) -> i32 {
        o.page_size
            .or_else(|| profile_of(o)?.page_size)
            .unwrap_or(self.defaults.page_size)
    }

    fn params<'a>(
        &self,
        o: &StatementOptions,
        values: &'a SerializedValues,
    ) -> QueryParameters<'a> {
        QueryParameters {
            consistency: self.consistency(o),
            values: std::borrow::Cow::Borrowed(values),
            skip_metadata: false,
            page_size: None,
            paging_state: None,
            serial_consistency: self.serial_consistency(o),
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
    fn finish_now(
        &self,
        answer: Answer,
        prepared: Option<(&PreparedShared, Arc<ResultShape>)>,
    ) -> Result<Finished, ExecutionError> {
        let (response, extras) = answer.frame.into_parts();
        let mut result = QueryResult {
            rows: None,
            shape: None,
            extras,
            coordinator: Some(answer.node),
            coordinated: Some(answer.coordinated),
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
                self.keyspace.store(Some(Arc::new(ks)));
            }
            Response::Result(ResultBody::SchemaChange(change)) => {
                tracing::debug!(?change, "schema changed; awaiting agreement");
                self.forget_dropped_tablets(&change);
                return Ok(Finished::SchemaChanged(result, answer.node));
            }
            Response::Result(_) => {}
            other => {
                return Err(ExecutionError::Protocol(UnexpectedResponse::new(
                    answer.node,
                    "a statement",
                    crate::connection::handshake::response_name(&other),
                )))
            }
        }
        Ok(Finished::Done(result))
    }

    /// [`SessionInner::finish_now`], then the schema agreement a schema
    /// change waits for.
    async fn finish(
        &self,
        answer: Answer,
        prepared: Option<(&PreparedShared, Arc<ResultShape>)>,
    ) -> Result<QueryResult, ExecutionError> {
        match self.finish_now(answer, prepared)? {
            Finished::Done(result) => Ok(result),
            Finished::SchemaChanged(result, node) => self.agree_after_change(result, node).await,
        }
    }

    /// Waits for schema agreement after a schema change that `node`
    /// coordinated, then hands over its result. Boxed: the agreement wait is
    /// a large future, and held inline it would make every request's future
    /// (moved and copied at each await layer) that much larger; a schema
    /// change can afford the allocation.
    fn agree_after_change(
        &self,
        result: QueryResult,
        node: SocketAddr,
    ) -> Pin<Box<dyn Future<Output = Result<QueryResult, ExecutionError>> + Send + '_>> {
        Box::pin(async move {
            if self.config.auto_await_schema_agreement {
                self.after_schema_change(Some(node))
                    .await
                    .map_err(ExecutionError::SchemaAgreement)?;
            } else {
                self.refresh_after_schema_change().await;
            }
            Ok(result)
        })
    }

    /// DROP TABLE / DROP KEYSPACE run by this session forget the tablets at
    /// once (the control connection's event does it for other sessions).
    fn forget_dropped_tablets(&self, change: &SchemaChange) {
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
    async fn after_schema_change(
        &self,
        coordinator: Option<SocketAddr>,
    ) -> Result<Uuid, SchemaAgreementError> {
        let timeout = self.config.schema_agreement_timeout;
        let wait = async {
            let expected = match coordinator {
                Some(addr) => self.schema_version_of(addr).await,
                None => None,
            };
            self.cluster.control.agreed_schema_version(expected).await
        };
        let outcome = tokio::time::timeout(timeout, wait).await;
        // Routing needs the new keyspaces and tables now, not at the next
        // debounced refresh.
        self.refresh_after_schema_change().await;
        match outcome {
            Ok(Ok(Some(version))) => Ok(version),
            Ok(Ok(None)) | Err(_) => Err(SchemaAgreementError::Timeout(timeout)),
            Ok(Err(e)) => Err(SchemaAgreementError::Control(e)),
        }
    }

    /// Re-reads the metadata after a schema change; a failure only logs
    /// (the control connection's event refreshes it again later).
    async fn refresh_after_schema_change(&self) {
        if let Err(e) = self.cluster.control.refresh().await {
            tracing::warn!(error = %e, "metadata refresh after a schema change failed");
        }
    }

    /// The schema version node `addr` reports for itself.
    async fn schema_version_of(&self, addr: SocketAddr) -> Option<Uuid> {
        let state = self.state();
        let node = state.nodes.iter().find(|n| n.address == addr)?;
        let conn = node.pool.connection_for(None)?;
        let query = crate::cluster::metadata::QueryOptions::default();
        match crate::cluster::metadata::local_schema_version(&conn, &query).await {
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

    fn state(&self) -> Arc<ClusterState> {
        self.cluster.state.load_full()
    }
}

impl Session {
    pub(crate) fn from_parts(
        cluster: Cluster,
        config: SessionConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        let keyspace = config.keyspace.clone().map(Arc::new);
        let prepared = prepared_cache::PreparedCache::new(config.prepared_cache_size);
        let defaults = Defaults::new(&config);
        let limiter =
            limiter::RequestLimiter::new(config.max_requests_in_flight, config.max_queued_requests);
        Session {
            inner: Arc::new(SessionInner {
                limiter,
                defaults,
                cluster,
                config,
                metrics,
                prepared: Mutex::new(prepared),
                keyspace: ArcSwapOption::new(keyspace),
            }),
        }
    }

    /// Runs a statement and returns all of its result in one response (no
    /// paging). Statements with values are prepared first (and cached).
    ///
    /// # Cancellation
    ///
    /// Dropping the future cancels the request: if its frame was already written, the
    /// server may still run it (a write may be applied) and the late response is discarded;
    /// retries and speculative attempts not yet started never start.
    pub async fn query_unpaged(
        &self,
        statement: impl Into<Statement>,
        values: impl SerializeRow + Send + Sync,
    ) -> Result<QueryResult, ExecutionError> {
        let statement = statement.into();
        Ok(self
            .query_page(statement, &values, None, Paging::Unpaged, None)
            .await?
            .0)
    }

    /// Runs a statement and returns one page of its result, and where the next
    /// page starts (`None` on the last page). Pass that state back to get the
    /// next page.
    ///
    /// # Cancellation
    ///
    /// Dropping the future cancels the request as for
    /// [`query_unpaged`](Self::query_unpaged); the paging state of an abandoned page is
    /// never returned, so a caller resumes from the last page it received.
    ///
    /// The paging state is an `Option<Bytes>` (and so is the next page's), or
    /// a [`PagingState`](crate::response::PagingState) (and the next page's
    /// comes as a [`PagingStateResponse`](crate::response::PagingStateResponse)):
    /// see [`PageStart`].
    pub async fn query_single_page<P: PageStart>(
        &self,
        statement: impl Into<Statement>,
        values: impl SerializeRow + Send + Sync,
        paging_state: P,
    ) -> Result<(QueryResult, P::Next), ExecutionError> {
        self.query_page(
            statement.into(),
            &values,
            paging_state.into_bytes(),
            Paging::Manual,
            None,
        )
        .await
        .map(|(result, next)| (result, P::next(next)))
    }

    async fn query_page(
        &self,
        statement: Statement,
        values: &(dyn SerializeRow + Send + Sync),
        paging_state: Option<Bytes>,
        paging: Paging,
        deadline: Option<Instant>,
    ) -> Result<(QueryResult, Option<Bytes>), ExecutionError> {
        let mut none = SerializedValues::new();
        if values.serialize_row(&[], &mut none).is_err() {
            // Values need their bind markers' types: prepare.
            let mut prepared = self.prepare(statement.contents.as_str()).await?;
            prepared.options = statement.options;
            let serialized = values::serialize(&prepared, values)?;
            return self
                .execute_page(&prepared, &serialized, paging_state, paging, deadline)
                .await
                .map(with_next_page);
        }
        let inner = &self.inner;
        let mut params = inner.params(&statement.options, &none);
        if paging != Paging::Unpaged {
            params.page_size = Some(inner.page_size(&statement.options));
            params.paging_state = paging_state.as_deref().map(std::borrow::Cow::Borrowed);
        }
        let msg = QueryMessage {
            query: Query {
                contents: statement.contents.as_str().into(),
                params,
            },
            keyspace: inner.keyspace.load_full(),
        };
        let state = inner.state();
        let opts = RunOptions {
            deadline,
            ..inner.run_options(&statement.options)
        };
        // Pinned in place (see `execute_page`).
        let routing = RoutingInfo::default();
        let answer = {
            let run = std::pin::pin!(execute::run(inner, &state, &routing, &msg, &opts));
            // Matched in place, as `?` would: the answer is not moved
            // through a local.
            match run.await {
                Ok(answer) => {
                    inner.count_ok(paging);
                    answer
                }
                Err(e) => {
                    inner.count_failed(paging, &e);
                    return Err(e);
                }
            }
        };
        let result = inner.finish(answer, None).await?;
        let next = result.paging_state().cloned();
        Ok((result, next))
    }

    /// Prepares a statement (once per text: later calls hit a cache).
    ///
    /// A statement with tracing on is prepared again even if cached, so
    /// that the server traces the PREPARE: its trace id is in
    /// [`PreparedStatement::prepare_tracing_ids`]. The statement is prepared
    /// on every node, and returned with the first answer; that answer's
    /// trace is the one reported (the other nodes' are traced too, but
    /// their answers arrive after the statement was returned).
    ///
    /// # Cancellation
    ///
    /// Dropping the future aborts the preparations still running on the other nodes; a node
    /// that already received the PREPARE keeps the statement (harmless: it is prepared
    /// again, or reused, on the next call). Nothing is cached unless the call completes.
    pub async fn prepare(
        &self,
        statement: impl Into<Statement>,
    ) -> Result<PreparedStatement, PrepareError> {
        if self.inner.limiter.is_closed() {
            return Err(PrepareError::SessionClosed);
        }
        let statement = statement.into();
        // The server resolves unqualified names in the connection's keyspace,
        // so the same text prepared under another keyspace is another
        // statement (and has another id).
        let key = (self.inner.keyspace.load_full(), statement.contents.clone());
        let cached = self
            .inner
            .prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key);
        let traced = statement.options.tracing;
        if let Some(mut p) = cached.filter(|_| !traced) {
            p.options = statement.options;
            return Ok(p);
        }
        let mut prepared =
            prepare::prepare_everywhere(&self.inner, &statement.contents, traced).await?;
        let mut cached = prepared.clone();
        // Later hits of the cache sent no PREPARE: they have no trace.
        cached.prepare_tracing_ids.clear();
        self.inner
            .prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, cached);
        prepared.options = statement.options;
        Ok(prepared)
    }

    /// Executes a prepared statement, returning its whole result (no paging).
    ///
    /// # Cancellation
    ///
    /// Dropping the future cancels the request: if its frame was already written, the
    /// server may still execute it and the late response is discarded; a re-preparation,
    /// retry or speculative attempt not yet started never starts.
    pub async fn execute_unpaged(
        &self,
        prepared: &PreparedStatement,
        values: impl SerializeRow,
    ) -> Result<QueryResult, ExecutionError> {
        let serialized = values::serialize(prepared, &values)?;
        self.execute_page(prepared, &serialized, None, Paging::Unpaged, None)
            .await
    }

    /// Executes a prepared statement, returning one page and where the next
    /// starts.
    ///
    /// # Cancellation
    ///
    /// Dropping the future cancels the request as for
    /// [`execute_unpaged`](Self::execute_unpaged); the next paging state is only returned
    /// with a completed page.
    ///
    /// The paging state takes either form, as for
    /// [`query_single_page`](Self::query_single_page).
    pub async fn execute_single_page<P: PageStart>(
        &self,
        prepared: &PreparedStatement,
        values: impl SerializeRow,
        paging_state: P,
    ) -> Result<(QueryResult, P::Next), ExecutionError> {
        let serialized = values::serialize(prepared, &values)?;
        self.execute_page(
            prepared,
            &serialized,
            paging_state.into_bytes(),
            Paging::Manual,
            None,
        )
        .await
        .map(|result| {
            let (result, next) = with_next_page(result);
            (result, P::next(next))
        })
    }

    /// Executes one page of a prepared statement. Returns the result alone
    /// (callers that page take the next page's state with
    /// [`with_next_page`]): a `(QueryResult, Option<Bytes>)` is 192 bytes,
    /// and each of its moves on the way out of this future was a `memcpy`
    /// call (`scripts/instructions-per-request.sh`: 48 instructions per
    /// prepared INSERT fewer without it).
    async fn execute_page(
        &self,
        prepared: &PreparedStatement,
        values: &SerializedValues,
        paging_state: Option<Bytes>,
        paging: Paging,
        deadline: Option<Instant>,
    ) -> Result<QueryResult, ExecutionError> {
        let inner = &self.inner;
        let state = inner.state();
        let routing = values::routing(&state, prepared, values);
        let shared = &prepared.shared;
        // The columns and their id this execution runs with (a concurrent
        // execution may replace them; this one stays consistent).
        let shape = shared.result.load_full();
        let msg = ExecuteMessage {
            id: &shared.id,
            // Built in place: a `params` local would keep its own room in
            // this future beside the message's copy.
            params: {
                let mut params = inner.params(&prepared.options, values);
                if paging != Paging::Unpaged {
                    params.page_size = Some(inner.page_size(&prepared.options));
                    params.paging_state = paging_state.as_deref().map(std::borrow::Cow::Borrowed);
                }
                params
            },
            contents: &shared.contents,
            prepared_in: shared.prepared_in.as_deref().map(String::as_str),
            result: &shape,
            // Plain protocol v4 has no result-metadata id: after `ALTER
            // TABLE`, a `SELECT *` prepared before returns rows with the new
            // columns, and rows decoded with the columns known from PREPARE
            // would be misaligned. So there results carry their own columns
            // unless the user opted out. With ids (v5, or v4 with
            // SCYLLA_USE_METADATA_ID) the server reports changed columns, and
            // skipping is the default (see `ExecuteMessage::skips_metadata`).
            skip_without_id: inner.config.skip_result_metadata && shape.specs.is_some(),
        };
        // Borrowed by the request's future (moved twice on its way to
        // being polled), not copied into it.
        let opts = RunOptions {
            deadline,
            ..inner.run_options(&prepared.options)
        };
        // Pinned in place and awaited by reference: `.await` on the future
        // itself moved it (over a kilobyte) twice more before its first poll.
        let answer = {
            let run = std::pin::pin!(execute::run(inner, &state, &routing, &msg, &opts));
            // Matched in place, as `?` would: the answer is not moved
            // through a local.
            match run.await {
                Ok(answer) => {
                    inner.count_ok(paging);
                    answer
                }
                Err(e) => {
                    inner.count_failed(paging, &e);
                    return Err(e);
                }
            }
        };
        // `finish` spelled out: awaiting it would keep its future's room in
        // this one, the hottest request future.
        match inner.finish_now(answer, Some((shared, shape)))? {
            Finished::Done(result) => Ok(result),
            Finished::SchemaChanged(result, node) => inner.agree_after_change(result, node).await,
        }
    }

    /// Runs a batch. `values` has one row per statement, in order (`()` for
    /// a statement without values): a tuple of rows of different types, or
    /// a slice or vector of rows of one type (see [`BatchValues`]).
    /// Statements with values are prepared first.
    ///
    /// ```no_run
    /// # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// use scylla_driver::statement::{Batch, BatchType};
    ///
    /// let insert = session.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)").await?;
    /// let mut batch = Batch::new(BatchType::Logged);
    /// batch.append(insert.clone());
    /// batch.append("UPDATE ks.c SET n = ? WHERE k = 1");
    /// batch.append("DELETE FROM ks.t WHERE k = 0");
    /// session.batch(&batch, ((1, "one"), (7i64,), ())).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// Cancellation: dropping the future before the BATCH was written
    /// leaves nothing behind; after, the batch may still be applied.
    pub async fn batch(
        &self,
        batch: &Batch,
        values: impl BatchValues + Send + Sync,
    ) -> Result<QueryResult, ExecutionError> {
        batch::run(self, batch, &values).await
    }

    /// A copy of `batch` whose unprepared statements are prepared (one
    /// after the other, through the prepared-statement cache), with the
    /// same type and options: running it prepares nothing more. Prepare a
    /// batch once and run it many times.
    ///
    /// # Cancellation
    ///
    /// As for [`prepare`](Self::prepare); the batch is only returned whole.
    pub async fn prepare_batch(&self, batch: &Batch) -> Result<Batch, PrepareError> {
        let mut prepared = batch.clone();
        for statement in &mut prepared.statements {
            if let crate::statement::BatchStatement::Query(text) = statement {
                let p = self.prepare(text.as_str()).await?;
                *statement = crate::statement::BatchStatement::Prepared(p);
            }
        }
        Ok(prepared)
    }

    /// Pages through a statement's result as a stream of typed rows.
    ///
    /// The statement's request timeout covers the whole stream, every page
    /// fetch included, from this call on (see
    /// [`RowStream::with_deadline`](pager::RowStream::with_deadline) to set
    /// another deadline or none).
    ///
    /// # Cancellation
    ///
    /// Dropping this future (which may prepare the statement) leaves nothing behind;
    /// dropping the returned stream stops fetching pages: a page request in flight
    /// completes on its connection and is discarded.
    pub async fn query_iter<R>(
        &self,
        statement: impl Into<Statement>,
        values: impl SerializeRow + Send + Sync,
    ) -> Result<RowStream<R>, ExecutionError>
    where
        R: for<'r> scylla_cql::types::DeserializeRow<'r> + Send + 'static,
    {
        let statement = statement.into();
        let mut none = SerializedValues::new();
        if values.serialize_row(&[], &mut none).is_ok() {
            return Ok(RowStream::new(
                self.clone(),
                pager::Source::Query(statement),
                none,
            ));
        }
        let mut prepared = self.prepare(statement.contents.as_str()).await?;
        prepared.options = statement.options;
        self.execute_iter(&prepared, values)
    }

    /// Pages through a prepared statement's result as a stream of typed rows.
    ///
    /// The statement's request timeout covers the whole stream (see
    /// [`query_iter`](Self::query_iter)).
    pub fn execute_iter<R>(
        &self,
        prepared: &PreparedStatement,
        values: impl SerializeRow,
    ) -> Result<RowStream<R>, ExecutionError>
    where
        R: for<'r> scylla_cql::types::DeserializeRow<'r> + Send + 'static,
    {
        let serialized = values::serialize(prepared, &values)?;
        Ok(RowStream::new(
            self.clone(),
            pager::Source::Prepared(prepared.clone()),
            serialized.into_inner(),
        ))
    }

    pub(crate) async fn fetch_page(
        &self,
        source: &pager::Source,
        values: &SerializedValues,
        paging_state: Option<Bytes>,
        deadline: Option<Instant>,
    ) -> Result<(QueryResult, Option<Bytes>), ExecutionError> {
        match source {
            pager::Source::Query(s) => {
                self.query_page(s.clone(), &(), paging_state, Paging::Auto, deadline)
                    .await
            }
            pager::Source::Prepared(p) => self
                .execute_page(p, values, paging_state, Paging::Auto, deadline)
                .await
                .map(with_next_page),
        }
    }

    /// The execution profile registered under `name` (with
    /// [`SessionBuilder::execution_profile`]), for statements'
    /// `with_execution_profile`. Fails with
    /// [`ExecutionError::UnknownExecutionProfile`] if there is none: an
    /// unknown name never silently means the defaults.
    ///
    /// ```no_run
    /// # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// use scylla_driver::Statement;
    /// let analytics = session.execution_profile("analytics")?;
    /// let s = Statement::new("SELECT * FROM ks.big").with_execution_profile(analytics);
    /// session.query_unpaged(s, ()).await?;
    /// # Ok(()) }
    /// ```
    pub fn execution_profile(&self, name: &str) -> Result<ExecutionProfileHandle, ExecutionError> {
        self.inner
            .config
            .execution_profiles
            .get(name)
            .cloned()
            .ok_or_else(|| ExecutionError::UnknownExecutionProfile(name.to_owned()))
    }

    /// Switches the session to `keyspace` (every connection follows).
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
    pub async fn use_keyspace(&self, keyspace: &str) -> Result<(), ExecutionError> {
        let q = Query::use_keyspace(keyspace).contents.into_owned();
        self.query_unpaged(q, ()).await.map(|_| ())
    }

    /// Waits until every reachable node (every node not reported down) has
    /// the same schema version, and returns that version. The versions are
    /// read from `system.local` and `system.peers` through the control
    /// connection every
    /// [`schema_agreement_interval`](SessionBuilder::schema_agreement_interval),
    /// for up to
    /// [`schema_agreement_timeout`](SessionBuilder::schema_agreement_timeout)
    /// ([`SchemaAgreementError::Timeout`] after it). Then the metadata is
    /// read again, so that routing knows the new schema.
    ///
    /// Statements that change the schema wait for this by themselves unless
    /// [`auto_await_schema_agreement(false)`](SessionBuilder::auto_await_schema_agreement).
    ///
    /// # Cancellation
    ///
    /// Dropping the future stops polling; nothing is left behind.
    pub async fn await_schema_agreement(&self) -> Result<Uuid, SchemaAgreementError> {
        self.inner.after_schema_change(None).await
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
        self.inner.cluster.control.refresh().await.map(|_| ())
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
        SessionMetrics::new(
            self.inner.metrics.clone(),
            Arc::downgrade(&self.inner.cluster.state),
        )
    }

    /// The cluster as the session currently sees it (nodes, pools, routing;
    /// `unstable-internals` only).
    #[cfg(feature = "unstable-internals")]
    #[doc(hidden)]
    pub fn cluster_state(&self) -> Arc<ClusterState> {
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
    /// [`SessionConfig::prepared_cache_size`]).
    pub fn prepared_cache_len(&self) -> usize {
        self.inner
            .prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Requests in flight now (at most
    /// [`SessionConfig::max_requests_in_flight`]).
    pub fn requests_in_flight(&self) -> usize {
        self.inner.limiter.in_flight()
    }

    /// Requests waiting for a place in flight now (at most
    /// [`SessionConfig::max_queued_requests`]).
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
    pub async fn wait_for_all_shards(&self, timeout: Duration) -> bool {
        let state = self.inner.state();
        let mut all = true;
        for n in &state.nodes {
            all &= n.pool.wait_until_full(timeout).await;
        }
        all
    }

    /// Shuts the session down: refuses new requests at once (they fail with
    /// [`ExecutionError::SessionClosed`], preparations with
    /// [`PrepareError::SessionClosed`], requests queued behind
    /// [`SessionConfig::max_requests_in_flight`] too), lets the requests in
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

    /// A read-only snapshot of the cluster: nodes, datacenters and racks,
    /// shard counts, and the replicas (node and shard) of a token.
    pub fn cluster(&self) -> crate::cluster::view::ClusterView {
        crate::cluster::view::ClusterView::new(
            self.inner.state(),
            self.inner.cluster.tablets.clone(),
        )
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
