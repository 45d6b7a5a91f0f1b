//! Rows serialized by hand as programs written for the official crate do
//! it: `SerializeRow::serialize` with a `RowSerializationContext` and a
//! `RowWriter` (an ORM's boxed row delegating to its inner values,
//! `is_empty` included), mixed with rows this crate's derive writes; run
//! against the test cluster and read back.

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::cluster::metadata::{ColumnType, NativeType};
use scylla::errors::SerializationError;
use scylla::frame::response::result::ColumnSpec;
use scylla::serialize::row::{RowSerializationContext, SerializeRow, SerializedValues};
use scylla::serialize::value::SerializeValue;
use scylla::serialize::writers::RowWriter;
use scylla_testbed::TestCluster;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// A row written value by value through the writer, as an adapter does.
struct KeyAndName {
    k: i32,
    name: String,
}

impl SerializeRow for KeyAndName {
    fn serialize(
        &self,
        ctx: &RowSerializationContext<'_>,
        writer: &mut RowWriter<'_>,
    ) -> Result<(), SerializationError> {
        let [k, name] = ctx.columns() else {
            panic!("two bind markers expected, got {}", ctx.columns().len());
        };
        SerializeValue::serialize(&self.k, &k.typ, writer.make_cell_writer())?;
        SerializeValue::serialize(&self.name, &name.typ, writer.make_cell_writer())?;
        Ok(())
    }

    fn is_empty(&self) -> bool {
        false
    }
}

/// A row of this crate's derive.
#[derive(scylla::SerializeRow)]
struct Derived {
    k: i32,
    name: String,
}

/// A boxed row that hands the work to whatever it holds, as an ORM's
/// query wrapper does (through the official methods only).
struct Boxed<'a>(&'a (dyn SerializeRow + Send + Sync));

impl SerializeRow for Boxed<'_> {
    fn serialize(
        &self,
        ctx: &RowSerializationContext<'_>,
        writer: &mut RowWriter<'_>,
    ) -> Result<(), SerializationError> {
        self.0.serialize(ctx, writer)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_written_through_the_row_writer() -> Result<(), Error> {
    let cluster = TestCluster::builder().nodes(1).shards(2).start().await?;
    let node = cluster.cql_addrs()[0].to_string();
    let session: Session = SessionBuilder::new().known_node(&node).build().await?;
    session
        .query_unpaged(
            "CREATE KEYSPACE rw WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await?;
    session
        .query_unpaged("CREATE TABLE rw.t (k int PRIMARY KEY, name text)", &[])
        .await?;
    let insert = session
        .prepare("INSERT INTO rw.t (k, name) VALUES (?, ?)")
        .await?;

    let by_hand = KeyAndName {
        k: 1,
        name: "by hand".into(),
    };
    let derived = Derived {
        k: 2,
        name: "derived".into(),
    };
    session.execute_unpaged(&insert, &by_hand).await?;
    session.execute_unpaged(&insert, Boxed(&by_hand)).await?;
    session.execute_unpaged(&insert, Boxed(&derived)).await?;
    // Unprepared, with values: prepared implicitly, the same path.
    session
        .query_unpaged(
            "INSERT INTO rw.t (k, name) VALUES (?, ?)",
            Boxed(&KeyAndName {
                k: 3,
                name: "unprepared".into(),
            }),
        )
        .await?;

    let rows: Vec<(i32, String)> = session
        .query_unpaged("SELECT k, name FROM rw.t", &[])
        .await?
        .into_rows_result()?
        .rows::<(i32, String)>()?
        .collect::<Result<_, _>>()?;
    let mut rows = rows;
    rows.sort();
    assert_eq!(
        rows,
        [
            (1, "by hand".to_owned()),
            (2, "derived".to_owned()),
            (3, "unprepared".to_owned())
        ]
    );

    // `is_empty` through both forms.
    assert!(!Boxed(&by_hand).is_empty());
    assert!(!Boxed(&derived).is_empty());
    assert!(Boxed(&()).is_empty());
    Ok(())
}

#[test]
fn both_forms_write_the_same_bytes_and_a_failed_row_leaves_nothing() {
    let spec = |name: &str, typ| ColumnSpec {
        keyspace: "rw".into(),
        table: "t".into(),
        name: name.into(),
        typ: ColumnType::Native(typ),
    };
    let specs = [spec("k", NativeType::Int), spec("name", NativeType::Text)];
    let by_hand = KeyAndName {
        k: 7,
        name: "x".into(),
    };
    let derived = Derived {
        k: 7,
        name: "x".into(),
    };
    let mut a = SerializedValues::new();
    by_hand.serialize_row(&specs, &mut a).unwrap();
    let mut b = SerializedValues::new();
    let mut writer = RowWriter::new(&mut b);
    derived
        .serialize(&RowSerializationContext::from_specs(&specs), &mut writer)
        .unwrap();
    assert_eq!(writer.value_count(), 2);
    assert_eq!(a.as_bytes(), b.as_bytes());
    assert_eq!(a.len(), 2);

    // The second value does not fit its marker (text for an int): the row
    // fails, and what its first value wrote is taken back.
    let wrong = [specs[0].clone(), specs[0].clone()];
    let mut c = SerializedValues::new();
    c.push_serialized(|w| SerializeValue::serialize(&1i32, &specs[0].typ, w))
        .unwrap();
    let before = c.as_bytes().to_vec();
    assert!(by_hand.serialize_row(&wrong, &mut c).is_err());
    assert_eq!(c.as_bytes(), before);
    assert_eq!(c.len(), 1);
}
