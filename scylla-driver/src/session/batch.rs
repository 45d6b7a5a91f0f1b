//! Running a batch: each statement resolved to a prepared statement (when it
//! takes values) or plain text, routed by the first statement that binds a
//! whole partition key.

use std::borrow::Cow;

use scylla_cql::frame::request::{BatchStatement as WireStatement, BatchStatementKind};
use scylla_cql::types::serialize::BatchValues;
use scylla_cql::types::SerializedValues;

use super::execute;
use super::message::{BatchMessage, BatchPrepared};
use super::{values, Session};
use crate::error::{BadQuery, ExecutionError};
use crate::metrics::Paging;
use crate::result::QueryResult;
use crate::statement::{Batch, BatchStatement, PreparedStatement};

/// Runs `batch` with one value list per statement.
pub(super) async fn run(
    session: &Session,
    batch: &Batch,
    values: &(impl BatchValues + ?Sized),
) -> Result<QueryResult, ExecutionError> {
    if values.len() != batch.statements.len() {
        return Err(ExecutionError::BadQuery(BadQuery::BatchValuesCount {
            statements: batch.statements.len(),
            value_lists: values.len(),
        }));
    }
    // Resolve every statement to a prepared one (or plain text without
    // values), and serialize its values.
    let mut resolved: Vec<(Option<PreparedStatement>, Option<&str>, SerializedValues)> =
        Vec::with_capacity(values.len());
    for (i, statement) in batch.statements.iter().enumerate() {
        let Some(v) = values.row(i) else {
            // Ruled out by the length check above (a `BatchValues` whose
            // `row` disagrees with its `len` is a bug in that impl).
            return Err(ExecutionError::BadQuery(BadQuery::BatchValuesMissing(i)));
        };
        match statement {
            BatchStatement::Prepared(p) => {
                resolved.push((Some(p.clone()), None, values::serialize(p, v)?.into_inner()));
            }
            BatchStatement::Query(text) => {
                if v.is_empty() {
                    resolved.push((None, Some(text.as_str()), SerializedValues::new()));
                } else {
                    // The row is asked for again after the await: a
                    // `&dyn SerializeRow` held across it would make the
                    // future `Send` only for `Sync` rows of any type, not
                    // (as it is) whenever `values` is `Sync`.
                    let p = session.prepare(text.as_str()).await?;
                    let v = values
                        .row(i)
                        .ok_or(ExecutionError::BadQuery(BadQuery::BatchValuesMissing(i)))?;
                    let s = values::serialize(&p, v)?.into_inner();
                    resolved.push((Some(p), None, s));
                }
            }
        }
    }
    let inner = &session.inner;
    let state = inner.state();
    // Route by the first statement that binds a whole partition key.
    let routing = resolved
        .iter()
        .find_map(|(p, _, v)| {
            let r = values::routing(&state, p.as_ref()?, v);
            r.token.is_some().then_some(r)
        })
        .unwrap_or_default();
    let statements: Vec<WireStatement<'_>> = resolved
        .iter()
        .map(|(p, text, v)| WireStatement {
            kind: match (p, text) {
                (Some(p), _) => BatchStatementKind::Prepared(Cow::Borrowed(&p.shared.id)),
                (None, Some(t)) => BatchStatementKind::Query(Cow::Borrowed(*t)),
                (None, None) => BatchStatementKind::Query(Cow::Borrowed("")),
            },
            values: Cow::Borrowed(v),
        })
        .collect();
    let o = &batch.options;
    let profiles = inner.profiles(o);
    let msg = BatchMessage {
        batch: scylla_cql::frame::request::Batch {
            batch_type: batch.batch_type,
            statements: Cow::Owned(statements),
            consistency: inner.consistency(o, &profiles),
            serial_consistency: inner.serial_consistency(o, &profiles),
            default_timestamp: o.timestamp,
            // The session's keyspace is added per attempt (v5 only).
            keyspace: None,
            now_in_seconds: o.now_in_seconds,
        },
        prepared: resolved
            .iter()
            .filter_map(|(p, _, _)| {
                p.as_ref().map(|p| BatchPrepared {
                    id: &p.shared.id,
                    text: &p.shared.contents,
                    keyspace: p.shared.prepared_in.as_deref().map(String::as_str),
                })
            })
            .collect(),
        keyspace: inner.keyspace.load_full(),
    };
    let opts = inner.run_options(o, &profiles);
    // Pinned in place (see `Session::execute_page`).
    let answer = {
        let run = std::pin::pin!(execute::run(inner, &state, &routing, &msg, &opts));
        match run.await {
            Ok(answer) => answer,
            Err(e) => {
                inner.count_failed(Paging::Unpaged, &e);
                return Err(e);
            }
        }
    };
    inner.finish(answer, None).await
}
