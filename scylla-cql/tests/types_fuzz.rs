//! Hostile bytes into the deserializers: random bytes and mutated valid
//! encodings, for random types, through `CqlValue`, typed values and
//! `RowIterator`. Nothing may panic; errors are fine.

#[path = "support/cql_strategies.rs"]
mod strategies;

use std::collections::{BTreeMap, HashSet};

use proptest::prelude::*;
use scylla_driver_cql::types::deserialize::DeserializeValue;
use scylla_driver_cql::types::{
    ColumnSpec, ColumnType, CqlDuration, CqlValue, NativeType, Row, RowIterator,
};
use strategies::{any_type, typed_value};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Deserializes `bytes` as `typ` every way that type allows; ignores results.
fn poke(typ: &ColumnType, bytes: &[u8]) {
    let _ = CqlValue::deserialize(typ, Some(bytes));
    let _ = Option::<CqlValue>::deserialize(typ, None);
    let _ = Vec::<i32>::deserialize(typ, Some(bytes));
    let _ = Vec::<Option<&str>>::deserialize(typ, Some(bytes));
    let _ = <[f32; 3]>::deserialize(typ, Some(bytes));
    let _ = BTreeMap::<String, Vec<i64>>::deserialize(typ, Some(bytes));
    let _ = HashSet::<Vec<u8>>::deserialize(typ, Some(bytes));
    let _ = <(i32, Option<String>, CqlValue)>::deserialize(typ, Some(bytes));
    let _ = CqlDuration::deserialize(typ, Some(bytes));
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn random_bytes_never_panic(typ in any_type(), bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        poke(&typ, &bytes);
    }
}

proptest! {
    #![proptest_config(config(1500))]

    #[test]
    fn mutated_encodings_never_panic((typ, value) in typed_value(), at in any::<prop::sample::Index>(),
                                     byte in any::<u8>(), cut in any::<prop::sample::Index>()) {
        let mut bytes = Vec::new();
        scylla_driver_cql::types::serialize::serialize_bytes(&value, &typ, &mut bytes).unwrap();
        if !bytes.is_empty() {
            let i = at.index(bytes.len());
            bytes[i] = byte;
            poke(&typ, &bytes);
            bytes.truncate(cut.index(bytes.len()));
        }
        poke(&typ, &bytes);
    }

    #[test]
    fn random_rows_never_panic(types in prop::collection::vec(any_type(), 0..4),
                               raw in prop::collection::vec(any::<u8>(), 0..128), count in 0usize..1000) {
        let specs: Vec<ColumnSpec> = types
            .into_iter()
            .enumerate()
            .map(|(i, typ)| ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: format!("c{i}"), typ })
            .collect();
        if let Ok(rows) = RowIterator::<Row>::new(&specs, &raw, count) {
            for r in rows {
                let _ = r;
            }
        }
    }
}

#[test]
fn huge_counts_are_rejected_before_allocating() {
    let list = ColumnType::list(ColumnType::Native(NativeType::Int));
    let bytes = [0x7F, 0xFF, 0xFF, 0xFF];
    assert!(Vec::<i32>::deserialize(&list, Some(&bytes)).is_err());
    assert!(CqlValue::deserialize(&list, Some(&bytes)).is_err());
    let neg = [0xFF, 0xFF, 0xFF, 0xFE];
    assert!(Vec::<i32>::deserialize(&list, Some(&neg)).is_err());
    let vec_t = ColumnType::Vector {
        typ: Box::new(ColumnType::Native(NativeType::Text)),
        dimensions: u16::MAX,
    };
    assert!(Vec::<String>::deserialize(&vec_t, Some(&[0])).is_err());
    // A vint length claiming 2^64 - 1 bytes.
    assert!(Vec::<String>::deserialize(&vec_t, Some(&[0xFF; 9])).is_err());
    let rows: Vec<_> = RowIterator::<Row>::new(&[], &[], usize::MAX)
        .unwrap()
        .take(3)
        .collect();
    assert_eq!(rows.len(), 3, "rows of zero columns are legal");
}
