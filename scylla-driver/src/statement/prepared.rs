//! A prepared statement: the server's id for a statement, its bind markers,
//! and what routing needs (which markers form the partition key).

use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use scylla_cql::frame::response::result::PreparedMetadata;
use scylla_cql::token::Token;
use scylla_cql::types::{ColumnSpec, ColumnSpecs, SerializeRow, TableSpec};

use super::{option_setters, Consistency, StatementOptions};

/// A statement prepared on the cluster. Cheap to clone.
///
/// Obtained from `Session::prepare`; executing it sends only its id and the
/// bound values. If a node forgets it (UNPREPARED), the session prepares it
/// again on that node and retries, transparently.
#[derive(Debug, Clone)]
pub struct PreparedStatement {
    pub(crate) shared: Arc<PreparedShared>,
    /// Options of this statement (a clone can have others).
    pub options: StatementOptions,
    /// The trace ids of the PREPARE requests that made this statement, when
    /// it was prepared from a statement with tracing on (the official
    /// `scylla` crate's field): the trace of the preparation whose answer
    /// was used (see `Session::prepare`). Empty otherwise, and in the
    /// statements later returned from the session's cache (no request was
    /// sent for them).
    pub prepare_tracing_ids: Vec<uuid::Uuid>,
    /// Skip the result metadata in responses even without a metadata id
    /// (see [`set_use_cached_result_metadata`](Self::set_use_cached_result_metadata)).
    use_cached_result_metadata: bool,
}

#[derive(Debug)]
pub(crate) struct PreparedShared {
    pub(crate) id: Bytes,
    pub(crate) contents: String,
    pub(crate) metadata: PreparedMetadata,
    /// The result columns and their id; replaced when a result says its
    /// metadata changed (`Metadata_changed`, with the new columns and id).
    pub(crate) result: ArcSwap<ResultShape>,
    /// The session keyspace when it was prepared: on protocol v5 a PREPARE
    /// (and a re-PREPARE after UNPREPARED) names it, so that unqualified
    /// tables keep meaning what they meant after a `USE`.
    pub(crate) prepared_in: Option<Arc<String>>,
    pub(crate) is_lwt: bool,
    /// Keyspace of the bound table (for routing).
    pub(crate) keyspace: Option<String>,
    /// That keyspace's id in the routing table, resolved by name once.
    pub(crate) keyspace_id: crate::routing::KeyspaceIdCache,
    /// The bound table (for tablet routing).
    pub(crate) table: Option<String>,
    /// The table's tablet slot in the session that prepared it.
    pub(crate) tablets: Option<Arc<crate::routing::TabletTable>>,
}

/// The rows a prepared statement returns: their columns and the server's id
/// of that metadata (protocol v5, or v4 with `SCYLLA_USE_METADATA_ID`).
#[derive(Debug, Clone, Default)]
pub(crate) struct ResultShape {
    /// The result metadata id, sent with every EXECUTE where the connection
    /// has them.
    pub(crate) id: Option<Bytes>,
    /// The result columns, shared by every result that skips them.
    pub(crate) specs: Option<Arc<[ColumnSpec]>>,
}

impl PreparedShared {
    /// Adopts the metadata a result reported as changed.
    pub(crate) fn adopt_result(&self, id: Bytes, specs: Arc<[ColumnSpec]>) {
        tracing::debug!(statement = %self.contents, "result metadata changed; adopting the new columns and id");
        self.result.store(Arc::new(ResultShape {
            id: Some(id),
            specs: Some(specs),
        }));
    }
}

impl PreparedStatement {
    pub(crate) fn new(shared: PreparedShared) -> Self {
        Self {
            shared: Arc::new(shared),
            options: StatementOptions::default(),
            prepare_tracing_ids: Vec::new(),
            use_cached_result_metadata: false,
        }
    }

    /// The server's id of the statement.
    pub fn id(&self) -> &[u8] {
        &self.shared.id
    }

    /// The CQL text.
    pub fn contents(&self) -> &str {
        &self.shared.contents
    }

    /// The CQL text (the official `scylla` crate's name for
    /// [`contents`](Self::contents)).
    pub fn get_statement(&self) -> &str {
        self.contents()
    }

    /// The server's id of the statement, as shared bytes (the official
    /// crate's accessor).
    pub fn get_id(&self) -> &Bytes {
        &self.shared.id
    }

    /// The bind markers, in order.
    pub fn bind_markers(&self) -> &[ColumnSpec] {
        &self.shared.metadata.col_specs
    }

    /// The bind markers, looked up by position or name (the official
    /// crate's view of [`bind_markers`](Self::bind_markers)).
    pub fn get_variable_col_specs(&self) -> ColumnSpecs<'_> {
        ColumnSpecs::new(self.bind_markers())
    }

    /// Whether the statement binds the whole partition key, so that the
    /// session can route it by token.
    pub fn is_token_aware(&self) -> bool {
        !self.pk_indexes().is_empty()
    }

    /// Whether the server marked it as a lightweight transaction (ScyllaDB's
    /// LWT extension); [`is_lwt`](Self::is_lwt) also counts a serial
    /// consistency.
    pub fn is_confirmed_lwt(&self) -> bool {
        self.shared.is_lwt
    }

    /// The keyspace and table of its first bind marker, if it has one.
    pub fn get_table_spec(&self) -> Option<TableSpec<'_>> {
        self.bind_markers().first().map(ColumnSpec::table_spec)
    }

    /// The keyspace of the table it binds, if known.
    pub fn get_keyspace_name(&self) -> Option<&str> {
        self.keyspace()
    }

    /// The table it binds, if known.
    pub fn get_table_name(&self) -> Option<&str> {
        self.table()
    }

    /// Asks the server to leave the result metadata out of responses and
    /// reads rows with the columns known from the preparation, on
    /// connections without result-metadata ids (plain protocol v4; with ids
    /// this is the default and always safe). Without ids it is unsafe
    /// across `ALTER TABLE` of the tables it reads; the session-wide switch
    /// is [`SessionBuilder::skip_result_metadata`](crate::SessionBuilder::skip_result_metadata).
    pub fn set_use_cached_result_metadata(&mut self, use_cached: bool) {
        self.use_cached_result_metadata = use_cached;
    }

    /// Whether [`set_use_cached_result_metadata`](Self::set_use_cached_result_metadata) is on.
    pub fn get_use_cached_result_metadata(&self) -> bool {
        self.use_cached_result_metadata
    }

    /// The ids of the traces of its preparation (with tracing on).
    pub fn get_prepare_tracing_ids(&self) -> &[uuid::Uuid] {
        &self.prepare_tracing_ids
    }

    /// For each partition-key column, the index of its bind marker (empty if
    /// the statement does not bind the whole partition key).
    pub fn pk_indexes(&self) -> &[u16] {
        &self.shared.metadata.pk_indexes
    }

    /// The columns of the rows it returns, if the server described them
    /// (the latest ones: a result can report that they changed).
    pub fn result_columns(&self) -> Option<Arc<[ColumnSpec]>> {
        self.shared.result.load().specs.clone()
    }

    /// The server's id of the result columns (protocol v5, or v4 with
    /// ScyllaDB's `SCYLLA_USE_METADATA_ID`), sent with every execution.
    pub fn result_metadata_id(&self) -> Option<Bytes> {
        self.shared.result.load().id.clone()
    }

    /// The session keyspace it was prepared in (unqualified names resolve
    /// there; on protocol v5 every re-preparation names it).
    pub fn prepared_in(&self) -> Option<&str> {
        self.shared.prepared_in.as_deref().map(String::as_str)
    }

    /// Whether the server marked it as a lightweight transaction (ScyllaDB),
    /// or it is run with a serial consistency (its own or its profile's).
    pub fn is_lwt(&self) -> bool {
        self.shared.is_lwt
            || self.options.serial_consistency.is_some()
            || self
                .options
                .profile
                .as_ref()
                .is_some_and(|h| h.profile().serial_consistency.is_some())
    }

    /// The keyspace of the table it binds, if known.
    pub fn keyspace(&self) -> Option<&str> {
        self.shared.keyspace.as_deref()
    }

    /// The table it binds, if known (from its bind markers).
    pub fn table(&self) -> Option<&str> {
        self.shared.table.as_deref()
    }

    /// The token of the partition that executing this statement with
    /// `values` addresses: what the session routes by. `None` when the
    /// statement does not bind the whole partition key (or a key component
    /// is null or unset). Fails if `values` do not fit the bind markers.
    ///
    /// ```no_run
    /// # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// let p = session.prepare("SELECT v FROM ks.t WHERE k = ?").await?;
    /// let token = p.token((42,))?;
    /// # Ok(()) }
    /// ```
    pub fn token(
        &self,
        values: impl SerializeRow,
    ) -> Result<Option<Token>, crate::error::ExecutionError> {
        let mut serialized = scylla_cql::types::SerializedValues::new();
        values.serialize_row(self.bind_markers(), &mut serialized)?;
        Ok(crate::routing::partition_key::token_of(
            self.pk_indexes(),
            &serialized,
        ))
    }

    /// The token of the partition that `values` address (the official
    /// `scylla` crate's name for [`token`](Self::token), taking the values
    /// by reference).
    pub fn calculate_token(
        &self,
        values: &impl SerializeRow,
    ) -> Result<Option<Token>, crate::error::ExecutionError> {
        self.token(values)
    }

    option_setters!();
}

/// A clone (cheap: the statement's shared part is reference-counted), so
/// that methods taking `impl Into<PreparedStatement>` take `&prepared` too.
impl From<&PreparedStatement> for PreparedStatement {
    fn from(p: &PreparedStatement) -> Self {
        p.clone()
    }
}
