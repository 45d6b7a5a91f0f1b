//! The result of running a statement, and typed rows.
//!
//! Rows stay in the frame they arrived in: [`QueryResult::rows`] iterates
//! them as any [`DeserializeRow`] type, borrowing `&str` and `&[u8]` straight
//! from the frame where the row type asks for them.

pub(crate) mod rows;

use bytes::Bytes;
use scylla_cql::frame::response::result::Rows;
use scylla_cql::types::{ColumnSpec, DeserializeRow, RowIterator};
use uuid::Uuid;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use once_cell::race::OnceBox;

use crate::cluster::location::Location;
use crate::cluster::view::Node;
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
    /// Tracing id, warnings, custom payload, and the coordinator once
    /// asked for: boxed, and empty for most results (a result is moved
    /// several times on its way to the caller).
    pub(crate) extras: ResultExtras,
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
    /// The node's datacenter and rack.
    pub(crate) location: Location,
}

/// What a result carries beside its rows, boxed and allocated only when
/// there is something: the frame's extras (tracing id, warnings, custom
/// payload), and the [`Coordinator`] once
/// [`request_coordinator`](QueryResult::request_coordinator) is asked for.
/// One pointer, set at most once (so `&self` can fill it).
#[derive(Debug, Default)]
pub(crate) struct ResultExtras(OnceBox<Annex>);

#[derive(Debug, Clone, Default)]
struct Annex {
    extras: Extras,
    coordinator: OnceLock<Coordinator>,
}

impl From<Extras> for ResultExtras {
    /// No allocation unless the frame carried extras.
    fn from(extras: Extras) -> Self {
        if extras.is_empty() {
            return ResultExtras::default();
        }
        ResultExtras(filled(Annex {
            extras,
            coordinator: OnceLock::new(),
        }))
    }
}

/// A cell holding `annex` (once_cell's `OnceBox::with_value` is only in
/// 1.21; programs' lock files hold older ones).
fn filled(annex: Annex) -> OnceBox<Annex> {
    let cell = OnceBox::new();
    // A new cell is empty: `set` cannot fail, and would only hand the box
    // back if it did.
    let _ = cell.set(Box::new(annex));
    cell
}

impl Clone for ResultExtras {
    fn clone(&self) -> Self {
        match self.0.get() {
            Some(annex) => ResultExtras(filled(annex.clone())),
            None => ResultExtras::default(),
        }
    }
}

impl ResultExtras {
    fn extras(&self) -> Option<&Extras> {
        self.0.get().map(|a| &a.extras)
    }

    /// The coordinator, made from `make` on the first call.
    fn coordinator(&self, make: impl FnOnce() -> Coordinator) -> &Coordinator {
        self.0
            .get_or_init(|| Box::new(Annex::default()))
            .coordinator
            .get_or_init(make)
    }
}

/// The node that answered a request, and the connection's shard
/// ([`QueryResult::request_coordinator`]).
///
/// The node is the one the session's cluster state held when the answer
/// arrived: its host id, address, datacenter and rack. Its sharding is not
/// recorded with a result ([`Node::sharder`] is `None` here); find it in
/// [`Session::get_cluster_state`](crate::Session::get_cluster_state) by
/// host id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinator {
    connection_address: SocketAddr,
    node: Arc<Node>,
    shard: Option<u16>,
}

impl Coordinator {
    fn new(address: SocketAddr, who: Coordinated) -> Self {
        let (datacenter, rack) = who.location.names().unzip();
        Coordinator {
            connection_address: address,
            node: Arc::new(Node::recorded(who.host_id, address, datacenter, rack)),
            shard: who.shard,
        }
    }

    /// The address of the connection the answer came on (the node's, after
    /// address translation).
    pub fn connection_address(&self) -> SocketAddr {
        self.connection_address
    }

    /// The node: its host id, address, datacenter and rack (see the type's
    /// documentation for its sharding).
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// The shard that answered (`None`: the node does not shard, as
    /// Cassandra).
    pub fn shard(&self) -> Option<u16> {
        self.shard
    }
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
        self.extras.extras().and_then(Extras::tracing_id)
    }

    /// The server's warnings about the request (none for most results).
    pub fn warnings(&self) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        self.extras
            .extras()
            .map_or(&[][..], Extras::warnings)
            .iter()
            .map(String::as_str)
    }

    /// The custom payload the server sent with the result, if any.
    pub fn custom_payload(&self) -> Option<&scylla_cql::frame::CustomPayload> {
        self.extras.extras().and_then(Extras::custom_payload)
    }

    /// The node that answered the request, and the shard (see
    /// [`Coordinator`] for what is recorded of the node). Built on the
    /// first call (the request path records only the node's ids); a
    /// `QueryResult` the session did not return (`QueryResult::default()`)
    /// names the unspecified address `0.0.0.0:0` and the nil host id.
    ///
    /// ```no_run
    /// # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// let result = session.query_unpaged("INSERT INTO ks.t (k) VALUES (1)", ()).await?;
    /// let node = result.request_coordinator().node();
    /// println!("{} in {:?}", node.address, node.datacenter);
    /// # Ok(()) }
    /// ```
    pub fn request_coordinator(&self) -> &Coordinator {
        self.extras.coordinator(|| {
            let address = self
                .coordinator
                .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
            let who = self.coordinated.unwrap_or(Coordinated {
                host_id: Uuid::nil(),
                shard: None,
                location: Location::UNKNOWN,
            });
            Coordinator::new(address, who)
        })
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
    pub fn rows<'r, R: DeserializeRow<'r, 'r>>(
        &'r self,
    ) -> Result<RowIterator<'r, R>, ExecutionError> {
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
        R: for<'r> DeserializeRow<'r, 'r>,
    {
        self.rows::<R>()?
            .map(|r| r.map_err(ExecutionError::from))
            .collect()
    }

    /// The first row, if any.
    pub fn first_row<'r, R: DeserializeRow<'r, 'r>>(&'r self) -> Result<Option<R>, ExecutionError> {
        Ok(self.rows::<R>()?.next().transpose()?)
    }

    /// The only row: an error unless there is exactly one.
    pub fn single_row<'r, R: DeserializeRow<'r, 'r>>(&'r self) -> Result<R, ExecutionError> {
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
