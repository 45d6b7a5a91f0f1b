//! Statements run through the CQL layer without a network: user-defined
//! types and vector search, checked by their results and metadata.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU16;
use std::sync::{Arc, Mutex};

use scylla_cql::frame::response::result::{ResultMetadata, Rows};
use scylla_cql::frame::wire::RawValue;
use scylla_cql::token::Token;
use scylla_cql::types::deserialize::DeserializeValue;
use scylla_cql::types::{CollectionType, ColumnType, CqlValue, NativeType, SerializedValues};

use super::*;
use crate::handler::{ConnCtx, PortKind, SessionState};
use crate::stats::NodeStats;
use crate::topology::{NodeInfo, Topology};

fn ctx() -> ConnCtx {
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let node = NodeInfo {
        index: 0,
        address: ip,
        advertised: ip,
        port: 9042,
        shard_aware_port: None,
        host_id: uuid::Uuid::nil(),
        datacenter: "dc1".into(),
        rack: "r1".into(),
        tokens: vec![Token(0)],
        shards: NonZeroU16::MIN,
    };
    ConnCtx {
        node: Arc::new(node.clone()),
        topology: Arc::new(Topology::new(vec![node], "test".into())),
        stats: Arc::new(NodeStats::new(1)),
        shard: 0,
        port_kind: PortKind::Regular,
        peer: SocketAddr::new(ip, 50000),
        conn_id: 0,
        tls: false,
        tls_session: std::sync::OnceLock::new(),
        clients: Arc::default(),
        prepared: Arc::default(),
        state: Mutex::new(SessionState::default()),
    }
}

/// Bound values, each serialized as `typ`.
fn bound(values: &[(CqlValue, ColumnType)]) -> SerializedValues {
    let mut out = SerializedValues::default();
    for (v, t) in values {
        let mut b = Vec::new();
        scylla_cql::types::serialize::serialize_bytes(&v, t, &mut b).unwrap();
        out.push(RawValue::Value(&b)).unwrap();
    }
    out
}

struct Db {
    h: CqlHandler,
    ctx: ConnCtx,
}

impl Db {
    fn new() -> Db {
        let db = Db {
            h: CqlHandler::new(),
            ctx: ctx(),
        };
        db.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
        db
    }

    fn run(&self, text: &str, values: &SerializedValues) -> Result<ResultBody, CqlError> {
        let st = parse(text)?;
        self.h
            .run_unaccounted(&self.ctx, Some("ks"), &st, values, &PageOpts::default())
            .map(|o| o.result)
    }

    fn ok(&self, text: &str) -> ResultBody {
        self.run(text, &SerializedValues::default())
            .unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    fn err(&self, text: &str) -> String {
        match self.run(text, &SerializedValues::default()) {
            Ok(r) => panic!("{text} succeeded: {r:?}"),
            Err(CqlError::Invalid(m) | CqlError::Syntax(m)) => m,
            Err(e) => format!("{e:?}"),
        }
    }

    fn rows(&self, text: &str, values: &SerializedValues) -> Rows {
        match self.run(text, values) {
            Ok(ResultBody::Rows(r)) => r,
            other => panic!("{text}: {other:?}"),
        }
    }
}

/// Every row's cells, decoded by the result's column types.
fn decode(rows: &Rows) -> Vec<Vec<Option<CqlValue>>> {
    let types: Vec<ColumnType> = column_types(rows.metadata());
    rows.raw_iter()
        .map(|row| {
            row.zip(&types)
                .map(|(cell, t)| cell.map(|c| CqlValue::deserialize(t, Some(c)).unwrap()))
                .collect()
        })
        .collect()
}

fn column_types(m: &ResultMetadata) -> Vec<ColumnType> {
    m.col_specs
        .as_ref()
        .unwrap()
        .iter()
        .map(|s| s.typ.clone())
        .collect()
}

fn text(s: &str) -> Option<CqlValue> {
    Some(CqlValue::Text(s.to_owned()))
}

fn address_type() -> ColumnType {
    ColumnType::udt(
        "ks",
        "address",
        vec![
            ("street".into(), ColumnType::Native(NativeType::Text)),
            ("city".into(), ColumnType::Native(NativeType::Text)),
        ],
    )
}

fn address(street: &str, city: Option<&str>) -> CqlValue {
    CqlValue::UserDefinedType {
        keyspace: "ks".into(),
        name: "address".into(),
        fields: vec![
            ("street".into(), text(street)),
            ("city".into(), city.and_then(text)),
        ],
    }
}

#[test]
fn udt_columns_store_and_return_values_with_their_type() {
    let db = Db::new();
    let created = db.ok("CREATE TYPE IF NOT EXISTS ks.address (street text, city text)");
    assert!(matches!(created, ResultBody::SchemaChange(_)));
    // Again with IF NOT EXISTS: nothing happens; without: AlreadyExists.
    assert!(matches!(
        db.ok("CREATE TYPE IF NOT EXISTS address (street text)"),
        ResultBody::Void
    ));
    assert!(db
        .err("CREATE TYPE address (x int)")
        .contains("already exists"));
    db.ok(
        "CREATE TABLE users (id int PRIMARY KEY, home frozen<address>, work address, \
           past list<frozen<address>>)",
    );

    // A literal (a field left out is null), then bound values.
    db.ok(
        "INSERT INTO users (id, home, past) VALUES (1, {street: '1 Main St', city: 'Oslo'}, \
           [{street: 'a'}, {\"street\": 'b', city: 'c'}])",
    );
    let values = bound(&[
        (address("2 High St", None), address_type()),
        (CqlValue::Int(2), ColumnType::Native(NativeType::Int)),
    ]);
    db.run("UPDATE users SET work = ? WHERE id = ?", &values)
        .unwrap();

    let rows = db.rows(
        "SELECT id, home, work, past FROM users WHERE id IN (1, 2)",
        &SerializedValues::default(),
    );
    let types = column_types(rows.metadata());
    // The test cluster's own metadata keeps what the schema says (the
    // `[option]` encoding on the wire drops it).
    assert_eq!(types[1], address_type().into_frozen());
    assert_eq!(types[2], address_type());
    assert_eq!(types[3], ColumnType::list(address_type().into_frozen()));
    let mut got = decode(&rows);
    got.sort_by_key(|r| format!("{:?}", r[0]));
    assert_eq!(
        got,
        vec![
            vec![
                Some(CqlValue::Int(1)),
                Some(address("1 Main St", Some("Oslo"))),
                None,
                Some(CqlValue::List(vec![
                    address("a", None),
                    address("b", Some("c"))
                ])),
            ],
            vec![
                Some(CqlValue::Int(2)),
                None,
                Some(address("2 High St", None)),
                None,
            ],
        ]
    );

    // Errors: an unknown field, an unknown type, a non-frozen UDT key.
    assert!(db
        .err("INSERT INTO users (id, home) VALUES (3, {street: 'x', zip: 1})")
        .contains("Unknown field 'zip'"));
    assert!(db
        .err("CREATE TABLE t2 (id int PRIMARY KEY, x nosuchtype)")
        .contains("nosuchtype"));
    assert!(db
        .err("CREATE TABLE t3 (a address PRIMARY KEY)")
        .contains("non-frozen"));
}

#[test]
fn udt_prepared_metadata_and_schema_rows() {
    let db = Db::new();
    db.ok("CREATE TYPE ks.point (x int, y int)");
    db.ok("CREATE TYPE ks.shape (name text, corners list<frozen<point>>, centre frozen<point>)");
    db.ok("CREATE TABLE ks.drawings (id int PRIMARY KEY, s frozen<shape>, tags map<text, frozen<point>>)");

    let prepared =
        db.h.prepare(
            &db.ctx,
            "INSERT INTO drawings (id, s) VALUES (?, ?)",
            Some("ks".into()),
        )
        .unwrap();
    let ResultBody::Prepared(p) = prepared else {
        panic!("{prepared:?}")
    };
    let ColumnType::UserDefinedType { definition, .. } = &p.metadata.col_specs[1].typ else {
        panic!("{:?}", p.metadata.col_specs[1])
    };
    let fields = &definition.field_types;
    assert_eq!(definition.name, "shape");
    assert_eq!(fields[1].0, "corners");
    assert!(matches!(
        &fields[1].1,
        ColumnType::Collection { typ: CollectionType::List(e), .. }
            if matches!(&**e, ColumnType::UserDefinedType { definition, .. } if definition.name == "point")
    ));

    let types = db.rows(
        "SELECT type_name, field_names, field_types FROM system_schema.types WHERE keyspace_name = 'ks'",
        &SerializedValues::default(),
    );
    let list = |v: &[&str]| Some(CqlValue::List(v.iter().map(|s| text(s).unwrap()).collect()));
    assert_eq!(
        decode(&types),
        vec![
            vec![text("point"), list(&["x", "y"]), list(&["int", "int"])],
            vec![
                text("shape"),
                list(&["name", "corners", "centre"]),
                list(&["text", "list<frozen<point>>", "frozen<point>"]),
            ],
        ]
    );
    let columns = db.rows(
        "SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = 'ks'",
        &SerializedValues::default(),
    );
    assert_eq!(
        decode(&columns),
        vec![
            vec![text("id"), text("int")],
            vec![text("s"), text("frozen<shape>")],
            vec![text("tags"), text("map<text, frozen<point>>")],
        ]
    );

    // Dropping a type in use fails; unused, it goes.
    assert!(db.err("DROP TYPE point").contains("still used by"));
    db.ok("DROP TABLE drawings");
    assert!(db
        .err("DROP TYPE point")
        .contains("still used by user type shape"));
    db.ok("DROP TYPE shape");
    db.ok("DROP TYPE ks.point");
    db.ok("DROP TYPE IF EXISTS ks.point");
    assert!(db.err("DROP TYPE point").contains("No user type"));
    let types = db.rows(
        "SELECT * FROM system_schema.types",
        &SerializedValues::default(),
    );
    assert_eq!(types.rows_count(), 0);
}

fn vector(v: &[f32]) -> CqlValue {
    CqlValue::Vector(v.iter().map(|x| CqlValue::Float(*x)).collect())
}

fn vector_db(similarity: &str) -> Db {
    let db = Db::new();
    db.ok("CREATE TABLE items (id int PRIMARY KEY, v vector<float, 3>)");
    db.ok(&format!(
        "CREATE CUSTOM INDEX items_v ON items (v) USING 'sai' \
         WITH OPTIONS = {{'similarity_function': '{similarity}'}}"
    ));
    for (id, v) in [
        (1, "[1.0, 0.0, 0.0]"),
        (2, "[0.0, 1.0, 0.0]"),
        (3, "[0.9, 0.1, 0.0]"),
        (4, "[-1.0, 0.0, 0.0]"),
        (5, "[3.0, 0.5, 0.0]"),
    ] {
        db.ok(&format!("INSERT INTO items (id, v) VALUES ({id}, {v})"));
    }
    db.ok("INSERT INTO items (id) VALUES (6)");
    db
}

fn ann_ids(db: &Db, query: &[f32], k: i32) -> Vec<i32> {
    let t = ColumnType::from_cql("vector<float, 3>").unwrap();
    let values = bound(&[
        (vector(query), t),
        (CqlValue::Int(k), ColumnType::Native(NativeType::Int)),
    ]);
    let rows = db.rows(
        "SELECT id, v FROM items ORDER BY v ANN OF ? LIMIT ?",
        &values,
    );
    decode(&rows)
        .into_iter()
        .map(|r| match &r[0] {
            Some(CqlValue::Int(i)) => *i,
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn ann_returns_the_nearest_rows_first() {
    // Cosine: direction only (3 is nearer the x axis than the longer 5).
    let db = vector_db("cosine");
    assert_eq!(ann_ids(&db, &[1.0, 0.0, 0.0], 3), vec![1, 3, 5]);
    assert_eq!(ann_ids(&db, &[0.0, 2.0, 0.0], 1), vec![2]);
    // More than there are vectors: every row with one (6 has none).
    assert_eq!(ann_ids(&db, &[1.0, 0.0, 0.0], 100).len(), 5);
    // Euclidean: distance (5 is far from the query).
    let db = vector_db("EUCLIDEAN");
    assert_eq!(ann_ids(&db, &[1.0, 0.0, 0.0], 3), vec![1, 3, 2]);
    // Dot product: magnitude counts (5 is longest along x).
    let db = vector_db("dot_product");
    assert_eq!(ann_ids(&db, &[1.0, 0.0, 0.0], 2), vec![5, 1]);

    // The result metadata has the vector type; a literal query works too.
    let rows = db.rows(
        "SELECT v FROM items ORDER BY v ANN OF [0.0, 1.0, 0.0] LIMIT 1",
        &SerializedValues::default(),
    );
    assert_eq!(
        column_types(rows.metadata()),
        vec![ColumnType::from_cql("vector<float, 3>").unwrap()]
    );
    assert_eq!(decode(&rows), vec![vec![Some(vector(&[0.0, 1.0, 0.0]))]]);
    // The index appears in system_schema.indexes.
    let idx = db.rows(
        "SELECT index_name, kind, options FROM system_schema.indexes",
        &SerializedValues::default(),
    );
    let got = format!("{:?}", decode(&idx));
    assert!(
        got.contains("items_v") && got.contains("dot_product"),
        "{got}"
    );
}

#[test]
fn ann_pages_in_similarity_order() {
    let db = vector_db("cosine");
    let t = ColumnType::from_cql("vector<float, 3>").unwrap();
    let values = bound(&[(vector(&[1.0, 0.0, 0.0]), t)]);
    let st = parse("SELECT id FROM items ORDER BY v ANN OF ? LIMIT 5").unwrap();
    let mut opts = PageOpts {
        page_size: Some(2),
        ..PageOpts::default()
    };
    let mut ids = Vec::new();
    for _ in 0..10 {
        let out =
            db.h.run_unaccounted(&db.ctx, Some("ks"), &st, &values, &opts)
                .unwrap();
        let ResultBody::Rows(rows) = out.result else {
            panic!()
        };
        assert!(rows.rows_count() <= 2);
        ids.extend(decode(&rows).into_iter().map(|r| format!("{:?}", r[0])));
        match rows.paging_state() {
            Some(s) => opts.paging_state = Some(s.to_vec()),
            None => break,
        }
    }
    let all = ann_ids(&db, &[1.0, 0.0, 0.0], 5);
    let want: Vec<String> = all
        .iter()
        .map(|i| format!("{:?}", Some(CqlValue::Int(*i))))
        .collect();
    assert_eq!(ids, want);
}

#[test]
fn ann_errors_read_as_cassandra_s() {
    let db = Db::new();
    db.ok("CREATE TABLE items (id int PRIMARY KEY, v vector<float, 3>, n int)");
    db.ok("INSERT INTO items (id, v) VALUES (1, [1.0, 0.0, 0.0])");
    let q = "SELECT id FROM items ORDER BY v ANN OF [1.0, 0.0, 0.0] LIMIT 2";
    assert_eq!(db.err(q), index::ANN_REQUIRES_INDEX);
    let prepared = db.h.prepare(&db.ctx, q, Some("ks".into()));
    assert!(matches!(prepared, Err(CqlError::Invalid(m)) if m == index::ANN_REQUIRES_INDEX));
    db.ok("CREATE CUSTOM INDEX ON items (v) USING 'StorageAttachedIndex'");
    assert_eq!(
        db.err("SELECT id FROM items ORDER BY v ANN OF [1.0, 0.0, 0.0]"),
        index::limit_error(None)
    );
    assert!(db
        .err("SELECT id FROM items ORDER BY v ANN OF [1.0, 0.0, 0.0] LIMIT 1001")
        .ends_with("LIMIT was 1001"));
    assert!(db
        .err("SELECT id FROM items ORDER BY v ANN OF [1.0, 0.0] LIMIT 1")
        .contains("expected 3 elements"));
    assert!(db
        .err("SELECT id FROM items ORDER BY v ANN OF [0.0, 0.0, 0.0] LIMIT 1")
        .contains("Zero"));
    assert!(db
        .err("SELECT id FROM items ORDER BY n ANN OF [1.0, 0.0, 0.0] LIMIT 1")
        .contains("float vector"));
    assert!(db
        .err("CREATE CUSTOM INDEX other ON items (v) USING 'org.example.Nope'")
        .contains("Unable to find custom indexer class"));
    assert!(db
        .err("CREATE CUSTOM INDEX i2 ON items (n) USING 'sai' WITH OPTIONS = {'similarity_function': 'cosine'}")
        .contains("only supported on vector columns"));
    assert!(db
        .err("CREATE CUSTOM INDEX items_v_idx ON items (v) USING 'sai'")
        .contains("already exists"));
    db.ok("CREATE CUSTOM INDEX IF NOT EXISTS items_v_idx ON items (v) USING 'sai'");
    db.ok("DROP INDEX ks.items_v_idx");
    assert_eq!(db.err(q), index::ANN_REQUIRES_INDEX);
    db.ok("DROP INDEX IF EXISTS items_v_idx");
    // A bound vector of the wrong length is refused before it is stored.
    let mut values = SerializedValues::default();
    values.push(RawValue::Value(&[0, 0, 0, 2])).unwrap();
    values.push(RawValue::Value(&[0; 8])).unwrap();
    let e = db
        .run("INSERT INTO items (id, v) VALUES (?, ?)", &values)
        .unwrap_err();
    assert!(format!("{e:?}").contains("Expected 12 bytes"), "{e:?}");
}
