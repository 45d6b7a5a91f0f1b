//! User-defined types and vector search on the in-process test cluster,
//! through the driver: derived structs written and read back as UDT values
//! (prepared and unprepared, frozen, non-frozen, nested, in collections),
//! the schema rows drivers read, and `ORDER BY v ANN OF ? LIMIT k` with
//! Cassandra's errors.
#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use scylla_cql::frame::response::DbError;
use scylla_driver::errors::{BadQuery, PrepareError, RequestAttemptError};
use scylla_driver::statement::Statement;
use scylla_driver::{
    DeserializeRow, DeserializeValue, ExecutionError, SerializeRow, SerializeValue,
};

use crate::common;
use common::{cluster_and_session, create_keyspace};

#[derive(Debug, Clone, PartialEq, SerializeValue, DeserializeValue)]
struct Point {
    x: i32,
    y: i32,
}

#[derive(Debug, Clone, PartialEq, SerializeValue, DeserializeValue)]
struct Shape {
    name: String,
    corners: Vec<Point>,
    #[scylla(rename = "centre")]
    center: Option<Point>,
}

#[derive(Debug, Clone, PartialEq, SerializeRow, DeserializeRow)]
struct Drawing {
    id: i32,
    shape: Option<Shape>,
    loose: Option<Point>,
    named: Option<BTreeMap<String, Point>>,
}

fn point() -> impl Strategy<Value = Point> {
    (any::<i32>(), any::<i32>()).prop_map(|(x, y)| Point { x, y })
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        "[a-z ]{0,12}",
        proptest::collection::vec(point(), 0..4),
        proptest::option::of(point()),
    )
        .prop_map(|(name, corners, center)| Shape {
            name,
            corners,
            center,
        })
}

fn drawing() -> impl Strategy<Value = Drawing> {
    (
        proptest::option::of(shape()),
        proptest::option::of(point()),
        proptest::option::of(proptest::collection::btree_map("[a-z]{1,6}", point(), 1..4)),
    )
        .prop_map(|(shape, loose, named)| Drawing {
            id: 0,
            shape,
            loose,
            named,
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derived_udts_round_trip_prepared_and_unprepared() {
    let (_cluster, session) = cluster_and_session(2, 2, |b| b).await;
    create_keyspace(&session, "udt", 1).await;
    for ddl in [
        "CREATE TYPE udt.point (x int, y int)",
        "CREATE TYPE IF NOT EXISTS udt.shape (name text, corners list<frozen<point>>, centre frozen<point>)",
        "CREATE TABLE udt.drawings (id int PRIMARY KEY, shape frozen<shape>, loose point, \
         named map<text, frozen<point>>)",
    ] {
        session.query_unpaged(ddl, ()).await.unwrap();
    }
    let insert = session
        .prepare("INSERT INTO udt.drawings (id, shape, loose, named) VALUES (:id, :shape, :loose, :named)")
        .await
        .unwrap();
    let select = session
        .prepare("SELECT id, shape, loose, named FROM udt.drawings WHERE id = ?")
        .await
        .unwrap();

    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(48));
    let cases: Vec<Drawing> = (0..48)
        .map(|_| drawing().new_tree(&mut runner).unwrap().current())
        .collect();
    for (i, mut d) in cases.into_iter().enumerate() {
        d.id = i as i32;
        // Even ids prepared, odd ones unprepared (the driver prepares to learn
        // the UDT types, then binds by name).
        if i % 2 == 0 {
            session.execute_unpaged(&insert, d.clone()).await.unwrap();
        } else {
            session
                .query_unpaged(
                    "INSERT INTO udt.drawings (id, shape, loose, named) VALUES (:id, :shape, :loose, :named)",
                    d.clone(),
                )
                .await
                .unwrap();
        }
        let back: Drawing = session
            .execute_unpaged(&select, (d.id,))
            .await
            .unwrap()
            .single_row()
            .unwrap();
        assert_eq!(back, d);
    }

    // The result metadata carries the UDT: keyspace, name, fields.
    let r = session
        .query_unpaged("SELECT shape FROM udt.drawings WHERE id = 0", ())
        .await
        .unwrap();
    let t = r.columns()[0].typ.to_string();
    assert_eq!(t, "udt.shape", "{:?}", r.columns()[0].typ);

    // A literal UDT value, read into the derived struct.
    session
        .query_unpaged(
            "INSERT INTO udt.drawings (id, loose) VALUES (1000, {x: 3, y: -4})",
            (),
        )
        .await
        .unwrap();
    let (p,): (Option<Point>,) = session
        .query_unpaged("SELECT loose FROM udt.drawings WHERE id = 1000", ())
        .await
        .unwrap()
        .single_row()
        .unwrap();
    assert_eq!(p, Some(Point { x: 3, y: -4 }));

    // Drivers' schema metadata: system_schema.types and .columns.
    let types: Vec<(String, Vec<String>, Vec<String>)> = session
        .query_unpaged(
            "SELECT type_name, field_names, field_types FROM system_schema.types \
             WHERE keyspace_name = 'udt'",
            (),
        )
        .await
        .unwrap()
        .into_rows()
        .unwrap();
    assert_eq!(
        types,
        vec![
            (
                "point".into(),
                vec!["x".into(), "y".into()],
                vec!["int".into(), "int".into()]
            ),
            (
                "shape".into(),
                vec!["name".into(), "corners".into(), "centre".into()],
                vec![
                    "text".into(),
                    "list<frozen<point>>".into(),
                    "frozen<point>".into()
                ]
            ),
        ]
    );
    let columns: Vec<(String, String)> = session
        .query_unpaged(
            "SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = 'udt'",
            (),
        )
        .await
        .unwrap()
        .into_rows()
        .unwrap();
    assert!(
        columns.contains(&("shape".into(), "frozen<shape>".into())),
        "{columns:?}"
    );
    assert!(
        columns.contains(&("loose".into(), "point".into())),
        "{columns:?}"
    );

    // A type in use cannot be dropped.
    let e = session
        .query_unpaged("DROP TYPE udt.point", ())
        .await
        .unwrap_err();
    assert_eq!(e.db_error(), Some(&DbError::Invalid), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ann_queries_return_the_nearest_vectors_first() {
    let (_cluster, session) = cluster_and_session(2, 2, |b| b).await;
    create_keyspace(&session, "vec", 1).await;
    session
        .query_unpaged(
            "CREATE TABLE vec.items (id int PRIMARY KEY, v vector<float, 4>)",
            (),
        )
        .await
        .unwrap();
    let insert = session
        .prepare("INSERT INTO vec.items (id, v) VALUES (?, ?)")
        .await
        .unwrap();
    // Deterministic pseudo-random vectors.
    let mut rng = fastrand::Rng::with_seed(7);
    let vectors: Vec<Vec<f32>> = (0..200)
        .map(|_| (0..4).map(|_| rng.f32() * 2.0 - 1.0).collect())
        .collect();
    for (id, v) in vectors.iter().enumerate() {
        session
            .execute_unpaged(&insert, (id as i32, v.clone()))
            .await
            .unwrap();
    }
    let query = "SELECT id, v FROM vec.items ORDER BY v ANN OF ? LIMIT 5";
    // Without an index: Cassandra's error, at PREPARE.
    let e = session.prepare(query).await.unwrap_err();
    assert!(
        matches!(&e, PrepareError::AllAttemptsFailed {
            first_attempt: RequestAttemptError::DbError(DbError::Invalid, message),
        } if message.contains("ANN ordering by vector requires the column to be indexed")),
        "{e:?}"
    );
    session
        .query_unpaged(
            "CREATE CUSTOM INDEX ON vec.items (v) USING 'sai' \
             WITH OPTIONS = {'similarity_function': 'euclidean'}",
            (),
        )
        .await
        .unwrap();
    let ann = session.prepare(query).await.unwrap();
    for probe in vectors.iter().step_by(37) {
        let got: Vec<(i32, Vec<f32>)> = session
            .execute_unpaged(&ann, (probe.clone(),))
            .await
            .unwrap()
            .into_rows()
            .unwrap();
        // The five nearest by euclidean distance, computed here.
        let d2 = |v: &[f32]| -> f32 { v.iter().zip(probe).map(|(a, b)| (a - b) * (a - b)).sum() };
        let mut want: Vec<(i32, f32)> = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| (i as i32, d2(v)))
            .collect();
        want.sort_by(|a, b| a.1.total_cmp(&b.1));
        let want_ids: Vec<i32> = want.iter().take(5).map(|w| w.0).collect();
        let got_ids: Vec<i32> = got.iter().map(|g| g.0).collect();
        assert_eq!(got_ids, want_ids);
        // The vectors come back as written.
        assert_eq!(&got[0].1, probe);
    }
    // Without LIMIT: Cassandra's error.
    let e = session
        .query_unpaged(
            Statement::new("SELECT id FROM vec.items ORDER BY v ANN OF [0.1, 0.2, 0.3, 0.4]"),
            (),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            &e,
            ExecutionError::LastAttemptError(RequestAttemptError::DbError(DbError::Invalid, _))
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains(
            "Use of ANN OF in an ORDER BY clause requires a LIMIT that is not greater than 1000. \
             LIMIT was NO LIMIT"
        ),
        "{e}"
    );
    // A query vector of the wrong dimension is refused by the driver.
    let e = session
        .execute_unpaged(&ann, (vec![1.0f32, 2.0],))
        .await
        .unwrap_err();
    assert!(
        matches!(e, ExecutionError::BadQuery(BadQuery::SerializationError(_))),
        "{e}"
    );
}
