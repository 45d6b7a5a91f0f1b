//! Bind markers: where values go in a statement, the metadata PREPARE
//! returns for them, and binding the values of QUERY/EXECUTE/BATCH.
//!
//! Every executor walks a statement's value positions ("slots") in the
//! order of [`slots`], which is the order they appear in the text, so bind
//! marker `i` of the prepared metadata is the `i`-th bind slot.

use bytes::Bytes;
use scylla_cql::frame::wire::RawValue;
use scylla_cql::types::{ColumnSpec, ColumnType, NativeType, SerializedValues};

use super::ast::{Relation, Selection, SelectorKind, Statement, Term};
use super::error::{invalid, CqlError};
use super::values::{check_bound, literal_value, Value};

/// A prepared statement as the registry keeps it.
#[derive(Debug)]
pub(crate) struct PreparedStatement {
    /// Its id (a hash of the keyspace and the text).
    pub(crate) id: Bytes,
    /// The session keyspace when it was prepared (resolves unqualified names).
    pub(crate) keyspace: Option<String>,
    /// The parsed statement.
    pub(crate) statement: Statement,
    /// Its text (for traces).
    pub(crate) text: String,
}

/// What a value position sets or restricts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// A column (assignment, INSERT value or WHERE relation).
    Column(String),
    /// `LIMIT`.
    Limit,
    /// The right side of a `token(...)` relation.
    Token,
}

/// One value position.
#[derive(Debug, Clone)]
pub(crate) struct Slot<'a> {
    pub(crate) term: &'a Term,
    pub(crate) target: Target,
    /// Whether this is an `=` on the column (or an INSERT value).
    pub(crate) is_eq: bool,
}

fn relation_slots<'a>(rels: &'a [Relation], out: &mut Vec<Slot<'a>>) {
    for r in rels {
        match r {
            Relation::Cmp(c, op, t) => out.push(Slot {
                term: t,
                target: Target::Column(c.clone()),
                is_eq: *op == super::ast::Op::Eq,
            }),
            Relation::In(c, ts) => out.extend(ts.iter().map(|t| Slot {
                term: t,
                target: Target::Column(c.clone()),
                is_eq: false,
            })),
            Relation::Token(_, _, t) => out.push(Slot {
                term: t,
                target: Target::Token,
                is_eq: false,
            }),
        }
    }
}

/// The value positions of `st`, in text order.
pub(crate) fn slots(st: &Statement) -> Vec<Slot<'_>> {
    let mut out = Vec::new();
    match st {
        Statement::Select(s) => {
            relation_slots(&s.relations, &mut out);
            if let Some((c, t)) = &s.ann {
                out.push(Slot {
                    term: t,
                    target: Target::Column(c.clone()),
                    is_eq: false,
                });
            }
            if let Some(l) = &s.limit {
                out.push(Slot {
                    term: l,
                    target: Target::Limit,
                    is_eq: false,
                });
            }
        }
        Statement::Insert {
            columns, values, ..
        } => out.extend(columns.iter().zip(values).map(|(c, t)| Slot {
            term: t,
            target: Target::Column(c.clone()),
            is_eq: true,
        })),
        Statement::Update {
            assignments,
            relations,
            ..
        } => {
            out.extend(assignments.iter().map(|(c, t)| Slot {
                term: t,
                target: Target::Column(c.clone()),
                is_eq: false,
            }));
            relation_slots(relations, &mut out);
        }
        Statement::Delete { relations, .. } => relation_slots(relations, &mut out),
        _ => {}
    }
    out
}

/// The type of a slot's value, given the types of the table's columns.
pub(crate) fn slot_type(
    slot: &Slot<'_>,
    col_type: &dyn Fn(&str) -> Option<ColumnType>,
) -> Result<ColumnType, CqlError> {
    match &slot.target {
        Target::Column(c) => match col_type(c) {
            Some(t) => Ok(t),
            None => invalid(format!("Undefined column name {c}")),
        },
        Target::Limit => Ok(ColumnType::Native(NativeType::Int)),
        Target::Token => Ok(ColumnType::Native(NativeType::BigInt)),
    }
}

/// The bind-marker specs (PREPARE metadata) and pk indexes of a statement
/// on a table with `pk` as partition key columns.
pub(crate) fn bind_specs(
    st: &Statement,
    keyspace: &str,
    table: &str,
    pk: &[String],
    col_type: &dyn Fn(&str) -> Option<ColumnType>,
) -> Result<(Vec<ColumnSpec>, Vec<u16>), CqlError> {
    let mut specs = Vec::new();
    let mut pk_binds: Vec<Option<u16>> = vec![None; pk.len()];
    for s in slots(st) {
        let Term::Bind(name) = s.term else { continue };
        let typ = slot_type(&s, col_type)?;
        let col_name = match &s.target {
            Target::Column(c) => c.clone(),
            Target::Limit => "[limit]".to_owned(),
            Target::Token => "partition key token".to_owned(),
        };
        if let (Target::Column(c), true) = (&s.target, s.is_eq) {
            if let Some(i) = pk.iter().position(|p| p == c) {
                if let (Some(slot), Ok(idx)) = (pk_binds.get_mut(i), u16::try_from(specs.len())) {
                    slot.get_or_insert(idx);
                }
            }
        }
        specs.push(ColumnSpec {
            keyspace: keyspace.to_owned(),
            table: table.to_owned(),
            name: name.clone().unwrap_or(col_name),
            typ,
        });
    }
    let pk_indexes = pk_binds
        .into_iter()
        .collect::<Option<Vec<u16>>>()
        .unwrap_or_default();
    Ok((specs, pk_indexes))
}

/// Resolves every slot to a value: literals converted to the slot's type,
/// bind markers taken from `values` (by position, or by name when the
/// values are named).
pub(crate) fn resolve(
    slots: &[Slot<'_>],
    values: &SerializedValues,
    col_type: &dyn Fn(&str) -> Option<ColumnType>,
) -> Result<Vec<Value>, CqlError> {
    let bound: Vec<(Option<&str>, RawValue<'_>)> = values.iter().collect();
    let markers = slots
        .iter()
        .filter(|s| matches!(s.term, Term::Bind(_)))
        .count();
    if bound.len() != markers {
        return invalid(format!(
            "There were {markers} markers(?) in CQL but {} bound variables",
            bound.len()
        ));
    }
    let mut next = 0usize;
    let mut out = Vec::with_capacity(slots.len());
    for s in slots {
        let typ = slot_type(s, col_type)?;
        let v = match s.term {
            Term::Lit(l) => literal_value(l, &typ).map_err(CqlError::Invalid)?,
            Term::Bind(name) => {
                let raw = if values.is_named() {
                    let n = name.as_deref().or(match &s.target {
                        Target::Column(c) => Some(c.as_str()),
                        _ => None,
                    });
                    bound
                        .iter()
                        .find(|(bn, _)| bn.map(str::to_ascii_lowercase).as_deref() == n)
                        .map(|(_, v)| *v)
                } else {
                    bound.get(next).map(|(_, v)| *v)
                };
                next += 1;
                match raw {
                    Some(RawValue::Value(b)) => {
                        let label = match &s.target {
                            Target::Column(c) => c.as_str(),
                            _ => "value",
                        };
                        check_bound(&typ, b, label).map_err(CqlError::Invalid)?;
                        Value::Set(Bytes::copy_from_slice(b))
                    }
                    Some(RawValue::Null) => Value::Null,
                    Some(RawValue::Unset) => Value::Unset,
                    None => return invalid("Missing bound value"),
                }
            }
        };
        out.push(v);
    }
    Ok(out)
}

/// The columns a SELECT returns, for its result metadata, given the
/// table's columns.
pub(crate) fn selected_specs(
    sel: &Selection,
    keyspace: &str,
    table: &str,
    columns: &[(String, ColumnType)],
) -> Result<Vec<ColumnSpec>, CqlError> {
    let spec = |name: String, typ: ColumnType| ColumnSpec {
        keyspace: keyspace.to_owned(),
        table: table.to_owned(),
        name,
        typ,
    };
    Ok(match sel {
        Selection::Star => columns
            .iter()
            .map(|(n, t)| spec(n.clone(), t.clone()))
            .collect(),
        Selection::Count => vec![spec("count".into(), ColumnType::Native(NativeType::BigInt))],
        Selection::Columns(v) => {
            let mut out = Vec::with_capacity(v.len());
            for s in v {
                let (name, typ) = match &s.kind {
                    SelectorKind::Column(c) => match columns.iter().find(|(n, _)| n == c) {
                        Some((n, t)) => (n.clone(), t.clone()),
                        None => return invalid(format!("Undefined column name {c}")),
                    },
                    SelectorKind::Token(cols) => (
                        format!("system.token({})", cols.join(", ")),
                        ColumnType::Native(NativeType::BigInt),
                    ),
                    SelectorKind::Meta(f, c) => {
                        let t = if *f == "ttl" {
                            ColumnType::Native(NativeType::Int)
                        } else {
                            ColumnType::Native(NativeType::BigInt)
                        };
                        (format!("{f}({c})"), t)
                    }
                };
                out.push(spec(s.alias.clone().unwrap_or(name), typ));
            }
            out
        }
    })
}
