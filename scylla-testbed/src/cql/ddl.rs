//! Schema statements: USE, CREATE/DROP KEYSPACE, TABLE, TYPE and (SAI)
//! INDEX, TRUNCATE.
//! Every change bumps the schema version and answers SCHEMA_CHANGE.

use std::collections::BTreeMap;

use scylla_cql::frame::response::result::{SchemaChange, SchemaChangeTarget, SchemaChangeType};
use scylla_cql::frame::response::ResultBody;
use scylla_cql::types::{ColumnType, NativeType};

use super::ast::{ColumnDef, QualifiedName, Statement, TabletsOption};
use super::dml::keyspace_of;
use super::error::{invalid, CqlError};
use super::ids::random_uuid;
use super::store::{Column, ColumnKind, Keyspace, RowMap, Store, Table, UserType};
use super::system::is_system;
use super::{index, types};
use crate::handler::ConnCtx;
use crate::tablets::auto_tablets;

fn change(change: SchemaChangeType, target: SchemaChangeTarget) -> ResultBody {
    ResultBody::SchemaChange(SchemaChange { change, target })
}

/// The fully qualified strategy class, as `system_schema.keyspaces` shows it.
fn expand_class(class: &str) -> String {
    if class.contains('.') {
        class.to_owned()
    } else {
        format!("org.apache.cassandra.locator.{class}")
    }
}

/// NetworkTopologyStrategy's `replication_factor` shorthand expanded to every
/// datacenter of the cluster (as Cassandra 4+ and ScyllaDB store it); an
/// explicit datacenter factor wins.
fn expand_replication_factor(repl: &mut BTreeMap<String, String>, ctx: &ConnCtx) {
    let nts = repl
        .get("class")
        .is_some_and(|c| c.ends_with("NetworkTopologyStrategy"));
    if !nts {
        return;
    }
    if let Some(rf) = repl.remove("replication_factor") {
        for n in ctx.topology().nodes() {
            repl.entry(n.datacenter.clone())
                .or_insert_with(|| rf.clone());
        }
    }
}

/// Whether a new keyspace uses tablets, and its initial count (0 = the
/// cluster's default). As on ScyllaDB, the cluster default applies to
/// NetworkTopologyStrategy keyspaces only, and asking for tablets with
/// another strategy is refused (ScyllaDB 2025.x: tablets need
/// NetworkTopologyStrategy).
fn keyspace_tablets(
    repl: &BTreeMap<String, String>,
    option: Option<TabletsOption>,
    ctx: &ConnCtx,
) -> Result<Option<usize>, CqlError> {
    let nts = repl
        .get("class")
        .is_some_and(|c| c.ends_with("NetworkTopologyStrategy"));
    match option {
        Some(TabletsOption { enabled: false, .. }) => Ok(None),
        Some(TabletsOption { initial, .. }) => {
            if !nts {
                return invalid("Tablets are only supported with NetworkTopologyStrategy");
            }
            Ok(Some(initial.unwrap_or(0)))
        }
        None if nts => Ok(ctx.topology().tablets().default_initial().map(|_| 0)),
        None => Ok(None),
    }
}

/// Places the tablets of a new table of a tablets keyspace.
fn place_tablets(ctx: &ConnCtx, k: &Keyspace, table: &str) {
    let Some(initial) = k.tablets else { return };
    let topo = ctx.topology();
    let nodes = topo.placement_nodes();
    let count = match initial {
        0 => topo
            .tablets()
            .default_initial()
            .filter(|&n| n > 0)
            .unwrap_or_else(|| auto_tablets(&nodes)),
        n => n,
    };
    let rf: Vec<(String, usize)> = k
        .replication
        .iter()
        .filter(|(key, _)| key.as_str() != "class")
        .map(|(dc, f)| (dc.clone(), f.parse().unwrap_or(0)))
        .collect();
    topo.tablets().create(&k.name, table, count, &nodes, &rf);
    if k.strongly_consistent {
        // Cannot fail: the map was just created.
        let _ = topo.tablets().update(&k.name, table, |m| {
            m.set_strongly_consistent(true);
            Ok(())
        });
    }
}

/// One column definition with its type resolved.
struct Typed {
    name: String,
    typ: ColumnType,
    frozen: bool,
    is_static: bool,
}

fn build_table(
    keyspace: &Keyspace,
    name: &str,
    defs: &[ColumnDef],
    pk: &[String],
    ck: &[String],
) -> Result<Table, CqlError> {
    let ks = keyspace.name.as_str();
    let mut typed: Vec<Typed> = Vec::new();
    for d in defs {
        let (typ, frozen) = types::resolve(&d.typ, ks, Some(keyspace))?;
        if typed.iter().any(|t| t.name == d.name) {
            return invalid(format!("Multiple definition of identifier {}", d.name));
        }
        typed.push(Typed {
            name: d.name.clone(),
            typ,
            frozen,
            is_static: d.is_static,
        });
    }
    let find = |n: &String| typed.iter().find(|t| &t.name == n);
    let mut columns = Vec::new();
    for (kind, names) in [(ColumnKind::PartitionKey, pk), (ColumnKind::Clustering, ck)] {
        for (pos, n) in names.iter().enumerate() {
            let Some(t) = find(n) else {
                return invalid(format!("Unknown definition {n} referenced in PRIMARY KEY"));
            };
            if columns.iter().any(|c: &Column| &c.name == n) {
                return invalid(format!("{n} is referenced twice in PRIMARY KEY"));
            }
            if matches!(t.typ, ColumnType::UserDefinedType { .. }) && !t.frozen {
                return invalid(format!(
                    "Invalid non-frozen user-defined type \"{}\" for PRIMARY KEY column '{n}'",
                    types::schema_text(&t.typ, false)
                ));
            }
            columns.push(Column {
                name: n.clone(),
                typ: t.typ.clone(),
                kind,
                position: pos as i32,
                frozen: t.frozen,
            });
        }
    }
    let mut rest: Vec<&Typed> = typed
        .iter()
        .filter(|t| !pk.contains(&t.name) && !ck.contains(&t.name))
        .collect();
    rest.sort_by(|a, b| a.name.cmp(&b.name));
    for t in rest {
        columns.push(Column {
            name: t.name.clone(),
            typ: t.typ.clone(),
            kind: if t.is_static {
                ColumnKind::Static
            } else {
                ColumnKind::Regular
            },
            position: -1,
            frozen: t.frozen,
        });
    }
    Ok(Table {
        keyspace: ks.to_owned(),
        name: name.to_owned(),
        id: random_uuid(),
        columns,
        pk_len: pk.len(),
        ck_len: ck.len(),
        rows: RowMap::default(),
        indexes: Vec::new(),
    })
}

/// Runs a schema statement.
pub(crate) fn execute(
    ctx: &ConnCtx,
    store: &Store,
    session_ks: Option<&str>,
    st: &Statement,
) -> Result<ResultBody, CqlError> {
    match st {
        Statement::Use(ks) => {
            if !is_system(ks) && !store.read().keyspaces.contains_key(ks) {
                return invalid(format!("Keyspace '{ks}' does not exist"));
            }
            ctx.set_keyspace(Some(ks.clone()));
            Ok(ResultBody::SetKeyspace(ks.clone()))
        }
        Statement::CreateKeyspace {
            name,
            if_not_exists,
            replication,
            durable_writes,
            tablets,
            consistency,
        } => {
            let mut s = store.write();
            if is_system(name) || s.keyspaces.contains_key(name) {
                if *if_not_exists {
                    return Ok(ResultBody::Void);
                }
                return Err(CqlError::AlreadyExists {
                    keyspace: name.clone(),
                    table: String::new(),
                    message: format!("Keyspace {name} already exists"),
                });
            }
            let mut repl: BTreeMap<String, String> = replication.iter().cloned().collect();
            match repl.get("class").cloned() {
                Some(c) => repl.insert("class".into(), expand_class(&c)),
                None => return invalid("Missing mandatory replication strategy class"),
            };
            expand_replication_factor(&mut repl, ctx);
            let tablets = keyspace_tablets(&repl, *tablets, ctx)?;
            // ScyllaDB's strongly consistent tables (experimental): `global`
            // only (`local` is not supported yet, as on ScyllaDB), and on
            // tablets only.
            let strongly_consistent = match consistency.as_deref() {
                None | Some("eventual") => false,
                Some("global") if tablets.is_some() => true,
                Some("global") => return invalid("Strongly consistent keyspaces require tablets"),
                Some(other) => return invalid(format!("Unsupported consistency '{other}'")),
            };
            s.keyspaces.insert(
                name.clone(),
                Keyspace {
                    name: name.clone(),
                    replication: repl,
                    durable_writes: *durable_writes,
                    tablets,
                    strongly_consistent,
                    tables: BTreeMap::new(),
                    types: BTreeMap::new(),
                },
            );
            s.bump_version();
            Ok(change(
                SchemaChangeType::Created,
                SchemaChangeTarget::Keyspace {
                    keyspace: name.clone(),
                },
            ))
        }
        Statement::CreateTable {
            table,
            if_not_exists,
            columns,
            partition_key,
            clustering_key,
        } => {
            let ks = keyspace_of(table, session_ks)?;
            let mut s = store.write();
            let Some(k) = s.keyspaces.get_mut(&ks) else {
                return invalid(format!("Keyspace {ks} does not exist"));
            };
            let t = build_table(k, &table.name, columns, partition_key, clustering_key)?;
            if k.tables.contains_key(&table.name) {
                if *if_not_exists {
                    return Ok(ResultBody::Void);
                }
                return Err(CqlError::AlreadyExists {
                    keyspace: ks.clone(),
                    table: table.name.clone(),
                    message: format!("Table {ks}.{} already exists", table.name),
                });
            }
            place_tablets(ctx, k, &table.name);
            k.tables.insert(table.name.clone(), t);
            s.bump_version();
            Ok(change(
                SchemaChangeType::Created,
                SchemaChangeTarget::Table {
                    keyspace: ks,
                    name: table.name.clone(),
                },
            ))
        }
        Statement::DropKeyspace { name, if_exists } => {
            let mut s = store.write();
            if s.keyspaces.remove(name).is_none() {
                if *if_exists {
                    return Ok(ResultBody::Void);
                }
                return invalid(format!("Keyspace {name} does not exist"));
            }
            ctx.topology().tablets().drop_keyspace(name);
            s.bump_version();
            Ok(change(
                SchemaChangeType::Dropped,
                SchemaChangeTarget::Keyspace {
                    keyspace: name.clone(),
                },
            ))
        }
        Statement::DropTable { table, if_exists } => {
            let ks = keyspace_of(table, session_ks)?;
            let mut s = store.write();
            let removed = s
                .keyspaces
                .get_mut(&ks)
                .and_then(|k| k.tables.remove(&table.name));
            if removed.is_none() {
                if *if_exists {
                    return Ok(ResultBody::Void);
                }
                return invalid(format!("unconfigured table {}", table.name));
            }
            ctx.topology().tablets().drop_table(&ks, &table.name);
            s.bump_version();
            Ok(change(
                SchemaChangeType::Dropped,
                SchemaChangeTarget::Table {
                    keyspace: ks,
                    name: table.name.clone(),
                },
            ))
        }
        Statement::Truncate(table) => {
            let ks = keyspace_of(table, session_ks)?;
            let s = store.read();
            match s.keyspaces.get(&ks).and_then(|k| k.tables.get(&table.name)) {
                Some(t) => t.rows.clear(),
                None => return invalid(format!("unconfigured table {}", table.name)),
            }
            Ok(ResultBody::Void)
        }
        Statement::CreateType {
            name,
            if_not_exists,
            fields,
        } => create_type(store, session_ks, name, *if_not_exists, fields),
        Statement::DropType { name, if_exists } => drop_type(store, session_ks, name, *if_exists),
        Statement::CreateIndex {
            name,
            if_not_exists,
            table,
            column,
            class,
            options,
        } => {
            let ks = keyspace_of(table, session_ks)?;
            let mut s = store.write();
            let Some(k) = s.keyspaces.get_mut(&ks) else {
                return invalid(format!("Keyspace {ks} does not exist"));
            };
            let name = name
                .clone()
                .unwrap_or_else(|| format!("{}_{column}_idx", table.name));
            if k.tables
                .values()
                .any(|t| t.indexes.iter().any(|i| i.name == name))
            {
                if *if_not_exists {
                    return Ok(ResultBody::Void);
                }
                return invalid(format!("Index '{name}' already exists"));
            }
            let Some(t) = k.tables.get_mut(&table.name) else {
                return invalid(format!("unconfigured table {}", table.name));
            };
            let index = index::build(t, name, column, class, options)?;
            t.indexes.push(index);
            s.bump_version();
            // As Cassandra: an index is a change of its table.
            Ok(change(
                SchemaChangeType::Updated,
                SchemaChangeTarget::Table {
                    keyspace: ks,
                    name: table.name.clone(),
                },
            ))
        }
        Statement::DropIndex { name, if_exists } => {
            let ks = keyspace_of(name, session_ks)?;
            let mut s = store.write();
            let owner = s.keyspaces.get_mut(&ks).and_then(|k| {
                k.tables
                    .values_mut()
                    .find(|t| t.indexes.iter().any(|i| i.name == name.name))
            });
            let Some(t) = owner else {
                if *if_exists {
                    return Ok(ResultBody::Void);
                }
                return invalid(format!(
                    "Index '{}' could not be found in any of the tables of keyspace '{ks}'",
                    name.name
                ));
            };
            t.indexes.retain(|i| i.name != name.name);
            let table = t.name.clone();
            s.bump_version();
            Ok(change(
                SchemaChangeType::Updated,
                SchemaChangeTarget::Table {
                    keyspace: ks,
                    name: table,
                },
            ))
        }
        _ => invalid("not a schema statement"),
    }
}

fn create_type(
    store: &Store,
    session_ks: Option<&str>,
    name: &QualifiedName,
    if_not_exists: bool,
    fields: &[(String, String)],
) -> Result<ResultBody, CqlError> {
    let ks = keyspace_of(name, session_ks)?;
    let mut s = store.write();
    let Some(k) = s.keyspaces.get_mut(&ks) else {
        return invalid(format!("Keyspace {ks} does not exist"));
    };
    if k.types.contains_key(&name.name) {
        if if_not_exists {
            return Ok(ResultBody::Void);
        }
        return Err(CqlError::AlreadyExists {
            keyspace: ks.clone(),
            table: name.name.clone(),
            message: format!("A user type with name '{}' already exists", name.name),
        });
    }
    let mut typed = Vec::with_capacity(fields.len());
    for (f, text) in fields {
        if typed.iter().any(|(n, _)| n == f) {
            return invalid(format!("Duplicate field name {f} in type {}", name.name));
        }
        let (t, _) = types::resolve(text, &ks, Some(k))?;
        if matches!(t, ColumnType::Native(NativeType::Counter)) {
            return invalid("A user type cannot contain counters");
        }
        typed.push((f.clone(), t));
    }
    k.types.insert(
        name.name.clone(),
        UserType {
            name: name.name.clone(),
            fields: typed,
        },
    );
    s.bump_version();
    Ok(change(
        SchemaChangeType::Created,
        SchemaChangeTarget::Type {
            keyspace: ks,
            name: name.name.clone(),
        },
    ))
}

fn drop_type(
    store: &Store,
    session_ks: Option<&str>,
    name: &QualifiedName,
    if_exists: bool,
) -> Result<ResultBody, CqlError> {
    let ks = keyspace_of(name, session_ks)?;
    let mut s = store.write();
    let Some(k) = s.keyspaces.get_mut(&ks) else {
        if if_exists {
            return Ok(ResultBody::Void);
        }
        return invalid(format!("Keyspace {ks} does not exist"));
    };
    if !k.types.contains_key(&name.name) {
        if if_exists {
            return Ok(ResultBody::Void);
        }
        return invalid(format!("No user type named {} exists.", name.name));
    }
    // Cassandra refuses to drop a type a table or another type still uses.
    for t in k.tables.values() {
        if t.columns
            .iter()
            .any(|c| types::uses_udt(&c.typ, &ks, &name.name))
        {
            return invalid(format!(
                "Cannot drop user type {ks}.{} as it is still used by table {ks}.{}",
                name.name, t.name
            ));
        }
    }
    for other in k.types.values().filter(|o| o.name != name.name) {
        if other
            .fields
            .iter()
            .any(|(_, t)| types::uses_udt(t, &ks, &name.name))
        {
            return invalid(format!(
                "Cannot drop user type {ks}.{} as it is still used by user type {}",
                name.name, other.name
            ));
        }
    }
    k.types.remove(&name.name);
    s.bump_version();
    Ok(change(
        SchemaChangeType::Dropped,
        SchemaChangeTarget::Type {
            keyspace: ks,
            name: name.name.clone(),
        },
    ))
}
