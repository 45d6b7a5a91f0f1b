//! The driver's tokens equal the server's: for a thousand random keys of
//! each of several partition-key types, `SELECT token(k), k` from Cassandra
//! against `PreparedStatement::token` (the code path the session routes by),
//! and against `murmur3_token` over the serialized key.

use std::sync::Arc;

use scylla_cql::token::{murmur3_token, partition_key::serialize_partition_key, Token};
use scylla_cql::types::{CqlValue, SerializeRow};
use scylla_driver::{PreparedStatement, Session};
use uuid::Uuid;

use crate::{create_keyspace, ddl, drop_keyspace, require, session};

const KEYS: usize = 1000;

fn random_text(rng: &mut fastrand::Rng) -> String {
    const ALPHABET: &[char] = &[
        'a', 'Z', '0', ' ', '-', 'ą', 'ł', 'ß', 'é', '日', '本', '語', '🦀', '€', '\u{7f}',
    ];
    let len = rng.usize(1..30);
    (0..len)
        .map(|_| ALPHABET[rng.usize(..ALPHABET.len())])
        .collect()
}

/// Inserts `keys` with `insert` (at most 32 at a time).
async fn insert_all<V>(session: &Session, insert: &PreparedStatement, keys: Vec<V>)
where
    V: SerializeRow + Send + Sync + 'static,
{
    let keys = Arc::new(keys);
    let mut tasks = Vec::new();
    for w in 0..32 {
        let (session, insert, keys) = (session.clone(), insert.clone(), keys.clone());
        tasks.push(tokio::spawn(async move {
            for k in keys.iter().skip(w).step_by(32) {
                session.execute_unpaged(&insert, k).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// The server's `(token, key columns...)` of every row of `table`.
async fn server_tokens(
    session: &Session,
    ks: &str,
    table: &str,
    key: &str,
) -> Vec<(i64, Vec<CqlValue>)> {
    let mut rows = session
        .query_iter(format!("SELECT token({key}), {key} FROM {ks}.{table}"), ())
        .await
        .unwrap()
        .rows_stream::<scylla_cql::types::Row>()
        .unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().await {
        let mut cols = row.unwrap().columns.into_iter().map(Option::unwrap);
        let Some(CqlValue::BigInt(t)) = cols.next() else {
            panic!("token() is not a bigint");
        };
        out.push((t, cols.collect()));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real Cassandra in SCYLLA_URI: scripts/cassandra-suite.sh"]
async fn driver_tokens_equal_the_servers() {
    let uri = require!("SCYLLA_URI");
    let session = session(&uri).await;
    let ks = create_keyspace(&session, "tokens", 1).await;
    let mut rng = fastrand::Rng::with_seed(
        std::env::var("TOKEN_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x5eed),
    );

    for (table, typ) in [
        ("t_int", "int"),
        ("t_bigint", "bigint"),
        ("t_text", "text"),
        ("t_blob", "blob"),
        ("t_uuid", "uuid"),
    ] {
        ddl(
            &session,
            &format!("CREATE TABLE {ks}.{table} (k {typ} PRIMARY KEY)"),
        )
        .await;
    }
    ddl(
        &session,
        &format!("CREATE TABLE {ks}.t_comp (a int, b text, PRIMARY KEY ((a, b)))"),
    )
    .await;

    let mut checked = 0usize;
    // One table at a time: insert, read the server's tokens, compare.
    macro_rules! check_single {
        ($table:expr, $keys:expr, $pat:path) => {{
            let keys = $keys;
            let insert = session
                .prepare(format!("INSERT INTO {ks}.{} (k) VALUES (?)", $table))
                .await
                .unwrap();
            assert_eq!(insert.pk_indexes(), &[0]);
            insert_all(
                &session,
                &insert,
                keys.iter().map(|k| (k.clone(),)).collect(),
            )
            .await;
            let rows = server_tokens(&session, &ks, $table, "k").await;
            let distinct: std::collections::HashSet<_> = keys.iter().collect();
            assert_eq!(rows.len(), distinct.len(), "{}", $table);
            for (token, cols) in rows {
                let $pat(k) = &cols[0] else {
                    panic!("{}: {:?}", $table, cols)
                };
                let ours = insert.token((k.clone(),)).unwrap();
                assert_eq!(ours, Some(Token(token)), "{}: key {:?}", $table, k);
                checked += 1;
            }
        }};
    }
    check_single!(
        "t_int",
        (0..KEYS).map(|_| rng.i32(..)).collect::<Vec<_>>(),
        CqlValue::Int
    );
    check_single!(
        "t_bigint",
        (0..KEYS).map(|_| rng.i64(..)).collect::<Vec<_>>(),
        CqlValue::BigInt
    );
    check_single!(
        "t_text",
        (0..KEYS).map(|_| random_text(&mut rng)).collect::<Vec<_>>(),
        CqlValue::Text
    );
    check_single!(
        "t_blob",
        (0..KEYS)
            .map(|_| (0..rng.usize(1..40))
                .map(|_| rng.u8(..))
                .collect::<Vec<u8>>())
            .collect::<Vec<_>>(),
        CqlValue::Blob
    );
    check_single!(
        "t_uuid",
        (0..KEYS)
            .map(|_| Uuid::from_u128(rng.u128(..)))
            .collect::<Vec<_>>(),
        CqlValue::Uuid
    );

    // Composite key (a, b); the statement binds it in the other order, so
    // pk_indexes is not the identity.
    let insert = session
        .prepare(format!("INSERT INTO {ks}.t_comp (b, a) VALUES (?, ?)"))
        .await
        .unwrap();
    assert_eq!(insert.pk_indexes(), &[1, 0]);
    let keys: Vec<(String, i32)> = (0..KEYS)
        .map(|_| (random_text(&mut rng), rng.i32(-5..5)))
        .collect();
    insert_all(&session, &insert, keys.clone()).await;
    let rows = server_tokens(&session, &ks, "t_comp", "a, b").await;
    let distinct: std::collections::HashSet<_> = keys.iter().collect();
    assert_eq!(rows.len(), distinct.len());
    for (token, cols) in rows {
        let (CqlValue::Int(a), CqlValue::Text(b)) = (&cols[0], &cols[1]) else {
            panic!("{cols:?}")
        };
        assert_eq!(
            insert.token((b.as_str(), *a)).unwrap(),
            Some(Token(token)),
            "key ({a}, {b:?})"
        );
        // The same by hand: murmur3 over the serialized composite key.
        let key = serialize_partition_key(&[&a.to_be_bytes(), b.as_bytes()]).unwrap();
        assert_eq!(murmur3_token(&key), Token(token));
        checked += 1;
    }
    // A statement that does not bind the whole key has no token.
    let partial = session
        .prepare(format!(
            "SELECT * FROM {ks}.t_comp WHERE a = ? ALLOW FILTERING"
        ))
        .await
        .unwrap();
    assert_eq!(partial.token((1,)).unwrap(), None);
    assert!(checked >= 5 * KEYS, "checked {checked}");
    drop_keyspace(&session, &ks).await;
}
