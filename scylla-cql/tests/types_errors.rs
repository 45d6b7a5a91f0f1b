//! Type-check and (de)serialization errors: they name the column, the Rust
//! type and the CQL type, and reject what the protocol forbids.

use scylla_driver_cql::types::deserialize::DeserializeValue;
use scylla_driver_cql::types::serialize::CellWriter;
use scylla_driver_cql::types::serialize::{serialize_udt, SerializeValue};
use scylla_driver_cql::types::{
    ColumnSpec, ColumnType, CqlDuration, CqlTime, CqlValue, DeserializationErrorKind, MaybeEmpty,
    MaybeUnset, NativeType, RowIterator, SerializationErrorKind, SerializeRow, SerializedValues,
    TypeCheckErrorKind, Unset, Written,
};

fn spec(name: &str, typ: ColumnType) -> ColumnSpec {
    ColumnSpec {
        keyspace: "ks".into(),
        table: "t".into(),
        name: name.into(),
        typ,
    }
}

#[test]
fn serialization_mismatch_names_everything() {
    let specs = [
        spec("id", ColumnType::Native(NativeType::Int)),
        spec("name", ColumnType::Native(NativeType::Text)),
    ];
    let mut out = SerializedValues::new();
    let err = (1i32, 2i32).serialize_row(&specs, &mut out).unwrap_err();
    assert_eq!(err.kind(), &SerializationErrorKind::Mismatch);
    let msg = err.to_string();
    assert!(
        msg.contains("`name`") && msg.contains("i32") && msg.contains("text"),
        "{msg}"
    );
    // The failed value left nothing behind.
    assert_eq!(out.len(), 1);
}

#[test]
fn value_count_is_checked() {
    let specs = [spec("a", ColumnType::Native(NativeType::Int))];
    let mut out = SerializedValues::new();
    let err = (1i32, 2i32).serialize_row(&specs, &mut out).unwrap_err();
    assert!(matches!(
        err.kind(),
        SerializationErrorKind::WrongValueCount {
            expected: 1,
            actual: 2
        }
    ));
    assert!(().serialize_row(&specs, &mut out).is_err());
    assert!(vec![CqlValue::Int(1)]
        .serialize_row(&specs, &mut out)
        .is_ok());
    let dynamic: [&dyn SerializeValue; 1] = [&5i32];
    assert!(dynamic.serialize_row(&specs, &mut out).is_ok());
}

#[test]
fn null_and_unset() {
    let specs = [
        spec("a", ColumnType::Native(NativeType::Int)),
        spec("b", ColumnType::Native(NativeType::Int)),
        spec("c", ColumnType::Native(NativeType::Int)),
    ];
    let mut out = SerializedValues::new();
    (None::<i32>, Unset, MaybeUnset::Set(3i32))
        .serialize_row(&specs, &mut out)
        .unwrap();
    assert_eq!(
        out.as_bytes(),
        [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0, 0, 0, 4, 0, 0, 0, 3]
    );
    let list = ColumnType::list(ColumnType::Native(NativeType::Int));
    let mut buf = Vec::new();
    let err = SerializeValue::serialize(&vec![Some(1i32), None], &list, CellWriter::new(&mut buf))
        .unwrap_err();
    assert_eq!(err.kind(), &SerializationErrorKind::NullNotAllowed);
    let err = SerializeValue::serialize(
        &vec![MaybeUnset::<i32>::Unset],
        &list,
        CellWriter::new(&mut buf),
    )
    .unwrap_err();
    assert_eq!(err.kind(), &SerializationErrorKind::UnsetNotAllowed);
}

#[test]
fn ascii_and_ranges_are_validated() {
    let mut buf = Vec::new();
    let err = "héllo"
        .serialize(
            &ColumnType::Native(NativeType::Ascii),
            CellWriter::new(&mut buf),
        )
        .unwrap_err();
    assert_eq!(err.kind(), &SerializationErrorKind::NotAscii);
    assert!(CqlTime(-1)
        .serialize(
            &ColumnType::Native(NativeType::Time),
            CellWriter::new(&mut buf)
        )
        .is_err());
    let mixed = CqlDuration {
        months: 1,
        days: -1,
        nanoseconds: 0,
    };
    assert!(mixed
        .serialize(
            &ColumnType::Native(NativeType::Duration),
            CellWriter::new(&mut buf)
        )
        .is_err());
    let e = String::deserialize(&ColumnType::Native(NativeType::Ascii), Some("é".as_bytes()))
        .unwrap_err();
    assert_eq!(e.kind(), &DeserializationErrorKind::NotAscii);
    let e = String::deserialize(&ColumnType::Native(NativeType::Text), Some(&[0xFF])).unwrap_err();
    assert_eq!(e.kind(), &DeserializationErrorKind::InvalidUtf8);
    let e = CqlTime::deserialize(
        &ColumnType::Native(NativeType::Time),
        Some(&i64::MAX.to_be_bytes()),
    )
    .unwrap_err();
    assert!(matches!(
        e.kind(),
        DeserializationErrorKind::InvalidValue(_)
    ));
}

#[test]
fn vector_dimension_is_checked() {
    let v3 = ColumnType::Vector {
        typ: Box::new(ColumnType::Native(NativeType::Float)),
        dimensions: 3,
    };
    let mut buf = Vec::new();
    let err =
        SerializeValue::serialize(&vec![1.0f32, 2.0], &v3, CellWriter::new(&mut buf)).unwrap_err();
    assert!(matches!(
        err.kind(),
        SerializationErrorKind::WrongDimension {
            expected: 3,
            actual: 2
        }
    ));
    let err = <[f32; 2]>::type_check(&v3).unwrap_err();
    assert!(matches!(
        err.kind(),
        TypeCheckErrorKind::WrongDimension {
            expected: 2,
            actual: 3
        }
    ));
    // An empty element of a fixed-length type cannot be written in a vector.
    assert!(
        SerializeValue::serialize(&vec![CqlValue::Empty; 3], &v3, CellWriter::new(&mut buf))
            .is_err()
    );
}

#[test]
fn empty_values() {
    assert_eq!(
        i32::deserialize(&ColumnType::Native(NativeType::Int), Some(&[]))
            .unwrap_err()
            .kind(),
        &DeserializationErrorKind::UnexpectedEmpty
    );
    assert_eq!(
        MaybeEmpty::<i32>::deserialize(&ColumnType::Native(NativeType::Int), Some(&[])),
        Ok(MaybeEmpty::Empty)
    );
    assert_eq!(
        CqlValue::deserialize(&ColumnType::Native(NativeType::Int), Some(&[])),
        Ok(CqlValue::Empty)
    );
    assert_eq!(
        CqlValue::deserialize(&ColumnType::Native(NativeType::Text), Some(&[])),
        Ok(CqlValue::Text(String::new()))
    );
    let mut buf = Vec::new();
    assert_eq!(
        CqlValue::Empty
            .serialize(
                &ColumnType::Native(NativeType::Int),
                CellWriter::new(&mut buf)
            )
            .map(|proof| proof.written()),
        Ok(Written::Value)
    );
    assert_eq!(buf, [0, 0, 0, 0], "a zero-length value");
    assert_eq!(
        i32::deserialize(&ColumnType::Native(NativeType::Int), None)
            .unwrap_err()
            .kind(),
        &DeserializationErrorKind::UnexpectedNull
    );
}

#[test]
fn row_type_check_names_the_column() {
    let specs = [
        spec("a", ColumnType::Native(NativeType::Int)),
        spec("b", ColumnType::Native(NativeType::Text)),
    ];
    let err = RowIterator::<(i32, i64)>::new(&specs, &[], 0).unwrap_err();
    assert_eq!(err.context().column.as_deref(), Some("b"));
    assert_eq!(err.context().rust_type, Some("i64"));
    let err = RowIterator::<(i32,)>::new(&specs, &[], 0).unwrap_err();
    assert!(matches!(
        err.kind(),
        TypeCheckErrorKind::WrongArity {
            expected: 1,
            actual: 2
        }
    ));
}

#[test]
fn truncated_row_is_an_error_naming_the_column() {
    let specs = [
        spec("a", ColumnType::Native(NativeType::Int)),
        spec("b", ColumnType::Native(NativeType::Int)),
    ];
    let raw = [0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0];
    let mut rows = RowIterator::<(i32, i32)>::new(&specs, &raw, 2).unwrap();
    let err = rows.next().unwrap().unwrap_err();
    assert_eq!(err.context().column.as_deref(), Some("b"));
    assert!(rows.next().is_none(), "the iterator ends after an error");
}

struct Pair {
    id: i32,
    label: Option<String>,
}
scylla_driver_cql::impl_deserialize_row!(Pair { id: i32, label: Option<String> });

#[test]
fn struct_rows_by_name() {
    let specs = [
        spec("label", ColumnType::Native(NativeType::Text)),
        spec("id", ColumnType::Native(NativeType::Int)),
    ];
    let mut values = SerializedValues::new();
    (None::<&str>, 9i32)
        .serialize_row(&specs, &mut values)
        .unwrap();
    let rows: Vec<Pair> = RowIterator::new(&specs, values.as_bytes(), 1)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!((rows[0].id, rows[0].label.clone()), (9, None));
    let wrong = [
        spec("id", ColumnType::Native(NativeType::Int)),
        spec("other", ColumnType::Native(NativeType::Text)),
    ];
    assert!(RowIterator::<Pair>::new(&wrong, &[], 0).is_err());
    let missing = [spec("id", ColumnType::Native(NativeType::Int))];
    let err = RowIterator::<Pair>::new(&missing, &[], 0).unwrap_err();
    assert_eq!(
        err.kind(),
        &TypeCheckErrorKind::MissingColumn("label".into())
    );
}

#[test]
fn udt_by_name_and_unknown_fields() {
    let udt = ColumnType::udt(
        "ks",
        "addr",
        vec![
            ("street".into(), ColumnType::Native(NativeType::Text)),
            ("no".into(), ColumnType::Native(NativeType::Int)),
        ],
    );
    let mut buf = Vec::new();
    // Any order; missing fields are null.
    serialize_udt::<(), &dyn SerializeValue>(
        &udt,
        CellWriter::new(&mut buf),
        [("no", &7i32 as &dyn SerializeValue)],
    )
    .unwrap();
    let (len, buf) = buf.split_at(4);
    assert_eq!(len, [0, 0, 0, 12]);
    assert_eq!(buf, [0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 4, 0, 0, 0, 7]);
    let v = CqlValue::deserialize(&udt, Some(buf)).unwrap();
    assert_eq!(
        v,
        CqlValue::UserDefinedType {
            keyspace: "ks".into(),
            name: "addr".into(),
            fields: vec![
                ("street".into(), None),
                ("no".into(), Some(CqlValue::Int(7)))
            ],
        }
    );
    // A value shorter than its type: the missing fields are null.
    let short = CqlValue::deserialize(&udt, Some(&[0xFF, 0xFF, 0xFF, 0xFF])).unwrap();
    assert!(matches!(short, CqlValue::UserDefinedType { ref fields, .. } if fields[1].1.is_none()));
    let err = serialize_udt::<(), &dyn SerializeValue>(
        &udt,
        CellWriter::new(&mut Vec::new()),
        [("zip", &7i32 as &dyn SerializeValue)],
    )
    .unwrap_err();
    assert_eq!(
        err.kind(),
        &SerializationErrorKind::UnknownUdtField("zip".into())
    );
}

/// `new` takes a kind, or any error of an implementation's own (the official
/// crate's constructor): the kind is kept as such, another error is held
/// with its source chain.
#[test]
fn new_takes_a_kind_or_any_error() {
    use scylla_driver_cql::types::{
        DeserializationError, DeserializationErrorKind, SerializationError, SerializationErrorKind,
        TypeCheckError, TypeCheckErrorKind,
    };

    #[derive(Debug)]
    struct Inner;
    impl std::fmt::Display for Inner {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the inner cause")
        }
    }
    impl std::error::Error for Inner {}

    #[derive(Debug)]
    struct Mine(Inner);
    impl std::fmt::Display for Mine {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("my schema parser refused the type")
        }
    }
    impl std::error::Error for Mine {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    let kept = DeserializationError::new(DeserializationErrorKind::UnexpectedNull);
    assert_eq!(kept.kind(), &DeserializationErrorKind::UnexpectedNull);
    let kept = TypeCheckError::new(TypeCheckErrorKind::Mismatch);
    assert_eq!(kept.kind(), &TypeCheckErrorKind::Mismatch);

    let mine = DeserializationError::new(Mine(Inner));
    assert!(matches!(mine.kind(), DeserializationErrorKind::Other(_)));
    assert!(
        mine.to_string()
            .ends_with("my schema parser refused the type"),
        "{mine}"
    );
    let source = std::error::Error::source(&mine).expect("the inner cause");
    assert_eq!(source.to_string(), "the inner cause");
    assert_eq!(mine.clone(), mine, "a clone shares the error");
    assert_ne!(DeserializationError::new(Mine(Inner)), mine);

    let mine = TypeCheckError::new(Mine(Inner));
    assert!(matches!(mine.kind(), TypeCheckErrorKind::Other(_)));
    let mine = SerializationError::new(Mine(Inner));
    assert!(matches!(mine.kind(), SerializationErrorKind::Other(_)));
}
