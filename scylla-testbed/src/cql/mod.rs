//! The CQL layer of the test cluster: an in-memory database behind the
//! network layer's [`RequestHandler`] seam.
//!
//! [`CqlHandler`] answers QUERY, PREPARE, EXECUTE and BATCH: the system
//! tables drivers read at start-up, schema statements, and reads/writes by
//! primary key on tables held in one [`Store`] shared by every node. It also
//! judges routing: for each request touching one partition it computes the
//! token and bumps the connection's wrong-shard and non-replica counters
//! (see `accounting`).
//!
//! Layout: `lexer` and `parser` (text to `ast`), `prepared` (bind
//! markers), `values` (literals and bound values), `store` (data),
//! `select` (filtering, projection, paging), `dml` and `ddl`
//! (executors), `types` (user-defined types), `index` (storage-attached
//! indexes and vector search), `system` (system and virtual tables), `replicas`
//! (replica placement), `error` (CQL errors).
//!
//! Query tracing is off by default: a request with the TRACING flag gets an
//! Invalid error ([`TRACING_UNSUPPORTED`]) and `system_traces` does not
//! exist ([`TRACES_UNSUPPORTED`]). With
//! [`Topology::set_record_traces`](crate::topology::Topology::set_record_traces)
//! on, traced requests are answered with a trace id and their traces are
//! in `system_traces.sessions` and `.events` (see `traces`).

mod accounting;
mod ast;
mod availability;
mod ddl;
mod dml;
mod error;
mod ids;
mod index;
mod lexer;
mod parser;
mod prepared;
mod replicas;
mod select;
mod store;
mod system;
mod traces;
mod types;
mod values;

use scylla_cql::frame::ProtocolVersion;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use scylla_cql::frame::envelope::decode_envelope;
use scylla_cql::frame::header::{Flags, Opcode, DEFAULT_MAX_BODY_LEN};
use scylla_cql::frame::request::{
    Batch, BatchStatementKind, QueryParameters, Request as CqlRequest, RequestContext,
};
use scylla_cql::frame::response::result::{Prepared, PreparedMetadata, ResultMetadata, TableSpec};
use scylla_cql::frame::response::ResultBody;
use scylla_cql::frame::{wire, MessageBody};
use scylla_cql::token::murmur3::hash3_x64_128;
use scylla_cql::types::{ColumnType, SerializedValues};

pub use store::Store;

use crate::handler::{
    Compression, ConnCtx, HandlerFuture, Reply, Request, RequestHandler, Response,
};
use ast::Statement;
use dml::{keyspace_of, Outcome};
use error::{invalid, CqlError};
use prepared::{bind_specs, selected_specs, PreparedStatement};
use select::PageOpts;
use traces::Recorder;

/// The message of the Invalid error (0x2200) that answers any request with
/// the TRACING flag: the test cluster does not trace (and has no
/// `system_traces` keyspace; reading it fails with [`TRACES_UNSUPPORTED`]).
pub const TRACING_UNSUPPORTED: &str = "tracing is not supported by the test cluster";

/// The message of the Invalid error that answers statements on
/// `system_traces` tables.
pub const TRACES_UNSUPPORTED: &str =
    "system_traces is not supported by the test cluster (it does not trace requests)";

/// The in-memory CQL server every node of a cluster shares.
#[derive(Debug, Clone, Default)]
pub struct CqlHandler {
    store: Arc<Store>,
}

impl CqlHandler {
    /// A handler with an empty store.
    pub fn new() -> Self {
        CqlHandler::default()
    }

    /// A handler over an existing store (e.g. to share it between clusters).
    pub fn with_store(store: Arc<Store>) -> Self {
        CqlHandler { store }
    }

    /// The store (schema, rows, prepared statements).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }
}

impl RequestHandler for CqlHandler {
    fn handle<'a>(&'a self, ctx: &'a ConnCtx, request: Request) -> HandlerFuture<'a> {
        let r = self.serve(ctx, &request);
        Box::pin(async move { Reply::Respond(r) })
    }
}

fn result_response(body: &ResultBody, version: ProtocolVersion) -> Response {
    let mut b = BytesMut::new();
    match body.encode_body(&mut b, version) {
        Ok(()) => Response::new(Opcode::Result, b.freeze()),
        Err(e) => {
            CqlError::Invalid(format!("cannot encode the result: {e}")).into_response(version)
        }
    }
}

/// `r` with the tablet routing custom payload (`tablets-routing-v1` or
/// `-v2`) in front of its body (flag CUSTOM_PAYLOAD), when there is one.
fn with_tablet_payload(r: Response, payload: Option<accounting::Payload>) -> Response {
    let Some((key, p)) = payload else { return r };
    if r.opcode != Opcode::Result {
        return r;
    }
    let mut b = BytesMut::with_capacity(2 + 2 + key.len() + 4 + p.len() + r.body.len());
    let entry = [(key, Some(p.as_slice()))];
    if let Err(e) = wire::put_bytes_map(&mut b, entry.into_iter(), "custom payload") {
        tracing::warn!(error = %e, "cannot encode the custom payload; answering without it");
        return r;
    }
    b.extend_from_slice(&r.body);
    Response {
        opcode: r.opcode,
        flags: r.flags.with(Flags::CUSTOM_PAYLOAD),
        body: b.freeze(),
    }
}

/// `r` with the trace id in front of its body (flag TRACING), for a RESULT
/// (an error goes without: the client then gets the error alone).
fn with_tracing_id(r: Response, id: uuid::Uuid) -> Response {
    if r.opcode != Opcode::Result {
        return r;
    }
    let mut b = BytesMut::with_capacity(16 + r.body.len());
    b.extend_from_slice(id.as_bytes());
    b.extend_from_slice(&r.body);
    Response {
        opcode: r.opcode,
        flags: r.flags.with(Flags::TRACING),
        body: b.freeze(),
    }
}

/// What a traced request was, for its trace: the command, the request
/// (the statement's text) and its parameters.
fn describe(msg: &CqlRequest<'_>, store: &Store) -> (&'static str, String, Vec<(String, String)>) {
    let params = |p: &QueryParameters<'_>, query: &str| {
        let mut v = vec![
            ("consistency_level".to_owned(), p.consistency.to_string()),
            ("query".to_owned(), query.to_owned()),
        ];
        if let Some(n) = p.page_size {
            v.push(("page_size".to_owned(), n.to_string()));
        }
        v
    };
    match msg {
        CqlRequest::Query(q) => (
            "QUERY",
            q.contents.to_string(),
            params(&q.params, &q.contents),
        ),
        CqlRequest::Execute(e) => {
            let text = store
                .prepared(&e.id)
                .map(|p| p.text.clone())
                .unwrap_or_default();
            ("EXECUTE", text.clone(), params(&e.params, &text))
        }
        CqlRequest::Batch(b) => (
            "BATCH",
            format!("{} statements", b.statements.len()),
            vec![("consistency_level".to_owned(), b.consistency.to_string())],
        ),
        other => (other.name(), String::new(), Vec::new()),
    }
}

fn page_opts(p: &QueryParameters<'_>) -> PageOpts {
    PageOpts {
        page_size: p.page_size,
        paging_state: p.paging_state.as_ref().map(|s| s.to_vec()),
        skip_metadata: p.skip_metadata,
        metadata_id: None,
        consistency: Some(p.consistency),
    }
}

impl CqlHandler {
    fn serve(&self, ctx: &ConnCtx, req: &Request) -> Response {
        let version = ctx.protocol_version();
        let comp = ctx.compression().map(Compression::wire);
        let env = match decode_envelope(&req.header, req.body.clone(), comp, DEFAULT_MAX_BODY_LEN) {
            Ok(e) => e,
            Err(e) => {
                return CqlError::Protocol(format!("invalid frame: {e}")).into_response(version)
            }
        };
        // Unless the cluster records traces, a traced request fails at once,
        // saying why: answered as if untraced, it would leave the client
        // waiting for a trace that never comes.
        let mut recorder = None;
        if env.tracing_requested() {
            if !ctx.topology().records_traces() {
                return CqlError::Invalid(TRACING_UNSUPPORTED.to_owned()).into_response(version);
            }
            recorder = Some(Recorder::start(ctx.node().advertised, ctx.shard()));
        }
        let decode_ctx = RequestContext {
            version,
            use_metadata_id: ctx.use_metadata_id(),
            tablets_routing_v2: ctx.tablets_routing_v2(),
        };
        let msg = match CqlRequest::decode_in(req.header.opcode, &env.body, &decode_ctx) {
            Ok(m) => m,
            Err(e) => {
                let what = format!("invalid {:?} body: {e}", req.header.opcode);
                return CqlError::Protocol(what).into_response(version);
            }
        };
        if let Some(r) = recorder.as_mut() {
            r.event(format!("{} received from {}", msg.name(), ctx.peer_addr()));
        }
        // The `tablets-routing-v1` payload value, when the request touched a
        // tablet this (node, shard) does not hold.
        let mut tablet_payload = None;
        let result = match &msg {
            CqlRequest::Query(q) => {
                tracing::debug!(node = ctx.node_index(), query = %q.contents, "QUERY");
                parse(&q.contents).and_then(|st| {
                    // v5: the request's own keyspace comes first.
                    let ks = q.params.keyspace.as_deref().map(str::to_owned);
                    let ks = ks.or_else(|| ctx.keyspace());
                    let values = &q.params.values;
                    let opts = page_opts(&q.params);
                    let payload = (&mut tablet_payload, None);
                    self.run(ctx, ks.as_deref(), &st, values, &opts, payload)
                })
            }
            CqlRequest::Prepare(p) => {
                tracing::debug!(node = ctx.node_index(), query = %p.query, "PREPARE");
                let ks = p.keyspace.as_deref().map(str::to_owned);
                self.prepare(ctx, &p.query, ks.or_else(|| ctx.keyspace()))
            }
            // A statement this node has not prepared since it started is
            // unknown here, even if another node knows it.
            CqlRequest::Execute(e) => match self
                .store
                .prepared(&e.id)
                .filter(|_| ctx.knows_prepared(&e.id))
            {
                None => Err(CqlError::Unprepared(Bytes::copy_from_slice(&e.id))),
                Some(p) => {
                    let ks = p.keyspace.clone().or_else(|| ctx.keyspace());
                    let values = &e.params.values;
                    let mut opts = page_opts(&e.params);
                    opts.metadata_id = e.result_metadata_id.as_ref().map(|m| m.to_vec());
                    self.run(
                        ctx,
                        ks.as_deref(),
                        &p.statement,
                        values,
                        &opts,
                        (&mut tablet_payload, e.tablet_version_block),
                    )
                }
            },
            CqlRequest::Batch(b) => self.batch(ctx, b, &mut tablet_payload),
            other => Err(CqlError::Protocol(format!(
                "unexpected {} message",
                other.name()
            ))),
        };
        let response = match &result {
            Ok(body) => with_tablet_payload(result_response(body, version), tablet_payload),
            Err(e) => {
                tracing::debug!(node = ctx.node_index(), error = ?e, "CQL error");
                e.clone().into_response(version)
            }
        };
        match recorder {
            Some(mut r) => {
                match &result {
                    Ok(_) => r.event("Statement executed"),
                    Err(e) => r.event(format!("Statement failed: {e:?}")),
                }
                let (command, request, params) = describe(&msg, &self.store);
                let trace = r.finish(ctx.peer_addr().ip(), command, request, params);
                let id = trace.id;
                self.store.traces().add(trace);
                with_tracing_id(response, id)
            }
            None => response,
        }
    }

    /// Runs one statement and accounts for its routing (`payload` gets the
    /// tablet routing payload to attach, if any).
    fn run(
        &self,
        ctx: &ConnCtx,
        ks: Option<&str>,
        st: &Statement,
        values: &SerializedValues,
        opts: &PageOpts,
        (payload, block): (&mut Option<accounting::Payload>, Option<u8>),
    ) -> Result<ResultBody, CqlError> {
        let out = self.run_unaccounted(ctx, ks, st, values, opts)?;
        if let Some(r) = &out.routing {
            *payload = accounting::account(ctx, &self.store, r, block);
        }
        Ok(out.result)
    }

    fn run_unaccounted(
        &self,
        ctx: &ConnCtx,
        ks: Option<&str>,
        st: &Statement,
        values: &SerializedValues,
        opts: &PageOpts,
    ) -> Result<Outcome, CqlError> {
        match st {
            Statement::Select(_)
            | Statement::Insert { .. }
            | Statement::Update { .. }
            | Statement::Delete { .. } => dml::execute(ctx, &self.store, ks, st, values, opts),
            _ => {
                if !values.is_empty() {
                    return invalid("This statement takes no bound values");
                }
                ddl::execute(ctx, &self.store, ks, st).map(Outcome::plain)
            }
        }
    }

    /// Prepares `text` with unqualified names in `session_ks` (the
    /// connection's keyspace, or the one the PREPARE named).
    fn prepare(
        &self,
        ctx: &ConnCtx,
        text: &str,
        session_ks: Option<String>,
    ) -> Result<ResultBody, CqlError> {
        let st = parse(text)?;
        let mut metadata = PreparedMetadata::default();
        let mut result_metadata = ResultMetadata::empty();
        let table = match &st {
            Statement::Select(s) => Some(&s.table),
            Statement::Insert { table, .. }
            | Statement::Update { table, .. }
            | Statement::Delete { table, .. } => Some(table),
            _ => None,
        };
        if let Some(name) = table {
            let ks = keyspace_of(name, session_ks.as_deref())?;
            let schema = self.store.read();
            let (columns, pk): (Vec<(String, ColumnType)>, Vec<String>) = if system::is_system(&ks)
            {
                let v = system::system_view(ctx, &self.store, &schema, &ks, &name.name)?;
                (v.columns, Vec::new())
            } else {
                let t = dml::table(&schema, &ks, &name.name)?;
                if let Statement::Select(s) = &st {
                    if let Some((col, _)) = &s.ann {
                        index::check_prepared(t, col, s.limit.is_some())?;
                    }
                }
                let cols = t
                    .columns
                    .iter()
                    .map(|c| (c.name.clone(), c.typ.clone()))
                    .collect();
                let pk = t.columns[..t.pk_len]
                    .iter()
                    .map(|c| c.name.clone())
                    .collect();
                (cols, pk)
            };
            let col_type = |c: &str| columns.iter().find(|(n, _)| n == c).map(|(_, t)| t.clone());
            let (specs, pk_indexes) = bind_specs(&st, &ks, &name.name, &pk, &col_type)?;
            metadata.global_table_spec = (!specs.is_empty()).then(|| TableSpec {
                keyspace: ks.clone(),
                table: name.name.clone(),
            });
            metadata.col_specs = specs;
            metadata.pk_indexes = pk_indexes;
            if let Statement::Select(s) = &st {
                let specs = selected_specs(&s.selection, &ks, &name.name, &columns)?;
                result_metadata = ResultMetadata::with_columns(specs);
            }
        }
        // The id: a hash of the keyspace the names resolve in and the text.
        let mut key = session_ks.clone().unwrap_or_default().into_bytes();
        key.push(0);
        key.extend_from_slice(text.as_bytes());
        let (a, b) = hash3_x64_128(&key);
        let mut id = a.to_be_bytes().to_vec();
        id.extend_from_slice(&b.to_be_bytes());
        let id = Bytes::from(id);
        ctx.record_prepare(id.clone());
        self.store.add_prepared(Arc::new(PreparedStatement {
            id: id.clone(),
            keyspace: session_ks,
            statement: st,
            text: text.to_owned(),
        }));
        Ok(ResultBody::Prepared(Box::new(Prepared {
            id,
            // An id always in v5; in v4 only when the connection negotiated
            // SCYLLA_USE_METADATA_ID.
            result_metadata_id: (ctx.protocol_version() == ProtocolVersion::V5
                || ctx.use_metadata_id())
            .then(|| select::metadata_id(&result_metadata)),
            metadata,
            result_metadata,
        })))
    }

    fn batch(
        &self,
        ctx: &ConnCtx,
        b: &Batch<'_>,
        payload: &mut Option<accounting::Payload>,
    ) -> Result<ResultBody, CqlError> {
        let mut routings = Vec::new();
        for s in b.statements.iter() {
            let (st, ks) = match &s.kind {
                BatchStatementKind::Query(q) => {
                    let ks = b.keyspace.as_deref().map(str::to_owned);
                    (Arc::new(parse(q)?), ks.or_else(|| ctx.keyspace()))
                }
                BatchStatementKind::Prepared(id) => {
                    match self.store.prepared(id).filter(|_| ctx.knows_prepared(id)) {
                        Some(p) => {
                            let ks = p.keyspace.clone().or_else(|| ctx.keyspace());
                            (Arc::new(p.statement.clone()), ks)
                        }
                        None => return Err(CqlError::Unprepared(Bytes::copy_from_slice(id))),
                    }
                }
            };
            if !matches!(
                *st,
                Statement::Insert { .. } | Statement::Update { .. } | Statement::Delete { .. }
            ) {
                return invalid("Only INSERT, UPDATE and DELETE statements are allowed in BATCH");
            }
            let out =
                self.run_unaccounted(ctx, ks.as_deref(), &st, &s.values, &PageOpts::default())?;
            routings.push(out.routing);
        }
        // Each row: does this shard own its partition (or must it forward)?
        for r in routings.iter().flatten() {
            ctx.record_batch_row(!accounting::owned_here(ctx, &self.store, r));
        }
        // A batch is one request: account once if it touched one partition.
        if let Some(Some(first)) = routings.first() {
            let same = routings.iter().all(|r| {
                r.as_ref()
                    .is_some_and(|r| r.keyspace == first.keyspace && r.token == first.token)
            });
            if same {
                *payload = accounting::account(ctx, &self.store, first, None);
            }
        }
        Ok(ResultBody::Void)
    }
}

fn parse(text: &str) -> Result<Statement, CqlError> {
    parser::parse(text).map_err(|e| {
        tracing::info!(query = %text, error = %e, "unsupported or invalid CQL");
        CqlError::Syntax(e.to_string())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
#[path = "cql_tests.rs"]
mod tests;
