//! Keyspaces and tables, read from `system_schema`: each keyspace's
//! replication (for replica placement), whether it uses tablets (ScyllaDB's
//! `system_schema.scylla_keyspaces`), and each table's partition key (for
//! computing the token of a statement's bound values).
//!
//! Only what routing needs is read. Bad entries are skipped with a warning:
//! a keyspace whose replication map does not parse, a table whose partition
//! key positions are not `0..n`. A column type this driver cannot parse
//! (a user-defined type, whose name alone says nothing about its layout) is
//! kept as [`ColumnType::Custom`] holding the type text.

use std::collections::BTreeMap;

use scylla_cql::frame::response::result::Rows;
use scylla_cql::types::ColumnType;

use super::query::for_each_row;
use super::{KeyspaceMeta, MetadataError, TableMeta};
use crate::routing::ReplicationStrategy;

/// A `system_schema` query: over every keyspace (`all`), or over one
/// (`one`, whose bind marker is the keyspace's name; `keyspace_name` is the
/// partition key of every schema table, so the server reads one partition).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SchemaQuery {
    pub(crate) all: &'static str,
    pub(crate) one: &'static str,
}

macro_rules! schema_query {
    ($(#[$doc:meta])* $name:ident = $text:literal) => {
        $(#[$doc])*
        pub(crate) const $name: SchemaQuery = SchemaQuery {
            all: $text,
            one: concat!($text, " WHERE keyspace_name = ?"),
        };
    };
}
pub(crate) use schema_query;

schema_query!(
    /// Every keyspace and its replication.
    KEYSPACES_QUERY = "SELECT keyspace_name, replication, durable_writes FROM system_schema.keyspaces"
);

schema_query!(
    /// Every table (materialized views are found through their columns).
    TABLES_QUERY = "SELECT keyspace_name, table_name FROM system_schema.tables"
);

schema_query!(
    /// Every column; routing keeps the partition-key ones (the full schema
    /// model all of them). Filtering happens here rather than in CQL because
    /// `kind` is not a key column (the server would need ALLOW FILTERING,
    /// and would scan the table anyway).
    COLUMNS_QUERY = "SELECT keyspace_name, table_name, column_name, kind, position, type, clustering_order FROM system_schema.columns"
);

schema_query!(
    /// ScyllaDB's per-keyspace extras: a keyspace uses tablets when its row
    /// has a non-null `initial_tablets`. Cassandra has no such table.
    SCYLLA_KEYSPACES_QUERY = "SELECT keyspace_name, initial_tablets FROM system_schema.scylla_keyspaces"
);

schema_query!(
    /// ScyllaDB's strongly consistent keyspaces (`consistency = 'global'` or
    /// `'local'`; `'eventual'` or null otherwise). The column exists only
    /// with the `strongly-consistent-tables` feature, so it is read apart.
    SCYLLA_CONSISTENCY_QUERY = "SELECT keyspace_name, consistency FROM system_schema.scylla_keyspaces"
);

#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
struct ConsistencyRow {
    keyspace_name: String,
    consistency: Option<String>,
}

#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
struct ScyllaKeyspaceRow {
    keyspace_name: String,
    initial_tablets: Option<i32>,
}

#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
pub(super) struct KeyspaceRow {
    pub(super) keyspace_name: String,
    pub(super) replication: Option<BTreeMap<String, String>>,
    pub(super) durable_writes: Option<bool>,
}

#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
pub(super) struct TableRow {
    pub(super) keyspace_name: String,
    pub(super) table_name: String,
}

pub(super) struct ColumnRow {
    pub(super) keyspace_name: String,
    pub(super) table_name: String,
    pub(super) column_name: String,
    pub(super) kind: Option<String>,
    pub(super) position: Option<i32>,
    pub(super) r#type: Option<String>,
    pub(super) clustering_order: Option<String>,
}

// The row macro names fields after columns, and `type` is a keyword: this
// one is written by hand.
impl<'frame, 'metadata> scylla_cql::types::DeserializeRow<'frame, 'metadata> for ColumnRow {
    fn type_check(
        specs: &[scylla_cql::types::ColumnSpec],
    ) -> Result<(), scylla_cql::types::TypeCheckError> {
        type Row = (
            String,
            String,
            String,
            Option<String>,
            Option<i32>,
            Option<String>,
            Option<String>,
        );
        <Row as scylla_cql::types::DeserializeRow<'frame, 'metadata>>::type_check(specs)
    }

    fn deserialize(
        row: &mut scylla_cql::types::deserialize::ColumnIterator<'frame>,
    ) -> Result<Self, scylla_cql::types::DeserializationError> {
        // Columns come in the order of COLUMNS_QUERY.
        Ok(ColumnRow {
            keyspace_name: row.next_column()?.get()?,
            table_name: row.next_column()?.get()?,
            column_name: row.next_column()?.get()?,
            kind: row.next_column()?.get()?,
            position: row.next_column()?.get()?,
            r#type: row.next_column()?.get()?,
            clustering_order: row.next_column()?.get()?,
        })
    }
}

/// The keyspaces and their replication; keyspaces whose replication cannot
/// be parsed are skipped with a warning. Tables are filled in by [`tables`].
pub(crate) fn keyspaces(pages: &[Rows]) -> Result<BTreeMap<String, KeyspaceMeta>, MetadataError> {
    let mut out = BTreeMap::new();
    for_each_row::<KeyspaceRow>(pages, KEYSPACES_QUERY.all, |row| match row {
        Err(e) => {
            tracing::warn!(error = %e, "system_schema.keyspaces: skipping a row that does not deserialize")
        }
        Ok(row) => {
            let map = row.replication.unwrap_or_default();
            match ReplicationStrategy::from_replication_map(&map) {
                Ok(strategy) => {
                    out.insert(
                        row.keyspace_name,
                        KeyspaceMeta {
                            strategy,
                            tables: BTreeMap::new(),
                            tablets: false,
                            strongly_consistent: false,
                            schema: None,
                        },
                    );
                }
                Err(e) => {
                    tracing::warn!(keyspace = %row.keyspace_name, error = %e, ?map, "skipping a keyspace with an unparsable replication")
                }
            }
        }
    })?;
    Ok(out)
}

/// Marks the keyspaces of `keyspaces` that `system_schema.scylla_keyspaces`
/// (`pages`) says use tablets (`initial_tablets` not null). Keyspaces
/// without a row use vnodes.
pub(crate) fn mark_tablet_keyspaces(
    keyspaces: &mut BTreeMap<String, KeyspaceMeta>,
    pages: &[Rows],
) -> Result<(), MetadataError> {
    for_each_row::<ScyllaKeyspaceRow>(pages, SCYLLA_KEYSPACES_QUERY.all, |row| match row {
        Err(e) => {
            tracing::warn!(error = %e, "system_schema.scylla_keyspaces: skipping a row that does not deserialize")
        }
        Ok(row) => {
            if let Some(ks) = keyspaces.get_mut(&row.keyspace_name) {
                ks.tablets = row.initial_tablets.is_some();
            }
        }
    })
}

/// Marks the keyspaces of `keyspaces` whose `consistency` in
/// `system_schema.scylla_keyspaces` (`pages`) is `global` or `local`.
pub(crate) fn mark_strongly_consistent(
    keyspaces: &mut BTreeMap<String, KeyspaceMeta>,
    pages: &[Rows],
) -> Result<(), MetadataError> {
    for_each_row::<ConsistencyRow>(pages, SCYLLA_CONSISTENCY_QUERY.all, |row| match row {
        Err(e) => {
            tracing::warn!(error = %e, "system_schema.scylla_keyspaces: skipping a consistency row that does not deserialize")
        }
        Ok(row) => {
            if let Some(ks) = keyspaces.get_mut(&row.keyspace_name) {
                ks.strongly_consistent = matches!(
                    row.consistency
                        .as_deref()
                        .map(str::to_ascii_lowercase)
                        .as_deref(),
                    Some("global" | "local")
                );
            }
        }
    })
}

/// A partition-key column on its way into a table's key.
struct KeyColumn {
    position: i32,
    name: String,
    typ: ColumnType,
}

/// Adds each table with its partition key to its keyspace in `keyspaces`.
///
/// `table_pages` lists the tables; `column_pages` holds their columns (the
/// partition-key columns with their `position`). A table whose key columns
/// are not exactly positions `0..n` is left out with a warning: routing with
/// a wrong key would compute wrong tokens, while an unknown table only loses
/// token awareness. Materialized views appear through their columns.
pub(crate) fn tables(
    keyspaces: &mut BTreeMap<String, KeyspaceMeta>,
    table_pages: &[Rows],
    column_pages: &[Rows],
) -> Result<(), MetadataError> {
    let mut keys: BTreeMap<(String, String), Vec<KeyColumn>> = BTreeMap::new();
    for_each_row::<TableRow>(table_pages, TABLES_QUERY.all, |row| match row {
        Err(e) => {
            tracing::warn!(error = %e, "system_schema.tables: skipping a row that does not deserialize")
        }
        Ok(row) => {
            keys.entry((row.keyspace_name, row.table_name)).or_default();
        }
    })?;
    for_each_row::<ColumnRow>(column_pages, COLUMNS_QUERY.all, |row| match row {
        Err(e) => {
            tracing::warn!(error = %e, "system_schema.columns: skipping a row that does not deserialize")
        }
        Ok(row) => {
            if row.kind.as_deref() != Some("partition_key") {
                return;
            }
            let typ = parse_type(&row);
            keys.entry((row.keyspace_name, row.table_name))
                .or_default()
                .push(KeyColumn {
                    // A missing position cannot be placed: -1 fails the check below.
                    position: row.position.unwrap_or(-1),
                    name: row.column_name,
                    typ,
                });
        }
    })?;
    for ((keyspace, table), mut columns) in keys {
        let Some(ks) = keyspaces.get_mut(&keyspace) else {
            // The keyspace was skipped (or appeared between the two queries).
            continue;
        };
        columns.sort_by_key(|c| c.position);
        let in_order = !columns.is_empty()
            && columns
                .iter()
                .enumerate()
                .all(|(i, c)| usize::try_from(c.position).ok() == Some(i));
        if !in_order {
            let positions: Vec<i32> = columns.iter().map(|c| c.position).collect();
            tracing::warn!(%keyspace, %table, ?positions, "skipping a table whose partition key positions are not 0..n");
            continue;
        }
        let partition_key = columns.into_iter().map(|c| (c.name, c.typ)).collect();
        ks.tables.insert(table, TableMeta { partition_key });
    }
    Ok(())
}

/// The column's type, from the CQL type text both ScyllaDB and Cassandra
/// store in `system_schema.columns` (`int`, `frozen<list<text>>`).
fn parse_type(row: &ColumnRow) -> ColumnType {
    let text = row.r#type.as_deref().unwrap_or("");
    ColumnType::from_cql(text).unwrap_or_else(|e| {
        tracing::warn!(keyspace = %row.keyspace_name, table = %row.table_name, column = %row.column_name, error = %e, "keeping an unparsable column type as custom");
        ColumnType::Custom(text.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::super::test_rows::{build, cell, column_rows, table_rows, text};
    use super::*;
    use scylla_cql::types::NativeType;

    fn keyspace_rows(entries: &[(&str, &[(&str, &str)])]) -> Rows {
        let map_type = ColumnType::map(
            ColumnType::Native(NativeType::Text),
            ColumnType::Native(NativeType::Text),
        );
        let specs = [
            ("keyspace_name", ColumnType::Native(NativeType::Text)),
            ("replication", map_type.clone()),
            ("durable_writes", ColumnType::Native(NativeType::Boolean)),
        ];
        let rows = entries.iter().map(|(name, repl)| {
            let map: BTreeMap<String, String> = repl
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            vec![
                text(name),
                cell(&map, &map_type),
                cell(&true, &ColumnType::Native(NativeType::Boolean)),
            ]
        });
        build(&specs, rows.collect())
    }

    #[test]
    fn replication_is_parsed_and_bad_keyspaces_skipped() {
        let rows = keyspace_rows(&[
            (
                "ks1",
                &[
                    ("class", "org.apache.cassandra.locator.SimpleStrategy"),
                    ("replication_factor", "3"),
                ],
            ),
            (
                "ks2",
                &[
                    ("class", "NetworkTopologyStrategy"),
                    ("dc1", "2"),
                    ("dc2", "1"),
                ],
            ),
            (
                "system",
                &[("class", "org.apache.cassandra.locator.LocalStrategy")],
            ),
            (
                "bad_rf",
                &[("class", "SimpleStrategy"), ("replication_factor", "x")],
            ),
            ("no_class", &[("replication_factor", "1")]),
        ]);
        let ks = keyspaces(&[rows]).unwrap();
        assert_eq!(ks.len(), 3);
        assert_eq!(ks["ks1"].strategy, ReplicationStrategy::Simple { rf: 3 });
        let dc_rfs = [("dc1".to_owned(), 2), ("dc2".to_owned(), 1)]
            .into_iter()
            .collect();
        assert_eq!(
            ks["ks2"].strategy,
            ReplicationStrategy::NetworkTopology { dc_rfs }
        );
        assert_eq!(ks["system"].strategy, ReplicationStrategy::Local);
    }

    fn scylla_keyspace_rows(entries: &[(&str, Option<i32>)]) -> Rows {
        let specs = [
            ("keyspace_name", ColumnType::Native(NativeType::Text)),
            ("initial_tablets", ColumnType::Native(NativeType::Int)),
        ];
        let rows = entries.iter().map(|(name, initial)| {
            vec![
                text(name),
                initial.and_then(|i| cell(&i, &ColumnType::Native(NativeType::Int))),
            ]
        });
        build(&specs, rows.collect())
    }

    #[test]
    fn tablet_keyspaces_are_those_with_initial_tablets() {
        let simple = [("class", "NetworkTopologyStrategy"), ("dc1", "3")];
        let mut ks = keyspaces(&[keyspace_rows(&[
            ("tab", &simple),
            ("auto", &simple),
            ("vnodes", &simple),
            ("no_row", &simple),
        ])])
        .unwrap();
        let rows = scylla_keyspace_rows(&[
            ("tab", Some(64)),
            ("auto", Some(0)),
            ("vnodes", None),
            ("unknown", Some(8)),
        ]);
        mark_tablet_keyspaces(&mut ks, &[rows]).unwrap();
        assert!(ks["tab"].tablets);
        assert!(ks["auto"].tablets);
        assert!(!ks["vnodes"].tablets);
        assert!(!ks["no_row"].tablets);
        assert!(!ks.contains_key("unknown"));
    }

    #[test]
    fn partition_keys_are_ordered_by_position() {
        let mut ks = keyspace_rows(&[(
            "ks",
            &[("class", "SimpleStrategy"), ("replication_factor", "1")],
        )]);
        let mut ks = keyspaces(std::slice::from_mut(&mut ks)).unwrap();
        let tables_rows = table_rows(&[("ks", "t"), ("ks", "gap"), ("other", "x")]);
        let cols = column_rows(&[
            ("ks", "t", "c", "clustering", 0, "int", "none"),
            (
                "ks",
                "t",
                "b",
                "partition_key",
                1,
                "frozen<list<text>>",
                "none",
            ),
            ("ks", "t", "v", "regular", -1, "text", "none"),
            ("ks", "t", "a", "partition_key", 0, "int", "none"),
            ("ks", "t", "u", "partition_key", 2, "my_udt", "none"),
            ("ks", "gap", "a", "partition_key", 0, "int", "none"),
            ("ks", "gap", "b", "partition_key", 2, "int", "none"),
            ("ks", "view", "k", "partition_key", 0, "bigint", "none"),
            ("other", "x", "k", "partition_key", 0, "int", "none"),
        ]);
        tables(&mut ks, &[tables_rows], &[cols]).unwrap();
        let ks = &ks["ks"];
        assert_eq!(
            ks.tables["t"].partition_key,
            vec![
                ("a".to_owned(), ColumnType::Native(NativeType::Int)),
                (
                    "b".to_owned(),
                    ColumnType::list(ColumnType::Native(NativeType::Text)).into_frozen()
                ),
                ("u".to_owned(), ColumnType::Custom("my_udt".to_owned())),
            ]
        );
        assert!(!ks.tables.contains_key("gap"));
        assert_eq!(
            ks.tables["view"].partition_key,
            vec![("k".to_owned(), ColumnType::Native(NativeType::BigInt))]
        );
        assert_eq!(ks.tables.len(), 2);
    }
}
