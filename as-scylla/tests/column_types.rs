//! Column types matched as programs written for the official crate match
//! them: `Native(NativeType::..)`, `Collection { frozen, typ }`,
//! `UserDefinedType { frozen, definition }`, `Tuple(..)` and
//! `Vector { typ, dimensions }`, named through `scylla::cluster::metadata`,
//! `scylla::frame::response::result` and `scylla::_macro_internal`, with the
//! official lifetime parameter.

use std::sync::Arc;

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::cluster::metadata::{CollectionType, ColumnType, NativeType, UserDefinedType};
use scylla::statement::prepared::PreparedStatement;
use scylla_testbed::TestCluster;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// A description of a column type, written against the official enum (which
/// is `#[non_exhaustive]`, hence the last arm).
fn describe(typ: &ColumnType<'_>) -> String {
    match typ {
        ColumnType::Native(NativeType::Counter) => "counter".to_owned(),
        ColumnType::Native(native) => format!("native {native:?}"),
        ColumnType::Collection {
            frozen,
            typ: CollectionType::List(elem),
        } => format!("list (frozen: {frozen}) of {}", describe(elem)),
        ColumnType::Collection {
            frozen,
            typ: CollectionType::Set(elem),
        } => format!("set (frozen: {frozen}) of {}", describe(elem)),
        ColumnType::Collection {
            frozen,
            typ: CollectionType::Map(k, v),
        } => format!("map (frozen: {frozen}) {} -> {}", describe(k), describe(v)),
        ColumnType::Collection { .. } => "another collection".to_owned(),
        ColumnType::UserDefinedType { frozen, definition } => format!(
            "udt {}.{} (frozen: {frozen}) with {}",
            definition.keyspace,
            definition.name,
            definition
                .field_types
                .iter()
                .map(|(name, t)| format!("{name}: {}", describe(t)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ColumnType::Tuple(elems) => format!("tuple of {}", elems.len()),
        ColumnType::Vector { typ, dimensions } => {
            format!("vector of {dimensions} {}", describe(typ))
        }
        _ => "something else".to_owned(),
    }
}

/// The same type under the `frame::response::result` and
/// `_macro_internal` names.
fn is_counter(typ: &scylla::frame::response::result::ColumnType<'_>) -> bool {
    matches!(
        typ,
        scylla::_macro_internal::ColumnType::Native(
            scylla::frame::response::result::NativeType::Counter
        )
    )
}

fn owned(typ: &ColumnType<'_>) -> ColumnType<'static> {
    typ.clone().into_owned()
}

#[test]
fn types_built_and_matched_in_the_official_shape() {
    let udt: scylla::frame::response::result::UserDefinedType<'static> = UserDefinedType {
        name: "address".into(),
        keyspace: "ks".into(),
        field_types: vec![("street".into(), ColumnType::Native(NativeType::Text))],
    };
    let udt = ColumnType::UserDefinedType {
        frozen: false,
        definition: Arc::new(udt),
    };
    assert_eq!(
        describe(&udt),
        "udt ks.address (frozen: false) with street: native Text"
    );
    let frozen_list = ColumnType::Collection {
        frozen: true,
        typ: CollectionType::List(Box::new(ColumnType::Native(NativeType::Int))),
    };
    assert!(matches!(
        owned(&frozen_list),
        ColumnType::Collection {
            frozen: true,
            typ: CollectionType::List(_)
        }
    ));
    let vector = ColumnType::Vector {
        typ: Box::new(ColumnType::Native(NativeType::Float)),
        dimensions: 3,
    };
    assert_eq!(describe(&vector), "vector of 3 native Float");
    assert!(is_counter(&ColumnType::Native(NativeType::Counter)));
    assert!(!is_counter(&vector));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_marker_types_in_the_official_shape() -> Result<(), Error> {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(2)
        .start()
        .await
        .expect("test cluster starts");
    let node = cluster.cql_addrs()[0].to_string();
    let session: Session = SessionBuilder::new().known_node(&node).build().await?;
    for ddl in [
        "CREATE KEYSPACE shapes WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "CREATE TYPE shapes.address (street text, no int)",
        "CREATE TABLE shapes.t (id int PRIMARY KEY, tags frozen<list<text>>, \
         home frozen<address>, pair tuple<int, text>, scores map<text, int>)",
        "CREATE TABLE shapes.hits (id int PRIMARY KEY, n counter)",
    ] {
        session.query_unpaged(ddl, &[]).await?;
    }

    let insert: PreparedStatement = session
        .prepare("INSERT INTO shapes.t (id, tags, home, pair, scores) VALUES (?, ?, ?, ?, ?)")
        .await?;
    let described: Vec<String> = insert
        .get_variable_col_specs()
        .iter()
        .map(|spec| describe(spec.typ()))
        .collect();
    // Bind-marker metadata does not say whether a type is frozen: every
    // `frozen` flag reads false, as with the official crate.
    assert_eq!(
        described,
        [
            "native Int",
            "list (frozen: false) of native Text",
            "udt shapes.address (frozen: false) with street: native Text, no: native Int",
            "tuple of 2",
            "map (frozen: false) native Text -> native Int",
        ]
    );

    // Result metadata, the same way.
    let rows = session
        .query_unpaged("SELECT id, n FROM shapes.hits", &[])
        .await?
        .into_rows_result()?;
    let specs = rows.column_specs();
    let n = specs.get_by_name("n").expect("a column n").1;
    assert!(is_counter(n.typ()));
    assert_eq!(describe(n.typ()), "counter");
    Ok(())
}
