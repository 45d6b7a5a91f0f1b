//! Preparing a statement: on one connection of every node, so that executions
//! rarely meet UNPREPARED (and when they do, `execute` prepares again on the
//! spot).

use scylla_cql::frame::request::Prepare;
use scylla_cql::frame::response::{Response, ResultBody};

use super::SessionInner;
use crate::connection::RequestOptions;
use crate::error::ExecutionError;
use crate::statement::prepared::PreparedShared;
use crate::statement::PreparedStatement;

/// Prepares `text` on one connection of every node; the first answer wins.
pub(super) async fn prepare_everywhere(
    inner: &SessionInner,
    text: &str,
) -> Result<PreparedStatement, ExecutionError> {
    let state = inner.state();
    let msg = Prepare { query: text.into() };
    let opts = RequestOptions {
        timeout: Some(inner.config.request_timeout),
        ..RequestOptions::default()
    };
    let mut first: Option<Result<PreparedStatement, ExecutionError>> = None;
    for node in &state.nodes {
        let Some(conn) = node.pool.connection_for(None) else {
            continue;
        };
        inner.ensure_keyspace(&conn).await;
        let outcome = match conn.request(&msg, &opts).await {
            Ok(frame) => match frame.response {
                Response::Result(ResultBody::Prepared(p)) => {
                    let ctx_mask = conn.info().server.response_context.lwt_metadata_mask;
                    let keyspace = p
                        .metadata
                        .global_table_spec
                        .as_ref()
                        .map(|t| t.keyspace.clone())
                        .or_else(|| p.metadata.col_specs.first().map(|c| c.keyspace.clone()));
                    Ok(PreparedStatement::new(PreparedShared {
                        is_lwt: p.metadata.is_lwt(ctx_mask),
                        result_specs: p.result_metadata.col_specs.clone().map(Into::into),
                        id: p.id,
                        contents: text.to_owned(),
                        metadata: p.metadata,
                        keyspace,
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
    first.unwrap_or_else(|| Err(ExecutionError::NoConnection("no node is connected".into())))
}
