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
    ColumnSpec, ColumnType, Counter, CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp,
    CqlValue, CqlVarint, Row, RowIterator, SerializeRow, SerializedValues, Written,
};
use strategies::{any_type, same, typed_value};
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
    ColumnType::List(Box::new(t))
}

fn vector(t: ColumnType, dimension: u32) -> ColumnType {
    ColumnType::Vector {
        element: Box::new(t),
        dimension,
    }
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
    fn class_string_round_trip(typ in any_type()) {
        prop_assert_eq!(parse(&to_class_string(&typ), 0).unwrap(), typ);
    }

    #[test]
    fn cql_syntax_round_trip(typ in any_type()) {
        // UDTs print as `ks.name`; resolve them from the generated type.
        let mut udts = Vec::new();
        collect_udts(&typ, &mut udts);
        let printed = typ.to_string();
        let parsed = ColumnType::from_cql_with(&printed, |n| {
            udts.iter().find(|u| matches!(u, ColumnType::Udt { keyspace, name, .. } if format!("{keyspace}.{name}") == n)).cloned()
        });
        prop_assert_eq!(parsed, Ok(typ), "{}", printed);
    }

    #[test]
    fn scalars(a in any::<i8>(), b in any::<i16>(), c in any::<i32>(), d in any::<i64>(),
               f in any::<u32>(), g in any::<u64>(), h in any::<bool>(), s in "\\PC{0,20}",
               blob in prop::collection::vec(any::<u8>(), 0..20), u in any::<u128>()) {
        prop_assert_eq!(rt(&a, &ColumnType::TinyInt), a);
        prop_assert_eq!(rt(&b, &ColumnType::SmallInt), b);
        prop_assert_eq!(rt(&c, &ColumnType::Int), c);
        prop_assert_eq!(rt(&d, &ColumnType::BigInt), d);
        prop_assert_eq!(rt(&d, &ColumnType::Counter), d);
        prop_assert_eq!(rt(&f32::from_bits(f), &ColumnType::Float).to_bits(), f);
        prop_assert_eq!(rt(&f64::from_bits(g), &ColumnType::Double).to_bits(), g);
        prop_assert_eq!(rt(&h, &ColumnType::Boolean), h);
        prop_assert_eq!(&rt(&s, &ColumnType::Text), &s);
        let bytes = ser(s.as_str(), &ColumnType::Text);
        prop_assert_eq!(<&str>::deserialize(&ColumnType::Text, Some(&bytes)).unwrap(), s.as_str());
        prop_assert_eq!(&rt(&blob, &ColumnType::Blob), &blob);
        prop_assert_eq!(<&[u8]>::deserialize(&ColumnType::Blob, Some(&blob)).unwrap(), blob.as_slice());
        let uuid = Uuid::from_u128(u);
        prop_assert_eq!(rt(&uuid, &ColumnType::Uuid), uuid);
        prop_assert_eq!(rt(&uuid, &ColumnType::Timeuuid), uuid);
        // A timeuuid is for timeuuid columns only, and reads back unchanged.
        let timeuuid = scylla_driver_cql::types::CqlTimeuuid::from(uuid);
        prop_assert_eq!(rt(&timeuuid, &ColumnType::Timeuuid), timeuuid);
        prop_assert_eq!(ser(&uuid, &ColumnType::Uuid), ser(&timeuuid, &ColumnType::Timeuuid));
        prop_assert!(scylla_driver_cql::types::serialize::serialize_bytes(&timeuuid, &ColumnType::Uuid, &mut Vec::new()).is_err());
        prop_assert_eq!(rt(&Some(c), &ColumnType::Int), Some(c));
        prop_assert_eq!(rt(&Counter(d), &ColumnType::Counter), Counter(d));
        let ip = IpAddr::from(u.to_be_bytes());
        prop_assert_eq!(rt(&ip, &ColumnType::Inet), ip);
        let ip4 = IpAddr::from((u as u32).to_be_bytes());
        prop_assert_eq!(rt(&ip4, &ColumnType::Inet), ip4);
    }

    #[test]
    fn project_types(date in any::<u32>(), time in 0..CqlTime::NANOS_PER_DAY, ts in any::<i64>(),
                     m in 0..=i32::MAX, days in 0..=i32::MAX, n in 0..=i64::MAX,
                     unscaled in any::<i128>(), scale in any::<i32>()) {
        prop_assert_eq!(rt(&CqlDate(date), &ColumnType::Date), CqlDate(date));
        prop_assert_eq!(rt(&CqlTime(time), &ColumnType::Time), CqlTime(time));
        prop_assert_eq!(rt(&CqlTimestamp(ts), &ColumnType::Timestamp), CqlTimestamp(ts));
        let d = CqlDuration { months: -m, days: -days, nanoseconds: -n };
        prop_assert_eq!(rt(&d, &ColumnType::Duration), d);
        let dec = CqlDecimal { unscaled: CqlVarint::from(unscaled), scale };
        prop_assert_eq!(&rt(&dec, &ColumnType::Decimal), &dec);
        let v = CqlVarint::from(unscaled);
        prop_assert_eq!(&rt(&v, &ColumnType::Varint), &v);
    }

    #[test]
    fn collections(ints in prop::collection::vec(any::<i32>(), 0..8),
                   strs in prop::collection::btree_set("[a-z]{0,5}", 0..6),
                   map in prop::collection::hash_map("[a-z]{0,5}", any::<i64>(), 0..6)) {
        prop_assert_eq!(&rt(&ints, &list(ColumnType::Int)), &ints);
        let set_t = ColumnType::Set(Box::new(ColumnType::Text));
        prop_assert_eq!(&rt(&strs, &set_t), &strs);
        let hs: HashSet<String> = strs.iter().cloned().collect();
        prop_assert_eq!(&rt(&hs, &set_t), &hs);
        let map_t = ColumnType::Map(Box::new(ColumnType::Ascii), Box::new(ColumnType::BigInt));
        prop_assert_eq!(&rt(&map, &map_t), &map);
        let bmap: BTreeMap<String, i64> = map.clone().into_iter().collect();
        prop_assert_eq!(&rt(&bmap, &map_t), &bmap);
        let nested: Vec<Vec<i32>> = vec![ints.clone(), vec![], ints.clone()];
        prop_assert_eq!(&rt(&nested, &list(list(ColumnType::Int))), &nested);
        let _unused: Option<BTreeSet<i32>> = None;
    }

    #[test]
    fn tuples_and_vectors(a in any::<i32>(), s in "\\PC{0,8}", b in any::<Option<bool>>(),
                          fl in any::<[u32; 3]>(), sm in any::<[i16; 2]>(),
                          texts in prop::collection::vec("\\PC{0,4}", 4)) {
        let tt = ColumnType::Tuple(vec![ColumnType::Int, ColumnType::Text, ColumnType::Boolean]);
        let t = (a, s.clone(), b);
        prop_assert_eq!(&rt(&t, &tt), &t);
        let floats = fl.map(f32::from_bits);
        let back: [f32; 3] = rt(&floats, &vector(ColumnType::Float, 3));
        prop_assert_eq!(back.map(f32::to_bits), fl);
        let back: Vec<f32> = rt(&floats.to_vec(), &vector(ColumnType::Float, 3));
        prop_assert_eq!(back.len(), 3);
        // smallint is variable-length in vectors: each element has a vint length.
        let bytes = ser(&sm, &vector(ColumnType::SmallInt, 2));
        prop_assert_eq!(bytes.len(), 6);
        prop_assert_eq!(rt(&sm, &vector(ColumnType::SmallInt, 2)), sm);
        prop_assert_eq!(&rt(&texts, &vector(ColumnType::Text, 4)), &texts);
    }

    #[test]
    fn rows_through_serialized_values(a in any::<i32>(), s in "\\PC{0,8}", n in any::<Option<i64>>(), rows in 0usize..5) {
        let spec = |name: &str, typ| ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: name.into(), typ };
        let specs = vec![spec("a", ColumnType::Int), spec("s", ColumnType::Text), spec("n", ColumnType::BigInt)];
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
        ColumnType::List(e) | ColumnType::Set(e) => collect_udts(e, out),
        ColumnType::Vector { element, .. } => collect_udts(element, out),
        ColumnType::Map(k, v) => {
            collect_udts(k, out);
            collect_udts(v, out);
        }
        ColumnType::Tuple(ts) => ts.iter().for_each(|t| collect_udts(t, out)),
        ColumnType::Udt { fields, .. } => {
            out.push(t.clone());
            fields.iter().for_each(|(_, t)| collect_udts(t, out));
        }
        _ => {}
    }
}

#[test]
fn known_encodings() {
    assert_eq!(
        ser(&CqlVarint::from(-129i64), &ColumnType::Varint),
        [0xFF, 0x7F]
    );
    assert_eq!(
        ser(&CqlDate::from_unix_days(0), &ColumnType::Date),
        [0x80, 0, 0, 0]
    );
    assert_eq!(
        ser(
            &CqlDuration {
                months: 1,
                days: -0,
                nanoseconds: 0
            },
            &ColumnType::Duration
        ),
        [2, 0, 0]
    );
    assert_eq!(
        ser(&vec![1i32, 2], &list(ColumnType::Int)),
        [0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 2]
    );
    assert_eq!(
        ser(&[1.0f32, 2.0], &vector(ColumnType::Float, 2)),
        [0x3F, 0x80, 0, 0, 0x40, 0, 0, 0]
    );
    assert_eq!(
        ser(&vec!["ab", ""], &vector(ColumnType::Text, 2)),
        [2, b'a', b'b', 0]
    );
    let tt = ColumnType::Tuple(vec![ColumnType::Int, ColumnType::Int]);
    assert_eq!(
        ser(&(Some(1i32), None::<i32>), &tt),
        [0, 0, 0, 4, 0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF]
    );
    let _ = HashMap::<i32, i32>::new();
}
