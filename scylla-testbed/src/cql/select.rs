//! SELECT over a [`View`]: filtering by the WHERE relations, projection,
//! LIMIT, COUNT(*), and paging.
//!
//! A view is a table's rows (or a system table's generated rows) in key
//! order, each with a byte key that sorts like the rows. The paging state
//! handed to the client is the key of the last row of the page, so the next
//! page starts right after it even if rows were added or removed meanwhile.

use bytes::Bytes;
use scylla_cql::frame::response::result::{ResultMetadata, Rows};
use scylla_cql::token::partition_key::serialize_partition_key;
use scylla_cql::token::{murmur3_token, Token};
use scylla_cql::types::ColumnType;

use super::ast::{Op, Relation, Select, Selection, SelectorKind};
use super::error::{invalid, CqlError};
use super::index;
use super::prepared::selected_specs;
use super::store::{compare, Row, Similarity};
use super::values::Value;

/// Rows to select from.
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub(crate) keyspace: String,
    pub(crate) name: String,
    pub(crate) columns: Vec<(String, ColumnType)>,
    /// Indexes of the partition key columns (empty: no `token()` support).
    pub(crate) pk: Vec<usize>,
    /// Rows in key order, with their keys.
    pub(crate) rows: Vec<(Vec<u8>, Row)>,
    /// The indexed columns and, for vectors, their similarity function
    /// (what `ORDER BY c ANN OF` needs).
    pub(crate) indexes: Vec<(String, Option<Similarity>)>,
}

impl View {
    /// The index of column `name`.
    pub(crate) fn index(&self, name: &str) -> Result<usize, CqlError> {
        match self.columns.iter().position(|(n, _)| n == name) {
            Some(i) => Ok(i),
            None => invalid(format!("Undefined column name {name}")),
        }
    }

    /// The type of column `name`.
    pub(crate) fn col_type(&self, name: &str) -> Option<ColumnType> {
        self.columns
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    }
}

/// The partition key bytes of `parts` (composite encoding for several).
pub(crate) fn partition_key(parts: &[&[u8]]) -> Result<Vec<u8>, CqlError> {
    serialize_partition_key(parts).map_err(|e| CqlError::Invalid(e.to_string()))
}

fn row_token(view: &View, row: &Row) -> Option<Token> {
    let parts: Option<Vec<&[u8]>> = view
        .pk
        .iter()
        .map(|&i| row.get(i).and_then(|c| c.as_deref()))
        .collect();
    let pk = partition_key(&parts?).ok()?;
    Some(murmur3_token(&pk))
}

fn op_holds(op: Op, ord: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::*;
    match op {
        Op::Eq => ord == Equal,
        Op::Ne => ord != Equal,
        Op::Lt => ord == Less,
        Op::Le => ord != Greater,
        Op::Gt => ord == Greater,
        Op::Ge => ord != Less,
    }
}

/// A relation with its resolved values, ready to test rows.
enum Filter {
    Cmp(usize, ColumnType, Op, Value),
    In(usize, Vec<Value>),
    Token(Op, i64),
}

fn filters(view: &View, rels: &[Relation], vals: &[Value]) -> Result<Vec<Filter>, CqlError> {
    let mut out = Vec::new();
    let mut k = 0usize;
    let mut take = || {
        let v = vals.get(k).cloned().unwrap_or(Value::Unset);
        k += 1;
        v
    };
    for r in rels {
        match r {
            Relation::Cmp(c, op, _) => {
                let i = view.index(c)?;
                out.push(Filter::Cmp(i, view.columns[i].1.clone(), *op, take()));
            }
            Relation::In(c, ts) => {
                let i = view.index(c)?;
                out.push(Filter::In(i, ts.iter().map(|_| take()).collect()));
            }
            Relation::Token(cols, op, _) => {
                let pk_names: Vec<&str> = view
                    .pk
                    .iter()
                    .map(|&i| view.columns[i].0.as_str())
                    .collect();
                if view.pk.is_empty()
                    || pk_names != cols.iter().map(String::as_str).collect::<Vec<_>>()
                {
                    return invalid(
                        "The token function arguments must be the partition key columns, in order",
                    );
                }
                let t = match take() {
                    Value::Set(b) if b.len() == 8 => {
                        i64::from_be_bytes(b[..8].try_into().unwrap_or([0; 8]))
                    }
                    _ => return invalid("Invalid token value"),
                };
                out.push(Filter::Token(*op, t));
            }
        }
    }
    Ok(out)
}

fn matches(view: &View, row: &Row, fs: &[Filter]) -> bool {
    fs.iter().all(|f| match f {
        Filter::Cmp(i, typ, op, v) => match (row.get(*i).and_then(Option::as_ref), v.bytes()) {
            (Some(cell), Some(v)) => op_holds(*op, compare(typ, cell, v)),
            _ => false,
        },
        Filter::In(i, vs) => match row.get(*i).and_then(Option::as_ref) {
            Some(cell) => vs.iter().any(|v| v.bytes() == Some(cell)),
            None => false,
        },
        Filter::Token(op, t) => row_token(view, row).is_some_and(|rt| op_holds(*op, rt.0.cmp(t))),
    })
}

/// Paging and metadata options of the request.
#[derive(Debug, Clone, Default)]
pub(crate) struct PageOpts {
    pub(crate) page_size: Option<i32>,
    pub(crate) paging_state: Option<Vec<u8>>,
    pub(crate) skip_metadata: bool,
    /// The result metadata id an EXECUTE sent (protocol v5 or
    /// `SCYLLA_USE_METADATA_ID`): when it is not the id of the result's
    /// columns, the rows carry them with their new id (`Metadata_changed`).
    pub(crate) metadata_id: Option<Vec<u8>>,
    /// The request's consistency, for the live-replica check
    /// ([`super::availability`]); `None` skips it.
    pub(crate) consistency: Option<scylla_cql::Consistency>,
}

/// The id of result metadata: a hash of its columns as encoded (what the
/// columns are, not which page).
pub(crate) fn metadata_id(meta: &ResultMetadata) -> Bytes {
    let columns = ResultMetadata {
        paging_state: None,
        new_metadata_id: None,
        ..meta.clone()
    };
    let mut buf = bytes::BytesMut::new();
    // Metadata built by this crate encodes (the columns match their count);
    // were it not to, every result would share the id of no columns.
    let _ = columns.encode(&mut buf);
    let (a, b) = scylla_cql::token::murmur3::hash3_x64_128(&buf);
    let mut id = a.to_be_bytes().to_vec();
    id.extend_from_slice(&b.to_be_bytes());
    Bytes::from(id)
}

/// Runs `sel` over `view`; `vals` are the resolved slot values (relations
/// in order, then the limit).
pub(crate) fn run(
    view: &View,
    sel: &Select,
    vals: &[Value],
    opts: &PageOpts,
) -> Result<Rows, CqlError> {
    let fs = filters(view, &sel.relations, vals)?;
    let limit = match sel.limit.as_ref().map(|_| vals.last()) {
        None => None,
        Some(Some(Value::Set(b))) if b.len() == 4 => {
            let n = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            if n <= 0 {
                return invalid("LIMIT must be strictly positive");
            }
            Some(n as usize)
        }
        Some(_) => return invalid("Invalid LIMIT value"),
    };
    let specs = selected_specs(&sel.selection, &view.keyspace, &view.name, &view.columns)?;
    if let Some((col, _)) = &sel.ann {
        // The ANN term's slot follows the relations' slots.
        let at = relation_slot_count(&sel.relations);
        let query = vals.get(at).cloned().unwrap_or(Value::Unset);
        return run_ann(view, sel, col, &query, &fs, limit, specs, opts);
    }
    let matching = view
        .rows
        .iter()
        .filter(|(_, r)| matches(view, r, &fs))
        .take(limit.unwrap_or(usize::MAX));
    let mut meta = ResultMetadata::with_columns(specs);
    if let Selection::Count = sel.selection {
        let n = matching.count() as i64;
        let rows = vec![vec![Some(Bytes::copy_from_slice(&n.to_be_bytes()))]];
        return build(meta, rows, opts);
    }
    let after = opts.paging_state.as_deref();
    let mut page: Vec<Vec<Option<Bytes>>> = Vec::new();
    let mut last_key = None;
    let page_size = opts.page_size.filter(|&n| n > 0).map(|n| n as usize);
    let mut rest = matching.filter(|(k, _)| after.is_none_or(|a| k.as_slice() > a));
    for (k, row) in rest.by_ref() {
        page.push(project(view, &sel.selection, row)?);
        last_key = Some(k.clone());
        if page_size.is_some_and(|n| page.len() >= n) {
            break;
        }
    }
    if page_size.is_some_and(|n| page.len() >= n) && rest.next().is_some() {
        meta.paging_state = last_key.map(|k| Box::new(Bytes::from(k)));
    }
    build(meta, page, opts)
}

/// How many value slots `rels` have (an IN list one per value).
fn relation_slot_count(rels: &[Relation]) -> usize {
    rels.iter()
        .map(|r| match r {
            Relation::In(_, ts) => ts.len(),
            _ => 1,
        })
        .sum()
}

/// The first byte of an ANN query's paging state (then the number of rows
/// already returned, big-endian u32): its rows are in similarity order, not
/// key order, so the state is a position in that order.
const ANN_PAGING: u8 = 0xA7;

/// `ORDER BY col ANN OF query LIMIT k`: the matching rows by similarity to
/// `query`, nearest first, at most `limit`.
#[allow(clippy::too_many_arguments)]
fn run_ann(
    view: &View,
    sel: &Select,
    col: &str,
    query: &Value,
    fs: &[Filter],
    limit: Option<usize>,
    specs: Vec<scylla_cql::types::ColumnSpec>,
    opts: &PageOpts,
) -> Result<Rows, CqlError> {
    let i = view.index(col)?;
    let dim = index::float_dimension(&view.columns[i].1)?;
    let Some(sim) = view
        .indexes
        .iter()
        .find(|(c, _)| c == col)
        .map(|(_, s)| s.unwrap_or(Similarity::Cosine))
    else {
        return invalid(index::ANN_REQUIRES_INDEX);
    };
    let limit = match limit {
        Some(n) if n <= index::MAX_ANN_LIMIT => n,
        other => return invalid(index::limit_error(other)),
    };
    let Some(q) = query.bytes().and_then(|b| index::floats(b, dim)) else {
        return invalid(format!(
            "Invalid null or unset value for the ANN OF vector of {col}"
        ));
    };
    index::check_query(sim, col, &q)?;
    let mut scored: Vec<(f32, &Row)> = view
        .rows
        .iter()
        .filter(|(_, r)| matches(view, r, fs))
        .filter_map(|(_, r)| {
            let v = r.get(i)?.as_ref()?;
            let s = index::score(sim, &q, &index::floats(v, dim)?)?;
            Some((s, r))
        })
        .collect();
    // Nearest first; equal scores keep key order (the sort is stable).
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.truncate(limit);
    let mut meta = ResultMetadata::with_columns(specs);
    if let Selection::Count = sel.selection {
        let n = scored.len() as i64;
        let rows = vec![vec![Some(Bytes::copy_from_slice(&n.to_be_bytes()))]];
        return build(meta, rows, opts);
    }
    let skip = match opts.paging_state.as_deref() {
        None => 0,
        Some([ANN_PAGING, a, b, c, d]) => u32::from_be_bytes([*a, *b, *c, *d]) as usize,
        Some(_) => return invalid("Invalid paging state for an ANN query"),
    };
    let page_size = opts
        .page_size
        .filter(|&n| n > 0)
        .map_or(usize::MAX, |n| n as usize);
    let mut page = Vec::new();
    for (_, row) in scored.iter().skip(skip).take(page_size) {
        page.push(project(view, &sel.selection, row)?);
    }
    let end = skip.saturating_add(page.len());
    if end < scored.len() {
        let mut state = vec![ANN_PAGING];
        state.extend_from_slice(&u32::try_from(end).unwrap_or(u32::MAX).to_be_bytes());
        meta.paging_state = Some(Box::new(Bytes::from(state)));
    }
    build(meta, page, opts)
}

fn build(
    mut meta: ResultMetadata,
    rows: Vec<Vec<Option<Bytes>>>,
    opts: &PageOpts,
) -> Result<Rows, CqlError> {
    let current = opts.metadata_id.as_ref().map(|_| metadata_id(&meta));
    if let (Some(sent), Some(current)) = (&opts.metadata_id, current) {
        if sent[..] != current[..] {
            // Stale: send the columns, whatever the client asked.
            meta.new_metadata_id = Some(Box::new(current));
            return Rows::build(meta, rows).map_err(|e| CqlError::Invalid(e.to_string()));
        }
    }
    if opts.skip_metadata {
        meta.col_specs = None;
        meta.global_table_spec = None;
    }
    Rows::build(meta, rows).map_err(|e| CqlError::Invalid(e.to_string()))
}

fn project(view: &View, sel: &Selection, row: &Row) -> Result<Vec<Option<Bytes>>, CqlError> {
    Ok(match sel {
        Selection::Star | Selection::Count => row.clone(),
        Selection::Columns(v) => {
            let mut out = Vec::with_capacity(v.len());
            for s in v {
                out.push(match &s.kind {
                    SelectorKind::Column(c) => row.get(view.index(c)?).cloned().flatten(),
                    SelectorKind::Token(_) => {
                        row_token(view, row).map(|t| Bytes::copy_from_slice(&t.0.to_be_bytes()))
                    }
                    SelectorKind::Meta(..) => None,
                });
            }
            out
        }
    })
}
