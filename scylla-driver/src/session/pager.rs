//! Paged results as an async stream of typed rows.
//!
//! A [`RowStream`] fetches one page at a time (the statement's page size),
//! decodes it into owned rows, and fetches the next page when those run out.
//! It implements [`futures_core::Stream`]; without a stream library,
//! [`RowStream::next`] does the same.
//!
//! # One deadline for the whole stream
//!
//! The statement's request timeout covers the whole stream, not each page:
//! the deadline is set when the stream is created (`query_iter`,
//! `execute_iter`) and every page fetch, with its retries and
//! re-preparations, must end by it; a page that cannot is a
//! [`ExecutionError::RequestTimeout`] (inside an [`ExecutionError::Page`] after the
//! first page). The time the caller spends between pages counts. A stream
//! meant to outlive its timeout (a long scan consumed slowly) sets its own
//! with [`RowStream::with_deadline`] (or `None`: each page then gets the
//! request timeout of its own).

use std::collections::VecDeque;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use scylla_cql::types::{DeserializeRow, Row, SerializedValues, TypeCheckError};

use super::Session;
use crate::error::{ExecutionError, PageError};
use crate::result::QueryResult;
use crate::statement::{PreparedStatement, Statement};

/// What a stream pages through.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    Query(Statement),
    Prepared(PreparedStatement),
}

type PageFuture =
    Pin<Box<dyn Future<Output = Result<(QueryResult, Option<Bytes>), ExecutionError>> + Send>>;

/// Rows of a paged query, as a stream of `R`.
///
/// ```no_run
/// # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
/// use scylla_driver::statement::Statement;
/// let mut rows = session
///     .query_iter(Statement::new("SELECT k, v FROM ks.t").with_page_size(1000), ())
///     .await?
///     .rows_stream::<(i64, String)>()?;
/// while let Some(row) = rows.next().await {
///     let (k, v) = row?;
///     println!("{k} {v}");
/// }
/// # Ok(()) }
/// ```
pub struct RowStream<R> {
    session: Session,
    source: Arc<Source>,
    values: Arc<SerializedValues>,
    rows: VecDeque<R>,
    paging_state: Option<Bytes>,
    finished: bool,
    pages: usize,
    /// The tracing ids of the pages fetched so far (traced statements).
    tracing_ids: Vec<uuid::Uuid>,
    fetching: Option<PageFuture>,
    /// A page fetched before any row was asked for, not decoded yet (the
    /// first page of [`Session::query_iter`], so that its columns are known
    /// when the stream is handed over, and its rows can still be read as
    /// any type).
    prefetched: Option<(QueryResult, Option<Bytes>)>,
    /// The columns of the rows, once known.
    specs: Option<Arc<[scylla_cql::types::ColumnSpec]>>,
    /// Every page fetch ends by this instant (`None`: each page has its
    /// own timeout).
    deadline: Option<Instant>,
    _row: PhantomData<fn() -> R>,
}

impl<R> std::fmt::Debug for RowStream<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowStream")
            .field("buffered", &self.rows.len())
            .field("pages", &self.pages)
            .field("finished", &self.finished)
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl<R> RowStream<R>
where
    R: for<'r> DeserializeRow<'r, 'r>,
{
    pub(crate) fn new(session: Session, source: Source, values: SerializedValues) -> Self {
        let options = match &source {
            Source::Query(s) => &s.options,
            Source::Prepared(p) => &p.options,
        };
        let profiles = session.inner.profiles(options);
        let deadline = Instant::now() + session.inner.run_options(options, &profiles).timeout;
        let specs = match &source {
            Source::Query(_) => None,
            Source::Prepared(p) => p.result_columns(),
        };
        Self {
            deadline: Some(deadline),
            prefetched: None,
            specs,
            session,
            source: Arc::new(source),
            values: Arc::new(values),
            rows: VecDeque::new(),
            paging_state: None,
            finished: false,
            pages: 0,
            tracing_ids: Vec::new(),
            fetching: None,
            _row: PhantomData,
        }
    }

    /// Fetches the first page now (not decoded until a row is asked for):
    /// errors of the first request surface here, and the columns are known.
    pub(crate) async fn prefetch(mut self) -> Result<Self, ExecutionError> {
        let page = self
            .session
            .fetch_page(&self.source, &self.values, None, self.deadline)
            .await?;
        if self.specs.is_none() && page.0.has_rows() {
            self.specs = Some(page.0.columns().into());
        }
        self.prefetched = Some(page);
        Ok(self)
    }

    /// The columns of the rows: a prepared statement's result columns, or
    /// those of the first page of an unprepared one ([`Session::query_iter`]
    /// fetches it before it returns). Empty when not known (a statement
    /// without result columns, such as an `INSERT`).
    pub fn column_specs(&self) -> scylla_cql::types::ColumnSpecs<'_> {
        scylla_cql::types::ColumnSpecs::new(self.specs.as_deref().unwrap_or(&[]))
    }

    /// The next row, or `None` after the last.
    ///
    /// # Cancellation
    ///
    /// Dropping the future loses nothing: a page fetch under way is kept in
    /// the stream and resumed by the next call. Dropping the stream abandons
    /// it: the request in flight completes on its connection and is
    /// discarded.
    pub async fn next(&mut self) -> Option<Result<R, ExecutionError>> {
        std::future::poll_fn(|cx| self.poll_row(cx)).await
    }

    /// Replaces the stream's deadline (by default, its creation plus the
    /// statement's request timeout): every later page fetch must end by
    /// `deadline`. With `None`, each page fetch gets the statement's request
    /// timeout of its own, however long the whole stream takes.
    ///
    /// ```no_run
    /// # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::{Duration, Instant};
    /// let mut rows = session
    ///     .query_iter("SELECT k FROM ks.big", ())
    ///     .await?
    ///     .rows_stream::<(i64,)>()?
    ///     .with_deadline(Some(Instant::now() + Duration::from_secs(600)));
    /// while let Some(row) = rows.next().await {
    ///     let (_k,) = row?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// The instant every page fetch must end by, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Pages fetched so far.
    pub fn pages_fetched(&self) -> usize {
        self.pages
    }

    /// The tracing ids of the pages fetched so far, in order: with tracing
    /// on, every page is a traced request of its own (see
    /// [`QueryResult::tracing_id`]). Empty when the statement is not traced.
    pub fn tracing_ids(&self) -> &[uuid::Uuid] {
        &self.tracing_ids
    }

    /// Where the next page starts (to resume later with
    /// [`Session::execute_single_page`]).
    pub fn paging_state(&self) -> Option<&Bytes> {
        self.paging_state.as_ref()
    }

    fn poll_row(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<R, ExecutionError>>> {
        loop {
            if let Some(row) = self.rows.pop_front() {
                return Poll::Ready(Some(Ok(row)));
            }
            if let Some(page) = self.prefetched.take() {
                if let Some(e) = self.take_page(page) {
                    return Poll::Ready(Some(Err(e)));
                }
                continue;
            }
            if self.finished && self.fetching.is_none() {
                return Poll::Ready(None);
            }
            let fut = self.fetching.get_or_insert_with(|| {
                let session = self.session.clone();
                let source = self.source.clone();
                let values = self.values.clone();
                let state = self.paging_state.clone();
                let deadline = self.deadline;
                Box::pin(async move { session.fetch_page(&source, &values, state, deadline).await })
            });
            let (page, next) = match fut.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => {
                    self.fetching = None;
                    self.finished = true;
                    // After rows were delivered, the caller must know that
                    // running the query again repeats them.
                    let e = match self.pages {
                        0 => e,
                        page => ExecutionError::Page(Box::new(PageError::new(page, e))),
                    };
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Ready(Ok(page)) => page,
            };
            self.fetching = None;
            if let Some(e) = self.take_page((page, next)) {
                return Poll::Ready(Some(Err(e)));
            }
        }
    }

    /// Decodes a fetched page into rows; the error that ends the stream, if
    /// a row does not decode.
    fn take_page(&mut self, (page, next): (QueryResult, Option<Bytes>)) -> Option<ExecutionError> {
        self.pages += 1;
        self.tracing_ids.extend(page.tracing_id());
        self.finished = next.is_none();
        self.paging_state = next;
        if !page.has_rows() {
            return None;
        }
        if self.specs.is_none() {
            self.specs = Some(page.columns().into());
        }
        match page.rows::<R>() {
            Ok(rows) => {
                for row in rows {
                    match row {
                        Ok(r) => self.rows.push_back(r),
                        Err(e) => {
                            self.finished = true;
                            return Some(e.into());
                        }
                    }
                }
                None
            }
            Err(e) => {
                self.finished = true;
                Some(e)
            }
        }
    }
}

/// A [`RowStream`] of untyped [`Row`]s, what
/// [`Session::query_iter`](crate::Session::query_iter) returns when nothing
/// names the row type, retyped before its first row is read: the official
/// `scylla` crate's `query_iter(..).await?.rows_stream::<T>()?`.
///
/// ```no_run
/// # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
/// let mut rows = session
///     .query_iter("SELECT k, v FROM ks.t", &[])
///     .await?
///     .rows_stream::<(i64, String)>()?;
/// while let Some(row) = rows.next().await {
///     let (k, v) = row?;
///     println!("{k} {v}");
/// }
/// # Ok(()) }
/// ```
impl RowStream<Row> {
    /// The same stream, its rows read as `T`: checked against the columns
    /// now when they are known (the first page of
    /// [`Session::query_iter`] is fetched before the stream is handed over,
    /// and a prepared statement knows its columns), else when the first
    /// page arrives. Fails, as the official crate does, with a
    /// [`TypeCheckError`]: that `T` does not fit the columns, or (a
    /// [`RowsStreamError`] inside it) that rows were already read as
    /// [`Row`]s, which cannot be read again as `T`.
    pub fn rows_stream<T>(self) -> Result<RowStream<T>, TypeCheckError>
    where
        T: for<'r> DeserializeRow<'r, 'r>,
    {
        if !self.rows.is_empty() || self.pages > 0 {
            return Err(TypeCheckError::new(RowsStreamError::RowsAlreadyRead {
                pages: self.pages,
            }));
        }
        if let Some(specs) = &self.specs {
            T::type_check(specs).map_err(TypeCheckError::with_rust_type::<T>)?;
        }
        Ok(RowStream {
            session: self.session,
            source: self.source,
            values: self.values,
            rows: VecDeque::new(),
            paging_state: self.paging_state,
            finished: self.finished,
            pages: self.pages,
            tracing_ids: self.tracing_ids,
            fetching: self.fetching,
            prefetched: self.prefetched,
            specs: self.specs,
            deadline: self.deadline,
            _row: PhantomData,
        })
    }
}

/// Why [`RowStream::rows_stream`] could not read the stream as another type
/// (inside the [`TypeCheckError`] it returns).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RowsStreamError {
    /// The stream already read pages as untyped rows.
    #[error(
        "the stream already read {pages} page(s) as untyped rows; call rows_stream before \
         reading any row"
    )]
    RowsAlreadyRead {
        /// Pages read before the call.
        pages: usize,
    },
}

impl<R> futures_core::Stream for RowStream<R>
where
    R: for<'r> DeserializeRow<'r, 'r>,
{
    type Item = Result<R, ExecutionError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_row(cx)
    }
}

impl<R> Unpin for RowStream<R> {}
