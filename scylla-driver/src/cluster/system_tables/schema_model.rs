//! The full schema model ([`crate::cluster::metadata`]) from the rows of
//! `system_schema`: every column with its kind, type and clustering order,
//! user-defined types (resolved into column types, nested ones included),
//! materialized views and secondary indexes.
//!
//! Bad entries are left out with a warning, never guessed: a user-defined
//! type whose fields name an unknown type, a table or view whose key
//! positions are not `0..n`, a column whose type does not parse, a column of
//! an unknown kind. A table missing from the model only loses what the model
//! says of it; requests are routed from the routing snapshot regardless.

use std::collections::{BTreeMap, HashMap};

use scylla_cql::frame::response::result::Rows;
use std::sync::Arc;

use scylla_cql::types::{ColumnType, UserDefinedType};

use super::query::for_each_row;
use super::schema::{
    schema_query, ColumnRow, KeyspaceRow, SchemaQuery, TableRow, COLUMNS_QUERY, KEYSPACES_QUERY,
    TABLES_QUERY,
};
use super::MetadataError;
use crate::cluster::metadata::{
    ClusteringOrder, Column, ColumnKind, Index, Keyspace, MaterializedView, Strategy, Table,
};

schema_query!(
    /// Every user-defined type.
    TYPES_QUERY = "SELECT keyspace_name, type_name, field_names, field_types FROM system_schema.types"
);

schema_query!(
    /// Every materialized view and its base table.
    VIEWS_QUERY = "SELECT keyspace_name, view_name, base_table_name FROM system_schema.views"
);

schema_query!(
    /// Every secondary index.
    INDEXES_QUERY = "SELECT keyspace_name, table_name, index_name, kind, options FROM system_schema.indexes"
);

#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
struct TypeRow {
    keyspace_name: String,
    type_name: String,
    field_names: Option<Vec<String>>,
    field_types: Option<Vec<String>>,
}

#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
struct ViewRow {
    keyspace_name: String,
    view_name: String,
    base_table_name: Option<String>,
}

#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
struct IndexRow {
    keyspace_name: String,
    table_name: String,
    index_name: String,
    kind: Option<String>,
    options: Option<BTreeMap<String, String>>,
}

/// The `system_schema` pages the model is built from (each the result of
/// its query, possibly narrowed to some keyspaces).
pub(crate) struct SchemaPages<'a> {
    pub(crate) keyspaces: &'a [Rows],
    pub(crate) tables: &'a [Rows],
    pub(crate) columns: &'a [Rows],
    pub(crate) types: &'a [Rows],
    pub(crate) views: &'a [Rows],
    pub(crate) indexes: &'a [Rows],
}

/// A column on its way into a table.
struct RawColumn {
    name: String,
    kind: ColumnKind,
    position: i32,
    typ: ColumnType,
    order: Option<ClusteringOrder>,
}

/// The model of every keyspace in `pages`, by name; `tablets` says which
/// keyspaces use tablets.
pub(crate) fn build(
    pages: &SchemaPages<'_>,
    tablets: &dyn Fn(&str) -> bool,
) -> Result<BTreeMap<String, Keyspace>, MetadataError> {
    let mut out = BTreeMap::new();
    for_each_row::<KeyspaceRow>(pages.keyspaces, KEYSPACES_QUERY.all, |row| match row {
        Err(e) => {
            tracing::warn!(error = %e, "system_schema.keyspaces: skipping a row that does not deserialize")
        }
        Ok(row) => {
            let strategy = Strategy::from_replication(&row.replication.unwrap_or_default());
            out.insert(
                row.keyspace_name.clone(),
                Keyspace {
                    strategy,
                    durable_writes: row.durable_writes.unwrap_or(true),
                    tablet_based: tablets(&row.keyspace_name),
                    tables: HashMap::new(),
                    views: HashMap::new(),
                    user_defined_types: HashMap::new(),
                },
            );
        }
    })?;

    let mut types: BTreeMap<String, Vec<TypeRow>> = BTreeMap::new();
    for_each_row::<TypeRow>(pages.types, TYPES_QUERY.all, |row| match row {
        Err(e) => {
            tracing::warn!(error = %e, "system_schema.types: skipping a row that does not deserialize")
        }
        Ok(row) => types
            .entry(row.keyspace_name.clone())
            .or_default()
            .push(row),
    })?;
    for (keyspace, rows) in types {
        if let Some(ks) = out.get_mut(&keyspace) {
            ks.user_defined_types = resolve_types(&keyspace, rows);
        }
    }

    // Tables with no column row still exist (the model lists them empty).
    let mut columns: BTreeMap<(String, String), Vec<RawColumn>> = BTreeMap::new();
    for_each_row::<TableRow>(pages.tables, TABLES_QUERY.all, |row| match row {
        Err(e) => {
            tracing::warn!(error = %e, "system_schema.tables: skipping a row that does not deserialize")
        }
        Ok(row) => {
            columns
                .entry((row.keyspace_name, row.table_name))
                .or_default();
        }
    })?;
    let mut views: BTreeMap<(String, String), Option<String>> = BTreeMap::new();
    for_each_row::<ViewRow>(pages.views, VIEWS_QUERY.all, |row| match row {
        Err(e) => {
            tracing::warn!(error = %e, "system_schema.views: skipping a row that does not deserialize")
        }
        Ok(row) => {
            views.insert((row.keyspace_name, row.view_name), row.base_table_name);
        }
    })?;
    for_each_row::<ColumnRow>(pages.columns, COLUMNS_QUERY.all, |row| match row {
        Err(e) => {
            tracing::warn!(error = %e, "system_schema.columns: skipping a row that does not deserialize")
        }
        Ok(row) => {
            let Some(ks) = out.get(&row.keyspace_name) else {
                return;
            };
            if let Some(column) = raw_column(&row, ks) {
                columns
                    .entry((row.keyspace_name, row.table_name))
                    .or_default()
                    .push(column);
            }
        }
    })?;

    let mut indexes: BTreeMap<(String, String), HashMap<String, Index>> = BTreeMap::new();
    for_each_row::<IndexRow>(pages.indexes, INDEXES_QUERY.all, |row| match row {
        Err(e) => {
            tracing::warn!(error = %e, "system_schema.indexes: skipping a row that does not deserialize")
        }
        Ok(row) => {
            indexes
                .entry((row.keyspace_name, row.table_name))
                .or_default()
                .insert(
                    row.index_name,
                    Index {
                        kind: row.kind.unwrap_or_default(),
                        options: row.options.unwrap_or_default(),
                    },
                );
        }
    })?;

    for ((keyspace, name), cols) in columns {
        let Some(ks) = out.get_mut(&keyspace) else {
            continue;
        };
        let Some(mut table) = table(&keyspace, &name, cols) else {
            continue;
        };
        if let Some(ix) = indexes.remove(&(keyspace.clone(), name.clone())) {
            table.indexes = ix;
        }
        match views.remove(&(keyspace, name.clone())) {
            Some(base) => {
                ks.views.insert(
                    name,
                    MaterializedView {
                        view_metadata: table,
                        base_table_name: base.unwrap_or_default(),
                    },
                );
            }
            None => {
                ks.tables.insert(name, table);
            }
        }
    }
    Ok(out)
}

/// One column of `ks`, or `None` (with a warning) when its kind or type
/// cannot be read.
fn raw_column(row: &ColumnRow, ks: &Keyspace) -> Option<RawColumn> {
    let kind = match row.kind.as_deref().map(str::parse::<ColumnKind>) {
        Some(Ok(kind)) => kind,
        _ => {
            tracing::warn!(keyspace = %row.keyspace_name, table = %row.table_name, column = %row.column_name, kind = ?row.kind, "schema model: leaving out a column of an unknown kind");
            return None;
        }
    };
    let text = row.r#type.as_deref().unwrap_or("");
    let typ = match ColumnType::from_cql_with(text, |name| udt_type(ks, name)) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(keyspace = %row.keyspace_name, table = %row.table_name, column = %row.column_name, error = %e, "schema model: leaving out a column whose type does not parse");
            return None;
        }
    };
    let order = match (kind, row.clustering_order.as_deref()) {
        (ColumnKind::Clustering, Some(o)) if o.eq_ignore_ascii_case("desc") => {
            Some(ClusteringOrder::Descending)
        }
        (ColumnKind::Clustering, _) => Some(ClusteringOrder::Ascending),
        _ => None,
    };
    Some(RawColumn {
        name: row.column_name.clone(),
        kind,
        // A missing position cannot be placed: -1 fails the key checks.
        position: row.position.unwrap_or(-1),
        typ,
        order,
    })
}

/// The table of `columns`, keys in position order; `None` (with a warning)
/// when a key's positions are not `0..n`.
fn table(keyspace: &str, name: &str, columns: Vec<RawColumn>) -> Option<Table> {
    let mut partition: Vec<(i32, String)> = Vec::new();
    let mut clustering: Vec<(i32, String)> = Vec::new();
    let mut table = Table::default();
    for c in columns {
        match c.kind {
            ColumnKind::PartitionKey => partition.push((c.position, c.name.clone())),
            ColumnKind::Clustering => clustering.push((c.position, c.name.clone())),
            _ => {}
        }
        table.columns.insert(
            c.name,
            Column {
                typ: c.typ,
                kind: c.kind,
                clustering_order: c.order,
            },
        );
    }
    for (what, key) in [
        ("partition", &mut partition),
        ("clustering", &mut clustering),
    ] {
        key.sort();
        if !key
            .iter()
            .enumerate()
            .all(|(i, (p, _))| usize::try_from(*p).ok() == Some(i))
        {
            let positions: Vec<i32> = key.iter().map(|(p, _)| *p).collect();
            tracing::warn!(%keyspace, table = %name, key = what, ?positions, "schema model: leaving out a table whose key positions are not 0..n");
            return None;
        }
    }
    table.partition_key = partition.into_iter().map(|(_, n)| n).collect();
    table.clustering_key = clustering.into_iter().map(|(_, n)| n).collect();
    Some(table)
}

/// The column type of user-defined type `name` (possibly `keyspace.name`)
/// of `ks`, if it has one.
fn udt_type(ks: &Keyspace, name: &str) -> Option<ColumnType> {
    let short = name.rsplit('.').next().unwrap_or(name);
    ks.user_defined_types.get(short).map(udt_column_type)
}

fn udt_column_type(def: &Arc<UserDefinedType>) -> ColumnType {
    ColumnType::UserDefinedType {
        frozen: false,
        definition: def.clone(),
    }
}

/// The user-defined types of `keyspace` with their field types resolved; a
/// type can name types defined after it, so rounds resolve what they can
/// until a round makes no progress. Those left (a field of an unknown type,
/// or a cycle, which CQL does not allow) are left out with a warning.
fn resolve_types(keyspace: &str, rows: Vec<TypeRow>) -> HashMap<String, Arc<UserDefinedType>> {
    let mut done: HashMap<String, Arc<UserDefinedType>> = HashMap::new();
    let mut pending = rows;
    // Bounded: each round resolves at least one type or stops.
    while !pending.is_empty() {
        let before = pending.len();
        let mut left = Vec::new();
        for row in pending {
            let names = row.field_names.as_deref().unwrap_or(&[]);
            let texts = row.field_types.as_deref().unwrap_or(&[]);
            if names.len() != texts.len() {
                tracing::warn!(%keyspace, udt = %row.type_name, "schema model: leaving out a user-defined type whose field names and types differ in number");
                continue;
            }
            let lookup = |name: &str| {
                let short = name.rsplit('.').next().unwrap_or(name);
                done.get(short).map(udt_column_type)
            };
            let fields: Result<Vec<_>, _> = names
                .iter()
                .zip(texts)
                .map(|(n, t)| ColumnType::from_cql_with(t, lookup).map(|t| (n.clone(), t)))
                .collect();
            match fields {
                Ok(field_types) => {
                    done.insert(
                        row.type_name.clone(),
                        Arc::new(UserDefinedType {
                            name: row.type_name,
                            keyspace: keyspace.to_owned(),
                            field_types,
                        }),
                    );
                }
                Err(_) => left.push(row),
            }
        }
        if left.len() == before {
            for row in &left {
                tracing::warn!(%keyspace, udt = %row.type_name, field_types = ?row.field_types, "schema model: leaving out a user-defined type naming an unknown type");
            }
            break;
        }
        pending = left;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::super::test_rows::{build as page, cell, column_rows, table_rows, text};
    use super::*;
    use scylla_cql::types::NativeType;

    fn texts(items: &[&str]) -> Option<Vec<u8>> {
        let list: Vec<String> = items.iter().map(|s| (*s).to_owned()).collect();
        cell(
            &list,
            &ColumnType::list(ColumnType::Native(NativeType::Text)),
        )
    }

    fn keyspaces() -> Rows {
        let map = ColumnType::map(
            ColumnType::Native(NativeType::Text),
            ColumnType::Native(NativeType::Text),
        );
        let repl: BTreeMap<String, String> = [
            ("class".to_owned(), "SimpleStrategy".to_owned()),
            ("replication_factor".to_owned(), "1".to_owned()),
        ]
        .into();
        page(
            &[
                ("keyspace_name", ColumnType::Native(NativeType::Text)),
                ("replication", map.clone()),
                ("durable_writes", ColumnType::Native(NativeType::Boolean)),
            ],
            vec![vec![
                text("ks"),
                cell(&repl, &map),
                cell(&false, &ColumnType::Native(NativeType::Boolean)),
            ]],
        )
    }

    /// (name, field names, field types)
    fn types(udts: &[(&str, &[&str], &[&str])]) -> Rows {
        let list = ColumnType::list(ColumnType::Native(NativeType::Text));
        page(
            &[
                ("keyspace_name", ColumnType::Native(NativeType::Text)),
                ("type_name", ColumnType::Native(NativeType::Text)),
                ("field_names", list.clone()),
                ("field_types", list),
            ],
            udts.iter()
                .map(|(n, names, types)| vec![text("ks"), text(n), texts(names), texts(types)])
                .collect(),
        )
    }

    fn views(rows: &[(&str, &str)]) -> Rows {
        page(
            &[
                ("keyspace_name", ColumnType::Native(NativeType::Text)),
                ("view_name", ColumnType::Native(NativeType::Text)),
                ("base_table_name", ColumnType::Native(NativeType::Text)),
            ],
            rows.iter()
                .map(|(v, b)| vec![text("ks"), text(v), text(b)])
                .collect(),
        )
    }

    fn indexes(rows: &[(&str, &str, &str)]) -> Rows {
        let map = ColumnType::map(
            ColumnType::Native(NativeType::Text),
            ColumnType::Native(NativeType::Text),
        );
        page(
            &[
                ("keyspace_name", ColumnType::Native(NativeType::Text)),
                ("table_name", ColumnType::Native(NativeType::Text)),
                ("index_name", ColumnType::Native(NativeType::Text)),
                ("kind", ColumnType::Native(NativeType::Text)),
                ("options", map.clone()),
            ],
            rows.iter()
                .map(|(t, i, target)| {
                    let options: BTreeMap<String, String> =
                        [("target".to_owned(), (*target).to_owned())].into();
                    vec![
                        text("ks"),
                        text(t),
                        text(i),
                        text("COMPOSITES"),
                        cell(&options, &map),
                    ]
                })
                .collect(),
        )
    }

    #[test]
    fn the_model_has_every_column_type_view_and_index() {
        let ks = [keyspaces()];
        let tb = [table_rows(&[("ks", "t"), ("ks", "gap"), ("ks", "mv")])];
        let cols = [column_rows(&[
            ("ks", "t", "b", "partition_key", 1, "text", "none"),
            ("ks", "t", "a", "partition_key", 0, "int", "none"),
            ("ks", "t", "c2", "clustering", 1, "timeuuid", "desc"),
            ("ks", "t", "c1", "clustering", 0, "int", "asc"),
            ("ks", "t", "s", "static", -1, "text", "none"),
            ("ks", "t", "home", "regular", -1, "frozen<address>", "none"),
            ("ks", "t", "tags", "regular", -1, "set<text>", "none"),
            ("ks", "t", "odd", "regular", -1, "no_such_type", "none"),
            ("ks", "t", "what", "weird_kind", -1, "int", "none"),
            ("ks", "gap", "a", "partition_key", 0, "int", "none"),
            ("ks", "gap", "b", "partition_key", 2, "int", "none"),
            ("ks", "mv", "s", "partition_key", 0, "text", "none"),
            ("ks", "mv", "a", "clustering", 0, "int", "asc"),
        ])];
        // `address` names `point`, defined after it.
        let ty = [types(&[
            ("address", &["street", "at"], &["text", "frozen<point>"]),
            ("point", &["x", "y"], &["double", "double"]),
            ("broken", &["f"], &["frozen<missing>"]),
        ])];
        let vw = [views(&[("mv", "t")])];
        let ix = [indexes(&[("t", "t_s_idx", "s")])];
        let pages = SchemaPages {
            keyspaces: &ks,
            tables: &tb,
            columns: &cols,
            types: &ty,
            views: &vw,
            indexes: &ix,
        };
        let model = build(&pages, &|_| false).unwrap();
        let ks = &model["ks"];
        assert!(!ks.durable_writes && !ks.tablet_based);
        assert_eq!(
            ks.strategy,
            Strategy::SimpleStrategy {
                replication_factor: 1
            }
        );
        // Types: both good ones, nested resolved; the broken one left out.
        let mut udts: Vec<_> = ks.user_defined_types.keys().cloned().collect();
        udts.sort();
        assert_eq!(udts, ["address", "point"]);
        let t = &ks.tables["t"];
        assert_eq!(t.partition_key, ["a", "b"]);
        assert_eq!(t.clustering_key, ["c1", "c2"]);
        assert_eq!(
            t.columns["c2"].clustering_order,
            Some(ClusteringOrder::Descending)
        );
        assert_eq!(
            t.columns["c1"].clustering_order,
            Some(ClusteringOrder::Ascending)
        );
        assert_eq!(t.columns["s"].kind, ColumnKind::Static);
        assert_eq!(t.columns["s"].clustering_order, None);
        assert_eq!(
            t.columns["tags"].typ,
            ColumnType::set(ColumnType::Native(NativeType::Text))
        );
        let ColumnType::UserDefinedType { definition, .. } = &t.columns["home"].typ else {
            panic!("not a UDT: {:?}", t.columns["home"].typ);
        };
        assert_eq!(definition.name, "address");
        assert!(matches!(&definition.field_types[1].1,
            ColumnType::UserDefinedType { definition, .. } if definition.name == "point"));
        // Unparsable type and unknown kind: left out, the rest kept.
        assert!(!t.columns.contains_key("odd") && !t.columns.contains_key("what"));
        assert_eq!(t.columns.len(), 7);
        assert_eq!(t.indexes["t_s_idx"].target(), Some("s"));
        // Key positions not 0..n: the table is left out.
        assert!(!ks.tables.contains_key("gap"));
        // The view is a view, not a table.
        assert!(!ks.tables.contains_key("mv"));
        assert_eq!(ks.views["mv"].base_table_name, "t");
        assert_eq!(ks.views["mv"].view_metadata.partition_key, ["s"]);
    }
}
