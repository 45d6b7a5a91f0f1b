//! A connection storm and how the driver rides it, with no cluster at hand.
//!
//! ```text
//! cargo run --release --example storm_reconnect                 # every variant
//! cargo run --release --example storm_reconnect -- baseline lockstep --json
//! cargo run --release --example storm_reconnect -- --nodes 10.0.0.1:9042,10.0.0.2:9042 --duration 120
//! ```
//!
//! By default it starts the in-process test cluster (3 nodes, ScyllaDB-like
//! sharding, handshake admission of 8 per shard with a modelled CPU cost),
//! connects many client sessions at once and measures:
//!
//! - phase 1, cold start: connection attempts needed to cover every shard of
//!   every node against the ideal (sessions x nodes x shards), from the
//!   cluster's accounting and the driver's metrics; the time until every
//!   shard is covered; the peak of handshakes waiting at a node;
//! - phase 2, a node restart under a fixed-rate read/write workload: failed
//!   requests, latency before, during and after, connection attempts during
//!   the reconnect, time until every shard is covered again, peak handshakes.
//!
//! The variants run one after another, each on a fresh cluster:
//! `baseline` (shard-aware port, full-jitter backoff, spread reconnects),
//! `no-shard-aware` (regular port only), `nat` (a NAT rewrites source ports
//! at every node), `lockstep` (no jitter, no spread: the naive driver).
//!
//! Outputs: a live progress line on stderr, the summary tables on stdout (or
//! JSON with `--json`), and in `--out DIR` (default `target/storm/`) the
//! timeline `storm_timeline.csv` and the chart `storm.svg`.
//!
//! Waiting for coverage is bounded (`--coverage-timeout SECS`, default 5):
//! without the shard-aware port, many sessions take long to cover every
//! shard, and the table then says how far they got.
//!
//! Options: `--sessions N`, `--shards N`, `--rate N` (requests/s in total),
//! `--down-ms N`, `--rf N`, `--no-shard-aware` (with `--nodes`), `--tls`
//! (the test cluster's TLS listeners, the driver over TLS: the same variants,
//! each connection now also paying a real TLS handshake on both sides).

mod progress;
mod real;
mod report;
mod scenario;
mod svg;
mod workload;

use std::path::PathBuf;
use std::time::Duration;

use scylla_testbed::HandshakeCost;

use crate::progress::Progress;
use crate::scenario::{Params, Variant, VARIANTS};

struct Args {
    variants: Vec<Variant>,
    json: bool,
    out: PathBuf,
    nodes: Option<Vec<String>>,
    duration: Duration,
    shard_aware_port: bool,
    params: Params,
}

fn usage() -> String {
    let names: Vec<&str> = VARIANTS.iter().map(|v| v.name).collect();
    format!(
        "usage: storm_reconnect [VARIANT...] [--json] [--out DIR] [--sessions N] [--shards N] \
         [--rate N] [--down-ms N] [--coverage-timeout SECS] [--rf N] [--nodes host:port,...] [--duration SECS] [--no-shard-aware] [--tls]\n\
         variants: {} (default: all)",
        names.join(", ")
    )
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        variants: Vec::new(),
        json: false,
        out: PathBuf::from("target/storm"),
        nodes: None,
        duration: Duration::from_secs(60),
        shard_aware_port: true,
        params: Params {
            nodes: 3,
            shards: 16,
            sessions: 20,
            rate: 2000,
            rf: 3,
            cost: HandshakeCost::Spin(Duration::from_millis(1)),
            cpu_concurrency: 8,
            shed_after: Duration::from_secs(1),
            steady: Duration::from_millis(1000),
            down: Duration::from_millis(1200),
            after: Duration::from_millis(1000),
            coverage_timeout: Duration::from_secs(5),
            backoff_base: Duration::from_millis(100),
            backoff_cap: Duration::from_secs(2),
            reconnect_spread: Duration::from_secs(1),
            request_timeout: Duration::from_secs(2),
            tls: false,
        },
    };
    let mut it = std::env::args().skip(1);
    let num = |v: Option<String>, what: &str| -> Result<u64, String> {
        v.ok_or_else(|| format!("{what} needs a value"))?
            .parse::<u64>()
            .map_err(|e| format!("{what}: {e}"))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--json" => a.json = true,
            "--out" => a.out = PathBuf::from(it.next().ok_or("--out needs a directory")?),
            "--nodes" => {
                let v = it.next().ok_or("--nodes needs host:port[,...]")?;
                a.nodes = Some(
                    v.split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect(),
                );
            }
            "--duration" => a.duration = Duration::from_secs(num(it.next(), "--duration")?),
            "--sessions" => {
                a.params.sessions = num(it.next(), "--sessions")?.clamp(1, 500) as usize
            }
            "--shards" => a.params.shards = num(it.next(), "--shards")?.clamp(1, 256) as u16,
            "--rate" => a.params.rate = num(it.next(), "--rate")?.clamp(1, 1_000_000) as u32,
            "--coverage-timeout" => {
                a.params.coverage_timeout =
                    Duration::from_secs(num(it.next(), "--coverage-timeout")?.max(1))
            }
            "--down-ms" => a.params.down = Duration::from_millis(num(it.next(), "--down-ms")?),
            "--rf" => a.params.rf = num(it.next(), "--rf")?.clamp(1, 3) as usize,
            "--no-shard-aware" => a.shard_aware_port = false,
            "--tls" => a.params.tls = true,
            "-h" | "--help" => return Err(usage()),
            name => match VARIANTS.iter().find(|v| v.name == name) {
                Some(v) => a.variants.push(*v),
                None => return Err(format!("unknown argument {name:?}\n{}", usage())),
            },
        }
    }
    if a.variants.is_empty() {
        a.variants = VARIANTS.to_vec();
    }
    Ok(a)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if args.nodes.is_some() && args.params.tls {
        eprintln!("--tls runs against the in-process test cluster only (not with --nodes)");
        std::process::exit(2);
    }
    let progress = Progress::new();
    let mut results = Vec::new();
    if let Some(nodes) = &args.nodes {
        match real::run(
            nodes,
            &args.params,
            args.shard_aware_port,
            args.duration,
            &progress,
        )
        .await
        {
            Ok(r) => results.push(r),
            Err(e) => {
                progress.finish();
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    } else {
        for v in &args.variants {
            match scenario::run(*v, &args.params, &progress).await {
                Ok(r) => {
                    progress.finish();
                    eprintln!(
                        "{}: done in {:.1} s (cold start covered in {} ms, restart covered in {} ms)",
                        v.name,
                        r.wall_ms as f64 / 1000.0,
                        r.cold.time_ms,
                        r.restart.time_ms
                    );
                    results.push(r);
                }
                Err(e) => {
                    progress.finish();
                    eprintln!("{}: error: {e}", v.name);
                    std::process::exit(1);
                }
            }
        }
    }
    progress.finish();
    if args.json {
        print!("{}", report::json(&args.params, &results));
    } else {
        print!("{}", report::table(&args.params, &results));
    }
    let written = std::fs::create_dir_all(&args.out).and_then(|()| {
        std::fs::write(args.out.join("storm_timeline.csv"), report::csv(&results))?;
        std::fs::write(
            args.out.join("storm.svg"),
            svg::chart(&results, scenario::RESTARTED),
        )
    });
    match written {
        Ok(()) => eprintln!(
            "wrote {} and {}",
            args.out.join("storm_timeline.csv").display(),
            args.out.join("storm.svg").display()
        ),
        Err(e) => eprintln!("could not write to {}: {e}", args.out.display()),
    }
}
