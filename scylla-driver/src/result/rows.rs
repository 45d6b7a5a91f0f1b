//! [`QueryResult::into_rows_result`] and what it returns: a result known to
//! hold rows ([`QueryRowsResult`]), read with the official `scylla` crate's
//! methods (`rows`, `single_row`, `first_row`, `maybe_first_row`) and their
//! typed errors.
//!
//! ```no_run
//! # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
//! let rows = session
//!     .query_unpaged("SELECT name, age FROM ks.people", &[])
//!     .await?
//!     .into_rows_result()?;
//! println!("{} rows", rows.rows_num());
//! for row in rows.rows::<(&str, i32)>()? {
//!     let (name, age) = row?;
//!     println!("{name}: {age}");
//! }
//! # Ok(()) }
//! ```

use scylla_cql::types::ColumnSpecs;
use scylla_cql::types::{DeserializationError, DeserializeRow, RowIterator, TypeCheckError};
use uuid::Uuid;

use super::{Coordinator, QueryResult};

impl QueryResult {
    /// Whether the result holds rows (the same as [`has_rows`](Self::has_rows)).
    pub fn is_rows(&self) -> bool {
        self.has_rows()
    }

    /// The result as rows; fails with
    /// [`IntoRowsResultError::ResultNotRows`] (which gives the result back)
    /// when the statement returned none (an `INSERT`, a DDL statement, ...).
    pub fn into_rows_result(self) -> Result<QueryRowsResult, IntoRowsResultError> {
        if self.has_rows() {
            Ok(QueryRowsResult { result: self })
        } else {
            Err(IntoRowsResultError::ResultNotRows(Box::new(self)))
        }
    }
}

/// A [`QueryResult`] that holds rows.
#[derive(Debug, Clone)]
pub struct QueryRowsResult {
    result: QueryResult,
}

impl QueryRowsResult {
    /// Number of rows.
    pub fn rows_num(&self) -> usize {
        self.result.rows_count()
    }

    /// The columns of the rows.
    pub fn column_specs(&self) -> ColumnSpecs<'_> {
        ColumnSpecs::new(self.result.columns())
    }

    /// The rows as `R`, borrowing from the result; fails at once if the
    /// columns do not match `R`.
    pub fn rows<'r, R: DeserializeRow<'r, 'r>>(&'r self) -> Result<RowIterator<'r, R>, RowsError> {
        // `into_rows_result` only builds results with rows; without, there
        // is nothing to iterate.
        let (raw, count) = self
            .result
            .rows
            .as_ref()
            .map_or((&[][..], 0), |r| (&r.raw_rows()[..], r.rows_count()));
        Ok(RowIterator::new(self.result.columns(), raw, count)?)
    }

    /// The first row; an error if there is none.
    pub fn first_row<'r, R: DeserializeRow<'r, 'r>>(&'r self) -> Result<R, FirstRowError> {
        match self.maybe_first_row::<R>() {
            Ok(Some(row)) => Ok(row),
            Ok(None) => Err(FirstRowError::RowsEmpty),
            Err(MaybeFirstRowError::TypeCheckFailed(e)) => Err(FirstRowError::TypeCheckFailed(e)),
            Err(MaybeFirstRowError::DeserializationFailed(e)) => {
                Err(FirstRowError::DeserializationFailed(e))
            }
        }
    }

    /// The first row, or `None` if there are no rows.
    pub fn maybe_first_row<'r, R: DeserializeRow<'r, 'r>>(
        &'r self,
    ) -> Result<Option<R>, MaybeFirstRowError> {
        let mut rows = self.rows::<R>().map_err(MaybeFirstRowError::from_rows)?;
        rows.next()
            .transpose()
            .map_err(MaybeFirstRowError::DeserializationFailed)
    }

    /// The only row; an error unless there is exactly one.
    pub fn single_row<'r, R: DeserializeRow<'r, 'r>>(&'r self) -> Result<R, SingleRowError> {
        let count = self.rows_num();
        if count != 1 {
            return Err(SingleRowError::UnexpectedRowCount(count));
        }
        let mut rows = self.rows::<R>().map_err(SingleRowError::from_rows)?;
        match rows.next() {
            Some(row) => row.map_err(SingleRowError::DeserializationFailed),
            None => Err(SingleRowError::UnexpectedRowCount(0)),
        }
    }

    /// The id of the request's trace, if it was traced.
    pub fn tracing_id(&self) -> Option<Uuid> {
        self.result.tracing_id()
    }

    /// The server's warnings about the request.
    pub fn warnings(&self) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        self.result.warnings()
    }

    /// The node that answered the request, and the shard (see
    /// [`Coordinator`] for what is recorded of the node).
    pub fn request_coordinator(&self) -> &Coordinator {
        self.result.request_coordinator()
    }

    /// The whole result.
    pub fn as_query_result(&self) -> &QueryResult {
        &self.result
    }

    /// The whole result, owned.
    pub fn into_query_result(self) -> QueryResult {
        self.result
    }
}

/// [`QueryResult::into_rows_result`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IntoRowsResultError {
    /// The statement returned no rows; the result is given back (boxed:
    /// the error stays small).
    #[error(
        "the statement's result holds no rows (it was not a SELECT or a conditional \
         update); read it as a QueryResult instead of calling into_rows_result"
    )]
    ResultNotRows(Box<QueryResult>),
}

/// [`QueryRowsResult::rows`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RowsError {
    /// The columns do not match the requested row type.
    #[error("the result's columns do not match the requested row type; check the SELECT's columns against the type's fields")]
    TypeCheckFailed(#[from] TypeCheckError),
}

/// [`QueryRowsResult::maybe_first_row`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MaybeFirstRowError {
    /// The columns do not match the requested row type.
    #[error("the result's columns do not match the requested row type; check the SELECT's columns against the type's fields")]
    TypeCheckFailed(#[source] TypeCheckError),
    /// A value could not be read as its field's type.
    #[error("the first row could not be read as the requested type; check for nulls and out-of-range values")]
    DeserializationFailed(#[source] DeserializationError),
}

impl MaybeFirstRowError {
    fn from_rows(e: RowsError) -> Self {
        match e {
            RowsError::TypeCheckFailed(e) => Self::TypeCheckFailed(e),
        }
    }
}

/// [`QueryRowsResult::first_row`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FirstRowError {
    /// The result has no rows.
    #[error("the result has no rows; use maybe_first_row where none is a valid answer")]
    RowsEmpty,
    /// The columns do not match the requested row type.
    #[error("the result's columns do not match the requested row type; check the SELECT's columns against the type's fields")]
    TypeCheckFailed(#[source] TypeCheckError),
    /// A value could not be read as its field's type.
    #[error("the first row could not be read as the requested type; check for nulls and out-of-range values")]
    DeserializationFailed(#[source] DeserializationError),
}

/// [`QueryRowsResult::single_row`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SingleRowError {
    /// There was not exactly one row (the count is given).
    #[error(
        "expected exactly one row, the result has {0}; check the WHERE clause selects a single row"
    )]
    UnexpectedRowCount(usize),
    /// The columns do not match the requested row type.
    #[error("the result's columns do not match the requested row type; check the SELECT's columns against the type's fields")]
    TypeCheckFailed(#[source] TypeCheckError),
    /// A value could not be read as its field's type.
    #[error(
        "the row could not be read as the requested type; check for nulls and out-of-range values"
    )]
    DeserializationFailed(#[source] DeserializationError),
}

impl SingleRowError {
    fn from_rows(e: RowsError) -> Self {
        match e {
            RowsError::TypeCheckFailed(e) => Self::TypeCheckFailed(e),
        }
    }
}
