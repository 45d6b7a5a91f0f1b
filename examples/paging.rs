//! Paging: reading a large result a page at a time.
//!
//! - `query_iter` / `execute_iter`: a stream of typed rows; the driver
//!   fetches the next page when the current one is used up.
//! - Manual paging with `execute_single_page`: one page per call, and the
//!   paging state that says where the next page starts. That state is what
//!   an API hands its client as a "next page" token: here it is saved as hex
//!   and a later request resumes from it.
//!
//! ```sh
//! cargo run --example paging
//! SCYLLA_URI=127.0.0.1:9042 cargo run --example paging
//! ```

#[path = "common/mod.rs"]
mod common;

use bytes::Bytes;
use scylla_driver::statement::Statement;
use scylla_driver::SessionBuilder;

/// Readings of the one sensor this example reads back.
const READINGS: i32 = 95;
/// Rows per page.
const PAGE: i32 = 20;

#[tokio::main]
async fn main() -> Result<(), common::BoxError> {
    // SCYLLA_URI, or a test cluster started in this process.
    let cluster = common::cluster().await?;
    let session = SessionBuilder::new()
        .known_node(&cluster.uri)
        .build()
        .await?;
    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS examples WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 1}",
            (),
        )
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS examples.readings \
             (sensor int, seq int, celsius double, PRIMARY KEY (sensor, seq))",
            (),
        )
        .await?;
    let insert = session
        .prepare("INSERT INTO examples.readings (sensor, seq, celsius) VALUES (?, ?, ?)")
        .await?;
    for seq in 0..READINGS {
        let celsius = 20.0 + f64::from(seq % 10) / 10.0;
        session.execute_unpaged(&insert, (7, seq, celsius)).await?;
    }

    // 1. A stream over an unprepared statement: pages of PAGE rows, fetched
    // as the loop consumes them.
    let mut rows = session
        .query_iter(
            Statement::new("SELECT seq, celsius FROM examples.readings WHERE sensor = 7")
                .with_page_size(PAGE),
            (),
        )
        .await?
        .rows_stream::<(i32, f64)>()?;
    let (mut n, mut sum) = (0, 0.0);
    while let Some(row) = rows.next().await {
        let (_, celsius) = row?;
        n += 1;
        sum += celsius;
    }
    println!(
        "query_iter: {n} rows in {} pages, mean {:.2} C",
        rows.pages_fetched(),
        sum / f64::from(n)
    );

    // 2. The same with a prepared statement and a bound value: the page size
    // is set on the prepared statement.
    let by_sensor = session
        .prepare(
            Statement::new("SELECT seq, celsius FROM examples.readings WHERE sensor = ?")
                .with_page_size(PAGE),
        )
        .await?;
    let mut rows = session
        .execute_iter(&by_sensor, (7,))
        .await?
        .rows_stream::<(i32, f64)>()?;
    let mut last_seq = -1;
    while let Some(row) = rows.next().await {
        let (seq, _) = row?;
        // Rows of a partition come in clustering order, across pages too.
        if seq <= last_seq {
            return Err(format!("seq {seq} after {last_seq}").into());
        }
        last_seq = seq;
    }
    println!(
        "execute_iter: rows up to seq {last_seq} in {} pages",
        rows.pages_fetched()
    );

    // 3. Manual paging: the first page, and a token for the next one.
    let (page, next) = session.execute_single_page(&by_sensor, (7,), None).await?;
    println!(
        "page 1: {} rows, next-page token {}",
        page.rows_count(),
        next.as_deref().map(hex).unwrap_or_else(|| "none".into())
    );
    let mut token = next.as_deref().map(hex);
    // ... later, another request comes back with the token: resume from it.
    // (Bounded: at most one request per possible page.)
    let mut pages = 1;
    for _ in 0..=READINGS / PAGE {
        let Some(t) = token.take() else { break };
        let state = Bytes::from(unhex(&t).ok_or("a malformed page token")?);
        let (page, next) = session
            .execute_single_page(&by_sensor, (7,), Some(state))
            .await?;
        pages += 1;
        let seqs: Vec<(i32, f64)> = page.into_rows()?;
        println!(
            "page {pages}: {} rows (seq {}..={})",
            seqs.len(),
            seqs.first().map_or(-1, |r| r.0),
            seqs.last().map_or(-1, |r| r.0)
        );
        token = next.as_deref().map(hex);
    }
    let want = (READINGS + PAGE - 1) / PAGE;
    if pages != want {
        return Err(format!("{pages} pages, expected {want}").into());
    }
    Ok(())
}

/// `b` as lower-case hex (a paging state is opaque bytes: hex makes it a
/// token that fits in a URL).
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The bytes of a hex token (`None` if it is not hex).
fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
