//! Round trips of every CQL type: typed Rust values and `CqlValue`s are
//! serialized and deserialized back (floats compared bitwise); class strings
//! and CQL type syntax are printed and parsed back; rows go through
//! `SerializedValues` and `RowIterator`.

#[path = "support/cql_strategies.rs"]
mod strategies;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Debug;
use std::net::IpAddr;

use proptest::prelude::*;
use scylla_driver_cql::types::custom_class::{parse, to_class_string};
use scylla_driver_cql::types::deserialize::DeserializeValue;
use scylla_driver_cql::types::serialize::SerializeValue;
use scylla_driver_cql::types::{
    CollectionType, ColumnSpec, ColumnType, Counter, CqlDate, CqlDecimal, CqlDuration, CqlTime,
    CqlTimestamp, CqlValue, CqlVarint, NativeType, Row, RowIterator, SerializeRow,
    SerializedValues, Written,
};
use strategies::{any_text_type, any_type, same, typed_value};
use uuid::Uuid;

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

fn ser<T: SerializeValue + ?Sized>(v: &T, typ: &ColumnType) -> Vec<u8> {
    let mut out = Vec::new();
    assert_eq!(
        scylla_driver_cql::types::serialize::serialize_bytes(&v, typ, &mut out),
        Ok(Written::Value),
        "{typ}"
    );
    out
}

fn rt<T>(v: &T, typ: &ColumnType) -> T
where
    T: SerializeValue + for<'a, 'm> DeserializeValue<'a, 'm> + Debug,
{
    T::type_check(typ).expect("type check");
    let bytes = ser(v, typ);
    T::deserialize(typ, Some(&bytes)).expect("deserialize")
}

fn list(t: ColumnType) -> ColumnType {
    ColumnType::list(t)
}

fn vector(t: ColumnType, dimensions: u16) -> ColumnType {
    ColumnType::vector(t, dimensions)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn cql_value_round_trip((typ, value) in typed_value()) {
        let bytes = ser(&value, &typ);
        let back = CqlValue::deserialize(&typ, Some(&bytes)).unwrap();
        prop_assert!(same(&value, &back), "{typ}: {value:?} -> {back:?}");
        // The typed serializer and the dynamic one agree byte for byte.
        let again = ser(&back, &typ);
        prop_assert_eq!(again, bytes);
    }

    #[test]
    fn class_string_round_trip(typ in any_type(), text_typ in any_text_type()) {
        prop_assert_eq!(parse(&to_class_string(&typ), 0).unwrap(), typ);
        // Frozen types travel as `FrozenType(..)`.
        prop_assert_eq!(parse(&to_class_string(&text_typ), 0).unwrap(), text_typ);
    }

    #[test]
    fn cql_syntax_round_trip(typ in any_text_type()) {
        // UDTs print as `ks.name`; resolve them from the generated type.
        let mut udts = Vec::new();
        collect_udts(&typ, &mut udts);
        let printed = typ.to_string();
        let parsed = ColumnType::from_cql_with(&printed, |n| {
            udts.iter().find(|u| matches!(u, ColumnType::UserDefinedType { definition, .. }
                if format!("{}.{}", definition.keyspace, definition.name) == n)).cloned()
        });
        prop_assert_eq!(parsed, Ok(typ), "{}", printed);
    }

    #[test]
    fn cql_syntax_frozen_round_trip(elem in any_text_type(), which in 0..3usize) {
        // `frozen<list<T>>` (or set, map) parses to a frozen collection and
        // prints back as written (`T` as CQL requires it nested: frozen if it
        // is a collection or a UDT).
        let inner = elem.clone().into_frozen().to_string();
        let text = match which {
            0 => format!("frozen<list<{inner}>>"),
            1 => format!("frozen<set<{inner}>>"),
            _ => format!("frozen<map<{inner}, {inner}>>"),
        };
        let mut udts = Vec::new();
        collect_udts(&elem, &mut udts);
        let parsed = ColumnType::from_cql_with(&text, |n| {
            udts.iter().find(|u| matches!(u, ColumnType::UserDefinedType { definition, .. }
                if format!("{}.{}", definition.keyspace, definition.name) == n)).cloned()
        }).unwrap();
        prop_assert!(
            matches!(parsed, ColumnType::Collection { frozen: true, .. }),
            "{text}: {parsed:?}"
        );
        prop_assert_eq!(parsed.to_string(), text.clone());
        // Not frozen without the word.
        let plain = &text["frozen<".len()..text.len() - 1];
        let parsed_plain = ColumnType::from_cql_with(plain, |n| {
            udts.iter().find(|u| matches!(u, ColumnType::UserDefinedType { definition, .. }
                if format!("{}.{}", definition.keyspace, definition.name) == n)).cloned()
        }).unwrap();
        prop_assert!(!parsed_plain.is_frozen());
        prop_assert_eq!(parsed_plain.into_frozen(), parsed);
    }

    #[test]
    fn scalars(a in any::<i8>(), b in any::<i16>(), c in any::<i32>(), d in any::<i64>(),
               f in any::<u32>(), g in any::<u64>(), h in any::<bool>(), s in "\\PC{0,20}",
               blob in prop::collection::vec(any::<u8>(), 0..20), u in any::<u128>()) {
        prop_assert_eq!(rt(&a, &ColumnType::Native(NativeType::TinyInt)), a);
        prop_assert_eq!(rt(&b, &ColumnType::Native(NativeType::SmallInt)), b);
        prop_assert_eq!(rt(&c, &ColumnType::Native(NativeType::Int)), c);
        prop_assert_eq!(rt(&d, &ColumnType::Native(NativeType::BigInt)), d);
        prop_assert_eq!(rt(&d, &ColumnType::Native(NativeType::Counter)), d);
        prop_assert_eq!(rt(&f32::from_bits(f), &ColumnType::Native(NativeType::Float)).to_bits(), f);
        prop_assert_eq!(rt(&f64::from_bits(g), &ColumnType::Native(NativeType::Double)).to_bits(), g);
        prop_assert_eq!(rt(&h, &ColumnType::Native(NativeType::Boolean)), h);
        prop_assert_eq!(&rt(&s, &ColumnType::Native(NativeType::Text)), &s);
        let bytes = ser(s.as_str(), &ColumnType::Native(NativeType::Text));
        prop_assert_eq!(<&str>::deserialize(&ColumnType::Native(NativeType::Text), Some(&bytes)).unwrap(), s.as_str());
        prop_assert_eq!(&rt(&blob, &ColumnType::Native(NativeType::Blob)), &blob);
        prop_assert_eq!(<&[u8]>::deserialize(&ColumnType::Native(NativeType::Blob), Some(&blob)).unwrap(), blob.as_slice());
        let uuid = Uuid::from_u128(u);
        prop_assert_eq!(rt(&uuid, &ColumnType::Native(NativeType::Uuid)), uuid);
        prop_assert_eq!(rt(&uuid, &ColumnType::Native(NativeType::Timeuuid)), uuid);
        // A timeuuid is for timeuuid columns only, and reads back unchanged.
        let timeuuid = scylla_driver_cql::types::CqlTimeuuid::from(uuid);
        prop_assert_eq!(rt(&timeuuid, &ColumnType::Native(NativeType::Timeuuid)), timeuuid);
        prop_assert_eq!(ser(&uuid, &ColumnType::Native(NativeType::Uuid)), ser(&timeuuid, &ColumnType::Native(NativeType::Timeuuid)));
        prop_assert!(scylla_driver_cql::types::serialize::serialize_bytes(&timeuuid, &ColumnType::Native(NativeType::Uuid), &mut Vec::new()).is_err());
        prop_assert_eq!(rt(&Some(c), &ColumnType::Native(NativeType::Int)), Some(c));
        prop_assert_eq!(rt(&Counter(d), &ColumnType::Native(NativeType::Counter)), Counter(d));
        let ip = IpAddr::from(u.to_be_bytes());
        prop_assert_eq!(rt(&ip, &ColumnType::Native(NativeType::Inet)), ip);
        let ip4 = IpAddr::from((u as u32).to_be_bytes());
        prop_assert_eq!(rt(&ip4, &ColumnType::Native(NativeType::Inet)), ip4);
    }

    #[test]
    fn project_types(date in any::<u32>(), time in 0..CqlTime::NANOS_PER_DAY, ts in any::<i64>(),
                     m in 0..=i32::MAX, days in 0..=i32::MAX, n in 0..=i64::MAX,
                     unscaled in any::<i128>(), scale in any::<i32>()) {
        prop_assert_eq!(rt(&CqlDate(date), &ColumnType::Native(NativeType::Date)), CqlDate(date));
        prop_assert_eq!(rt(&CqlTime(time), &ColumnType::Native(NativeType::Time)), CqlTime(time));
        prop_assert_eq!(rt(&CqlTimestamp(ts), &ColumnType::Native(NativeType::Timestamp)), CqlTimestamp(ts));
        let d = CqlDuration { months: -m, days: -days, nanoseconds: -n };
        prop_assert_eq!(rt(&d, &ColumnType::Native(NativeType::Duration)), d);
        let dec = CqlDecimal { unscaled: CqlVarint::from(unscaled), scale };
        prop_assert_eq!(&rt(&dec, &ColumnType::Native(NativeType::Decimal)), &dec);
        let v = CqlVarint::from(unscaled);
        prop_assert_eq!(&rt(&v, &ColumnType::Native(NativeType::Varint)), &v);
    }

    #[test]
    fn collections(ints in prop::collection::vec(any::<i32>(), 0..8),
                   strs in prop::collection::btree_set("[a-z]{0,5}", 0..6),
                   map in prop::collection::hash_map("[a-z]{0,5}", any::<i64>(), 0..6)) {
        prop_assert_eq!(&rt(&ints, &list(ColumnType::Native(NativeType::Int))), &ints);
        let set_t = ColumnType::set(ColumnType::Native(NativeType::Text));
        prop_assert_eq!(&rt(&strs, &set_t), &strs);
        let hs: HashSet<String> = strs.iter().cloned().collect();
        prop_assert_eq!(&rt(&hs, &set_t), &hs);
        let map_t = ColumnType::map(ColumnType::Native(NativeType::Ascii), ColumnType::Native(NativeType::BigInt));
        prop_assert_eq!(&rt(&map, &map_t), &map);
        let bmap: BTreeMap<String, i64> = map.clone().into_iter().collect();
        prop_assert_eq!(&rt(&bmap, &map_t), &bmap);
        let nested: Vec<Vec<i32>> = vec![ints.clone(), vec![], ints.clone()];
        prop_assert_eq!(&rt(&nested, &list(list(ColumnType::Native(NativeType::Int)))), &nested);
        let _unused: Option<BTreeSet<i32>> = None;
    }

    #[test]
    fn tuples_and_vectors(a in any::<i32>(), s in "\\PC{0,8}", b in any::<Option<bool>>(),
                          fl in any::<[u32; 3]>(), sm in any::<[i16; 2]>(),
                          texts in prop::collection::vec("\\PC{0,4}", 4)) {
        let tt = ColumnType::Tuple(vec![ColumnType::Native(NativeType::Int), ColumnType::Native(NativeType::Text), ColumnType::Native(NativeType::Boolean)]);
        let t = (a, s.clone(), b);
        prop_assert_eq!(&rt(&t, &tt), &t);
        let floats = fl.map(f32::from_bits);
        let back: [f32; 3] = rt(&floats, &vector(ColumnType::Native(NativeType::Float), 3));
        prop_assert_eq!(back.map(f32::to_bits), fl);
        let back: Vec<f32> = rt(&floats.to_vec(), &vector(ColumnType::Native(NativeType::Float), 3));
        prop_assert_eq!(back.len(), 3);
        // smallint is variable-length in vectors: each element has a vint length.
        let bytes = ser(&sm, &vector(ColumnType::Native(NativeType::SmallInt), 2));
        prop_assert_eq!(bytes.len(), 6);
        prop_assert_eq!(rt(&sm, &vector(ColumnType::Native(NativeType::SmallInt), 2)), sm);
        prop_assert_eq!(&rt(&texts, &vector(ColumnType::Native(NativeType::Text), 4)), &texts);
    }

    #[test]
    fn rows_through_serialized_values(a in any::<i32>(), s in "\\PC{0,8}", n in any::<Option<i64>>(), rows in 0usize..5) {
        let spec = |name: &str, typ| ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ };
        let specs = vec![spec("a", ColumnType::Native(NativeType::Int)), spec("s", ColumnType::Native(NativeType::Text)), spec("n", ColumnType::Native(NativeType::BigInt))];
        let mut values = SerializedValues::new();
        let mut raw = Vec::new();
        for _ in 0..rows {
            values.clear();
            (a, s.as_str(), n).serialize_row(&specs, &mut values).unwrap();
            raw.extend_from_slice(values.as_bytes());
        }
        let typed: Vec<(i32, &str, Option<i64>)> =
            RowIterator::new(&specs, &raw, rows).unwrap().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(typed, vec![(a, s.as_str(), n); rows]);
        let dynamic: Vec<Row> = RowIterator::new(&specs, &raw, rows).unwrap().collect::<Result<_, _>>().unwrap();
        for r in &dynamic {
            prop_assert_eq!(&r.columns[0], &Some(CqlValue::Int(a)));
            prop_assert_eq!(&r.columns[2], &n.map(CqlValue::BigInt));
        }
        // The dynamic rows serialize back to the same bytes.
        let mut again = Vec::new();
        for r in dynamic {
            values.clear();
            r.columns.serialize_row(&specs, &mut values).unwrap();
            again.extend_from_slice(values.as_bytes());
        }
        prop_assert_eq!(again, raw);
    }
}

fn collect_udts(t: &ColumnType, out: &mut Vec<ColumnType>) {
    match t {
        ColumnType::Collection {
            typ: CollectionType::List(e) | CollectionType::Set(e),
            ..
        } => collect_udts(e, out),
        ColumnType::Vector { typ: element, .. } => collect_udts(element, out),
        ColumnType::Collection {
            typ: CollectionType::Map(k, v),
            ..
        } => {
            collect_udts(k, out);
            collect_udts(v, out);
        }
        ColumnType::Tuple(ts) => ts.iter().for_each(|t| collect_udts(t, out)),
        ColumnType::UserDefinedType { definition, .. } => {
            // As a name resolves: not frozen (unless written `frozen<..>`).
            out.push(ColumnType::UserDefinedType {
                frozen: false,
                definition: definition.clone(),
            });
            definition
                .field_types
                .iter()
                .for_each(|(_, t)| collect_udts(t, out));
        }
        _ => {}
    }
}

#[test]
fn known_encodings() {
    assert_eq!(
        ser(
            &CqlVarint::from(-129i64),
            &ColumnType::Native(NativeType::Varint)
        ),
        [0xFF, 0x7F]
    );
    assert_eq!(
        ser(
            &CqlDate::from_unix_days(0),
            &ColumnType::Native(NativeType::Date)
        ),
        [0x80, 0, 0, 0]
    );
    assert_eq!(
        ser(
            &CqlDuration {
                months: 1,
                days: -0,
                nanoseconds: 0
            },
            &ColumnType::Native(NativeType::Duration)
        ),
        [2, 0, 0]
    );
    assert_eq!(
        ser(&vec![1i32, 2], &list(ColumnType::Native(NativeType::Int))),
        [0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 2]
    );
    assert_eq!(
        ser(
            &[1.0f32, 2.0],
            &vector(ColumnType::Native(NativeType::Float), 2)
        ),
        [0x3F, 0x80, 0, 0, 0x40, 0, 0, 0]
    );
    assert_eq!(
        ser(
            &vec!["ab", ""],
            &vector(ColumnType::Native(NativeType::Text), 2)
        ),
        [2, b'a', b'b', 0]
    );
    let tt = ColumnType::Tuple(vec![
        ColumnType::Native(NativeType::Int),
        ColumnType::Native(NativeType::Int),
    ]);
    assert_eq!(
        ser(&(Some(1i32), None::<i32>), &tt),
        [0, 0, 0, 4, 0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF]
    );
    let _ = HashMap::<i32, i32>::new();
}
