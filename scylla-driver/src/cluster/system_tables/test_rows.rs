//! Hand-built `Rows` results for the parsers' unit tests.

use scylla_cql::frame::response::result::{ResultMetadata, Rows};
use scylla_cql::types::{ColumnSpec, ColumnType, NativeType, SerializeValue, Written};

/// One serialized cell of `v` as a `typ` value (`None` for null).
pub(super) fn cell<T: SerializeValue + ?Sized>(v: &T, typ: &ColumnType) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match scylla_cql::types::serialize::serialize_bytes(&v, typ, &mut out) {
        Ok(Written::Value) => Some(out),
        Ok(_) => None,
        Err(e) => panic!("test value does not serialize: {e}"),
    }
}

/// A Rows result with columns `specs` (in table `system.t`) and `rows`.
pub(super) fn build(specs: &[(&str, ColumnType)], rows: Vec<Vec<Option<Vec<u8>>>>) -> Rows {
    let col_specs = specs
        .iter()
        .map(|(name, typ)| ColumnSpec {
            keyspace: "system".into(),
            table: "t".into(),
            name: (*name).into(),
            typ: typ.clone(),
        })
        .collect();
    Rows::build(ResultMetadata::with_columns(col_specs), rows).expect("rows build")
}

/// A `text` cell.
pub(super) fn text(s: &str) -> Option<Vec<u8>> {
    cell(s, &ColumnType::Native(NativeType::Text))
}

/// `system_schema.tables` rows: (keyspace, table).
pub(super) fn table_rows(tables: &[(&str, &str)]) -> Rows {
    let text_type = ColumnType::Native(NativeType::Text);
    build(
        &[
            ("keyspace_name", text_type.clone()),
            ("table_name", text_type),
        ],
        tables.iter().map(|(k, t)| vec![text(k), text(t)]).collect(),
    )
}

/// `system_schema.columns` rows as the schema reader selects them:
/// (keyspace, table, column, kind, position, type, clustering order).
pub(super) fn column_rows(cols: &[(&str, &str, &str, &str, i32, &str, &str)]) -> Rows {
    let text_type = ColumnType::Native(NativeType::Text);
    let int_type = ColumnType::Native(NativeType::Int);
    build(
        &[
            ("keyspace_name", text_type.clone()),
            ("table_name", text_type.clone()),
            ("column_name", text_type.clone()),
            ("kind", text_type.clone()),
            ("position", int_type.clone()),
            ("type", text_type.clone()),
            ("clustering_order", text_type),
        ],
        cols.iter()
            .map(|(ks, t, c, kind, pos, typ, order)| {
                vec![
                    text(ks),
                    text(t),
                    text(c),
                    text(kind),
                    cell(pos, &int_type),
                    text(typ),
                    text(order),
                ]
            })
            .collect(),
    )
}
