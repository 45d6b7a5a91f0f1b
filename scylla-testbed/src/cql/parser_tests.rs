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

    #[test]
    fn never_panics(s in "[ -~]{0,60}") {
        let _ = parse(&s);
    }
}
