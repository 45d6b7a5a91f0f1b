//! The result of running a statement, and typed rows.
//!
//! Rows stay in the frame they arrived in: [`QueryResult::rows`] iterates
//! them as any [`DeserializeRow`] type, borrowing `&str` and `&[u8]` straight
//! from the frame where the row type asks for them.

use bytes::Bytes;
use scylla_cql::frame::response::result::Rows;
use scylla_cql::types::{ColumnSpec, DeserializeRow, RowIterator};
use uuid::Uuid;

use crate::connection::Extras;
use crate::error::ExecutionError;
use crate::statement::prepared::ResultShape;

/// What a statement returned.
#[derive(Debug, Clone, Default)]
pub struct QueryResult {
    pub(crate) rows: Option<Rows>,
    /// The prepared statement's result columns, for rows that came
    /// without theirs: the statement's shape itself, which the execution
    /// already holds (moving it here spares cloning the columns' `Arc`,
    /// an atomic write to a line every execution of the statement shares).
    pub(crate) shape: Option<std::sync::Arc<ResultShape>>,
    /// Tracing id, warnings, custom payload: boxed, and `None` for most
    /// results (a result is moved several times on its way to the caller).
    pub(crate) extras: Extras,
    /// The node that coordinated the request.
    pub coordinator: Option<std::net::SocketAddr>,
    /// That node's host id and the shard that answered (set with
    /// `coordinator`, by the session).
    pub(crate) coordinated: Option<Coordinated>,
}

/// Who answered a request, beside its address: the node's host id and the
/// connection's shard. Copied from the session's cluster state when the
/// answer is taken (no reference count is touched on the way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Coordinated {
    /// The node's host id.
    pub(crate) host_id: Uuid,
    /// The shard of the connection (`None`: the node does not shard).
    pub(crate) shard: Option<u16>,
}

impl QueryResult {
    /// Whether the result has rows (it was a SELECT, or a conditional update).
    pub fn has_rows(&self) -> bool {
        self.rows.is_some()
    }

    /// Number of rows (0 when there are none).
    pub fn rows_count(&self) -> usize {
        self.rows.as_ref().map_or(0, Rows::rows_count)
    }

    /// The columns of the rows.
    pub fn columns(&self) -> &[ColumnSpec] {
        if let Some(specs) = self.shape.as_ref().and_then(|s| s.specs.as_deref()) {
            return specs;
        }
        self.rows
            .as_ref()
            .and_then(|r| r.metadata().col_specs.as_deref())
            .unwrap_or(&[])
    }

    /// The id of the request's trace, when the statement asked for tracing
    /// ([`with_tracing(true)`](crate::statement::Statement::with_tracing))
    /// and the server traced it. For a paged read, each page is a request of
    /// its own, with its own trace; for a batch, the batch's. Fetch the trace
    /// with [`Session::get_tracing_info`](crate::Session::get_tracing_info).
    ///
    /// ```no_run
    /// # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// use scylla_driver::statement::Statement;
    /// let traced = Statement::new("SELECT * FROM system.local").with_tracing(true);
    /// let result = session.query_unpaged(traced, ()).await?;
    /// if let Some(id) = result.tracing_id() {
    ///     let trace = session.get_tracing_info(id).await?;
    ///     println!("{} events in {:?}", trace.events.len(), trace.duration);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn tracing_id(&self) -> Option<Uuid> {
        self.extras.tracing_id()
    }

    /// The server's warnings about the request (none for most results).
    pub fn warnings(&self) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        self.extras.warnings().iter().map(String::as_str)
    }

    /// The custom payload the server sent with the result, if any.
    pub fn custom_payload(&self) -> Option<&scylla_cql::frame::CustomPayload> {
        self.extras.custom_payload()
    }

    /// Where the next page starts, if there is one.
    pub fn paging_state(&self) -> Option<&Bytes> {
        self.rows.as_ref().and_then(Rows::paging_state)
    }

    /// Typed rows, borrowing from the result.
    ///
    /// ```no_run
    /// # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// let result = session.query_unpaged("SELECT name, age FROM ks.people", ()).await?;
    /// for row in result.rows::<(&str, i32)>()? {
    ///     let (name, age) = row?;
    ///     println!("{name}: {age}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn rows<'r, R: DeserializeRow<'r>>(&'r self) -> Result<RowIterator<'r, R>, ExecutionError> {
        let Some(rows) = &self.rows else {
            return Err(ExecutionError::BadQuery(crate::error::BadQuery::NoRows));
        };
        Ok(RowIterator::new(
            self.columns(),
            rows.raw_rows(),
            rows.rows_count(),
        )?)
    }

    /// All rows, as an owned type.
    pub fn into_rows<R>(self) -> Result<Vec<R>, ExecutionError>
    where
        R: for<'r> DeserializeRow<'r>,
    {
        self.rows::<R>()?
            .map(|r| r.map_err(ExecutionError::from))
            .collect()
    }

    /// The first row, if any.
    pub fn first_row<'r, R: DeserializeRow<'r>>(&'r self) -> Result<Option<R>, ExecutionError> {
        Ok(self.rows::<R>()?.next().transpose()?)
    }

    /// The only row: an error unless there is exactly one.
    pub fn single_row<'r, R: DeserializeRow<'r>>(&'r self) -> Result<R, ExecutionError> {
        let mut it = self.rows::<R>()?;
        match (it.next(), it.next()) {
            (Some(r), None) => Ok(r?),
            _ => Err(ExecutionError::BadQuery(crate::error::BadQuery::NotOneRow(
                self.rows_count(),
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_moves_as_at_most_160_bytes() {
        // A result is moved out of the request's future and again by the
        // caller's match on it. At 184 bytes (the coordinator's host id
        // and shard added, the paging state unboxed) two of those moves
        // were `memcpy` calls: about 60 instructions per prepared SELECT
        // (`scripts/instructions-per-request.sh`). See
        // `ResultMetadata::paging_state`.
        assert!(std::mem::size_of::<QueryResult>() <= 160);
    }
}
