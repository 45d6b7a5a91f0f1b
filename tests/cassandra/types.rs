//! Every CQL type through a table: bound by prepared statements as typed
//! Rust values, read back typed and as `CqlValue`, written again from the
//! `CqlValue`s; nulls, unset values, counters, a UDT and `vector<float, 4>`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use scylla_cql::types::deserialize::udt::UdtIterator;
use scylla_cql::types::serialize::writers::{CellWriter, WrittenCellProof};
use scylla_cql::types::serialize::{serialize_udt, SerializeValue};
use scylla_cql::types::{
    ColumnType, Counter, CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp, CqlValue,
    CqlVarint, DeserializationError, DeserializeValue, Row, SerializationError, TypeCheckError,
    Unset,
};
use uuid::Uuid;

use crate::{create_keyspace, ddl, drop_keyspace, require, session};

/// A user struct mapped to the UDT `address` with the UDT helpers.
#[derive(Debug, Clone, PartialEq)]
struct Address {
    street: String,
    number: Option<i32>,
    zips: Vec<i32>,
}

impl SerializeValue for Address {
    fn serialize<'b>(
        &self,
        typ: &ColumnType,
        writer: CellWriter<'b>,
    ) -> Result<WrittenCellProof<'b>, SerializationError> {
        serialize_udt::<Self, _>(
            typ,
            writer,
            [
                ("street", &self.street as &dyn SerializeValue),
                ("number", &self.number),
                ("zips", &self.zips),
            ],
        )
    }
}

impl<'f, 'm> DeserializeValue<'f, 'm> for Address {
    fn type_check(typ: &ColumnType) -> Result<(), TypeCheckError> {
        match typ {
            ColumnType::UserDefinedType { definition, .. }
                if definition.field_types.iter().any(|(n, _)| n == "street") =>
            {
                Ok(())
            }
            _ => Err(TypeCheckError::of::<Self>(
                typ,
                scylla_cql::types::TypeCheckErrorKind::Mismatch,
            )),
        }
    }
    fn deserialize(typ: &ColumnType, v: Option<&'f [u8]>) -> Result<Self, DeserializationError> {
        let mut a = Address {
            street: String::new(),
            number: None,
            zips: Vec::new(),
        };
        for field in UdtIterator::new::<Self>(typ, v)? {
            let (name, ftype, value) = field?;
            match name {
                "street" => a.street = String::deserialize(ftype, value)?,
                "number" => a.number = Option::<i32>::deserialize(ftype, value)?,
                "zips" => {
                    a.zips = Option::<Vec<i32>>::deserialize(ftype, value)?.unwrap_or_default()
                }
                _ => {}
            }
        }
        Ok(a)
    }
}

/// One row of the table, typed.
#[derive(Debug, Clone, PartialEq)]
struct AllTypes {
    k: i32,
    a: String,
    b: i64,
    bl: Vec<u8>,
    bo: bool,
    d: CqlDate,
    de: CqlDecimal,
    db: f64,
    du: CqlDuration,
    f: f32,
    i4: IpAddr,
    i6: IpAddr,
    i: i32,
    si: i16,
    t: String,
    tm: CqlTime,
    ts: CqlTimestamp,
    tu: Uuid,
    ti: i8,
    u: Uuid,
    vi: CqlVarint,
    vh: CqlVarint,
    l: Vec<i32>,
    s: BTreeSet<String>,
    m: BTreeMap<String, i32>,
    fl: Vec<i32>,
    fs: BTreeSet<i32>,
    fm: HashMap<i32, String>,
    tup: (i32, String, Option<bool>),
    addr: Address,
    addr2: Address,
    v: [f32; 4],
}

scylla_cql::impl_deserialize_row!(AllTypes {
    k: i32,
    a: String,
    b: i64,
    bl: Vec<u8>,
    bo: bool,
    d: CqlDate,
    de: CqlDecimal,
    db: f64,
    du: CqlDuration,
    f: f32,
    i4: IpAddr,
    i6: IpAddr,
    i: i32,
    si: i16,
    t: String,
    tm: CqlTime,
    ts: CqlTimestamp,
    tu: Uuid,
    ti: i8,
    u: Uuid,
    vi: CqlVarint,
    vh: CqlVarint,
    l: Vec<i32>,
    s: BTreeSet<String>,
    m: BTreeMap<String, i32>,
    fl: Vec<i32>,
    fs: BTreeSet<i32>,
    fm: HashMap<i32, String>,
    tup: (i32, String, Option<bool>),
    addr: Address,
    addr2: Address,
    v: [f32; 4],
});

const COLUMNS: &str =
    "k, a, b, bl, bo, d, de, db, du, f, i4, i6, i, si, t, tm, ts, tu, ti, u, vi, vh, \
                       l, s, m, fl, fs, fm, tup, addr, addr2, v";

fn huge_varint() -> CqlVarint {
    // -(2^200 + 12345): 26 bytes, far beyond any fixed-size integer.
    let mut bytes = vec![0xffu8; 26];
    bytes[0] = 0xfe;
    bytes[24] = 0xcf;
    bytes[25] = 0xc7;
    CqlVarint::from_signed_bytes_be_slice(&bytes)
}

fn sample(k: i32) -> AllTypes {
    AllTypes {
        k,
        a: "plain ascii ~!".into(),
        b: i64::MIN + 1,
        bl: vec![0, 1, 2, 0xff, 0xfe],
        bo: true,
        d: CqlDate::from_unix_days(-719_162), // 0001-01-01
        de: CqlDecimal {
            unscaled: CqlVarint::from_signed_bytes_be_slice(&[
                0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x12,
            ]),
            scale: 17,
        },
        db: -1.5e300,
        du: CqlDuration {
            months: 14,
            days: 3,
            nanoseconds: 4 * 3_600_000_000_000 + 5,
        },
        f: 3.25,
        i4: IpAddr::V4(Ipv4Addr::new(192, 168, 7, 250)),
        i6: IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0xff00, 0x42, 0x8329)),
        i: -2_000_000_000,
        si: -32_768,
        t: "zażółć gęślą jaźń — 日本語 🦀".into(),
        tm: CqlTime::new(23 * 3_600_000_000_000 + 59 * 60_000_000_000 + 123_456_789).unwrap(),
        ts: CqlTimestamp(1_700_000_000_123),
        tu: Uuid::parse_str("d2177dd0-eaa2-11de-a572-001b779c76e6").unwrap(),
        ti: -128,
        u: Uuid::parse_str("7c9e6679-7425-40de-944b-e07fc1f90ae7").unwrap(),
        vi: CqlVarint::from_signed_bytes_be_slice(&[0x7f, 0xff]),
        vh: huge_varint(),
        l: vec![3, 1, 2, 1],
        s: ["b".to_string(), "a".to_string(), "ć".to_string()].into(),
        m: [("one".to_string(), 1), ("two".to_string(), 2)].into(),
        fl: vec![10, 20],
        fs: [5, -5].into(),
        fm: [(1, "x".to_string()), (-1, "y".to_string())].into(),
        tup: (7, "seven".into(), None),
        addr: Address {
            street: "Main St".into(),
            number: Some(12),
            zips: vec![1000, 2000],
        },
        addr2: Address {
            street: "Side St".into(),
            number: None,
            zips: vec![],
        },
        v: [1.0, -2.5, 0.125, f32::MAX],
    }
}

fn bind(r: &AllTypes) -> Vec<&dyn SerializeValue> {
    vec![
        &r.k, &r.a, &r.b, &r.bl, &r.bo, &r.d, &r.de, &r.db, &r.du, &r.f, &r.i4, &r.i6, &r.i, &r.si,
        &r.t, &r.tm, &r.ts, &r.tu, &r.ti, &r.u, &r.vi, &r.vh, &r.l, &r.s, &r.m, &r.fl, &r.fs,
        &r.fm, &r.tup, &r.addr, &r.addr2, &r.v,
    ]
}

/// What `SELECT *` must return for `sample(k)` as `CqlValue`s, by column.
fn expected_cql_values(r: &AllTypes, ks: &str) -> Vec<(&'static str, CqlValue)> {
    let text = |s: &str| CqlValue::Text(s.to_owned());
    let udt = |a: &Address| CqlValue::UserDefinedType {
        keyspace: ks.to_owned(),
        name: "address".into(),
        fields: vec![
            ("street".into(), Some(text(&a.street))),
            ("number".into(), a.number.map(CqlValue::Int)),
            (
                "zips".into(),
                if a.zips.is_empty() {
                    None // Cassandra stores an empty frozen list in a UDT field as null? (checked below)
                } else {
                    Some(CqlValue::List(
                        a.zips.iter().map(|z| CqlValue::Int(*z)).collect(),
                    ))
                },
            ),
        ],
    };
    vec![
        ("k", CqlValue::Int(r.k)),
        ("a", CqlValue::Ascii(r.a.clone())),
        ("b", CqlValue::BigInt(r.b)),
        ("bl", CqlValue::Blob(r.bl.clone())),
        ("bo", CqlValue::Boolean(r.bo)),
        ("d", CqlValue::Date(r.d)),
        ("de", CqlValue::Decimal(r.de.clone())),
        ("db", CqlValue::Double(r.db)),
        ("du", CqlValue::Duration(r.du)),
        ("f", CqlValue::Float(r.f)),
        ("i4", CqlValue::Inet(r.i4)),
        ("i6", CqlValue::Inet(r.i6)),
        ("i", CqlValue::Int(r.i)),
        ("si", CqlValue::SmallInt(r.si)),
        ("t", text(&r.t)),
        ("tm", CqlValue::Time(r.tm)),
        ("ts", CqlValue::Timestamp(r.ts)),
        ("tu", CqlValue::Timeuuid(r.tu.into())),
        ("ti", CqlValue::TinyInt(r.ti)),
        ("u", CqlValue::Uuid(r.u)),
        ("vi", CqlValue::Varint(r.vi.clone())),
        ("vh", CqlValue::Varint(r.vh.clone())),
        (
            "l",
            CqlValue::List(r.l.iter().map(|x| CqlValue::Int(*x)).collect()),
        ),
        // Sets and maps come back sorted by the server.
        ("s", CqlValue::Set(r.s.iter().map(|x| text(x)).collect())),
        (
            "m",
            CqlValue::Map(
                r.m.iter()
                    .map(|(k, v)| (text(k), CqlValue::Int(*v)))
                    .collect(),
            ),
        ),
        (
            "fl",
            CqlValue::List(r.fl.iter().map(|x| CqlValue::Int(*x)).collect()),
        ),
        (
            "fs",
            CqlValue::Set(r.fs.iter().map(|x| CqlValue::Int(*x)).collect()),
        ),
        (
            "fm",
            CqlValue::Map({
                let sorted: BTreeMap<_, _> = r.fm.iter().collect();
                sorted
                    .into_iter()
                    .map(|(k, v)| (CqlValue::Int(*k), text(v)))
                    .collect()
            }),
        ),
        (
            "tup",
            CqlValue::Tuple(vec![
                Some(CqlValue::Int(r.tup.0)),
                Some(text(&r.tup.1)),
                r.tup.2.map(CqlValue::Boolean),
            ]),
        ),
        ("addr", udt(&r.addr)),
        ("addr2", udt(&r.addr2)),
        (
            "v",
            CqlValue::Vector(r.v.iter().map(|x| CqlValue::Float(*x)).collect()),
        ),
    ]
}

async fn setup(session: &scylla_driver::Session, ks: &str) {
    ddl(
        session,
        &format!("CREATE TYPE {ks}.address (street text, number int, zips frozen<list<int>>)"),
    )
    .await;
    ddl(
        session,
        &format!(
            "CREATE TABLE {ks}.all_types (k int PRIMARY KEY, a ascii, b bigint, bl blob, bo boolean, \
             d date, de decimal, db double, du duration, f float, i4 inet, i6 inet, i int, si smallint, \
             t text, tm time, ts timestamp, tu timeuuid, ti tinyint, u uuid, vi varint, vh varint, \
             l list<int>, s set<text>, m map<text, int>, fl frozen<list<int>>, fs frozen<set<int>>, \
             fm frozen<map<int, text>>, tup tuple<int, text, boolean>, addr frozen<address>, \
             addr2 address, v vector<float, 4>)"
        ),
    )
    .await;
    ddl(
        session,
        &format!("CREATE TABLE {ks}.counters (k int PRIMARY KEY, c counter)"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn every_type_round_trips() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks = create_keyspace(&session, "types", 1).await;
    setup(&session, &ks).await;

    let marks = vec!["?"; COLUMNS.split(',').count()].join(", ");
    let insert = session
        .prepare(format!(
            "INSERT INTO {ks}.all_types ({COLUMNS}) VALUES ({marks})"
        ))
        .await
        .unwrap();
    let row = sample(1);
    session.execute_unpaged(&insert, bind(&row)).await.unwrap();

    // Typed.
    let select = session
        .prepare(format!("SELECT {COLUMNS} FROM {ks}.all_types WHERE k = ?"))
        .await
        .unwrap();
    let back: AllTypes = session
        .execute_unpaged(&select, (1,))
        .await
        .unwrap()
        .single_row()
        .unwrap();
    // An empty frozen list inside a UDT is stored as an empty value; it reads
    // back as empty either way.
    assert_eq!(back, row);

    // The vector also as Vec<f32>.
    let r = session
        .query_unpaged(format!("SELECT v FROM {ks}.all_types WHERE k = ?"), (1,))
        .await
        .unwrap();
    let (v,): (Vec<f32>,) = r.single_row().unwrap();
    assert_eq!(v, row.v.to_vec());

    // As CqlValue, by column name.
    let r = session
        .query_unpaged(
            format!("SELECT {COLUMNS} FROM {ks}.all_types WHERE k = 1"),
            (),
        )
        .await
        .unwrap();
    let names: Vec<String> = r.columns().iter().map(|c| c.name.clone()).collect();
    let values: Row = r.single_row().unwrap();
    let got: HashMap<&str, Option<CqlValue>> = names
        .iter()
        .map(String::as_str)
        .zip(values.columns.iter().cloned())
        .collect();
    for (name, want) in expected_cql_values(&row, &ks) {
        let have = got.get(name).cloned().flatten();
        if name == "addr2" {
            // The empty `zips` of addr2: null or an empty list are both fine.
            let CqlValue::UserDefinedType { fields, .. } = have.clone().unwrap() else {
                panic!("addr2 is not a UDT: {have:?}");
            };
            assert_eq!(
                fields[0],
                ("street".to_string(), Some(CqlValue::Text("Side St".into())))
            );
            assert_eq!(fields[1], ("number".to_string(), None));
            assert!(
                match &fields[2].1 {
                    None => true,
                    Some(CqlValue::List(l)) => l.is_empty(),
                    _ => false,
                },
                "{fields:?}"
            );
            continue;
        }
        assert_eq!(have.as_ref(), Some(&want), "column {name}");
    }

    // CqlValues written back (k = 2) read back equal.
    let mut again = values.columns.clone();
    again[0] = Some(CqlValue::Int(2));
    session.execute_unpaged(&insert, again).await.unwrap();
    let copy: AllTypes = session
        .execute_unpaged(&select, (2,))
        .await
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!(
        copy,
        AllTypes {
            k: 2,
            ..row.clone()
        }
    );

    drop_keyspace(&session, &ks).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn nulls_unset_and_counters() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks = create_keyspace(&session, "nulls", 1).await;
    setup(&session, &ks).await;

    // Nulls: every column but the key bound as None.
    let n = COLUMNS.split(',').count();
    let marks = vec!["?"; n].join(", ");
    let insert = session
        .prepare(format!(
            "INSERT INTO {ks}.all_types ({COLUMNS}) VALUES ({marks})"
        ))
        .await
        .unwrap();
    let mut nulls: Vec<Option<CqlValue>> = vec![None; n];
    nulls[0] = Some(CqlValue::Int(7));
    session.execute_unpaged(&insert, nulls).await.unwrap();
    let r = session
        .query_unpaged(
            format!("SELECT {COLUMNS} FROM {ks}.all_types WHERE k = 7"),
            (),
        )
        .await
        .unwrap();
    let row: Row = r.single_row().unwrap();
    assert_eq!(row.columns[0], Some(CqlValue::Int(7)));
    assert!(row.columns[1..].iter().all(Option::is_none), "{row:?}");
    // Typed as Option<T>.
    type Nullable = (
        Option<String>,
        Option<Vec<i32>>,
        Option<Address>,
        Option<[f32; 4]>,
    );
    let (t, l, addr, v): Nullable = session
        .query_unpaged(
            format!("SELECT t, l, addr, v FROM {ks}.all_types WHERE k = 7"),
            (),
        )
        .await
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!((t, l, addr, v), (None, None, None, None));
    // Typed without Option: a clear error, not garbage.
    let r = session
        .query_unpaged(format!("SELECT i FROM {ks}.all_types WHERE k = 7"), ())
        .await
        .unwrap();
    assert!(r.single_row::<(i32,)>().is_err());

    // Unset: the bound column keeps its value.
    let upsert = session
        .prepare(format!(
            "INSERT INTO {ks}.all_types (k, t, i) VALUES (?, ?, ?)"
        ))
        .await
        .unwrap();
    session
        .execute_unpaged(&upsert, (8, "kept", 1))
        .await
        .unwrap();
    session
        .execute_unpaged(&upsert, (8, Unset, 2))
        .await
        .unwrap();
    let (t, i): (String, i32) = session
        .query_unpaged(format!("SELECT t, i FROM {ks}.all_types WHERE k = 8"), ())
        .await
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!((t.as_str(), i), ("kept", 2));
    // ...while None overwrites it with null.
    session
        .execute_unpaged(&upsert, (8, None::<&str>, 3))
        .await
        .unwrap();
    let (t, i): (Option<String>, i32) = session
        .query_unpaged(format!("SELECT t, i FROM {ks}.all_types WHERE k = 8"), ())
        .await
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!((t, i), (None, 3));

    // Counters.
    let bump = session
        .prepare(format!("UPDATE {ks}.counters SET c = c + ? WHERE k = ?"))
        .await
        .unwrap();
    session
        .execute_unpaged(&bump, (Counter(5), 1))
        .await
        .unwrap();
    session.execute_unpaged(&bump, (-2i64, 1)).await.unwrap();
    session
        .execute_unpaged(&bump, (i64::MAX / 2, 2))
        .await
        .unwrap();
    let r = session
        .query_unpaged(format!("SELECT k, c FROM {ks}.counters"), ())
        .await
        .unwrap();
    let mut rows: Vec<(i32, Counter)> = r.into_rows().unwrap();
    rows.sort();
    assert_eq!(rows, vec![(1, Counter(3)), (2, Counter(i64::MAX / 2))]);
    let r = session
        .query_unpaged(format!("SELECT c FROM {ks}.counters WHERE k = 1"), ())
        .await
        .unwrap();
    let (c,): (CqlValue,) = r.single_row().unwrap();
    assert_eq!(c, CqlValue::Counter(Counter(3)));

    drop_keyspace(&session, &ks).await;
}
