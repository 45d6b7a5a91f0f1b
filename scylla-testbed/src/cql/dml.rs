//! SELECT / INSERT / UPDATE / DELETE on the store's tables (and SELECT on
//! the built-in tables), by primary key or by scan.

use std::collections::BTreeMap;

use bytes::Bytes;
use scylla_cql::frame::response::result::{ResultMetadata, Rows};
use scylla_cql::frame::response::ResultBody;
use scylla_cql::token::{murmur3_token, Token};
use scylla_cql::types::{ColumnSpec, ColumnType, NativeType, SerializedValues};

use super::ast::{Op, QualifiedName, Relation, Select, Statement};
use super::error::{invalid, CqlError};
use super::prepared::{resolve, slots, Target};
use super::select::{self, partition_key, PageOpts, View};
use super::store::{partition_prefix, row_key, with_prefix, Row, Schema, Store, Table};
use super::system::{is_system, system_view};
use super::values::Value;
use crate::handler::ConnCtx;

/// The single partition a statement touched, for the routing counters.
#[derive(Debug, Clone)]
pub(crate) struct Routing {
    pub(crate) keyspace: String,
    pub(crate) table: String,
    pub(crate) token: Token,
}

/// A result and, when the statement touched one partition, where it lives.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) result: ResultBody,
    pub(crate) routing: Option<Routing>,
}

impl Outcome {
    pub(crate) fn plain(result: ResultBody) -> Self {
        Outcome {
            result,
            routing: None,
        }
    }
}

/// The keyspace a name refers to.
pub(crate) fn keyspace_of(name: &QualifiedName, session: Option<&str>) -> Result<String, CqlError> {
    match (&name.keyspace, session) {
        (Some(k), _) => Ok(k.clone()),
        (None, Some(k)) => Ok(k.to_owned()),
        (None, None) => invalid(
            "No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename",
        ),
    }
}

/// The error for a keyspace the schema does not have.
fn no_keyspace<T>(ks: &str) -> Result<T, CqlError> {
    if ks == "system_traces" {
        return invalid(super::TRACES_UNSUPPORTED);
    }
    invalid(format!("Keyspace {ks} does not exist"))
}

/// A user table of the schema.
pub(crate) fn table<'s>(schema: &'s Schema, ks: &str, name: &str) -> Result<&'s Table, CqlError> {
    match schema.keyspaces.get(ks) {
        None => no_keyspace(ks),
        Some(k) => match k.tables.get(name) {
            Some(t) => Ok(t),
            None => invalid(format!("unconfigured table {name}")),
        },
    }
}

fn col_type_fn(t: &Table) -> impl Fn(&str) -> Option<ColumnType> + '_ {
    move |c: &str| t.column_index(c).map(|i| t.columns[i].typ.clone())
}

/// The equality values given for each column by the statement's slots.
fn eq_values(st: &Statement, vals: &[Value]) -> BTreeMap<String, Vec<Value>> {
    let mut m: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let rels: &[Relation] = match st {
        Statement::Select(s) => &s.relations,
        Statement::Update { relations, .. } | Statement::Delete { relations, .. } => relations,
        _ => &[],
    };
    let in_cols: Vec<&str> = rels
        .iter()
        .filter_map(|r| match r {
            Relation::In(c, _) => Some(c.as_str()),
            _ => None,
        })
        .collect();
    // UPDATE's assignments come first among the slots: not relations.
    let skip = match st {
        Statement::Update { assignments, .. } => assignments.len(),
        _ => 0,
    };
    let is_insert = matches!(st, Statement::Insert { .. });
    for (s, v) in slots(st).iter().zip(vals).skip(skip) {
        let Target::Column(c) = &s.target else {
            continue;
        };
        if is_insert || s.is_eq || in_cols.contains(&c.as_str()) {
            m.entry(c.clone()).or_default().push(v.clone());
        }
    }
    m
}

/// The key bytes of the given key columns, each with exactly one value.
fn key_parts<'v>(
    t: &Table,
    range: std::ops::Range<usize>,
    eq: &'v BTreeMap<String, Vec<Value>>,
) -> Result<Vec<&'v [u8]>, CqlError> {
    let mut out = Vec::new();
    for c in &t.columns[range] {
        match eq.get(&c.name).map(Vec::as_slice) {
            Some([Value::Set(b)]) => out.push(&b[..]),
            Some([_]) => return invalid(format!("Invalid null value for column {}", c.name)),
            Some(_) => return invalid(format!("Only one value allowed for column {}", c.name)),
            None => return invalid(format!("Some primary key parts are missing: {}", c.name)),
        }
    }
    Ok(out)
}

fn token_of(parts: &[&[u8]]) -> Result<(Token, Vec<u8>), CqlError> {
    let pk = partition_key(parts)?;
    Ok((murmur3_token(&pk), pk))
}

fn view_of(t: &Table, rows: Vec<(Vec<u8>, Row)>) -> View {
    View {
        keyspace: t.keyspace.clone(),
        name: t.name.clone(),
        columns: t
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.typ.clone()))
            .collect(),
        pk: (0..t.pk_len).collect(),
        rows,
        indexes: t
            .indexes
            .iter()
            .map(|i| (i.column.clone(), i.similarity))
            .collect(),
    }
}

fn run_select(
    ctx: &ConnCtx,
    store: &Store,
    st: &Statement,
    sel: &Select,
    ks: &str,
    values: &SerializedValues,
    opts: &PageOpts,
) -> Result<Outcome, CqlError> {
    let schema = store.read();
    let sl = slots(st);
    if is_system(ks) {
        let v = system_view(ctx, store, &schema, ks, &sel.table.name)?;
        let vals = resolve(&sl, values, &|c| v.col_type(c))?;
        let rows = select::run(&v, sel, &vals, opts)?;
        return Ok(Outcome::plain(ResultBody::Rows(rows)));
    }
    let t = table(&schema, ks, &sel.table.name)?;
    if let Some((c, _)) = &sel.ann {
        // Before the ANN term is read as a value of the column's type.
        if let Some(i) = t.column_index(c) {
            super::index::float_dimension(&t.columns[i].typ)?;
        }
    }
    let vals = resolve(&sl, values, &col_type_fn(t))?;
    let eq = eq_values(st, &vals);
    // Narrow to the named partitions when every partition key column has
    // `=` or `IN` values; otherwise scan (fine for test-sized tables).
    let pk_cols = &t.columns[..t.pk_len];
    let mut partitions: Vec<Vec<&[u8]>> = vec![Vec::new()];
    let mut restricted = true;
    for c in pk_cols {
        let Some(vs) = eq.get(&c.name) else {
            restricted = false;
            break;
        };
        let mut next = Vec::new();
        for p in &partitions {
            for v in vs.iter().filter_map(Value::bytes) {
                let mut q = p.clone();
                q.push(&v[..]);
                next.push(q);
            }
        }
        partitions = next;
    }
    let mut routing = None;
    let rows: Vec<(Vec<u8>, Row)> = if restricted {
        let mut keyed = Vec::new();
        for p in &partitions {
            let (token, pk) = token_of(p)?;
            if partitions.len() == 1 {
                let strategy = super::availability::strategy_if_checked(ctx, &schema, ks);
                super::availability::check(ctx, strategy.as_ref(), token, opts.consistency)?;
                routing = Some(Routing {
                    keyspace: ks.to_owned(),
                    table: sel.table.name.clone(),
                    token,
                });
            }
            keyed.push(partition_prefix(token, &pk));
        }
        keyed.sort();
        keyed.dedup();
        let mut rows = Vec::new();
        for prefix in &keyed {
            let stripe = t.rows.read_at(prefix);
            rows.extend(with_prefix(&stripe, prefix).map(|(k, r)| (k.clone(), r.clone())));
        }
        rows
    } else {
        t.rows.snapshot()
    };
    let rows = select::run(&view_of(t, rows), sel, &vals, opts)?;
    Ok(Outcome {
        result: ResultBody::Rows(rows),
        routing,
    })
}

fn applied(ok: bool, ks: &str, table: &str) -> Result<ResultBody, CqlError> {
    let spec = ColumnSpec {
        keyspace: ks.to_owned(),
        table: table.to_owned(),
        name: "[applied]".to_owned(),
        typ: ColumnType::Native(NativeType::Boolean),
    };
    let rows = Rows::build(
        ResultMetadata::with_columns(vec![spec]),
        [[Some([u8::from(ok)])]],
    )
    .map_err(|e| CqlError::Invalid(e.to_string()))?;
    Ok(ResultBody::Rows(rows))
}

/// Runs a DML statement (`st` is SELECT, INSERT, UPDATE or DELETE).
pub(crate) fn execute(
    ctx: &ConnCtx,
    store: &Store,
    session_ks: Option<&str>,
    st: &Statement,
    values: &SerializedValues,
    opts: &PageOpts,
) -> Result<Outcome, CqlError> {
    let name = match st {
        Statement::Select(s) => &s.table,
        Statement::Insert { table, .. }
        | Statement::Update { table, .. }
        | Statement::Delete { table, .. } => table,
        _ => return invalid("not a DML statement"),
    };
    let ks = keyspace_of(name, session_ks)?;
    if let Statement::Select(sel) = st {
        return run_select(ctx, store, st, sel, &ks, values, opts);
    }
    if is_system(&ks) {
        return invalid(format!("{ks} keyspace is not user-modifiable."));
    }
    // The schema's read lock: rows have locks of their own (see `RowMap`),
    // taken below for the map operation only.
    let schema = store.read();
    let strategy = super::availability::strategy_if_checked(ctx, &schema, &ks);
    let t = table(&schema, &ks, &name.name)?;
    let vals = resolve(&slots(st), values, &col_type_fn(t))?;
    let eq = eq_values(st, &vals);
    let pk = key_parts(t, 0..t.pk_len, &eq)?;
    let (token, pk_bytes) = token_of(&pk)?;
    super::availability::check(ctx, strategy.as_ref(), token, opts.consistency)?;
    let routing = Some(Routing {
        keyspace: ks.clone(),
        table: name.name.clone(),
        token,
    });
    let ck_end = t.pk_len + t.ck_len;
    let result = match st {
        Statement::Insert {
            columns,
            if_not_exists,
            ..
        } => {
            let ck = key_parts(t, t.pk_len..ck_end, &eq)?;
            let ck_typed: Vec<(&ColumnType, &[u8])> = t.columns[t.pk_len..ck_end]
                .iter()
                .map(|c| &c.typ)
                .zip(ck)
                .collect();
            let key = row_key(token, &pk_bytes, &ck_typed);
            let n = t.columns.len();
            let idx: Vec<Option<usize>> = columns.iter().map(|c| t.column_index(c)).collect();
            // Checked and written under one lock: IF NOT EXISTS stays atomic.
            let mut rows = t.rows.write_at(&key);
            if *if_not_exists && rows.contains_key(&key) {
                return Ok(Outcome {
                    result: applied(false, &ks, &name.name)?,
                    routing,
                });
            }
            let row = rows.entry(key).or_insert_with(|| vec![None; n]);
            for (i, v) in idx.into_iter().zip(&vals) {
                let Some(i) = i else { continue };
                match v {
                    Value::Set(b) => row[i] = Some(b.clone()),
                    Value::Null => row[i] = None,
                    Value::Unset => {}
                }
            }
            if *if_not_exists {
                applied(true, &ks, &name.name)?
            } else {
                ResultBody::Void
            }
        }
        Statement::Update { assignments, .. } => {
            let ck = key_parts(t, t.pk_len..ck_end, &eq)?;
            let ck_typed: Vec<(&ColumnType, &[u8])> = t.columns[t.pk_len..ck_end]
                .iter()
                .map(|c| &c.typ)
                .zip(ck)
                .collect();
            let key = row_key(token, &pk_bytes, &ck_typed);
            let mut sets = Vec::new();
            for ((c, _), v) in assignments.iter().zip(&vals) {
                match t.column_index(c) {
                    Some(i) if i < ck_end => {
                        return invalid(format!("PRIMARY KEY part {c} found in SET part"))
                    }
                    Some(i) => sets.push((i, v.clone())),
                    None => return invalid(format!("Undefined column name {c}")),
                }
            }
            let n = t.columns.len();
            let mut rows = t.rows.write_at(&key);
            let row = rows.entry(key).or_insert_with(|| vec![None; n]);
            for (k, c) in row.iter_mut().enumerate().take(ck_end) {
                // Key cells are part of the row (SELECT returns them).
                let part = if k < t.pk_len {
                    pk.get(k).copied()
                } else {
                    ck_typed.get(k - t.pk_len).map(|(_, b)| *b)
                };
                *c = part.map(Bytes::copy_from_slice);
            }
            for (i, v) in sets {
                match v {
                    Value::Set(b) => row[i] = Some(b),
                    Value::Null => row[i] = None,
                    Value::Unset => {}
                }
            }
            ResultBody::Void
        }
        Statement::Delete {
            columns, relations, ..
        } => {
            if relations
                .iter()
                .any(|r| matches!(r, Relation::Cmp(_, op, _) if *op != Op::Eq))
            {
                return invalid("DELETE supports only = relations here");
            }
            // A clustering prefix (maybe empty) selects the rows.
            let mut prefix_ck = Vec::new();
            for c in &t.columns[t.pk_len..ck_end] {
                match eq.get(&c.name).map(Vec::as_slice) {
                    Some([Value::Set(b)]) => prefix_ck.push((&c.typ, &b[..])),
                    _ => break,
                }
            }
            let prefix = row_key(token, &pk_bytes, &prefix_ck);
            let idx: Vec<usize> = columns.iter().filter_map(|c| t.column_index(c)).collect();
            let mut rows = t.rows.write_at(&prefix);
            let keys: Vec<Vec<u8>> = with_prefix(&rows, &prefix)
                .map(|(k, _)| k.clone())
                .collect();
            for k in keys {
                if columns.is_empty() {
                    rows.remove(&k);
                } else if let Some(row) = rows.get_mut(&k) {
                    for &i in &idx {
                        if i >= ck_end {
                            row[i] = None;
                        }
                    }
                }
            }
            ResultBody::Void
        }
        _ => return invalid("not a DML statement"),
    };
    Ok(Outcome { result, routing })
}
