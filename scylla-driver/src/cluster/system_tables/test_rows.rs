//! Hand-built `Rows` results for the parsers' unit tests.

use scylla_cql::frame::response::result::{ResultMetadata, Rows};
use scylla_cql::types::{ColumnSpec, ColumnType, SerializeValue, Written};

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
