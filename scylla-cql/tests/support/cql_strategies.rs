//! Proptest strategies shared by the type tests: random column types (small
//! depth; as result metadata carries them, never frozen, or as CQL text
//! carries them, with `frozen` flags) and random `CqlValue`s of a given type, plus a comparison that
//! treats floats bitwise (so NaN payloads and -0.0 must survive a round trip).

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use proptest::prelude::*;
use scylla_driver_cql::types::serialize::vector::element_fixed_len;
use scylla_driver_cql::types::{
    CollectionType, ColumnType, Counter, CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp,
    CqlValue, CqlVarint, NativeType, UserDefinedType,
};
use uuid::Uuid;

/// Types without parameters (no custom types).
pub(crate) fn leaf_type() -> impl Strategy<Value = ColumnType> {
    use NativeType::*;
    let native = prop_oneof![
        Just(Ascii),
        Just(BigInt),
        Just(Blob),
        Just(Boolean),
        Just(Counter),
        Just(Decimal),
        Just(Double),
        Just(Float),
        Just(Int),
        Just(Text),
        Just(Timestamp),
        Just(Uuid),
        Just(Varint),
        Just(Timeuuid),
        Just(Inet),
        Just(Date),
        Just(Time),
        Just(SmallInt),
        Just(TinyInt),
        Just(Duration),
    ];
    native.prop_map(ColumnType::Native)
}

/// Any type, nested up to a small depth.
pub(crate) fn any_type() -> BoxedStrategy<ColumnType> {
    leaf_type()
        .prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                inner.clone().prop_map(ColumnType::list),
                inner.clone().prop_map(ColumnType::set),
                (inner.clone(), inner.clone()).prop_map(|(k, v)| ColumnType::map(k, v)),
                prop::collection::vec(inner.clone(), 1..4).prop_map(ColumnType::Tuple),
                (
                    "[a-z]{1,6}",
                    "[a-z_]{1,6}",
                    prop::collection::vec(inner.clone(), 1..4)
                )
                    .prop_map(|(keyspace, name, types)| ColumnType::udt(
                        keyspace,
                        name,
                        types
                            .into_iter()
                            .enumerate()
                            .map(|(i, t)| (format!("f{i}"), t))
                            .collect(),
                    )),
                (inner, 1..5u16).prop_map(|(e, dimensions)| ColumnType::vector(e, dimensions)),
            ]
        })
        .boxed()
}

/// Any type as CQL text (and a class string) says it: the collections and
/// UDTs nested in another type frozen, as CQL requires, and the type itself
/// frozen or not.
pub(crate) fn any_text_type() -> BoxedStrategy<ColumnType> {
    (any_type(), any::<bool>())
        .prop_map(|(t, frozen)| {
            let t = freeze_nested(t);
            if frozen {
                t.into_frozen()
            } else {
                t
            }
        })
        .boxed()
}

/// `t` with every collection and UDT nested in it frozen (`t` itself keeps
/// its flag).
pub(crate) fn freeze_nested(t: ColumnType) -> ColumnType {
    let inner = |t: Box<ColumnType>| Box::new(freeze_nested(*t).into_frozen());
    match t {
        ColumnType::Collection { frozen, typ } => ColumnType::Collection {
            frozen,
            typ: match typ {
                CollectionType::List(e) => CollectionType::List(inner(e)),
                CollectionType::Set(e) => CollectionType::Set(inner(e)),
                CollectionType::Map(k, v) => CollectionType::Map(inner(k), inner(v)),
                other => other,
            },
        },
        ColumnType::UserDefinedType { frozen, definition } => {
            let mut udt = UserDefinedType::clone(&definition);
            for (_, ft) in &mut udt.field_types {
                *ft = freeze_nested(ft.clone()).into_frozen();
            }
            ColumnType::UserDefinedType {
                frozen,
                definition: Arc::new(udt),
            }
        }
        ColumnType::Tuple(es) => ColumnType::Tuple(
            es.into_iter()
                .map(|e| freeze_nested(e).into_frozen())
                .collect(),
        ),
        ColumnType::Vector { typ, dimensions } => ColumnType::Vector {
            typ: inner(typ),
            dimensions,
        },
        other => other,
    }
}

fn duration() -> impl Strategy<Value = CqlDuration> {
    (0..=i32::MAX, 0..=i32::MAX, 0..=i64::MAX, any::<bool>()).prop_map(|(m, d, n, neg)| {
        if neg {
            CqlDuration {
                months: -m,
                days: -d,
                nanoseconds: -n,
            }
        } else {
            CqlDuration {
                months: m,
                days: d,
                nanoseconds: n,
            }
        }
    })
}

fn varint() -> impl Strategy<Value = CqlVarint> {
    prop::collection::vec(any::<u8>(), 1..20)
        .prop_map(|b| CqlVarint::from_signed_bytes_be_slice(&b))
}

fn inet() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|a| IpAddr::V4(Ipv4Addr::from(a))),
        any::<[u8; 16]>().prop_map(|a| IpAddr::V6(Ipv6Addr::from(a))),
    ]
}

/// Types for which a zero-length value means "empty" (not "" or no bytes).
fn has_empty(t: &ColumnType) -> bool {
    !matches!(
        t,
        ColumnType::Native(NativeType::Text)
            | ColumnType::Native(NativeType::Ascii)
            | ColumnType::Native(NativeType::Blob)
            | ColumnType::Custom(_)
    )
}

/// A value of type `t`; `allow_empty` lets it be `CqlValue::Empty` sometimes.
pub(crate) fn value_for(t: &ColumnType, allow_empty: bool) -> BoxedStrategy<CqlValue> {
    let v = regular_value(t);
    if allow_empty && has_empty(t) {
        prop_oneof![9 => v, 1 => Just(CqlValue::Empty)].boxed()
    } else {
        v
    }
}

fn regular_value(t: &ColumnType) -> BoxedStrategy<CqlValue> {
    use CqlValue as V;
    match t {
        ColumnType::Native(NativeType::Ascii) => "[ -~]{0,10}".prop_map(V::Ascii).boxed(),
        ColumnType::Native(NativeType::Text) => "\\PC{0,10}".prop_map(V::Text).boxed(),
        ColumnType::Native(NativeType::Blob) | ColumnType::Custom(_) => {
            prop::collection::vec(any::<u8>(), 0..10)
                .prop_map(V::Blob)
                .boxed()
        }
        ColumnType::Native(NativeType::BigInt) => any::<i64>().prop_map(V::BigInt).boxed(),
        ColumnType::Native(NativeType::Boolean) => any::<bool>().prop_map(V::Boolean).boxed(),
        ColumnType::Native(NativeType::Counter) => {
            any::<i64>().prop_map(|c| V::Counter(Counter(c))).boxed()
        }
        ColumnType::Native(NativeType::Decimal) => (varint(), any::<i32>())
            .prop_map(|(unscaled, scale)| V::Decimal(CqlDecimal { unscaled, scale }))
            .boxed(),
        ColumnType::Native(NativeType::Double) => any::<u64>()
            .prop_map(|b| V::Double(f64::from_bits(b)))
            .boxed(),
        ColumnType::Native(NativeType::Float) => any::<u32>()
            .prop_map(|b| V::Float(f32::from_bits(b)))
            .boxed(),
        ColumnType::Native(NativeType::Int) => any::<i32>().prop_map(V::Int).boxed(),
        ColumnType::Native(NativeType::Timestamp) => any::<i64>()
            .prop_map(|t| V::Timestamp(CqlTimestamp(t)))
            .boxed(),
        ColumnType::Native(NativeType::Uuid) => any::<u128>()
            .prop_map(|u| V::Uuid(Uuid::from_u128(u)))
            .boxed(),
        ColumnType::Native(NativeType::Timeuuid) => any::<u128>()
            .prop_map(|u| V::Timeuuid(Uuid::from_u128(u).into()))
            .boxed(),
        ColumnType::Native(NativeType::Varint) => varint().prop_map(V::Varint).boxed(),
        ColumnType::Native(NativeType::Inet) => inet().prop_map(V::Inet).boxed(),
        ColumnType::Native(NativeType::Date) => {
            any::<u32>().prop_map(|d| V::Date(CqlDate(d))).boxed()
        }
        ColumnType::Native(NativeType::Time) => (0..CqlTime::NANOS_PER_DAY)
            .prop_map(|t| V::Time(CqlTime(t)))
            .boxed(),
        ColumnType::Native(NativeType::SmallInt) => any::<i16>().prop_map(V::SmallInt).boxed(),
        ColumnType::Native(NativeType::TinyInt) => any::<i8>().prop_map(V::TinyInt).boxed(),
        ColumnType::Native(NativeType::Duration) => duration().prop_map(V::Duration).boxed(),
        ColumnType::Collection {
            typ: CollectionType::List(e),
            ..
        } => prop::collection::vec(value_for(e, true), 0..4)
            .prop_map(V::List)
            .boxed(),
        ColumnType::Collection {
            typ: CollectionType::Set(e),
            ..
        } => prop::collection::vec(value_for(e, true), 0..4)
            .prop_map(V::Set)
            .boxed(),
        ColumnType::Collection {
            typ: CollectionType::Map(k, v),
            ..
        } => prop::collection::vec((value_for(k, true), value_for(v, true)), 0..4)
            .prop_map(V::Map)
            .boxed(),
        ColumnType::Tuple(types) => types
            .iter()
            .map(|t| prop::option::of(value_for(t, true)))
            .collect::<Vec<_>>()
            .prop_map(V::Tuple)
            .boxed(),
        ColumnType::UserDefinedType { definition, .. } => {
            let (keyspace, name) = (definition.keyspace.clone(), definition.name.clone());
            definition
                .field_types
                .iter()
                .map(|(n, t)| (Just(n.clone()), prop::option::of(value_for(t, true))))
                .collect::<Vec<_>>()
                .prop_map(move |fields| V::UserDefinedType {
                    keyspace: keyspace.clone(),
                    name: name.clone(),
                    fields,
                })
                .boxed()
        }
        ColumnType::Vector {
            typ: element,
            dimensions: dimension,
        } => {
            // An empty element of a fixed-length type cannot be encoded.
            let empty_ok = element_fixed_len(element).is_none();
            prop::collection::vec(value_for(element, empty_ok), *dimension as usize)
                .prop_map(V::Vector)
                .boxed()
        }
        other => panic!("no strategy for {other:?}"),
    }
}

/// A type and a value of that type (possibly empty at the top).
pub(crate) fn typed_value() -> impl Strategy<Value = (ColumnType, CqlValue)> {
    any_type().prop_flat_map(|t| {
        let v = value_for(&t, true);
        (Just(t), v)
    })
}

/// Structural equality with floats compared bitwise.
pub(crate) fn same(a: &CqlValue, b: &CqlValue) -> bool {
    use CqlValue as V;
    let all = |a: &[CqlValue], b: &[CqlValue]| {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
    };
    let opt = |a: &Option<CqlValue>, b: &Option<CqlValue>| match (a, b) {
        (Some(x), Some(y)) => same(x, y),
        (None, None) => true,
        _ => false,
    };
    match (a, b) {
        (V::Float(x), V::Float(y)) => x.to_bits() == y.to_bits(),
        (V::Double(x), V::Double(y)) => x.to_bits() == y.to_bits(),
        (V::List(x), V::List(y)) | (V::Set(x), V::Set(y)) | (V::Vector(x), V::Vector(y)) => {
            all(x, y)
        }
        (V::Map(x), V::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((k1, v1), (k2, v2))| same(k1, k2) && same(v1, v2))
        }
        (V::Tuple(x), V::Tuple(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| opt(p, q)),
        (
            V::UserDefinedType {
                keyspace: k1,
                name: n1,
                fields: f1,
            },
            V::UserDefinedType {
                keyspace: k2,
                name: n2,
                fields: f2,
            },
        ) => {
            k1 == k2
                && n1 == n2
                && f1.len() == f2.len()
                && f1
                    .iter()
                    .zip(f2)
                    .all(|((a, x), (b, y))| a == b && opt(x, y))
        }
        _ => a == b,
    }
}
