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

mod admin;
mod batch;
pub mod builder;
pub mod caching;
pub(crate) mod client_routes;
mod execute;
pub(crate) mod identity;
mod inner;
mod limiter;
mod message;
pub mod pager;
pub(crate) mod paging;
mod policy_plan;
mod prepare;
mod prepared_cache;
mod reprepare;
mod request;
mod shard_groups;
mod tablets_v2;
pub mod trace;
pub(crate) mod values;

use scylla_cql::types::serialize::BatchValues;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use scylla_cql::frame::request::Query;
use scylla_cql::types::{Row, SerializeRow, SerializedValues};
use tokio_util::either::Either;

pub use self::builder::{SessionBuilder, SessionConfig};
pub use self::pager::{RowStream, RowsStreamError};
use self::paging::PageStart;
pub use self::shard_groups::{ShardGroup, ShardGroupLimits};
pub use self::trace::{TraceFetchOptions, TracingError, TracingEvent, TracingInfo};

pub(crate) use self::inner::SessionInner;
use self::inner::{with_next_page, Defaults, Finished, SessionKeyspace};
use self::message::{ExecuteMessage, QueryMessage};
use self::request::{RoutingInfo, RunOptions};
use crate::cluster::runtime::Cluster;
use crate::error::{ExecutionError, PrepareError};
use crate::metrics::{Metrics, Paging};
use crate::result::QueryResult;
use crate::statement::{Batch, ExecutionProfileHandle, PreparedStatement, Statement};

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
                repreparations: Default::default(),
                policy_cluster: Default::default(),
                keyspace: SessionKeyspace::new(keyspace),
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
        values: impl SerializeRow,
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
    /// a [`response::PagingState`](crate::response::PagingState) (and the next page's
    /// comes as a [`response::PagingStateResponse`](crate::response::PagingStateResponse)):
    /// see [`PageStart`].
    pub async fn query_single_page<P: PageStart>(
        &self,
        statement: impl Into<Statement>,
        values: impl SerializeRow,
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

    /// A page of an unprepared statement. Generic over the values (as the
    /// official crate's methods), so that the future is `Send` whenever
    /// they are `Sync`, and values that are not can still be used. Not an
    /// `async fn`: it picks one of two futures, and holds its arguments
    /// only in that one.
    fn query_page<'a, V: SerializeRow + ?Sized>(
        &'a self,
        statement: Statement,
        values: &'a V,
        paging_state: Option<Bytes>,
        paging: Paging,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<(QueryResult, Option<Bytes>), ExecutionError>> + 'a {
        // Values for no bind marker go as they are; others need their
        // markers' types (`is_empty` asks the row, as the official crate
        // does: a row written by hand may expect its markers).
        if values.is_empty() {
            return Either::Left(self.query_page_without_values(
                statement,
                paging_state,
                paging,
                deadline,
            ));
        }
        // Values need their bind markers' types: prepare. Boxed: inline,
        // the preparation's and the execution's futures made every query's
        // future larger (it is moved at each await layer).
        Either::Right(Box::pin(async move {
            let mut prepared = self.prepare(statement.contents.as_str()).await?;
            prepared.options = statement.options;
            let serialized = values::serialize(&prepared, values)?;
            self.execute_page(&prepared, &serialized, paging_state, paging, deadline)
                .await
                .map(with_next_page)
        }))
    }

    /// [`Session::query_page`] for a statement without values (not
    /// generic: one copy for every caller).
    async fn query_page_without_values(
        &self,
        statement: Statement,
        paging_state: Option<Bytes>,
        paging: Paging,
        deadline: Option<Instant>,
    ) -> Result<(QueryResult, Option<Bytes>), ExecutionError> {
        let none = SerializedValues::new();
        let inner = &self.inner;
        let profiles = inner.profiles(&statement.options);
        let mut params = inner.params(&statement.options, &profiles, &none);
        if paging != Paging::Unpaged {
            params.page_size = Some(inner.page_size(&statement.options, &profiles));
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
            ..inner.run_options(&statement.options, &profiles)
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
        let profiles = inner.profiles(&prepared.options);
        let msg = ExecuteMessage {
            id: &shared.id,
            // Built in place: a `params` local would keep its own room in
            // this future beside the message's copy.
            params: {
                let mut params = inner.params(&prepared.options, &profiles, values);
                if paging != Paging::Unpaged {
                    params.page_size = Some(inner.page_size(&prepared.options, &profiles));
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
            skip_without_id: (inner.config.skip_result_metadata
                || prepared.get_use_cached_result_metadata())
                && shape.specs.is_some(),
        };
        // Borrowed by the request's future (moved twice on its way to
        // being polled), not copied into it.
        let opts = RunOptions {
            deadline,
            ..inner.run_options(&prepared.options, &profiles)
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
            Finished::SchemaChanged(changed) => {
                let (result, node, keyspace) = *changed;
                inner.agree_after_change(result, node, keyspace).await
            }
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
        values: impl BatchValues,
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

    /// Pages through a statement's result as a stream of rows:
    /// [`rows_stream::<T>()`](pager::RowStream::rows_stream) reads them as
    /// `T` (the official crate's `QueryPager` and `TypedRowStream` in one
    /// type).
    ///
    /// The first page is fetched before this returns, as the official crate
    /// does: the first request's error surfaces here, and the stream's
    /// [`column_specs`](pager::RowStream::column_specs) are known; the other
    /// pages are fetched as rows are read. (With values, the statement is
    /// prepared instead and nothing is fetched yet: its columns come from
    /// the preparation.)
    ///
    /// The statement's request timeout covers the whole stream, every page
    /// fetch included, from this call on (see
    /// [`RowStream::with_deadline`](pager::RowStream::with_deadline) to set
    /// another deadline or none).
    ///
    /// # Cancellation
    ///
    /// Dropping this future (which may prepare the statement or fetch the
    /// first page) leaves nothing behind;
    /// dropping the returned stream stops fetching pages: a page request in flight
    /// completes on its connection and is discarded.
    pub async fn query_iter(
        &self,
        statement: impl Into<Statement>,
        values: impl SerializeRow,
    ) -> Result<RowStream<Row>, ExecutionError> {
        let statement = statement.into();
        let none = SerializedValues::new();
        if values.is_empty() {
            return RowStream::new(self.clone(), pager::Source::Query(statement), none)
                .prefetch()
                .await;
        }
        let mut prepared = self.prepare(statement.contents.as_str()).await?;
        prepared.options = statement.options;
        self.execute_iter(prepared, values).await
    }

    /// Pages through a prepared statement's result as a stream of rows
    /// (`&prepared` or an owned one); [`rows_stream::<T>()`](pager::RowStream::rows_stream)
    /// reads them as `T`.
    ///
    /// The statement's request timeout covers the whole stream (see
    /// [`query_iter`](Self::query_iter)). The values are serialized before
    /// this returns; awaiting it does no I/O (the first page is fetched when
    /// the stream is first polled), so the future holds no borrow of them.
    ///
    /// ```no_run
    /// # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// let by_owner = session.prepare("SELECT id, name FROM ks.pets WHERE owner = ?").await?;
    /// let mut pets = session
    ///     .execute_iter(&by_owner, ("ann",))
    ///     .await?
    ///     .rows_stream::<(i32, String)>()?;
    /// while let Some(pet) = pets.next().await {
    ///     let (id, name) = pet?;
    ///     println!("{id}: {name}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn execute_iter(
        &self,
        prepared: impl Into<PreparedStatement>,
        values: impl SerializeRow,
    ) -> std::future::Ready<Result<RowStream<Row>, ExecutionError>> {
        let prepared = prepared.into();
        std::future::ready(values::serialize(&prepared, &values).map(|serialized| {
            RowStream::new(
                self.clone(),
                pager::Source::Prepared(prepared),
                serialized.into_inner(),
            )
        }))
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
}
