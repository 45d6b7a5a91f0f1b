//! Preparing a statement: on one connection of every node at once, so that
//! executions rarely meet UNPREPARED (and when they do, `execute` prepares
//! again on the spot); the first success is returned once the other nodes
//! answered too, or after a short grace.
//!
//! On protocol v5 the PREPARE names the session's keyspace, and the statement
//! remembers it: a re-preparation after a `USE` then still resolves
//! unqualified tables where the first one did (v4 cannot say it: there the
//! connection's keyspace applies).

use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use scylla_cql::frame::request::Prepare;
use scylla_cql::frame::response::{Response, ResultBody};
use scylla_cql::frame::ProtocolVersion;
use tokio::task::JoinSet;

use super::inner::SwitchFailed;
use super::SessionInner;
use crate::connection::{Connection, RequestOptions};
use crate::error::{ConnectionPoolError, PrepareError, RequestAttemptError, UnexpectedResponse};
use crate::statement::prepared::{PreparedShared, ResultShape};
use crate::statement::PreparedStatement;

/// Prepares `text` on one connection of every node, all at once, and
/// returns the first success (or, when every node failed, the first error;
/// a server error such as bad syntax is the same everywhere and returns at
/// once). The other nodes' answers arrive in the background, where their ids
/// are compared with the winner's: ids that disagree (nodes of different
/// versions hash differently) only mean an UNPREPARED and a re-preparation
/// later, so they are logged, not failed.
///
/// Cancellation: dropping the future aborts the preparations still running.
pub(super) async fn prepare_everywhere(
    inner: &Arc<SessionInner>,
    text: &str,
    tracing: bool,
) -> Result<PreparedStatement, PrepareError> {
    let state = inner.state();
    let prepared_in = inner.keyspace.load_full();
    let text: Arc<str> = Arc::from(text);
    let mut tasks = JoinSet::new();
    for node in &state.nodes {
        let Some(conn) = node.pool.connection_for(None) else {
            continue;
        };
        let (inner, text, prepared_in) = (inner.clone(), text.clone(), prepared_in.clone());
        let address = node.address;
        tasks.spawn(async move {
            let outcome = prepare_on(&inner, &conn, address, &text, prepared_in, tracing).await;
            (address, outcome)
        });
    }
    if tasks.is_empty() {
        let last = state.nodes.first().and_then(|n| n.pool.last_error());
        return Err(PrepareError::ConnectionPoolError(
            ConnectionPoolError::from_last(last),
        ));
    }
    // The first node's failure (the others are logged).
    let mut first_failure: Option<RequestAttemptError> = None;
    let mut winner = None;
    // Bounded: one iteration per node's task.
    while let Some(joined) = tasks.join_next().await {
        let outcome = match joined {
            Ok((_, outcome)) => outcome,
            Err(e) => {
                tracing::error!(error = %e, "a preparation task panicked or was cancelled");
                Err(NodeFailure::Fatal(PrepareError::Internal(
                    "a preparation task panicked",
                )))
            }
        };
        match outcome {
            Ok(p) => {
                winner = Some(p);
                break;
            }
            // A refusal (bad syntax, ...) is the same everywhere.
            Err(NodeFailure::Fatal(e)) => return Err(e),
            Err(NodeFailure::Node(node, error)) => {
                tracing::debug!(%node, %error, "preparing on a node failed");
                first_failure.get_or_insert(error);
            }
        }
    }
    let Some(prepared) = winner else {
        return Err(match first_failure {
            Some(first_attempt) => PrepareError::AllAttemptsFailed { first_attempt },
            None => PrepareError::Internal("every preparation task ended without an outcome"),
        });
    };
    if !tasks.is_empty() {
        // The other nodes usually answer within moments: an execution sent
        // before they did would meet UNPREPARED there. A node slower than
        // the grace (down, overloaded) is not waited for.
        let id = prepared.id().to_vec();
        let mut rest = tokio::spawn(compare_ids(tasks, id));
        let _ = tokio::time::timeout(OTHERS_GRACE, &mut rest).await;
    }
    // Marked here, for the winner only, so that exactly one preparation
    // sees the keyspace as new.
    let new_keyspace = prepared
        .keyspace()
        .is_some_and(|ks| inner.cluster.tablets.use_keyspace(ks));
    if new_keyspace {
        warm_up_new_keyspace(inner).await;
    }
    Ok(prepared)
}

/// How long a preparation waits for the other nodes after the first
/// success.
const OTHERS_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

type PrepareOutcome = (SocketAddr, Result<PreparedStatement, NodeFailure>);

/// How preparing on one node failed.
enum NodeFailure {
    /// That node failed (its connection, a timeout): others may succeed.
    Node(SocketAddr, RequestAttemptError),
    /// The statement itself failed (refused, ...): the same everywhere.
    Fatal(PrepareError),
}

impl std::fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeFailure::Node(node, e) => write!(f, "{node}: {e}"),
            NodeFailure::Fatal(e) => write!(f, "{e}"),
        }
    }
}

/// Waits for the preparations still running and logs ids that differ from
/// `id` (bounded: each task ends within the request timeout).
async fn compare_ids(mut tasks: JoinSet<PrepareOutcome>, id: Vec<u8>) {
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((node, Ok(other))) if other.id() != id.as_slice() => {
                tracing::warn!(
                    %node,
                    "a node prepared the statement under another id; executions there will be prepared again"
                );
            }
            Ok((node, Err(e))) => tracing::debug!(%node, error = %e, "preparing on a node failed"),
            _ => {}
        }
    }
}

/// Prepares `text` on `conn`.
async fn prepare_on(
    inner: &SessionInner,
    conn: &Connection,
    address: SocketAddr,
    text: &str,
    prepared_in: Option<Arc<String>>,
    tracing: bool,
) -> Result<PreparedStatement, NodeFailure> {
    // The keyspace switch and the PREPARE share one deadline.
    let deadline = std::time::Instant::now() + inner.config.request_timeout;
    match inner.ensure_keyspace(conn, deadline).await {
        Ok(()) => {}
        Err(SwitchFailed::Connection(error)) => {
            return Err(NodeFailure::Node(address, error.into()))
        }
        Err(SwitchFailed::Refused(e)) => {
            return Err(NodeFailure::Fatal(PrepareError::UseKeyspaceError(e)))
        }
    }
    let msg = Prepare {
        query: text.into(),
        keyspace: keyspace_for(
            conn.protocol_version(),
            prepared_in.as_deref().map(String::as_str),
        ),
    };
    let now = std::time::Instant::now();
    let opts = RequestOptions {
        deadline: Some(deadline),
        tracing,
        ..RequestOptions::default()
    };
    let frame = conn
        .request_at(&msg, &opts, now)
        .await
        .map_err(|error| NodeFailure::Node(address, error.into()))?;
    let tracing_id = frame.tracing_id();
    let p = match frame.response {
        Response::Result(ResultBody::Prepared(p)) => p,
        Response::Error(e) => {
            return Err(NodeFailure::Fatal(PrepareError::AllAttemptsFailed {
                first_attempt: RequestAttemptError::DbError(e.error, e.message),
            }))
        }
        other => {
            return Err(NodeFailure::Fatal(PrepareError::AllAttemptsFailed {
                first_attempt: RequestAttemptError::UnexpectedResponse(UnexpectedResponse::new(
                    address,
                    "PREPARE",
                    crate::connection::handshake::response_name(&other),
                )),
            }))
        }
    };
    let ctx_mask = conn.info().server.response_context.lwt_metadata_mask;
    let (keyspace, table) = match (
        p.metadata.global_table_spec.as_ref(),
        p.metadata.col_specs.first(),
    ) {
        (Some(t), _) => (Some(t.keyspace.clone()), Some(t.table.clone())),
        (None, Some(c)) => (Some(c.keyspace.clone()), Some(c.table.clone())),
        (None, None) => (None, None),
    };
    let tablets = match (&keyspace, &table) {
        (Some(ks), Some(t)) => Some(inner.cluster.tablets.table(ks, t)),
        _ => None,
    };
    let mut prepared = PreparedStatement::new(PreparedShared {
        is_lwt: p.metadata.is_lwt(ctx_mask),
        result: ArcSwap::from_pointee(ResultShape {
            id: p.result_metadata_id.clone(),
            specs: p.result_metadata.col_specs.clone(),
        }),
        prepared_in,
        id: p.id,
        contents: text.to_owned(),
        metadata: p.metadata,
        keyspace,
        keyspace_id: Default::default(),
        table,
        tablets,
    });
    prepared.prepare_tracing_ids.extend(tracing_id);
    Ok(prepared)
}

/// The keyspace a PREPARE on a connection speaking `version` names: the
/// session's on v5, none on v4 (which cannot carry one).
pub(super) fn keyspace_for(
    version: ProtocolVersion,
    keyspace: Option<&str>,
) -> Option<std::borrow::Cow<'_, str>> {
    match version {
        ProtocolVersion::V5 => keyspace.map(Into::into),
        ProtocolVersion::V4 => None,
    }
}

/// The first statement of a keyspace the session did not use yet: read its
/// tablets now (bounded), so that the statement's first executions already
/// reach the right replicas and shards. Failures only log: the executions
/// then learn the tablets from the responses.
async fn warm_up_new_keyspace(inner: &SessionInner) {
    let cluster = &inner.cluster;
    if inner.config.tablet_warmup != crate::cluster::TabletWarmup::UsedKeyspaces {
        // All: warmed up at start; Off: learn lazily.
        return;
    }
    let read = crate::cluster::tablets::warm_up(
        &cluster.tablets,
        &cluster.control,
        inner.config.tablet_warmup,
        &inner.config.control.query,
    );
    match tokio::time::timeout(inner.config.request_timeout, read).await {
        Ok(Ok(rows)) => tracing::debug!(rows, "tablets of a newly used keyspace warmed up"),
        Ok(Err(e)) => tracing::warn!(error = %e, "tablet warm-up for a new keyspace failed"),
        Err(_) => {
            tracing::warn!("tablet warm-up for a new keyspace timed out");
        }
    }
}
