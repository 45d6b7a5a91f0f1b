//! The driver's metrics in Prometheus: installs `metrics-exporter-prometheus`
//! (its HTTP listener) as the process's `metrics` recorder, runs a workload
//! (prepared INSERT and SELECT at some concurrency), then scrapes its own
//! endpoint once, prints the driver's lines and exits.
//!
//! ```sh
//! cargo run --example prometheus -- [--listen 127.0.0.1:9464] [--seconds 10] [--concurrency 32]
//! ```
//!
//! With `SCYLLA_URI` set (`host:port`) the workload runs against that
//! cluster; without it, against an in-process test cluster (2 nodes x 4
//! shards, on loopback). While it runs, `curl http://127.0.0.1:9464/metrics`
//! shows the same numbers live.

#[path = "common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use scylla_driver::{Session, SessionBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Histogram buckets of the driver's `_seconds` metrics.
const BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 1.0, 10.0,
];

/// Runs a workload through the driver with a Prometheus exporter installed,
/// then prints the driver's metrics as scraped from its own endpoint.
#[derive(Debug, clap::Parser)]
#[command(name = "prometheus")]
struct Args {
    /// Address of the exporter's HTTP listener.
    #[arg(long, default_value = "127.0.0.1:9464")]
    listen: SocketAddr,
    /// How long the workload runs.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Requests in flight.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("prometheus: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), common::BoxError> {
    // The recorder first, so that it sees the session's first connections.
    // Histograms as Prometheus histograms (buckets), not summaries, so that
    // quantiles aggregate over instances: 100 µs .. 10 s.
    PrometheusBuilder::new()
        .with_http_listener(args.listen)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &BUCKETS)?
        .install()?;
    println!("exporter listening on http://{}/metrics", args.listen);

    // SCYLLA_URI, or a test cluster started in this process (kept alive
    // until the end).
    let cluster = common::cluster_of(2, 4).await?;
    let session = Arc::new(
        SessionBuilder::new()
            .known_node(&cluster.uri)
            .build()
            .await?,
    );
    session.wait_for_all_shards(Duration::from_secs(20)).await;
    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS prometheus_example WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 1}",
            (),
        )
        .await?;
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS prometheus_example.kv (k bigint PRIMARY KEY, v text)",
            (),
        )
        .await?;

    let requests = workload(&session, &args).await?;
    println!(
        "workload: {requests} requests in {} s at concurrency {}",
        args.seconds, args.concurrency
    );

    let body = scrape(args.listen).await?;
    println!(
        "--- scrape of http://{}/metrics (driver lines) ---",
        args.listen
    );
    for line in body.lines().filter(|l| l.contains("scylla_driver_")) {
        println!("{line}");
    }
    Ok(())
}

/// Prepared INSERT then SELECT of a key, by `concurrency` tasks, for
/// `seconds`. Returns the number of requests.
async fn workload(session: &Arc<Session>, args: &Args) -> Result<u64, common::BoxError> {
    let insert = session
        .prepare("INSERT INTO prometheus_example.kv (k, v) VALUES (?, ?)")
        .await?;
    let select = session
        .prepare("SELECT v FROM prometheus_example.kv WHERE k = ?")
        .await?;
    let until = Instant::now() + Duration::from_secs(args.seconds);
    let done = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..args.concurrency as i64 {
        let (session, insert, select, done) = (
            session.clone(),
            insert.clone(),
            select.clone(),
            done.clone(),
        );
        tasks.spawn(async move {
            let mut k = task << 32;
            while Instant::now() < until {
                k += 1;
                // Errors are counted by the driver (outcome="error").
                let _ = session.execute_unpaged(&insert, (k, "value")).await;
                let _ = session.execute_unpaged(&select, (k,)).await;
                done.fetch_add(2, Ordering::Relaxed);
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    Ok(done.load(Ordering::Relaxed))
}

/// One plain HTTP/1.0 GET of `/metrics` on `addr` (1.0: the body comes
/// whole, not chunked, and the server closes); the body.
async fn scrape(addr: SocketAddr) -> Result<String, common::BoxError> {
    let mut stream =
        tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
            .await??;
    stream
        .write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await??;
    let response = String::from_utf8(response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or("malformed HTTP response")?;
    if !head.starts_with("HTTP/1.") || !head.contains(" 200 ") {
        return Err(format!("scrape failed: {}", head.lines().next().unwrap_or("")).into());
    }
    Ok(body.to_owned())
}
