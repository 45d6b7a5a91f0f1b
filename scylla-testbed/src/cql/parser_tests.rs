use proptest::prelude::*;

use super::*;

#[test]
fn statements() {
    let st = parse("SELECT k, v AS x FROM ks.t WHERE k = ? AND c IN (1, 2) LIMIT 10;").unwrap();
    let Statement::Select(s) = st else { panic!() };
    assert_eq!(s.table.keyspace.as_deref(), Some("ks"));
    assert_eq!(s.relations.len(), 2);
    assert!(matches!(s.limit, Some(Term::Lit(Literal::Int(_)))));
    assert!(matches!(
        parse("select count(*) from t").unwrap(),
        Statement::Select(Select {
            selection: Selection::Count,
            ..
        })
    ));
    let st =
        parse("INSERT INTO t (a, \"B\") VALUES (:x, 'lit') IF NOT EXISTS USING TTL 5").unwrap();
    let Statement::Insert {
        columns,
        values,
        if_not_exists,
        ..
    } = st
    else {
        panic!()
    };
    assert_eq!(columns, vec!["a".to_string(), "B".to_string()]);
    assert_eq!(values[0], Term::Bind(Some("x".into())));
    assert!(if_not_exists);
    let st = parse(
        "CREATE TABLE IF NOT EXISTS ks.t (a int, b text, c map<text, int>, d int, \
         PRIMARY KEY ((a, b), d)) WITH comment = 'x'",
    )
    .unwrap();
    let Statement::CreateTable {
        columns,
        partition_key,
        clustering_key,
        ..
    } = st
    else {
        panic!()
    };
    assert_eq!(partition_key, vec!["a", "b"]);
    assert_eq!(clustering_key, vec!["d"]);
    assert_eq!(columns[2].typ, "map<text, int>");
    let st = parse("CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3} AND durable_writes = false").unwrap();
    let Statement::CreateKeyspace {
        replication,
        durable_writes,
        ..
    } = st
    else {
        panic!()
    };
    assert_eq!(replication.len(), 2);
    assert!(!durable_writes);
    let st = parse("CREATE KEYSPACE k WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 3} AND tablets = {'initial': 1} AND consistency = 'global'").unwrap();
    let Statement::CreateKeyspace { consistency, .. } = st else {
        panic!()
    };
    assert_eq!(consistency.as_deref(), Some("global"));
    assert!(parse("UPDATE t USING TTL 1 SET v = ? WHERE k = 1").is_ok());
    assert!(parse("DELETE v FROM t WHERE k = 1 AND c = 2").is_ok());
    assert!(parse("SELECT * FROM system.local WHERE key='local' USING TIMEOUT 2000ms").is_ok());
    for bad in [
        "SELEC * FROM t",
        "SELECT FROM t",
        "INSERT INTO t (a) VALUES (1, 2)",
        "GRANT x",
        "",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn types_indexes_and_ann() {
    let st = parse("CREATE TYPE IF NOT EXISTS ks.address (street text, tags frozen<list<text>>)")
        .unwrap();
    let Statement::CreateType {
        name,
        if_not_exists,
        fields,
    } = st
    else {
        panic!()
    };
    assert_eq!(name.keyspace.as_deref(), Some("ks"));
    assert!(if_not_exists);
    assert_eq!(
        fields,
        vec![
            ("street".to_owned(), "text".to_owned()),
            ("tags".to_owned(), "frozen<list<text>>".to_owned())
        ]
    );
    let st = parse(
        "CREATE CUSTOM INDEX IF NOT EXISTS i ON ks.t (v) USING 'StorageAttachedIndex' \
         WITH OPTIONS = {'similarity_function': 'cosine'}",
    )
    .unwrap();
    let Statement::CreateIndex {
        name,
        column,
        class,
        options,
        ..
    } = st
    else {
        panic!()
    };
    assert_eq!(name.as_deref(), Some("i"));
    assert_eq!(column, "v");
    assert_eq!(class, "StorageAttachedIndex");
    assert_eq!(
        options,
        vec![("similarity_function".to_owned(), "cosine".to_owned())]
    );
    assert!(matches!(
        parse("CREATE CUSTOM INDEX ON t (v) USING 'sai'").unwrap(),
        Statement::CreateIndex { name: None, .. }
    ));
    let Statement::Select(s) =
        parse("SELECT id FROM t WHERE k = ? ORDER BY v ANN OF ? LIMIT 3").unwrap()
    else {
        panic!()
    };
    assert_eq!(s.ann, Some(("v".to_owned(), Term::Bind(None))));
    assert!(parse("SELECT id FROM t ORDER BY v ANN OF [1.0, 2.0], c ASC LIMIT 3").is_err());
    assert!(matches!(
        parse("DROP TYPE IF EXISTS a").unwrap(),
        Statement::DropType {
            if_exists: true,
            ..
        }
    ));
    assert!(matches!(
        parse("DROP INDEX ks.i").unwrap(),
        Statement::DropIndex {
            if_exists: false,
            ..
        }
    ));
    // A map with literal keys stays a map; `{name: ...}` is a UDT value.
    let Statement::Insert { values, .. } =
        parse("INSERT INTO t (a, b) VALUES ({true: 1}, {x: {y: 2}})").unwrap()
    else {
        panic!()
    };
    assert!(matches!(values[0], Term::Lit(Literal::Map(_))));
    assert_eq!(
        values[1],
        Term::Lit(Literal::Udt(vec![(
            "x".into(),
            Literal::Udt(vec![("y".into(), Literal::Int("2".into()))])
        )]))
    );
    assert!(parse("INSERT INTO t (a) VALUES ({x: 1, x: 2})").is_err());
}

fn lit() -> impl Strategy<Value = Literal> {
    prop_oneof![
        any::<i64>().prop_map(|v| Literal::Int(v.to_string())),
        "[ -~]{0,12}".prop_map(Literal::Str),
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(Literal::Blob),
        any::<bool>().prop_map(Literal::Bool),
        any::<u128>().prop_map(|v| Literal::Uuid(uuid::Uuid::from_u128(v))),
        Just(Literal::Null),
    ]
}

fn render(l: &Literal) -> String {
    match l {
        Literal::Int(s) | Literal::Float(s) => s.clone(),
        Literal::Str(s) => format!("'{}'", s.replace('\'', "''")),
        Literal::Blob(b) => format!(
            "0x{}",
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        ),
        Literal::Bool(b) => b.to_string(),
        Literal::Uuid(u) => u.to_string(),
        Literal::Null => "null".into(),
        _ => unreachable!(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn literals_round_trip(l in lit()) {
        let st = parse(&format!("INSERT INTO t (a) VALUES ({})", render(&l))).unwrap();
        let Statement::Insert { values, .. } = st else { panic!() };
        prop_assert_eq!(&values[0], &Term::Lit(l));
    }

    /// A UDT value written `{field: literal, ...}` parses back to its fields.
    #[test]
    fn udt_literals_round_trip(
        fields in proptest::collection::btree_map(
            "[a-z][a-z0-9_]{0,8}".prop_filter("a literal keyword", |n| {
                !["true", "false", "null", "nan", "infinity"].contains(&n.as_str())
            }),
            lit(),
            1..5,
        )
    ) {
        let fields: Vec<(String, Literal)> = fields.into_iter().collect();
        let text: Vec<String> = fields.iter().map(|(n, l)| format!("{n}: {}", render(l))).collect();
        let st = parse(&format!("INSERT INTO t (a) VALUES ({{{}}})", text.join(", "))).unwrap();
        let Statement::Insert { values, .. } = st else { panic!() };
        prop_assert_eq!(&values[0], &Term::Lit(Literal::Udt(fields)));
    }

    #[test]
    fn never_panics(s in "[ -~]{0,60}") {
        let _ = parse(&s);
    }
}
