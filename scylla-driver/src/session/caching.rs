//! [`CachingSession`]: a session that prepares every statement it runs,
//! once per text, in a bounded cache of its own (the official `scylla`
//! crate's `client::caching_session`).

use std::sync::Mutex;

use scylla_cql::types::serialize::BatchValues;
use scylla_cql::types::{Row, SerializeRow};

use super::pager::RowStream;
use super::paging::PageStart;
use super::prepared_cache::{PreparedCache, PreparedKey};
use super::Session;
use crate::error::{ExecutionError, PrepareError};
use crate::result::QueryResult;
use crate::statement::{Batch, BatchStatement, PreparedStatement, Statement};

/// The cache size of [`CachingSessionBuilder`] unless set.
const DEFAULT_CAPACITY: usize = 128;

/// A [`Session`] that runs every statement prepared: the first run of a text
/// prepares it, later runs reuse the prepared statement (bound values are
/// then typed by the server's bind markers, and requests are routed by
/// token). The cache holds at most `max_capacity` statements, evicting the
/// least recently used; it is keyed by the session's keyspace and the
/// statement's text, and a statement's options (consistency, page size,
/// profile, ...) apply to each run.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use scylla_driver::client::caching_session::CachingSession;
/// use scylla_driver::SessionBuilder;
///
/// let session = SessionBuilder::new().known_node("127.0.0.1:9042").build().await?;
/// let session = CachingSession::from(session, 1000);
/// // Prepared on the first call, reused on the second.
/// for id in 0..2 {
///     session
///         .execute_unpaged("INSERT INTO ks.t (id, v) VALUES (?, ?)", (id, "x"))
///         .await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CachingSession {
    session: Session,
    cache: Mutex<PreparedCache>,
    max_capacity: usize,
    use_cached_result_metadata: bool,
}

impl CachingSession {
    /// Wraps `session` with a cache of at most `cache_size` statements.
    pub fn from(session: Session, cache_size: usize) -> Self {
        CachingSessionBuilder::new(session)
            .max_capacity(cache_size)
            .build()
    }

    /// Runs `statement` prepared, in one unpaged request.
    pub async fn execute_unpaged(
        &self,
        statement: impl Into<Statement>,
        values: impl SerializeRow,
    ) -> Result<QueryResult, ExecutionError> {
        let prepared = self.prepared(statement.into()).await?;
        self.session.execute_unpaged(&prepared, values).await
    }

    /// Runs `statement` prepared, as a stream of rows fetched page by page
    /// (see [`Session::execute_iter`]).
    pub async fn execute_iter(
        &self,
        statement: impl Into<Statement>,
        values: impl SerializeRow,
    ) -> Result<RowStream<Row>, ExecutionError> {
        let prepared = self.prepared(statement.into()).await?;
        self.session.execute_iter(prepared, values).await
    }

    /// Runs `statement` prepared, one page from `paging_state` (see
    /// [`Session::execute_single_page`]).
    pub async fn execute_single_page<P: PageStart>(
        &self,
        statement: impl Into<Statement>,
        values: impl SerializeRow,
        paging_state: P,
    ) -> Result<(QueryResult, P::Next), ExecutionError> {
        let prepared = self.prepared(statement.into()).await?;
        self.session
            .execute_single_page(&prepared, values, paging_state)
            .await
    }

    /// Runs `batch` with each of its unprepared statements prepared through
    /// the cache.
    pub async fn batch(
        &self,
        batch: &Batch,
        values: impl BatchValues,
    ) -> Result<QueryResult, ExecutionError> {
        let batch = self.prepare_batch(batch).await?;
        self.session.batch(&batch, values).await
    }

    /// A copy of `batch` whose unprepared statements are prepared through
    /// the cache.
    pub async fn prepare_batch(&self, batch: &Batch) -> Result<Batch, ExecutionError> {
        let mut prepared = batch.clone();
        for statement in &mut prepared.statements {
            if let BatchStatement::Query(text) = statement {
                let p = self.prepared(Statement::new(text.as_str())).await?;
                *statement = BatchStatement::Prepared(p);
            }
        }
        Ok(prepared)
    }

    /// The prepared form of `statement`, from the cache or prepared now
    /// (and cached).
    pub async fn add_prepared_statement(
        &self,
        statement: impl Into<Statement>,
    ) -> Result<PreparedStatement, PrepareError> {
        let statement = statement.into();
        let key: PreparedKey = (self.session.get_keyspace(), statement.contents.clone());
        let cached = self.lock().get(&key);
        if let Some(mut p) = cached {
            p.options = statement.options;
            return Ok(p);
        }
        let mut p = self.session.prepare(statement).await?;
        p.set_use_cached_result_metadata(self.use_cached_result_metadata);
        self.lock().insert(key, p.clone());
        Ok(p)
    }

    /// The most statements the cache holds.
    pub fn get_max_capacity(&self) -> usize {
        self.max_capacity
    }

    /// The statements cached now.
    pub fn cached_statements(&self) -> usize {
        self.lock().len()
    }

    /// The session it runs statements on.
    pub fn get_session(&self) -> &Session {
        &self.session
    }

    async fn prepared(&self, statement: Statement) -> Result<PreparedStatement, ExecutionError> {
        self.add_prepared_statement(statement)
            .await
            .map_err(ExecutionError::PrepareError)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PreparedCache> {
        // The cache is consistent after any panic (each operation is one
        // map update), so a poisoned lock is used as is.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Builds a [`CachingSession`]: its cache size (default 128) and whether
/// its statements skip result metadata in responses.
#[derive(Debug)]
pub struct CachingSessionBuilder {
    session: Session,
    max_capacity: usize,
    use_cached_result_metadata: bool,
}

impl CachingSessionBuilder {
    /// A builder over `session`.
    pub fn new(session: Session) -> Self {
        Self {
            session,
            max_capacity: DEFAULT_CAPACITY,
            use_cached_result_metadata: false,
        }
    }

    /// The most statements the cache holds (least recently used evicted).
    #[must_use]
    pub fn max_capacity(mut self, max_capacity: usize) -> Self {
        self.max_capacity = max_capacity;
        self
    }

    /// Whether the statements it prepares ask the server to leave result
    /// metadata out of responses (see
    /// [`PreparedStatement::set_use_cached_result_metadata`]).
    #[must_use]
    pub fn use_cached_result_metadata(mut self, on: bool) -> Self {
        self.use_cached_result_metadata = on;
        self
    }

    /// The caching session.
    pub fn build(self) -> CachingSession {
        CachingSession {
            session: self.session,
            cache: Mutex::new(PreparedCache::new(self.max_capacity)),
            max_capacity: self.max_capacity,
            use_cached_result_metadata: self.use_cached_result_metadata,
        }
    }
}
