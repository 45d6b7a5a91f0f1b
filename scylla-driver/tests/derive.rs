//! The derive macros (`scylla-driver-macros`), through their `scylla_driver`
//! re-exports: round trips through the scylla-cql serializers and
//! deserializers with hand-built column specs, and the errors that name the
//! offending column, bind marker or UDT field.

use proptest::prelude::*;
use scylla_cql::frame::wire::RawValue;
use scylla_cql::types::{
    ColumnSpec, ColumnType, DeserializationErrorKind, NativeType, RowIterator,
    SerializationErrorKind, SerializedValues, TypeCheckErrorKind,
};
use scylla_driver::{DeserializeRow, DeserializeValue, SerializeRow, SerializeValue};

fn spec(name: &str, typ: ColumnType) -> ColumnSpec {
    ColumnSpec {
        keyspace: "ks".into(),
        table: "t".into(),
        name: name.into(),
        typ,
    }
}

/// The bound values as the cells of one row (`[bytes]` each).
fn row_bytes(values: &SerializedValues) -> Vec<u8> {
    let mut out = Vec::new();
    for (_, v) in values.iter() {
        match v {
            RawValue::Value(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
            RawValue::Null => out.extend_from_slice(&(-1i32).to_be_bytes()),
            RawValue::Unset => out.extend_from_slice(&(-2i32).to_be_bytes()),
        }
    }
    out
}

fn serialize<R: SerializeRow>(row: &R, specs: &[ColumnSpec]) -> SerializedValues {
    let mut out = SerializedValues::default();
    row.serialize_row(specs, &mut out).expect("serializes");
    out
}

#[derive(Debug, PartialEq, SerializeRow, DeserializeRow)]
struct Person {
    id: i32,
    #[scylla(rename = "full_name")]
    name: String,
    age: Option<i32>,
    #[scylla(skip)]
    cached: u64,
}

fn person_specs() -> Vec<ColumnSpec> {
    // Not the field order: matching is by name.
    vec![
        spec("age", ColumnType::Native(NativeType::Int)),
        spec("id", ColumnType::Native(NativeType::Int)),
        spec("full_name", ColumnType::Native(NativeType::Text)),
    ]
}

#[test]
fn row_round_trip_by_name_in_any_order() {
    let specs = person_specs();
    let p = Person {
        id: 7,
        name: "Ada".into(),
        age: None,
        cached: 99,
    };
    let values = serialize(&p, &specs);
    assert_eq!(values.len(), 3);
    let bytes = row_bytes(&values);
    let rows: Vec<Person> = RowIterator::new(&specs, &bytes, 1)
        .expect("type checks")
        .collect::<Result<_, _>>()
        .expect("deserializes");
    // The skipped field comes back as its Default.
    assert_eq!(rows, vec![Person { cached: 0, ..p }]);
}

#[test]
fn row_missing_and_extra_columns_are_type_errors_naming_the_column() {
    let specs = vec![
        spec("id", ColumnType::Native(NativeType::Int)),
        spec("age", ColumnType::Native(NativeType::Int)),
    ];
    let e = <Person as scylla_driver::DeserializeRow>::type_check(&specs).unwrap_err();
    assert_eq!(
        e.kind(),
        &TypeCheckErrorKind::MissingColumn("full_name".into())
    );
    let mut specs = person_specs();
    specs.push(spec("email", ColumnType::Native(NativeType::Text)));
    let e = <Person as scylla_driver::DeserializeRow>::type_check(&specs).unwrap_err();
    assert_eq!(
        e.kind(),
        &TypeCheckErrorKind::UnexpectedColumn("email".into())
    );
    // A wrong type is caught at the type check too, naming the column.
    let specs = vec![
        spec("age", ColumnType::Native(NativeType::Int)),
        spec("id", ColumnType::Native(NativeType::Text)),
        spec("full_name", ColumnType::Native(NativeType::Text)),
    ];
    let e = <Person as scylla_driver::DeserializeRow>::type_check(&specs).unwrap_err();
    assert!(e.to_string().contains("id"), "{e}");
}

#[test]
fn serialize_row_errors_name_the_marker() {
    let p = Person {
        id: 1,
        name: "x".into(),
        age: Some(2),
        cached: 0,
    };
    let mut specs = person_specs();
    specs.push(spec("email", ColumnType::Native(NativeType::Text)));
    let mut out = SerializedValues::default();
    let e = p.serialize_row(&specs, &mut out).unwrap_err();
    assert_eq!(
        e.kind(),
        &SerializationErrorKind::MissingValueForMarker("email".into())
    );
    let specs = vec![
        spec("id", ColumnType::Native(NativeType::Int)),
        spec("age", ColumnType::Native(NativeType::Int)),
    ];
    let e = p
        .serialize_row(&specs, &mut SerializedValues::default())
        .unwrap_err();
    assert_eq!(
        e.kind(),
        &SerializationErrorKind::NoMarkerForValue("full_name".into())
    );
}

/// Borrows from the frame; columns in field order.
#[derive(Debug, PartialEq, DeserializeRow, SerializeRow)]
#[scylla(flavor = "enforce_order")]
struct Borrowed<'a> {
    key: &'a str,
    blob: &'a [u8],
    n: i64,
}

#[test]
fn enforce_order_borrowing_round_trip_and_order_check() {
    let specs = vec![
        spec("key", ColumnType::Native(NativeType::Text)),
        spec("blob", ColumnType::Native(NativeType::Blob)),
        spec("n", ColumnType::Native(NativeType::BigInt)),
    ];
    let v = Borrowed {
        key: "k",
        blob: &[1, 2, 3],
        n: -5,
    };
    let bytes = row_bytes(&serialize(&v, &specs));
    let mut it = RowIterator::<Borrowed<'_>>::new(&specs, &bytes, 1).expect("type checks");
    let got = it.next().expect("one row").expect("deserializes");
    assert_eq!(got, v);
    // The key borrows the row bytes: no copy.
    assert!(bytes.as_ptr_range().contains(&got.key.as_ptr()));

    let swapped = vec![
        spec("blob", ColumnType::Native(NativeType::Blob)),
        spec("key", ColumnType::Native(NativeType::Text)),
        spec("n", ColumnType::Native(NativeType::BigInt)),
    ];
    let e = <Borrowed<'_> as scylla_driver::DeserializeRow>::type_check(&swapped).unwrap_err();
    assert_eq!(
        e.kind(),
        &TypeCheckErrorKind::UnexpectedColumn("blob".into())
    );
    let e = v
        .serialize_row(&swapped, &mut SerializedValues::default())
        .unwrap_err();
    assert_eq!(
        e.kind(),
        &SerializationErrorKind::NoMarkerForValue("key".into())
    );
}

#[derive(Debug, Clone, PartialEq, SerializeValue, DeserializeValue)]
struct Address {
    street: String,
    #[scylla(rename = "no")]
    number: Option<i32>,
    #[scylla(skip)]
    note: String,
}

fn address_type(extra: bool) -> ColumnType {
    let mut fields = vec![
        ("no".to_owned(), ColumnType::Native(NativeType::Int)),
        ("street".to_owned(), ColumnType::Native(NativeType::Text)),
    ];
    if extra {
        fields.push(("zip".to_owned(), ColumnType::Native(NativeType::Text)));
    }
    ColumnType::udt("ks", "address", fields)
}

fn udt_round_trip(a: &Address, typ: &ColumnType) -> Address {
    let mut buf = Vec::new();
    scylla_driver::serialize::serialize_bytes(&a, typ, &mut buf).expect("serializes");
    <Address as scylla_driver::DeserializeValue>::type_check(typ).expect("type checks");
    <Address as scylla_driver::DeserializeValue>::deserialize(typ, Some(&buf))
        .expect("deserializes")
}

#[test]
fn frozen_or_not_the_type_checks_agree() {
    // Metadata from the wire never says frozen; a type from the schema may.
    let a = Address {
        street: "Main".into(),
        number: Some(12),
        note: String::new(),
    };
    for typ in [address_type(false), address_type(false).into_frozen()] {
        let back = udt_round_trip(&a, &typ);
        assert_eq!((back.street.as_str(), back.number), ("Main", Some(12)));
    }
    let ints = ColumnType::list(ColumnType::Native(NativeType::Int));
    for typ in [ints.clone(), ints.into_frozen()] {
        let mut buf = Vec::new();
        scylla_driver::serialize::serialize_bytes(&vec![1i32, 2], &typ, &mut buf)
            .expect("serializes");
        <Vec<i32> as scylla_driver::DeserializeValue>::type_check(&typ).expect("type checks");
    }
}

#[test]
fn udt_round_trip_in_type_order_with_extra_type_fields_null() {
    let a = Address {
        street: "Main".into(),
        number: Some(12),
        note: "not stored".into(),
    };
    let typ = address_type(true);
    let mut buf = Vec::new();
    scylla_driver::serialize::serialize_bytes(&a, &typ, &mut buf).expect("serializes");
    // Type order: no, street, then the field the struct lacks as null.
    let mut want = Vec::new();
    want.extend_from_slice(&4i32.to_be_bytes());
    want.extend_from_slice(&12i32.to_be_bytes());
    want.extend_from_slice(&4i32.to_be_bytes());
    want.extend_from_slice(b"Main");
    want.extend_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(buf, want);
    assert_eq!(
        udt_round_trip(&a, &typ),
        Address {
            note: String::new(),
            ..a
        }
    );
}

#[test]
fn udt_type_check_names_the_missing_field() {
    let typ = ColumnType::udt(
        "ks",
        "address",
        vec![("street".to_owned(), ColumnType::Native(NativeType::Text))],
    );
    let e = <Address as scylla_driver::DeserializeValue>::type_check(&typ).unwrap_err();
    assert_eq!(e.kind(), &TypeCheckErrorKind::MissingColumn("no".into()));
    let e = <Address as scylla_driver::DeserializeValue>::type_check(&ColumnType::Native(
        NativeType::Text,
    ))
    .unwrap_err();
    assert_eq!(e.kind(), &TypeCheckErrorKind::Mismatch);
    // Serializing a struct field the type lacks is refused.
    let a = Address {
        street: "s".into(),
        number: None,
        note: String::new(),
    };
    let e = a
        .serialize(
            &typ,
            scylla_driver::serialize::writers::CellWriter::new(&mut Vec::new()),
        )
        .unwrap_err();
    assert_eq!(
        e.kind(),
        &SerializationErrorKind::UnknownUdtField("no".into())
    );
}

#[test]
fn udt_value_shorter_than_its_type_reads_nulls() {
    // Written before `no` was added at the end of the type.
    let typ = ColumnType::udt(
        "ks",
        "address",
        vec![
            ("street".to_owned(), ColumnType::Native(NativeType::Text)),
            ("no".to_owned(), ColumnType::Native(NativeType::Int)),
        ],
    );
    let mut buf = 3i32.to_be_bytes().to_vec();
    buf.extend_from_slice(b"Elm");
    let a = <Address as scylla_driver::DeserializeValue>::deserialize(&typ, Some(&buf))
        .expect("deserializes");
    assert_eq!((a.street.as_str(), a.number), ("Elm", None));
    // A null UDT is an error for a plain struct, fine for an Option.
    let e = <Address as scylla_driver::DeserializeValue>::deserialize(&typ, None).unwrap_err();
    assert_eq!(e.kind(), &DeserializationErrorKind::UnexpectedNull);
}

/// A row holding a UDT: the derives compose.
#[derive(Debug, PartialEq, SerializeRow, DeserializeRow)]
struct Home {
    id: i32,
    address: Option<Address>,
}

proptest! {
    #[test]
    fn derived_row_with_udt_round_trips(
        id in any::<i32>(),
        name in ".{0,20}",
        age in proptest::option::of(any::<i32>()),
        street in ".{0,20}",
        number in proptest::option::of(any::<i32>()),
        has_address in any::<bool>(),
    ) {
        let specs = person_specs();
        let p = Person { id, name, age, cached: 0 };
        let bytes = row_bytes(&serialize(&p, &specs));
        let got: Vec<Person> = RowIterator::new(&specs, &bytes, 1).unwrap().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(got, vec![p]);

        let specs = vec![spec("address", address_type(false)), spec("id", ColumnType::Native(NativeType::Int))];
        let h = Home {
            id,
            address: has_address.then(|| Address { street, number, note: String::new() }),
        };
        let bytes = row_bytes(&serialize(&h, &specs));
        let got: Vec<Home> = RowIterator::new(&specs, &bytes, 1).unwrap().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(got, vec![h]);
    }
}

/// `default_when_null` on rows: a null cell reads as the field type's
/// default, by name and in order.
#[derive(Debug, PartialEq, DeserializeRow)]
struct Counted {
    id: i32,
    #[scylla(default_when_null)]
    hits: i64,
}

#[derive(Debug, PartialEq, DeserializeRow)]
#[scylla(flavor = "enforce_order")]
struct CountedInOrder {
    id: i32,
    #[scylla(default_when_null)]
    tags: Vec<String>,
}

#[test]
fn default_when_null_reads_a_null_cell_as_the_default() {
    let cells = |id: i32, v: Option<&[u8]>| {
        let mut out = 4i32.to_be_bytes().to_vec();
        out.extend_from_slice(&id.to_be_bytes());
        match v {
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
        out
    };
    let specs = vec![
        spec("id", ColumnType::Native(NativeType::Int)),
        spec("hits", ColumnType::Native(NativeType::BigInt)),
    ];
    let rows = [cells(1, None), cells(2, Some(&7i64.to_be_bytes()))].concat();
    let got: Vec<Counted> = RowIterator::<Counted>::new(&specs, &rows, 2)
        .expect("type checks")
        .collect::<Result<_, _>>()
        .expect("deserializes");
    assert_eq!(
        got,
        [Counted { id: 1, hits: 0 }, Counted { id: 2, hits: 7 }]
    );

    let specs = vec![
        spec("id", ColumnType::Native(NativeType::Int)),
        spec(
            "tags",
            ColumnType::list(ColumnType::Native(NativeType::Text)),
        ),
    ];
    let rows = cells(3, None);
    let got: Vec<CountedInOrder> = RowIterator::<CountedInOrder>::new(&specs, &rows, 1)
        .expect("type checks")
        .collect::<Result<_, _>>()
        .expect("deserializes");
    assert_eq!(
        got,
        [CountedInOrder {
            id: 3,
            tags: vec![]
        }]
    );
    // Without the attribute a null is still an error.
    #[derive(Debug, DeserializeRow)]
    #[allow(dead_code)]
    struct Strict {
        id: i32,
        hits: i64,
    }
    let specs = vec![
        spec("id", ColumnType::Native(NativeType::Int)),
        spec("hits", ColumnType::Native(NativeType::BigInt)),
    ];
    let rows = cells(1, None);
    let e = RowIterator::<Strict>::new(&specs, &rows, 1)
        .expect("type checks")
        .next()
        .expect("one row")
        .unwrap_err();
    assert_eq!(e.kind(), &DeserializationErrorKind::UnexpectedNull);
}

/// `skip_name_checks` with `enforce_order`: fields go by position whatever
/// the columns' and markers' names; types are still checked.
#[derive(Debug, PartialEq, SerializeRow, DeserializeRow)]
#[scylla(flavor = "enforce_order", skip_name_checks)]
struct Positional {
    first: i32,
    second: String,
}

#[test]
fn skip_name_checks_matches_by_position_only() {
    let specs = vec![
        spec("a", ColumnType::Native(NativeType::Int)),
        spec("b", ColumnType::Native(NativeType::Text)),
    ];
    let v = Positional {
        first: 9,
        second: "x".into(),
    };
    let bytes = row_bytes(&serialize(&v, &specs));
    let got = RowIterator::<Positional>::new(&specs, &bytes, 1)
        .expect("type checks")
        .next()
        .expect("one row")
        .expect("deserializes");
    assert_eq!(got, v);
    let wrong_types = vec![
        spec("a", ColumnType::Native(NativeType::Text)),
        spec("b", ColumnType::Native(NativeType::Text)),
    ];
    assert!(<Positional as scylla_driver::DeserializeRow>::type_check(&wrong_types).is_err());
    let e = <Positional as scylla_driver::DeserializeRow>::type_check(&specs[..1]).unwrap_err();
    assert!(
        matches!(e.kind(), TypeCheckErrorKind::WrongArity { .. }),
        "{e}"
    );
}

/// UDT attributes: `allow_missing` (a field the type lacks), a null field
/// with `default_when_null`, and `forbid_excess_udt_fields`.
#[derive(Debug, Clone, PartialEq, SerializeValue, DeserializeValue)]
struct Contact {
    email: String,
    #[scylla(allow_missing)]
    phone: Option<String>,
    #[scylla(default_when_null)]
    visits: i32,
}

#[derive(Debug, Clone, PartialEq, SerializeValue, DeserializeValue)]
#[scylla(forbid_excess_udt_fields)]
struct StrictContact {
    email: String,
    visits: i32,
}

fn contact_type(fields: &[(&str, ColumnType)]) -> ColumnType {
    ColumnType::udt(
        "ks",
        "contact",
        fields
            .iter()
            .map(|(n, t)| ((*n).to_owned(), t.clone()))
            .collect(),
    )
}

#[test]
fn udt_allow_missing_default_when_null_and_forbid_excess() {
    // The type without `phone`: no error either way; it reads as None and
    // is not written.
    let old = contact_type(&[
        ("email", ColumnType::Native(NativeType::Text)),
        ("visits", ColumnType::Native(NativeType::Int)),
    ]);
    let c = Contact {
        email: "a@b".into(),
        phone: Some("123".into()),
        visits: 4,
    };
    let mut buf = Vec::new();
    scylla_driver::serialize::serialize_bytes(&c, &old, &mut buf).expect("serializes");
    <Contact as scylla_driver::DeserializeValue>::type_check(&old).expect("type checks");
    let got = <Contact as scylla_driver::DeserializeValue>::deserialize(&old, Some(&buf))
        .expect("deserializes");
    assert_eq!(
        got,
        Contact {
            phone: None,
            ..c.clone()
        }
    );
    // A null `visits`, and a value written before `visits` existed: 0.
    let new = contact_type(&[
        ("email", ColumnType::Native(NativeType::Text)),
        ("phone", ColumnType::Native(NativeType::Text)),
        ("visits", ColumnType::Native(NativeType::Int)),
    ]);
    let mut short = 3i32.to_be_bytes().to_vec();
    short.extend_from_slice(b"x@y");
    let got = <Contact as scylla_driver::DeserializeValue>::deserialize(&new, Some(&short))
        .expect("deserializes");
    assert_eq!((got.phone, got.visits), (None, 0));
    let mut nulls = short.clone();
    nulls.extend_from_slice(&(-1i32).to_be_bytes());
    nulls.extend_from_slice(&(-1i32).to_be_bytes());
    let got = <Contact as scylla_driver::DeserializeValue>::deserialize(&new, Some(&nulls))
        .expect("deserializes");
    assert_eq!(got.visits, 0);

    // `forbid_excess_udt_fields`: the type's `phone` has no field.
    assert!(<StrictContact as scylla_driver::DeserializeValue>::type_check(&old).is_ok());
    let e = <StrictContact as scylla_driver::DeserializeValue>::type_check(&new).unwrap_err();
    assert_eq!(
        e.kind(),
        &TypeCheckErrorKind::UnexpectedColumn("phone".into())
    );
    let s = StrictContact {
        email: "a@b".into(),
        visits: 1,
    };
    let e = scylla_driver::serialize::serialize_bytes(&s, &new, &mut Vec::new()).unwrap_err();
    assert_eq!(
        e.kind(),
        &SerializationErrorKind::NoValueForUdtField("phone".into())
    );
    scylla_driver::serialize::serialize_bytes(&s, &old, &mut Vec::new()).expect("serializes");
}
