//! Preparing a statement: on one connection of every node, so that executions
//! rarely meet UNPREPARED (and when they do, `execute` prepares again on the
//! spot).
//!
//! On protocol v5 the PREPARE names the session's keyspace, and the statement
//! remembers it: a re-preparation after a `USE` then still resolves
//! unqualified tables where the first one did (v4 cannot say it: there the
//! connection's keyspace applies).

use arc_swap::ArcSwap;
use scylla_cql::frame::request::Prepare;
use scylla_cql::frame::response::{Response, ResultBody};
use scylla_cql::frame::ProtocolVersion;

use super::SessionInner;
use crate::connection::RequestOptions;
use crate::error::ExecutionError;
use crate::statement::prepared::{PreparedShared, ResultShape};
use crate::statement::PreparedStatement;

/// Prepares `text` on one connection of every node; the first answer wins.
pub(super) async fn prepare_everywhere(
    inner: &SessionInner,
    text: &str,
) -> Result<PreparedStatement, ExecutionError> {
    let state = inner.state();
    let prepared_in = inner.keyspace.load_full();
    let opts = RequestOptions {
        timeout: Some(inner.config.request_timeout),
        ..RequestOptions::default()
    };
    let mut first: Option<Result<PreparedStatement, ExecutionError>> = None;
    let mut new_keyspace = false;
    for node in &state.nodes {
        let Some(conn) = node.pool.connection_for(None) else {
            continue;
        };
        inner.ensure_keyspace(&conn).await;
        let msg = Prepare {
            query: text.into(),
            keyspace: keyspace_for(
                conn.protocol_version(),
                prepared_in.as_deref().map(String::as_str),
            ),
        };
        let outcome = match conn.request(&msg, &opts).await {
            Ok(frame) => match frame.response {
                Response::Result(ResultBody::Prepared(p)) => {
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
                        (Some(ks), Some(t)) => {
                            let store = &inner.cluster.tablets;
                            new_keyspace |= store.use_keyspace(ks);
                            Some(store.table(ks, t))
                        }
                        _ => None,
                    };
                    Ok(PreparedStatement::new(PreparedShared {
                        is_lwt: p.metadata.is_lwt(ctx_mask),
                        result: ArcSwap::from_pointee(ResultShape {
                            id: p.result_metadata_id.clone(),
                            specs: p.result_metadata.col_specs.clone(),
                        }),
                        prepared_in: prepared_in.clone(),
                        id: p.id,
                        contents: text.to_owned(),
                        metadata: p.metadata,
                        keyspace,
                        table,
                        tablets,
                    }))
                }
                Response::Error(e) => Err(ExecutionError::server(e.error, e.message, node.address)),
                _ => Err(ExecutionError::Protocol(
                    "unexpected answer to PREPARE".into(),
                )),
            },
            Err(error) => Err(ExecutionError::Connection {
                node: node.address,
                error,
            }),
        };
        // A server error (bad syntax, unknown table) is the same on every
        // node: stop at the first.
        let stop = matches!(outcome, Err(ExecutionError::Server(_)));
        if first.as_ref().is_none_or(|f| f.is_err()) {
            first = Some(outcome);
        }
        if stop {
            break;
        }
    }
    if new_keyspace {
        warm_up_new_keyspace(inner).await;
    }
    first.unwrap_or_else(|| Err(ExecutionError::NoConnection("no node is connected".into())))
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
