//! Fieldless enums through `SerializeValue` / `DeserializeValue`: stored as
//! their names (`text` / `ascii`) or as their discriminants (`int`), round
//! tripped through the protocol crate's (de)serializers, and the errors for
//! unknown names and numbers, nulls and the wrong CQL types.

// The derives' default path is `::scylla_driver::_macro_internal`; the
// protocol crate under that name checks it without depending on the driver.
extern crate scylla_cql as scylla_driver;

use proptest::prelude::*;
use scylla_cql::frame::wire::RawValue;
use scylla_cql::types::{
    ColumnSpec, ColumnType, DeserializationErrorKind, DeserializeValue, NativeType, RowIterator,
    SerializationErrorKind, SerializeRow, SerializeValue, SerializedValues, TypeCheckErrorKind,
    Written,
};
use scylla_driver_macros::{DeserializeRow, DeserializeValue, SerializeRow, SerializeValue};

#[derive(Debug, Clone, Copy, PartialEq, Eq, SerializeValue, DeserializeValue)]
#[scylla(crate = ::scylla_cql)]
enum Colour {
    Red,
    #[scylla(rename = "verde")]
    Green,
    Blue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, SerializeValue, DeserializeValue)]
#[scylla(crate = ::scylla_cql, rename_all = "snake_case")]
enum Status {
    InProgress,
    Done,
    #[scylla(rename = "CANCELLED")]
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, SerializeValue, DeserializeValue)]
#[scylla(crate = ::scylla_cql, repr = "int")]
enum Priority {
    Low = -1,
    Normal = 0,
    High = 10,
    Urgent = 0x7FFF_FFFF,
}

/// A non-ASCII stored name: fine for `text`, refused for `ascii`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, SerializeValue, DeserializeValue)]
#[scylla(crate = ::scylla_cql)]
enum Greeting {
    #[scylla(rename = "grüß")]
    Hello,
    Bye,
}

const COLOURS: [Colour; 3] = [Colour::Red, Colour::Green, Colour::Blue];
const STATUSES: [Status; 3] = [Status::InProgress, Status::Done, Status::Cancelled];
const PRIORITIES: [Priority; 4] = [
    Priority::Low,
    Priority::Normal,
    Priority::High,
    Priority::Urgent,
];

fn bytes_of<T: SerializeValue>(v: &T, typ: &ColumnType) -> Vec<u8> {
    let mut out = Vec::new();
    assert_eq!(
        scylla_cql::types::serialize::serialize_bytes(&v, typ, &mut out),
        Ok(Written::Value)
    );
    out
}

fn read<'a, 'm, T: DeserializeValue<'a, 'm>>(
    typ: &'m ColumnType,
    v: Option<&'a [u8]>,
) -> Result<T, DeserializationErrorKind> {
    T::type_check(typ).map_err(|e| DeserializationErrorKind::TypeCheck(e.kind().clone()))?;
    T::deserialize(typ, v).map_err(|e| e.kind().clone())
}

#[test]
fn text_enums_store_their_names() {
    assert_eq!(
        bytes_of(&Colour::Red, &ColumnType::Native(NativeType::Text)),
        b"Red"
    );
    assert_eq!(
        bytes_of(&Colour::Green, &ColumnType::Native(NativeType::Text)),
        b"verde"
    );
    assert_eq!(
        bytes_of(&Colour::Blue, &ColumnType::Native(NativeType::Ascii)),
        b"Blue"
    );
    assert_eq!(
        bytes_of(&Status::InProgress, &ColumnType::Native(NativeType::Text)),
        b"in_progress"
    );
    assert_eq!(
        bytes_of(&Status::Done, &ColumnType::Native(NativeType::Text)),
        b"done"
    );
    assert_eq!(
        bytes_of(&Status::Cancelled, &ColumnType::Native(NativeType::Text)),
        b"CANCELLED"
    );
    for typ in [
        ColumnType::Native(NativeType::Text),
        ColumnType::Native(NativeType::Ascii),
    ] {
        for c in COLOURS {
            assert_eq!(read::<Colour>(&typ, Some(&bytes_of(&c, &typ))), Ok(c));
        }
        for s in STATUSES {
            assert_eq!(read::<Status>(&typ, Some(&bytes_of(&s, &typ))), Ok(s));
        }
    }
}

#[test]
fn int_enums_store_their_discriminants() {
    assert_eq!(
        bytes_of(&Priority::Low, &ColumnType::Native(NativeType::Int)),
        (-1i32).to_be_bytes()
    );
    assert_eq!(
        bytes_of(&Priority::High, &ColumnType::Native(NativeType::Int)),
        10i32.to_be_bytes()
    );
    assert_eq!(
        bytes_of(&Priority::Urgent, &ColumnType::Native(NativeType::Int)),
        i32::MAX.to_be_bytes()
    );
    for p in PRIORITIES {
        let b = bytes_of(&p, &ColumnType::Native(NativeType::Int));
        assert_eq!(
            read::<Priority>(&ColumnType::Native(NativeType::Int), Some(&b)),
            Ok(p)
        );
    }
}

#[test]
fn unknown_names_and_numbers_are_errors_naming_the_enum_and_value() {
    // "Green" is stored as "verde": the variant's own name is unknown.
    let err = Colour::deserialize(&ColumnType::Native(NativeType::Text), Some(b"Green"))
        .expect_err("unknown");
    assert_eq!(
        err.kind(),
        &DeserializationErrorKind::UnknownEnumValue {
            enum_name: "Colour",
            value: "Green".into()
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("`Green`") && msg.contains("`Colour`"), "{msg}");
    // Names are matched exactly.
    assert!(Status::deserialize(&ColumnType::Native(NativeType::Text), Some(b"Done")).is_err());

    let err = Priority::deserialize(
        &ColumnType::Native(NativeType::Int),
        Some(&5i32.to_be_bytes()),
    )
    .expect_err("5");
    assert_eq!(
        err.kind(),
        &DeserializationErrorKind::UnknownEnumValue {
            enum_name: "Priority",
            value: "5".into()
        }
    );
    assert!(err.to_string().contains("Priority"), "{err}");

    // A long stored name is cut to 64 characters in the error.
    let long = "é".repeat(1000);
    let err = Colour::deserialize(&ColumnType::Native(NativeType::Text), Some(long.as_bytes()))
        .expect_err("long");
    let DeserializationErrorKind::UnknownEnumValue { value, .. } = err.kind() else {
        panic!("unexpected error {err}");
    };
    assert_eq!(value.chars().count(), 64);
}

#[test]
fn nulls_bad_bytes_and_wrong_types_are_errors() {
    assert_eq!(
        read::<Colour>(&ColumnType::Native(NativeType::Text), None),
        Err(DeserializationErrorKind::UnexpectedNull)
    );
    assert_eq!(
        read::<Priority>(&ColumnType::Native(NativeType::Int), None),
        Err(DeserializationErrorKind::UnexpectedNull)
    );
    assert_eq!(
        read::<Colour>(&ColumnType::Native(NativeType::Text), Some(&[0xFF, 0xFE])),
        Err(DeserializationErrorKind::InvalidUtf8)
    );
    assert_eq!(
        read::<Priority>(&ColumnType::Native(NativeType::Int), Some(&[0, 0, 1])),
        Err(DeserializationErrorKind::WrongLength {
            expected: 4,
            actual: 3
        })
    );
    assert_eq!(
        read::<Priority>(&ColumnType::Native(NativeType::Int), Some(&[])),
        Err(DeserializationErrorKind::UnexpectedEmpty)
    );
    // Errors from the stored value's own decoding name the enum.
    let err = Priority::deserialize(&ColumnType::Native(NativeType::Int), None).expect_err("null");
    assert!(err
        .context()
        .rust_type
        .is_some_and(|t| t.ends_with("Priority")));

    // (type, a text enum accepts it, an int enum accepts it)
    for (typ, text, int) in [
        (ColumnType::Native(NativeType::Text), true, false),
        (ColumnType::Native(NativeType::Ascii), true, false),
        (ColumnType::Native(NativeType::Int), false, true),
        (ColumnType::Native(NativeType::BigInt), false, false),
        (ColumnType::Native(NativeType::Blob), false, false),
    ] {
        assert_eq!(Colour::type_check(&typ).is_ok(), text, "{typ}");
        assert_eq!(Priority::type_check(&typ).is_ok(), int, "{typ}");
        let mut out = Vec::new();
        assert_eq!(
            Colour::Red
                .serialize(
                    &typ,
                    scylla_cql::types::serialize::CellWriter::new(&mut out)
                )
                .is_ok(),
            text,
            "{typ}"
        );
        assert_eq!(
            Priority::High
                .serialize(
                    &typ,
                    scylla_cql::types::serialize::CellWriter::new(&mut out)
                )
                .is_ok(),
            int,
            "{typ}"
        );
    }
    let err = Colour::type_check(&ColumnType::Native(NativeType::Int)).expect_err("int");
    assert_eq!(err.kind(), &TypeCheckErrorKind::Mismatch);
    assert!(err.to_string().contains("Colour"), "{err}");
    let err = Priority::Low
        .serialize(
            &ColumnType::Native(NativeType::BigInt),
            scylla_cql::types::serialize::CellWriter::new(&mut Vec::new()),
        )
        .expect_err("bigint");
    assert_eq!(err.kind(), &SerializationErrorKind::Mismatch);
    assert!(err.to_string().contains("Priority"), "{err}");
}

#[test]
fn non_ascii_names_are_refused_for_ascii_columns() {
    assert_eq!(
        bytes_of(&Greeting::Hello, &ColumnType::Native(NativeType::Text)),
        "grüß".as_bytes()
    );
    let err = Greeting::Hello
        .serialize(
            &ColumnType::Native(NativeType::Ascii),
            scylla_cql::types::serialize::CellWriter::new(&mut Vec::new()),
        )
        .expect_err("not ascii");
    assert_eq!(err.kind(), &SerializationErrorKind::NotAscii);
    assert_eq!(
        bytes_of(&Greeting::Bye, &ColumnType::Native(NativeType::Ascii)),
        b"Bye"
    );
    assert_eq!(
        read::<Greeting>(
            &ColumnType::Native(NativeType::Ascii),
            Some("grüß".as_bytes())
        ),
        Err(DeserializationErrorKind::NotAscii)
    );
    assert_eq!(
        read::<Greeting>(
            &ColumnType::Native(NativeType::Text),
            Some("grüß".as_bytes())
        ),
        Ok(Greeting::Hello)
    );
}

#[test]
fn enums_compose_with_options_and_collections() {
    let list = ColumnType::list(ColumnType::Native(NativeType::Text));
    let v = vec![Colour::Blue, Colour::Green, Colour::Red];
    let b = bytes_of(&v, &list);
    assert_eq!(read::<Vec<Colour>>(&list, Some(&b)), Ok(v));
    assert_eq!(
        read::<Option<Priority>>(&ColumnType::Native(NativeType::Int), None),
        Ok(None)
    );
    let mut out = Vec::new();
    assert_eq!(
        None::<Priority>
            .serialize(
                &ColumnType::Native(NativeType::Int),
                scylla_cql::types::serialize::CellWriter::new(&mut out)
            )
            .map(|proof| proof.written()),
        Ok(Written::Null)
    );
}

proptest! {
    #[test]
    fn variants_round_trip(
        c in proptest::sample::select(&COLOURS[..]),
        s in proptest::sample::select(&STATUSES[..]),
        p in proptest::sample::select(&PRIORITIES[..]),
        ascii in any::<bool>(),
    ) {
        let text = if ascii { ColumnType::Native(NativeType::Ascii) } else { ColumnType::Native(NativeType::Text) };
        prop_assert_eq!(read::<Colour>(&text, Some(&bytes_of(&c, &text))), Ok(c));
        prop_assert_eq!(read::<Status>(&text, Some(&bytes_of(&s, &text))), Ok(s));
        let b = bytes_of(&p, &ColumnType::Native(NativeType::Int));
        prop_assert_eq!(read::<Priority>(&ColumnType::Native(NativeType::Int), Some(&b)), Ok(p));
    }

    /// Any text decodes to the variant stored under that name, or to an
    /// error naming the value; never a panic.
    #[test]
    fn any_text_is_a_variant_or_an_unknown_value(name in ".{0,80}") {
        let known = STATUSES.iter().find(|s| bytes_of(*s, &ColumnType::Native(NativeType::Text)) == name.as_bytes());
        match (read::<Status>(&ColumnType::Native(NativeType::Text), Some(name.as_bytes())), known) {
            (Ok(s), Some(k)) => prop_assert_eq!(s, *k),
            (Err(DeserializationErrorKind::UnknownEnumValue { enum_name, value }), None) => {
                prop_assert_eq!(enum_name, "Status");
                prop_assert_eq!(value, name.chars().take(64).collect::<String>());
            }
            (other, known) => prop_assert!(false, "{name:?}: {other:?} (known: {known:?})"),
        }
    }

    /// Any four bytes decode to the variant of that discriminant, or to an
    /// error naming the number.
    #[test]
    fn any_int_is_a_variant_or_an_unknown_value(n in prop_oneof![any::<i32>(), -2..12i32]) {
        let known = PRIORITIES.iter().find(|p| **p as i32 == n);
        match (read::<Priority>(&ColumnType::Native(NativeType::Int), Some(&n.to_be_bytes())), known) {
            (Ok(p), Some(k)) => prop_assert_eq!(p, *k),
            (Err(DeserializationErrorKind::UnknownEnumValue { enum_name, value }), None) => {
                prop_assert_eq!(enum_name, "Priority");
                prop_assert_eq!(value, n.to_string());
            }
            (other, known) => prop_assert!(false, "{n}: {other:?} (known: {known:?})"),
        }
    }

    /// Arbitrary bytes of any length never panic the decoders.
    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..16)) {
        let is_colour = COLOURS.iter().any(|c| bytes_of(c, &ColumnType::Native(NativeType::Text)) == b);
        prop_assert_eq!(read::<Colour>(&ColumnType::Native(NativeType::Text), Some(&b)).is_ok(), is_colour);
        // "grüß" is not ASCII: only "Bye" reads from an `ascii` column.
        prop_assert_eq!(read::<Greeting>(&ColumnType::Native(NativeType::Ascii), Some(&b)).is_ok(), b == b"Bye");
        let r = read::<Priority>(&ColumnType::Native(NativeType::Int), Some(&b));
        prop_assert_eq!(r.is_ok(), b.len() == 4 && PRIORITIES.iter().any(|p| (*p as i32).to_be_bytes() == b[..]));
    }
}

/// No `crate = ...`: the generated code names `::scylla_driver`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, SerializeValue, DeserializeValue)]
#[scylla(rename_all = "kebab-case")]
enum Visibility {
    Public,
    FriendsOnly,
}

#[derive(Debug, PartialEq, SerializeRow, DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
struct Task {
    id: i32,
    status: Status,
    priority: Option<Priority>,
    visibility: Visibility,
}

#[test]
fn enums_are_columns_of_derived_rows() {
    let spec = |name: &str, typ| ColumnSpec {
        keyspace: "ks".into(),
        table: "tasks".into(),
        name: name.into(),
        typ,
    };
    let specs = [
        spec("id", ColumnType::Native(NativeType::Int)),
        spec("status", ColumnType::Native(NativeType::Text)),
        spec("priority", ColumnType::Native(NativeType::Int)),
        spec("visibility", ColumnType::Native(NativeType::Ascii)),
    ];
    let task = Task {
        id: 1,
        status: Status::InProgress,
        priority: None,
        visibility: Visibility::FriendsOnly,
    };
    let mut values = SerializedValues::default();
    task.serialize_row(&specs, &mut values).expect("serializes");
    // The row's cells, as a result would carry them.
    let mut cells = Vec::new();
    for (_, v) in values.iter() {
        match v {
            RawValue::Value(b) => {
                cells.extend_from_slice(&i32::try_from(b.len()).expect("short").to_be_bytes());
                cells.extend_from_slice(b);
            }
            RawValue::Null => cells.extend_from_slice(&(-1i32).to_be_bytes()),
            RawValue::Unset => panic!("nothing is unset"),
        }
    }
    assert!(cells.windows(12).any(|w| w == b"friends-only"));
    let rows: Vec<Task> = RowIterator::new(&specs, &cells, 1)
        .expect("type checks")
        .collect::<Result<_, _>>()
        .expect("deserializes");
    assert_eq!(rows, [task]);

    // A text enum bound to an int column fails the row's type check,
    // naming the column.
    let mut bad = specs.clone();
    bad[1] = spec("status", ColumnType::Native(NativeType::Int));
    let err = RowIterator::<Task>::new(&bad, &cells, 1).expect_err("status is not an int");
    assert!(err.to_string().contains("`status`"), "{err}");
}
