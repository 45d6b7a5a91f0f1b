//! Everyday code written the way programs for the official `scylla` 1.x
//! crate write it, run against the in-process test cluster: the
//! `client::{session, session_builder, execution_profile}` paths, `&[]` for
//! "no values", `query_iter(..).await?.rows_stream::<T>()?`,
//! `into_rows_result()?` with `rows` / `single_row` / `first_row` /
//! `maybe_first_row`, `set_page_size`, paging by hand with `PagingState`, a
//! batch of prepared and unprepared statements, and an execution profile
//! handle on a statement and as a session's default.
//!
//! The driver is the dependency `scylla` here (see `Cargo.toml`): apart from
//! the test cluster (`scylla_testbed`), the file is a program for the
//! official crate, built unchanged.
#![allow(clippy::unwrap_used, missing_docs)]

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::deserialize::value::DeserializeValue;
use scylla::deserialize::{DeserializationError, FrameSlice, TypeCheckError};
use scylla::frame::response::result::ColumnType;
use scylla::response::PagingState;
use scylla::statement::batch::Batch;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::unprepared::Statement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::{CqlValue, Row};
use scylla::{DeserializeRow, SerializeRow};
use scylla_testbed::{Faults, TestCluster};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, PartialEq, DeserializeRow)]
struct Entry {
    id: i32,
    n: i32,
    label: String,
}

#[derive(SerializeRow)]
struct NewEntry<'a> {
    id: i32,
    n: i32,
    label: &'a str,
}

/// A `text` value read by hand, borrowing from the response, written as for
/// the official crate's two-lifetime trait.
#[derive(Debug, PartialEq)]
struct Label<'a>(&'a str);

impl<'frame, 'metadata, 'a> DeserializeValue<'frame, 'metadata> for Label<'a>
where
    'frame: 'a,
{
    fn type_check(typ: &scylla::cluster::metadata::ColumnType) -> Result<(), TypeCheckError> {
        <&str as DeserializeValue<'frame, 'metadata>>::type_check(typ)
    }

    // Both official paths of the type, with its lifetime.
    fn deserialize(
        typ: &'metadata scylla::cluster::metadata::ColumnType<'metadata>,
        v: Option<FrameSlice<'frame>>,
    ) -> Result<Self, DeserializationError> {
        let _: &ColumnType<'metadata> = typ;
        <&str as DeserializeValue<'frame, 'metadata>>::deserialize(typ, v).map(Label)
    }
}

/// A row with the hand-written value in it.
#[derive(Debug, DeserializeRow)]
struct Labelled<'a> {
    n: i32,
    label: Label<'a>,
}

/// The text in column `i` of an untyped row.
fn text(row: &Row, i: usize) -> String {
    match &row.columns[i] {
        Some(CqlValue::Text(s)) => s.clone(),
        other => panic!("column {i} is not text: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everyday_code_in_the_official_crates_style() -> Result<(), Error> {
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(2)
        .start()
        .await
        .expect("test cluster starts");
    let node = cluster.cql_addrs()[0].to_string();
    let session: Session = SessionBuilder::new().known_node(&node).build().await?;

    session
        .query_unpaged(
            "CREATE KEYSPACE compat WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE compat.entries (id int, n int, label text, PRIMARY KEY (id, n))",
            &[],
        )
        .await?;

    // Prepared inserts, with a tuple and with a derived struct.
    let insert: PreparedStatement = session
        .prepare("INSERT INTO compat.entries (id, n, label) VALUES (?, ?, ?)")
        .await?;
    for n in 0..10 {
        session
            .execute_unpaged(&insert, (1, n, format!("row {n}")))
            .await?;
    }
    let two = NewEntry {
        id: 2,
        n: 0,
        label: "two",
    };
    session.execute_unpaged(&insert, two).await?;

    // A batch: two prepared statements with values, one literal without.
    let mut batch = Batch::default();
    batch.append_statement(insert.clone());
    batch.append_statement(insert.clone());
    batch.append_statement("INSERT INTO compat.entries (id, n, label) VALUES (3, 0, 'literal')");
    batch.set_consistency(Consistency::One);
    session
        .batch(&batch, ((3, 1, "batched"), (3, 2, "batched"), ()))
        .await?;

    // A hand-written value type inside a derived row, borrowing the text.
    let result = session
        .query_unpaged("SELECT n, label FROM compat.entries WHERE id = 2", &[])
        .await?
        .into_rows_result()?;
    let labelled = result.single_row::<Labelled>()?;
    assert_eq!((labelled.n, labelled.label), (0, Label("two")));
    // The type check refuses a column of another type.
    let swapped = session
        .query_unpaged("SELECT label, n FROM compat.entries WHERE id = 2", &[])
        .await?
        .into_rows_result()?;
    assert!(swapped.single_row::<(i32, Label)>().is_err());

    // A paged read as a typed stream: 10 rows in pages of 3.
    let mut select = Statement::new("SELECT id, n, label FROM compat.entries WHERE id = ?");
    select.set_page_size(3);
    let mut rows = session
        .query_iter(select.clone(), (1,))
        .await?
        .rows_stream::<(i32, i32, String)>()?;
    let mut seen = Vec::new();
    while let Some((id, n, label)) = rows.try_next().await? {
        assert_eq!((id, label), (1, format!("row {n}")));
        seen.push(n);
    }
    assert_eq!(seen, (0..10).collect::<Vec<_>>());

    // The columns of a pager, before any row is read (a shell printing a
    // header): without values the first page is fetched by `query_iter`,
    // with values the preparation tells them.
    for pager in [
        session
            .query_iter("SELECT id, n, label FROM compat.entries", &[])
            .await?,
        session.query_iter(select.clone(), (1,)).await?,
    ] {
        let names: Vec<&str> = pager.column_specs().iter().map(|c| c.name()).collect();
        assert_eq!(names, ["id", "n", "label"]);
        let rows: Vec<(i32, i32, String)> = pager
            .rows_stream::<(i32, i32, String)>()?
            .try_collect()
            .await?;
        assert!(rows.len() >= 10);
    }

    // The same read paged by hand.
    let mut state = PagingState::start();
    let mut by_hand = Vec::new();
    let mut pages = 0;
    loop {
        let (page, next_page) = session
            .query_single_page(select.clone(), (1,), state)
            .await?;
        pages += 1;
        let page = page.into_rows_result()?;
        assert!(page.rows_num() <= 3, "a page holds at most 3 rows");
        for row in page.rows::<Entry>()? {
            by_hand.push(row?.n);
        }
        match next_page.into_paging_control_flow() {
            ControlFlow::Break(()) => break,
            ControlFlow::Continue(next_state) => state = next_state,
        }
        assert!(pages < 100, "paging never ends");
    }
    assert_eq!(by_hand, seen);
    assert!(pages >= 4, "10 rows in pages of 3 took {pages} page(s)");

    // Results as rows: single_row, rows, first_row, maybe_first_row.
    let result = session
        .query_unpaged("SELECT id, n, label FROM compat.entries WHERE id = ?", (2,))
        .await?
        .into_rows_result()?;
    assert_eq!(
        result.single_row::<Entry>()?,
        Entry {
            id: 2,
            n: 0,
            label: "two".to_owned()
        }
    );
    let batched = session
        .query_unpaged("SELECT id, n, label FROM compat.entries WHERE id = 3", &[])
        .await?
        .into_rows_result()?;
    assert_eq!(batched.rows_num(), 3);
    let labels = batched
        .rows::<Row>()?
        .map(|row| row.map(|row| text(&row, 2)))
        .collect::<Result<Vec<_>, _>>()?;
    assert_eq!(labels, ["literal", "batched", "batched"]);
    let (id, n, label) = batched.first_row::<(i32, i32, String)>()?;
    assert_eq!((id, n, label.as_str()), (3, 0, "literal"));
    assert!(batched.single_row::<(i32, i32, String)>().is_err());

    let none = session
        .query_unpaged("SELECT id FROM compat.entries WHERE id = 99", &[])
        .await?
        .into_rows_result()?;
    assert_eq!(none.maybe_first_row::<(i32,)>()?, None);
    assert!(none.first_row::<(i32,)>().is_err());
    let write = session
        .query_unpaged(
            "INSERT INTO compat.entries (id, n, label) VALUES (4, 0, 'w')",
            &[],
        )
        .await?;
    assert!(write.into_rows_result().is_err(), "an INSERT has no rows");

    // An execution profile handle: its timeout, not the session's, bounds
    // a statement that carries it.
    let impatient = ExecutionProfile::builder()
        .consistency(Consistency::One)
        .serial_consistency(Some(SerialConsistency::LocalSerial))
        .request_timeout(Some(Duration::from_millis(100)))
        .build()
        .into_handle_with_label("impatient".to_owned());
    // The same handle as another session's default profile.
    let impatient_session: Session = SessionBuilder::new()
        .known_node(&node)
        .default_execution_profile_handle(impatient.clone())
        .build()
        .await?;
    let mut slow_read = Statement::new("SELECT id, n, label FROM compat.entries WHERE id = 2");
    slow_read.set_execution_profile_handle(Some(impatient.clone()));
    slow_read.set_is_idempotent(true);
    cluster
        .set_faults(0, Faults::none().with_latency(Duration::from_millis(1000)))
        .await
        .expect("latency injected");
    let started = Instant::now();
    let timed_out = session.query_unpaged(slow_read.clone(), &[]).await;
    assert!(timed_out.is_err(), "the profile's 100 ms timeout applies");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "gave up after {:?}, not at the profile's timeout",
        started.elapsed()
    );
    // Without the profile the session's own timeout (12 s) lets it finish.
    slow_read.set_execution_profile_handle(None);
    let slow = session
        .query_unpaged(slow_read, &[])
        .await?
        .into_rows_result()?;
    assert_eq!(slow.rows_num(), 1);

    let started = Instant::now();
    let timed_out = impatient_session
        .query_unpaged("SELECT id FROM compat.entries WHERE id = 2", &[])
        .await;
    assert!(timed_out.is_err(), "the default profile's timeout applies");
    assert!(started.elapsed() < Duration::from_millis(900));

    cluster
        .set_faults(0, Faults::none())
        .await
        .expect("latency removed");
    Ok(())
}
